/**
 * The runs table's row as the drivers return it, its record, and the small rules every part of the
 * run store shares (the unique key, text the backends can store, deadlocks). Imports no other part.
 */
import { StoreUnavailableError } from '../../errors.js';
import type { AttemptKey, RunRecord, RunStatus } from '../types.js';

/** The unique key: one row per (job, period, shard, attempt). */
export const PERIOD_KEY = ['job', 'scheduled_at', 'shard', 'attempt'];

export interface Row {
  id: number | string;
  job: string;
  scheduled_at: number | string;
  period_key: string;
  shard: number;
  attempt: number;
  trigger: string;
  status: string;
  reason: string | null;
  node_id: string;
  started_at: number | string;
  claimed_at: number | string | null;
  run_at: number | string | null;
  heartbeat_at: number | string | null;
  lease_ms: number;
  finished_at: number | string | null;
  duration_ms: number | string | null;
  result: string | null;
  result_note?: string | null;
  error: string | null;
  error_stack: string | null;
  output?: string | null;
}

const date = (v: number | string | null): Date | null => (v === null || v === undefined ? null : new Date(Number(v)));

export function toRecord(row: Row): RunRecord {
  let result: unknown = null;
  if (row.result !== null && row.result !== undefined) {
    try {
      result = JSON.parse(row.result);
    } catch {
      result = row.result;
    }
  }
  return {
    id: String(row.id),
    job: row.job,
    scheduledAt: new Date(Number(row.scheduled_at)),
    periodKey: row.period_key,
    shard: Number(row.shard),
    attempt: Number(row.attempt),
    trigger: row.trigger as RunRecord['trigger'],
    status: row.status as RunStatus,
    reason: row.reason,
    nodeId: row.node_id,
    startedAt: new Date(Number(row.started_at)),
    claimedAt: date(row.claimed_at),
    runAt: date(row.run_at),
    finishedAt: date(row.finished_at),
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    heartbeatAt: date(row.heartbeat_at),
    leaseMs: Number(row.lease_ms),
    result,
    resultNote: row.result_note ?? null,
    error: row.error,
    errorStack: row.error_stack,
    output: row.output ?? null,
  };
}

/** Under MySQL's TEXT limit (65,535 bytes), with room for the truncation note. */
const MAX_TEXT_BYTES = 60_000;

/**
 * Error texts as every backend can store them: PostgreSQL refuses NUL characters in text, and MySQL
 * refuses (strict mode) a TEXT value over 64 KB. Either would make the outcome of a run unrecordable.
 */
export function storableText(value: string | null | undefined, maxBytes = MAX_TEXT_BYTES): string | null {
  if (value === null || value === undefined) return null;
  const text = value.includes('\u0000') ? value.replace(/\u0000/g, '\uFFFD') : value;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= maxBytes) return text;
  const note = `… [truncated, ${bytes} bytes in all]`;
  let cut = Buffer.from(text, 'utf8').subarray(0, maxBytes - Buffer.byteLength(note, 'utf8')).toString('utf8');
  // A multi-byte character cut in two decodes as U+FFFD: drop it.
  if (cut.endsWith('\uFFFD') && !text.startsWith(cut)) cut = cut.slice(0, -1);
  return cut + note;
}

/** The output column (MEDIUMTEXT on MySQL): a 64 KiB tail with room to spare. */
export const MAX_OUTPUT_BYTES = 256 * 1024;

/** A deadlock between two batches ends one of them whole: sent again, at most this many more times. */
export const DEADLOCK_RETRIES = 2;

/** The unique key of a row, as one string. */
export const keyOf = (job: string, scheduledAt: number, shard: number, attempt: number): string => `${job}\u0000${scheduledAt}\u0000${shard}\u0000${attempt}`;

/** The smallest lease of a batch: its statements are bounded by the tightest of them. */
export function smallestLease(leases: Array<number | undefined>): number | undefined {
  const positive = leases.filter((l): l is number => l !== undefined && l > 0);
  return positive.length > 0 ? Math.min(...positive) : undefined;
}

/** A deadlock: the database rolled the statement back whole (MySQL 1213, PostgreSQL 40P01). */
export function isDeadlock(err: unknown): boolean {
  const e = (err instanceof StoreUnavailableError ? err.cause : err) as { errno?: number; code?: string; message?: string } | undefined;
  return e?.errno === 1213 || e?.code === '40P01' || /deadlock/i.test(String(e?.message ?? ''));
}

/** A run id as the id column takes it in a CASE (a number: SQLite compares an INTEGER with a text as unequal there). */
export function numericId(id: string): number | null {
  const n = Number(id);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

export function keyColumns(k: AttemptKey): { job: string; scheduled_at: number; shard: number; attempt: number } {
  return { job: k.job, scheduled_at: k.scheduledAt.getTime(), shard: k.shard, attempt: k.attempt };
}
