/**
 * A TCP proxy in front of a database that can turn into a black hole: connections stay open and
 * bytes go nowhere, with no error and no reset (a dead NAT entry, a partitioned network, a frozen
 * server). Lifting it drops the held connections; new ones are forwarded again.
 */
import { createServer, Socket, type Server } from 'node:net';

export class BlackHoleProxy {
  private server: Server | undefined;
  private readonly pairs = new Set<[Socket, Socket]>();
  private holed = false;
  /** The connections caught by the hole (open when it came, or accepted while it lasts). */
  private readonly held = new Set<[Socket, Socket]>();
  port = 0;

  constructor(private readonly targetPort: number, private readonly targetHost = '127.0.0.1') {}

  async start(): Promise<number> {
    this.server = createServer((client) => {
      const upstream = new Socket();
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      // While holed, a new connection is accepted and then answered by nothing.
      if (this.holed) {
        this.held.add(pair);
        return;
      }
      upstream.connect(this.targetPort, this.targetHost, () => {
        client.pipe(upstream);
        upstream.pipe(client);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', () => resolve()));
    this.port = (this.server.address() as { port: number }).port;
    return this.port;
  }

  /** From now on nothing passes, either way, on any connection; nothing is closed. */
  hole(): void {
    this.holed = true;
    for (const pair of this.pairs) {
      const [client, upstream] = pair;
      this.held.add(pair);
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /** The held connections are dropped (as a timeout would at last); new ones pass again. */
  lift(): void {
    this.holed = false;
    for (const [client, upstream] of this.held) {
      client.destroy();
      upstream.destroy();
    }
    this.held.clear();
  }

  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  async close(): Promise<void> {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
