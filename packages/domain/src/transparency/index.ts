export * from './records.js';
export * from './ports.js';
export * from './checkpoint-publisher.js';
