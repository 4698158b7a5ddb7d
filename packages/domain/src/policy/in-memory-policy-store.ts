import type { PolicyRef } from './document.js';
import type { PolicyStore, PolicyVersion } from './policy-version.js';

/** PolicyStore in memory: the reference behaviour of the port, for unit tests. */
export class InMemoryPolicyStore implements PolicyStore {
  /** In publication order. */
  readonly versions: PolicyVersion[] = [];

  async publish(version: PolicyVersion): Promise<PolicyVersion> {
    const existing = this.versions.find((v) => v.name === version.name && v.version === version.version);
    if (existing) return structuredClone(existing);
    this.versions.push(structuredClone(version));
    return structuredClone(version);
  }

  async find(ref: PolicyRef): Promise<PolicyVersion | undefined> {
    const v = this.versions.find((x) => x.name === ref.name && x.version === ref.version);
    return v && structuredClone(v);
  }

  async inEffect(): Promise<PolicyVersion[]> {
    const latest = new Map<string, PolicyVersion>();
    for (const v of this.versions) {
      const cur = latest.get(v.name);
      // Later in publication order wins a tie, as the store's sequence does.
      if (!cur || v.approvedAt >= cur.approvedAt) latest.set(v.name, v);
    }
    return [...latest.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map((v) => structuredClone(v));
  }

  async versionInEffect(name: string): Promise<string | undefined> {
    return (await this.inEffect()).find((v) => v.name === name)?.version;
  }
}
