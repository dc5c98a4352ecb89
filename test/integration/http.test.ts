/**
 * The daemon's HTTP server, as operators use it: the real `bin/scheduler run` on an ephemeral port
 * (SCHEDULER_HTTP=127.0.0.1:0, the bound URL read from its "http server listening" line), probed with
 * fetch. Probes, /metrics (also as `promtool check metrics` reads it), the token, /api, bind
 * failures, and a PostgreSQL store black-holed under a running node (readiness drops, liveness stays).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { Daemon, runCli } from '../helpers/cli.js';
import { BlackHoleProxy } from '../helpers/black-hole.js';
import { createPostgresDb, type TestDatabase } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';
import { Workspace } from '../helpers/workspace.js';
import { parsePrometheusText } from '../helpers/prometheus-text.js';
import { PROMTOOL, promtoolCheck } from '../helpers/promtool.js';

const CONTRACT_METRICS = [
  'scheduler_runs_total', 'scheduler_run_duration_seconds', 'scheduler_fire_delay_seconds', 'scheduler_claims_total',
  'scheduler_takeovers_total', 'scheduler_lease_lost_total', 'scheduler_missed_periods_total', 'scheduler_job_last_success_timestamp_seconds',
  'scheduler_job_next_run_timestamp_seconds', 'scheduler_job_paused', 'scheduler_redis_quorum', 'scheduler_store_up',
  'scheduler_clock_offset_seconds', 'scheduler_build_info',
  // ctx.once's (issue 9)
  'scheduler_once_total', 'scheduler_once_keys_retried',
];
/** The contract's per-job families: each series labelled `job_name`. */
const PER_JOB_METRICS = [
  'scheduler_runs_total', 'scheduler_run_duration_seconds', 'scheduler_missed_periods_total',
  'scheduler_job_last_success_timestamp_seconds', 'scheduler_job_next_run_timestamp_seconds', 'scheduler_job_paused',
];
const TOKEN = 'tok-9f8e7d6c5b4a';
/** A job no daemon runs by itself in a test's time (1 January, 00:00). */
const YEARLY = "export default { schedule: '0 0 1 1 *', async run() { return 'by hand'; } };\n";
const EVERY_SECOND = "export default { schedule: '* * * * * *', async run() { return 1; } };\n";

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function workspace(): Workspace {
  const ws = new Workspace('cron-it-http-');
  cleanups.push(() => ws.cleanup());
  return ws;
}

function start(ws: Workspace, env: Record<string, string>): Daemon {
  const d = new Daemon([], { cwd: ws.dir, env: { SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_LOG_LEVEL: 'info', SCHEDULER_HTTP: '127.0.0.1:0', ...env } });
  cleanups.push(async () => void (await d.stop('SIGKILL', 5000)));
  return d;
}

/** The URL from the daemon's "http server listening" line, reachable from here. */
async function urlOf(d: Daemon): Promise<string> {
  const url = await waitFor('http server listening', () => d.logs().find((l) => l.msg === 'http server listening')?.url as string | undefined, 60_000);
  return url.replace('://0.0.0.0:', '://127.0.0.1:');
}

async function get(url: string, init: RequestInit = {}): Promise<{ status: number; body: string; json: () => Record<string, unknown>; headers: Headers }> {
  const res = await fetch(url, init);
  const body = await res.text();
  return { status: res.status, body, headers: res.headers, json: () => JSON.parse(body) as Record<string, unknown> };
}

/** `name{labels} value` from a Prometheus text answer; undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function freePortHeld(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as { port: number }).port, server };
}

/** A port that accepts connections and never answers (an alert to it times out); its connections are cut at the cleanup. */
async function silentPort(): Promise<{ port: number }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(() => new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  }));
  return { port: (server.address() as { port: number }).port };
}

