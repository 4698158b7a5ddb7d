import { InMemoryRegistrationStore } from '../governance/registrations.js';
import type { McpServerStore } from './ports.js';
import type { McpServerRegistration } from './registration.js';

/** McpServerStore in memory: the reference behaviour of the port, for unit tests. */
export class InMemoryMcpServerStore extends InMemoryRegistrationStore<McpServerRegistration> implements McpServerStore {
  constructor() {
    super((r) => r.name);
  }
}
