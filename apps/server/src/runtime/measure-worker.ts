import { parentPort } from 'node:worker_threads';
import { measureRuntime } from './runtime-facts.js';

// Runs in a worker thread (running-code.ts): the measurement, then its result to the starting thread.
parentPort!.postMessage(measureRuntime({ runtimeVersion: '' }));
