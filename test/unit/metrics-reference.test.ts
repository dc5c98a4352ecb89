/**
 * docs/reference/metrics.md is generated from the registry (scripts/reference/metrics.mjs, over
 * dist/): the committed page must be what the generator writes now, and what it lists must be what a
 * scrape shows (each family, its type and exactly its labels), so neither can drift from the code.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { command, families, file, generate } from '../../scripts/reference/metrics.mjs';
import { SchedulerMetrics } from '../../src/http/metrics.js';
import type { SchedulerEvent } from '../../src/events/events.js';
import type { SummaryCache } from '../../src/http/summaries.js';
import { ROOT } from '../helpers/cli.js';
import { parsePrometheusText } from '../helpers/prometheus-text.js';

const at = new Date(Date.UTC(2026, 11, 1, 12));
const ref = { job: 'backup', periodKey: `backup@${at.toISOString()}`, scheduledAt: at };

describe('docs/reference/metrics.md', () => {
  it('is what scripts/reference/metrics.mjs generates now', () => {
    const committed = readFileSync(join(ROOT, file), 'utf8');
    expect(committed, `${file} differs from what the code says: run \`npm run build && ${command}\` and commit it`).toBe(generate());
  });

  it("lists every family of a real scrape, with the scrape's type and labels", async () => {
    const cache = { summaries: new Map(), paused: new Map(), onceRetried: 0, readAt: 0 } as unknown as SummaryCache;
    const metrics = new SchedulerMetrics({ jobs: ['backup'], next: () => new Map(), redis: () => 'ok', storeUp: () => true, clockOffsetMs: () => 0, jobSet: () => '3f0c9a1b2c4d' }, cache, '0.1.0');
    // A run, so that every scheduler_* family has a sample (the fire delay's histogram included).
    const run: SchedulerEvent[] = [
      { type: 'run-started', ...ref, attempt: 1, trigger: 'schedule', runId: '1', delayMs: 3 },
      { type: 'run-finished', ...ref, attempt: 1, trigger: 'schedule', runId: '1', status: 'succeeded', reason: null, durationMs: 40, error: null, recorded: true, final: true, nextAttempt: null },
    ];
    for (const event of run) metrics.emit(event);
    const { types, samples } = parsePrometheusText((await metrics.scrape()).body);
    const listed = families();
    expect(listed.map((f) => f.name).sort()).toEqual([...types.keys()].sort());
    for (const f of listed) {
      expect(types.get(f.name), f.name).toBe(f.type);
      const seen = [...samples.values()].filter((s) => s.family === f.name);
      // Only prom-client's default families may have no sample yet (no GC so far, no handle of a type).
      if (f.name.startsWith('scheduler_')) expect(seen.length, `${f.name} has samples`).toBeGreaterThan(0);
      for (const s of seen) expect([...s.labels.keys()].filter((l) => l !== 'le').sort(), f.name).toEqual([...f.labelNames].sort());
    }
  });
});
