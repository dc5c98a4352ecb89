/** A temporary folder laid out as a user would: test/harness/workspace.mjs (shared with bench/). */
export { Workspace, type HistoryRun } from '../harness/workspace.mjs';
