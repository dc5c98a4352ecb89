/** Exit statuses of `bin/scheduler`, mapped from error codes in one place. */
import type { ErrorCode } from '../errors.js';

export const EXIT = {
  ok: 0,
  failed: 1,
  invalid: 2,
  refused: 3,
  unavailable: 4,
} as const;

export function exitCodeFor(code: ErrorCode | undefined): number {
  switch (code) {
    case 'E_CONFIG':
    case 'E_JOB_INVALID':
    case 'E_USAGE':
    case 'E_UNKNOWN_JOB':
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
