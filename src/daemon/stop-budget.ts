/**
 * The fixed waits of a daemon's stop after its runs' outcome writes (README "Shutdown"), in one place
 * so that the figure the deploy files must exceed (TimeoutStopSec, terminationGracePeriodSeconds)
 * is the sum of what the code waits: at most gracePeriod + the largest job lockTtl + STOP_MARGIN_MS.
 */

/** Past the outcome writes' deadline (the largest lockTtl), for the last of them to settle. */
export const WRITE_MARGIN_MS = 500;
/** The catch-up anchors' last flush. */
export const ANCHORS_FLUSH_MS = 1000;
/** Then, side by side: the node's row marked `stopped`, ... */
export const NODE_ROW_STOP_MS = 2000;
/** ... the jobs' onFailure hooks still running, then the queued alerts written, ... */
export const HOOKS_DRAIN_MS = 2000;
export const ALERTS_STOP_MS = 3000;
/** ... and the HTTP server's open connections, ... */
export const HTTP_CLOSE_MS = 1000;
/** ... and the attempts' last log lines sent to the store. */
export const RUN_LOGS_DRAIN_MS = 2000;
/** Last, the store's pools (a store that does not answer must not hold the exit). */
export const POOLS_CLOSE_MS = 2000;

/** What a stop may take beyond gracePeriod + the largest lockTtl: 8.5 s. */
export const STOP_MARGIN_MS = WRITE_MARGIN_MS + ANCHORS_FLUSH_MS
  + Math.max(NODE_ROW_STOP_MS, HOOKS_DRAIN_MS + ALERTS_STOP_MS, HTTP_CLOSE_MS, RUN_LOGS_DRAIN_MS) + POOLS_CLOSE_MS;
