/**
 * A TCP proxy in front of a store, so that a test or a benchmark can fail the network between one
 * node and the store without touching the shared server:
 *   cut() / restore()  every connection reset and new ones refused (a crashed server, a firewall's reset);
 *   hole() / lift()    connections stay open and bytes go nowhere, with no error and no reset (a dead
 *                      NAT entry, a partition, a frozen server); lifting drops the held connections;
 *   armOnce(re, fn)    the next client->server chunk whose text matches is forwarded, then fn() runs
 *                      synchronously, before any reply can come back (to pause a node exactly while
 *                      its heartbeat UPDATE is in flight);
 *   slow(ms)           every reply reaches the client `ms` later, in order (a store far away or
 *                      overloaded: it answers, late); slow(0) ends it.
 */
import { connect, createServer, Socket } from 'node:net';
import { waitFor } from './process.mjs';

export class StoreProxy {
  constructor(targetPort, targetHost = '127.0.0.1') {
    this.targetPort = targetPort;
    this.targetHost = targetHost;
    this.port = 0;
    this.server = undefined;
    this.armed = undefined;
    this.holed = false;
    /** [client, upstream] of every open connection */
    this.pairs = new Set();
    /** the pairs caught by the hole */
    this.held = new Set();
    /** added to every server->client chunk (slow()) */
    this.delayMs = 0;
  }

  get isCut() {
    return this.server === undefined;
  }

  async start(port = 0) {
    const server = createServer((client) => {
      const upstream = new Socket();
      const pair = [client, upstream];
      this.pairs.add(pair);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
        this.held.delete(pair);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      // While holed, a new connection is accepted and then answered by nothing.
      if (this.holed) {
        this.held.add(pair);
        return;
      }
      upstream.connect(this.targetPort, this.targetHost, () => {
        if (this.held.has(pair)) return; // holed while connecting
        client.pipe(upstream);
        this.relay(upstream, client);
        // After the pipe's own listener: the chunk has been written upstream when fn() runs.
        client.on('data', (chunk) => {
          const armed = this.armed;
          if (armed && armed.pattern.test(chunk.toString('latin1'))) {
            this.armed = undefined;
            armed.fn();
          }
        });
      });
    });
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = server.address().port;
    return this.port;
  }

  /** Server->client bytes, each chunk held `delayMs` (as set when it arrived), never reordered. */
  relay(upstream, client) {
    const queue = [];
    let timer;
    let ended = false;
    const pump = () => {
      timer = undefined;
      const now = Date.now();
      while (queue.length > 0 && queue[0].at <= now) client.write(queue.shift().chunk);
      if (queue.length > 0) timer = setTimeout(pump, queue[0].at - now);
      else if (ended) client.end();
    };
    upstream.on('data', (chunk) => {
      if (this.delayMs === 0 && queue.length === 0) {
        client.write(chunk);
        return;
      }
      queue.push({ chunk, at: Date.now() + this.delayMs });
      timer ??= setTimeout(pump, Math.max(0, queue[0].at - Date.now()));
    });
    upstream.on('end', () => {
      ended = true;
      if (queue.length === 0) client.end();
    });
  }

  /** Every reply from now on reaches its client `ms` later (0: at once again). */
  slow(ms) {
    this.delayMs = ms;
  }

  /** `url` with this proxy's host and port. */
  urlFor(url) {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  /** Resets every connection and stops listening (new connections are refused), until restore(). */
  async cut() {
    const server = this.server;
    this.server = undefined;
    for (const [client, upstream] of this.pairs) {
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    }
    this.pairs.clear();
    this.held.clear();
    if (server) await new Promise((resolve) => server.close(() => resolve()));
  }

  /** Listens again on the same port. */
  async restore() {
    if (this.server) return;
    // The port was ours a moment ago; retry briefly if the kernel has not let go of it yet.
    await waitFor(`the store proxy to listen on ${this.port} again`, async () => {
      await this.start(this.port);
      return true;
    }, 10_000, 100);
  }

  /** From now on nothing passes, either way, on any connection; nothing is closed. */
  hole() {
    this.holed = true;
    for (const pair of this.pairs) {
      const [client, upstream] = pair;
      this.held.add(pair);
      client.unpipe(upstream);
      client.pause();
      upstream.pause();
    }
  }

  /** The held connections are dropped (as a timeout would at last); new ones pass again. */
  lift() {
    this.holed = false;
    for (const [client, upstream] of this.held) {
      client.destroy();
      upstream.destroy();
    }
    this.held.clear();
  }

  armOnce(pattern, fn) {
    this.armed = { pattern, fn };
  }

  async close() {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
    this.held.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(() => resolve()));
  }
}

/** Whether a TCP connection to the port is accepted within 2 s (a proxy's cut is real). */
export function accepts(port) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const done = (v) => {
      s.destroy();
      resolve(v);
    };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
    setTimeout(() => done(false), 2000).unref();
  });
}
