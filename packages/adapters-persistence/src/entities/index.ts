import type { EntitySchema } from 'typeorm';
import { AuditEventEntity } from './audit-event.js';
import { HandbookLeadEntity } from './handbook-lead.js';
import { PendingChangeEntity, PolicyVersionEntity, StepUpNonceEntity } from './governance.js';
import { EXECUTION_ENTITY_SCHEMAS } from './execution.js';

export { AuditEventEntity, HandbookLeadEntity, PendingChangeEntity, PolicyVersionEntity, StepUpNonceEntity };
export type { AuditEventRow } from './audit-event.js';
export type { HandbookLeadRow } from './handbook-lead.js';
export type { PendingChangeRow, PolicyVersionRow, StepUpNonceRow } from './governance.js';
export * from './execution.js';

/** ORM mappings live here, at the edge; domain objects carry no decorators. */
export const ENTITY_SCHEMAS: EntitySchema<any>[] = [AuditEventEntity, HandbookLeadEntity, PendingChangeEntity, StepUpNonceEntity, PolicyVersionEntity, ...EXECUTION_ENTITY_SCHEMAS];
