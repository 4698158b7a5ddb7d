import { type Connector } from '../execution/connectors.js';
import type { ConnectorKind } from '../execution/connector-chain.js';
import { ExternalConnector, type ExternalReleaseDeps } from './release.js';
import type { ExternalConnectorStore } from './ports.js';

/**
 * External HTTPS endpoints: the active registration of the exact capability. Last in the chain, it
 * owns every namespace the kinds before it do not.
 */
export class ExternalConnectors implements ConnectorKind {
  readonly owner = 'external connectors';

  constructor(
    private readonly registrations: Pick<ExternalConnectorStore, 'active'>,
    private readonly release: ExternalReleaseDeps,
  ) {}

  owns(): boolean {
    return true;
  }

  async find(action: string): Promise<Connector | undefined> {
    const registration = await this.registrations.active(action);
    return registration && new ExternalConnector(registration, this.release);
  }
}
