/**
 * The operators' actions over HTTP, each a POST with a JSON body, each through the same function as
 * its command (src/actions/): the same rules, the same refusals, the same audit entry, with the
 * caller's token name as the actor.
 *
 *   POST /api/jobs/<name>/run                  { "force"?, "shard"? }          run now (run-once <job>)
 *   POST /api/jobs/<name>/periods/<ISO>/run    { "force"?, "shard"? }          re-run a period (run-once <job> --period)
 *   POST /api/jobs/<name>/pause                { "reason"? }                   pause
 *   POST /api/jobs/<name>/resume               {}                              resume
 *   POST /api/jobs/<name>/cancel               { "period"?, "reason"?, "wait"? } cancel (wait: seconds, default 10)
 *   POST /api/jobs/<name>/backfill             { "from", "to", "concurrency"?, "force"?, "dryRun"? } backfill (202; the daemons run it)
 *   POST /api/backfills/<id>/pause|resume|cancel {}                             backfill --pause|--resume|--cancel <id>
 *
 * A run by hand runs on the node that answers (it must define the job) and is answered 202 as soon
 * as its claim is won, before its body runs; its outcome is in the history and its log.
 */
import { z } from 'zod';
import { SchedulerError, errorMessage } from '../errors.js';
import type { InvalidJobFile, Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime.js';
import { unknownJob } from '../jobs/unknown.js';
import { changePause, parseReason, MAX_REASON_CHARS } from '../actions/pause.js';
import { cancelRunning } from '../actions/cancel.js';
import { runByHand } from '../actions/run.js';
import { changeBackfill, parseConcurrency, startBackfill } from '../actions/backfill.js';
import { parsePeriod, type ManualStart } from '../run/pass.js';
import { parseInstantFlag } from '../time/instant.js';
import type { Caller } from './access.js';
import { json, type ActionHandler, type ActionRouter, type Reply } from './server.js';

export interface ActionContext {
  rt: Runtime;
  jobs: Job[];
  invalid: InvalidJobFile[];
  nodeId: string;
  log: Logger;
  /** Keeps a run started by an action in the daemon's shutdown (it waits for it, then interrupts it). */
  track: (p: Promise<unknown>) => void;
  stopping: () => boolean;
  /** Reads the views' cached summaries again (paused, running), so that the page reloaded after an action shows it. */
  refreshViews: () => Promise<void>;
}

/** How long an action's answer waits, at most, for the views to be read again. */
const REFRESH_VIEWS_MS = 2000;

/** How long a cancel over HTTP waits for the attempt to end, by default and at most (seconds). */
export const CANCEL_WAIT_DEFAULT_S = 10;
export const CANCEL_WAIT_MAX_S = 60;

const runBody = z.object({ force: z.boolean().optional(), shard: z.number().int().min(0).optional() }).strict();
const pauseBody = z.object({ reason: z.string().max(MAX_REASON_CHARS * 4).nullable().optional() }).strict();
const emptyBody = z.object({}).strict();
const cancelBody = z.object({
  period: z.string().optional(), reason: z.string().max(MAX_REASON_CHARS * 4).nullable().optional(),
  wait: z.number().min(0).max(CANCEL_WAIT_MAX_S).optional(),
}).strict();

const backfillBody = z.object({
  from: z.string(), to: z.string(), concurrency: z.number().int().optional(), force: z.boolean().optional(), dryRun: z.boolean().optional(),
}).strict();

const ACTION_PATH = /^\/api\/jobs\/([^/]+)\/(run|pause|resume|cancel|backfill|periods\/([^/]+)\/run)$/;
const BACKFILL_PATH = /^\/api\/backfills\/([A-Za-z0-9-]{1,32})\/(pause|resume|cancel)$/;

export function actionRouter(context: () => ActionContext | null): ActionRouter {
  return (url) => {
    const m = ACTION_PATH.exec(url.pathname);
    const b = m ? null : BACKFILL_PATH.exec(url.pathname);
    if (!m && !b) return null;
    const handler: ActionHandler = async (body, caller) => {
      const ctx = context();
      if (!ctx) return json(503, { error: 'starting: the jobs are not loaded yet' });
      const reply = m ? await take(ctx, m, url, body, caller) : await backfillChange(ctx, b!, body, caller);
      if (reply.status < 300) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([ctx.refreshViews(), new Promise<void>((r) => { timer = setTimeout(r, REFRESH_VIEWS_MS); })]);
        clearTimeout(timer);
      }
      return reply;
    };
    return handler;
  };
}

