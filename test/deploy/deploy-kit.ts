/** Shared by the deploy tests: paths, the SCHEDULER_* names the code reads, a unit-file reader. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const DEPLOY = join(ROOT, 'deploy');

/** Every `SCHEDULER_*` name that appears in src/: the variables the scheduler can read. */
export function knownVariables(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) for (const m of readFileSync(path, 'utf8').matchAll(/SCHEDULER_[A-Z_]+/g)) names.add(m[0]);
    }
  };
  walk(join(ROOT, 'src'));
  return names;
}

export type Unit = Record<string, Record<string, string[]>>;

/** A systemd unit file as section -> key -> values (in order; repeated keys accumulate). */
export function parseUnit(text: string): Unit {
  const unit: Unit = {};
  let section = '';
  for (const raw of text.replace(/\\\n/g, ' ').split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      unit[section] ??= {};
      continue;
    }
    const eq = line.indexOf('=');
    if (eq < 0 || !section) throw new Error(`not a unit-file line: ${line}`);
    const key = line.slice(0, eq).trim();
    ((unit[section]![key] ??= [])).push(line.slice(eq + 1).trim());
  }
  return unit;
}

/** The last value of a key (systemd's rule for single-valued settings), or undefined. */
export function last(unit: Unit, section: string, key: string): string | undefined {
  return unit[section]?.[key]?.at(-1);
}

/** systemd time spans as used here (`90s`, `5min`, `1h`, a bare number of seconds) in milliseconds. */
export function timespanMs(value: string): number {
  const units: Record<string, number> = { ms: 1, s: 1000, sec: 1000, min: 60_000, m: 60_000, h: 3_600_000, hr: 3_600_000 };
  let total = 0;
  const parts = value.trim().split(/\s+/);
  for (const part of parts) {
    const m = /^(\d+)([a-z]*)$/.exec(part);
    const factor = m ? (m[2] ? units[m[2]] : 1000) : undefined;
    if (!m || factor === undefined) throw new Error(`time span not understood: ${value}`);
    total += Number(m[1]) * factor;
  }
  return total;
}
