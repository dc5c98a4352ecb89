/**
 * The HTTP server's tokens, roles and action rules (issue 22, item 2), through a real node:http
 * server on a free port: who is let in, who may act, and which requests a page of another site could
 * make a browser send (all refused). The actions themselves are src/http/actions.ts's, driven
 * against real daemons in test/integration/http-actions.test.ts.
 */
import { createHash } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseHttpTokens } from '../../src/config/http-tokens.js';
import { loadConfig } from '../../src/config/config.js';
import { HttpServer, json } from '../../src/http/server.js';

const log = pino({ level: 'silent' });
const hex = (t: string) => createHash('sha256').update(t).digest('hex');
const servers: HttpServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.close();
});

/** A server whose one action answers who took it. */
async function serve(tokens: ReturnType<typeof parseHttpTokens>, host = '127.0.0.1'): Promise<string> {
  const server = new HttpServer({
    host, port: 0, origin: 'test', tokens, nodeId: 'node-t', log,
    open: { '/healthz': () => json(200, { ok: true }) },
    guarded: [(url, caller) => (url.pathname === '/api/who' ? json(200, caller) : null)],
    actions: (url) => (url.pathname === '/api/jobs/j/pause' ? async (body, caller) => json(200, { actor: caller.actor, body }) : null),
  });
  const url = await server.start();
  servers.push(server);
  return url!.replace('0.0.0.0', '127.0.0.1');
}

const post = (url: string, headers: Record<string, string>, body = '{}') => fetch(url, { method: 'POST', headers, body });
const JSON_TYPE = { 'content-type': 'application/json' };

