/**
 * `cancel` on the node that holds the attempt: about once a second while the node holds attempts,
 * one read of which of them an operator asked to stop (RunStore.cancelRequests); each is aborted
 * with reason 'cancelled' (a command's group gets SIGTERM, then SIGKILL after killAfter; a worker
 * body is terminated after its grace), and recorded `cancelled` with who asked and why.
 */
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { RunStore } from '../store/types.js';

/** How often the held attempts' cancel requests are read: a cancel takes effect within about this. */
export const CANCEL_POLL_MS = 1000;

export interface Cancellable {
  runId: string;
  /** Aborts the attempt, keeping who and why for its outcome. */
  cancel(by: { actor: string; reason: string | null }): void;
}

export class CancelWatch {
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private warnedAt = 0;

  constructor(
    private readonly store: Pick<RunStore, 'cancelRequests'>,
    /** The attempts this node holds that may still be cancelled (not aborted yet). */
    private readonly held: () => Cancellable[],
    private readonly log: Logger,
    private readonly everyMs = CANCEL_POLL_MS,
  ) {}

  /** Called when an attempt is taken: the watch runs while there is one. */
  arm(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.read(), this.everyMs);
    this.timer.unref();
  }

  private async read(): Promise<void> {
    if (this.reading) return;
    const held = this.held();
    if (held.length === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    this.reading = true;
    try {
      const asked = await this.store.cancelRequests(held.map((h) => h.runId));
      for (const h of held) {
        const by = asked.get(h.runId);
        if (by) h.cancel(by);
      }
    } catch (err) {
      // A store away: the request waits in the row, and is read once it answers.
      if (Date.now() - this.warnedAt > 30_000) {
        this.warnedAt = Date.now();
        this.log.warn({ err: { message: errorMessage(err) } }, 'cancel requests not read: trying again');
      }
    } finally {
      this.reading = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
