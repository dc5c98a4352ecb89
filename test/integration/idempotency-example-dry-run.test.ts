/**
 * examples/idempotency/order-delivery.ts (and import-events.ts) under `run-once --dry-run`, as a user tries it first: ctx.once
 * stores no key, and runs fn for the keys not stored yet, so the example's fn must not ship. Counted
 * from the carrier's own log (the side effect), and from the orders left paid.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import knexFactory from 'knex';
import { afterAll, describe, expect, it } from 'vitest';
import { createTables } from '../../examples/idempotency/_business-db.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { Workspace } from '../helpers/workspace.js';

const ws = new Workspace('cron-example-dry-');
// Inside the project, so that the example's `knex` import resolves (as in a user's service).
mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
const jobsDir = mkdtempSync(join(ROOT, 'test-artifacts', 'examples-dry-'));
afterAll(() => {
  rmSync(jobsDir, { recursive: true, force: true });
  ws.cleanup();
});

describe('the idempotency examples under --dry-run', () => {
  it('order-delivery ships nothing and marks nothing delivered; import-events writes nothing', async () => {
    cpSync(join(ROOT, 'examples', 'idempotency'), jobsDir, { recursive: true });
    const business = ws.path('business.db');
    const db = knexFactory({ client: 'better-sqlite3', connection: { filename: business }, useNullAsDefault: true });
    try {
      await createTables(db);
      await db('orders').insert([1, 2, 3].map((i) => ({ id: `ORDER_${i}`, address: `${i} Main St`, cents: 100 * i, status: 'paid' })));
      const env = { SCHEDULER_STORE: ws.sqliteStore(), SCHEDULER_JOBS_DIR: jobsDir, SCHEDULER_HTTP: 'off', BUSINESS_DB: `sqlite:${business}`, CARRIER_LOG: ws.path('carrier.jsonl'), EXAMPLE_CARRIER_MS: '1' };
      const r = await runCli(['run-once', 'order-delivery', '--dry-run', '--json'], { cwd: ws.dir, env });
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as { runs: Array<{ status: string; result: { orders: number } }> };
      expect(report.runs.map((x) => [x.status, x.result.orders])).toEqual([['succeeded', 3]]);
      expect(existsSync(ws.path('carrier.jsonl')) ? readFileSync(ws.path('carrier.jsonl'), 'utf8') : '').toBe('');
      expect((await db('orders').where({ status: 'paid' })).length).toBe(3);

      // import-events: the dry run reads the events and writes nothing, not even the checkpoint's row.
      await db('source_events').insert([1, 2, 3].map((id) => ({ id, customer: 'c1', cents: id })));
      const imp = await runCli(['run-once', 'import-events', '--dry-run', '--json'], { cwd: ws.dir, env });
      expect(imp.code, imp.stderr).toBe(0);
      expect((JSON.parse(imp.stdout) as { runs: Array<{ status: string }> }).runs.map((x) => x.status)).toEqual(['succeeded']);
      expect(await db('import_checkpoints').select()).toEqual([]);
      expect(await db('customer_totals').select()).toEqual([]);
    } finally {
      await db.destroy();
    }
  });
});
