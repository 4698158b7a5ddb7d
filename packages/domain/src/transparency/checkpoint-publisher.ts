import type { Clock } from '../ports/clock.js';
import { DomainError } from '../shared/errors.js';
import type { CheckpointSigner, PublishedCheckpoints, TransparencyLog } from './ports.js';
import type { LogCheckpoint, LogLeaf, TransparencyProof } from './records.js';

export interface CheckpointPublisherDeps {
  log: TransparencyLog;
  signer: CheckpointSigner;
  /** What this instance has published, kept outside the database. */
  published: PublishedCheckpoints;
  clock: Clock;
  /** Least time between two checkpoints this publisher signs; default 1000 ms. */
  minIntervalMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

/** 503 SIGNING_UNAVAILABLE: no checkpoint could be signed or kept (signing failed, or the store refused it). */
const unavailable = (why: string, cause?: unknown): DomainError =>
  new DomainError('unavailable', `No checkpoint of the transparency log could be signed: ${why}.`, 'SIGNING_UNAVAILABLE', undefined, { cause });

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Signs checkpoints of the deployment's transparency log and proves records against them.
 *
 * A checkpoint is signed only when the tree has grown past the latest one, and at most once per
 * `minIntervalMs` by this publisher, whoever asks (the server's periodic tick, a Receipt that needs
 * its record covered): a caller that comes too soon waits for the next slot, and callers that
 * come while one is being made share it. The store keeps every checkpoint and refuses one that
 * does not extend the history or does not match the stored tree, so two instances on one database
 * converge on one history and the service never publishes two inconsistent checkpoints.
 *
 * A restore of the database from a backup rolls that history back with the tree, so the publisher
 * also keeps, outside the database (`PublishedCheckpoints`), the latest checkpoint it handed out,
 * recorded before anyone can see it; it signs nothing, and the server does not start
 * (`continuityProblem`), while the stored tree does not extend it. The way on is a new log: a new
 * origin, which the log's witnesses are told about.
 */
export class CheckpointPublisher {
  #lastSignedAt = Number.NEGATIVE_INFINITY;
  #inFlight: Promise<LogCheckpoint> | undefined;
  private readonly minIntervalMs: number;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly d: CheckpointPublisherDeps) {
    this.minIntervalMs = d.minIntervalMs ?? 1000;
    this.sleep = d.sleep ?? defaultSleep;
  }

  /** The latest checkpoint, after signing one of the current tree if it has grown since. */
  publish(): Promise<LogCheckpoint> {
    this.#inFlight ??= this.#publish().finally(() => (this.#inFlight = undefined));
    return this.#inFlight;
  }

  /**
   * Why the stored tree does not extend the latest checkpoint this instance published under its
   * origin (one line for the operator: what happened and what to do), or undefined when it does.
   */
  async continuityProblem(): Promise<string | undefined> {
    const origin = this.d.signer.origin;
    const published = await this.d.published.latest(origin);
    if (!published) return undefined;
    const head = await this.d.log.treeHead();
    const what =
      head.treeSize < published.treeSize
        ? `holds ${head.treeSize} leaves, fewer than the ${published.treeSize} of the checkpoint`
        : (await this.d.log.rootAt(published.treeSize)) !== published.rootHash
          ? `does not have the first ${published.treeSize} leaves of the checkpoint`
          : undefined;
    if (!what) return undefined;
    return (
      `the transparency log in the database ${what} this service published for ${origin} (size ${published.treeSize}, root ${published.rootHash.slice(0, 16)}…, kept in ${this.d.published.location}): ` +
      `the database was restored from a backup or changed, and signing now would fork the log its witnesses saw. ` +
      `Start the log under a new origin: set SVC_LOG_ORIGIN to a new name (e.g. ${nextOrigin(origin)}), tell the log's witnesses, and start again (operator guide: Deployment, Backups).`
    );
  }

  /** Resolves once no checkpoint is being made (for a clean shutdown). */
  async idle(): Promise<void> {
    await this.#inFlight?.catch(() => undefined);
  }

  /** A checkpoint whose tree holds at least `treeSize` leaves: the latest one, or a new one. */
  async covering(treeSize: number): Promise<LogCheckpoint> {
    const latest = await this.d.log.latestCheckpoint();
    if (latest && latest.treeSize >= treeSize) return latest;
    // A checkpoint being made when the leaf was committed may not hold it: the next one does.
    for (let attempt = 0; attempt < 2; attempt++) {
      const checkpoint = await this.publish();
      if (checkpoint.treeSize >= treeSize) return checkpoint;
    }
    throw unavailable(`none covers ${treeSize} leaves yet`);
  }

  /**
   * The inclusion proof of a leaf against a signed checkpoint that holds it (the Receipt's
   * `transparency`, or a record served with its proof); undefined when the leaf is not in the log.
   */
  async proofOf(leaf: LogLeaf): Promise<TransparencyProof | undefined> {
    const index = await this.d.log.leafIndex(leaf);
    if (index === undefined) return undefined;
    const checkpoint = await this.covering(index + 1);
    const proof = await this.d.log.inclusionProof(leaf, checkpoint.treeSize);
    if (!proof) throw unavailable(`leaf ${index} has no inclusion proof in the checkpoint of size ${checkpoint.treeSize}`);
    return { ...proof, checkpoint: checkpoint.note };
  }

  async #publish(): Promise<LogCheckpoint> {
    const wait = this.#lastSignedAt + this.minIntervalMs - this.d.clock.now().getTime();
    if (wait > 0) await this.sleep(wait);
    const [head, latest] = await Promise.all([this.d.log.treeHead(), this.d.log.latestCheckpoint()]);
    if (latest && head.treeSize <= latest.treeSize) return this.#handOut(latest);
    const problem = await this.continuityProblem();
    if (problem) throw unavailable(problem);
    this.#lastSignedAt = this.d.clock.now().getTime();
    let checkpoint: LogCheckpoint;
    try {
      checkpoint = await this.d.signer.sign(head);
    } catch (e) {
      throw unavailable('signing is unavailable', e);
    }
    // Recorded before it is stored, so no one sees a checkpoint this record lacks.
    await this.#remember(checkpoint);
    try {
      await this.d.log.saveCheckpoint(checkpoint);
    } catch (e) {
      // Another instance kept a larger one meanwhile: it holds every leaf this one would.
      const now = await this.d.log.latestCheckpoint();
      if (now && now.treeSize >= checkpoint.treeSize) return this.#handOut(now);
      throw unavailable(`the log did not keep the one of size ${checkpoint.treeSize}`, e);
    }
    return (await this.d.log.checkpointAt(checkpoint.treeSize)) ?? checkpoint;
  }

  /** A stored checkpoint (maybe another instance's), recorded as published by this one too. */
  async #handOut(checkpoint: LogCheckpoint): Promise<LogCheckpoint> {
    await this.#remember(checkpoint);
    return checkpoint;
  }

  async #remember(checkpoint: LogCheckpoint): Promise<void> {
    try {
      await this.d.published.remember(checkpoint);
    } catch (e) {
      throw unavailable(`it could not be recorded in ${this.d.published.location}`, e);
    }
  }
}

/** A new origin to suggest: the same with a number added or incremented (`…/log` → `…/log-2`). */
export function nextOrigin(origin: string): string {
  const numbered = /^(.*-)(\d+)$/.exec(origin);
  return numbered ? `${numbered[1]}${Number(numbered[2]) + 1}` : `${origin}-2`;
}
