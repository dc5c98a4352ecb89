/** Sizes in settings and job fields (`maxResultSize`, `logMaxSize`). Imports nothing. */

/** The largest stored log of one attempt (runLogMaxSize, logMaxSize). */
export const MAX_RUN_LOG_BYTES = 1024 * 1024 * 1024;
export const RUN_LOG_SIZE_EXPECTED = "a size such as '1MB', '256KB' or a number of bytes (KB = 1024 bytes, MB = 1024 KB), at most 1024MB; 0 stores none";

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, kib: 1024, k: 1024, mb: 1024 * 1024, mib: 1024 * 1024, m: 1024 * 1024 };

/** A size: a whole number of bytes (a number, or digits), or `<number><unit>` with B, KB, MB (binary). Undefined when it is not one. */
export function parseSize(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  if (!match) return undefined;
  const unit = match[2]!.toLowerCase();
  const factor = unit === '' ? 1 : SIZE_UNITS[unit];
  if (factor === undefined) return undefined;
  const bytes = Number(match[1]) * factor;
  return Number.isInteger(bytes) ? bytes : Math.floor(bytes);
}
