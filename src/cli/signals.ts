/**
 * Signals that arrive while the CLI is still loading (its modules, the job files, the store) are kept
 * rather than fatal: the daemon takes them over and stops cleanly. Every other command lets them have
 * their default effect (a signal that came early is raised again).
 */
const GATED: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];
const received: NodeJS.Signals[] = [];
const keep = (signal: NodeJS.Signals) => {
  received.push(signal);
};

/** Called first thing by the entry point. */
export function holdSignals(): void {
  for (const s of GATED) process.on(s, keep);
}

/** For the daemon: the signals received so far; from now on the caller's handlers decide. */
export function takeHeldSignals(): NodeJS.Signals[] {
  for (const s of GATED) process.off(s, keep);
  return received.splice(0);
}

/** For every other command: default signal handling again, and an early signal raised again. */
export function releaseSignals(): void {
  for (const s of GATED) process.off(s, keep);
  const first = received.splice(0)[0];
  if (first) process.kill(process.pid, first);
}
