/**
 * The audit trail as `audit --json` and `GET /api/audit` show it, and the filters both take, parsed
 * in one place so that the CLI and its HTTP twin accept and refuse the same values.
 */
import type { AuditRecord } from '../store/types.js';
import { parseDuration } from '../time/duration.js';
import { parseInstant } from '../time/instant.js';

export const DEFAULT_AUDIT_LIMIT = 50;
export const MAX_AUDIT_LIMIT = 1000;
export const SINCE_EXPECTED = "an ISO-8601 instant (such as 2026-11-30T18:00:00Z) or a duration back from now (such as '24h' or '7d')";

/** One entry of `{ "entries": [...] }`: `at` in ISO (store clock). */
export interface AuditEntryView {
  at: string;
  actor: string;
  action: string;
  job: string | null;
  period: string | null;
  reason: string | null;
  force: boolean;
  result: string;
  detail: string | null;
}

export function auditView(r: AuditRecord): AuditEntryView {
  return { at: new Date(r.at).toISOString(), actor: r.actor, action: r.action, job: r.job, period: r.period, reason: r.reason, force: r.force, result: r.result, detail: r.detail };
}

/**
 * `since`: an instant, or a duration back from `nowMs` (the store's clock where the caller has it).
 * Undefined when it is neither.
 */
export function parseSince(text: string, nowMs: number): Date | undefined {
  const at = parseInstant(text);
  if (at) return at;
  const ms = parseDuration(text);
  return ms === undefined ? undefined : new Date(nowMs - ms);
}
