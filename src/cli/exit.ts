/** Exit statuses of `bin/scheduler`, mapped from error codes in one place. */
import type { Command } from 'commander';
import type { ErrorCode } from '../errors.js';

export const EXIT = {
  ok: 0,
  failed: 1,
  invalid: 2,
  refused: 3,
  unavailable: 4,
} as const;

export type ExitStatus = (typeof EXIT)[keyof typeof EXIT];

/** What each status means, whatever the command (the program's --help and the CLI reference). */
export const EXIT_MEANINGS: Record<ExitStatus, string> = {
  0: 'ok',
  1: 'a run failed',
  2: 'bad usage/configuration/job files',
  3: 'refused',
  4: 'store or Redis quorum unreachable',
};

/** A command's exit statuses, and what each means for that command. */
export type ExitStatuses = Partial<Record<ExitStatus, string>>;

const declared = new WeakMap<Command, ExitStatuses>();

/** `Exit: 0 ..., 2 ...`: the statuses of a command as its --help shows them. */
export function exitLine(statuses: ExitStatuses): string {
  return `Exit: ${Object.entries(statuses).map(([code, meaning]) => `${code} ${meaning}`).join(', ')}.`;
}

/** Declares a command's exit statuses: shown by its --help, read by the CLI reference (exitStatusesOf). */
export function withExitStatuses(cmd: Command, statuses: ExitStatuses): Command {
  declared.set(cmd, statuses);
  return cmd.addHelpText('after', `\n${exitLine(statuses)}`);
}

export function exitStatusesOf(cmd: Command): ExitStatuses | undefined {
  return declared.get(cmd);
}

export function exitCodeFor(code: ErrorCode | undefined): number {
  switch (code) {
    case 'E_CONFIG':
    case 'E_JOB_INVALID':
    case 'E_USAGE':
    case 'E_UNKNOWN_JOB':
    case 'E_NOT_FOUND':
    case 'E_NOT_A_PERIOD':
      return EXIT.invalid;
    case 'E_REFUSED':
      return EXIT.refused;
    case 'E_STORE_UNAVAILABLE':
    case 'E_LOCK_UNAVAILABLE':
      return EXIT.unavailable;
    default:
      return EXIT.failed;
  }
}
