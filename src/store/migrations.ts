/**
 * Bundled migrations, applied by knex's migrator from this list (no migration files on disk, so an
 * installed package migrates from any working directory). Append new entries; never edit one that
 * has shipped.
 */
import type { Knex } from 'knex';

export const RUNS_TABLE = 'scheduler_runs';
export const MIGRATIONS_TABLE = 'scheduler_migrations';

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
];

export const migrationSource: Knex.MigrationSource<Migration> = {
  getMigrations: async () => migrations,
  getMigrationName: (m) => m.name,
  getMigration: async (m) => ({ up: m.up, down: m.down }),
};
