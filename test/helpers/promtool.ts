/**
 * `promtool check metrics` (Debian's `prometheus` package) over a Prometheus text answer: the
 * problems it reports, less those of prom-client's own default families (its `nodejs_active_*_total`
 * gauges break the `_total` rule, and are not ours to rename).
 */
import { spawnSync } from 'node:child_process';
import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * Whether promtool runs here. Under CI=true the cases that need it always run (and fail without it
 * rather than passing unseen: .ci/run installs `prometheus`); a laptop without it skips them.
 */
export const PROMTOOL = process.env.CI === 'true' || spawnSync('promtool', ['--version'], { encoding: 'utf8', timeout: 30_000 }).status === 0;

/** The names of prom-client's default families, as collectDefaultMetrics registers them. */
export function defaultFamilies(): Set<string> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return new Set(registry.getMetricsAsArray().map((m) => m.name));
}

export interface PromtoolResult {
  /** promtool's exit code: 0 clean, 3 lint problems, 1 an error (a text it cannot parse). */
  code: number | null;
  /** Each line promtool wrote, but those about a default family of prom-client. */
  problems: string[];
  /** The lines left out: problems of prom-client's default families. */
  allowed: string[];
}

export function promtoolCheck(text: string): PromtoolResult {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw new Error(`promtool check metrics: ${r.error.message}`);
  const defaults = defaultFamilies();
  const lines = `${r.stdout}\n${r.stderr}`.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  // A problem line starts with the family's name; any other line (a parse error) is never allowed.
  const isDefault = (line: string) => defaults.has(line.split(' ', 1)[0]!);
  return { code: r.status, problems: lines.filter((l) => !isDefault(l)), allowed: lines.filter(isDefault) };
}
