/**
 * Three `bin/scheduler run` nodes on one PostgreSQL database and three Redis masters: every period of an
 * every-second job runs exactly once, counted from the bodies' own side effects.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createPostgresDb, type TestDatabase } from '../helpers/databases.js';
import { startRedisServers, type RedisServer } from '../helpers/redis.js';
import { runClusterScenario } from './cluster-scenario.js';

describe('cluster on PostgreSQL with 3 Redis masters', () => {
  let db: TestDatabase | undefined;
  let redis: RedisServer[] = [];

  beforeAll(async () => {
    db = await createPostgresDb('cron_it_cluster');
    redis = await startRedisServers(3);
  });

  afterAll(async () => {
    await Promise.all(redis.map((r) => r.cleanup()));
    await db?.drop();
  });

  it('3 nodes: each period once, none missing, work shared, history agrees with the side effects', async () => {
    await runClusterScenario({ store: db!.url, redis: redis.map((r) => r.url), nodes: 3 });
  });
});
