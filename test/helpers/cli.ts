/** Spawning the real `bin/scheduler`, as users do. */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/scheduler', import.meta.url));
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Environment without any SCHEDULER_* of the caller, plus `env`. */
export function cleanEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SCHEDULER_')) base[k] = v;
  return { ...base, SCHEDULER_LOG_LEVEL: 'warn', ...env };
}

export function runCli(args: string[], options: { cwd?: string; env?: Record<string, string | undefined>; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: options.cwd ?? ROOT, env: cleanEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A daemon (`bin/scheduler run`) kept running until stop(). Its stdout (JSON log lines) is collected. */
export class Daemon {
  readonly proc: ChildProcess;
  output = '';
  errors = '';
  readonly exited: Promise<number | null>;
  constructor(args: string[], options: { cwd?: string; env?: Record<string, string | undefined>; command?: string[] } = {}) {
    const cmd = options.command ?? [process.execPath, BIN];
    this.proc = spawn(cmd[0]!, [...cmd.slice(1), 'run', ...args], { cwd: options.cwd ?? ROOT, env: cleanEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout!.on('data', (d) => (this.output += d));
    this.proc.stderr!.on('data', (d) => (this.errors += d));
    this.exited = new Promise((resolve) => this.proc.on('exit', (code) => resolve(code)));
  }
  /** Parsed JSON log lines so far. */
  logs(): Array<Record<string, unknown>> {
    return this.output.split('\n').filter((l) => l.startsWith('{')).map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    });
  }
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 30_000): Promise<number | null> {
    if (this.proc.exitCode !== null) return this.proc.exitCode;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }
}
