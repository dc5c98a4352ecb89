/**
 * Processes of the harness (plain ESM: the bench scripts run it with plain `node`, the tests through
 * vitest): waiting, free ports, JSON log lines, and the real `bin/scheduler`, as one-shot commands
 * (runCli) and as daemons (Daemon) killed, paused and stopped by pid, never by name.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = fileURLToPath(new URL('../../bin/scheduler', import.meta.url));

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns something other than undefined or false (errors count as "not yet"). */
export async function waitFor(what, fn, timeoutMs = 30_000, everyMs = 100) {
  const until = Date.now() + timeoutMs;
  let lastErr;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ''}`);
    await sleep(everyMs);
  }
}

/**
 * Ports for the servers a test starts itself. Two guarantees, because a port is only probed here and
 * bound later by the server (redis-server, mariadbd, postgres), and some are handed out never to be
 * bound (a "master that is down"):
 * - within a process, a port handed out is not handed out again until releasePort() (the kernel's
 *   port 0 once gave two of three "down" masters the same port);
 * - each vitest worker (VITEST_POOL_ID, unique among the files running at once) draws from a range of
 *   its own below the kernel's ephemeral range (32768-60999 here), so two files side by side cannot
 *   collide, nor can a port the kernel assigns (a listen on port 0, an outgoing connection).
 * Outside vitest (the benches) the process uses slot 0. Each candidate is probed by a listen on
 * 127.0.0.1 so that a port some other process holds is skipped.
 */
const PORT_BASE = 20_000;
const PORT_SLOT_SIZE = 500;
const PORT_SLOTS = 25; // 20000-32499: stays below the ephemeral range

/** The range of ports the slot draws from (default: this process's VITEST_POOL_ID, or 0). */
export function portRange(slot = Number(process.env.VITEST_POOL_ID ?? 0)) {
  const first = PORT_BASE + (Number.isInteger(slot) && slot >= 0 ? slot % PORT_SLOTS : 0) * PORT_SLOT_SIZE;
  return { first, last: first + PORT_SLOT_SIZE - 1 };
}

const handedOut = new Set();
// A random start, so that processes of other runs on the same machine in the same slot rarely probe
// the same ports at the same moment.
let cursor = Math.floor(Math.random() * PORT_SLOT_SIZE);

function canListen(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A port of this process's range that nothing listens on and that this process has not handed out. */
export async function freePort() {
  const { first, last } = portRange();
  for (let tried = 0; tried < PORT_SLOT_SIZE; tried++) {
    const port = first + (cursor++ % PORT_SLOT_SIZE);
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`freePort: no free port left in ${first}-${last} (${handedOut.size} handed out by this process and not released)`);
}

/** `n` distinct ports (see freePort). */
export async function freePorts(n) {
  const ports = [];
  while (ports.length < n) ports.push(await freePort());
  return ports;
}

/** Lets freePort() hand `port` out again (its server is gone for good). */
export function releasePort(port) {
  handedOut.delete(port);
}

/** A short unique tag for names of databases, users and key prefixes. */
export function randomTag() {
  return `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

/** Resolves when the child has exited (at once if it already has). */
export function exited(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((r) => proc.once('exit', r));
}

/** The JSON lines of a text; other lines (a stack trace Node printed itself) are skipped. */
export function parseJsonLines(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a line cut short (still being written) or not JSON: visible in the text, skipped here
    }
  }
  return out;
}

export function readJsonLines(file) {
  return existsSync(file) ? parseJsonLines(readFileSync(file, 'utf8')) : [];
}

export function tail(file, n = 5) {
  if (!existsSync(file)) return '';
  return readFileSync(file, 'utf8').trim().split('\n').slice(-n).join(' | ');
}

