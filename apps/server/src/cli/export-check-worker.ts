import { parentPort, workerData } from 'node:worker_threads';
import { ExportLineChecker, type JwksLike } from '@ets/adapters-crypto';

/**
 * A thread of `ets verify --all`: checks the batches of export lines it is sent, each line on its
 * own (signatures, hashes, inclusion proof), and answers with what it found, in the batch's order.
 * What depends on the lines before (order of the leaves, the chain) stays on the main thread.
 */
const checker = new ExportLineChecker((workerData as { jwks: JwksLike }).jwks);
parentPort!.on('message', (lines: string[]) => parentPort!.postMessage(lines.map((line) => checker.check(line))));
