/** Types of test/harness/cluster.mjs. */
import type { Daemon } from './process.mjs';
import type { FaultEffect } from './job-sources.mjs';
import type { HistoryRun, Workspace } from './workspace.mjs';

export interface ClusterOptions {
  logLevel?: string;
  slotEnv?: (slot: string) => Record<string, string>;
  freshIds?: boolean;
  logFiles?: boolean;
}
export class Cluster {
  readonly nodes: Map<string, Daemon>;
  readonly all: Daemon[];
  constructor(ws: Workspace, env: Record<string, string>, options?: ClusterOptions);
  start(slot: string, extraEnv?: Record<string, string>, command?: string[]): Daemon;
  started(slot: string, timeoutMs?: number): Promise<void>;
  startAll(slots: string[]): Promise<Daemon[]>;
  byNodeId(nodeId: string): Daemon | undefined;
  effects(): FaultEffect[];
  logs(): Array<Record<string, unknown> & { _node: string | undefined }>;
  kill(slot: string): Promise<number>;
  stopAll(killAfterMs?: number): Promise<Array<number | null>>;
  stopOthers(except: string[]): Promise<Array<number | null>>;
  killAll(): Promise<void>;
  exits(): Array<{ nodeId: string | undefined; code: number | null; signal: NodeJS.Signals | null }>;
  history(): Promise<HistoryRun[]>;
}
