/**
 * A command job's run as run/body.ts sees it: the variables its process gets, and how its end reads
 * in the run row (exit 0 succeeded with `{ exitCode: 0 }`; another code or a signal failed, with the
 * last line the command wrote to stderr).
 */
import type { Trigger } from '../../jobs/types.js';
import type { CommandEnded } from './process.js';

export { runCommand, killLiveGroups, type CommandEnded } from './process.js';

export interface CommandVarsOf {
  job: string;
  scheduledAt: Date;
  periodKey: string;
  attempt: number;
  runId: string;
  dryRun: boolean;
  trigger: Trigger;
  nodeId: string;
}

/** What `ctx` says, as environment variables. SCHEDULER_DRY_RUN is '1' or '0'. */
export function commandVars(r: CommandVarsOf): Record<string, string> {
  return {
    SCHEDULER_JOB: r.job,
    SCHEDULER_PERIOD: r.scheduledAt.toISOString(),
    SCHEDULER_PERIOD_KEY: r.periodKey,
    SCHEDULER_ATTEMPT: String(r.attempt),
    SCHEDULER_RUN_ID: r.runId,
    SCHEDULER_DRY_RUN: r.dryRun ? '1' : '0',
    SCHEDULER_TRIGGER: r.trigger,
    SCHEDULER_NODE_ID: r.nodeId,
  };
}

export type CommandSettled =
  | { kind: 'ok'; json: string; note: null; value: () => unknown; output: string }
  | { kind: 'error'; error: string; errorStack: null; output: string };

/** The end of a command that was not stopped by the scheduler. */
export function commandOutcome(ended: CommandEnded): CommandSettled {
  const { output } = ended;
  const said = ended.lastStderrLine ? `: ${ended.lastStderrLine}` : '';
  if (ended.startError !== null) return { kind: 'error', error: `could not start: ${ended.startError}`, errorStack: null, output };
  if (ended.exitCode === 0) return { kind: 'ok', json: '{"exitCode":0}', note: null, value: () => ({ exitCode: 0 }), output };
  if (ended.exitSignal) return { kind: 'error', error: `killed by ${ended.exitSignal}${said}`, errorStack: null, output };
  if (ended.exitCode !== null) return { kind: 'error', error: `exited with code ${ended.exitCode}${said}`, errorStack: null, output };
  return { kind: 'error', error: `ended without an exit status${said}`, errorStack: null, output };
}
