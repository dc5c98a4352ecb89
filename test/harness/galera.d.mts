/** Types of test/harness/galera.mjs. */
import type { ChildProcess } from 'node:child_process';

export const GALERA_PROVIDER: string;
export function galeraMissing(): string[];

export interface GaleraStatus {
  size: number;
  state: string;
  component: string;
  ready: boolean;
  connected: boolean;
}

export class GaleraNode {
  readonly index: number;
  readonly port: number;
  readonly gcommPort: number;
  readonly istPort: number;
  readonly sstPort: number;
  readonly dir: string;
  readonly datadir: string;
  readonly proc: ChildProcess | undefined;
  /** When the process was seen exiting (ms), undefined while it runs. */
  readonly exitedAt: number | undefined;
  readonly name: string;
  readonly alive: boolean;
  readonly pid: number | undefined;
  readonly errorLog: string;
  logTail(n?: number): string;
  status(timeoutMs?: number): Promise<GaleraStatus>;
  synced(size: number): Promise<boolean>;
  waitSynced(size: number, timeoutMs?: number): Promise<void>;
  kill(): Promise<void>;
  terminate(timeoutMs?: number): Promise<void>;
  query<T = Record<string, unknown>>(sql: string, values?: unknown[]): Promise<T[]>;
}

export class GaleraCluster {
  readonly size: number;
  readonly dir: string;
  readonly name: string;
  readonly nodes: GaleraNode[];
  /** How long start() took, ms. */
  readonly startMs: number | undefined;
  constructor(options?: { size?: number; providerOptions?: string[] });
  start(): Promise<this>;
  node(i: number): GaleraNode;
  url(i: number, db: string): string;
  multiUrl(db: string, order?: number[]): string;
  createDatabase(name: string): Promise<string>;
  kill(i: number): Promise<void>;
  restart(i: number, timeoutMs?: number): Promise<void>;
  isolate(i: number): Promise<void>;
  heal(i: number, timeoutMs?: number): Promise<void>;
  killNow(): void;
  stop(): Promise<void>;
}

export function startGalera(options?: { size?: number; providerOptions?: string[] }): Promise<GaleraCluster>;
