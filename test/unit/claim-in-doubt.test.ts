/**
 * A claim whose answer was lost after the store committed it (a statement timeout, a connection
 * dropped at COMMIT): the row is this node's and `running`, with no body behind it. The node resolves
 * it as soon as the store answers: the row is given back as `pending`, due now, so that it neither
 * looks live (a later period of an overlap 'skip' job would be skipped because of it) nor waits a
 * whole lease for a takeover. The real SQLite store; only the answer of the INSERT is lost.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Claimer } from '../../src/claim/claim.js';
import { NoLockProvider } from '../../src/claim/no-lock.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { validateJob } from '../../src/jobs/validate.js';
import type { Job } from '../../src/jobs/types.js';
import { KnexRunStore } from '../../src/store/runs.js';
import type { RunStore } from '../../src/store/types.js';

let dir: string;
let real: KnexRunStore;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'claim-in-doubt-'));
  real = await KnexRunStore.open({ kind: 'sqlite', path: join(dir, 's.db'), url: `sqlite:${join(dir, 's.db')}` });
  await real.migrate();
});
afterAll(async () => {
  await real.close();
  rmSync(dir, { recursive: true, force: true });
});

const log = pino({ level: 'silent' });

/** The real store, whose INSERTs commit but whose answers are lost (`busy`: never sent instead). */
function losingAnswers(mode: 'lost' | 'busy'): RunStore {
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop !== 'insertRuns') return Reflect.get(target, prop, receiver);
      return async (runs: Parameters<RunStore['insertRuns']>[0]) => {
        if (mode === 'lost') await target.insertRuns(runs);
        throw new StoreUnavailableError(mode === 'lost' ? 'store cannot be reached (insert runs): the statement had no answer within 333 ms' : 'store is busy', { busy: mode === 'busy' });
      };
    },
  }) as RunStore;
}

/** The real store, whose INSERTs commit and answer, but whose live-runs read (beside the INSERT) fails. */
function failingReadBeside(): RunStore {
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop !== 'liveRunsOf') return Reflect.get(target, prop, receiver);
      return async () => {
        throw new StoreUnavailableError('store cannot be reached (live runs): WSREP has not yet prepared node for application use');
      };
    },
  }) as RunStore;
}

function job(name: string): Job {
  const r = validateJob(`${name}.mjs`, { schedule: '* * * * * *', lockTtl: '30s', run: async () => {} }, 'UTC');
  if (!r.job) throw new Error(r.problems.join('; '));
  return r.job;
}

describe('claims in doubt', () => {
  it('a claim whose answer was lost after it committed is given back as pending once the store answers, and no longer looks live', async () => {
    const j = job('doubt');
    const at = new Date(Date.UTC(2026, 0, 1, 0, 0, 0));
    const claimer = new Claimer(losingAnswers('lost'), new NoLockProvider(), 'n1', log);
    await expect(claimer.claim({ job: j, scheduledAt: at, trigger: 'schedule', attempt: 1, checkOverlap: 'tick' })).rejects.toThrow(StoreUnavailableError);
    expect(claimer.inDoubt.size).toBe(1);
    // What the lost answer left: the node's running row, live for a whole lease.
    expect((await real.periodRuns('doubt', at)).map((r) => [r.attempt, r.status, r.nodeId])).toEqual([[1, 'running', 'n1']]);
    expect((await real.liveRunsOf(['doubt'])).get('doubt')).toHaveLength(1);
    // The store answers: resolved at once (not after the lease), as the same attempt, due now.
    expect(await claimer.inDoubt.resolve(real, 'n1', () => false, log)).toBe(1);
    expect(claimer.inDoubt.size).toBe(0);
    const rows = await real.periodRuns('doubt', at);
    expect(rows.map((r) => [r.attempt, r.status])).toEqual([[1, 'pending']]);
    expect((await real.liveRunsOf(['doubt'])).get('doubt')).toEqual([]);
    expect((await real.duePending()).map((r) => r.id)).toContain(rows[0]!.id);
  });

  it('leaves alone a row another node holds, a row this node runs, and a statement that was never sent', async () => {
    const j = job('doubt-others');
    const at = new Date(Date.UTC(2026, 0, 1, 0, 0, 1));
    const claimer = new Claimer(losingAnswers('lost'), new NoLockProvider(), 'n1', log);
    await expect(claimer.claim({ job: j, scheduledAt: at, trigger: 'schedule', attempt: 1, checkOverlap: 'none' })).rejects.toThrow(StoreUnavailableError);
    const [row] = await real.periodRuns('doubt-others', at);
    // This node runs it after all (its own later claim): not given back.
    expect(await claimer.inDoubt.resolve(real, 'n1', (id) => id === row!.id, log)).toBe(0);
    expect((await real.periodRuns('doubt-others', at))[0]!.status).toBe('running');
    // Another node's row (the resolution is judged from the row, whoever inserted it): not given back.
    const other = new Claimer(losingAnswers('lost'), new NoLockProvider(), 'n2', log);
    const at2 = new Date(at.getTime() + 1000);
    await real.insertRun({ job: 'doubt-others', scheduledAt: at2, periodKey: `doubt-others@${at2.toISOString()}`, attempt: 1, trigger: 'schedule', nodeId: 'n1', leaseMs: 30_000 });
    await expect(other.claim({ job: j, scheduledAt: at2, trigger: 'schedule', attempt: 1, checkOverlap: 'none' })).rejects.toThrow(StoreUnavailableError);
    expect(await other.inDoubt.resolve(real, 'n2', () => false, log)).toBe(0);
    expect((await real.periodRuns('doubt-others', at2))[0]!.status).toBe('running');
    // A statement that never left the node (its pool was full) committed nothing: not in doubt.
    const busy = new Claimer(losingAnswers('busy'), new NoLockProvider(), 'n3', log);
    await expect(busy.claim({ job: j, scheduledAt: new Date(at.getTime() + 2000), trigger: 'schedule', attempt: 1, checkOverlap: 'none' })).rejects.toThrow(StoreUnavailableError);
    expect(busy.inDoubt.size).toBe(0);
  });

  it('a claim whose INSERT answered but whose overlap read beside it failed: the row is known to be ours, with no body, and is given back once the store answers', async () => {
    const j = job('doubt-read');
    const at = new Date(Date.UTC(2026, 0, 1, 0, 0, 5));
    const claimer = new Claimer(failingReadBeside(), new NoLockProvider(), 'n1', log);
    await expect(claimer.claim({ job: j, scheduledAt: at, trigger: 'schedule', attempt: 1, checkOverlap: 'tick' })).rejects.toThrow(StoreUnavailableError);
    expect((await real.periodRuns('doubt-read', at)).map((r) => [r.attempt, r.status, r.nodeId])).toEqual([[1, 'running', 'n1']]);
    expect(claimer.inDoubt.size).toBe(1);
    expect(await claimer.inDoubt.resolve(real, 'n1', () => false, log)).toBe(1);
    expect((await real.periodRuns('doubt-read', at)).map((r) => [r.attempt, r.status])).toEqual([[1, 'pending']]);
    expect((await real.liveRunsOf(['doubt-read'])).get('doubt-read')).toEqual([]);
  });
});
