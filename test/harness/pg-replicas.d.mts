/** Types of test/harness/pg-replicas.mjs. */
export function psql(port: number, sql: string, database?: string): string;

export interface PgServer {
  readonly dir: string;
  readonly port: number;
  readonly log: string;
  readonly running: boolean;
  inRecovery(): boolean;
}

export class PgReplicas {
  readonly servers: PgServer[];
  readonly sync: boolean;
  primaryIndex: number;
  readonly primary: PgServer;
  readonly standby: PgServer;
  url(database: string, attrs?: string | null): string;
  createDatabase(name: string): string;
  rows<T = Record<string, unknown>>(sql: string, database: string, i?: number): T[];
  replicating(timeoutMs?: number): Promise<void>;
  crash(i?: number): void;
  promote(i?: number): Promise<void>;
  switchover(): Promise<void>;
  cutReplication(): Promise<unknown>;
  rejoin(i?: number): Promise<void>;
  stop(): Promise<void>;
}

export function startPgReplicas(options?: { sync?: boolean }): Promise<PgReplicas>;
