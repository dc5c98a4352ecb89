/** Types of test/harness/job-sources.mjs. */

/** A side effect recorded by a jobSource body. */
export interface BodyEffect {
  event: string;
  job: string;
  periodKey: string;
  scheduledAt: string;
  attempt: number;
  trigger: string;
  nodeId: string;
  runId: string;
  dryRun: boolean;
  pid: number;
  /** Date.now() in the body when the line was written. */
  at: number;
  [extra: string]: unknown;
}

/** A side effect recorded by an attemptJob (faultJob, longJobSource, trivialJobSource) body. */
export interface FaultEffect {
  /** 'fail': the body threw on purpose (attemptJob's failAttempts), after its work. */
  ev: 'start' | 'end' | 'abort' | 'fail';
  key: string;
  attempt: number;
  node: string;
  pid: number;
  trigger?: string;
  /** The period instant (ms), on 'start'. */
  sched?: number;
  reason?: string;
  t: number;
}

/** `  key: <JSON>,` lines of a definition, one a field. */
export function definitionFields(fields: Record<string, unknown>): string;
export function jobSource(fields: string, body?: string): string;
export function attemptJob(options: { schedule: string; durationsMs: number[]; failAttempts?: number[]; extra?: Record<string, unknown> }): string;
export function faultJob(options: { schedule: string; durationMs: number; extra?: Record<string, unknown> }): string;
export function longJobSource(options: { schedule: string; lockTtl: string; firstMs: number; laterMs: number; extra?: Record<string, unknown> }): string;
export function trivialJobSource(options: { schedule: string; extra?: Record<string, unknown> }): string;
export function soonSchedule(leadMs: number, everySec?: number, offsetsSec?: number[]): { schedule: string; first: number };
