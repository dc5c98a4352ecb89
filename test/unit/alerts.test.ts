/**
 * What an event alerts (pure): only the period's last word, once per kind of dependency loss; the
 * webhook URL as shown; onFailure validated as an optional function.
 */
import { describe, expect, it } from 'vitest';
import { alertFor } from '../../src/alerts/body.js';
import { redactWebhookUrl } from '../../src/alerts/webhook.js';
import type { SchedulerEvent } from '../../src/events/events.js';
import { validateJob } from '../../src/jobs/validate.js';

const at = new Date('2026-12-01T10:00:05.000Z');
const period = new Date('2026-12-01T10:00:00.000Z');
const ref = { job: 'report', periodKey: 'report@2026-12-01T10:00:00.000Z', scheduledAt: period };
const finished = (over: Partial<Extract<SchedulerEvent, { type: 'run-finished' }>>): SchedulerEvent => ({
  type: 'run-finished', ...ref, attempt: 2, trigger: 'schedule', runId: '7', status: 'failed', reason: null, durationMs: 5,
  error: 'boom\n  at stack', recorded: true, final: true, nextAttempt: null, ...over,
});

describe('alertFor', () => {
  it('a final failure or timeout alerts with its first error line and a key of kind, period and attempt', () => {
    expect(alertFor(finished({}), 'n1', at, 'none')).toEqual({
      scope: 'period',
      body: {
        kind: 'failed', job: 'report', period: '2026-12-01T10:00:00.000Z', periodKey: ref.periodKey, attempt: 2, status: 'failed',
        error: 'boom', count: 1, node: 'n1', at: '2026-12-01T10:00:05.000Z', id: `failed:${ref.periodKey}:2`,
      },
    });
    expect(alertFor(finished({ status: 'timed_out', error: null }), 'n1', at, 'none')!.body).toMatchObject({ kind: 'timed_out', error: null, id: `timed_out:${ref.periodKey}:2` });
  });

  it('nothing for an attempt with a retry owed, one not recorded by this node, or a success', () => {
    expect(alertFor(finished({ final: false, nextAttempt: { attempt: 3, runAt: at } }), 'n1', at, 'none')).toBeNull();
    expect(alertFor(finished({ recorded: false, final: false }), 'n1', at, 'none')).toBeNull();
    expect(alertFor(finished({ status: 'succeeded', error: null }), 'n1', at, 'none')).toBeNull();
  });

  it('missed periods: one alert for the range with its count; other skips and takeovers that owe an attempt: none', () => {
    const last = new Date('2026-12-01T10:00:04.000Z');
    expect(alertFor({ type: 'skipped', job: 'report', reason: 'missed', count: 5, first: period, last }, 'n1', at, 'none')!.body)
      .toMatchObject({ kind: 'missed', periodKey: ref.periodKey, count: 5, status: 'skipped', attempt: null, id: `missed:${ref.periodKey}:${last.toISOString()}` });
    expect(alertFor({ type: 'skipped', job: 'report', reason: 'coalesced', count: 5, first: period, last }, 'n1', at, 'none')).toBeNull();
    expect(alertFor({ type: 'takeover', ...ref, attempt: 1, deadNode: 'n2', result: 'owed' }, 'n1', at, 'none')).toBeNull();
    expect(alertFor({ type: 'takeover', ...ref, attempt: 3, deadNode: 'n2', result: 'failed' }, 'n1', at, 'none')!.body)
      .toMatchObject({ kind: 'abandoned', status: 'failed', attempt: 3, id: `abandoned:${ref.periodKey}:3` });
  });

  it('node alerts: the store lost and back; the Redis quorum lost (down) and back from down, not a degraded quorum', () => {
    expect(alertFor({ type: 'store', state: 'down', error: 'connect ECONNREFUSED\nmore' }, 'n1', at, 'ok')).toEqual({
      scope: 'node',
      body: { kind: 'store_lost', job: null, period: null, periodKey: null, attempt: null, status: null, error: 'connect ECONNREFUSED', count: 1, node: 'n1', at: at.toISOString(), id: `n1:store_lost:${at.toISOString()}` },
    });
    expect(alertFor({ type: 'store', state: 'ok' }, 'n1', at, 'ok')!.body.kind).toBe('store_back');
    expect(alertFor({ type: 'redis', state: 'down' }, 'n1', at, 'degraded')!.body.kind).toBe('redis_lost');
    expect(alertFor({ type: 'redis', state: 'degraded' }, 'n1', at, 'down')!.body.kind).toBe('redis_back');
    expect(alertFor({ type: 'redis', state: 'degraded' }, 'n1', at, 'ok')).toBeNull();
    expect(alertFor({ type: 'redis', state: 'ok' }, 'n1', at, 'degraded')).toBeNull();
  });
});

describe('redactWebhookUrl', () => {
  it('keeps scheme, host and port; hides a password, the path and the query', () => {
    expect(redactWebhookUrl('https://hooks.slack.com/services/T0/B0/XXXX')).toBe('https://hooks.slack.com/***');
    expect(redactWebhookUrl('http://bot:pw@127.0.0.1:8080/?token=abc')).toBe('http://bot:***@127.0.0.1:8080/***');
    expect(redactWebhookUrl('https://alerts.example.com')).toBe('https://alerts.example.com');
    expect(redactWebhookUrl('not a url with secret')).toBe('***');
  });
});

describe('onFailure in a job definition', () => {
  const run = async () => {};
  it('is optional, and a function when given', () => {
    expect(validateJob('jobs/a.ts', { schedule: '* * * * *', run }, 'UTC').job!.onFailure).toBeUndefined();
    const onFailure = async () => {};
    expect(validateJob('jobs/a.ts', { schedule: '* * * * *', run, onFailure }, 'UTC').job!.onFailure).toBe(onFailure);
    expect(validateJob('jobs/a.ts', { schedule: '* * * * *', run, onFailure: 'mail me' }, 'UTC').problems).toEqual([
      `jobs/a.ts: field 'onFailure' = "mail me": expected a function (async onFailure(ctx, outcome) { ... }), or no field`,
    ]);
  });
});
