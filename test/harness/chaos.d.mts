/** Types of test/harness/chaos.mjs, for test/fault/chaos.test.ts and test/unit/chaos-analysis.test.ts. */
export interface ChaosFault {
  at: number;
  kind: 'kill9' | 'pause' | 'term' | 'redis' | 'store' | 'failover';
  /** A node id; for a Galera failover, the Galera node's index. */
  node?: string | number;
  masters?: number[];
  /** Redis: kill or freeze; failover: crash (PostgreSQL), kill or partition (Galera). */
  mode?: 'kill' | 'freeze' | 'crash' | 'partition';
  /** pg-async: how long the replication was cut before the crash. */
  cutMs?: number;
  downMs?: number;
  pauseMs?: number;
  compound?: boolean;
}
export type ChaosEngine = 'mariadb' | 'pg-sync' | 'pg-async' | 'galera';
export const ENGINES: ChaosEngine[];
export interface ChaosResult {
  seed: number;
  engine: ChaosEngine;
  seconds: number;
  everyKind: boolean;
  plan: ChaosFault[];
  injected: Array<ChaosFault & { label: string; injectedAt: number; restoredAt?: number; skipped?: string; error?: string; notes: string[] }>;
  summary: {
    elapsedS: number;
    faultsByKind: Record<string, number>;
    periods: Record<string, number>;
    runsByStatus: Record<string, number>;
    restarts: number;
    [k: string]: unknown;
  };
  violations: Record<string, string[]>;
  violationCount: number;
  report: string;
  workspace: string;
}
export function resolveSeed(value?: string): number;
export function planFaults(seed: number, phaseMs: number, options?: { everyKind?: boolean; engine?: ChaosEngine }): ChaosFault[];
export function describeFault(f: ChaosFault): string;
export function runChaos(options: { seconds?: number; seed?: number; bin?: string; log?: (line: string) => void; settleMs?: number; keep?: boolean; logLevel?: string; adminUrl?: string; everyKind?: boolean; engine?: ChaosEngine }): Promise<ChaosResult>;
/** One side effect a chaos job's body wrote. */
export interface ChaosEffect {
  key: string;
  attempt: number;
  ev: string;
  t: number;
  pid: number;
  node: string;
  reason?: string;
}
export const CHAOS_JOBS: unknown[];
export function analyse(input: {
  effects: ChaosEffect[];
  runs: Array<Record<string, unknown>>;
  jobs: unknown[];
  windowFrom: number;
  windowTo: number;
  judgedTo: number;
  deaths: Map<number, number>;
  kills?: Map<number, number>;
  pauses: Array<{ pid: number; from: number; to: number }>;
  settledAt: number;
  gaveUp?: Set<string>;
}): { violations: Record<string, string[]>; periods: unknown };
export function outcomesGivenUp(logs: Array<Record<string, unknown>>): Set<string>;