async function take(ctx: ActionContext, m: RegExpExecArray, url: URL, body: Record<string, unknown>, caller: Caller): Promise<Reply> {
  let name: string;
  let periodText: string | undefined;
  try {
    name = decodeURIComponent(m[1]!);
    periodText = m[3] === undefined ? undefined : decodeURIComponent(m[3]);
  } catch {
    return json(400, { error: 'invalid job name or period in the path', path: url.pathname });
  }
  try {
    const what = m[3] !== undefined ? 'rerun' : (m[2] as 'run' | 'pause' | 'resume' | 'cancel' | 'backfill');
    if (what === 'backfill') return await backfill(ctx, name, parse(backfillBody, body), caller);
    if (what === 'run' || what === 'rerun') return await run(ctx, name, periodText, parse(runBody, body), caller);
    if (what === 'pause' || what === 'resume') {
      const reason = what === 'pause' ? parseReason(parse(pauseBody, body).reason ?? undefined, 'reason') : (parse(emptyBody, body), null);
      const report = await changePause(ctx.rt, {
        job: name, pause: what === 'pause', reason, actor: caller.actor, warn: warnTo(ctx.log),
        local: { names: ctx.jobs.map((j) => j.name), invalid: ctx.invalid },
      });
      return json(200, report);
    }
    const b = parse(cancelBody, body);
    const period = b.period === undefined ? undefined : parseInstantFlag('period', b.period);
    const report = await cancelRunning(ctx.rt, {
      job: name, ...(period ? { period } : {}), reason: parseReason(b.reason ?? undefined, 'reason'), actor: caller.actor,
      waitMs: (b.wait ?? CANCEL_WAIT_DEFAULT_S) * 1000, warn: warnTo(ctx.log),
    });
    return json(200, report);
  } catch (err) {
    return errorReply(err);
  }
}

/** Starts (or continues) a backfill; its periods run on the daemons that define the job. */
async function backfill(ctx: ActionContext, name: string, body: z.infer<typeof backfillBody>, caller: Caller): Promise<Reply> {
  const job = ctx.jobs.find((j) => j.name === name);
  if (!job) throw unknownJob(name, ctx.jobs.map((j) => j.name), ctx.invalid);
  const from = parseInstantFlag('from', body.from)!;
  const to = parseInstantFlag('to', body.to)!;
  const start = await startBackfill(ctx.rt, { job, from, to, concurrency: parseConcurrency(body.concurrency, 'concurrency'), force: body.force === true, dryRun: body.dryRun === true, actor: caller.actor, warn: warnTo(ctx.log) });
  if (start.dryRun) return json(200, { dryRun: true, job: name, ...start.dryRun });
  return json(start.created ? 202 : 200, { created: start.created, backfill: start.backfill });
}

async function backfillChange(ctx: ActionContext, m: RegExpExecArray, body: Record<string, unknown>, caller: Caller): Promise<Reply> {
  try {
    parse(emptyBody, body);
    const view = await changeBackfill(ctx.rt, m[1]!, m[2] as 'pause' | 'resume' | 'cancel', caller.actor, warnTo(ctx.log));
    return json(200, { backfill: view });
  } catch (err) {
    return errorReply(err);
  }
}

