/**
 * Each attempt's stored log, on the body's side (src/runlog/): what a body's logger stores and prints
 * at the job's and the node's levels, the head and tail within the cap and the note where lines were
 * cut, redaction, and a store that does not answer: lines kept and sent when it comes back, the
 * node's bound, what was dropped counted and said at the end. Over a real SQLite store; "the store
 * does not answer" is a wrapper that throws StoreUnavailableError while it is switched off.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { loggerOptions } from '../../src/log.js';
import { Redactor, configSecrets } from '../../src/runlog/format.js';
import type { RunLogLine, RunLogStore } from '../../src/runlog/types.js';
import { RunLogWriter } from '../../src/runlog/writer.js';
import type { RunRecord } from '../../src/store/types.js';
import { removeTempDirs, sqliteStores } from './_fixtures.js';

type Stores = Awaited<ReturnType<typeof sqliteStores>>;
let stores: Stores;
let period = Date.UTC(2026, 0, 1);

beforeAll(async () => {
  stores = await sqliteStores();
});
afterAll(async () => {
  await stores?.close();
  removeTempDirs();
});

/** A store that stops answering while `down` (every write throws as an unreachable store's would). */
class SwitchedStore implements RunLogStore {
  down = false;
  writes = 0;
  constructor(private readonly inner: RunLogStore) {}
  async write(batch: { lines: RunLogLine[]; cuts: Array<{ runId: string; fromSeq: number; toSeq: number }> }): Promise<void> {
    this.writes += 1;
    if (this.down) throw new StoreUnavailableError('store sqlite:x cannot be reached (write run log lines): connection refused');
    await this.inner.write(batch);
  }
  read(runId: string, options?: { afterSeq?: number; limit?: number }): Promise<RunLogLine[]> {
    return this.inner.read(runId, options);
  }
}

/** A node logger (at `level`) that collects what it prints. */
function nodeLogger(level = 'info'): { log: pino.Logger; printed: Array<Record<string, unknown>> } {
  const printed: Array<Record<string, unknown>> = [];
  const sink = new Writable({ write(chunk: Buffer, _e, cb) { for (const l of chunk.toString().split('\n').filter(Boolean)) printed.push(JSON.parse(l) as Record<string, unknown>); cb(); } });
  return { log: pino(loggerOptions(level, {}), sink), printed };
}

