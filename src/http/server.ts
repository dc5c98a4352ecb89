/**
 * The daemon's HTTP server on `node:http`: a handful of GET routes (probes, /metrics, /api, the status
 * page) and the operators' actions (POST /api/jobs/<name>/...), so a framework would add dependencies
 * and nothing we use. Probes and /metrics never need a token (Kubernetes and Prometheus send none by
 * default); `/` and `/api/...` do when any is configured, and actions need an operator (access.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError, errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { HTTP_CLOSE_MS } from '../daemon/stop-budget.js';
import type { HttpTokenConfig } from '../config/http-tokens.js';
import { HttpAccess, type Caller } from './access.js';
import { isLoopback, json, type Reply } from './reply.js';

export { isLoopback, json, type Reply };


export type Route = (url: URL, caller: Caller) => Promise<Reply | null> | Reply | null;

/** An action, given its parsed JSON body (an object) and its caller (an operator). */
export type ActionHandler = (body: Record<string, unknown>, caller: Caller) => Promise<Reply>;
/** The action at a path, or null when the path names none. */
export type ActionRouter = (url: URL) => ActionHandler | null;

/** The largest action body read (a reason is at most 500 characters). */
const MAX_BODY_BYTES = 16 * 1024;

export interface HttpServerOptions {
  host: string;
  port: number;
  /** Where the address came from (`SCHEDULER_HTTP`, `--http`, `<file>: http`); null: the built-in default. */
  origin: string | null;
  /** The tokens (hashes) with their roles; none: reads open, actions on a loopback server only. */
  tokens: HttpTokenConfig[];
  /** This node, named in the audit trail's actor of a token-less request. */
  nodeId: string;
  log: Logger;
  /** Routes that never need the token (probes, /metrics), by exact path. */
  open: Record<string, Route>;
  /** Routes behind the token, tried in order (the first non-null answer wins): /api, the page. */
  guarded: Route[];
  /** POST routes: the actions. */
  actions?: ActionRouter;
}


export class HttpServer {
  private server: Server | undefined;
  /** The address actually bound (the real port for `host:0`); null while off. */
  url: string | null = null;
  private readonly storeReads = new Semaphore(2);
  private readonly access: HttpAccess;

  constructor(private readonly options: HttpServerOptions) {
    this.access = new HttpAccess(options.tokens, options.host, options.nodeId);
  }

