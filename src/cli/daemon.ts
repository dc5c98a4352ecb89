/** The daemon (`run`): loaded only when that command runs, with everything the daemon needs. */
import { errorMessage } from '../errors.js';
import { Scheduler } from '../daemon/scheduler.js';
import { RetentionPruner } from '../run/retention.js';
import { drainRunLogs, openRuntime } from '../runtime.js';
import { formatDuration } from '../time/duration.js';
import { describeConfig, loadConfig, type Config } from '../config/config.js';
import { loadJobsForReload, Reloader } from '../daemon/reload.js';
import { FolderWatch, type WatchedPaths } from '../daemon/watch.js';
import { jobSetVersion } from '../jobs/job-set.js';
import type { Job } from '../jobs/types.js';
import { BackfillRunner } from '../backfill/runner.js';
import { JobSetSkew } from '../nodes/job-sets.js';
import { configFlags, jobsOf, setup, type CommonOptions } from './common.js';
import { takeHeldSignals } from './signals.js';
import { EXIT } from './exit.js';
import { NodeHeartbeat } from '../nodes/heartbeat.js';
import { Racers } from '../claim/racers.js';
import { registerNode } from '../nodes/register.js';
import { terminalOf } from '../log.js';
import { RunLineObserver } from '../output/terminal.js';
import { startupSummary } from '../output/summary.js';
import { currentBody } from '../run/body-scope.js';
import { attachAlerts } from '../alerts/index.js';
import { LoggingObserver } from '../events/events.js';
import { DaemonHttp } from '../http/daemon.js';
import { readFileSync } from 'node:fs';
import { POOLS_CLOSE_MS, RUN_LOGS_DRAIN_MS } from '../daemon/stop-budget.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export async function runDaemon(options: CommonOptions): Promise<void> {
  const { config, log } = await setup(options, 'stdout', { daemon: true });
  // Signals are handled from the start: a SIGTERM while the jobs load or the store opens is a clean
  // stop, not death by the signal's default action. A SIGHUP before the scheduler runs is kept: one
  // reload follows the start.
  let requested: NodeJS.Signals | undefined;
  let hupWhileStarting = false;
  let onHup = () => {
    hupWhileStarting = true;
  };
  let wakeLoading = () => {};
  const stopWhileLoading = new Promise<'stop'>((resolve) => (wakeLoading = () => resolve('stop')));
  let onSignal = (signal: NodeJS.Signals) => {
    requested ??= signal;
    wakeLoading();
  };
  process.on('SIGTERM', (s) => onSignal(s));
  process.on('SIGINT', (s) => onSignal(s));
  process.on('SIGHUP', () => onHup());
  for (const s of takeHeldSignals()) {
    if (s === 'SIGHUP') onHup();
    else onSignal(s);
  }

  // Job files picked up by themselves (watch: on, the default): watched from before they are read, so
  // that a change while they load, or before the reload machinery is up, is one reload after the start.
  let changedWhileStarting: string | null = null;
  let onFileChange = (what: string) => {
    changedWhileStarting ??= what;
  };
  const folders = new FolderWatch((what) => onFileChange(what), log);
  if (config.watch) folders.watch(watchedPaths(config));
  // A stop requested while the job files load (a file may take up to loadTimeout) ends the daemon
  // at once: nothing is claimed yet, and the loads still pending are abandoned with the process.
  const loaded = await Promise.race([jobsOf(config), stopWhileLoading]);
  if (loaded === 'stop') {
    folders.close();
    log.info({ signal: requested }, 'shutdown requested while loading job files; stopped');
    return;
  }
  const { jobs, invalid } = loaded;
  // The version of the job set this node runs: its heartbeat, the page and /metrics show it; a reload makes it again.
  let jobSet = jobSetVersion(config.jobsDir, config.calendarsDir);
  for (const f of invalid) for (const p of f.problems) log.error({ file: f.file }, p);
  // Bound before the store is opened: a configured address in use is exit 2 before any claim.
  const http = new DaemonHttp(config, log, VERSION);
  const listening = await http.bind();
  const rt = await openRuntime(config, log);
  // Before any claim: another live process holding this node id refuses the start (exit 2).
  const owner = await registerNode(rt.nodeStore, config.nodeId, rt.clock.reading().offsetMs, log).catch(async (err: unknown) => {
    await rt.close().catch(() => {});
    throw err;
  });
  // Another live process taking the id over ends this node as a signal would, then exit 2 (see heartbeat.ts).
  let takenOver = false;
  let onTakenOver = () => {};
  const heartbeat = new NodeHeartbeat({ store: rt.nodeStore, owner, inFlight: () => rt.executor.size, clockOffsetMs: () => rt.clock.reading().offsetMs, storeHost: () => rt.store.storeHost(), jobSet: () => jobSet, log,
    onTakenOver: () => {
      takenOver = true;
      onTakenOver();
    } });
  log.info({ config: describeConfig(config), jobs: jobs.map((j) => j.name), invalidFiles: invalid.length, jobSet, lock: rt.lock.kind }, 'daemon starting');
  // Under a terminal: a few lines instead of the configuration, and one line per run outcome.
  const terminal = terminalOf(log);
  const zones = new Map(jobs.map((j) => [j.name, j.timezone]));
  if (terminal) {
    terminal.lines(startupSummary(config, { jobs: jobs.length, invalidFiles: invalid.length, listening }));
    rt.events.add(new RunLineObserver(terminal, (job) => zones.get(job)));
  }
  if (jobs.length === 0) log.warn({ jobsDir: config.jobsDir }, 'no valid job to schedule');
  // SCHEDULER_LOG_LEVEL=debug (or trace): every event as a line of its own, for tracing one period.
  if (log.isLevelEnabled('debug')) rt.events.add(new LoggingObserver(log));

  // A job's stray callback must not take the whole node down with it.
  // The body's scope names the job when the callback that threw came from one (see body-scope.ts).
  // The thrown value itself (pino's serializer gives its type, message and stack); a thrown
  // non-error (a string) becomes an Error of its text.
  const thrown = (err: unknown) => (typeof err === 'object' && err !== null && typeof (err as Error).message === 'string' ? err : new Error(errorMessage(err)));
  process.on('uncaughtException', (err) => {
    const body = currentBody();
    const fields = { err: thrown(err) };
    if (body) log.error({ ...body, ...fields }, `uncaught exception from the body of job ${body.job}; the daemon keeps running`);
    else log.error(fields, 'uncaught exception (from a job body?); the daemon keeps running');
  });
  process.on('unhandledRejection', (err) => {
    const body = currentBody();
    const fields = { err: thrown(err) };
    if (body) log.error({ ...body, ...fields }, `unhandled rejection from the body of job ${body.job}; the daemon keeps running`);
    else log.error(fields, 'unhandled rejection (from a job body?); the daemon keeps running');
  });

  // Before the scheduler starts: alerts observe its events (never on the run path).
  const alerts = attachAlerts(config, rt, jobs, log);
  const racers = new Racers(config.nodeId, rt.nodeStore, log);
  // After a deploy of new job files: a warning names the live nodes whose job sets still differ after a minute.
  const skew = new JobSetSkew(config.nodeId, log);
  racers.onListed((listed) => skew.observe(listed, jobSet));
  const scheduler = new Scheduler({ jobs, store: rt.store, runner: rt.runner, executor: rt.executor, takeover: rt.takeover, reconciler: rt.reconciler, log, now: () => new Date(rt.clock.now()),
    events: rt.events, lockState: () => rt.lock.state(), clockReading: () => rt.clock.reading(), onSweep: () => heartbeat.pulse(),
    racers });
  http.attach({ rt, scheduler, jobs, invalid, listNodes: () => rt.nodeStore.list({ recentMs: 86_400_000 }), jobSet: () => jobSet });
  await scheduler.start();
  // Backfills: this node takes its share of their periods, beside the schedule.
  let jobsByName: ReadonlyMap<string, Job> = new Map(jobs.map((j) => [j.name, j]));
  const backfills = new BackfillRunner({ backfills: rt.backfillStore, runs: rt.store, jobStore: rt.jobStore, runner: rt.runner, nodeId: config.nodeId, log, jobs: () => jobsByName });
  backfills.start();
  // Off the tick path: its own timer, first a minute after start, then hourly.
  let pruner = new RetentionPruner({ store: rt.store, onceStore: rt.onceStore, retentionMs: config.retentionMs, auditStore: rt.auditStore, auditRetentionMs: config.auditRetentionMs, backfillStore: rt.backfillStore, jobs, log });
  pruner.start();

  let stopping = false;
  const reloader = new Reloader({
    config, jobs, log,
    loadConfig: () => loadConfig({ flags: configFlags(options) }),
    loadJobs: loadJobsForReload,
    replaceJobs: (next) => scheduler.replaceJobs(next),
    // Pruning follows the retention and the jobs' largest catchUp: a new pruner with the new ones.
    async applied({ config: now, previous, jobs: current, invalid: bad, jobsChanged }) {
      const version = jobSetVersion(now.jobsDir, now.calendarsDir);
      if (version !== jobSet) log.info({ jobSet: version, previous: jobSet }, `job set version ${version} (was ${jobSet})`);
      jobSet = version;
      // The watch follows the settings: a new jobs folder, or `watch` turned on or off.
      if (!stopping) {
        if (now.watch) folders.watch(watchedPaths(now));
        else folders.close();
      }
      // What shows or hooks jobs follows the new set (and the new invalid files): views, metrics, onFailure, the terminal's zones.
      http.setJobs(current, bad);
      jobsByName = new Map(current.map((j) => [j.name, j]));
      alerts.setJobs(current);
      zones.clear();
      for (const j of current) zones.set(j.name, j.timezone);
      if (stopping || (!jobsChanged && now.retentionMs === previous.retentionMs && now.auditRetentionMs === previous.auditRetentionMs)) return;
      await pruner.stop();
      if (stopping) return;
      pruner = new RetentionPruner({ store: rt.store, onceStore: rt.onceStore, retentionMs: now.retentionMs, auditStore: rt.auditStore, auditRetentionMs: now.auditRetentionMs, backfillStore: rt.backfillStore, jobs: current, log });
      pruner.start();
    },
  });
  onHup = () => {
    if (stopping) log.info('SIGHUP during the shutdown: ignored');
    else reloader.request();
  };
  // A changed file reloads as SIGHUP does.
  onFileChange = (what) => {
    if (!stopping) reloader.request(`a file changed: ${what}`);
  };
  if (hupWhileStarting) reloader.request();
  else if (changedWhileStarting) reloader.request(`a file changed: ${changedWhileStarting}`);

  await new Promise<void>((resolve) => {
    const shutdown = (fields: Record<string, unknown>, message: string) => {
      stopping = true;
      folders.close();
      reloader.stop();
      void pruner.stop();
      heartbeat.stopping();
      backfills.stop();
      const { gracePeriodMs } = reloader.config;
      log.info({ ...fields, gracePeriod: formatDuration(gracePeriodMs) }, message);
      void scheduler.stop(gracePeriodMs).then(resolve, (err) => {
        log.error({ err: { message: errorMessage(err) } }, 'error while stopping');
        resolve();
      });
    };
    onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: interrupting in-flight runs now');
        scheduler.force();
        return;
      }
      shutdown({ signal }, 'shutdown requested');
    };
    onTakenOver = () => {
      if (!stopping) shutdown({ reason: 'node id taken over' }, 'shutdown: the node id was taken over by another live process');
    };
    // A signal that came while starting, or a takeover heard then.
    if (requested) onSignal(requested);
    else if (takenOver) onTakenOver();
  });
  await pruner.stop();
  await backfills.stopped();
  // Side by side: each waits a few seconds at most for a store that may be away.
  await Promise.all([heartbeat.stopped(), alerts.stop(), http.close(), drainRunLogs(rt.runLogs, RUN_LOGS_DRAIN_MS)]);
  // Closing waits for the pools; a store that does not answer must not hold the exit.
  await Promise.race([rt.close(), new Promise((r) => setTimeout(r, POOLS_CLOSE_MS).unref())]);
  log.info('stopped');
  // Like a node id held at start: a restart would not help (systemd's RestartPreventExitStatus=2).
  if (takenOver) process.exitCode = EXIT.invalid;
}

function watchedPaths(config: Config): WatchedPaths {
  return { jobsDir: config.jobsDir, configFile: config.configFile ?? null, calendarsDir: config.calendarsDir ?? null };
}
