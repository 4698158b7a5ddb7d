import { describe, expect, it } from '@jest/globals';
import { DomainError } from '../shared/errors.js';
import { CheckpointPublisher, nextOrigin } from './checkpoint-publisher.js';
import type { CheckpointSigner, PublishedCheckpoints, TransparencyLog } from './ports.js';
import type { LogCheckpoint, TreeHead } from './records.js';

/** A log whose tree is just a size (roots are `<lineage>-<size>`), with the store's checkpoint rules. */
class FakeLog implements TransparencyLog {
  size = 0;
  /** Another lineage: the same sizes, other leaves (a database changed under the log). */
  lineage = 'root';
  saved: LogCheckpoint[] = [];
  refuse: ((c: LogCheckpoint) => boolean) | undefined;
  readonly leafIndexes = new Map<string, number>();

  async treeHead(): Promise<TreeHead> {
    return { treeSize: this.size, rootHash: `${this.lineage}-${this.size}` };
  }
  async rootAt(treeSize: number) {
    if (treeSize > this.size) throw new Error('beyond the tree');
    return `${this.lineage}-${treeSize}`;
  }
  async latestCheckpoint() {
    return this.saved.at(-1);
  }
  async checkpointAt(treeSize: number) {
    return this.saved.find((c) => c.treeSize === treeSize);
  }
  async saveCheckpoint(c: LogCheckpoint) {
    const latest = this.saved.at(-1);
    if (this.refuse?.(c) || (latest && c.treeSize < latest.treeSize)) throw new Error('refused');
    if (latest?.treeSize !== c.treeSize) this.saved.push(c);
  }
  async leafIndex(leaf: string) {
    return this.leafIndexes.get(leaf);
  }
  async inclusionProof(leaf: string, treeSize: number) {
    const leafIndex = this.leafIndexes.get(leaf);
    return leafIndex === undefined || leafIndex >= treeSize ? undefined : { leafIndex, treeSize, hashes: [`path-${leafIndex}-${treeSize}`] };
  }
  async consistencyProof() {
    return { hashes: [] };
  }
  async leaves() {
    return [];
  }
}

/** What the instance published, as the data dir's file keeps it. */
class MemoryPublished implements PublishedCheckpoints {
  readonly location = '/data/transparency-log';
  readonly kept = new Map<string, LogCheckpoint>();
  failing = false;
  async latest(origin: string) {
    return this.kept.get(origin);
  }
  async remember(c: LogCheckpoint) {
    if (this.failing) throw new Error('disk full');
    if ((this.kept.get(c.origin)?.treeSize ?? -1) < c.treeSize) this.kept.set(c.origin, c);
  }
}

function setup(interval = 1000, origin = 'o', published = new MemoryPublished()) {
  const log = new FakeLog();
  let now = 10_000;
  const waits: number[] = [];
  const signed: number[] = [];
  const signer: CheckpointSigner = {
    origin,
    sign: async (head) => {
      signed.push(head.treeSize);
      return { ...head, origin, keyId: 'k', note: `note-${head.treeSize}` };
    },
  };
  const publisher = new CheckpointPublisher({
    log,
    signer,
    published,
    clock: { now: () => new Date(now) },
    minIntervalMs: interval,
    sleep: async (ms) => {
      waits.push(ms);
      now += ms;
    },
  });
  return { log, publisher, signed, waits, published, advance: (ms: number) => (now += ms) };
}

