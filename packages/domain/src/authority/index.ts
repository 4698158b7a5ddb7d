/** Authority grants: governed by maker-checker, checked by the pipeline (spec 1.8, 4.3.11). */
export * from './grants.js';
export * from './ports.js';
export * from './grant-governance.js';
