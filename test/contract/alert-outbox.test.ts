/**
 * AlertOutbox conformance: the alert outbox (`scheduler_alerts`) on every backend, on real servers
 * (SQLite on a temp file, MariaDB and PostgreSQL on a fresh database each): one row per event key,
 * claims by compare-and-set with a lease on the store's clock, sent / retried / dropped only by the
 * claimer, a claim that ran out claimed again, pruning.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AlertOutbox } from '../../src/alerts/outbox.js';
import { Database } from '../../src/store/database.js';
import { storeBackends, type StoreBackend } from '../helpers/databases.js';
import { waitFor } from '../helpers/redis.js';

const backends = storeBackends('cron_alerts');

const uid = (): string => randomBytes(4).toString('hex');

for (const backend of backends) {
  // One outbox per backend: the tests run in order, and each drains what it enqueued.
  describe(`AlertOutbox contract: ${backend.name}`, () => {
    let fresh: Awaited<ReturnType<StoreBackend['fresh']>>;
    let db: Database;
    let other: Database;
    let outbox: AlertOutbox;

    beforeAll(async () => {
      fresh = await backend.fresh();
      db = await Database.open(fresh.config);
      await db.migrate();
      other = await Database.open(fresh.config);
      outbox = new AlertOutbox(db);
    });

    afterAll(async () => {
      await other?.close();
      await db?.close();
      await fresh?.drop();
    });

    it('enqueue writes one row per event key (a key written again, by any node, is left as it is), due now by the store clock', async () => {
      const key = `failed:job-${uid()}@2026-12-01T00:00:00.000Z:2`;
      const before = await db.now();
      expect(await outbox.enqueue([{ eventKey: key, body: '{"n":1}' }, { eventKey: `${key}-b`, body: '{"n":2}' }])).toBe(2);
      expect(await new AlertOutbox(other).enqueue([{ eventKey: key, body: '{"n":3}' }])).toBe(0);
      expect(await outbox.enqueue([{ eventKey: key, body: '{"n":4}' }, { eventKey: `${key}-c`, body: '{"n":5}' }])).toBe(1);
      expect(await outbox.enqueue([])).toBe(0);
      const rows = (await outbox.list()).filter((r) => r.eventKey.startsWith(key));
      expect(rows.map((r) => [r.eventKey, r.body, r.state, r.attempts])).toEqual([
        [key, '{"n":1}', 'pending', 0], [`${key}-b`, '{"n":2}', 'pending', 0], [`${key}-c`, '{"n":5}', 'pending', 0],
      ]);
      for (const r of rows) {
        expect(r.nextAt).toBeGreaterThanOrEqual(before - 2);
        // Due at its creation: both stamps are the store's clock in one INSERT, each evaluated on
        // its own (PostgreSQL's clock_timestamp()), so a millisecond may tick between them.
        expect(Math.abs(r.nextAt - r.createdAt)).toBeLessThanOrEqual(5);
      }
      // Drained: claimed and sent, so the next tests see only their own rows.
      const claimed = await outbox.claimDue('node-a', 30_000, 50);
      expect(claimed.map((r) => r.eventKey).sort()).toEqual(rows.map((r) => r.eventKey).sort());
      for (const r of claimed) expect(await outbox.markSent(r.id, 'node-a')).toBe(true);
    });

    it('two nodes claiming at once get disjoint rows, each counted one attempt and leased by the store clock; only the claimer marks a row', async () => {
      const keys = Array.from({ length: 12 }, (_, i) => `k-${i}-${uid()}`);
      await outbox.enqueue(keys.map((eventKey) => ({ eventKey, body: '{}' })));
      const before = await db.now();
      const [a, b] = await Promise.all([outbox.claimDue('node-a', 30_000, 50), new AlertOutbox(other).claimDue('node-b', 30_000, 50)]);
      expect([...a, ...b].map((r) => r.eventKey).sort()).toEqual([...keys].sort());
      for (const r of a) expect(r).toMatchObject({ state: 'sending', claimedBy: 'node-a', attempts: 1 });
      for (const r of b) expect(r).toMatchObject({ state: 'sending', claimedBy: 'node-b', attempts: 1 });
      for (const r of [...a, ...b]) expect(r.nextAt).toBeGreaterThanOrEqual(before + 30_000 - 2);
      // Nothing is due while the leases run.
      expect(await outbox.claimDue('node-c', 30_000, 50)).toEqual([]);
      const mine = [...a, ...b][0]!;
      const notMine = mine.claimedBy === 'node-a' ? 'node-b' : 'node-a';
      expect(await outbox.markSent(mine.id, notMine)).toBe(false);
      expect(await outbox.markFailed(mine.id, notMine, 'x', 1000)).toBe(false);
      for (const r of a) expect(await outbox.markSent(r.id, 'node-a')).toBe(true);
      for (const r of b) expect(await outbox.markSent(r.id, 'node-b')).toBe(true);
      // Sent once: marking it again, or claiming it, does nothing.
      expect(await outbox.markSent(mine.id, mine.claimedBy!)).toBe(false);
      expect(await outbox.claimDue('node-c', 30_000, 50)).toEqual([]);
      const sent = (await outbox.list()).filter((r) => keys.includes(r.eventKey));
      for (const r of sent) expect(r.state).toBe('sent');
      for (const r of sent) expect(r.sentAt).not.toBeNull();
    });

    it('a failed POST makes the row due again after the backoff (store clock), with its error; dropped rows are never claimed', async () => {
      const key = `retry-${uid()}`;
      const dropKey = `drop-${uid()}`;
      await outbox.enqueue([{ eventKey: key, body: '{}' }, { eventKey: dropKey, body: '{}' }]);
      const [first, second] = await outbox.claimDue('node-a', 30_000, 50);
      const retried = first!.eventKey === key ? first! : second!;
      const dropped = first!.eventKey === key ? second! : first!;
      expect(await outbox.markFailed(retried.id, 'node-a', 'POST http://h/***: answered HTTP 500', 400)).toBe(true);
      expect(await outbox.markFailed(dropped.id, 'node-a', 'POST http://h/***: answered HTTP 500', null)).toBe(true);
      const rows = new Map((await outbox.list()).map((r) => [r.eventKey, r]));
      expect(rows.get(key)).toMatchObject({ state: 'pending', attempts: 1, lastError: 'POST http://h/***: answered HTTP 500' });
      expect(rows.get(dropKey)).toMatchObject({ state: 'dropped', attempts: 1 });
      expect(await outbox.claimDue('node-b', 30_000, 50)).toEqual([]);
      const again = await waitFor('the retry to fall due', async () => {
        const got = await outbox.claimDue('node-b', 30_000, 50);
        return got.length > 0 ? got : undefined;
      }, 10_000, 50);
      expect(again.map((r) => [r.eventKey, r.claimedBy, r.attempts])).toEqual([[key, 'node-b', 2]]);
      expect(await outbox.markSent(again[0]!.id, 'node-b')).toBe(true);
    });

    it('a claim whose lease ran out (its sender died mid-POST) is claimed again by another node, and the first sender can no longer mark it', async () => {
      const key = `lease-${uid()}`;
      await outbox.enqueue([{ eventKey: key, body: '{"x":1}' }]);
      const [held] = await outbox.claimDue('node-dead', 300, 50);
      expect(held).toMatchObject({ eventKey: key, claimedBy: 'node-dead' });
      const retaken = await waitFor('the lease to run out', async () => {
        const got = await new AlertOutbox(other).claimDue('node-b', 30_000, 50);
        return got.length > 0 ? got : undefined;
      }, 10_000, 50);
      expect(retaken.map((r) => [r.eventKey, r.claimedBy, r.attempts, r.body])).toEqual([[key, 'node-b', 2, '{"x":1}']]);
      expect(await outbox.markSent(held!.id, 'node-dead')).toBe(false);
      expect(await outbox.markSent(retaken[0]!.id, 'node-b')).toBe(true);
    });

    it('prune deletes sent and dropped rows older than the cutoff, never pending ones', async () => {
      const key = `prune-${uid()}`;
      await outbox.enqueue([{ eventKey: key, body: '{}' }]);
      const total = (await outbox.list()).length;
      expect(await outbox.prune(3_600_000)).toBe(0);
      await waitFor('the store clock to move on', async () => (await db.now()) > (await outbox.list()).reduce((m, r) => Math.max(m, r.sentAt ?? 0), 0) + 20, 5_000, 10);
      const deleted = await outbox.prune(10);
      expect(deleted).toBe(total - 1);
      expect((await outbox.list()).map((r) => [r.eventKey, r.state])).toEqual([[key, 'pending']]);
    });
  });
}
