/**
 * Who asks, and whether an action may be taken. Named tokens (httpTokens, and SCHEDULER_HTTP_TOKEN
 * as the operator `default`) each have a role: `viewer` reads, `operator` reads and acts. With any
 * token configured, a request without a known one is 401. With none, reads answer as before and
 * actions only on a loopback server.
 *
 * Every action must also be a request a page of another site cannot make a browser send (a proxy
 * that adds the Authorization header would otherwise let any site act through the operator's
 * browser): a JSON body (a form cannot send one), an Origin that is the server's own or none, and a
 * Sec-Fetch-Site, when sent, of same-origin or none. A token-less loopback server also answers only
 * requests whose Host is a loopback name, so that a site rebinding its DNS name to 127.0.0.1 reads
 * and acts as nothing.
 */
import type { IncomingMessage } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { sha256Of, type HttpRole, type HttpTokenConfig } from '../config/http-tokens.js';
import { isLoopback, json, type Reply } from './reply.js';

export interface Caller {
  /** The token's name; `anonymous` on a token-less server. */
  name: string;
  role: HttpRole;
  /** True when a token identified the caller. */
  token: boolean;
  /** Who the audit trail names: the token's name, or `anonymous@<node>` on a token-less loopback server. */
  actor: string;
}

const BEARER = /^Bearer ([^\s]+)$/;

export class HttpAccess {
  constructor(private readonly tokens: HttpTokenConfig[], private readonly host: string, private readonly nodeId: string) {}

  get tokenCount(): number {
    return this.tokens.length;
  }

  /** The caller of a request to / or /api/..., or the 401 (or the 403 of a foreign Host) that answers it. */
  identify(req: IncomingMessage): Caller | Reply {
    if (this.tokens.length === 0) {
      const loopback = isLoopback(this.host);
      if (loopback && !loopbackHost(req.headers.host)) {
        return json(403, { error: `forbidden: this token-less server answers only Host: localhost, 127.0.0.1 or [::1] (got ${JSON.stringify(req.headers.host ?? '')}); set httpTokens to serve other names` });
      }
      return { name: 'anonymous', role: loopback ? 'operator' : 'viewer', token: false, actor: `anonymous@${this.nodeId}` };
    }
    const header = req.headers.authorization;
    if (header === undefined) {
      return json(401, { error: 'unauthorised: send Authorization: Bearer <token> (one of httpTokens, or SCHEDULER_HTTP_TOKEN)' }, { 'www-authenticate': 'Bearer' });
    }
    const m = BEARER.exec(header.trim());
    const got = sha256Of(m ? m[1]! : `\u0000${header}`);
    // Every token compared, in constant time each: which one matched is not timed out of the server.
    let found: HttpTokenConfig | null = null;
    for (const t of this.tokens) if (timingSafeEqual(got, t.sha256) && !found) found = t;
    if (!found) return json(401, { error: 'unauthorised: the bearer token is not one of this server\'s tokens' }, { 'www-authenticate': 'Bearer error="invalid_token"' });
    return { name: found.name, role: found.role, token: true, actor: found.name };
  }

  /** Null when the caller may take an action with this request; else the 403 that says why. */
  refuseAction(req: IncomingMessage, caller: Caller): Reply | null {
    if (caller.role !== 'operator') {
      return json(403, {
        error: caller.token
          ? `forbidden: the token '${caller.name}' is a viewer; actions need an operator token`
          : 'forbidden: actions need an operator token (httpTokens) on a server that listens beyond loopback',
      });
    }
    const site = header(req, 'sec-fetch-site');
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      return json(403, { error: `forbidden: a ${site} request cannot take an action (Sec-Fetch-Site: ${site}); use this server's own page or a client that is not a browser` });
    }
    const origin = header(req, 'origin');
    if (origin !== undefined && !sameOrigin(origin, req.headers.host)) {
      return json(403, { error: `forbidden: a request from ${origin} cannot take an action on this server (Origin is not its own)` });
    }
    const type = header(req, 'content-type')?.split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') {
      return json(403, { error: `forbidden: an action takes a JSON body (Content-Type: application/json, got ${type ?? 'none'}); a form cannot send one, which is what keeps other sites out` });
    }
    return null;
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The Origin names the host (and port) the request was sent to: the page of this server. */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  try {
    const u = new URL(origin);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.host.toLowerCase() === host.toLowerCase();
  } catch {
    // `null` (a sandboxed frame, a file) or garbage: not this server's page.
    return false;
  }
}

/** `localhost`, `127.x.y.z` or `[::1]`, with or without a port. */
function loopbackHost(host: string | undefined): boolean {
  if (!host) return true;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return isLoopback(name.toLowerCase());
}
