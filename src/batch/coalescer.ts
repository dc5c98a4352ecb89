/**
 * Calls made within one turn of the event loop, sent as one batch: a tick's claims (every lock
 * request, then every run row won) go out in one round trip each instead of one per period. The
 * callers keep their one-call-one-answer shape; only the wire sees the batch. A batch is sent on
 * the next `setImmediate` (after the promise continuations of the current turn, so that answers
 * arriving together are sent on together), or at once when it reaches `maxBatch`.
 */
export class Coalescer<In, Out> {
  private queue: Array<{ input: In; resolve: (out: Out) => void; reject: (err: unknown) => void }> = [];
  private scheduled: NodeJS.Immediate | undefined;

  constructor(
    /** Sends a batch; answers in input order (one answer per input), or throws for the whole batch. */
    private readonly send: (inputs: In[]) => Promise<Out[]>,
    private readonly maxBatch = 500,
  ) {}

  add(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      if (this.queue.length >= this.maxBatch) this.flush();
      else this.scheduled ??= setImmediate(() => this.flush());
    });
  }

  /** Sends what is queued now. */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    let sent: Promise<Out[]>;
    try {
      sent = this.send(batch.map((b) => b.input));
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then((outs) => {
      batch.forEach((b, i) => (i < outs.length ? b.resolve(outs[i]!) : b.reject(new Error('batch answered fewer items than it was sent'))));
    }, (err: unknown) => {
      for (const b of batch) b.reject(err);
    });
  }
}
