/**
 * Independent Redis masters for Redlock, started here on free ports and stopped by pid. Never the
 * shared server on 6379.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { exited, freePorts, releasePort, waitFor } from './process.mjs';

/** Whether a Redis on the port answers PING within `timeoutMs`. */
export async function redisAnswers(port, { password, timeoutMs = 1000 } = {}) {
  const c = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: timeoutMs, commandTimeout: timeoutMs, password });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

export class RedisServer {
  /** @param args extra redis-server arguments (e.g. `--requirepass x`) */
  constructor(port, args = []) {
    this.port = port;
    this.args = args;
    this.dir = mkdtempSync(join(tmpdir(), `redis-${port}-`));
    this.proc = undefined;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start() {
    if (this.port === 6379) throw new Error('refusing to start a Redis of our own on the shared port 6379');
    this.proc = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, ...this.args], { stdio: 'ignore' });
    const i = this.args.indexOf('--requirepass');
    const password = i >= 0 ? this.args[i + 1] : undefined;
    await waitFor(`redis on ${this.port}`, () => redisAnswers(this.port, { password }));
  }

  /** SIGKILL by pid (this process only); an empty server on the next start(). */
  async stop() {
    const p = this.proc;
    if (!p) return;
    if (p.exitCode === null && p.signalCode === null) {
      const done = exited(p);
      p.kill('SIGKILL');
      await done;
    }
    this.proc = undefined;
  }

  pause() {
    this.proc?.kill('SIGSTOP');
  }

  resume() {
    this.proc?.kill('SIGCONT');
  }

  async cleanup() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
    releasePort(this.port); // gone for good: a long bench may start hundreds
  }
}

/** `n` masters on distinct free ports (from freePorts: never 6379), started together; none left running on failure. */
export async function startRedisServers(n) {
  const ports = await freePorts(n);
  const servers = ports.map((p) => new RedisServer(p));
  try {
    await Promise.all(servers.map((s) => s.start()));
  } catch (err) {
    await Promise.all(servers.map((s) => s.cleanup()));
    throw err;
  }
  return servers;
}

/**
 * Sets a Redlock resource (`<prefix>lock:<job>@<ISO>`) with one random value on the given masters,
 * NX with a TTL, as a lock winner that died before its INSERT leaves it. Returns each master's answer
 * ('OK', or null when the key was already there).
 */
export async function plantLockKey(urls, resource, ttlMs) {
  const value = `planted-${Math.random().toString(36).slice(2)}`;
  return Promise.all(urls.map(async (url) => {
    const c = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
    c.on('error', () => {});
    try {
      await c.connect();
      return await c.set(resource, value, 'PX', ttlMs, 'NX');
    } finally {
      c.disconnect();
    }
  }));
}
