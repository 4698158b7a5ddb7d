/**
 * A small declarative check of the fields a signed object must carry. Each rule reports what is
 * wrong with one value, naming its JSON path; nothing here throws on odd input.
 */

/** Checks one value; returns a complaint ("not a string") or undefined when it is fine. */
export type Rule = (value: unknown, path: string, errors: string[]) => void;

export type Shape = Readonly<Record<string, Rule>>;

const has = (o: Record<string, unknown>, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k) && o[k] !== undefined;

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const simple =
  (test: (v: unknown) => boolean, what: string): Rule =>
  (v, path, errors) => {
    if (!test(v)) errors.push(`${path}: ${v === undefined ? 'missing' : `not ${what}`}`);
  };

/** Any string (free text may be empty). */
export const text: Rule = simple((v) => typeof v === 'string', 'a string');
/** A non-empty string (ids, names). */
export const id: Rule = simple((v) => typeof v === 'string' && v.length > 0, 'a non-empty string');
export const bool: Rule = simple((v) => typeof v === 'boolean', 'a boolean');
/** A non-negative integer (sizes, indexes). */
export const count: Rule = simple((v) => Number.isSafeInteger(v) && (v as number) >= 0, 'a non-negative integer');
/** Lower-case hex SHA-256. */
export const hex64: Rule = simple((v) => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v), 'a lower-case hex SHA-256');
/** An ISO 8601 time as the service writes it (`Date.toISOString`). */
export const time: Rule = simple(
  (v) => typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/.test(v) && !Number.isNaN(Date.parse(v)),
  'an ISO 8601 time',
);
export const anyObject: Rule = simple(isObject, 'an object');
export const list: Rule = simple(Array.isArray, 'a list');

export const oneOf = (...values: readonly unknown[]): Rule =>
  simple((v) => values.includes(v), `one of ${values.map((x) => JSON.stringify(x)).join(', ')}`);

export const nullable =
  (rule: Rule): Rule =>
  (v, path, errors) => {
    if (v !== null) rule(v, path, errors);
  };

/** The field may be absent (older records, spec 9.5); when present it must pass `rule`. */
export const optional =
  (rule: Rule): Rule =>
  (v, path, errors) => {
    if (v !== undefined) rule(v, path, errors);
  };

/** An object with at least the fields of `shape` (more are allowed: they are signed all the same). */
export const object =
  (shape: Shape): Rule =>
  (v, path, errors) => {
    if (!isObject(v)) {
      errors.push(`${path}: ${v === undefined ? 'missing' : 'not an object'}`);
      return;
    }
    checkShape(v, shape, path, errors);
  };

/** A list whose every element passes `rule`. */
export const listOf =
  (rule: Rule): Rule =>
  (v, path, errors) => {
    if (!Array.isArray(v)) {
      errors.push(`${path}: ${v === undefined ? 'missing' : 'not a list'}`);
      return;
    }
    v.forEach((item: unknown, i) => rule(item, `${path}[${i}]`, errors));
  };

export function checkShape(value: Record<string, unknown>, shape: Shape, path: string, errors: string[]): void {
  for (const [name, rule] of Object.entries(shape)) {
    const at = path ? `${path}.${name}` : name;
    rule(has(value, name) ? value[name] : undefined, at, errors);
  }
}
