import { InMemoryRegistrationStore } from '../governance/registrations.js';
import type { ExternalConnectorStore } from './ports.js';
import type { ExternalConnectorRegistration } from './registration.js';

/** ExternalConnectorStore in memory: the reference behaviour of the port, for unit tests. */
export class InMemoryExternalConnectorStore extends InMemoryRegistrationStore<ExternalConnectorRegistration> implements ExternalConnectorStore {
  constructor() {
    super((r) => r.capability);
  }
}
