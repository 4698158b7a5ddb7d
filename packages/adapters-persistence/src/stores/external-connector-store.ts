import type { DataSource } from 'typeorm';
import type { ExternalConnectorRegistration, ExternalConnectorStore } from '@ets/domain';
import { ExternalConnectorEntity, type ExternalConnectorRow } from '../entities/external-connector.js';
import { TypeOrmRegistrationStore } from './registration-table.js';

/** Registrations in `external_connectors`, at most one active per capability. */
export class TypeOrmExternalConnectorStore extends TypeOrmRegistrationStore<ExternalConnectorRegistration, ExternalConnectorRow> implements ExternalConnectorStore {
  constructor(ds: DataSource) {
    super(ds, ExternalConnectorEntity, {
      key: { property: 'capability', column: 'capability' },
      toRow: (r) => ({
        registrationId: r.registrationId,
        capability: r.capability,
        endpoint: r.endpoint,
        policyName: r.policyName,
        forwardedParameters: JSON.stringify(r.forwardedParameters),
        timeoutMs: r.timeoutMs,
        proposer: r.proposer,
        approvedBy: r.approvedBy,
        registeredAt: r.registeredAt,
      }),
      toRegistration: (r) => ({
        registrationId: r.registrationId,
        capability: r.capability,
        endpoint: r.endpoint,
        policyName: r.policyName,
        forwardedParameters: JSON.parse(r.forwardedParameters) as string[],
        timeoutMs: Number(r.timeoutMs),
        proposer: r.proposer,
        approvedBy: r.approvedBy,
        registeredAt: r.registeredAt,
      }),
    });
  }
}
