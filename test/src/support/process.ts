import { spawn, type ChildProcess } from 'node:child_process';
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

/** Starts `ets serve` on an ephemeral port and resolves once it listens. */
export function spawnServer(env: Record<string, string | undefined>, timeoutMs = 20000): Promise<SpawnedServer> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, 'serve'], {
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
              if (child.exitCode !== null) return res(child.exitCode);
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
