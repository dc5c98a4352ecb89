/**
 * Which job body the current callback belongs to: entered around an inline body's call, so that the
 * body's timers, promises and I/O callbacks carry it (AsyncLocalStorage follows them). The daemon's
 * `uncaughtException` and `unhandledRejection` handlers read it to name the job of a stray throw;
 * Node 20 runs those handlers in the async context of the callback that threw or rejected.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface BodyScope {
  job: string;
  periodKey: string;
  attempt: number;
}

const scope = new AsyncLocalStorage<BodyScope>();

export function inBodyScope<T>(body: BodyScope, fn: () => T): T {
  return scope.run(body, fn);
}

/** The job body the running callback came from, if any. */
export function currentBody(): BodyScope | undefined {
  return scope.getStore();
}
