/**
 * Store URLs that name several hosts, and the search for the one that takes writes.
 *
 * - PostgreSQL, libpq's multi-host form: `postgres://user:pass@h1:p1,h2:p2/db?target_session_attrs=read-write`
 *   (also `primary`, `any`; libpq's default is `any`). node-postgres takes one host only (its issues
 *   #1470 and #2781), so the URL is parsed here and pg is given one host at a time.
 * - MySQL/MariaDB: `mysql://user:pass@h1:p1,h2:p2,h3:p3/db` (replicas or Galera nodes): the first host
 *   that takes writes, and the next one when it fails, turns read-only or leaves the primary component.
 *
 * A URL of one host is what it always was: no search, no probe. The pure parts (parseStoreHosts) are
 * unit-tested; the finder is exercised against real replicated servers by the fault suite.
 */
import { errorMessage } from '../errors.js';

export interface StoreHost {
  host: string;
  port: number;
}

/** libpq's values that a scheduler can use (it writes): the others are refused at start. */
export type TargetSessionAttrs = 'read-write' | 'primary' | 'any';
const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = ['read-write', 'primary', 'any'];
const READ_ONLY_ATTRS = ['read-only', 'standby', 'prefer-standby'];

export interface ParsedStoreUrl {
  /** The URL's user, password and database, decoded. */
  user: string;
  password: string;
  database: string;
  hosts: StoreHost[];
  /** The query parameters other than target_session_attrs, as given. */
  params: URLSearchParams;
  targetSessionAttrs: TargetSessionAttrs;
}

/** A part of a store URL that is wrong, named for the one line that refuses it. */
export class StoreUrlError extends Error {}

