#!/usr/bin/env node
// `npm start`: the quick start. On a fresh clone it installs the dependencies (`npm ci`) and builds
// (`npm run build`) when they are missing or out of date, prints what the daemon will use, then runs
// `bin/scheduler run` (extra arguments are passed on: `npm start -- --log-level debug`).
// Only node: modules here: it runs before the dependencies are installed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const BIN = join(ROOT, 'bin', 'scheduler');
const say = (line) => process.stdout.write(`quick start: ${line}\n`);

function fail(line) {
  process.stderr.write(`quick start: ${line}\n`);
  process.exit(1);
}

/** npm itself: the one running this script (npm_execpath), else `npm` on the PATH. */
function npm(args) {
  const execPath = process.env.npm_execpath;
  const r = execPath && /\.c?js$/.test(execPath)
    ? spawnSync(process.execPath, [execPath, ...args], { cwd: ROOT, stdio: 'inherit' })
    : spawnSync('npm', args, { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) fail(`\`npm ${args.join(' ')}\` failed (exit ${r.status ?? r.signal})`);
}

/** Why node_modules does not match package-lock.json (the dev dependencies too, or not), or undefined when it does. */
function installOutOfDate(withDev) {
  const installed = join(ROOT, 'node_modules', '.package-lock.json');
  if (!existsSync(installed)) return 'the dependencies are not installed';
  const want = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages ?? {};
  const have = JSON.parse(readFileSync(installed, 'utf8')).packages ?? {};
  for (const [path, entry] of Object.entries(want)) {
    if (path === '' || entry.optional || entry.link || (entry.dev && !withDev)) continue;
    if (have[path]?.version !== entry.version) return `${path} is not at ${entry.version}`;
  }
  return undefined;
}

/** The newest modification time of the files under a folder (0 when it does not exist). */
function newest(path) {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((f) => newest(join(path, f))));
}

/** Why dist/ needs a build, or undefined when it is up to date with src/. */
function buildOutOfDate() {
  const entry = join(ROOT, 'dist', 'cli', 'entry.js');
  if (!existsSync(entry)) return 'not built yet';
  if (!existsSync(join(ROOT, 'src'))) return undefined; // an installed package: dist/ is what ships
  const built = statSync(entry).mtimeMs;
  if (Math.max(newest(join(ROOT, 'src')), newest(join(ROOT, 'tsconfig.json'))) > built) return 'src/ changed since the last build';
  return undefined;
}

// CLUSTER_CRON_START_NO_PREPARE=1 (the tests): refuse instead of installing or building.
const noPrepare = process.env.CLUSTER_CRON_START_NO_PREPARE === '1';
// The dev dependencies (TypeScript) only matter when a build is due: after `npm prune --omit=dev` a
// built checkout starts as it is.
const stale = installOutOfDate(false) ?? (buildOutOfDate() ? installOutOfDate(true) : undefined);
if (stale && noPrepare) fail(`${stale} (CLUSTER_CRON_START_NO_PREPARE=1: not running npm ci)`);
if (stale) {
  // npm ci replaces node_modules: never through a symlink (a worktree sharing another checkout's).
  if (existsSync(join(ROOT, 'node_modules')) && lstatSync(join(ROOT, 'node_modules')).isSymbolicLink()) {
    fail(`${stale}, and node_modules is a symlink: install in the folder it points to`);
  }
  say(`${stale}: npm ci`);
  npm(['ci', '--no-audit', '--no-fund']);
}
const unbuilt = buildOutOfDate();
if (unbuilt && noPrepare) fail(`${unbuilt} (CLUSTER_CRON_START_NO_PREPARE=1: not building)`);
if (unbuilt) {
  say(`${unbuilt}: npm run build`);
  npm(['run', 'build']);
}

// What the daemon will use, from its own configuration (defaults < config file < environment < flags).
const args = process.argv.slice(2);
const { loadConfig, describeConfig } = await import(pathToFileURL(join(ROOT, 'dist', 'config', 'config.js')).href);
const flagNames = { '--config': 'config', '--jobs': 'jobsDir', '--store': 'store', '--redis': 'redis', '--http': 'http' };
const flags = {};
for (let i = 0; i < args.length; i++) {
  const [name, inline] = args[i].split(/=(.*)/s, 2);
  if (flagNames[name]) flags[flagNames[name]] = inline ?? args[++i];
}
let config;
try {
  config = loadConfig({ flags });
} catch (err) {
  fail(err instanceof Error ? err.message : String(err));
}
const where = (p) => (relative(process.cwd(), p).startsWith('..') ? p : `./${relative(process.cwd(), p)}`);
const listed = spawnSync(process.execPath, [BIN, 'validate', '--json', ...(flags.config ? ['--config', flags.config] : []), ...(flags.jobsDir ? ['--jobs', flags.jobsDir] : [])], { encoding: 'utf8', env: { ...process.env, SCHEDULER_LOG_LEVEL: 'silent' } });
let jobs = [];
let problems = [];
try {
  ({ jobs, problems } = JSON.parse(listed.stdout));
} catch {
  // validate refused (a bad setting): the daemon below prints the one line that says why.
}
say(`store: ${config.store.kind === 'sqlite' ? `SQLite, ${where(config.store.path)}` : describeConfig(config).store}`);
say(`redis: ${config.redis.length === 0 ? 'none (claims rest on the unique run row)' : `${config.redis.length} master(s)`}`);
say(`jobs folder: ${where(config.jobsDir)}: ${jobs.length} job${jobs.length === 1 ? '' : 's'}${jobs.length ? ` (${jobs.join(', ')})` : ''}${problems.length ? `, ${problems.length} problem(s): see the log` : ''}`);
say(`status page: ${statusPage(config)}`);
say('starting the daemon (bin/scheduler run); stop it with Ctrl-C');

/** Where the daemon's HTTP server will answer, from the same configuration. */
function statusPage(c) {
  if (c.http === 'off') return 'off (SCHEDULER_HTTP=off); `bin/scheduler list` and `bin/scheduler history` show jobs and runs';
  // A wildcard bind answers on loopback too; that is the address a browser on this machine can open.
  const host = c.http.host === '0.0.0.0' || c.http.host === '::' ? '127.0.0.1' : c.http.host.includes(':') ? `[${c.http.host}]` : c.http.host;
  if (c.http.port === 0) return `a free port on ${host}, printed by the daemon's "http server listening" line (url)`;
  const url = `http://${host}:${c.http.port}/`;
  return `${url} (probes ${url}healthz and ${url}readyz, metrics ${url}metrics, JSON ${url}api/jobs)${c.httpOrigin === null ? '; if another node holds that port, the daemon warns and runs without it (set SCHEDULER_HTTP)' : ''}`;
}

// The daemon in a process group of its own: Ctrl-C reaches this script from the terminal and again from
// npm, which forwards it; the daemon must see one SIGINT (a second one within 1 s is the same request),
// since a second signal means "interrupt the runs in flight now".
const child = spawn(process.execPath, [BIN, 'run', ...args], { stdio: 'inherit', detached: true });
let last = 0;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    const now = Date.now();
    if (signal !== 'SIGHUP' && now - last < 1000) return;
    if (signal !== 'SIGHUP') last = now;
    child.kill(signal);
  });
}
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
