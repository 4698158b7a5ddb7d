import { afterAll } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CLI = path.join(REPO_ROOT, 'apps', 'server', 'dist', 'cli.js');

export interface SpawnedServer {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Sends a signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs the built CLI (`ets …`) to completion. */
export function runCli(args: string[], env: Record<string, string | undefined>, stdin?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, ...env }, cwd: env.CWD ?? REPO_ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    if (stdin !== undefined) child.stdin.end(stdin);
    else child.stdin.end();
  });
}

/** Starts `ets serve` (of this repository, or the CLI `cli` of another install) on an ephemeral port and resolves once it listens. */
export function spawnServer(env: Record<string, string | undefined>, timeoutMs = 60000, cli = CLI): Promise<SpawnedServer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'serve'], {
      env: { PATH: process.env.PATH, SVC_PORT: '0', SVC_HOST: '127.0.0.1', ...env },
      cwd: env.CWD ?? REPO_ROOT,
    });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start in time:\n${out}`));
    }, timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /"url":"(http:\/\/[^"]+)".*"msg":"listening"/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({
          url: m[1]!,
          child,
          output: () => out,
          stop: (signal = 'SIGTERM') =>
            new Promise((res) => {
              if (child.exitCode !== null || child.signalCode !== null) return res(child.exitCode);
              child.once('exit', (code) => res(code));
              child.kill(signal);
            }),
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}`));
    });
  });
}

/**
 * Runs `ets serve` where it must refuse to start: resolves with its exit code and output once it
 * exits. One that starts listening after all is stopped at once (`listening: true`, code null), so
 * a test of a refusal never leaves a server behind.
 */
export function serveRefused(env: Record<string, string | undefined>, timeoutMs = 30000): Promise<{ code: number | null; stdout: string; stderr: string; listening: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'serve'], { env: { PATH: process.env.PATH, SVC_PORT: '0', SVC_HOST: '127.0.0.1', ...env }, cwd: env.CWD ?? REPO_ROOT });
    let stdout = '';
    let stderr = '';
    let listening = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d) => {
      stdout += d;
      if (!listening && /"msg":"listening"/.test(stdout)) {
        listening = true;
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (d) => (stderr += d));
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: listening ? null : code, stdout, stderr, listening });
    });
  });
}

/** A maker of temporary folders for one test file; every one is removed after its last test. */
export function tempDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  return () => {
    const d = mkdtempSync(path.join(os.tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
}

export interface StartedCli<T> {
  child: ChildProcess;
  /** What `ready` found in the output. */
  found: T;
  output(): string;
  /** SIGTERM; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `node SCRIPT ARGS` (a command that serves until stopped) and resolves once `ready` finds
 * what it waits for in its output (stdout and stderr); rejects when it exits first or takes too long.
 */
function startUntilReady<T>(script: string, args: string[], env: Record<string, string | undefined>, ready: (output: string) => T | undefined, timeoutMs: number): Promise<StartedCli<T>> {
  const what = `${path.basename(script)} ${args.join(' ')}`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { env: { PATH: process.env.PATH, ...env }, cwd: env.CWD ?? REPO_ROOT });
    let out = '';
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      child.kill('SIGTERM');
      reject(new Error(`${what} was not ready in time:\n${out}`));
    }, timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (settled) return; // only collecting the output from now on
      const found = ready(out);
      if (found === undefined) return;
      settled = true;
      clearTimeout(timer);
      resolve({
        child,
        found,
        output: () => out,
        stop: () =>
          new Promise((res) => {
            if (child.exitCode !== null || child.signalCode !== null) return res(child.exitCode);
            child.once('exit', (code) => res(code));
            child.kill('SIGTERM');
          }),
      });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before it was ready:\n${out}`));
    });
  });
}

/** Starts `ets ARGS`, a command that serves until stopped, and resolves once `ready` finds what it waits for in its output. */
export const startCli = <T>(args: string[], env: Record<string, string | undefined>, ready: (output: string) => T | undefined, timeoutMs = 90_000): Promise<StartedCli<T>> =>
  startUntilReady(CLI, args, env, ready, timeoutMs);

export const TWO_INSTANCES_SCRIPT = path.join(REPO_ROOT, 'scripts', 'two-instances.mjs');

export interface TwoInstances {
  /** The two instances' addresses, in the order the script printed them. */
  urls: string[];
  /** Their log files. */
  logs: string[];
  child: ChildProcess;
  output(): string;
  /** SIGTERM to the script (it stops both); resolves with its exit code. */
  stop(): Promise<number | null>;
}

/** Runs `scripts/two-instances.mjs --ports 0,0 --dir DIR` and resolves once it prints READY. */
export async function startTwoInstances(env: Record<string, string | undefined>, dir: string, timeoutMs = 60000): Promise<TwoInstances> {
  const started = await startUntilReady(
    TWO_INSTANCES_SCRIPT,
    ['--ports', '0,0', '--dir', dir],
    { ...env, CWD: REPO_ROOT },
    (out) => (/^READY$/m.test(out) ? [...out.matchAll(/^instance [ab]: (http:\/\/\S+) .*log (\S+?)[,)]/gm)] : undefined),
    timeoutMs,
  );
  return { urls: started.found.map((m) => m[1]!), logs: started.found.map((m) => m[2]!), child: started.child, output: started.output, stop: started.stop };
}