/** The state letter of a process (R, S, T, Z, ...) from /proc, or undefined when it is gone. */
export function procState(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

/** Environment without any SCHEDULER_* (nor SIDE_EFFECTS) of the caller, plus `env`. */
export function cleanEnv(env = {}) {
  const base = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SCHEDULER_') && k !== 'SIDE_EFFECTS') base[k] = v;
  return { ...base, SCHEDULER_LOG_LEVEL: 'warn', ...env };
}

/**
 * `bin/scheduler <args>` (or another copy's, `bin`) to completion, killed after `timeoutMs`. A command
 * still running then is asked first for Node's diagnostic report (SIGUSR2: its JavaScript stack and
 * open handles), which is appended to its stderr, so that a hang says where it was.
 */
export function runCli(args, { cwd = ROOT, env, timeoutMs = 60_000, bin = BIN } = {}) {
  return new Promise((resolve, reject) => {
    const reportDir = join(tmpdir(), `cron-cli-report-${process.pid}-${randomBytes(4).toString('hex')}`);
    const child = spawn(process.execPath, ['--report-on-signal', '--report-signal=SIGUSR2', `--report-directory=${reportDir}`, bin, ...args], { cwd, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let hung = '';
    const timer = setTimeout(() => {
      mkdirSync(reportDir, { recursive: true });
      child.kill('SIGUSR2');
      setTimeout(() => {
        hung = `\n[harness] killed after ${timeoutMs} ms; ${hangReport(reportDir)}`;
        child.kill('SIGKILL');
      }, 2000).unref();
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      rmSync(reportDir, { recursive: true, force: true });
      resolve({ code, stdout, stderr: hung ? `${stderr}${hung} (signal ${signal})` : stderr });
    });
  });
}

/** The JavaScript stack and the active handles of the report a hung command wrote. */
function hangReport(dir) {
  try {
    const [file] = readdirSync(dir);
    const report = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    const stack = (report.javascriptStack?.stack ?? []).slice(0, 15).join(' | ');
    const handles = (report.libuv ?? []).filter((h) => h.is_active && h.is_referenced && !['async', 'check', 'prepare', 'idle', 'loop', 'signal'].includes(h.type))
      .map((h) => `${h.type}${h.remoteEndpoint ? ` to ${JSON.stringify(h.remoteEndpoint)}` : ''}${h.firesInMsFromNow !== undefined ? ` due in ${h.firesInMsFromNow} ms` : ''}`).join(', ');
    return `its report: stack ${report.javascriptStack?.message ?? ''} ${stack}; active handles: ${handles}`;
  } catch (err) {
    // The report is written from the event loop: none means a synchronous call held the main thread.
    return `no report within 2 s (the main thread is held by a synchronous call?): ${String(err)}`;
  }
}

/**
 * A daemon (`bin/scheduler run`) kept running until stopped. Its output is collected in memory, or
 * written to `logFile` (stdout and stderr both, as to a file or a pipe drained by a log shipper: a
 * benchmark's daemons must not wait on this process reading a pipe).
 */
export class Daemon {
  #output = '';
  #errors = '';

  constructor(args = [], { cwd = ROOT, env = {}, command, bin = BIN, nodeArgs = [], logFile, inheritEnv = false } = {}) {
    const cmd = command ?? [process.execPath, ...nodeArgs, bin];
    const fullEnv = inheritEnv ? { ...process.env, ...env } : cleanEnv(env);
    this.nodeId = fullEnv.SCHEDULER_NODE_ID;
    this.logFile = logFile;
    const fd = logFile ? openSync(logFile, 'a') : undefined;
    this.proc = spawn(cmd[0], [...cmd.slice(1), 'run', ...args], { cwd, env: fullEnv, stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd] });
    if (fd === undefined) {
      this.proc.stdout.on('data', (d) => (this.#output += d));
      this.proc.stderr.on('data', (d) => (this.#errors += d));
    } else {
      closeSync(fd);
    }
    this.exited = new Promise((resolve) => this.proc.on('exit', (code) => resolve(code)));
  }

  get pid() {
    return this.proc.pid;
  }

  get alive() {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Standard output so far (with a log file: the whole file). */
  get output() {
    if (this.logFile === undefined) return this.#output;
    return existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8') : '';
  }

  /** Standard error so far (empty with a log file: it is in the file). */
  get errors() {
    return this.#errors;
  }

  /** Parsed JSON log lines so far. */
  logs() {
    return parseJsonLines(this.output);
  }

  /** Resolves once the daemon has logged 'scheduler started'; rejects when it exits first or the time is up. */
  async waitStarted(timeoutMs = 60_000) {
    const until = Date.now() + timeoutMs;
    const what = () => `${this.errors}${this.logFile ? tail(this.logFile) : this.output.slice(-2000)}`;
    for (;;) {
      if (this.logs().some((l) => l.msg === 'scheduler started')) return;
      if (!this.alive) throw new Error(`${this.nodeId ?? 'the daemon'} exited with ${this.proc.exitCode ?? this.proc.signalCode} before starting: ${what()}`);
      if (Date.now() > until) throw new Error(`${this.nodeId ?? 'the daemon'} did not start within ${timeoutMs} ms: ${what()}`);
      await sleep(50);
    }
  }

  async #signalAndWait(signal, killAfterMs) {
    if (!this.alive) return;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), killAfterMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Sends `signal` (SIGKILL after `timeoutMs`); the exit code (null after a signal). */
  async stop(signal = 'SIGTERM', timeoutMs = 30_000) {
    await this.#signalAndWait(signal, timeoutMs);
    return this.proc.exitCode;
  }

  /** SIGCONT (a stopped process cannot act on SIGTERM), SIGTERM, SIGKILL after `killAfterMs`. */
  async terminate(killAfterMs = 40_000) {
    if (this.alive) this.resume();
    await this.#signalAndWait('SIGTERM', killAfterMs);
    return { code: this.proc.exitCode, signal: this.proc.signalCode };
  }

  /** kill -9; resolves once the process is gone, with the instant just before the signal and the instant it was seen gone. */
  async kill9() {
    const sentAt = Date.now();
    if (this.alive) this.proc.kill('SIGKILL');
    await this.exited;
    return { sentAt, goneAt: Date.now() };
  }

  /** SIGSTOP: the process stays, frozen (a long GC pause, a stalled VM). */
  pause() {
    this.proc.kill('SIGSTOP');
  }

  resume() {
    this.proc.kill('SIGCONT');
  }
}
