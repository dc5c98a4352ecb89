/**
 * The daemon's start-up summary under a terminal: where the data is, what it schedules, where the
 * status page is. The whole configuration is the `daemon starting` line (JSON; at debug here).
 */
import type { Config } from '../config/config.js';

/** Where the runs are kept, never with a user or password: a path for SQLite, host and database otherwise. */
export function storeWhere(store: Config['store']): string {
  if (store.kind === 'sqlite') return `SQLite ${store.path}`;
  const name = store.kind === 'mysql' ? 'MySQL/MariaDB' : 'PostgreSQL';
  try {
    const url = new URL(store.url);
    return `${name} ${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  } catch {
    return name;
  }
}

/** The status page's address, as configured, or `off`. */
export function statusPageUrl(http: Config['http']): string {
  if (http === 'off') return 'off';
  const host = http.host.includes(':') ? `[${http.host}]` : http.host;
  return `http://${host}:${http.port}/`;
}

export interface SummaryFacts {
  jobs: number;
  invalidFiles: number;
  /** Where the HTTP server listens (the real port for `host:0`); null: not listening. Default: as configured. */
  listening?: string | null;
}

export function startupSummary(config: Config, facts: SummaryFacts): string[] {
  const redis = config.redis.length === 0 ? 'none (claims rest on the run row)' : `${config.redis.length} master${config.redis.length === 1 ? '' : 's'}`;
  const invalid = facts.invalidFiles === 0 ? '' : `, ${facts.invalidFiles} invalid file${facts.invalidFiles === 1 ? '' : 's'} (above)`;
  return [
    `cluster-cron starting on node ${config.nodeId}`,
    `store:       ${storeWhere(config.store)}`,
    `redis:       ${redis}`,
    `jobs:        ${facts.jobs} job${facts.jobs === 1 ? '' : 's'} in ${config.jobsDir}${invalid}`,
    `status page: ${facts.listening === undefined ? statusPageUrl(config.http) : facts.listening === null ? (config.http === 'off' ? 'off' : 'off (its address is in use: see the warning above)') : `${facts.listening.replace(/\/?$/, '/')}`}${config.httpToken && facts.listening !== null && config.http !== 'off' ? ' (bearer token on / and /api)' : ''}`,
  ];
}
