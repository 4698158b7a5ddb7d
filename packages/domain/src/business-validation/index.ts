/** Business validation: signal sources asked at decision and again at release (spec 1.7, 2.3, 4.3.6, 4.3.12). */
export * from './ports.js';
export * from './sources.js';
export * from './source-governance.js';
export * from './asking.js';
