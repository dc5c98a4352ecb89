/**
 * Job files as users write them. Every body records its own side effects as JSON lines in the file
 * named by the SIDE_EFFECTS environment variable (one `appendFileSync` per line: atomic enough across
 * processes for short lines), so that a test or a benchmark counts what the bodies really did,
 * independently of the scheduler's rows. Two record shapes:
 *   jobSource            { event, job, periodKey, scheduledAt, attempt, trigger, nodeId, runId, dryRun, pid, at }
 *   attemptJob and kin   { ev, key, attempt, node, pid, trigger, sched, t } (the fault suite's and benchmarks')
 */

const BODY_PRELUDE = `import { appendFileSync, existsSync } from 'node:fs';

// Appends one JSON line describing this body's side effect.
const record = (ctx, event, extra = {}) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({
  event, job: ctx.job, periodKey: ctx.periodKey, scheduledAt: ctx.scheduledAt.toISOString(), attempt: ctx.attempt,
  trigger: ctx.trigger, nodeId: ctx.nodeId, runId: ctx.runId, dryRun: ctx.dryRun, pid: process.pid, at: Date.now(), ...extra,
}) + '\\n');

// Waits ms milliseconds; rejects when the signal aborts (after recording the abort and its reason).
const sleep = (ctx, ms) => new Promise((resolve, reject) => {
  const timer = setTimeout(resolve, ms);
  const onAbort = () => {
    clearTimeout(timer);
    record(ctx, 'aborted', { reason: ctx.signal.reason });
    reject(new Error('aborted: ' + ctx.signal.reason));
  };
  if (ctx.signal.aborted) onAbort();
  else ctx.signal.addEventListener('abort', onAbort, { once: true });
});

// Waits until a file exists (the test releases the body that way), or the signal aborts.
const waitForFile = async (ctx, file, maxMs = 60000) => {
  const until = Date.now() + maxMs;
  while (!existsSync(file)) {
    if (Date.now() > until) throw new Error('never released: ' + file);
    await sleep(ctx, 50);
  }
};
`;

/**
 * A job file (ESM JavaScript; jiti loads TypeScript the same way). `fields` are the definition's
 * fields as source text (`schedule: '0 0 * * *', catchUp: '2d',`); `body` runs after the body has
 * recorded its 'start' side effect and may use record(ctx, event, extra), sleep(ctx, ms) and
 * waitForFile(ctx, path).
 */
export function jobSource(fields, body = '') {
  return `${BODY_PRELUDE}
export default {
  ${fields}
  async run(ctx) {
    record(ctx, 'start');
    ${body}
  },
};
`;
}

/** `  key: <JSON>,` lines of a definition. */
export const definitionFields = (fields) => Object.entries(fields).map(([k, v]) => `  ${k}: ${JSON.stringify(v)},`).join('\n');

const EFFECT_PRELUDE = `import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
const who = (ctx) => ({ key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId, pid: process.pid });`;

/**
 * A body that records 'start', runs `durationsMs[attempt - 1]` (the last entry for later attempts)
 * unless its signal aborts ('abort', with the reason), then throws ('fail') when the attempt is in
 * `failAttempts`, else records 'end'. `extra`: further fields of the definition (lockTtl, catchUp...).
 */
export function attemptJob({ schedule, durationsMs, failAttempts = [], extra = {} }) {
  return `${EFFECT_PRELUDE}
const durations = ${JSON.stringify(durationsMs)};
const failAttempts = ${JSON.stringify(failAttempts)};
export default {
${definitionFields({ schedule, ...extra })}
  async run(ctx) {
    const me = who(ctx);
    rec({ ev: 'start', ...me, trigger: ctx.trigger, sched: ctx.scheduledAt.getTime() });
    const ms = durations[Math.min(ctx.attempt, durations.length) - 1];
    await new Promise((resolve, reject) => {
      const onAbort = () => {
        clearTimeout(timer);
        rec({ ev: 'abort', ...me, reason: String(ctx.signal.reason) });
        reject(new Error('aborted: ' + String(ctx.signal.reason)));
      };
      const timer = setTimeout(() => {
        ctx.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      if (ctx.signal.aborted) onAbort();
      else ctx.signal.addEventListener('abort', onAbort, { once: true });
    });
    if (failAttempts.includes(ctx.attempt)) {
      rec({ ev: 'fail', ...me });
      throw new Error('planned failure of attempt ' + ctx.attempt);
    }
    rec({ ev: 'end', ...me });
    return { ok: true, attempt: ctx.attempt };
  },
};
`;
}

/** attemptJob with one duration for every attempt. */
export function faultJob({ schedule, durationMs, extra = {} }) {
  return attemptJob({ schedule, durationsMs: [durationMs], extra });
}

/** attemptJob whose attempt 1 runs `firstMs` and later attempts `laterMs`, with a lockTtl. */
export function longJobSource({ schedule, lockTtl, firstMs, laterMs, extra = {} }) {
  return attemptJob({ schedule, durationsMs: [firstMs, laterMs], extra: { lockTtl, ...extra } });
}

/** A trivial, synchronous body: one 'start' line with the period instant, nothing else. */
export function trivialJobSource({ schedule, extra = {} }) {
  return `${EFFECT_PRELUDE}
export default {
${definitionFields({ schedule, ...extra })}
  run(ctx) {
    rec({ ev: 'start', ...who(ctx), trigger: ctx.trigger, sched: ctx.scheduledAt.getTime() });
  },
};
`;
}

/**
 * A 6-field schedule whose periods are `offsetsSec` seconds after an instant about `leadMs` from now,
 * repeated every `everySec` seconds (a divisor of 60), so that a test waits seconds, not a whole
 * interval, for its first period, and a slow start only moves it to the next repetition. `first` is
 * the first period instant (ms).
 */
export function soonSchedule(leadMs, everySec = 20, offsetsSec = [0]) {
  if (60 % everySec !== 0) throw new Error(`soonSchedule: ${everySec} does not divide 60`);
  const first = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  const s0 = new Date(first).getUTCSeconds();
  const seconds = new Set();
  for (let k = 0; k < 60 / everySec; k++) for (const o of offsetsSec) seconds.add((s0 + o + k * everySec) % 60);
  return { schedule: `${[...seconds].sort((a, b) => a - b).join(',')} * * * * *`, first };
}
