import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { InMemoryTransparencyLog, KeyRing, KeyRingSigner, NoteCheckpointSigner } from '@ets/adapters-crypto';
import { runCli } from '@ets/test-support';

// Needs the built CLI (`npm run build`). A small HTTP server plays the log: it serves checkpoints
// signed by a real key ring and consistency proofs computed by the Merkle module, first honestly,
// then from trees that differ from what the monitor saw.

const ORIGIN = 'ets.test/log';
const dir = mkdtempSync(path.join(os.tmpdir(), 'ets-log-monitor-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const leaf = (tag: string): string => createHash('sha256').update(tag).digest('hex');
const leaves = (n: number, tag = 'record'): string[] => Array.from({ length: n }, (_, i) => leaf(`${tag}-${i}`));

/** What the server currently shows: a tree, its signed checkpoint, and optionally a doctored proof. */
interface View {
  log: InMemoryTransparencyLog;
  note: string;
  proof?: (hashes: string[]) => unknown;
}

let view: View;
let jwks: unknown;
let server: Server;
let url: string;
let ring: KeyRing;
let honest: NoteCheckpointSigner;
let stranger: NoteCheckpointSigner;

async function makeView(list: string[], signer = honest): Promise<View> {
  const log = new InMemoryTransparencyLog();
  if (list.length > 0) await log.append(list);
  return { log, note: (await signer.sign(await log.treeHead())).note };
}

const statePath = (name: string) => path.join(dir, `${name}.json`);
const monitor = (state: string, extra: string[] = [], target = url) => runCli(['log', 'monitor', '--state', state, ...extra, target], {});

describe('ets log monitor', () => {
  beforeAll(async () => {
    ring = await KeyRing.open({ dataDir: path.join(dir, 'log-keys'), mode: 'ed25519' });
    honest = new NoteCheckpointSigner(ORIGIN, new KeyRingSigner(ring), ring);
    jwks = ring.jwks();
    const other = await KeyRing.open({ dataDir: path.join(dir, 'other-keys'), mode: 'ed25519' });
    stranger = new NoteCheckpointSigner(ORIGIN, new KeyRingSigner(other), other);
    writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify(jwks));
    writeFileSync(path.join(dir, 'other-jwks.json'), JSON.stringify(other.jwks()));

    server = createServer((req, res) => {
      void (async () => {
        const u = new URL(req.url ?? '/', 'http://x');
        if (u.pathname === '/.well-known/jwks.json') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
        if (u.pathname === '/log/checkpoint') return res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(view.note);
        if (u.pathname === '/log/proof/consistency') {
          const { hashes } = await view.log.consistencyProof(Number(u.searchParams.get('from')), Number(u.searchParams.get('to')));
          return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(view.proof ? view.proof(hashes) : { hashes }));
        }
        res.writeHead(404).end();
      })().catch(() => res.writeHead(500).end());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('trusts the first checkpoint on first use, then accepts an honest log that grows', async () => {
    const state = statePath('honest');
    view = await makeView(leaves(5));
    const first = await monitor(state);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/^first run: .* trusted on first use: ets\.test\/log at size 5 /);
    expect(JSON.parse(readFileSync(state, 'utf8'))).toMatchObject({ origin: ORIGIN, treeSize: 5, checkpoint: view.note });

    const again = await monitor(state);
    expect(again).toMatchObject({ code: 0 });
    expect(again.stdout).toMatch(/^unchanged: ets\.test\/log still at size 5/);

    view = await makeView(leaves(9));
    const grown = await monitor(state, ['--keys', path.join(dir, 'jwks.json')]);
    expect(grown).toMatchObject({ code: 0, stderr: '' });
    expect(grown.stdout).toMatch(/^consistent: ets\.test\/log grew from 5 to 9 leaves, signed by ed25519-/);
    expect(JSON.parse(readFileSync(state, 'utf8'))).toMatchObject({ treeSize: 9, checkpoint: view.note });

    // Started on an empty log: every tree extends it.
    const fromEmpty = statePath('from-empty');
    view = await makeView([]);
    expect((await monitor(fromEmpty)).code).toBe(0);
    view = await makeView(leaves(3));
    expect(await monitor(fromEmpty)).toMatchObject({ code: 0, stdout: expect.stringMatching(/grew from 0 to 3/) });
  });

  describe('detects a log that misbehaves, and keeps the state it had', () => {
    const saved = statePath('saved-at-9');
    beforeAll(async () => {
      view = await makeView(leaves(9));
      expect((await monitor(saved)).code).toBe(0);
    });

    const swap = (list: string[], i: number, j: number) => list.map((x, k) => (k === i ? list[j]! : k === j ? list[i]! : x));
    const cases: [string, () => Promise<View>, RegExp][] = [
      ['a removed leaf', () => makeView([...leaves(9).filter((_, i) => i !== 4), ...leaves(3, 'new')]), /^ets: FORK: the log's size 11 .* does not extend the size 9/],
      ['a changed leaf', () => makeView([...leaves(9).map((x, i) => (i === 2 ? leaf('changed') : x)), ...leaves(2, 'new')]), /^ets: FORK/],
      ['reordered leaves', () => makeView([...swap(leaves(9), 3, 6), leaf('new')]), /^ets: FORK/],
      ['another tree of the same size', () => makeView(swap(leaves(9), 0, 1)), /^ets: FORK: the log serves another tree of the same size/],
      ['a rollback', () => makeView(leaves(7)), /^ets: ROLLBACK: the log serves size 7 .* smaller than size 9/],
      ['a checkpoint signed by a key not in the JWKS', () => makeView(leaves(12), stranger), /^ets: BAD CHECKPOINT: .* no signature by a known key/],
      [
        'a checkpoint whose text was changed after signing',
        async () => {
          const v = await makeView(leaves(12));
          return { ...v, note: v.note.replace(`${ORIGIN}\n12\n`, `${ORIGIN}\n13\n`) };
        },
        /^ets: BAD CHECKPOINT: .* does not verify/,
      ],
      ['a checkpoint for another origin', () => makeView(leaves(12), new NoteCheckpointSigner('elsewhere/log', new KeyRingSigner(ring), ring)), /^ets: ORIGIN CHANGED/],
      [
        'an honest tree with a doctored proof',
        async () => ({ ...(await makeView(leaves(12))), proof: (hashes: string[]) => ({ hashes: [...hashes.slice(1), hashes[0]] }) }),
        /^ets: FORK/,
      ],
      ['an answer that is no proof', async () => ({ ...(await makeView(leaves(12))), proof: () => ({ hashes: 'nope' }) }), /^ets: INVALID PROOF: .*hashes: not a list/],
    ];

    it.each(cases)('%s: exit 1, state unchanged, evidence saved', async (_what, make, message) => {
      const state = statePath(`case-${cases.findIndex((c) => c[0] === _what)}`);
      copyFileSync(saved, state);
      const before = readFileSync(state, 'utf8');
      view = await make();
      const run = await monitor(state);
      expect({ code: run.code, stderr: run.stderr.trim() }).toEqual({ code: 1, stderr: expect.stringMatching(message) });
      expect(readFileSync(state, 'utf8')).toBe(before);
      if (!/BAD CHECKPOINT/.test(run.stderr)) {
        expect(JSON.parse(readFileSync(`${state}.evidence.json`, 'utf8'))).toMatchObject({ saved: JSON.parse(before).checkpoint, served: view.note });
      }
    });

    it('a JWKS without the log key is a bad signature; an unreachable log changes nothing (exit 2)', async () => {
      const state = statePath('keys-and-reachability');
      copyFileSync(saved, state);
      const before = readFileSync(state, 'utf8');
      view = await makeView(leaves(12));
      const wrongKeys = await monitor(state, ['--keys', path.join(dir, 'other-jwks.json')]);
      expect(wrongKeys.code).toBe(1);
      expect(wrongKeys.stderr).toMatch(/BAD CHECKPOINT/);

      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const unreachable = await monitor(state, [], deadUrl);
      expect(unreachable.code).toBe(2);
      expect(unreachable.stderr).toMatch(/^ets: cannot reach the log at http:\/\/127\.0\.0\.1:\d+\/log\/checkpoint \(ECONNREFUSED\); nothing was checked/);
      expect(readFileSync(state, 'utf8')).toBe(before);

      // And the honest continuation still passes from the same state.
      expect((await monitor(state)).code).toBe(0);
    });

    it('refuses usage errors and a state file it did not write (exit 2)', async () => {
      expect((await runCli(['log', 'monitor', url], {})).code).toBe(2);
      expect((await runCli(['log', 'watch'], {})).code).toBe(2);
      const junk = statePath('junk');
      writeFileSync(junk, '{"not":"a state"}');
      const run = await monitor(junk);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/is not a state file of 'ets log monitor'/);
      expect(existsSync(`${junk}.evidence.json`)).toBe(false);
    });
  });
});
