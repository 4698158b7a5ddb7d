import { namespaceOf, type Connector, type ConnectorRegistry } from '@ets/domain';

/** Namespaces of built-in connectors and `test` are reserved: no external registration may use them. */
export const RESERVED_NAMESPACES = ['sandbox', 'test'] as const;

/** Built-in connectors by namespace (external HTTPS connectors join later through governance). */
export class StaticConnectorRegistry implements ConnectorRegistry {
  private readonly byNamespace = new Map<string, Connector>();

  constructor(connectors: Connector[]) {
    for (const c of connectors) this.byNamespace.set(c.namespace, c);
  }

  find(action: string): Connector | undefined {
    return this.byNamespace.get(namespaceOf(action));
  }
}