describe('httpTokens', () => {
  const env = { OPS_TOKEN: 'ops-secret-1' };
  it('takes tokens named by a variable or given as a hash; SCHEDULER_HTTP_TOKEN is the operator default', () => {
    const tokens = parseHttpTokens([{ name: 'ops', role: 'operator', env: 'OPS_TOKEN' }, { name: 'dash', role: 'viewer', sha256: hex('view-1') }], env, 'legacy-1');
    expect(tokens.map((t) => [t.name, t.role, t.from])).toEqual([['ops', 'operator', 'env OPS_TOKEN'], ['dash', 'viewer', 'sha256'], ['default', 'operator', 'SCHEDULER_HTTP_TOKEN']]);
    expect(tokens[0]!.sha256.toString('hex')).toBe(hex('ops-secret-1'));
    // The list as JSON (SCHEDULER_HTTP_TOKENS).
    expect(parseHttpTokens(JSON.stringify([{ name: 'ops', role: 'operator', env: 'OPS_TOKEN' }]), env, null)).toHaveLength(1);
  });

  it('refuses, in one line naming the entry, what cannot be a token list', () => {
    const bad: Array<[unknown, RegExp]> = [
      [[{ name: 'ops', role: 'admin', env: 'OPS_TOKEN' }], /^\[0\] \(ops\)\.role: .*expected a list of/],
      [[{ name: 'ops', role: 'operator' }], /^\[0\] \(ops\): give env or sha256, one of them$/],
      [[{ name: 'ops', role: 'operator', env: 'OPS_TOKEN', sha256: hex('x') }], /give env or sha256/],
      [[{ name: 'ops', role: 'operator', env: 'MISSING_TOKEN_VAR' }], /the environment variable MISSING_TOKEN_VAR is not set/],
      [[{ name: 'ops', role: 'operator', sha256: 'abc' }], /sha256: 64 hex digits/],
      [[{ name: 'ops', role: 'operator', token: 'in-clear' }], /Unrecognized key/i],
      [[{ name: 'a', role: 'viewer', sha256: hex('x') }, { name: 'a', role: 'operator', sha256: hex('y') }], /two tokens are named 'a'/],
      [[{ name: 'a', role: 'viewer', sha256: hex('x') }, { name: 'b', role: 'operator', sha256: hex('x') }], /'a' and 'b' are the same token/],
      ['{not json', /not JSON/],
      [{ name: 'ops' }, /expected a list/],
    ];
    for (const [value, message] of bad) expect(() => parseHttpTokens(value, env, null), JSON.stringify(value)).toThrow(message);
    // `default` is SCHEDULER_HTTP_TOKEN's name when it is set.
    expect(() => parseHttpTokens([{ name: 'default', role: 'viewer', sha256: hex('x') }], env, 'legacy')).toThrow(/the name 'default' is SCHEDULER_HTTP_TOKEN's/);
    expect(parseHttpTokens([{ name: 'default', role: 'viewer', sha256: hex('x') }], env, null)).toHaveLength(1);
  });

  it('a bad list stops the configuration with the setting named, and no token value is ever shown', () => {
    expect(() => loadConfig({ flags: {}, env: { SCHEDULER_HTTP_TOKENS: '[{"name":"ops","role":"operator","env":"NOPE_VAR"}]' }, cwd: '/tmp' }))
      .toThrow(/^invalid setting SCHEDULER_HTTP_TOKENS: \[0\] \(ops\): the environment variable NOPE_VAR is not set/);
  });
});

describe('who may read and act', () => {
  it('with tokens: no header or an unknown token is 401; a viewer reads and gets 403 on an action; an operator acts under its name', async () => {
    const url = await serve(parseHttpTokens([{ name: 'ops', role: 'operator', sha256: hex('op-1') }, { name: 'dash', role: 'viewer', sha256: hex('view-1') }], {}, null));
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const none = await fetch(`${url}/api/who`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect((await fetch(`${url}/api/who`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    expect((await fetch(`${url}/api/who`, { headers: { authorization: 'Basic b3BzOm9wLTE=' } })).status).toBe(401);
    expect(await (await fetch(`${url}/api/who`, { headers: { authorization: 'Bearer view-1' } })).json()).toMatchObject({ name: 'dash', role: 'viewer' });
    const viewer = await post(`${url}/api/jobs/j/pause`, { ...JSON_TYPE, authorization: 'Bearer view-1' });
    expect(viewer.status).toBe(403);
    expect(((await viewer.json()) as { error: string }).error).toBe("forbidden: the token 'dash' is a viewer; actions need an operator token");
    expect((await post(`${url}/api/jobs/j/pause`, JSON_TYPE)).status).toBe(401);
    const ok = await post(`${url}/api/jobs/j/pause`, { ...JSON_TYPE, authorization: 'Bearer op-1' }, '{"reason":"r"}');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ actor: 'ops', body: { reason: 'r' } });
  });

  it('refuses every request a page of another site could make a browser send, token or not', async () => {
    const url = await serve(parseHttpTokens([{ name: 'ops', role: 'operator', sha256: hex('op-1') }], {}, null));
    const auth = { authorization: 'Bearer op-1' };
    const host = new URL(url).host;
    const refusals: Array<[Record<string, string>, string, RegExp]> = [
      [{ ...auth, 'content-type': 'text/plain' }, '{}', /takes a JSON body .*got text\/plain/],
      [{ ...auth, 'content-type': 'application/x-www-form-urlencoded' }, 'reason=x', /JSON body/],
      [{ ...auth }, '{}', /JSON body/],
      [{ ...auth, ...JSON_TYPE, origin: 'https://evil.example' }, '{}', /from https:\/\/evil\.example cannot take an action/],
      [{ ...auth, ...JSON_TYPE, origin: 'null' }, '{}', /Origin is not its own/],
      [{ ...auth, ...JSON_TYPE, 'sec-fetch-site': 'cross-site' }, '{}', /a cross-site request cannot take an action/],
      [{ ...auth, ...JSON_TYPE, 'sec-fetch-site': 'same-site' }, '{}', /same-site/],
    ];
    for (const [headers, body, message] of refusals) {
      const r = await post(`${url}/api/jobs/j/pause`, headers, body);
      expect(r.status, JSON.stringify(headers)).toBe(403);
      expect(((await r.json()) as { error: string }).error).toMatch(message);
    }
    // Its own page's request: same Origin, same-origin fetch.
    expect((await post(`${url}/api/jobs/j/pause`, { ...auth, ...JSON_TYPE, origin: `http://${host}`, 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    // No action by GET; no POST to a read; bad bodies named.
    const get = await fetch(`${url}/api/jobs/j/pause`, { headers: auth });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect((await post(`${url}/api/who`, { ...auth, ...JSON_TYPE })).status).toBe(405);
    expect((await post(`${url}/healthz`, JSON_TYPE)).status).toBe(405);
    expect((await fetch(`${url}/api/jobs/j/pause`, { method: 'DELETE', headers: auth })).status).toBe(405);
    expect((await post(`${url}/api/jobs/j/pause`, { ...auth, ...JSON_TYPE }, '{nope')).status).toBe(400);
    expect((await post(`${url}/api/jobs/j/pause`, { ...auth, ...JSON_TYPE }, '[1]')).status).toBe(400);
    expect((await post(`${url}/api/jobs/j/pause`, { ...auth, ...JSON_TYPE }, JSON.stringify({ reason: 'x'.repeat(20_000) }))).status).toBe(413);
  });

  it('without tokens: a loopback server acts for anyone local (anonymous@node), only for its own Host names; beyond loopback it reads but never acts', async () => {
    const url = await serve([]);
    const ok = await post(`${url}/api/jobs/j/pause`, JSON_TYPE);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ actor: 'anonymous@node-t' });
    expect((await post(`${url}/api/jobs/j/pause`, { 'content-type': 'text/plain' })).status).toBe(403);
    // A name rebound to 127.0.0.1 by another site: its Origin and Host agree, so only the Host tells.
    const port = new URL(url).port;
    const rebound = await new Promise<number>((resolve, reject) => {
      import('node:http').then(({ request }) => {
        const req = request({ host: '127.0.0.1', port, path: '/api/who', headers: { host: `evil.example:${port}` } }, (res) => { res.resume(); resolve(res.statusCode!); });
        req.on('error', reject);
        req.end();
      }, reject);
    });
    expect(rebound).toBe(403);
    expect(await (await fetch(`${url.replace('127.0.0.1', 'localhost')}/api/who`)).json()).toMatchObject({ role: 'operator', token: false });

    const wide = await serve([], '0.0.0.0');
    expect(await (await fetch(`${wide}/api/who`)).json()).toMatchObject({ role: 'viewer' });
    const refused = await post(`${wide}/api/jobs/j/pause`, JSON_TYPE);
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: string }).error).toMatch(/actions need an operator token \(httpTokens\) on a server that listens beyond loopback/);
  });
});
