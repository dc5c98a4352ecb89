/** Types of test/harness/chaos.mjs, for test/fault/chaos.test.ts and test/unit/chaos-analysis.test.ts. */
export interface ChaosFault {
  at: number;
  kind: 'kill9' | 'pause' | 'term' | 'redis' | 'store';
  node?: string;
  masters?: number[];
  mode?: 'kill' | 'freeze';
  downMs?: number;
  pauseMs?: number;
  compound?: boolean;
}
export interface ChaosResult {
  seed: number;
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
export function planFaults(seed: number, phaseMs: number, options?: { everyKind?: boolean }): ChaosFault[];
export function describeFault(f: ChaosFault): string;
export function runChaos(options: { seconds?: number; seed?: number; bin?: string; log?: (line: string) => void; settleMs?: number; keep?: boolean; logLevel?: string; adminUrl?: string; everyKind?: boolean }): Promise<ChaosResult>;
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
