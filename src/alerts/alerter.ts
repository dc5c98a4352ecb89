/**
 * Alerts to SCHEDULER_ALERT_WEBHOOK, as an observer of the scheduler's events (never on the run path:
 * emit() only queues).
 *
 * - A period alert (failed, timed out, missed, abandoned) is owed work: this node writes it to the
 *   store's outbox in the background (one INSERT under a unique event key, tried again while the store
 *   is away), and every node's delivery timer claims due rows by compare-and-set with a lease, POSTs
 *   them and marks them sent, or due again after a backoff. A node that dies after writing the row
 *   leaves it to the others; a sender that dies mid-POST leaves a row whose lease runs out, and which
 *   is sent again (at least once; the Idempotency-Key lets the receiver drop the second copy).
 * - A node alert (this node lost or regained the store or the Redis quorum) cannot wait for the store:
 *   it is sent from memory, with the same timeout and backoff, from a bounded queue.
 */
import { errorMessage, StoreUnavailableError } from '../errors.js';
import type { SchedulerEvent, SchedulerObserver } from '../events/events.js';
import type { Logger } from '../log.js';
import { alertFor, type AlertBody } from './body.js';
import type { AlertOutbox } from './outbox.js';
import type { Webhook } from './webhook.js';

/** Waits after failed attempts 1, 2, ...: about an hour in all, then the alert is dropped. */
export const BACKOFF_MS = [5_000, 30_000, 120_000, 600_000, 1_200_000, 1_800_000];
/** How often each node looks for due outbox rows. */
export const DELIVERY_EVERY_MS = 1500;
/** A sender holds a claimed row this long (store clock): well over a POST's timeout. */
export const SEND_LEASE_MS = 30_000;
/** Sent and dropped rows are deleted after this long (checked hourly). */
export const KEEP_SENT_MS = 7 * 86_400_000;
/** Period alerts waiting for the store, and node alerts waiting for the webhook, at most. */
const MAX_QUEUED_PERIOD = 10_000;
const MAX_QUEUED_NODE = 100;
/** Rows claimed per round (sent concurrently). */
const CLAIM_BATCH = 10;

interface NodeAlert { body: AlertBody; attempts: number; dueAt: number }

export interface AlerterOptions {
  webhook: Webhook;
  outbox: AlertOutbox;
  nodeId: string;
  log: Logger;
  /** The node's clock corrected to the store's (epoch ms), for `at`. */
  now?: () => number;
  /** The Redis quorum's state when the daemon starts. */
  redisState?: string;
  deliveryEveryMs?: number;
}

export class Alerter implements SchedulerObserver {
  private readonly log: Logger;
  private readonly toWrite: AlertBody[] = [];
  private readonly nodeQueue: NodeAlert[] = [];
  private redisState: string;
  private writing: Promise<void> | null = null;
  private delivering: Promise<void> | null = null;
  private sendingNode: Promise<void> | null = null;
  private deliveryTimer: NodeJS.Timeout | undefined;
  private nodeTimer: NodeJS.Timeout | undefined;
  private writeRetry: NodeJS.Timeout | undefined;
  private lastPrune = 0;
  private stopped = false;
  private overflowWarned = false;

  constructor(private readonly options: AlerterOptions) {
    this.log = options.log.child({ component: 'alerts' });
    this.redisState = options.redisState ?? 'none';
  }

  emit(event: SchedulerEvent): void {
    if (event.type === 'store' || event.type === 'redis' || event.type === 'run-finished' || event.type === 'takeover' || event.type === 'skipped' || event.type === 'row-lost') {
      const alert = alertFor(event, this.options.nodeId, new Date((this.options.now ?? Date.now)()), this.redisState);
      if (event.type === 'redis') this.redisState = event.state;
      if (!alert) return;
      if (alert.scope === 'period') this.queueWrite(alert.body);
      else this.queueNode(alert.body);
    }
  }

  /** The delivery timer (every node with a webhook delivers the outbox). */
  start(): void {
    this.armDelivery(0);
  }

  /**
   * Stops the timers; waits (at most `deadlineMs`) for the outbox writes queued and the POSTs in
   * flight. `finalRound`: then one more delivery round, so that a short-lived process (`run-once`)
   * sends what it wrote itself (else any daemon does, within a second or two).
   */
  async stop(deadlineMs = 3000, finalRound = false): Promise<void> {
    const deadline = new Promise<void>((resolve) => setTimeout(resolve, deadlineMs).unref());
    await Promise.race([this.drainWrites(), deadline]);
    this.stopped = true;
    clearTimeout(this.deliveryTimer);
    clearTimeout(this.nodeTimer);
    clearTimeout(this.writeRetry);
    await Promise.race([Promise.allSettled([this.delivering, this.sendingNode]), deadline]);
    if (finalRound) await Promise.race([this.deliverRound(), deadline]);
    if (this.toWrite.length > 0) this.log.error({ alerts: this.toWrite.map((b) => b.id) }, 'stopping: alerts not written to the store are lost');
  }

  private async drainWrites(): Promise<void> {
    while (this.toWrite.length > 0 && !this.stopped) {
      this.flushWrites();
      await this.writing;
      if (this.toWrite.length > 0) await new Promise((r) => setTimeout(r, 200));
    }
  }

  // --- period alerts: the outbox ---

  private queueWrite(body: AlertBody): void {
    if (this.toWrite.length >= MAX_QUEUED_PERIOD) {
      if (!this.overflowWarned) this.log.error({ dropped: body.id }, `more than ${MAX_QUEUED_PERIOD} alerts wait for the store: dropping new ones (reported once)`);
      this.overflowWarned = true;
      return;
    }
    this.toWrite.push(body);
    this.flushWrites();
  }

