/** Types of test/harness/workspace.mjs. */
export class Workspace {
  readonly dir: string;
  readonly jobsDir: string;
  constructor(prefix?: string);
  get effectsFile(): string;
  get logsDir(): string;
  writeJob(file: string, source: string, folder?: string): string;
  path(...parts: string[]): string;
  sqliteStore(name?: string): string;
  lines(name: string): string[];
  records<T = Record<string, unknown>>(name: string): T[];
  effects<T = Record<string, unknown>>(): T[];
  cleanup(): void;
}

/** A run as printed by `history --json`. */
export interface HistoryRun {
  id: string;
  job: string;
  scheduledAt: string;
  periodKey: string;
  /** The shard of the period (0 for an unsharded job). */
  shard?: number;
  attempt: number;
  trigger: string;
  status: string;
  reason: string | null;
  nodeId: string;
  /** Null for a pending attempt (not started). */
  claimedAt?: string | null;
  startedAt: string | null;
  /** A pending attempt is due at this instant. */
  runAt: string | null;
  finishedAt: string | null;
  durationMs: number | null;
  error: string | null;
  result: unknown;
}
