/**
 * Optional in-process tracer for the latency breakdown (node --import bench/trace-preload.mjs ...).
 * It changes nothing in src/: it wraps methods of the compiled classes in dist/ (same module
 * instances the daemon imports), subscribes to mysql2's `mysql2:query` tracing channel, times
 * ioredis commands and the synchronous log writes to fd 1/2, and tags everything with the period
 * being handled (AsyncLocalStorage set around PeriodRunner.runPeriod). Events are written as JSON
 * lines to $BENCH_TRACE_OUT when the process exits.
 *
 * Only used by the `trace` scenario: the headline latency figures come from untraced processes.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import dc from 'node:diagnostics_channel';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';

const OUT = process.env.BENCH_TRACE_OUT;
// The daemon's own dist/ (the benchmark runs a private build; BENCH_DIST names it).
const dist = process.env.BENCH_DIST ? pathToFileURL(`${process.env.BENCH_DIST.replace(/\/$/, '')}/`) : new URL('../dist/', import.meta.url);
const require = createRequire(new URL('../package.json', dist));

const now = () => performance.timeOrigin + performance.now();
const als = new AsyncLocalStorage();
const events = [];
const keyNow = () => als.getStore()?.key;

const { Scheduler } = await import(new URL('daemon/scheduler.js', dist));
const { PeriodRunner } = await import(new URL('run/period.js', dist));
const { Claimer } = await import(new URL('claim/claim.js', dist));
const { RedlockProvider } = await import(new URL('claim/redlock-provider.js', dist));
const { KnexRunStore } = await import(new URL('store/runs.js', dist));
const { Executor } = await import(new URL('run/execute.js', dist));

// The timer callback of the tick loop.
{
  const orig = Scheduler.prototype.tick;
  Scheduler.prototype.tick = function tick(...args) {
    events.push({ ev: 'tick', t: now() });
    return orig.apply(this, args);
  };
}

// Everything a period does runs inside runPeriod: tag it.
{
  const orig = PeriodRunner.prototype.runPeriod;
  PeriodRunner.prototype.runPeriod = function runPeriod(job, scheduledAt, trigger, ...rest) {
    const key = `${job.name}@${scheduledAt.toISOString()}`;
    return als.run({ key }, () => {
      events.push({ ev: 'runPeriod', key, trigger, t: now() });
      return orig.call(this, job, scheduledAt, trigger, ...rest);
    });
  };
}

function wrapAsync(proto, name, label, describe) {
  const orig = proto[name];
  proto[name] = async function wrapped(...args) {
    const t0 = now();
    const key = keyNow();
    try {
      const r = await orig.apply(this, args);
      events.push({ ev: label, key, t0, t1: now(), res: describe ? describe(r) : undefined });
      return r;
    } catch (err) {
      events.push({ ev: label, key, t0, t1: now(), err: String(err?.message ?? err).slice(0, 120) });
      throw err;
    }
  };
}

wrapAsync(Claimer.prototype, 'claim', 'claim', (r) => r.outcome);
wrapAsync(RedlockProvider.prototype, 'tryAcquire', 'lock', (r) => (r === null ? 'held' : 'acquired'));
for (const m of ['liveRuns', 'insertRun', 'finishRun', 'heartbeat', 'periodsWithRows', 'insertSkipped', 'lastRuns']) {
  wrapAsync(KnexRunStore.prototype, m, `store.${m}`, (r) => (m === 'insertRun' ? r.outcome : undefined));
}

// Executor.execute is synchronous up to the body's promise chain; mark its entry.
{
  const orig = Executor.prototype.execute;
  Executor.prototype.execute = function execute(...args) {
    events.push({ ev: 'execute', key: keyNow(), t: now() });
    return orig.apply(this, args);
  };
}

// Each SQL statement, timed on the wire (query sent -> result callback), with its period.
{
  const ch = dc.tracingChannel('mysql2:query');
  ch.subscribe({
    start(ctx) {
      ctx.benchT0 = now();
      ctx.benchKey = keyNow();
    },
    asyncStart(ctx) {
      // One event per statement; a failed one carries its error code (the error channel fires first).
      const err = ctx.error ? String(ctx.error.code ?? ctx.error) : undefined;
      events.push({ ev: 'sql', key: ctx.benchKey, t0: ctx.benchT0, t1: now(), sql: String(ctx.query).slice(0, 300), err });
    },
    end() {},
    asyncEnd() {},
    error() {},
  });
}

// Each Redis command (Redlock sends one EVALSHA per master), timed from send to reply.
{
  const { Redis } = require('ioredis');
  const orig = Redis.prototype.sendCommand;
  Redis.prototype.sendCommand = function sendCommand(command, stream) {
    const key = keyNow();
    if (key) {
      const t0 = now();
      const port = this.options?.port;
      command.promise.then(
        (res) => events.push({ ev: 'redis', key, t0, t1: now(), cmd: command.name, port, res: typeof res === 'number' ? res : undefined }),
        (err) => events.push({ ev: 'redis', key, t0, t1: now(), cmd: command.name, port, err: String(err?.message ?? err).slice(0, 60) }),
      );
    }
    return orig.call(this, command, stream);
  };
}

// Synchronous log writes (pino -> sonic-boom -> fs.writeSync on fd 1 or 2) inside a period.
{
  const orig = fs.writeSync;
  fs.writeSync = function writeSync(fd, ...rest) {
    const key = fd === 1 || fd === 2 ? keyNow() : undefined;
    if (!key) return orig.call(this, fd, ...rest);
    const t0 = now();
    try {
      return orig.call(this, fd, ...rest);
    } finally {
      events.push({ ev: 'log', key, t0, t1: now() });
    }
  };
}

process.on('exit', () => {
  if (!OUT) return;
  fs.writeFileSync(OUT, events.map((e) => JSON.stringify(e)).join('\n') + '\n');
});
