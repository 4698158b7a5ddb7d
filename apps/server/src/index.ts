export * from './config/settings.js';
export * from './server.js';
export * from './container.js';
export * from './logger.js';
export { TOKENS } from './tokens.js';
export { openKeyProvider } from './signing/key-provider.js';
export * from './signal-source/reference-source.js';
export { DEMO_APPROVER_PUBLIC_KEY_PEM } from './runtime/demo-approver.js';
export { measureRuntime, type MeasuredRuntime, type MeasureOptions } from './runtime/runtime-facts.js';
