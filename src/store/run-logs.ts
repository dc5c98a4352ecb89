/**
 * The attempts' logs (`scheduler_run_logs`) over knex: SQLite, MySQL/MariaDB and PostgreSQL. Written
 * in batches by the node that runs the attempt (src/runlog/writer.ts), read by `scheduler logs`, the
 * API and the page; deleted with their runs (src/store/runs/retention.ts).
 */
import type { Knex } from 'knex';
import type { Database } from './database.js';
import { RUN_LOGS_TABLE } from './migrations.js';
import type { RunLogCut, RunLogLine, RunLogStore, RunLogStream } from '../runlog/types.js';

/** Rows per INSERT: 7 bindings each, well under every driver's limit of bindings a statement. */
const INSERT_CHUNK = 500;

interface Row {
  run_id: number | string;
  seq: number | string;
  at: number | string;
  level: string;
  stream: string;
  line: string;
  fields: string | null;
}

/** A run id as the runs table's key (a dry run's fake id matches no row). */
const runIdValue = (id: string): number => (/^\d+$/.test(id) ? Number(id) : -1);

export class KnexRunLogStore implements RunLogStore {
  private readonly knex: Knex;
  constructor(private readonly db: Database) {
    this.knex = db.knex;
  }

  async write(batch: { lines: RunLogLine[]; cuts: RunLogCut[] }): Promise<void> {
    const lines = batch.lines.filter((l) => runIdValue(l.runId) >= 0);
    if (lines.length === 0 && batch.cuts.length === 0) return;
    await this.db.transaction('write run log lines', async (trx) => {
      for (const c of batch.cuts) {
        await trx(RUN_LOGS_TABLE).where('run_id', runIdValue(c.runId)).andWhere('seq', '>=', c.fromSeq).andWhere('seq', '<=', c.toSeq).del();
      }
      for (let i = 0; i < lines.length; i += INSERT_CHUNK) {
        const rows = lines.slice(i, i + INSERT_CHUNK).map((l) => ({
          run_id: runIdValue(l.runId), seq: l.seq, at: Math.round(l.at), level: l.level, stream: l.stream, line: l.line, fields: l.fields,
        }));
        await trx(RUN_LOGS_TABLE).insert(rows).onConflict(['run_id', 'seq']).ignore();
      }
    });
  }

  async read(runId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<RunLogLine[]> {
    const id = runIdValue(runId);
    if (id < 0) return [];
    const limit = Math.max(1, Math.min(Math.floor(options.limit ?? 10_000), 100_000));
    const rows = (await this.db.wrap('read run log', () => this.knex(RUN_LOGS_TABLE)
      .select('run_id', 'seq', 'at', 'level', 'stream', 'line', 'fields')
      .where('run_id', id).andWhere('seq', '>', Math.max(0, Math.floor(options.afterSeq ?? 0)))
      .orderBy('seq', 'asc').limit(limit))) as Row[];
    return rows.map((r) => ({
      runId: String(r.run_id), seq: Number(r.seq), at: Number(r.at), level: r.level, stream: r.stream as RunLogStream, line: r.line, fields: r.fields,
    }));
  }
}
