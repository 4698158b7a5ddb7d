import { Platform1763683200000 } from './0001-platform.js';
import { Identity1763683300000 } from './0002-identity.js';

/** Every migration, in order. New features append here; an applied migration never changes. */
export const MIGRATIONS = [Platform1763683200000, Identity1763683300000];
