import type { EntitySchema } from 'typeorm';
import { AuditEventEntity } from './audit-event.js';
import { HandbookLeadEntity } from './handbook-lead.js';

export { AuditEventEntity, HandbookLeadEntity };
export type { AuditEventRow } from './audit-event.js';
export type { HandbookLeadRow } from './handbook-lead.js';

/** ORM mappings live here, at the edge; domain objects carry no decorators. */
export const ENTITY_SCHEMAS: EntitySchema<any>[] = [AuditEventEntity, HandbookLeadEntity];
