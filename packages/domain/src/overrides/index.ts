/** Held transactions: a human approves or rejects a `requires_override` decision on the server. */
export * from './held-transactions.js';
