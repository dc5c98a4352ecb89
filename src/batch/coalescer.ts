/**
 * Coalescing of one kind of call that many callers make at about the same moment (a tick's claims,
 * the outcomes of runs that ended together, their heartbeats): calls are queued per group (a node id)
 * and handed to `send` together, on the next turn of the event loop (setImmediate: after the promise
 * continuations of the current turn, so that answers arriving together are sent on together) or as
 * soon as a group holds `max`. `send` settles every item it is given, one by one: each caller gets
 * its own answer. The callers keep their one-call-one-answer shape; only the wire sees the batch.
 *
 * `maxInFlight` bounds the batches being sent at once (group commit): while that many are out, new
 * calls wait and go together in the next one. Under load the statements grow instead of
 * multiplying, so that a pool of a few connections is never queued deeper than that (a queue of
 * single statements behind a slow one is how pool waits time out, and a busy store looks
 * unreachable).
 */
export interface Queued<I, R> {
  item: I;
  resolve(value: R): void;
  reject(err: unknown): void;
}

export class Coalescer<I, R> {
  private queued = new Map<string, Array<Queued<I, R>>>();
  private scheduled: NodeJS.Immediate | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly max: number,
    private readonly send: (group: string, batch: Array<Queued<I, R>>) => Promise<void>,
    private readonly maxInFlight = Infinity,
  ) {}

  add(group: string, item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const list = this.queued.get(group) ?? [];
      list.push({ item, resolve, reject });
      this.queued.set(group, list);
      if (list.length >= this.max && this.inFlight.size < this.maxInFlight) {
        this.queued.delete(group);
        this.dispatch(group, list);
      } else {
        this.scheduled ??= setImmediate(() => this.flush());
      }
    });
  }

  /** Sends what is queued now, in batches of at most `max`, as far as `maxInFlight` allows (the rest after). */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = null;
    for (const [group, list] of this.queued) {
      while (list.length > 0 && this.inFlight.size < this.maxInFlight) this.dispatch(group, list.splice(0, this.max));
      if (list.length === 0) this.queued.delete(group);
      if (this.inFlight.size >= this.maxInFlight) return;
    }
  }

  /** Sends what is queued and waits until every batch sent has settled (before the pool closes). */
  async drain(): Promise<void> {
    this.flush();
    while (this.inFlight.size > 0 || this.queued.size > 0) {
      await Promise.allSettled([...this.inFlight]);
      this.flush();
    }
  }

  /** Calls waiting for a batch (for tests and views). */
  get waiting(): number {
    let n = 0;
    for (const list of this.queued.values()) n += list.length;
    return n;
  }

  private dispatch(group: string, batch: Array<Queued<I, R>>): void {
    const sent = this.send(group, batch).catch((err: unknown) => {
      // `send` settles its items itself; whatever escaped it reaches those it left unsettled (a
      // promise settles once, so the others keep their answers).
      for (const q of batch) q.reject(err);
    }).finally(() => {
      this.inFlight.delete(sent);
      // What waited for a free slot goes now (on the next turn, with whatever joins it meanwhile).
      if (this.queued.size > 0) this.scheduled ??= setImmediate(() => this.flush());
    });
    this.inFlight.add(sent);
  }
}

/**
 * The simple shape over Coalescer: calls of one kind made in one turn of the event loop (a tick's
 * lock requests, then the rows of the periods won, their overlap checks and their pauses) sent as
 * one batch; `send` answers in input order, or throws for the whole batch.
 */
export function batched<I, R>(max: number, send: (items: I[]) => Promise<R[]>, maxInFlight = Infinity): (item: I) => Promise<R> {
  const coalescer = new Coalescer<I, R>(max, async (_group, batch) => {
    const answers = await send(batch.map((q) => q.item));
    batch.forEach((q, i) => (i < answers.length ? q.resolve(answers[i]!) : q.reject(new Error('a batch was answered for fewer items than it was sent'))));
  }, maxInFlight);
  return (item) => coalescer.add('', item);
}
