/**
 * Alerts and `onFailure` hooks for the daemon: attached to the runtime's event bus before the
 * scheduler starts, stopped before the store closes.
 */
import type { Config } from '../config/config.js';
import type { Job } from '../jobs/types.js';
import type { Logger } from '../log.js';
import type { Runtime } from '../runtime.js';
import { Alerter } from './alerter.js';
import { FailureHooks } from './on-failure.js';
import { AlertOutbox } from './outbox.js';
import { POST_TIMEOUT_MS, Webhook } from './webhook.js';
import { ALERTS_STOP_MS, HOOKS_DRAIN_MS } from '../daemon/stop-budget.js';

export interface AttachedAlerts {
  /** Waits (bounded) for queued outbox writes, POSTs and hooks in flight, then stops the timers. */
  stop(): Promise<void>;
  /** After a reload: `onFailure` hooks of the new definitions. */
  setJobs(jobs: Job[]): void;
}

/**
 * `oneShot`: a `run-once` process, which stops soon: on stop it delivers what it wrote (waiting up to
 * a POST's timeout), as no daemon may be running to do it.
 */
export function attachAlerts(config: Config, rt: Pick<Runtime, 'db' | 'events' | 'clock' | 'lock'>, jobs: Job[], log: Logger, options: { oneShot?: boolean } = {}): AttachedAlerts {
  const hooks = new FailureHooks(jobs, config.nodeId, log);
  const detachHooks = rt.events.add(hooks);
  let alerter: Alerter | undefined;
  let detachAlerter = () => {};
  if (config.alertWebhook) {
    alerter = new Alerter({
      webhook: new Webhook({ url: config.alertWebhook, token: config.alertToken }),
      outbox: new AlertOutbox(rt.db), nodeId: config.nodeId, log, now: () => rt.clock.now(), redisState: rt.lock.state(),
    });
    detachAlerter = rt.events.add(alerter);
    alerter.start();
  }
  return {
    async stop() {
      await hooks.drain(HOOKS_DRAIN_MS);
      detachHooks();
      await (options.oneShot ? alerter?.stop(POST_TIMEOUT_MS + 2000, true) : alerter?.stop(ALERTS_STOP_MS));
      detachAlerter();
    },
    setJobs: (next) => hooks.setJobs(next),
  };
}
