/**
 * The on-disk layout of the service signing keys:
 *
 *   <dataDir>/keys/            mode 0700
 *     keys.json                public metadata: every key that ever signed, newest last
 *     <keyId>.pem              one private key per keyId, mode 0600 (PKCS#8; ML-DSA-65 as seed)
 *     .lock                    present only while a process generates or rotates keys
 *
 * Files are written to a temporary name and renamed, so a reader never sees half a file and a
 * crash leaves either the old or the new state.
 */
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { KeyRingError } from './errors.js';

export type KeyAlgorithm = 'Ed25519' | 'ML-DSA-65';

export interface KeyRecord {
  keyId: string;
  alg: KeyAlgorithm;
  /** ISO 8601. */
  createdAt: string;
  /** The key new signatures are made with (at most one per algorithm). */
  active: boolean;
  /** Raw public key, base64url (the JWK `x` or `pub` member). */
  publicKey: string;
}

interface MetadataFile {
  version: 1;
  keys: KeyRecord[];
}

const METADATA_FILE = 'keys.json';
const LOCK_FILE = '.lock';
const KEY_ID = /^[a-z0-9]+-[A-Za-z0-9_-]{43}$/;
const PRIVATE_FILE_MODE = 0o600;
const LOCK_STALE_MS = 30_000;
const LOCK_WAIT_MS = 15_000;

export class KeyStore {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.resolve(dataDir, 'keys');
  }

  get metadataPath(): string {
    return path.join(this.dir, METADATA_FILE);
  }

  privateKeyPath(keyId: string): string {
    // keyIds come from keys.json; refuse anything that could name a file elsewhere.
    if (!KEY_ID.test(keyId)) throw new KeyRingError(`invalid keyId in ${this.metadataPath}: ${keyId}`);
    return path.join(this.dir, `${keyId}.pem`);
  }

  async ensureDir(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
  }

  /** The key records, or undefined when no metadata file exists yet. */
  async readMetadata(): Promise<KeyRecord[] | undefined> {
    let text: string;
    try {
      text = await fs.readFile(this.metadataPath, 'utf8');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new KeyRingError(`${this.metadataPath} is not valid JSON`);
    }
    return parseMetadata(parsed, this.metadataPath);
  }

  async writeMetadata(keys: readonly KeyRecord[]): Promise<void> {
    const file: MetadataFile = { version: 1, keys: [...keys] };
    await this.writeAtomically(this.metadataPath, `${JSON.stringify(file, null, 2)}\n`, 0o644);
  }

  async writePrivateKey(keyId: string, pem: string): Promise<void> {
    const target = this.privateKeyPath(keyId);
    if (await exists(target)) throw new KeyRingError(`refusing to overwrite existing key file ${target}`);
    await this.writeAtomically(target, pem, PRIVATE_FILE_MODE);
  }

  /** The PEM text, or undefined when the file does not exist. */
  async readPrivateKey(keyId: string): Promise<string | undefined> {
    try {
      return await fs.readFile(this.privateKeyPath(keyId), 'utf8');
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return undefined;
      throw error;
    }
  }

  async listPrivateKeyFiles(): Promise<string[]> {
    try {
      return (await fs.readdir(this.dir)).filter((name) => name.endsWith('.pem'));
    } catch (error) {
      if (isErrno(error, 'ENOENT')) return [];
      throw error;
    }
  }

  /**
   * Runs `action` while holding an exclusive lock file, so that processes sharing a data dir
   * (several instances, or `ets` next to a running server) never generate keys concurrently.
   */
  async withLock<T>(action: () => Promise<T>): Promise<T> {
    await this.ensureDir();
    const lockPath = path.join(this.dir, LOCK_FILE);
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        const handle = await fs.open(lockPath, 'wx', PRIVATE_FILE_MODE);
        await handle.writeFile(`${process.pid}\n`);
        await handle.close();
        break;
      } catch (error) {
        if (!isErrno(error, 'EEXIST')) throw error;
      }
      // A lock left behind by a crashed process must not block every later start forever.
      const stat = await fs.stat(lockPath).catch(() => undefined);
      if (stat && Date.now() - stat.mtimeMs > LOCK_STALE_MS) {
        await fs.rm(lockPath, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new KeyRingError(`timed out waiting for the key lock ${lockPath}`);
      await new Promise((resolve) => setTimeout(resolve, 25 + Math.random() * 50));
    }
    try {
      return await action();
    } finally {
      await fs.rm(lockPath, { force: true });
    }
  }

  private async writeAtomically(target: string, content: string, mode: number): Promise<void> {
    await this.ensureDir();
    const temporary = `${target}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    const handle = await fs.open(temporary, 'wx', mode);
    try {
      // The creation mode is filtered by the umask; set it explicitly so it is exactly `mode`.
      await handle.chmod(mode);
      await handle.writeFile(content, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await fs.rename(temporary, target);
    } catch (error) {
      await fs.rm(temporary, { force: true });
      throw error;
    }
  }
}

function parseMetadata(value: unknown, file: string): KeyRecord[] {
  const bad = (why: string) => new KeyRingError(`${file} is not a valid key metadata file: ${why}`);
  if (typeof value !== 'object' || value === null) throw bad('not an object');
  const { version, keys } = value as { version?: unknown; keys?: unknown };
  if (version !== 1) throw bad(`unsupported version ${JSON.stringify(version)}`);
  if (!Array.isArray(keys)) throw bad('"keys" is not an array');
  const seen = new Set<string>();
  return keys.map((entry: unknown, index) => {
    if (typeof entry !== 'object' || entry === null) throw bad(`keys[${index}] is not an object`);
    const { keyId, alg, createdAt, active, publicKey } = entry as Record<string, unknown>;
    if (typeof keyId !== 'string' || !KEY_ID.test(keyId)) throw bad(`keys[${index}].keyId is invalid`);
    if (alg !== 'Ed25519' && alg !== 'ML-DSA-65') throw bad(`keys[${index}].alg is invalid`);
    if (typeof createdAt !== 'string') throw bad(`keys[${index}].createdAt is invalid`);
    if (typeof active !== 'boolean') throw bad(`keys[${index}].active is invalid`);
    if (typeof publicKey !== 'string') throw bad(`keys[${index}].publicKey is invalid`);
    if (seen.has(keyId)) throw bad(`keyId ${keyId} appears twice`);
    seen.add(keyId);
    return { keyId, alg, createdAt, active, publicKey };
  });
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

function isErrno(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}
