/**
 * Opening the parts a command needs, in order, and closing them in reverse order.
 */
import type { Config } from './config/config.js';
import { Claimer } from './claim/claim.js';
import type { LockProvider } from './claim/lock.js';
import { NoLockProvider } from './claim/no-lock.js';
import { RedlockProvider } from './claim/redlock-provider.js';
import type { Logger } from './log.js';
import { Executor } from './run/execute.js';
import { PeriodRunner } from './run/period.js';
import { Takeover } from './run/takeover.js';
import { KnexRunStore } from './store/knex-store.js';
import type { RunStore } from './store/types.js';

export interface Runtime {
  store: RunStore;
  lock: LockProvider;
  claimer: Claimer;
  executor: Executor;
  runner: PeriodRunner;
  takeover: Takeover;
  close(): Promise<void>;
}

export async function openStore(config: Config): Promise<RunStore> {
  const store = await KnexRunStore.open(config.store);
  try {
    await store.migrate();
  } catch (err) {
    await store.close().catch(() => {});
    throw err;
  }
  return store;
}

export function createLockProvider(config: Config, log: Logger): LockProvider {
  if (config.redis.length === 0) return new NoLockProvider();
  return new RedlockProvider({ urls: config.redis, prefix: config.redisPrefix, log });
}

export async function openRuntime(config: Config, log: Logger): Promise<Runtime> {
  const store = await openStore(config);
  const lock = createLockProvider(config, log);
  try {
    await lock.connect();
  } catch (err) {
    await lock.close().catch(() => {});
    await store.close().catch(() => {});
    throw err;
  }
  const claimer = new Claimer(store, lock, config.nodeId, log);
  const executor = new Executor(store, config.nodeId, log);
  const runner = new PeriodRunner(store, claimer, executor, config.nodeId, log);
  const takeover = new Takeover(store, runner, log);
  return {
    store, lock, claimer, executor, runner, takeover,
    async close() {
      await lock.close().catch(() => {});
      await store.close().catch(() => {});
    },
  };
}
