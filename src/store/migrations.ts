/**
 * Bundled migrations, applied by knex's migrator from this list (no migration files on disk, so an
 * installed package migrates from any working directory). Append new entries; never edit one that
 * has shipped.
 */
import type { Knex } from 'knex';

export const RUNS_TABLE = 'scheduler_runs';
export const JOBS_TABLE = 'scheduler_jobs';
export const MIGRATIONS_TABLE = 'scheduler_migrations';
export const NODES_TABLE = 'scheduler_nodes';
export const ALERTS_TABLE = 'scheduler_alerts';
export const ONCE_TABLE = 'scheduler_once_keys';
export const RUN_LOGS_TABLE = 'scheduler_run_logs';
export const AUDIT_TABLE = 'scheduler_audit';
export const BACKFILLS_TABLE = 'scheduler_backfills';
export const BACKFILL_PERIODS_TABLE = 'scheduler_backfill_periods';
/** ctx.once keys: at most this many characters (191 x 4 bytes fits any InnoDB unique index in utf8mb4). */
export const ONCE_KEY_MAX = 191;
/** options.fingerprint: at most this many characters. */
export const ONCE_FINGERPRINT_MAX = 255;

/** The indexes read newest first (ORDER BY started_at DESC, id DESC). */
const ORDERED_INDEXES: Array<[string, string[]]> = [
  ['scheduler_runs_started', ['started_at']],
  ['scheduler_runs_job_started', ['job', 'started_at']],
  ['scheduler_runs_job_status_started', ['job', 'status', 'started_at']],
  ['scheduler_runs_status_started', ['status', 'started_at']],
];

interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const migrations: Migration[] = [
  {
    name: '0001_runs',
    async up(knex) {
      await knex.schema.createTable(RUNS_TABLE, (t) => {
        t.bigIncrements('id').primary();
        t.string('job', 100).notNullable();
        t.bigInteger('scheduled_at').notNullable(); // period instant, epoch ms
        t.string('period_key', 160).notNullable();
        t.integer('shard').notNullable().defaultTo(0);
        t.integer('attempt').notNullable();
        t.string('trigger', 16).notNullable();
        t.string('status', 16).notNullable();
        t.string('reason', 200).nullable();
        t.string('node_id', 100).notNullable();
        t.bigInteger('started_at').notNullable(); // store clock
        t.bigInteger('heartbeat_at').nullable(); // store clock
        t.integer('lease_ms').notNullable().defaultTo(0);
        t.bigInteger('finished_at').nullable(); // store clock
        t.bigInteger('duration_ms').nullable();
        t.text('result', 'mediumtext').nullable(); // JSON
        t.text('error').nullable();
        t.text('error_stack').nullable();
        // The fence: one row per (job, period, shard, attempt).
        t.unique(['job', 'scheduled_at', 'shard', 'attempt'], { indexName: 'scheduler_runs_period_attempt' });
        t.index(['job', 'status'], 'scheduler_runs_job_status');
        t.index(['status'], 'scheduler_runs_status');
        t.index(['started_at'], 'scheduler_runs_started');
      });
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(RUNS_TABLE);
    },
  },
  {
    // Owed attempts live in the store (status 'pending', due at run_at by the store's clock); a jobs
    // table anchors catch-up; indexes for every query at 10 million rows; job names compared byte-wise.
    name: '0002_owed_work',
    async up(knex) {
      const mysql = knex.client.config.client === 'mysql2';
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.bigInteger('run_at').nullable(); // pending: due at this store-clock instant
      });
      if (mysql) {
        // utf8mb4's default collations fold case and accents: 'Report' and 'report' would be one job.
        await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [RUNS_TABLE, 'job']);
      }
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.dropIndex(['job', 'status'], 'scheduler_runs_job_status');
        t.dropIndex(['status'], 'scheduler_runs_status');
        // history <job> [--status], the latest run of a job, live runs of a job
        t.index(['job', 'started_at'], 'scheduler_runs_job_started');
        t.index(['job', 'status', 'started_at'], 'scheduler_runs_job_status_started');
        // the sweeps: due pending rows (status, run_at); running rows (a prefix of either)
        t.index(['status', 'run_at'], 'scheduler_runs_status_run_at');
        // history --status S
        t.index(['status', 'started_at'], 'scheduler_runs_status_started');
      });
      await knex.schema.createTable(JOBS_TABLE, (t) => {
        t.string('name', 100).notNullable().primary();
        t.bigInteger('first_seen_at').notNullable(); // store clock
        t.bigInteger('seen_at').notNullable(); // store clock: a node declared the job
        // Every period of the job at or before this instant has a row: the catch-up anchor.
        t.bigInteger('reconciled_through').nullable();
      });
      if (mysql) await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [JOBS_TABLE, 'name']);
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(JOBS_TABLE);
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.dropIndex(['job', 'started_at'], 'scheduler_runs_job_started');
        t.dropIndex(['job', 'status', 'started_at'], 'scheduler_runs_job_status_started');
        t.dropIndex(['status', 'run_at'], 'scheduler_runs_status_run_at');
        t.dropIndex(['status', 'started_at'], 'scheduler_runs_status_started');
        t.index(['job', 'status'], 'scheduler_runs_job_status');
        t.index(['status'], 'scheduler_runs_status');
        t.dropColumn('run_at');
      });
    },
  },
  {
    // PostgreSQL's indexes do not end with the primary key as InnoDB's do: with `id` in them, the
    // newest-first reads (ORDER BY started_at DESC, id DESC) are served by the index alone, so the
    // planner keeps to (job, started_at, id) for `history <job>` whatever the table's size.
    name: '0003_postgres_index_order',
    async up(knex) {
      if (knex.client.config.client !== 'pg') return;
      for (const [name, columns] of ORDERED_INDEXES) {
        await knex.raw('DROP INDEX IF EXISTS ??', [name]);
        await knex.raw(`CREATE INDEX ?? ON ?? (${columns.map(() => '??').join(', ')}, ??)`, [name, RUNS_TABLE, ...columns, 'id']);
      }
    },
    async down(knex) {
      if (knex.client.config.client !== 'pg') return;
      for (const [name, columns] of ORDERED_INDEXES) {
        await knex.raw('DROP INDEX IF EXISTS ??', [name]);
        await knex.raw(`CREATE INDEX ?? ON ?? (${columns.map(() => '??').join(', ')})`, [name, RUNS_TABLE, ...columns]);
      }
    },
  },
  {
    // Why a body's result was not stored as returned (over maxResultSize, not JSON-serialisable).
    name: '0004_result_note',
    async up(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.text('result_note').nullable();
      });
    },
    async down(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.dropColumn('result_note');
      });
    },
  },
  {
    // The claim instant apart from the body's start (started_at, now written with the outcome), so that
    // durations exclude the claim-ahead. Nullable: rows written before it keep started_at alone.
    name: '0005_claimed_at',
    async up(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.bigInteger('claimed_at').nullable(); // store clock
      });
    },
    async down(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.dropColumn('claimed_at');
      });
    },
  },
  {
    // Pause and resume, cluster-wide: kept on the job's row, read by every node's sweep and claims.
    name: '0006_job_pause',
    async up(knex) {
      await knex.schema.alterTable(JOBS_TABLE, (t) => {
        t.boolean('paused').notNullable().defaultTo(false);
        t.string('paused_reason', 500).nullable();
        t.bigInteger('paused_at').nullable(); // store clock
      });
    },
    async down(knex) {
      await knex.schema.alterTable(JOBS_TABLE, (t) => {
        t.dropColumn('paused');
        t.dropColumn('paused_reason');
        t.dropColumn('paused_at');
      });
    },
  },
  {
    // The nodes table: each daemon's row, written by its own sweep (store clock), read by `nodes`
    // and the status views, and checked at start so that two live processes never share an id.
    name: '0007_nodes',
    async up(knex) {
      await knex.schema.createTable(NODES_TABLE, (t) => {
        t.string('id', 100).notNullable().primary();
        t.string('host', 255).notNullable();
        t.integer('pid').notNullable();
        t.string('version', 50).notNullable();
        t.bigInteger('started_at').notNullable(); // store clock
        t.bigInteger('heartbeat_at').notNullable(); // store clock
        t.integer('in_flight').notNullable().defaultTo(0);
        t.integer('clock_offset_ms').notNullable().defaultTo(0);
        t.string('state', 16).notNullable();
      });
      // Node ids are compared byte-wise, as job names are: 'Web-1' and 'web-1' are two nodes.
      if (knex.client.config.client === 'mysql2') await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [NODES_TABLE, 'id']);
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(NODES_TABLE);
    },
  },
  {
    // The alert outbox: an alert owed for a period is a row, delivered by any node (see src/alerts/).
    name: '0008_alerts',
    async up(knex) {
      await knex.schema.createTable(ALERTS_TABLE, (t) => {
        t.bigIncrements('id').primary();
        t.string('event_key', 255).notNullable();
        t.text('body').notNullable(); // JSON, as POSTed
        t.integer('attempts').notNullable().defaultTo(0);
        t.bigInteger('next_at').notNullable(); // store clock: due (pending), or the lease's end (sending)
        t.string('state', 16).notNullable(); // pending, sending, sent, dropped
        t.string('claimed_by', 100).nullable();
        t.bigInteger('claimed_at').nullable(); // store clock
        t.bigInteger('created_at').notNullable(); // store clock
        t.bigInteger('sent_at').nullable(); // store clock: sent or dropped
        t.text('last_error').nullable();
        // Written once per event across the cluster, whoever tries again.
        t.unique(['event_key'], { indexName: 'scheduler_alerts_event_key' });
        t.index(['state', 'next_at'], 'scheduler_alerts_state_next_at');
      });
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(ALERTS_TABLE);
    },
  },
  {
    // ctx.once: one row per business key, global across jobs. Every write is a compare-and-set on
    // `version`, fenced by the caller's run row (see src/store/once.ts). Instants: store clock.
    name: '0009_once_keys',
    async up(knex) {
      await knex.schema.createTable(ONCE_TABLE, (t) => {
        t.string('key', ONCE_KEY_MAX).notNullable().primary();
        t.string('job', 100).notNullable(); // the job whose run took the key last
        t.string('status', 16).notNullable(); // processing, succeeded, failed
        t.string('fingerprint', ONCE_FINGERPRINT_MAX).nullable();
        t.text('result', 'mediumtext').nullable(); // JSON; NULL: fn returned undefined (or not succeeded)
        t.text('error').nullable();
        t.integer('attempts').notNullable(); // how many times fn was started for this key
        t.integer('version').notNullable(); // bumped by every write: the compare-and-set token
        t.bigInteger('holder_run_id').notNullable(); // the run (attempt) that took the key last
        t.integer('holder_attempt').notNullable();
        t.string('holder_node', 100).notNullable();
        t.bigInteger('first_run_id').notNullable();
        t.bigInteger('created_at').notNullable(); // store clock
        t.bigInteger('updated_at').notNullable(); // store clock
        t.bigInteger('expires_at').notNullable(); // store clock: absent after this, pruned with the history
        t.index(['expires_at'], 'scheduler_once_keys_expires');
        // The retried-keys gauge reads a range of this index.
        t.index(['attempts'], 'scheduler_once_keys_attempts');
      });
      // Keys are compared byte-wise, as job names are: 'Order:1' and 'order:1' are two keys.
      if (knex.client.config.client === 'mysql2') {
        await knex.raw(`ALTER TABLE ?? MODIFY ?? VARCHAR(${ONCE_KEY_MAX}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL`, [ONCE_TABLE, 'key']);
        await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [ONCE_TABLE, 'job']);
      }
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(ONCE_TABLE);
    },
  },
  {
    // A command job's last 64 KiB of stdout and stderr, written with its outcome.
    name: '0010_run_output',
    async up(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.text('output', 'mediumtext').nullable();
      });
    },
    async down(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.dropColumn('output');
      });
    },
  },
  {
    // The start of the process that wrote a node row (`<boot id>:<start in clock ticks>`, from /proc;
    // NULL where there is none), so that a restart on its host tells the old process from another
    // one given its pid since. Nullable: rows written before it are judged by the pid alone.
    name: '0011_node_proc_start',
    async up(knex) {
      await knex.schema.alterTable(NODES_TABLE, (t) => {
        t.string('proc_start', 80).nullable();
      });
    },
    async down(knex) {
      await knex.schema.alterTable(NODES_TABLE, (t) => {
        t.dropColumn('proc_start');
      });
    },
  },
  {
    // The store host the node writes to (`host:port`; a host list's current writer), for `nodes` and
    // the page: after a failover, an operator sees which nodes have found the new primary.
    name: '0012_node_store_host',
    async up(knex) {
      await knex.schema.alterTable(NODES_TABLE, (t) => {
        t.string('store_host', 300).nullable();
      });
    },
    async down(knex) {
      await knex.schema.alterTable(NODES_TABLE, (t) => {
        t.dropColumn('store_host');
      });
    },
  },
  {
    // The audit trail: one row per operator action (pause, resume, a manual run or re-run, prune;
    // later cancel and backfill), done or refused, read by `audit` and /api/audit.
    name: '0013_audit',
    async up(knex) {
      await knex.schema.createTable(AUDIT_TABLE, (t) => {
        t.bigIncrements('id').primary();
        t.bigInteger('at').notNullable(); // store clock
        t.string('actor', 200).notNullable(); // user@host (CLI) or the token's name (HTTP)
        t.string('action', 32).notNullable();
        t.string('job', 100).nullable();
        t.string('period', 64).nullable(); // an ISO instant, or "from/to"
        t.string('reason', 500).nullable();
        t.boolean('force').notNullable().defaultTo(false);
        t.string('result', 16).notNullable(); // done, refused
        t.text('detail').nullable(); // why refused, or what was done
        t.index(['at'], 'scheduler_audit_at');
        t.index(['job', 'at'], 'scheduler_audit_job_at');
      });
      // Job names are compared byte-wise, as in the other tables.
      if (knex.client.config.client === 'mysql2') await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL', [AUDIT_TABLE, 'job']);
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(AUDIT_TABLE);
    },
  },
  {
    // Each attempt's own log: its ctx.log lines and a command's output, in order (seq), kept with the
    // run (pruned with it). The unique key makes a batch sent again after a lost answer harmless.
    name: '0014_run_logs',
    async up(knex) {
      await knex.schema.createTable(RUN_LOGS_TABLE, (t) => {
        t.bigIncrements('id').primary();
        t.bigInteger('run_id').notNullable();
        t.integer('seq').notNullable();
        t.bigInteger('at').notNullable(); // the line's time, the node's clock corrected to the store's (epoch ms)
        t.string('level', 8).notNullable();
        t.string('stream', 8).notNullable(); // log, stdout, stderr, or note (written by the scheduler)
        t.text('line').notNullable();
        t.text('fields').nullable(); // JSON of the line's own fields, redacted
        t.unique(['run_id', 'seq'], { indexName: 'scheduler_run_logs_run_seq' });
      });
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(RUN_LOGS_TABLE);
    },
  },
  {
    // `cancel`: a request on a running attempt's row, read by the node that holds it (about once a
    // second), which aborts its body; who asked and why go into its outcome.
    name: '0015_cancel',
    async up(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.bigInteger('cancel_requested_at').nullable(); // store clock
        t.string('cancel_by', 200).nullable();
        t.string('cancel_reason', 500).nullable();
      });
    },
    async down(knex) {
      await knex.schema.alterTable(RUNS_TABLE, (t) => {
        t.dropColumn('cancel_requested_at');
        t.dropColumn('cancel_by');
        t.dropColumn('cancel_reason');
      });
    },
  },
  {
    // The version of the job set each node runs (a hash of its jobs folder's files), written with its
    // heartbeat: `nodes`, the page and /metrics show when every node has the new files.
    name: '0016_job_set',
    async up(knex) {
      await knex.schema.alterTable(NODES_TABLE, (t) => {
        t.string('job_set', 64).nullable();
      });
    },
    async down(knex) {
      await knex.schema.alterTable(NODES_TABLE, (t) => {
        t.dropColumn('job_set');
      });
    },
  },
  {
    // Backfills (`backfill <job> --from --to`): the backfill itself, and one row per period of its
    // range, which the daemons claim (at most `concurrency` live claims cluster-wide) and run.
    name: '0017_backfills',
    async up(knex) {
      await knex.schema.createTable(BACKFILLS_TABLE, (t) => {
        t.string('id', 32).primary();
        t.string('job', 100).notNullable();
        t.bigInteger('from_at').notNullable();
        t.bigInteger('to_at').notNullable();
        t.integer('concurrency').notNullable();
        t.boolean('force').notNullable().defaultTo(false);
        t.string('status', 16).notNullable(); // running, paused, cancelled, done
        t.integer('total').notNullable();
        t.bigInteger('created_at').notNullable(); // store clock
        t.string('created_by', 200).notNullable();
        t.bigInteger('updated_at').notNullable();
        t.bigInteger('ended_at').nullable();
        t.index(['status'], 'scheduler_backfills_status');
        t.index(['job', 'created_at'], 'scheduler_backfills_job');
      });
      await knex.schema.createTable(BACKFILL_PERIODS_TABLE, (t) => {
        t.string('backfill_id', 32).notNullable();
        t.integer('idx').notNullable();
        t.bigInteger('scheduled_at').notNullable();
        t.string('state', 16).notNullable(); // pending, claimed, succeeded, failed, skipped, cancelled
        // The period's last attempt when a node first took it: the backfill's attempts are the later ones.
        t.integer('base_attempt').nullable();
        t.integer('attempt').nullable(); // the attempt whose outcome the state is
        t.string('status', 16).nullable(); // that attempt's status (or 'succeeded-before')
        t.string('node_id', 191).nullable();
        t.bigInteger('lease_until').nullable(); // store clock; a pending period is not taken before it
        t.primary(['backfill_id', 'idx']);
        t.index(['backfill_id', 'state', 'idx'], 'scheduler_backfill_periods_state');
      });
      if (knex.client.config.client === 'mysql2') await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [BACKFILLS_TABLE, 'job']);
    },
    async down(knex) {
      await knex.schema.dropTableIfExists(BACKFILL_PERIODS_TABLE);
      await knex.schema.dropTableIfExists(BACKFILLS_TABLE);
    },
  },
];

export const migrationSource: Knex.MigrationSource<Migration> = {
  getMigrations: async () => migrations,
  getMigrationName: (m) => m.name,
  getMigration: async (m) => ({ up: m.up, down: m.down }),
};