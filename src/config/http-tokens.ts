/**
 * `httpTokens`: the HTTP server's named bearer tokens, each with a role. A token is never written in
 * clear in a file: it is named by an environment variable (read here, at start) or given as the
 * SHA-256 of its value. What is kept is the hash alone, which the server compares in constant time.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

export const HTTP_ROLES = ['viewer', 'operator'] as const;
export type HttpRole = (typeof HTTP_ROLES)[number];

export interface HttpTokenConfig {
  name: string;
  role: HttpRole;
  /** The SHA-256 of the token's value (what `Authorization: Bearer <token>` must hash to). */
  sha256: Buffer;
  /** Where it came from, as it may be shown: `env OPS_TOKEN` or `sha256`. */
  from: string;
}

/** The name SCHEDULER_HTTP_TOKEN (httpToken) takes in the audit trail: an operator. */
export const DEFAULT_TOKEN_NAME = 'default';

export const HTTP_TOKENS_EXPECTED =
  'a list of { "name": "ops", "role": "operator" | "viewer", "env": "<VARIABLE>" } or { ..., "sha256": "<64 hex digits>" } (each with env or sha256, not both; names unique)';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const tokenSchema = z.object({
  name: z.string().regex(NAME, 'a name of 1 to 64 letters, digits, ".", "_", "@" or "-"'),
  role: z.enum(HTTP_ROLES),
  env: z.string().regex(ENV_NAME, 'the name of an environment variable').optional(),
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, '64 hex digits (the SHA-256 of the token)').optional(),
}).strict();

export function sha256Of(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/**
 * Parses the list; throws an Error whose message names the entry and what is wrong (the caller adds
 * where the list came from). `httpToken` given too adds an operator named `default`.
 */
export function parseHttpTokens(value: unknown, env: NodeJS.ProcessEnv, httpToken: string | null): HttpTokenConfig[] {
  const out: HttpTokenConfig[] = [];
  if (value !== undefined && value !== null) {
    let list = value;
    if (typeof list === 'string') {
      // SCHEDULER_HTTP_TOKENS holds the same list as JSON.
      try {
        list = JSON.parse(list);
      } catch {
        throw new Error(`not JSON: expected ${HTTP_TOKENS_EXPECTED}`);
      }
    }
    if (!Array.isArray(list)) throw new Error(`expected ${HTTP_TOKENS_EXPECTED}`);
    list.forEach((entry, i) => {
      const parsed = tokenSchema.safeParse(entry);
      const label = typeof (entry as { name?: unknown })?.name === 'string' ? `[${i}] (${(entry as { name: string }).name})` : `[${i}]`;
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        const where = issue.path.length > 0 ? `.${issue.path.join('.')}` : '';
        throw new Error(`${label}${where}: ${issue.message}; expected ${HTTP_TOKENS_EXPECTED}`);
      }
      const t = parsed.data;
      if ((t.env === undefined) === (t.sha256 === undefined)) throw new Error(`${label}: give env or sha256, one of them`);
      let sha256: Buffer;
      if (t.env !== undefined) {
        const secret = env[t.env]?.trim() ?? '';
        if (secret === '') throw new Error(`${label}: the environment variable ${t.env} is not set (or empty)`);
        if (/\s/.test(secret)) throw new Error(`${label}: the token in ${t.env} has spaces`);
        sha256 = sha256Of(secret);
      } else {
        sha256 = Buffer.from(t.sha256!.toLowerCase(), 'hex');
      }
      out.push({ name: t.name, role: t.role, sha256, from: t.env !== undefined ? `env ${t.env}` : 'sha256' });
    });
  }
  if (httpToken !== null) out.push({ name: DEFAULT_TOKEN_NAME, role: 'operator', sha256: sha256Of(httpToken), from: 'SCHEDULER_HTTP_TOKEN' });
  const names = new Set<string>();
  const hashes = new Map<string, string>();
  for (const t of out) {
    if (names.has(t.name)) {
      throw new Error(t.name === DEFAULT_TOKEN_NAME && t.from === 'SCHEDULER_HTTP_TOKEN'
        ? `the name '${DEFAULT_TOKEN_NAME}' is SCHEDULER_HTTP_TOKEN's (httpToken): name the listed token otherwise`
        : `two tokens are named '${t.name}'`);
    }
    names.add(t.name);
    const hex = t.sha256.toString('hex');
    const other = hashes.get(hex);
    if (other !== undefined) throw new Error(`the tokens '${other}' and '${t.name}' are the same token: each needs its own`);
    hashes.set(hex, t.name);
  }
  return out;
}
