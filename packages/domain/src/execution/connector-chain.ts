/**
 * Connector kinds plug in behind one registry: built-in connectors, external HTTPS endpoints and
 * upstream MCP servers each own a part of the capability namespaces, and the composition root
 * chains them. The first kind that owns an action's namespace answers for it, so no kind can ever
 * shadow another's actions, and a registration proposed for a namespace another kind owns is refused.
 */
import { namespaceOf, type Connector, type ConnectorRegistry } from './connectors.js';

export interface ConnectorKind {
  /** What the kind's namespaces are, for a refusal: "built in (sandbox, test)", "MCP servers (mcp-*)". */
  readonly owner: string;
  owns(namespace: string): boolean;
  /** The connector of an action in a namespace the kind owns, if one is registered. */
  find(action: string): Promise<Connector | undefined>;
}

export class ConnectorChain implements ConnectorRegistry {
  constructor(private readonly kinds: readonly ConnectorKind[]) {}

  find(action: string): Promise<Connector | undefined> {
    const kind = this.ownerOf(namespaceOf(action));
    return kind ? kind.find(action) : Promise.resolve(undefined);
  }

  /** The kind that owns a namespace (the first in the chain). */
  ownerOf(namespace: string): ConnectorKind | undefined {
    return this.kinds.find((k) => k.owns(namespace));
  }

  /** Who owns `namespace` if it is not `kind`: a registration of `kind` there must be refused. */
  ownedByAnother(namespace: string, kind: ConnectorKind): string | undefined {
    const owner = this.ownerOf(namespace);
    return owner && owner !== kind ? owner.owner : undefined;
  }
}

/** Namespaces no connector may use: kept for tests (`test`). */
export const RESERVED_NAMESPACES = ['test'] as const;

/** The connectors built into the service, by namespace; they own their namespaces and the reserved ones. */
export class BuiltInConnectors implements ConnectorKind {
  private readonly byNamespace = new Map<string, Connector>();
  readonly owner: string;

  constructor(connectors: readonly Connector[]) {
    for (const c of connectors) this.byNamespace.set(c.namespace, c);
    this.owner = `built in or reserved (${[...new Set([...this.byNamespace.keys(), ...RESERVED_NAMESPACES])].join(', ')})`;
  }

  owns(namespace: string): boolean {
    return this.byNamespace.has(namespace) || (RESERVED_NAMESPACES as readonly string[]).includes(namespace);
  }

  async find(action: string): Promise<Connector | undefined> {
    return this.byNamespace.get(namespaceOf(action));
  }
}