  private flushWrites(): void {
    if (this.writing || this.stopped) return;
    this.writing = this.writeBatch().finally(() => {
      this.writing = null;
    });
  }

  private async writeBatch(): Promise<void> {
    while (this.toWrite.length > 0) {
      const batch = this.toWrite.slice(0, 100);
      try {
        await this.options.outbox.enqueue(batch.map((b) => ({ eventKey: b.id, body: JSON.stringify(b) })));
        this.toWrite.splice(0, batch.length);
        // Deliver soon, not at the next round.
        if (!this.stopped) this.armDelivery(0);
      } catch (err) {
        if (err instanceof StoreUnavailableError) {
          // Kept in memory and written once the store answers.
          this.log.debug({ err: { message: errorMessage(err) }, queued: this.toWrite.length }, 'alerts wait for the store');
          clearTimeout(this.writeRetry);
          if (!this.stopped) this.writeRetry = setTimeout(() => this.flushWrites(), 1000);
          return;
        }
        this.toWrite.splice(0, batch.length);
        this.log.error({ err: { message: errorMessage(err) }, alerts: batch.map((b) => b.id) }, 'alerts could not be written to the store: dropped');
      }
    }
  }

  private armDelivery(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.deliveryTimer);
    this.deliveryTimer = setTimeout(() => {
      if (this.delivering) {
        this.armDelivery(this.options.deliveryEveryMs ?? DELIVERY_EVERY_MS);
        return;
      }
      this.delivering = this.deliverRound().finally(() => {
        this.delivering = null;
        this.armDelivery(this.options.deliveryEveryMs ?? DELIVERY_EVERY_MS);
      });
    }, ms);
  }

  private async deliverRound(): Promise<void> {
    const { outbox, nodeId, webhook } = this.options;
    try {
      if (Date.now() - this.lastPrune > 3_600_000) {
        this.lastPrune = Date.now();
        await outbox.prune(KEEP_SENT_MS);
      }
      for (;;) {
        const rows = await outbox.claimDue(nodeId, SEND_LEASE_MS, CLAIM_BATCH);
        if (rows.length === 0) return;
        await Promise.all(rows.map(async (row) => {
          let body: AlertBody;
          try {
            body = JSON.parse(row.body) as AlertBody;
          } catch {
            await outbox.markFailed(row.id, nodeId, 'the stored body is not JSON', null);
            return;
          }
          try {
            await webhook.post(body);
          } catch (err) {
            const retryIn = row.attempts <= BACKOFF_MS.length ? BACKOFF_MS[row.attempts - 1]! : null;
            await outbox.markFailed(row.id, nodeId, errorMessage(err), retryIn);
            this.failed(body, row.attempts, errorMessage(err), retryIn);
            return;
          }
          if (!(await outbox.markSent(row.id, nodeId))) this.log.warn({ alert: body.id }, 'alert sent, but its claim had run out: another node may send it again');
          else this.log.info({ alert: body.id, kind: body.kind, attempts: row.attempts }, 'alert sent');
        }));
        if (this.stopped || rows.length < CLAIM_BATCH) return;
      }
    } catch (err) {
      // The store is away (the writes wait too): the next round tries again.
      if (!(err instanceof StoreUnavailableError)) this.log.warn({ err: { message: errorMessage(err) } }, 'alert delivery round failed');
    }
  }

  private failed(body: AlertBody, attempts: number, error: string, retryIn: number | null): void {
    const alert = { id: body.id, kind: body.kind, job: body.job };
    if (retryIn === null) this.log.error({ alert, attempts, err: { message: error } }, 'alert dropped: the webhook did not accept it in about an hour of retries');
    else this.log.warn({ alert, attempts, retryInMs: retryIn, err: { message: error } }, 'alert not delivered; trying again later');
  }

  // --- node alerts: from memory ---

  private queueNode(body: AlertBody): void {
    if (this.nodeQueue.length >= MAX_QUEUED_NODE) {
      const oldest = this.nodeQueue.shift()!;
      this.log.error({ alert: { id: oldest.body.id, kind: oldest.body.kind } }, 'too many node alerts waiting for the webhook: the oldest is dropped');
    }
    this.nodeQueue.push({ body, attempts: 0, dueAt: Date.now() });
    this.armNode(0);
  }

  private armNode(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.nodeTimer);
    this.nodeTimer = setTimeout(() => {
      if (this.sendingNode) return;
      this.sendingNode = this.sendNodeAlerts().finally(() => {
        this.sendingNode = null;
        const next = Math.min(...this.nodeQueue.map((a) => a.dueAt));
        if (Number.isFinite(next)) this.armNode(Math.max(0, next - Date.now()));
      });
    }, ms);
  }

  private async sendNodeAlerts(): Promise<void> {
    // In order of their events; one at a time (they are few).
    for (const alert of [...this.nodeQueue]) {
      if (this.stopped) return;
      if (alert.dueAt > Date.now()) continue;
      alert.attempts += 1;
      try {
        await this.options.webhook.post(alert.body);
        this.nodeQueue.splice(this.nodeQueue.indexOf(alert), 1);
        this.log.info({ alert: alert.body.id, kind: alert.body.kind, attempts: alert.attempts }, 'alert sent');
      } catch (err) {
        const retryIn = alert.attempts <= BACKOFF_MS.length ? BACKOFF_MS[alert.attempts - 1]! : null;
        this.failed(alert.body, alert.attempts, errorMessage(err), retryIn);
        if (retryIn === null) this.nodeQueue.splice(this.nodeQueue.indexOf(alert), 1);
        else alert.dueAt = Date.now() + retryIn;
      }
    }
  }
}
