import { Platform1763683200000 } from './0001-platform.js';
import { Identity1763683300000 } from './0002-identity.js';
import { Governance1763683400000 } from './0003-governance.js';
import { Execution1763683500000 } from './0004-execution.js';
import { Verification1763683600000 } from './0005-verification.js';

/** Every migration, in order. New features append here; an applied migration never changes. */
export const MIGRATIONS = [Platform1763683200000, Identity1763683300000, Governance1763683400000, Execution1763683500000, Verification1763683600000];
