/**
 * What a job body's end becomes in the run row: its result as JSON (with a note when it cannot be
 * stored) and what it threw (an Error's message and stack; anything else as its JSON and its type).
 * Pure functions with no imports from the rest of the scheduler: the worker entry uses them too.
 */

/** The default of the `maxResultSize` setting: 1 MB (1,048,576 bytes). */
export const DEFAULT_MAX_RESULT_BYTES = 1024 * 1024;

export interface StoredResult {
  /** The JSON text to store, or null (no result, or none that could be stored). */
  json: string | null;
  /** Why the result was not stored as returned; null when it was. */
  note: string | null;
}

/**
 * The body's return value as stored: JSON text of at most `maxBytes` bytes (UTF-8). `undefined` is
 * no result. A value that JSON cannot represent (a BigInt, a circular structure, a function or a
 * symbol at the top, a throwing toJSON) or whose JSON is over the limit is not stored: the result is
 * null and `note` says why.
 */
export function serialiseResult(value: unknown, maxBytes: number): StoredResult {
  if (value === undefined) return { json: null, note: null };
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    return { json: null, note: `result not stored: not JSON-serialisable (${oneLine(err instanceof Error ? err.message : String(err))})` };
  }
  if (json === undefined) return { json: null, note: `result not stored: not JSON-serialisable (a ${typeof value})` };
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxBytes) {
    return { json: null, note: `result not stored: its JSON is ${bytes} bytes, over the ${maxBytes}-byte limit (maxResultSize)` };
  }
  return { json, note: null };
}

export interface ThrownDescription {
  /** The stored error text: an Error's message, or `thrown <type>: <JSON>` for anything else. */
  error: string;
  errorStack: string | null;
}

/** The type of a thrown value as shown: `string`, `number`, `null`, `array`, `object`, `object (Foo)`, ... */
export function thrownType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value !== 'object') return typeof value;
  const ctor = (value as { constructor?: { name?: unknown } }).constructor;
  const name = typeof ctor === 'function' && typeof ctor.name === 'string' ? ctor.name : '';
  return name && name !== 'Object' ? `object (${name})` : 'object';
}

/**
 * What a body threw, as stored. An Error (or anything with a string `message` and `stack`, such as an
 * error from another realm or thread) keeps its message and stack. Anything else is stored as
 * `thrown <type>: <JSON>` (`String(value)` when JSON cannot represent it), with no stack: a thrown
 * plain object is no longer `[object Object]`.
 */
export function describeThrown(value: unknown): ThrownDescription {
  if (isErrorLike(value)) {
    const message = value.message !== '' ? value.message : String(value.name ?? 'Error');
    return { error: message, errorStack: typeof value.stack === 'string' ? value.stack : null };
  }
  let shown: string | undefined;
  try {
    shown = typeof value === 'bigint' || typeof value === 'symbol' || typeof value === 'function' ? undefined : JSON.stringify(value);
  } catch {
    shown = undefined;
  }
  if (shown === undefined) {
    try {
      shown = String(value);
    } catch {
      shown = Object.prototype.toString.call(value);
    }
  }
  return { error: `thrown ${thrownType(value)}: ${shown}`, errorStack: null };
}

function isErrorLike(value: unknown): value is { message: string; stack?: unknown; name?: unknown } {
  if (value instanceof Error) return true;
  if (value === null || typeof value !== 'object') return false;
  const v = value as { message?: unknown; stack?: unknown };
  return typeof v.message === 'string' && typeof v.stack === 'string';
}

function oneLine(text: string): string {
  return text.split('\n').map((l) => l.trim()).filter(Boolean).join(' ').slice(0, 500);
}

/** `1048576` -> `1MB`, `2048` -> `2KB`, `1500` -> `1500B`. */
export function formatSize(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)}MB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024}KB`;
  return `${bytes}B`;
}