/** `h`, `h:5432`, `[::1]`, `[::1]:5432`. */
function parseHost(part: string, defaultPort: number): StoreHost {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^[\]:/?#@\s]+)(?::(\d*))?$/.exec(part);
  if (!m) throw new StoreUrlError(part === '' ? 'an empty host in the host list' : `host '${part}' is not a host or host:port`);
  const host = m[1]!.startsWith('[') ? m[1]!.slice(1, -1) : m[1]!;
  if (m[2] === undefined || m[2] === '') {
    if (m[2] === '') throw new StoreUrlError(`host '${part}' has an empty port`);
    return { host, port: defaultPort };
  }
  const port = Number(m[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new StoreUrlError(`host '${part}' has port ${m[2]}, expected 1-65535`);
  return { host, port };
}

/**
 * The hosts and parts of a `mysql://` or `postgres://` URL, one host or several (comma-separated).
 * Throws StoreUrlError naming the part that is wrong (never the password).
 */
export function parseStoreHosts(url: string, kind: 'mysql' | 'postgres'): ParsedStoreUrl {
  const m = /^([a-z][a-z0-9+.-]*):\/\/(?:([^/?#]*)@)?([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/i.exec(url);
  if (!m) throw new StoreUrlError('not a URL of the form scheme://user:pass@host:port/db');
  const [, , auth = '', hostList = '', path = '', query = ''] = m;
  const colon = auth.indexOf(':');
  let user: string;
  let password: string;
  try {
    user = decodeURIComponent(colon < 0 ? auth : auth.slice(0, colon));
    password = colon < 0 ? '' : decodeURIComponent(auth.slice(colon + 1));
  } catch {
    throw new StoreUrlError('the user or password has a malformed %-escape');
  }
  const database = decodeURIComponent(path.replace(/^\//, ''));
  if (hostList === '') throw new StoreUrlError('no host');
  if (database === '') throw new StoreUrlError('no database (the path after the hosts)');
  const defaultPort = kind === 'mysql' ? 3306 : 5432;
  const hosts = hostList.split(',').map((p) => parseHost(p.trim(), defaultPort));
  const seen = new Set<string>();
  for (const h of hosts) {
    const k = `${h.host}:${h.port}`;
    if (seen.has(k)) throw new StoreUrlError(`host ${k} is listed twice`);
    seen.add(k);
  }
  const params = new URLSearchParams(query.replace(/^\?/, ''));
  let targetSessionAttrs: TargetSessionAttrs = kind === 'postgres' ? 'any' : 'read-write';
  const given = params.get('target_session_attrs');
  if (given !== null) {
    if (kind !== 'postgres') throw new StoreUrlError('target_session_attrs is a PostgreSQL parameter (a MySQL host list always looks for the host that takes writes)');
    if (READ_ONLY_ATTRS.includes(given)) throw new StoreUrlError(`target_session_attrs=${given}: the scheduler writes; expected read-write, primary or any`);
    if (!TARGET_SESSION_ATTRS.includes(given as TargetSessionAttrs)) throw new StoreUrlError(`target_session_attrs=${given}: expected read-write, primary or any`);
    targetSessionAttrs = given as TargetSessionAttrs;
    params.delete('target_session_attrs');
  }
  return { user, password, database, hosts, params, targetSessionAttrs };
}

/** `host:port`, with brackets for an IPv6 address. */
export function showHost(h: StoreHost): string {
  return `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`;
}

/** No host of the list takes writes now: the store counts as unreachable (callers try again). */
export class NoWriterError extends Error {
  readonly code = 'E_NO_WRITER';
}

/**
 * Why a host cannot take this node's writes now, or null when it can: 'down: connect ECONNREFUSED',
 * 'read-only', 'in recovery', 'outside the primary component', ... (each dialect's probe).
 */
export type HostProbe = (host: StoreHost) => Promise<string | null>;

/** Between two searches prompted by errors (a burst of failing statements searches once). */
const RESEARCH_MIN_MS = 500;
/** While no host takes writes, the line naming each host and why is logged this often at most. */
const REPORT_EVERY_MS = 5000;

/**
 * Finds the host that takes writes and keeps it until an error says it may have moved
 * (`suspect()`), then searches again: the current host first, then the others in the order given.
 * Its `generation` moves on with each host change, and knex's connection provider (see
 * Database) uses it as the expiry of the pools' connections, so that connections to a demoted
 * primary (alive, healthy-looking, read-only) are not lent again.
 */
export class WriterFinder {
  current: StoreHost | null = null;
  /** Why each host was passed over at the last search that passed over any. */
  passedOver: Array<{ host: string; why: string }> = [];
  generation = 0;
  private searching: Promise<StoreHost> | null = null;
  private suspectedAt = -Infinity;
  private lastReport = -Infinity;
  /** Set by the runtime once it has a logger: the line while no host takes writes, and each change of host. */
  log: ((level: 'warn' | 'info', fields: Record<string, unknown>, msg: string) => void) | undefined;

  constructor(readonly hosts: StoreHost[], private readonly probe: HostProbe) {}

  /** The writer, searched for if not known (one search at a time). */
  writer(): Promise<StoreHost> {
    if (this.current) return Promise.resolve(this.current);
    this.searching ??= this.search().finally(() => (this.searching = null));
    return this.searching;
  }

  /** A statement failed as if the host had gone away or stopped taking writes: search again before the next connection. */
  suspect(): void {
    const now = performance.now();
    if (!this.current || now - this.suspectedAt < RESEARCH_MIN_MS) return;
    this.suspectedAt = now;
    this.current = null;
  }

  private async search(): Promise<StoreHost> {
    const order = [...this.hosts];
    const last = this.lastWriter;
    if (last) order.sort((a, b) => Number(showHost(b) === showHost(last)) - Number(showHost(a) === showHost(last)));
    const passed: Array<{ host: string; why: string }> = [];
    for (const h of order) {
      let why: string | null;
      try {
        why = await this.probe(h);
      } catch (err) {
        why = `down: ${errorMessage(err)}`;
      }
      if (why === null) {
        this.passedOver = passed;
        if (!last || showHost(last) !== showHost(h)) {
          this.generation += 1;
          this.log?.(last ? 'warn' : 'info', { storeHost: showHost(h), ...(last ? { previous: showHost(last) } : {}), ...(passed.length ? { passedOver: passed } : {}) },
            last ? 'store: writing to another host of the list (failover)' : 'store: writing to the first host of the list that takes writes');
        }
        this.current = h;
        this.lastWriter = h;
        return h;
      }
      passed.push({ host: showHost(h), why });
    }
    this.passedOver = passed;
    const text = passed.map((p) => `${p.host} ${p.why}`).join('; ');
    const now = performance.now();
    if (now - this.lastReport >= REPORT_EVERY_MS) {
      this.lastReport = now;
      this.log?.('warn', { passedOver: passed }, `store: no host of the list takes writes: ${text}`);
    }
    throw new NoWriterError(`no host of the list takes writes: ${text}`);
  }

  /** The host written to last (kept while searching), for `nodes` and the page. */
  lastWriter: StoreHost | null = null;
}
