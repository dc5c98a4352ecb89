/** Spawning the real `bin/scheduler`, as users do: test/harness/process.mjs (shared with bench/). */
export { BIN, Daemon, ROOT, cleanEnv, runCli, type CliResult } from '../harness/process.mjs';
