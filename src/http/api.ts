/** /api: the read model as JSON. Query parameters are validated and named when wrong (400). */
import { DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT, SINCE_EXPECTED, auditView, parseSince } from '../audit/view.js';
import { RUN_STATUSES, type AuditStore, type BackfillStore, type RunStatus } from '../store/types.js';
import { backfillView } from '../backfill/view.js';
import type { StatusReader } from '../status/model.js';
import { json, type Reply } from './server.js';

export const MAX_RUNS_LIMIT = 1000;
export const DEFAULT_RUNS_LIMIT = 100;

/** The audit trail for /api/audit, with the store's clock (as this node estimates it) for `since` durations. */
export interface AuditSource {
  store: AuditStore;
  now: () => number;
  /** For /api/backfills. */
  backfills?: BackfillStore;
}

export function apiRoute(reader: () => StatusReader | null, audit: () => AuditSource | null = () => null): (url: URL) => Promise<Reply | null> {
  return async (url) => {
    const path = url.pathname;
    if (path !== '/api' && !path.startsWith('/api/')) return null;
    const r = reader();
    if (!r) return json(503, { error: 'starting: the jobs are not loaded yet' });
    if (path === '/api/summary') return json(200, await r.summary());
    if (path === '/api/jobs') return json(200, { jobs: await r.jobs(), invalid: r.invalid() });
    if (path === '/api/nodes') return json(200, { nodes: await r.nodes() });
    if (path === '/api/audit') {
      const source = audit();
      return source ? auditReply(url, source) : json(503, { error: 'starting: the store is not open yet' });
    }
    if (path === '/api/backfills') {
      const source = audit();
      if (!source?.backfills) return json(503, { error: 'starting: the store is not open yet' });
      const active = url.searchParams.get('active');
      if (active !== null && active !== 'true' && active !== 'false') return json(400, { error: `invalid parameter active=${active}: expected true or false`, parameter: 'active' });
      const job = url.searchParams.get('job') ?? undefined;
      const list = await source.backfills.list({ limit: 100, active: active === 'true', ...(job ? { job } : {}) });
      return json(200, { backfills: list.map(backfillView) });
    }
    if (path === '/api/runs') {
      const job = url.searchParams.get('job') ?? undefined;
      const status = url.searchParams.get('status') ?? undefined;
      const limitText = url.searchParams.get('limit');
      if (status !== undefined && !RUN_STATUSES.includes(status as RunStatus)) {
        return json(400, { error: `invalid parameter status=${status}: expected one of ${RUN_STATUSES.join(', ')}`, parameter: 'status' });
      }
      let limit = DEFAULT_RUNS_LIMIT;
      if (limitText !== null) {
        limit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
        if (!(limit >= 1 && limit <= MAX_RUNS_LIMIT)) {
          return json(400, { error: `invalid parameter limit=${limitText}: expected a whole number from 1 to ${MAX_RUNS_LIMIT}`, parameter: 'limit' });
        }
      }
      if (job !== undefined && job === '') return json(400, { error: 'invalid parameter job=: expected a job name', parameter: 'job' });
      return json(200, { runs: await r.runs({ job, status: status as RunStatus | undefined, limit }) });
    }
    const logOf = /^\/api\/runs\/(\d{1,18})\/log$/.exec(path);
    if (logOf) {
      const after = url.searchParams.get('after');
      if (after !== null && !/^\d{1,9}$/.test(after)) return json(400, { error: `invalid parameter after=${after}: expected the seq of the last line read (a whole number)`, parameter: 'after' });
      const limitText = url.searchParams.get('limit');
      const limit = limitText === null ? undefined : /^\d{1,6}$/.test(limitText) ? Number(limitText) : NaN;
      if (limit !== undefined && !(limit >= 1 && limit <= 100_000)) return json(400, { error: `invalid parameter limit=${limitText}: expected a whole number from 1 to 100000`, parameter: 'limit' });
      const id = logOf[1]!;
      const log = await r.runLog(id, { afterSeq: after === null ? 0 : Number(after), ...(limit !== undefined ? { limit } : {}) });
      return log ? json(200, log) : json(404, { error: 'no such run', runId: id, path });
    }
    const m = /^\/api\/jobs\/(.+)$/.exec(path);
    if (m) {
      let name: string;
      try {
        name = decodeURIComponent(m[1]!);
      } catch {
        return json(400, { error: 'invalid job name in the path', path });
      }
      const detail = await r.job(name);
      return detail ? json(200, detail) : json(404, { error: 'no such job', job: name, path });
    }
    return null;
  };
}

/** GET /api/audit?job=&since=&limit=: as `audit --json`, the same values accepted and refused. */
async function auditReply(url: URL, source: AuditSource): Promise<Reply> {
  const job = url.searchParams.get('job') ?? undefined;
  const sinceText = url.searchParams.get('since');
  const limitText = url.searchParams.get('limit');
  if (job !== undefined && job === '') return json(400, { error: 'invalid parameter job=: expected a job name', parameter: 'job' });
  let limit = DEFAULT_AUDIT_LIMIT;
  if (limitText !== null) {
    limit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
    if (!(limit >= 1 && limit <= MAX_AUDIT_LIMIT)) {
      return json(400, { error: `invalid parameter limit=${limitText}: expected a whole number from 1 to ${MAX_AUDIT_LIMIT}`, parameter: 'limit' });
    }
  }
  const since = sinceText === null ? undefined : parseSince(sinceText, source.now());
  if (sinceText !== null && !since) return json(400, { error: `invalid parameter since=${sinceText}: expected ${SINCE_EXPECTED}`, parameter: 'since' });
  return json(200, { entries: (await source.store.list({ job, since, limit })).map(auditView) });
}
