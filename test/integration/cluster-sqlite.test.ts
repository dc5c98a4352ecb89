/**
 * Several `bin/scheduler run` processes sharing one SQLite file and no Redis: the unique run row alone
 * decides who runs a period. Counted from the bodies' own side effects.
 */
import { describe, it } from 'vitest';
import { runClusterScenario } from './cluster-scenario.js';

describe('cluster on one shared SQLite file, no Redis', () => {
  it('3 processes: each period once, none missing, work shared, history agrees with the side effects', async () => {
    await runClusterScenario({ store: (ws) => ws.sqliteStore('shared.db'), redis: [], nodes: 3 });
  });
});