describe('HTTP server of bin/scheduler run', () => {
  it('SQLite node on 0.0.0.0 with a token: probes and /metrics need none, / and /api need it; every contract metric, per-job series at 0, counts after runs; 404, 405, 400 as JSON', async () => {
    const ws = workspace();
    ws.writeJob('yearly.mjs', YEARLY);
    ws.writeJob('every.mjs', EVERY_SECOND);
    const d = start(ws, { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_HTTP: '0.0.0.0:0', SCHEDULER_HTTP_TOKEN: TOKEN });
    const url = await urlOf(d);
    const auth = { headers: { authorization: `Bearer ${TOKEN}` } };

    const ready = await waitFor('readyz 200', async () => { const r = await get(`${url}/readyz`); return r.status === 200 ? r : undefined; }, 60_000);
    expect(ready.json()).toEqual({ status: 'ready', store: 'ok', redis: 'none', jobs: 2, invalidJobs: 0 });
    const health = await get(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.json().status).toBe('ok');
    const warning = d.logs().find((l) => l.level === 'warn' && /non-loopback/.test(String(l.msg)));
    expect(warning?.msg).toMatch(/need a bearer token/);

    // Two scheduled runs: the first period may run as the start-up catch-up (its instant fell while the
    // daemon started), which has no fire delay of its own (CI once saw succeeded 2, fire delays 1).
    const metrics = await waitFor('two scheduled runs counted', async () => {
      const m = await get(`${url}/metrics`);
      return (sample(m.body, 'scheduler_runs_total{job_name="every",status="succeeded"}') ?? 0) >= 2 && (sample(m.body, 'scheduler_fire_delay_seconds_count') ?? 0) >= 2 ? m : undefined;
    }, 60_000);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    for (const name of CONTRACT_METRICS) expect(metrics.body, name).toMatch(new RegExp(`^# TYPE ${name} `, 'm'));
    // The whole answer as a scraper reads it: valid text format, each family once, histograms consistent.
    const parsed = parsePrometheusText(metrics.body);
    expect(parsed.types.get('scheduler_run_duration_seconds')).toBe('histogram');
    expect(metrics.body).toMatch(/^process_cpu_user_seconds_total /m);
    expect(metrics.body).toMatch(/^nodejs_eventloop_lag_seconds /m);
    // The job that never ran: every series a user graphs is there, at 0.
    for (const status of ['succeeded', 'failed', 'timed_out', 'abandoned', 'skipped', 'interrupted']) {
      expect(sample(metrics.body, `scheduler_runs_total{job_name="yearly",status="${status}"}`), status).toBe(0);
    }
    expect(sample(metrics.body, 'scheduler_run_duration_seconds_count{job_name="yearly"}')).toBe(0);
    expect(sample(metrics.body, 'scheduler_missed_periods_total{job_name="yearly"}')).toBe(0);
    expect(sample(metrics.body, 'scheduler_job_last_success_timestamp_seconds{job_name="yearly"}')).toBe(0);
    expect(sample(metrics.body, 'scheduler_job_paused{job_name="yearly"}')).toBe(0);
    expect(sample(metrics.body, 'scheduler_job_next_run_timestamp_seconds{job_name="yearly"}')).toBe(Date.UTC(new Date().getUTCFullYear() + 1, 0, 1) / 1000);
    expect(sample(metrics.body, 'scheduler_claims_total{outcome="lost_row"}')).toBe(0);
    // The job that ran.
    expect(sample(metrics.body, 'scheduler_claims_total{outcome="won"}')).toBeGreaterThanOrEqual(2);
    expect(sample(metrics.body, 'scheduler_run_duration_seconds_count{job_name="every"}')).toBeGreaterThanOrEqual(2);
    expect(sample(metrics.body, 'scheduler_fire_delay_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(sample(metrics.body, 'scheduler_redis_quorum')).toBe(1);
    expect(sample(metrics.body, 'scheduler_store_up')).toBe(1);
    expect(sample(metrics.body, 'scheduler_build_info{version="0.1.0"}')).toBe(1);
    await waitFor('last success from the store', async () => (sample((await get(`${url}/metrics`)).body, 'scheduler_job_last_success_timestamp_seconds{job_name="every"}') ?? 0) > Date.now() / 1000 - 120, 30_000);

    // The token: / and /api only.
    for (const path of ['/', '/api/jobs', '/api/summary']) {
      const denied = await get(`${url}${path}`);
      expect(denied.status, path).toBe(401);
      expect(denied.json().error).toMatch(/Bearer/);
      expect((await get(`${url}${path}`, { headers: { authorization: 'Bearer wrong' } })).status, path).toBe(401);
      expect((await get(`${url}${path}`, auth)).status, path).toBe(200);
    }
    const jobs = (await get(`${url}/api/jobs`, auth)).json() as { jobs: Array<{ name: string; next: string[]; lastSuccessAt: string | null }>; invalid: unknown[] };
    expect(jobs.jobs.map((j) => j.name).sort()).toEqual(['every', 'yearly']);
    expect(jobs.jobs.find((j) => j.name === 'every')!.lastSuccessAt).not.toBeNull();
    const detail = await get(`${url}/api/jobs/every`, auth);
    expect(detail.status).toBe(200);
    expect((detail.json().runs as Array<{ status: string }>).length).toBeGreaterThan(0);
    expect((detail.json().periods as unknown[]).length).toBe(10);
    const unknown = await get(`${url}/api/jobs/nope`, auth);
    expect(unknown.status).toBe(404);
    expect(unknown.json()).toMatchObject({ error: 'no such job', job: 'nope' });
    const runs = (await get(`${url}/api/runs?job=every&status=succeeded&limit=2`, auth)).json() as { runs: Array<{ job: string; status: string }> };
    expect(runs.runs).toHaveLength(2);
    expect(runs.runs.every((r) => r.job === 'every' && r.status === 'succeeded')).toBe(true);
    const badStatus = await get(`${url}/api/runs?status=done`, auth);
    expect(badStatus.status).toBe(400);
    expect(badStatus.json()).toMatchObject({ parameter: 'status' });
    expect(badStatus.json().error).toMatch(/status=done.*succeeded/);
    const badLimit = await get(`${url}/api/runs?limit=5000`, auth);
    expect(badLimit.status).toBe(400);
    expect(badLimit.json()).toMatchObject({ parameter: 'limit' });
    const nodes = (await get(`${url}/api/nodes`, auth)).json() as { nodes: Array<{ id: string; alive: boolean }> };
    expect(nodes.nodes).toHaveLength(1);
    expect(nodes.nodes[0]!.alive).toBe(true);

    const missing = await get(`${url}/nowhere`, auth);
    expect(missing.status).toBe(404);
    expect(missing.json()).toEqual({ error: 'not found', path: '/nowhere' });
    const post = await get(`${url}/healthz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expect(post.json().error).toBe('method not allowed');
    const del = await get(`${url}/api/jobs`, { ...auth, method: 'DELETE' });
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('GET, HEAD, POST');

    expect(await d.stop('SIGTERM')).toBe(0);
    expect(d.logs().at(-1)?.msg).toBe('stopped');
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  }, 120_000);

  it('a configured address in use is exit 2 naming the setting and the port, before the store is opened; the default address in use is a warning and the node runs', async () => {
    const ws = workspace();
    ws.writeJob('yearly.mjs', YEARLY);
    const { port } = await freePortHeld();
    const r = await runCli(['run'], { cwd: ws.dir, env: { SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_HTTP: `127.0.0.1:${port}` } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trim()).toBe(`scheduler: SCHEDULER_HTTP: 127.0.0.1:${port} is in use (EADDRINUSE)`);
    const flag = await runCli(['run', '--http', `127.0.0.1:${port}`], { cwd: ws.dir, env: { SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_STORE: ws.sqliteStore() } });
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain(`--http: 127.0.0.1:${port} is in use`);

    // The built-in default (127.0.0.1:9464): held here, unless another node on this machine has it already.
    const held = createServer();
    await new Promise<void>((resolve) => held.once('error', () => resolve()).listen(9464, '127.0.0.1', () => resolve()));
    cleanups.push(() => new Promise<void>((resolve) => (held.listening ? held.close(() => resolve()) : resolve())));
    const d = new Daemon([], { cwd: ws.dir, env: { SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_LOG_LEVEL: 'info' } });
    cleanups.push(async () => void (await d.stop('SIGKILL', 5000)));
    await waitFor('scheduler started', () => d.logs().some((l) => l.msg === 'scheduler started'), 60_000);
    const warning = d.logs().find((l) => l.level === 'warn' && /9464/.test(String(l.msg)));
    expect(warning?.msg).toMatch(/127\.0\.0\.1:9464 is in use.*off for this node.*SCHEDULER_HTTP=/);
    expect(d.logs().some((l) => l.msg === 'http server listening')).toBe(false);
    expect(await d.stop('SIGTERM')).toBe(0);
  }, 90_000);
});

describe('HTTP server on a PostgreSQL store shared by two nodes', () => {
  let pg: TestDatabase;
  const proxy = new BlackHoleProxy(5432);
  afterAll(async () => {
    await proxy.close();
    await pg?.drop();
  });

  it("any node's scrape tells the cluster's last success; /readyz drops to 503 while the store is black-holed (healthz stays 200) and comes back; no secret in any answer or log line", async () => {
    pg = await createPostgresDb('cron_http');
    await proxy.start();
    const secret = 'pw-Xy7-never-shown';
    const direct = new URL(pg.url);
    direct.password = secret;
    // The other secrets a deployment sets: a Redis password (this Redis has none: the client warns and
    // connects), a webhook whose path and query are the secret (a port that
    // accepts and never answers: the alerts of the black hole below time out and are logged), the
    // webhook's token, and the HTTP token (on A; B stays without one, and is warned).
    const secrets = {
      store: secret, redis: 'rds-Q4-never-shown', hookPath: 'hook-P9-never-shown', hookQuery: 'qry-Z2-never-shown',
      alertToken: 'alt-K3-never-shown', httpToken: 'tok-H5-never-shown',
    };
    const hook = await silentPort();
    const common = {
      SCHEDULER_REDIS: `redis://:${secrets.redis}@127.0.0.1:6379`,
      SCHEDULER_ALERT_WEBHOOK: `http://127.0.0.1:${hook.port}/hooks/${secrets.hookPath}?key=${secrets.hookQuery}`,
      SCHEDULER_ALERT_TOKEN: secrets.alertToken,
    };
    const ws = workspace();
    ws.writeJob('yearly.mjs', YEARLY);
    const a = start(ws, { ...common, SCHEDULER_STORE: proxy.urlFor(direct.toString()), SCHEDULER_NODE_ID: 'http-a', SCHEDULER_HTTP_TOKEN: secrets.httpToken });
    const urlA = await urlOf(a);
    // B on a wildcard address with no token: warned.
    const b = start(ws, { ...common, SCHEDULER_STORE: direct.toString(), SCHEDULER_NODE_ID: 'http-b', SCHEDULER_HTTP: '0.0.0.0:0' });
    const urlB = await urlOf(b);
    // Logged right after the listening line (the daemon's lines are written asynchronously: it may come in a later write).
    const warned = await waitFor('the non-loopback warning', () => b.logs().find((l) => l.level === 'warn' && /non-loopback/.test(String(l.msg)))?.msg as string | undefined, 10_000);
    expect(warned).toMatch(/with no token \(httpTokens, SCHEDULER_HTTP_TOKEN\).*actions are refused/);
    for (const url of [urlA, urlB]) await waitFor(`readyz of ${url}`, async () => (await get(`${url}/readyz`)).status === 200, 60_000);

    const lastSuccess = async (url: string) => sample((await get(`${url}/metrics`)).body, 'scheduler_job_last_success_timestamp_seconds{job_name="yearly"}');
    expect(await lastSuccess(urlB)).toBe(0);
    const manual = await runCli(['run-once', 'yearly'], { cwd: ws.dir, env: { SCHEDULER_JOBS_DIR: ws.jobsDir, SCHEDULER_STORE: direct.toString(), SCHEDULER_NODE_ID: 'http-cli' } });
    expect(manual.code, manual.stderr).toBe(0);
    // Neither daemon ran it; both say when it last succeeded (read from the store in the background).
    for (const url of [urlB, urlA]) await waitFor(`last success on ${url}`, async () => ((await lastSuccess(url)) ?? 0) > Date.now() / 1000 - 120, 30_000);

    const PATHS = ['/readyz', '/healthz', '/api/summary', '/api/jobs', '/api/jobs/yearly', '/api/runs', '/api/nodes', '/metrics', '/', '/jobs/yearly'];
    const noSecretIn = async (when: string) => {
      for (const [url, init] of [[urlA, { headers: { authorization: `Bearer ${secrets.httpToken}` } }], [urlB, {}]] as const) {
        const check = async (path: string) => {
          const r = await get(`${url}${path}`, init);
          if (when === 'up') expect(r.status, `${url}${path}`).toBe(200);
          for (const [name, value] of Object.entries(secrets)) expect(r.body, `${name} in ${path} (${when})`).not.toContain(value);
        };
        // With the store black-holed, each read waits out the store's 10 s statement/connect timeouts:
        // the paths are asked at once (every answer still checked), not one 10 s wait after another.
        if (when === 'up') for (const path of PATHS) await check(path);
        else await Promise.all(PATHS.map(check));
      }
    };
    await noSecretIn('up');
    // The token is A's: its / and /api refuse a request without it.
    expect((await get(`${urlA}/api/summary`)).status).toBe(401);
    expect((await get(`${urlA}/api/summary`, { headers: { authorization: `Bearer ${secrets.httpToken}` } })).json().store).toEqual({ kind: 'postgres', state: 'ok' });

    proxy.hole();
    const down = await waitFor('readyz 503 on the black-holed node', async () => { const r = await get(`${urlA}/readyz`); return r.status === 503 ? r : undefined; }, 30_000);
    expect(down.json()).toMatchObject({ status: 'not ready', store: 'down', jobs: 1, invalidJobs: 0 });
    expect((await get(`${urlA}/healthz`)).status).toBe(200);
    expect(sample((await get(`${urlA}/metrics`)).body, 'scheduler_store_up')).toBe(0);
    expect((await get(`${urlB}/readyz`)).status).toBe(200);
    await noSecretIn('store down');
    proxy.lift();
    await waitFor('readyz 200 again', async () => (await get(`${urlA}/readyz`)).status === 200, 60_000);

    expect(await a.stop('SIGTERM')).toBe(0);
    expect(await b.stop('SIGTERM')).toBe(0);
    // The logs showed the settings masked and said the store-lost alert was not delivered, without the secrets.
    const logs = `${a.output}${a.errors}${b.output}${b.errors}`;
    expect(logs).toContain('redis://:***@127.0.0.1:6379');
    expect(logs).toContain(`POST http://127.0.0.1:${hook.port}/***: no answer within`);
    for (const [name, value] of Object.entries(secrets)) expect(logs, `${name} in the logs`).not.toContain(value);
  }, 180_000);
});

describe('/metrics as Prometheus reads it (promtool; skipped without promtool, outside CI)', () => {
  it.runIf(PROMTOOL)("a real node's scrape passes `promtool check metrics` but for prom-client's default families; per-job series carry job_name, none carries job or instance", async () => {
    const ws = workspace();
    ws.writeJob('yearly.mjs', YEARLY);
    ws.writeJob('every.mjs', EVERY_SECOND);
    const d = start(ws, { SCHEDULER_STORE: ws.sqliteStore() });
    const url = await urlOf(d);
    // After runs, so the histograms and counters have samples past 0 (waited for on a series with no job label, the one checked below).
    const body = await waitFor('two claims won', async () => {
      const m = await get(`${url}/metrics`);
      return (sample(m.body, 'scheduler_claims_total{outcome="won"}') ?? 0) >= 2 ? m.body : undefined;
    }, 60_000);

    const checked = promtoolCheck(body);
    expect(checked.problems, 'promtool check metrics, less the default families of prom-client').toEqual([]);
    expect(checked.code).toBe(checked.allowed.length > 0 ? 3 : 0);

    const { samples } = parsePrometheusText(body);
    // Prometheus sets `job` and `instance` on every scraped series; a target's own would be renamed to exported_*.
    const clashing = [...samples].filter(([, s]) => s.labels.has('job') || s.labels.has('instance')).map(([key]) => key);
    expect(clashing).toEqual([]);
    for (const family of PER_JOB_METRICS) {
      const series = [...samples.values()].filter((s) => s.family === family);
      expect(new Set(series.map((s) => s.labels.get('job_name'))), family).toEqual(new Set(['every', 'yearly']));
    }
  });

  it.runIf(PROMTOOL)('the filter lets real problems through: a gauge named _total, a counter without it, a camelCase label, a text promtool cannot parse', () => {
    const bad = [
      '# HELP nodejs_active_handles_total prom-client default, allowed', '# TYPE nodejs_active_handles_total gauge', 'nodejs_active_handles_total 3',
      '# HELP scheduler_x_total a gauge named as a counter', '# TYPE scheduler_x_total gauge', 'scheduler_x_total 1',
      '# HELP scheduler_y a counter without _total', '# TYPE scheduler_y counter', 'scheduler_y 1',
      '# HELP scheduler_z_seconds a camelCase label', '# TYPE scheduler_z_seconds gauge', 'scheduler_z_seconds{jobName="a"} 1',
      '',
    ].join('\n');
    const checked = promtoolCheck(bad);
    expect(checked.code).toBe(3);
    expect(checked.allowed).toEqual([expect.stringMatching(/^nodejs_active_handles_total non-counter metrics should not have "_total" suffix$/)]);
    expect(checked.problems).toEqual([
      expect.stringMatching(/^scheduler_x_total non-counter metrics should not have "_total" suffix$/),
      expect.stringMatching(/^scheduler_y counter metrics should have "_total" suffix$/),
      expect.stringMatching(/^scheduler_z_seconds label names should be written in 'snake_case' not 'camelCase'$/),
    ]);
    const broken = promtoolCheck('scheduler_ok_total{job_name="a" 1\n');
    expect(broken.code).toBe(1);
    expect(broken.problems).toEqual([expect.stringMatching(/^error while linting: text format parsing error/)]);
  });
});
