/**
 * Paths into a Business Transaction, as policies and grants name them (CONTRACT "Business signal
 * sources", "Authority grants"): `intent.parameters.invoiceId`, `intent.action`, `metadata.tenantId`.
 * A value is read through own properties of plain objects only, so a path can never reach a
 * prototype member (`intent.parameters.constructor` is simply missing).
 */
import { isPlainObject } from './guards.js';

const SEGMENT = '[A-Za-z0-9_-]+';

/** A path to a value of the executed intent: `intent.action` or `intent.parameters.<key>[.<key>…]`. */
export const INTENT_VALUE_PATH_PATTERN = `^intent\\.(action|parameters(\\.${SEGMENT})+)$`;

/** A path into the request: `businessTransactionId`, or a key under `intent`, `metadata`, `authority` or `authorization`. */
export const REQUEST_PATH_PATTERN = `^(businessTransactionId|(intent|metadata|authority|authorization)(\\.${SEGMENT})+)$`;

export const PATH_MAX_LENGTH = 512;

/** The value at `path` in `root`, or undefined when any step of it is missing. */
export function valueAtPath(root: unknown, path: string): unknown {
  let node: unknown = root;
  for (const key of path.split('.')) {
    if (!isPlainObject(node) || !Object.prototype.hasOwnProperty.call(node, key)) return undefined;
    node = node[key];
  }
  return node;
}
