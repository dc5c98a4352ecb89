/**
 * Proving the lease when the body asks: reading a run's `ctx.signal` (`aborted`, `throwIfAborted()`)
 * runs the self-fence's check then and there. After a process pause every timer is overdue at once,
 * and a body's own timer may run before the fence's periodic check: its check before an
 * irreversible write must already fail. Kept apart from the executor so that a worker body's thread
 * imports only this.
 */
const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;
const throwIfAbortedOf = AbortSignal.prototype.throwIfAborted;

/**
 * Makes `signal.aborted` and `signal.throwIfAborted()` of this one signal run `check` first (which
 * may abort it, synchronously). Listeners, `reason` and the platform's own use of the signal are
 * untouched; a read from inside `check` sees the plain value.
 */
export function checkOnRead(signal: AbortSignal, check: () => void): void {
  let checking = false;
  const run = () => {
    if (checking) return;
    checking = true;
    try {
      check();
    } finally {
      checking = false;
    }
  };
  Object.defineProperty(signal, 'aborted', { configurable: true, enumerable: true, get(this: AbortSignal) { run(); return abortedOf.call(this); } });
  Object.defineProperty(signal, 'throwIfAborted', { configurable: true, value(this: AbortSignal) { run(); throwIfAbortedOf.call(this); } });
}

/** Milliseconds on the process-wide monotonic clock (the same in every thread, unlike performance.now()). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** A worker body's check: its signal aborts with 'lease-lost' once the parent's shared deadline has passed. */
export function checkAgainstDeadline(controller: AbortController, deadline: Float64Array | undefined): void {
  if (!deadline || !(deadline.buffer instanceof SharedArrayBuffer)) return;
  checkOnRead(controller.signal, () => {
    if (!controller.signal.aborted && monotonicMs() > deadline[0]!) controller.abort('lease-lost');
  });
}
