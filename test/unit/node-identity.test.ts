/**
 * Who holds a node id on this host: /proc/<pid>/stat parsed (fixture text), a zombie and a reused pid
 * judged gone (a restart right after `kill -9` was refused while the killed process was not yet
 * reaped), and the heartbeat of a node whose id another live process took over: one error line
 * naming that process, then a shutdown, and no more writes to the row.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeHeartbeat } from '../../src/nodes/heartbeat.js';
import { parseProcStat, pidAlive, processStamp } from '../../src/nodes/identity.js';
import type { ListedNode, NodeStore, RegisteredNode } from '../../src/store/types.js';

const hasProc = existsSync('/proc/self/stat');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('parseProcStat', () => {
  it('reads the state (field 3) and the start time (field 22), counting from the last parenthesis of the command name', () => {
    const running = '24088 (cat) R 24082 24082 17444 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 171563 3133440 416 18446744073709551615 0 0';
    expect(parseProcStat(running)).toEqual({ state: 'R', startTicks: '171563' });
    // A command name with spaces and a ')' of its own.
    const odd = '31 (my job) (x) Z 1 31 31 0 -1 4228 0 0 0 0 0 0 0 0 20 0 1 0 9876543 0 0 18446744073709551615 0 0';
    expect(parseProcStat(odd)).toEqual({ state: 'Z', startTicks: '9876543' });
    expect(parseProcStat('')).toBeNull();
    expect(parseProcStat('12 (short) S 1 2 3')).toBeNull();
  });
});

describe.runIf(hasProc)('pidAlive with /proc', () => {
  const children: Array<ReturnType<typeof spawn>> = [];
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
  });

  it('this process is alive under its own stamp; under another stamp (a pid given to a new process) it is not', () => {
    const stamp = processStamp();
    const bootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    expect(stamp).toMatch(new RegExp(`^${bootId}:\\d+$`));
    expect(pidAlive(process.pid, stamp)).toBe(true);
    expect(pidAlive(process.pid, null)).toBe(true);
    const [, ticks] = stamp!.split(':');
    expect(pidAlive(process.pid, `${bootId}:${Number(ticks) + 1}`)).toBe(false);
    // The same start time in another boot.
    expect(pidAlive(process.pid, `00000000-0000-0000-0000-000000000000:${ticks}`)).toBe(false);
  });

  it('a pid that does not exist is gone', () => {
    // Above the largest pid Linux hands out (4194304).
    expect(pidAlive(4_194_305, null)).toBe(false);
  });

  it('a zombie (killed, not reaped by its parent) is gone, although kill -0 still finds it', async () => {
    // sh starts `sleep 30` in the background, prints its pid, and becomes `sleep 60`, which never reaps.
    const parent = spawn('sh', ['-c', 'sleep 30 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    children.push(parent);
    const pid = await new Promise<number>((resolve) => parent.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
    // Killed while sh has not yet become `sleep 60`, the child would be reaped by sh (no zombie, no
    // /proc entry: the test failed so on a loaded machine). Wait for the exec first.
    const execed = () => readFileSync(`/proc/${parent.pid}/cmdline`, 'utf8').split('\0').join(' ').trim() === 'sleep 60';
    for (let i = 0; i < 250 && !execed(); i++) await sleep(20);
    expect(execed(), 'the parent became `sleep 60`').toBe(true);
    const stamp = processStamp(pid);
    expect(pidAlive(pid, stamp)).toBe(true);
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 100 && parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.state !== 'Z'; i++) await sleep(20);
    expect(parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.state).toBe('Z');
    expect(() => process.kill(pid, 0)).not.toThrow();
    expect(pidAlive(pid, stamp)).toBe(false);
    expect(pidAlive(pid, null)).toBe(false);
  });
});

describe('NodeHeartbeat when another live process took the id over', () => {
  const owner: RegisteredNode = { id: 'web-1', host: 'here', pid: 100, startedAt: 1000 };
  const holder: ListedNode = {
    id: 'web-1', host: 'db-2', pid: 4242, version: '1.0.0', startedAt: 5000, heartbeatAt: 6000, inFlight: 0, clockOffsetMs: 0,
    state: 'running', procStart: null, storeHost: null, jobSet: null, alive: true, heartbeatAgeMs: 100,
  };

  function setup(row: ListedNode | null) {
    const writes: string[] = [];
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
    const store = {
      beat: async () => {
        writes.push('beat');
        return false;
      },
      setState: async (_o: RegisteredNode, state: string) => {
        writes.push(state);
        return false;
      },
      get: async () => row,
      forgetGone: async () => 0,
    } as unknown as NodeStore;
    const takenBy: ListedNode[] = [];
    const heartbeat = new NodeHeartbeat({ store, owner, inFlight: () => 1, clockOffsetMs: () => 0, log, everyMs: 0, onTakenOver: (h) => takenBy.push(h) });
    return { heartbeat, writes, lines, takenBy };
  }

  it('logs one error naming the other host and pid, asks for the shutdown once, and writes nothing more', async () => {
    const { heartbeat, writes, lines, takenBy } = setup(holder);
    heartbeat.pulse();
    await sleep(20);
    heartbeat.pulse();
    await sleep(20);
    expect(takenBy).toEqual([holder]);
    const errors = lines.filter((l) => l.level === 50);
    expect(errors.map((l) => l.msg)).toEqual(['node id "web-1" was taken over by another live process: host db-2, pid 4242; this node stops claiming and shuts down (exit 2); give each node its own SCHEDULER_NODE_ID']);
    // The shutdown that follows leaves the other process's row alone.
    heartbeat.stopping();
    await heartbeat.stopped();
    expect(writes).toEqual(['beat']);
  });

  it('a row deleted, or taken by a process stopped since, is one error and no shutdown', async () => {
    for (const row of [null, { ...holder, state: 'stopped' as const, alive: false }]) {
      const { heartbeat, lines, takenBy } = setup(row);
      heartbeat.pulse();
      await sleep(20);
      heartbeat.pulse();
      await sleep(20);
      expect(takenBy).toEqual([]);
      expect(lines.filter((l) => l.level === 50)).toHaveLength(1);
    }
  });
});
