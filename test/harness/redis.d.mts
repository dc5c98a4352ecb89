/** Types of test/harness/redis.mjs. */
import type { ChildProcess } from 'node:child_process';

export function redisAnswers(port: number, options?: { password?: string; timeoutMs?: number }): Promise<boolean>;
export class RedisServer {
  readonly port: number;
  readonly dir: string;
  proc: ChildProcess | undefined;
  constructor(port: number, args?: string[]);
  get url(): string;
  start(): Promise<void>;
  stop(): Promise<void>;
  pause(): void;
  resume(): void;
  cleanup(): Promise<void>;
}
export function startRedisServers(n: number): Promise<RedisServer[]>;
export function plantLockKey(urls: string[], resource: string, ttlMs: number): Promise<Array<string | null>>;
