/** Types of bench/chaos-lib.mjs, for test/fault/chaos.test.ts. */
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
export function planFaults(seed: number, phaseMs: number): ChaosFault[];
export function describeFault(f: ChaosFault): string;
export function runChaos(options: { seconds?: number; seed?: number; bin?: string; log?: (line: string) => void; settleMs?: number; keep?: boolean; logLevel?: string; adminUrl?: string }): Promise<ChaosResult>;
