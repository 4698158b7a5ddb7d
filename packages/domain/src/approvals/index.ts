/** Signed approvals of overrides in profile T, and the sandbox's demo approver (spec 4.3.4-5). */
export * from './approval.js';
export * from './sandbox-approvals.js';