async function run(ctx: ActionContext, name: string, periodText: string | undefined, body: z.infer<typeof runBody>, caller: Caller): Promise<Reply> {
  const job = ctx.jobs.find((j) => j.name === name);
  if (!job) {
    const err = unknownJob(name, ctx.jobs.map((j) => j.name), ctx.invalid);
    return json(err.code === 'E_JOB_INVALID' ? 409 : 404, { error: `${err.message} (on this node, ${ctx.nodeId}: a run by hand runs on the node that answers)`, job: name });
  }
  if (ctx.stopping()) return json(503, { error: `this node (${ctx.nodeId}) is stopping: it takes no new runs` });
  const period = periodText === undefined ? undefined : parsePeriod(job, periodText, new Date(ctx.rt.clock.now()));
  const count = job.shards ?? 1;
  if (body.shard !== undefined && body.shard >= count) {
    throw new SchedulerError('E_USAGE', `invalid shard ${body.shard}: job '${job.name}' has ${count} shard${count === 1 ? '' : 's'} (0 to ${count - 1})`);
  }
  let started: (s: ManualStart) => void = () => {};
  const start = new Promise<ManualStart>((resolve) => (started = resolve));
  const done = runByHand(ctx.rt, {
    job, ...(period ? { period } : {}), force: body.force === true, ...(body.shard !== undefined ? { shard: body.shard } : {}),
    actor: caller.actor, onStarted: started, warn: warnTo(ctx.log),
  });
  const finished = done.then(() => null, (err: unknown) => err);
  ctx.track(finished);
  const first: { s?: ManualStart; err?: unknown } = await Promise.race([start.then((s) => ({ s })), finished.then((err) => ({ err }))]);
  if ('err' in first) {
    if (first.err !== null) return errorReply(first.err);
    // Ended, and its claim's start was told first unless there was none (runManual throws then): a settled `start` says.
    const told = await Promise.race([start, Promise.resolve(null)]);
    if (!told) return json(500, { error: `the run of '${job.name}' ended without a claim of its own` });
    first.s = told;
  }
  const s = (first as { s: ManualStart }).s;
  // The attempts' ids, for their log and a cancel: read back by the period's rows of this node.
  const shards = s.shards?.map((x) => x.index) ?? (count > 1 ? Array.from({ length: count }, (_, i) => i) : [0]);
  const rows = (await Promise.all(shards.map((i) => ctx.rt.store.periodRuns(job.name, s.scheduledAt, i)))).flat();
  const attempts = rows.filter((r) => r.trigger === 'manual' && r.nodeId === ctx.nodeId && (s.shards ? s.shards.some((x) => x.index === r.shard && x.attempt === r.attempt) : r.attempt === s.attempt))
    .map((r) => ({ runId: r.id, shard: r.shard, attempt: r.attempt, status: r.status, log: `/api/runs/${r.id}/log` }));
  return json(202, { action: period ? 'rerun' : 'run', job: job.name, period: s.scheduledAt.toISOString(), force: body.force === true, nodeId: ctx.nodeId, started: true, attempts });
}

function parse<T extends z.ZodTypeAny>(schema: T, body: Record<string, unknown>): z.infer<T> {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.join('.');
  const keys = issue.code === 'unrecognized_keys' ? (issue as { keys: string[] }).keys.join(', ') : '';
  throw new SchedulerError('E_USAGE', keys ? `unknown field(s) in the body: ${keys}` : `invalid body field ${field}: ${issue.message}`);
}

/** A refusal or an error as the API answers it: the CLI's exit status, as an HTTP status. */
export function errorReply(err: unknown): Reply {
  const message = errorMessage(err).split('\n')[0]!;
  const code = err instanceof SchedulerError ? err.code : null;
  const status = code === 'E_USAGE' || code === 'E_NOT_A_PERIOD' || code === 'E_CONFIG' ? 400
    : code === 'E_UNKNOWN_JOB' || code === 'E_NOT_FOUND' ? 404
    : code === 'E_REFUSED' || code === 'E_JOB_INVALID' ? 409
    : code === 'E_STORE_UNAVAILABLE' || code === 'E_LOCK_UNAVAILABLE' ? 503
    : 500;
  return json(status, { error: message, ...(code ? { code } : {}), ...(code === 'E_REFUSED' ? { refused: true } : {}) });
}

function warnTo(log: Logger): (line: string) => void {
  return (line) => log.warn(line.replace(/^scheduler: warning: /, ''));
}
