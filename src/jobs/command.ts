/**
 * The fields of a command job (`command`, `killAfter`, `cwd`, `env`), checked at load so that what
 * cannot start (an empty command, a program path that is missing or not executable, a missing
 * working directory) is an invalid job file, not a failed run at 3 a.m. A relative `cwd` is taken
 * from the job file's folder (scripts shipped beside the job file); a program path with a `/` from
 * `cwd`, as the spawn would take it. A bare program name (`rsync`) is looked up on PATH (the job's
 * `env.PATH` if it sets one).
 */
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, resolve } from 'node:path';
import { parseDuration, DURATION_EXPECTED } from '../time/duration.js';
import type { CommandSpec } from './types.js';
import { DEFAULT_KILL_AFTER, JOB_FIELDS, type FieldSpec } from './fields.js';

export { DEFAULT_KILL_AFTER };
/** The fields only a command job may have. */
export const COMMAND_FIELDS: string[] = Object.entries(JOB_FIELDS as Record<string, FieldSpec>).flatMap(([name, spec]) => (spec.commandJob ? [name] : []));
/** What every command is started with (variables named so are set by the scheduler). */
export const RESERVED_ENV_PREFIX = 'SCHEDULER_';
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Stands for an `env` value in a problem line: env holds tokens, and no line ever shows one. */
export const NOT_SHOWN = Symbol('not shown');

type Bad = (field: string, value: unknown, expected: string) => void;

/** Why `file` cannot be spawned, or undefined when it can. */
function notExecutable(file: string): string | undefined {
  let st;
  try {
    st = statSync(file);
  } catch {
    return 'does not exist';
  }
  if (!st.isFile()) return st.isDirectory() ? 'is a directory' : 'is not a regular file';
  try {
    accessSync(file, constants.X_OK);
  } catch {
    return 'is not executable (chmod +x)';
  }
  return undefined;
}

/** The first executable `name` on `path`, or undefined. */
function onPath(name: string, path: string): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    if (notExecutable(candidate) === undefined) return candidate;
  }
  return undefined;
}

/**
 * The command job's spec, or undefined with the problems reported through `bad`. `jobFile` is the
 * job file's path as loaded (its folder anchors a relative `cwd`).
 */
export function validateCommand(def: Record<string, unknown>, jobFile: string, bad: Bad): CommandSpec | undefined {
  let ok = true;
  const fail: Bad = (field, value, expected) => {
    ok = false;
    bad(field, value, expected);
  };

  const folder = dirname(resolve(jobFile));
  let cwd = folder;
  if (def.cwd !== undefined) {
    if (typeof def.cwd !== 'string' || def.cwd.trim() === '') fail('cwd', def.cwd, "a folder path (relative to the job file's folder)");
    else {
      cwd = resolve(folder, def.cwd);
      let isDir = false;
      try {
        isDir = statSync(cwd).isDirectory();
      } catch {
        isDir = false;
      }
      if (!isDir) fail('cwd', def.cwd, `an existing folder (${cwd} is not one)`);
    }
  }

  const env: Record<string, string> = {};
  if (def.env !== undefined) {
    if (def.env === null || typeof def.env !== 'object' || Array.isArray(def.env)) fail('env', NOT_SHOWN, `an object of variable names to string values, not ${def.env === null ? 'null' : Array.isArray(def.env) ? 'an array' : typeof def.env}`);
    else {
      for (const [name, value] of Object.entries(def.env as Record<string, unknown>)) {
        if (!ENV_NAME.test(name)) fail(`env.${name}`, NOT_SHOWN, 'a variable name of letters, digits and _ (not starting with a digit)');
        else if (name.startsWith(RESERVED_ENV_PREFIX)) fail(`env.${name}`, NOT_SHOWN, `a name not starting with ${RESERVED_ENV_PREFIX} (the scheduler sets those)`);
        else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
          const text = String(value);
          if (text.includes('\u0000')) fail(`env.${name}`, NOT_SHOWN, 'a value without NUL characters');
          else env[name] = text;
        } else fail(`env.${name}`, NOT_SHOWN, `a string (or a number or boolean), not ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
      }
    }
  }

  let killAfterMs = parseDuration(DEFAULT_KILL_AFTER)!;
  if (def.killAfter !== undefined) {
    const ms = parseDuration(def.killAfter);
    if (ms === undefined || ms <= 0) fail('killAfter', def.killAfter, `${DURATION_EXPECTED}, more than 0`);
    else killAfterMs = ms;
  }

  const source = def.command;
  let argv: string[] | undefined;
  if (typeof source === 'string') {
    if (source.trim() === '') fail('command', source, 'a non-empty shell command, or an argv array');
    else if (source.includes('\u0000')) fail('command', source, 'a command without NUL characters');
    else argv = ['/bin/sh', '-c', source];
  } else if (Array.isArray(source)) {
    if (source.length === 0) fail('command', source, "a non-empty argv array such as ['./backup.sh', '--full'], or a shell command string");
    else if (!source.every((a) => typeof a === 'string' && !a.includes('\u0000'))) fail('command', source, 'an array of strings (without NUL characters)');
    else if (source[0]!.trim() === '') fail('command[0]', source[0], 'the program to run (a path or a name on PATH)');
    else {
      const program = source[0]!;
      if (program.includes('/')) {
        const file = isAbsolute(program) ? program : resolve(cwd, program);
        const why = notExecutable(file);
        if (why) fail('command[0]', program, `an executable file (${file} ${why})`);
        else argv = [file, ...source.slice(1)];
      } else {
        const path = env.PATH ?? process.env.PATH ?? '';
        if (onPath(program, path) === undefined) fail('command[0]', program, `a program found on PATH (${path || 'empty'}), or a path to one`);
        else argv = [...source];
      }
    }
  } else {
    fail('command', source, "a shell command string, or an argv array such as ['./backup.sh', '--full']");
  }

  if (!ok || !argv) return undefined;
  return { source: source as string | string[], argv, cwd, env, killAfterMs };
}