  /**
   * Binds. A configured address that cannot be bound is a ConfigError (exit 2, before any claim); the
   * built-in default in use (several nodes on one machine) is one warning, and the node runs without.
   */
  async start(): Promise<string | null> {
    const { host, port, origin, log } = this.options;
    const server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        // Nothing a request does may reach the process's unhandled rejections (or, while the daemon starts, kill it).
        this.options.log.warn({ err: { message: errorMessage(err) } }, 'http request failed');
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end();
      });
    });
    // Keep-alive connections must not hold a stopping process.
    server.keepAliveTimeout = 5000;
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      const shown = `${host.includes(':') ? `[${host}]` : host}:${port}`;
      if (origin === null && (code === 'EADDRINUSE' || code === 'EACCES')) {
        log.warn({ address: shown, code }, `http server: the default address ${shown} is in use (${code}); the status page, probes and metrics are off for this node: set SCHEDULER_HTTP=<host>:<port> (or 127.0.0.1:0 for any free port) to have them`);
        return null;
      }
      throw new ConfigError(`${origin ?? 'default http'}: ${shown} ${code === 'EADDRINUSE' ? 'is in use' : 'cannot be bound'} (${code === 'EADDRINUSE' ? code : `${code}: ${errorMessage(err)}`})`);
    }
    server.on('error', (err) => log.warn({ err: { message: errorMessage(err) } }, 'http server error'));
    this.server = server;
    const address = server.address() as AddressInfo;
    this.url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
    const tokens = this.options.tokens;
    log.info({ url: this.url, auth: tokens.length > 0 ? `bearer tokens on / and /api: ${tokens.map((t) => `${t.name} (${t.role})`).join(', ')}` : 'none' }, 'http server listening');
    if (!isLoopback(host)) {
      log.warn({ url: this.url }, tokens.length > 0
        ? 'http server bound to a non-loopback address: / and /api need a bearer token; /healthz, /readyz and /metrics answer anyone who can reach it'
        : 'http server bound to a non-loopback address with no token (httpTokens, SCHEDULER_HTTP_TOKEN): the status page and /api (job names, errors of runs) answer anyone who can reach it, and actions are refused');
    }
    return this.url;
  }

  /** Stops accepting, and ends idle and open connections so that the process can exit. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      // A client still reading: not our wait.
      setTimeout(() => {
        server.closeAllConnections();
        resolve();
      }, HTTP_CLOSE_MS).unref();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let reply: Reply = json(400, { error: 'bad request target' });
    let url: URL | null = null;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      // Not a URL (e.g. `GET //[`): the 400 above.
    }
    if (url) {
      try {
        reply = await this.route(req, url);
      } catch (err) {
        this.options.log.warn({ path: url.pathname, err: { message: errorMessage(err) } }, 'http request failed');
        reply = json(500, { error: 'internal error', path: url.pathname });
      }
    }
    res.writeHead(reply.status, {
      'content-type': reply.contentType,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      ...reply.headers,
    });
    res.end(req.method === 'HEAD' ? undefined : reply.body);
  }

  private async route(req: IncomingMessage, url: URL): Promise<Reply> {
    const method = req.method ?? 'GET';
    const read = method === 'GET' || method === 'HEAD';
    if (!read && method !== 'POST') {
      return json(405, { error: 'method not allowed', method, allow: ['GET', 'HEAD', 'POST'] }, { allow: 'GET, HEAD, POST' });
    }
    const open = this.options.open[url.pathname];
    if (open) {
      if (!read) return json(405, { error: 'method not allowed', method, allow: ['GET', 'HEAD'] }, { allow: 'GET, HEAD' });
      const r = await open(url, { name: 'anonymous', role: 'viewer', token: false, actor: 'anonymous' });
      if (r) return r;
    }
    const caller = this.access.identify(req);
    if ('status' in caller) return caller;
    const action = this.options.actions?.(url) ?? null;
    if (read && action) {
      // No action is reachable by GET: a link, an <img> or a prefetch must not act.
      return json(405, { error: `method not allowed: ${url.pathname} is an action; send it as a POST with a JSON body`, method, allow: ['POST'] }, { allow: 'POST' });
    }
    if (!read) {
      if (!action) return json(405, { error: `method not allowed: ${url.pathname} takes no POST`, method, allow: ['GET', 'HEAD'], path: url.pathname }, { allow: 'GET, HEAD' });
      const refused = this.access.refuseAction(req, caller);
      if (refused) {
        this.options.log.warn({ path: url.pathname, caller: caller.name, status: refused.status }, 'http action refused');
        return refused;
      }
      const body = await readJsonBody(req);
      if ('status' in body) return body;
      // Not behind the reads' two slots: an action is rare, and a cancel waits for its attempt to end.
      return action(body.doc, caller);
    }
    // The page and /api read the store on the main pool, which claims use too: two requests at a
    // time, the others wait their turn, so that a dashboard reloaded in a loop cannot delay a claim.
    await this.storeReads.acquire();
    try {
      for (const route of this.options.guarded) {
        const r = await route(url, caller);
        if (r) return r;
      }
    } finally {
      this.storeReads.release();
    }
    return json(404, { error: 'not found', path: url.pathname });
  }
}

/** An action's body: a JSON object (empty: {}), at most MAX_BODY_BYTES; else the 400 or 413 that says so. */
async function readJsonBody(req: IncomingMessage): Promise<{ doc: Record<string, unknown> } | Reply> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return json(413, { error: `the body is larger than ${MAX_BODY_BYTES} bytes` });
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return { doc: {} };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return json(400, { error: 'the body is not JSON' });
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return json(400, { error: 'the body must be a JSON object' });
  return { doc: doc as Record<string, unknown> };
}

/** At most `limit` holders at once; the others wait in line. */
class Semaphore {
  private held = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}
  acquire(): Promise<void> {
    if (this.held < this.limit) {
      this.held += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held -= 1;
  }
}
