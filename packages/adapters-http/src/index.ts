export * from './app.js';
export * from './route-table.js';
export * from './http-errors.js';
export * from './json/strict-json.js';
export * from './routes/operations.js';
export * from './routes/docs.js';
