/**
 * The fault suite's harness: a cluster of real `bin/scheduler run` processes against a store and
 * Redis servers this suite owns, and job bodies that record their own side effects (JSON lines with
 * event, period key, attempt, node and time), independent of the scheduler's rows.
 */
import { createServer, Socket, type Server } from 'node:net';
import { Redis } from 'ioredis';
import { Daemon, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/redis.js';
import type { HistoryRun, Workspace } from '../helpers/workspace.js';

export interface Effect {
  /** 'fail': the body threw on purpose (attemptJob's failAttempts), after its work. */
  ev: 'start' | 'end' | 'abort' | 'fail';
  key: string;
  attempt: number;
  node: string;
  trigger?: string;
  reason?: string;
  t: number;
}

/** A job body that records start, end and abort, and runs `durationMs` unless its signal aborts. */
export function faultJob(options: { schedule: string; durationMs: number; extra?: Record<string, unknown> }): string {
  const extra = Object.entries(options.extra ?? {}).map(([k, v]) => `  ${k}: ${JSON.stringify(v)},`).join('\n');
  return `import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
export default {
  schedule: ${JSON.stringify(options.schedule)},
${extra}
  async run(ctx) {
    const me = { key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId };
    rec({ ev: 'start', ...me, trigger: ctx.trigger });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ${options.durationMs});
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        rec({ ev: 'abort', ...me, reason: String(ctx.signal.reason) });
        reject(new Error('aborted: ' + String(ctx.signal.reason)));
      });
    });
    rec({ ev: 'end', ...me });
    return { ok: true };
  },
};
`;
}

export class Cluster {
  readonly nodes = new Map<string, Daemon>();
  constructor(private readonly ws: Workspace, private readonly env: Record<string, string>) {}

  start(nodeId: string, extraEnv: Record<string, string> = {}, command?: string[]): Daemon {
    const daemon = new Daemon([], {
      cwd: this.ws.dir,
      command,
      env: {
        ...this.env,
        SCHEDULER_NODE_ID: nodeId,
        SCHEDULER_JOBS_DIR: this.ws.jobsDir,
        SIDE_EFFECTS: this.ws.path('effects.jsonl'),
        SCHEDULER_LOG_LEVEL: 'info',
        ...extraEnv,
      },
    });
    this.nodes.set(nodeId, daemon);
    return daemon;
  }

  /** Waits until the node has logged 'scheduler started'. */
  async started(nodeId: string): Promise<void> {
    const d = this.nodes.get(nodeId)!;
    await waitFor(`${nodeId} to start`, () => d.logs().some((l) => l.msg === 'scheduler started') || (d.proc.exitCode !== null ? Promise.reject(new Error(`${nodeId} exited ${d.proc.exitCode}: ${d.errors}${d.output.slice(-2000)}`)) : false), 30_000);
  }

  effects(): Effect[] {
    return this.ws.records<Effect>('effects.jsonl');
  }

  async stopAll(): Promise<Array<number | null>> {
    return Promise.all([...this.nodes.values()].map((d) => d.stop('SIGTERM', 60_000)));
  }

  /** kill -9 of a node; resolves with the moment it was seen dead. */
  async kill(nodeId: string): Promise<number> {
    const d = this.nodes.get(nodeId)!;
    d.proc.kill('SIGKILL');
    await d.exited;
    return Date.now();
  }

  /** SIGTERM to every node still running except `except`; their exit codes. */
  async stopOthers(except: string[]): Promise<Array<number | null>> {
    return Promise.all([...this.nodes].filter(([id, d]) => !except.includes(id) && d.proc.exitCode === null && d.proc.signalCode === null).map(([, d]) => d.stop('SIGTERM', 60_000)));
  }

  /** SIGKILL of every node still running (cleanup after a failed test). */
  async killAll(): Promise<void> {
    await Promise.all([...this.nodes.values()].filter((d) => d.proc.exitCode === null && d.proc.signalCode === null).map(async (d) => {
      d.proc.kill('SIGKILL');
      await d.exited;
    }));
  }

  async history(): Promise<HistoryRun[]> {
    const r = await runCli(['history', '--json', '--limit', '100000'], { cwd: this.ws.dir, env: { ...this.env, SCHEDULER_JOBS_DIR: this.ws.jobsDir } });
    if (r.code !== 0) throw new Error(`history exited ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as HistoryRun[];
  }
}

/** Side effects grouped by period key, then by attempt. */
export function byPeriod(effects: Effect[]): Map<string, Map<number, Effect[]>> {
  const out = new Map<string, Map<number, Effect[]>>();
  for (const e of effects) {
    const attempts = out.get(e.key) ?? new Map<number, Effect[]>();
    out.set(e.key, attempts);
    const list = attempts.get(e.attempt) ?? [];
    list.push(e);
    attempts.set(e.attempt, list);
  }
  return out;
}

/** No period's body started twice in one attempt. Returns the offending (period, attempt) pairs. */
export function duplicateStarts(effects: Effect[]): string[] {
  const seen = new Map<string, number>();
  for (const e of effects) if (e.ev === 'start') seen.set(`${e.key}#${e.attempt}`, (seen.get(`${e.key}#${e.attempt}`) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`);
}

/**
 * Attempts of one period never overlapped: attempt n+1 started after attempt n ended or aborted, or
 * after its node was killed (`deaths`: node -> kill time). `pausedOk` lists attempts allowed to
 * overlap because their node was paused (they must have aborted with lease-lost).
 */
export function overlappingAttempts(effects: Effect[], deaths: Map<string, number>, pausedOk = new Set<string>()): string[] {
  const problems: string[] = [];
  for (const [key, attempts] of byPeriod(effects)) {
    const numbers = [...attempts.keys()].sort((a, b) => a - b);
    for (let i = 1; i < numbers.length; i++) {
      const prev = attempts.get(numbers[i - 1]!)!;
      const next = attempts.get(numbers[i]!)!;
      const nextStart = next.find((e) => e.ev === 'start')?.t;
      if (nextStart === undefined) continue;
      const prevStart = prev.find((e) => e.ev === 'start');
      const prevEnd = prev.find((e) => e.ev === 'end' || e.ev === 'abort' || e.ev === 'fail');
      const tag = `${key}#${numbers[i - 1]}`;
      if (prevEnd && prevEnd.t <= nextStart) continue;
      if (!prevEnd && prevStart && deaths.has(prevStart.node) && deaths.get(prevStart.node)! <= nextStart) continue;
      if (pausedOk.has(tag) && prevEnd?.ev === 'abort' && prevEnd.reason === 'lease-lost') continue;
      problems.push(`${tag} overlapped attempt ${numbers[i]} (prev end ${prevEnd?.t ?? 'none'}, next start ${nextStart})`);
    }
  }
  return problems;
}

/** Every whole-second period between two instants (exclusive bounds), as ISO strings. */
export function secondsBetween(fromMs: number, toMs: number, stepMs = 1000): string[] {
  const out: string[] = [];
  for (let t = Math.ceil((fromMs + 1) / stepMs) * stepMs; t < toMs; t += stepMs) out.push(new Date(t).toISOString());
  return out;
}

/**
 * A TCP proxy in front of the store, so that the suite can cut the store off (every connection
 * reset, new ones refused) and bring it back, without touching the shared server.
 */
export class StoreProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;
  constructor(private readonly targetPort: number, private readonly targetHost = '127.0.0.1') {}

  async start(port = 0): Promise<number> {
    this.server = createServer((client) => {
      const upstream = new Socket();
      this.sockets.add(client);
      this.sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      upstream.connect(this.targetPort, this.targetHost, () => {
        client.pipe(upstream);
        upstream.pipe(client);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', () => resolve()));
    this.port = (this.server.address() as { port: number }).port;
    return this.port;
  }

  /** Resets every connection and stops listening (new connections are refused). */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.resetAndDestroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async restore(): Promise<void> {
    await this.start(this.port);
  }

  async close(): Promise<void> {
    await this.cut();
  }
}

/**
 * A job body like faultJob's, whose behaviour depends on ctx.attempt: it runs `durationsMs[attempt - 1]`
 * (the last entry for later attempts) unless its signal aborts, then throws (recording 'fail') when
 * the attempt is listed in `failAttempts`, else records 'end'.
 */
export function attemptJob(options: { schedule: string; durationsMs: number[]; failAttempts?: number[]; extra?: Record<string, unknown> }): string {
  const extra = Object.entries(options.extra ?? {}).map(([k, v]) => `  ${k}: ${JSON.stringify(v)},`).join('\n');
  return `import { appendFileSync } from 'node:fs';
const rec = (o) => appendFileSync(process.env.SIDE_EFFECTS, JSON.stringify({ ...o, t: Date.now() }) + '\\n');
const durations = ${JSON.stringify(options.durationsMs)};
const failAttempts = ${JSON.stringify(options.failAttempts ?? [])};
export default {
  schedule: ${JSON.stringify(options.schedule)},
${extra}
  async run(ctx) {
    const me = { key: ctx.periodKey, attempt: ctx.attempt, node: ctx.nodeId };
    rec({ ev: 'start', ...me, trigger: ctx.trigger });
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

/**
 * A 6-field schedule whose periods are `offsetsSec` seconds after an instant about `leadMs` from now,
 * repeated every `everySec` seconds (a divisor of 60), so that a test waits seconds, not a whole
 * interval, for its first period, and a slow start only moves it to the next repetition. `first` is
 * the first period instant (ms).
 */
export function soonSchedule(leadMs: number, everySec = 20, offsetsSec: number[] = [0]): { schedule: string; first: number } {
  if (60 % everySec !== 0) throw new Error(`soonSchedule: ${everySec} does not divide 60`);
  const first = Math.ceil((Date.now() + leadMs) / 1000) * 1000;
  const s0 = new Date(first).getUTCSeconds();
  const seconds = new Set<number>();
  for (let k = 0; k < 60 / everySec; k++) for (const o of offsetsSec) seconds.add((s0 + o + k * everySec) % 60);
  return { schedule: `${[...seconds].sort((a, b) => a - b).join(',')} * * * * *`, first };
}

/**
 * Sets a Redlock resource (`<prefix>lock:<job>@<ISO>`) with one random value on the given masters,
 * NX with a TTL, as a lock winner that died before its INSERT leaves it. Returns each master's answer
 * ('OK', or null when the key was already there).
 */
export async function plantLockKey(urls: string[], resource: string, ttlMs: number): Promise<Array<string | null>> {
  const value = `planted-${Math.random().toString(36).slice(2)}`;
  return Promise.all(urls.map(async (url) => {
    const c = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
    c.on('error', () => {});
    try {
      await c.connect();
      return await c.set(resource, value, 'PX', ttlMs, 'NX');
    } finally {
      c.disconnect();
    }
  }));
}
