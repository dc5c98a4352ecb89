/**
 * The ports the harness hands out for servers the tests start themselves (test/harness/process.mjs).
 * A CI run once failed in test/fault/lease.test.ts because two of three Redis masters meant to be down
 * got the same port from the kernel's port 0: a port handed out must not come back while it is held,
 * and two files running side by side must not draw the same one.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, freePorts, portRange, releasePort } from '../harness/process.mjs';

const held: Server[] = [];
afterAll(async () => {
  await Promise.all(held.map((s) => new Promise<void>((r) => s.close(() => r()))));
});

/** Listens on the first port of the range that nothing else holds; that port. */
async function holdOne(first: number, last: number): Promise<number> {
  for (let port = first; port <= last; port++) {
    const srv = createServer();
    const ok = await new Promise<boolean>((resolve) => {
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (ok) {
      held.push(srv);
      return port;
    }
  }
  throw new Error(`no port of ${first}-${last} could be held`);
}

describe('free ports for the servers a test starts', () => {
  it('every worker slot has a range of its own, below the ephemeral range the kernel assigns from', () => {
    const [ephemeralFirst] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    const ranges = Array.from({ length: 25 }, (_, slot) => portRange(slot));
    for (const [i, a] of ranges.entries()) {
      expect(a.last).toBeLessThan(ephemeralFirst!);
      for (const b of ranges.slice(i + 1)) expect(a.last < b.first || b.last < a.first, `${a.first}-${a.last} and ${b.first}-${b.last} overlap`).toBe(true);
    }
    expect(portRange(1)).not.toEqual(portRange(2)); // the two workers of the two-at-a-time project
  });

  it('freePorts(3) gives three distinct ports of this worker\'s range, none of them 6379', async () => {
    const { first, last } = portRange();
    const ports = await freePorts(3);
    expect(new Set(ports).size).toBe(3);
    for (const p of ports) {
      expect(p).toBeGreaterThanOrEqual(first);
      expect(p).toBeLessThanOrEqual(last);
      expect(p).not.toBe(6379);
    }
  });

  it('never hands a port out twice until it is released, and skips a port another server holds', async () => {
    const { first, last } = portRange();
    const taken = await holdOne(first, last);
    const drawn: number[] = [];
    let refusal: unknown;
    // One draw more than the range holds: the range runs out and says so, instead of repeating a port.
    for (let i = 0; i <= last - first + 1 && refusal === undefined; i++) {
      try {
        drawn.push(await freePort());
      } catch (err) {
        refusal = err;
      }
    }
    expect(new Set(drawn).size).toBe(drawn.length);
    expect(drawn).not.toContain(taken);
    expect(String(refusal)).toContain(`no free port left in ${first}-${last}`);

    releasePort(drawn[0]!);
    expect(await freePort()).toBe(drawn[0]);
  });
});
