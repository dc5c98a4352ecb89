/**
 * The pure parts of issues 7 and 9: how a result and a thrown value are stored, the `isolation` and
 * `maxResultSize` settings and the job field, and the event-loop watchdog (real timers, a real
 * blocked loop, a real pino logger writing to a stream the test reads).
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { describeConfig, loadConfig, parseSize } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { validateJob } from '../../src/jobs/validate.js';
import { LoopWatchdog, NAMED_JOBS } from '../../src/run/isolation/watchdog.js';
import { DEFAULT_MAX_RESULT_BYTES, describeThrown, formatSize, serialiseResult, thrownType } from '../../src/run/outcome.js';
import { waitFor } from '../helpers/redis.js';

describe('serialiseResult', () => {
  it('stores JSON up to the limit, in UTF-8 bytes; undefined is no result', () => {
    expect(serialiseResult({ rows: 42 }, 100)).toEqual({ json: '{"rows":42}', note: null });
    expect(serialiseResult(undefined, 100)).toEqual({ json: null, note: null });
    expect(serialiseResult(null, 100)).toEqual({ json: 'null', note: null });
    // '"' + 4 x 3-byte characters + '"' = 14 bytes
    expect(serialiseResult('東京東京', 14)).toEqual({ json: '"東京東京"', note: null });
    expect(serialiseResult('東京東京', 13)).toEqual({ json: null, note: 'result not stored: its JSON is 14 bytes, over the 13-byte limit (maxResultSize)' });
    expect(DEFAULT_MAX_RESULT_BYTES).toBe(1024 * 1024);
  });

  it('a value JSON cannot represent gets a note saying why', () => {
    expect(serialiseResult({ n: 1n }, 100).note).toMatch(/^result not stored: not JSON-serialisable \(Do not know how to serialize a BigInt\)$/);
    const a: Record<string, unknown> = {};
    a.self = a;
    expect(serialiseResult(a, 100)).toMatchObject({ json: null, note: expect.stringMatching(/circular/i) });
    expect(serialiseResult(() => 1, 100)).toEqual({ json: null, note: 'result not stored: not JSON-serialisable (a function)' });
    expect(serialiseResult(Symbol('s'), 100)).toEqual({ json: null, note: 'result not stored: not JSON-serialisable (a symbol)' });
    expect(serialiseResult({ toJSON() { throw new Error('no\nway'); } }, 100).note).toBe('result not stored: not JSON-serialisable (no way)');
  });
});

describe('describeThrown', () => {
  it('an Error keeps its message and stack', () => {
    const err = new RangeError('out of range');
    expect(describeThrown(err)).toEqual({ error: 'out of range', errorStack: err.stack });
    expect(describeThrown(new Error('')).error).toBe('Error');
    // An error that crossed a realm or a thread boundary as a plain object with message and stack.
    expect(describeThrown({ message: 'from afar', stack: 'Error: from afar\n    at x' })).toEqual({ error: 'from afar', errorStack: 'Error: from afar\n    at x' });
  });

  it('anything else is stored as its JSON (String() when that fails) with its type, no stack', () => {
    expect(describeThrown({ code: 42 })).toEqual({ error: 'thrown object: {"code":42}', errorStack: null });
    expect(describeThrown('boom')).toEqual({ error: 'thrown string: "boom"', errorStack: null });
    expect(describeThrown(42)).toEqual({ error: 'thrown number: 42', errorStack: null });
    expect(describeThrown(null)).toEqual({ error: 'thrown null: null', errorStack: null });
    expect(describeThrown(undefined)).toEqual({ error: 'thrown undefined: undefined', errorStack: null });
    expect(describeThrown([1, 'a'])).toEqual({ error: 'thrown array: [1,"a"]', errorStack: null });
    expect(describeThrown(5n)).toEqual({ error: 'thrown bigint: 5', errorStack: null });
    expect(describeThrown(Symbol('x')).error).toBe('thrown symbol: Symbol(x)');
    class Problem { constructor(readonly why: string) {} }
    expect(describeThrown(new Problem('quota'))).toEqual({ error: 'thrown object (Problem): {"why":"quota"}', errorStack: null });
    const circular: Record<string, unknown> = { a: 1 };
    circular.self = circular;
    expect(describeThrown(circular).error).toBe('thrown object: [object Object]');
    expect(describeThrown(Object.create(null)).error).toBe('thrown object: {}');
    expect(thrownType(new Map())).toBe('object (Map)');
  });
});

describe('settings: isolation and maxResultSize', () => {
  const env = (e: Record<string, string>) => ({ env: e, cwd: '/nonexistent-cwd-for-tests' });

  it('defaults: inline and 1 MB; env and flags override; shown by describeConfig', () => {
    const c = loadConfig(env({}));
    expect(c.isolation).toBe('inline');
    expect(c.maxResultBytes).toBe(1024 * 1024);
    expect(describeConfig(c)).toMatchObject({ isolation: 'inline', maxResultSize: '1MB' });
    const e = loadConfig(env({ SCHEDULER_ISOLATION: 'worker', SCHEDULER_MAX_RESULT_SIZE: '512KB' }));
    expect([e.isolation, e.maxResultBytes]).toEqual(['worker', 512 * 1024]);
    const f = loadConfig({ ...env({ SCHEDULER_ISOLATION: 'worker', SCHEDULER_MAX_RESULT_SIZE: '512KB' }), flags: { isolation: 'inline', maxResultSize: '2000' } });
    expect([f.isolation, f.maxResultBytes]).toEqual(['inline', 2000]);
  });

  it('sizes: bytes, B, KB, MB (binary), fractions, a number in the file', () => {
    expect(parseSize('1MB')).toBe(1048576);
    expect(parseSize('1.5 kb')).toBe(1536);
    expect(parseSize('10B')).toBe(10);
    expect(parseSize('0')).toBe(0);
    expect(parseSize(4096)).toBe(4096);
    expect(parseSize('2MiB')).toBe(2 * 1048576);
    for (const bad of ['', 'lots', '1GB', '-1', 1.5, -3, null, '1 M B']) expect(parseSize(bad), String(bad)).toBeUndefined();
  });

  it('a bad value is refused with one line naming the setting, the value and what was expected', () => {
    const refused = (e: Record<string, string>) => {
      try {
        loadConfig(env(e));
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ SCHEDULER_ISOLATION: 'process' })).toBe("invalid setting SCHEDULER_ISOLATION=process: expected 'inline' or 'worker'");
    const msg = refused({ SCHEDULER_MAX_RESULT_SIZE: '20MB' });
    expect(msg).toMatch(/^invalid setting SCHEDULER_MAX_RESULT_SIZE=20MB: expected a size such as '1MB'/);
    expect(msg.split('\n')).toHaveLength(1);
    expect(refused({ SCHEDULER_MAX_RESULT_SIZE: 'big' })).toMatch(/SCHEDULER_MAX_RESULT_SIZE=big: expected a size/);
  });

  it('formatSize', () => {
    expect([formatSize(1048576), formatSize(2048), formatSize(1500), formatSize(0)]).toEqual(['1MB', '2KB', '1500B', '0B']);
  });
});

describe("the job field 'isolation'", () => {
  const noop = () => {};
  it("defaults to the setting's value, else inline; a job's own value wins", () => {
    expect(validateJob('jobs/a.ts', { schedule: '* * * * *', run: noop }, 'UTC').job!.isolation).toBe('inline');
    expect(validateJob('jobs/a.ts', { schedule: '* * * * *', run: noop }, 'UTC', { isolation: 'worker' }).job!.isolation).toBe('worker');
    expect(validateJob('jobs/a.ts', { schedule: '* * * * *', run: noop, isolation: 'inline' }, 'UTC', { isolation: 'worker' }).job!.isolation).toBe('inline');
  });
  it('a bad value is one line naming the file, the field, the value and what was expected', () => {
    const { job, problems } = validateJob('jobs/a.ts', { schedule: '* * * * *', run: noop, isolation: 'thread' }, 'UTC');
    expect(job).toBeUndefined();
    expect(problems).toEqual([`jobs/a.ts: field 'isolation' = "thread": expected 'inline' or 'worker'`]);
  });
});

describe('LoopWatchdog', () => {
  const watchdogs: LoopWatchdog[] = [];
  afterEach(() => {
    for (const w of watchdogs.splice(0)) w.stop();
  });

  function capture(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
    const lines: Array<Record<string, unknown>> = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    return { log: pino({ level: 'info' }, stream), lines };
  }

  const block = (ms: number) => {
    const t = Date.now();
    while (Date.now() - t < ms) { /* the loop is blocked */ }
  };
  const run = (job: string) => ({ job, periodKey: `${job}@2026-12-01T00:00:00.000Z`, runId: `${job}-1` });

  it('names the body whose synchronous part blocked the loop, and how long; not the one awaiting beside it', async () => {
    const { log, lines } = capture();
    const w = new LoopWatchdog(log, { intervalMs: 20, thresholdMs: 300 });
    watchdogs.push(w);
    const waiting = w.enter(run('waiting'));
    waiting.returned();
    await new Promise((r) => setTimeout(r, 50));
    const hog = w.enter(run('hog'));
    block(600);
    hog.returned();
    hog.ended();
    await waitFor('the warning', () => lines.find((l) => l.level === 40) ?? false, 5000, 10);
    const [line] = lines;
    expect(line!.jobs).toEqual(['hog']);
    expect(line!.runs).toEqual([run('hog')]);
    expect(line!.blockedMs as number).toBeGreaterThanOrEqual(500);
    expect(line!.msg).toMatch(/^event loop blocked for \d+ ms while inline job body hog ran/);
    waiting.ended();
  });

  it('a block after an await names every inline body running then; no block, no line; ended bodies are forgotten', async () => {
    const { log, lines } = capture();
    const w = new LoopWatchdog(log, { intervalMs: 20, thresholdMs: 300 });
    watchdogs.push(w);
    const a = w.enter(run('a'));
    a.returned();
    const b = w.enter(run('b'));
    b.returned();
    await new Promise((r) => setTimeout(r, 100));
    expect(lines).toEqual([]);
    block(500); // after both returned their promise: either may be the one
    await waitFor('the warning', () => lines.length > 0, 5000, 10);
    expect(lines[0]!.jobs).toEqual(['a', 'b']);
    a.ended();
    b.ended();
    await new Promise((r) => setTimeout(r, 100));
    block(500);
    await waitFor('the second warning', () => lines.length > 1, 5000, 10);
    expect(lines[1]!.jobs).toEqual([]);
    expect(lines[1]!.msg).toMatch(/no inline job body was running/);
  });

  it('a block while 300 bodies await names the first 10 and counts the rest: one readable line, not 300 names', async () => {
    const { log, lines } = capture();
    const w = new LoopWatchdog(log, { intervalMs: 20, thresholdMs: 300 });
    watchdogs.push(w);
    const names = Array.from({ length: 300 }, (_, i) => `job-${String(i).padStart(3, '0')}`);
    const bodies = names.map((n) => w.enter(run(n)));
    for (const b of bodies) b.returned();
    await new Promise((r) => setTimeout(r, 50));
    block(500);
    await waitFor('the warning', () => lines.length > 0, 5000, 10);
    const [line] = lines;
    expect(line!.jobs).toEqual(names.slice(0, NAMED_JOBS));
    expect(line!.jobCount).toBe(300);
    expect(line!.runs).toHaveLength(NAMED_JOBS);
    expect(line!.msg).toBe(`event loop blocked for ${line!.blockedMs} ms while inline job body ${names.slice(0, NAMED_JOBS).join(', ')} and 290 more ran (isolation: 'worker' runs a body in a thread of its own)`);
    for (const b of bodies) b.ended();
  });
});
