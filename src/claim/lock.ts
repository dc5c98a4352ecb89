/**
 * The lock seam. The lock only saves work (losers of a period send no query to the store); the
 * unique run row is the guarantee. Losing a race is a value (null), not an exception; only an
 * unreachable quorum throws (LockUnavailableError), and the claim then goes on through the row alone.
 */
export interface Lease {
  readonly key: string;
  /** Extends the lease; 'lost' when it is held elsewhere or expired, 'unavailable' when the quorum cannot answer. */
  extend(ttlMs: number): Promise<'ok' | 'lost' | 'unavailable'>;
  /** Releases it; never throws (a lease that cannot be released expires). */
  release(): Promise<void>;
  /**
   * The attempt is decided (its row says so): the key guards nothing more and is left to expire,
   * costing no command now; a provider closed before it expires (a clean stop) releases it then.
   * With `keepUntilMs` (epoch ms) later than its expiry, the key is kept until then instead (one
   * batched script call per master), and not released at a clean stop: a second, independent record
   * that the period ran, so that a store that loses the row (an asynchronous replica promoted)
   * cannot by itself make the period run again (its catch-up claim meets the key and stops).
   */
  settle(keepUntilMs?: number): void;
}

export type QuorumState = 'ok' | 'degraded' | 'down' | 'none';

export interface LockProvider {
  readonly kind: 'redlock' | 'none';
  /** Checks that a quorum answers (LockUnavailableError otherwise). Called at start. */
  connect(): Promise<void>;
  /** The lease on `key`, or null when another holder has it. */
  tryAcquire(key: string, ttlMs: number): Promise<Lease | null>;
  /** 'ok' all masters up, 'degraded' quorum up with some down, 'down' no quorum, 'none' no Redis configured. */
  state(): QuorumState;
  close(): Promise<void>;
}
