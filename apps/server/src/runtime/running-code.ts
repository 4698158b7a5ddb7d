import { Worker } from 'node:worker_threads';
import { measureRuntime, RUNNING_CODE, type MeasuredRuntime } from './runtime-facts.js';

type Measured = MeasuredRuntime | { error: string };

let pending: Promise<Measured> | undefined;

/**
 * Starts measuring the code this process runs. The built code is measured in a worker thread, so
 * that it overlaps loading the modules, opening storage and migrating (`ets serve` starts it
 * first); the TypeScript sources (the test suite) cannot be a worker and are measured in place.
 */
export function startMeasuringRunningCode(): void {
  pending ??= RUNNING_CODE === 'built' ? inWorker() : Promise.resolve(measureRuntime({ runtimeVersion: '' }));
}

/**
 * The code this process runs, measured once: a process loads each module once, so a later start in
 * the same process runs what the first one measured (the test suite starts many servers in one;
 * jest loads the modules afresh for each test file, so there it is once per file).
 */
export async function runningCode(runtimeVersion: string): Promise<Measured> {
  startMeasuringRunningCode();
  const measured = await pending!;
  return 'error' in measured ? measured : { ...measured, runtimeVersion };
}

function inWorker(): Promise<Measured> {
  return new Promise((resolve) => {
    const worker = new Worker(new URL('./measure-worker.js', import.meta.url));
    worker.once('message', (m: Measured) => resolve(m));
    worker.once('error', (e) => resolve({ error: `the running code could not be measured (${e.message})` }));
    // After a message or an error this changes nothing (a promise settles once).
    worker.once('exit', (code) => resolve({ error: `the running code could not be measured (the measuring thread exited with ${code})` }));
  });
}
