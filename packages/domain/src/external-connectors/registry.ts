import { namespaceOf, type Connector, type ConnectorRegistry } from '../execution/connectors.js';
import { ExternalConnector, type ExternalReleaseDeps } from './release.js';
import type { ExternalConnectorStore } from './ports.js';
import { RESERVED_NAMESPACES } from './registration.js';
import { isMcpNamespace } from '../mcp/names.js';

/**
 * The pipeline's connectors: the built-in ones by namespace, then the active external
 * registration of the exact capability. Built-in namespaces (and `test`) are reserved, so an
 * external registration can never shadow a built-in connector.
 */
export class GovernedConnectorRegistry implements ConnectorRegistry {
  private readonly builtIns = new Map<string, Connector>();
  readonly reservedNamespaces: readonly string[];

  constructor(
    builtIns: readonly Connector[],
    private readonly registrations: Pick<ExternalConnectorStore, 'active'>,
    private readonly release: ExternalReleaseDeps,
  ) {
    for (const c of builtIns) this.builtIns.set(c.namespace, c);
    this.reservedNamespaces = [...new Set([...RESERVED_NAMESPACES, ...this.builtIns.keys()])];
  }

  async find(action: string): Promise<Connector | undefined> {
    const namespace = namespaceOf(action);
    const builtIn = this.builtIns.get(namespace);
    // The `mcp-` namespaces are the MCP servers' (McpConnectorRegistry): a registration there, made
    // before the prefix was reserved, is never released to.
    if (builtIn || this.reservedNamespaces.includes(namespace) || isMcpNamespace(namespace)) return builtIn;
    const registration = await this.registrations.active(action);
    return registration && new ExternalConnector(registration, this.release);
  }
}
