/**
 * The node's estimate of the store's clock: the shortest round trip decides, a step of the node's
 * wall clock moves nothing, a step of the store's clock is followed at the next sample, a store that
 * does not answer keeps the estimate, an offset over 1 s is said once. The samples come from a
 * scripted store clock (the real one is exercised by the skew fault test and bench/clock-skew.mjs).
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { StoreClock, type ClockSample } from '../../src/time/store-clock.js';

interface Script {
  /** Store clock minus the true time. */
  store: number;
  /** Node wall clock minus the true time. */
  wall: number;
  rtt: number;
  /** Where in the round trip the store read its clock (0.5: the middle). */
  at?: number;
  fail?: boolean;
}

const trueNow = (mono: number) => performance.timeOrigin + mono;

function sampler(script: Script): (timeoutMs: number) => Promise<ClockSample> {
  return async () => {
    if (script.fail) throw new Error('store unreachable');
    const sentAt = performance.now();
    const receivedAt = sentAt + script.rtt;
    return { storeMs: trueNow(sentAt + script.rtt * (script.at ?? 0.5)) + script.store, sentAt, receivedAt, wallAtReceive: trueNow(receivedAt) + script.wall };
  };
}

function logged(): { log: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({ write(chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done(); } });
  return { log: pino({ level: 'info' }, sink), lines };
}

describe('StoreClock', () => {
  it('takes the sample with the shortest round trip: a slow, lopsided answer does not skew the estimate', async () => {
    const script: Script = { store: 0, wall: -1500, rtt: 300, at: 0.95 };
    const clock = new StoreClock(sampler(script), logged().log);
    await clock.take();
    expect(Math.abs(clock.reading().offsetMs - 1500 - 135)).toBeLessThanOrEqual(2); // off by (0.95 - 0.5) x 300
    Object.assign(script, { rtt: 2, at: 0.5 });
    await clock.take();
    Object.assign(script, { rtt: 400, at: 0.05 });
    await clock.take();
    expect(clock.reading().offsetMs).toBe(1500);
    expect(clock.reading().rttMs).toBe(2);
    expect(Math.abs(clock.now() - trueNow(performance.now()))).toBeLessThanOrEqual(2);
  });

  it("a step of the node's wall clock moves nothing; the next sample shows the new offset", async () => {
    const script: Script = { store: 0, wall: 0, rtt: 1 };
    const clock = new StoreClock(sampler(script), logged().log);
    for (let i = 0; i < 3; i++) await clock.take();
    script.wall = 3000;
    expect(Math.abs(clock.now() - trueNow(performance.now()))).toBeLessThanOrEqual(2);
    await clock.take();
    expect(clock.reading().offsetMs).toBe(-3000);
    expect(clock.reading().samples).toBe(1);
    expect(Math.abs(clock.now() - trueNow(performance.now()))).toBeLessThanOrEqual(2);
  });

  it("a step of the store's clock is followed at the next sample, even though older samples had shorter round trips", async () => {
    const script: Script = { store: 0, wall: 0, rtt: 1 };
    const clock = new StoreClock(sampler(script), logged().log);
    for (let i = 0; i < 3; i++) await clock.take();
    Object.assign(script, { store: 1500, rtt: 20 });
    await clock.take();
    expect(Math.abs(clock.now() - (trueNow(performance.now()) + 1500))).toBeLessThanOrEqual(12);
    expect(clock.reading().samples).toBe(1);
  });

  it('a store that does not answer keeps the estimate; no store clock to sample (SQLite) is the node clock', async () => {
    const script: Script = { store: 800, wall: 0, rtt: 1 };
    const clock = new StoreClock(sampler(script), logged().log);
    await clock.take();
    script.fail = true;
    await clock.take();
    expect(clock.reading().offsetMs).toBe(800);
    const local = new StoreClock(null, logged().log);
    await local.start();
    expect(local.reading()).toEqual({ offsetMs: 0, rttMs: 0, samples: 0 });
    expect(Math.abs(local.now() - Date.now())).toBeLessThanOrEqual(1);
  });

  it('start() logs the offset it measured, and warns once when it is over 1 s', async () => {
    const { log, lines } = logged();
    const clock = new StoreClock(sampler({ store: 0, wall: 1700, rtt: 1 }), log);
    const r = await clock.start(3);
    clock.stop();
    expect(r.offsetMs).toBe(-1700);
    expect(lines.find((l) => l.clockOffsetMs !== undefined)?.clockOffsetMs).toBe(-1700);
    expect(lines.filter((l) => l.level === 40).map((l) => l.msg)).toEqual(["this node's clock is 1.7 s ahead of the store's: periods fire by the store's clock; fix the node's time (NTP)"]);
    const { log: quiet, lines: none } = logged();
    const fine = new StoreClock(sampler({ store: 0, wall: 400, rtt: 1 }), quiet);
    await fine.start(3);
    fine.stop();
    expect(none.filter((l) => l.level === 40)).toEqual([]);
  });
});
