/**
 * Independent Redis masters for Redlock tests, started on free ports and stopped by pid. Never the
 * shared server on 6379.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const until = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export class RedisServer {
  proc: ChildProcess | undefined;
  readonly dir: string;
  /** @param args extra redis-server arguments (e.g. `--requirepass x`) */
  constructor(readonly port: number, private readonly args: string[] = []) {
    this.dir = mkdtempSync(join(tmpdir(), `redis-${port}-`));
  }
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    this.proc = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.args], { stdio: 'ignore' });
    await waitFor(`redis on ${this.port}`, async () => {
      const pw = this.args.includes('--requirepass') ? this.args[this.args.indexOf('--requirepass') + 1] : undefined;
      const c = new Redis(this.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, password: pw });
      c.on('error', () => {});
      try {
        await c.connect();
        return (await c.ping()) === 'PONG';
      } finally {
        c.disconnect();
      }
    });
  }
  async stop(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
    this.proc = undefined;
  }
  pause(): void {
    this.proc?.kill('SIGSTOP');
  }
  resume(): void {
    this.proc?.kill('SIGCONT');
  }
  async cleanup(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startRedisServers(n: number): Promise<RedisServer[]> {
  const servers: RedisServer[] = [];
  for (let i = 0; i < n; i++) servers.push(new RedisServer(await freePort()));
  await Promise.all(servers.map((s) => s.start()));
  return servers;
}