describe('CheckpointPublisher', () => {
  it('signs the tree when it has grown (the empty tree first), and otherwise answers the latest checkpoint', async () => {
    const { log, publisher, signed } = setup();
    expect((await publisher.publish()).treeSize).toBe(0);
    expect((await publisher.publish()).note).toBe('note-0');
    log.size = 3;
    expect((await publisher.publish()).treeSize).toBe(3);
    expect(signed).toEqual([0, 3]);
    expect(log.saved.map((c) => c.treeSize)).toEqual([0, 3]);
  });

  it('signs at most once per interval, and concurrent callers share one checkpoint', async () => {
    const { log, publisher, signed, waits, advance } = setup(1000);
    log.size = 1;
    await publisher.publish();
    log.size = 2;
    advance(300);
    const shared = await Promise.all([publisher.publish(), publisher.publish(), publisher.publish()]);
    expect(shared.map((c) => c.treeSize)).toEqual([2, 2, 2]);
    expect(signed).toEqual([1, 2]);
    expect(waits).toEqual([700]); // the rest of the second since the first one
    log.size = 3;
    advance(5000);
    await publisher.publish();
    expect(waits).toEqual([700]);
  });

  it('proves a leaf against a checkpoint that holds it, signing a new one when the latest does not', async () => {
    const { log, publisher, signed } = setup();
    log.size = 4;
    await publisher.publish();
    log.leafIndexes.set('a', 2);
    expect(await publisher.proofOf('a')).toEqual({ leafIndex: 2, treeSize: 4, hashes: ['path-2-4'], checkpoint: 'note-4' });
    log.size = 6;
    log.leafIndexes.set('b', 5);
    expect(await publisher.proofOf('b')).toEqual({ leafIndex: 5, treeSize: 6, hashes: ['path-5-6'], checkpoint: 'note-6' });
    expect(signed).toEqual([4, 6]);
    expect(await publisher.proofOf('unknown')).toBeUndefined();
  });

  it('takes a larger checkpoint another instance kept meanwhile; a refusal otherwise is 503 SIGNING_UNAVAILABLE', async () => {
    const { log, publisher } = setup();
    log.size = 5;
    // Another instance saves size 7 between our read and our save.
    log.refuse = (c) => {
      log.refuse = undefined;
      log.size = 7;
      log.saved.push({ treeSize: 7, rootHash: 'root-7', origin: 'o', keyId: 'k', note: 'theirs' });
      return c.treeSize === 5;
    };
    expect((await publisher.publish()).note).toBe('theirs');
    log.size = 8;
    log.refuse = () => true;
    const refused = await publisher.publish().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject({ kind: 'unavailable', code: 'SIGNING_UNAVAILABLE' });
  });

  it('records every checkpoint it hands out before it is stored, and refuses to sign one that does not extend it (a restored database)', async () => {
    const { log, publisher, published, signed } = setup();
    log.size = 5;
    await publisher.publish();
    expect(published.kept.get('o')).toMatchObject({ treeSize: 5, rootHash: 'root-5' });
    // One kept by another instance is recorded too when this one hands it out.
    log.size = 9;
    log.saved.push({ treeSize: 9, rootHash: 'root-9', origin: 'o', keyId: 'k', note: 'theirs' });
    expect((await publisher.publish()).note).toBe('theirs');
    expect(published.kept.get('o')?.treeSize).toBe(9);
    expect(await publisher.continuityProblem()).toBeUndefined();

    // Restored from a backup of 7 leaves, then grown again to 12 with other leaves.
    const restored = setup(1000, 'o', published);
    restored.log.size = 7;
    expect(await restored.publisher.continuityProblem()).toBe(
      'the transparency log in the database holds 7 leaves, fewer than the 9 of the checkpoint this service published for o (size 9, root root-9…, kept in /data/transparency-log): ' +
        "the database was restored from a backup or changed, and signing now would fork the log its witnesses saw. Start the log under a new origin: set SVC_LOG_ORIGIN to a new name (e.g. o-2), tell the log's witnesses, and start again (operator guide: Deployment, Backups).",
    );
    restored.log.size = 12;
    restored.log.lineage = 'other';
    expect(await restored.publisher.continuityProblem()).toMatch(/^the transparency log in the database does not have the first 9 leaves of the checkpoint this service published for o /);
    await expect(restored.publisher.publish()).rejects.toMatchObject({ kind: 'unavailable', code: 'SIGNING_UNAVAILABLE', message: expect.stringMatching(/restored from a backup/) });
    expect(restored.signed).toEqual([]);
    expect(restored.log.saved).toEqual([]);

    // Under a new origin the same database is a new log: it signs, and records it apart.
    const renamed = setup(1000, 'o-2', published);
    renamed.log.size = 12;
    renamed.log.lineage = 'other';
    expect(await renamed.publisher.continuityProblem()).toBeUndefined();
    expect(await renamed.publisher.publish()).toMatchObject({ origin: 'o-2', treeSize: 12 });
    expect([...published.kept.keys()]).toEqual(['o', 'o-2']);
    expect(signed).toEqual([5]);
  });

  it('signs nothing it cannot record: 503 SIGNING_UNAVAILABLE, and no checkpoint stored', async () => {
    const { log, publisher, published } = setup();
    published.failing = true;
    log.size = 3;
    await expect(publisher.publish()).rejects.toMatchObject({ kind: 'unavailable', code: 'SIGNING_UNAVAILABLE', message: expect.stringMatching(/could not be recorded in \/data\/transparency-log/) });
    expect(log.saved).toEqual([]);
  });

  it('suggests a new origin', () => {
    expect([nextOrigin('ets.example.com/log'), nextOrigin('ets.example.com/log-2'), nextOrigin('x-9')]).toEqual(['ets.example.com/log-2', 'ets.example.com/log-3', 'x-10']);
  });
});
