import { compilePolicy, type PolicyStore } from '../policy/index.js';
import type { PolicyCatalog, PublishedPolicy } from './context.js';

/**
 * Published versions never change, so each is compiled once and kept (keyed by name and version).
 * A miss is not cached: the version may be approved a moment later.
 */
export class CompilingPolicyCatalog implements PolicyCatalog {
  private readonly cache = new Map<string, Promise<PublishedPolicy | undefined>>();

  constructor(private readonly store: Pick<PolicyStore, 'find'>, private readonly maxEntries = 1000) {}

  find(name: string, version: string): Promise<PublishedPolicy | undefined> {
    const key = JSON.stringify([name, version]);
    const hit = this.cache.get(key);
    if (hit) return hit;
    const loading = this.store.find({ name, version }).then((v) =>
      v ? { document: v.content, contentHash: v.contentHash, compiled: compilePolicy(v.content) } : undefined,
    );
    this.cache.set(key, loading);
    loading.then(
      (found) => {
        if (!found) this.cache.delete(key);
        else if (this.cache.size > this.maxEntries) this.cache.delete(this.cache.keys().next().value!);
      },
      () => this.cache.delete(key),
    );
    return loading;
  }
}
