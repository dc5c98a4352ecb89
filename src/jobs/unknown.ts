/** A job name nobody knows: the one line that says so, with the closest known name and the known ones. */
import { SchedulerError } from '../errors.js';

/** The known name closest to `name`, when it is close enough to be a likely typo. */
export function closestName(name: string, known: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  const allowed = Math.max(2, Math.floor(name.length / 3));
  return best !== undefined && bestDistance <= allowed ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

/** Known jobs named in an unknown-job line; the rest are counted (`and 12 more`), to keep it one readable line. */
const MAX_LISTED = 10;

export function unknownJob(name: string, known: string[], invalid: { file: string; problems: string[] }[]): SchedulerError {
  const broken = invalid.find((f) => f.file.replace(/^.*\//, '').replace(/\.[^.]+$/, '') === name);
  if (broken) return new SchedulerError('E_JOB_INVALID', `job '${name}' is invalid: ${broken.problems.join('; ')}`);
  const closest = closestName(name, known);
  const listed = knownList(known);
  return new SchedulerError('E_UNKNOWN_JOB', `unknown job '${name}'${closest ? ` (did you mean '${closest}'?)` : ''}; known jobs: ${listed}`);
}

/** `a, b, c` or, past MAX_LISTED names, the first ones and `and N more`. */
export function knownList(known: string[]): string {
  if (known.length === 0) return '(none)';
  return known.length > MAX_LISTED ? `${known.slice(0, MAX_LISTED).join(', ')} and ${known.length - MAX_LISTED} more` : known.join(', ');
}
