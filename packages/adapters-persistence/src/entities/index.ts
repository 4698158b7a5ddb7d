import type { EntitySchema } from 'typeorm';
import { AuditEventEntity } from './audit-event.js';
import { HandbookLeadEntity } from './handbook-lead.js';
import { PendingChangeEntity, PolicyVersionEntity, StepUpNonceEntity } from './governance.js';
import { EXECUTION_ENTITY_SCHEMAS } from './execution.js';
import { ExternalConnectorEntity } from './external-connector.js';
import { McpServerEntity } from './mcp-server.js';
import { PublishedSigningKeyEntity } from './published-signing-key.js';
import { ConsoleSessionEntity } from './console-session.js';
import { AuthorityGrantEntity, SignalSourceEntity, SingleUseIdEntity } from './business-validation.js';

export { AuthorityGrantEntity, ConsoleSessionEntity, SignalSourceEntity, SingleUseIdEntity };
export type { AuthorityGrantRow, SignalSourceRow, SingleUseIdRow } from './business-validation.js';
export { AuditEventEntity, ExternalConnectorEntity, HandbookLeadEntity, PendingChangeEntity, PolicyVersionEntity, PublishedSigningKeyEntity, StepUpNonceEntity };
export type { ExternalConnectorRow } from './external-connector.js';
export { McpServerEntity };
export type { McpServerRow } from './mcp-server.js';
export type { AuditEventRow } from './audit-event.js';
export type { HandbookLeadRow } from './handbook-lead.js';
export type { PendingChangeRow, PolicyVersionRow, StepUpNonceRow } from './governance.js';
export type { PublishedSigningKeyRow } from './published-signing-key.js';
export * from './execution.js';

/** ORM mappings live here, at the edge; domain objects carry no decorators. */
export const ENTITY_SCHEMAS: EntitySchema<any>[] = [AuditEventEntity, HandbookLeadEntity, PendingChangeEntity, StepUpNonceEntity, PolicyVersionEntity, PublishedSigningKeyEntity, ...EXECUTION_ENTITY_SCHEMAS, ExternalConnectorEntity, SignalSourceEntity, AuthorityGrantEntity, SingleUseIdEntity, ConsoleSessionEntity, McpServerEntity];
