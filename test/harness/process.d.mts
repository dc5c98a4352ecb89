/** Types of test/harness/process.mjs. */
import type { ChildProcess } from 'node:child_process';

export const ROOT: string;
export const BIN: string;
export function sleep(ms: number): Promise<void>;
export function waitFor<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs?: number, everyMs?: number): Promise<T>;
/** A port of this process's range (portRange), never handed out twice by this process until released. */
export function freePort(): Promise<number>;
/** `n` distinct ports. */
export function freePorts(n: number): Promise<number[]>;
export function releasePort(port: number): void;
/** The ports a vitest worker slot (VITEST_POOL_ID; 0 outside vitest) draws from. */
export function portRange(slot?: number): { first: number; last: number };
export function randomTag(): string;
export function exited(proc: ChildProcess): Promise<void>;
export function parseJsonLines<T = Record<string, unknown>>(text: string): T[];
export function readJsonLines<T = Record<string, unknown>>(file: string): T[];
export function tail(file: string, n?: number): string;
export function procState(pid: number): string | undefined;
export function cleanEnv(env?: Record<string, string | undefined>): NodeJS.ProcessEnv;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}
export function runCli(args: string[], options?: { cwd?: string; env?: Record<string, string | undefined>; timeoutMs?: number; bin?: string }): Promise<CliResult>;

export interface DaemonOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** The whole command before `run` (default: this Node, `nodeArgs`, `bin`). */
  command?: string[];
  bin?: string;
  nodeArgs?: string[];
  /** stdout and stderr go to this file instead of memory. */
  logFile?: string;
  /** The caller's whole environment under `env` (default: cleanEnv, no SCHEDULER_* of the caller). */
  inheritEnv?: boolean;
}
export class Daemon {
  readonly proc: ChildProcess;
  readonly exited: Promise<number | null>;
  readonly nodeId: string | undefined;
  readonly logFile: string | undefined;
  /** The cluster slot it was started in (set by Cluster). */
  slot?: string;
  constructor(args?: string[], options?: DaemonOptions);
  get pid(): number | undefined;
  get alive(): boolean;
  get output(): string;
  get errors(): string;
  logs(): Array<Record<string, unknown>>;
  waitStarted(timeoutMs?: number): Promise<void>;
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  terminate(killAfterMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill9(): Promise<{ sentAt: number; goneAt: number }>;
  pause(): void;
  resume(): void;
}
