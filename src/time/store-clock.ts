/**
 * The store's clock as this node sees it: one clock for firing, whatever the node's own wall clock
 * says. Each sample reads the store's clock on the lease pool and notes the node's monotonic instants
 * around it (NTP's idea, without the daemon): the store's reading was taken within the round trip,
 * so the sample with the shortest round trip bounds the error best (± half of it). The estimate is
 * kept against the monotonic clock, so a step of the node's wall clock (NTP, an operator) moves
 * nothing here until the next sample shows the new offset.
 */
import type { Logger } from '../log.js';

export interface ClockSample {
  /** The store's clock, epoch ms. */
  storeMs: number;
  /** performance.now() before the statement was sent, and after its answer came. */
  sentAt: number;
  receivedAt: number;
  /** Date.now() when the answer came. */
  wallAtReceive: number;
}

/** What `sample` reads; the node's estimate of the store's clock and how its own clock differs. */
export interface ClockReading {
  /** Store clock minus this node's wall clock, ms (positive: the node is behind the store). */
  offsetMs: number;
  /** Round trip of the sample the estimate comes from: the estimate is within half of it. */
  rttMs: number;
  samples: number;
}

/** An offset beyond this is said in the log: the node's clock is wrong (NTP down?). */
export const OFFSET_WARN_MS = 1000;
/** Samples kept; with one every SAMPLE_EVERY_MS, the estimate looks at the last minute. */
const WINDOW = 12;
const SAMPLE_EVERY_MS = 5000;
/** A sample whose answer took longer than this says little about the clock; it is not kept. */
const MAX_RTT_MS = 1000;

interface Kept {
  /** Store clock minus the monotonic clock at the sample's midpoint. */
  storeMinusMono: number;
  /** Store clock minus the wall clock at the sample's midpoint. */
  storeMinusWall: number;
  rtt: number;
}

export class StoreClock {
  private kept: Kept[] = [];
  private best: Kept | undefined;
  private timer: NodeJS.Timeout | undefined;
  private warnedAt = -Infinity;

  /**
   * @param sample one reading of the store's clock, or null for a store whose clock is this
   *   machine's own (SQLite): then the offset is 0 and nothing is sampled.
   */
  constructor(
    private readonly sample: ((timeoutMs: number) => Promise<ClockSample>) | null,
    private readonly log: Logger,
  ) {}

  /** The store's clock now, as this node estimates it (epoch ms). Before any sample: the node's clock. */
  now(): number {
    return this.best ? performance.now() + this.best.storeMinusMono : Date.now();
  }

  reading(): ClockReading {
    return { offsetMs: this.best ? Math.round(this.best.storeMinusWall) : 0, rttMs: this.best ? Math.round(this.best.rtt * 10) / 10 : 0, samples: this.kept.length };
  }

  /** A few samples back to back (at start: before the first period is fired), then one every 5 s. */
  async start(initial = 5): Promise<ClockReading> {
    if (!this.sample) return this.reading();
    for (let i = 0; i < initial; i++) await this.take();
    const r = this.reading();
    if (r.samples === 0) {
      this.log.warn("the store's clock could not be sampled at start: periods fire by this node's clock until a sample succeeds (every 5 s)");
    } else {
      this.log.info({ clockOffsetMs: r.offsetMs, rttMs: r.rttMs }, 'clock offset to the store measured: periods fire by the store\'s clock');
      this.check();
    }
    this.timer = setInterval(() => {
      const had = this.kept.length > 0;
      void this.take().then(() => {
        if (!had && this.kept.length > 0) this.log.info({ clockOffsetMs: this.reading().offsetMs, rttMs: this.reading().rttMs }, 'clock offset to the store measured: periods fire by the store\'s clock');
        this.check();
      });
    }, SAMPLE_EVERY_MS);
    this.timer.unref();
    return r;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One sample; a store that does not answer keeps the estimate as it is. */
  async take(): Promise<void> {
    if (!this.sample) return;
    let s: ClockSample;
    try {
      s = await this.sample(MAX_RTT_MS);
    } catch {
      return;
    }
    const rtt = s.receivedAt - s.sentAt;
    if (!(rtt >= 0) || rtt > MAX_RTT_MS) return;
    const half = rtt / 2;
    const kept: Kept = { storeMinusMono: s.storeMs - (s.sentAt + half), storeMinusWall: s.storeMs - (s.wallAtReceive - half), rtt };
    // A step of the node's wall clock shows as a jump of the wall-based offset against the monotonic
    // one: the older samples then describe a clock that is no more, and go.
    const last = this.kept[this.kept.length - 1];
    if (last && Math.abs((kept.storeMinusWall - kept.storeMinusMono) - (last.storeMinusWall - last.storeMinusMono)) > 50) this.kept = [];
    // A step of the store's clock (NTP on the database host, a failover to a server whose clock
    // differs): the true offset lies within half a round trip of every sample, so a sample that cannot
    // agree with the best one means the store's clock moved, and the older samples go too.
    const best = this.best;
    if (best && this.kept.length > 0 && Math.abs(kept.storeMinusMono - best.storeMinusMono) > (kept.rtt + best.rtt) / 2 + 50) this.kept = [];
    this.kept.push(kept);
    if (this.kept.length > WINDOW) this.kept.shift();
    this.best = this.kept.reduce((a, b) => (b.rtt < a.rtt ? b : a));
  }

  private check(): void {
    const { offsetMs, rttMs } = this.reading();
    if (Math.abs(offsetMs) <= OFFSET_WARN_MS) return;
    // Once, then every 10 minutes while it lasts.
    if (performance.now() - this.warnedAt < 600_000) return;
    this.warnedAt = performance.now();
    this.log.warn({ clockOffsetMs: offsetMs, rttMs }, `this node's clock is ${Math.abs(offsetMs / 1000).toFixed(1)} s ${offsetMs > 0 ? 'behind' : 'ahead of'} the store's: periods fire by the store's clock; fix the node's time (NTP)`);
  }
}