async function runRow(job = 'talker'): Promise<RunRecord> {
  period += 1000;
  const r = await stores.store.insertRun({ job, scheduledAt: new Date(period), periodKey: `${job}@${new Date(period).toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
  if (r.outcome !== 'inserted') throw new Error('claim lost');
  return r.run;
}

const waitFor = async (what: string, ok: () => boolean | Promise<boolean>, ms = 10_000) => {
  const until = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

function writerOver(store: RunLogStore, opts: { secrets?: string[]; maxQueuedBytes?: number; dropped?: number[] } = {}): RunLogWriter {
  const { log } = nodeLogger('silent');
  return new RunLogWriter({ store, redactor: new Redactor(opts.secrets ?? []), log, flushMs: 20, ...(opts.maxQueuedBytes ? { maxQueuedBytes: opts.maxQueuedBytes } : {}), counters: { dropped: (_job, n) => opts.dropped?.push(n) } });
}

describe("an attempt's stored log", () => {
  it("stores at or above the job's logLevel and prints at or above the node's, each line once, in order", async () => {
    const store = stores.runLogStore;
    const writer = writerOver(store);
    for (const [jobLevel, stored, shown] of [['debug', ['d', 'i', 'w'], ['i', 'w']], ['warn', ['w'], ['i', 'w']], ['info', ['i', 'w'], ['i', 'w']]] as const) {
      const { log, printed } = nodeLogger('info');
      const run = await runRow();
      const opened = writer.open(log.child({ job: 'talker', runId: run.id }), run, { logLevel: jobLevel, logMaxBytes: 1 << 20 })!;
      opened.logger.trace('t');
      opened.logger.debug('d');
      opened.logger.info('i');
      opened.logger.warn('w');
      opened.attemptLog.end();
      await writer.drain();
      expect((await store.read(run.id)).map((l) => l.line), jobLevel).toEqual(stored);
      expect(printed.map((p) => p.msg), jobLevel).toEqual(shown);
    }
  });

  it("keeps the first and last halves of the cap, with one note in the place of what was cut; the first and last lines are there", async () => {
    const store = stores.runLogStore;
    const writer = writerOver(store);
    const { log } = nodeLogger('silent');
    const run = await runRow();
    const cap = 8 * 1024;
    const opened = writer.open(log, run, { logLevel: 'info', logMaxBytes: cap })!;
    const total = 2000;
    for (let i = 1; i <= total; i++) opened.logger.info({ i }, `line ${String(i).padStart(5, '0')} ${'x'.repeat(40)}`);
    opened.attemptLog.end();
    await writer.drain();
    const lines = await store.read(run.id);
    const text = lines.map((l) => l.line);
    expect(text[0]).toMatch(/^line 00001 /);
    expect(text[text.length - 1]).toMatch(/^line 02000 /);
    const notes = lines.filter((l) => l.stream === 'note');
    expect(notes).toHaveLength(1);
    const kept = lines.filter((l) => l.stream !== 'note');
    const cut = Number(/^(\d+) line\(s\)/.exec(notes[0]!.line)![1]);
    expect(kept.length + cut).toBe(total);
    // The note sits between the head and the tail, in seq order.
    const noteAt = lines.indexOf(notes[0]!);
    expect(Number(kept[noteAt - 1]!.fields && JSON.parse(kept[noteAt - 1]!.fields!).i) + cut + 1).toBe(JSON.parse(lines[noteAt + 1]!.fields!).i);
    const bytes = kept.reduce((n, l) => n + l.line.length + (l.fields?.length ?? 0) + 32, 0);
    expect(bytes).toBeLessThanOrEqual(cap);
    expect(bytes).toBeGreaterThan(cap * 0.8);
  });

  it("hides secret-named fields, the configuration's secrets and URL credentials", async () => {
    const config = { store: { url: 'mysql://app:S3cr%40tpw@db:3306/app' }, redis: ['redis://:redispass1@r1:6379'], httpToken: 'http-token-123', alertToken: null, alertWebhook: null };
    const writer = writerOver(stores.runLogStore, { secrets: configSecrets(config) });
    const { log } = nodeLogger('silent');
    const run = await runRow();
    const opened = writer.open(log, run, { logLevel: 'info', logMaxBytes: 1 << 20 })!;
    opened.logger.info({ password: 'p1', apiKey: 'k1', headers: { Authorization: 'Bearer zz' }, user: 'bob' }, 'calling with http-token-123 and S3cr@tpw');
    opened.logger.info('connect postgres://u:hidden@h/db and redispass1');
    opened.attemptLog.end();
    await writer.drain();
    const [a, b] = await stores.runLogStore.read(run.id);
    expect(a!.line).toBe('calling with *** and ***');
    expect(JSON.parse(a!.fields!)).toEqual({ password: '***', apiKey: '***', headers: { Authorization: '***' }, user: 'bob' });
    expect(b!.line).toBe('connect postgres://u:***@h/db and ***');
  });

  it('a store that does not answer costs the body nothing: its lines are kept and stored, in order, once it answers', async () => {
    const store = new SwitchedStore(stores.runLogStore);
    const writer = writerOver(store);
    const { log } = nodeLogger('silent');
    const run = await runRow();
    store.down = true;
    const opened = writer.open(log, run, { logLevel: 'info', logMaxBytes: 1 << 20 })!;
    // Each call returns at once: nothing on the body's path waits for the store.
    for (let i = 1; i <= 500; i++) opened.logger.info(`during the outage ${i}`);
    await waitFor('writes tried against the absent store', () => store.writes >= 2);
    store.down = false;
    opened.logger.info('after');
    opened.attemptLog.end();
    await writer.drain();
    const lines = await store.read(run.id);
    expect(lines.map((l) => l.line)).toEqual([...Array.from({ length: 500 }, (_, i) => `during the outage ${i + 1}`), 'after']);
  });

  it("past the node's bound the oldest waiting lines are dropped, counted, and said at the end of their log", async () => {
    const store = new SwitchedStore(stores.runLogStore);
    const dropped: number[] = [];
    const writer = writerOver(store, { maxQueuedBytes: 4096, dropped });
    const { log } = nodeLogger('silent');
    const run = await runRow();
    store.down = true;
    const opened = writer.open(log, run, { logLevel: 'info', logMaxBytes: 1 << 20 })!;
    for (let i = 1; i <= 300; i++) opened.logger.info(`line ${i} ${'y'.repeat(20)}`);
    await waitFor('a write tried', () => store.writes >= 1);
    store.down = false;
    opened.attemptLog.end();
    await writer.drain();
    await waitFor('the note of the lines not stored', async () => (await store.read(run.id)).some((l) => l.stream === 'note'));
    const lines = await store.read(run.id);
    const lost = dropped.reduce((a, b) => a + b, 0);
    expect(lost).toBeGreaterThan(0);
    const note = lines.find((l) => l.stream === 'note')!;
    expect(note.line).toMatch(new RegExp(`^${lost} line\\(s\\) of this log were not stored`));
    expect(lines.filter((l) => l.stream !== 'note')).toHaveLength(300 - lost);
    // The newest lines are the ones kept; the note is last.
    expect(lines[lines.length - 2]!.line).toMatch(/^line 300 /);
    expect(lines[lines.length - 1]).toBe(note);
  });

  it("a log far over its cap, written while the store is away, keeps its head and tail: the lines pushed out of the tail go first from the node's bound", async () => {
    const store = new SwitchedStore(stores.runLogStore);
    const dropped: number[] = [];
    // The bound holds four caps; the body writes forty.
    const cap = 4096;
    const writer = writerOver(store, { maxQueuedBytes: 4 * cap, dropped });
    const { log } = nodeLogger('silent');
    const run = await runRow();
    store.down = true;
    const opened = writer.open(log, run, { logLevel: 'info', logMaxBytes: cap })!;
    for (let i = 1; i <= 2000; i++) opened.logger.info(`big ${i} ${'z'.repeat(60)}`);
    await waitFor('a write tried', () => store.writes >= 1);
    store.down = false;
    opened.attemptLog.end();
    await writer.drain();
    const lines = await store.read(run.id);
    expect(dropped).toEqual([]);
    expect(lines[0]!.line).toMatch(/^big 1 /);
    expect(lines[lines.length - 1]!.line).toMatch(/^big 2000 /);
    expect(lines.filter((l) => l.stream === 'note').map((l) => l.line)).toEqual([expect.stringMatching(/line\(s\) \(\d+ bytes\) cut here/)]);
  });

  it('a cap of 0 or logLevel silent stores nothing, and the body logs as before', async () => {
    const writer = writerOver(stores.runLogStore);
    const { log } = nodeLogger('info');
    const run = await runRow();
    expect(writer.open(log, run, { logLevel: 'info', logMaxBytes: 0 })).toBeNull();
    expect(writer.open(log, run, { logLevel: 'silent', logMaxBytes: 1 << 20 })).toBeNull();
  });
});
