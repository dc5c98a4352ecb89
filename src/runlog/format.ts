/**
 * A pino call's arguments as one stored line: its message and its own fields as JSON, redacted. The
 * values of fields named like a secret are hidden, and the configuration's secrets wherever they
 * appear (see Redactor).
 */
import { format } from 'node:util';
import { redactUrl } from '../config/redact.js';

/** Longest stored message and fields, in characters (a MySQL TEXT holds 65,535 bytes). */
export const MAX_LINE_CHARS = 8000;

const SECRET_KEY = /^pass$|passw(or)?d|passphrase|token|secret|authori[sz]ation|api[-_]?key|credential|cookie/i;

/** Hides the configuration's secrets (passwords of the store and Redis URLs, tokens) in a text. */
export class Redactor {
  private readonly secrets: string[];
  constructor(secrets: Iterable<string | null | undefined>) {
    // Longest first, so that a secret that contains another is hidden whole; short ones would hide common words.
    this.secrets = [...new Set([...secrets].filter((s): s is string => typeof s === 'string' && s.length >= 4))].sort((a, b) => b.length - a.length);
  }

  text(value: string): string {
    let out = value;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('***');
    // The pattern costs microseconds on a long line: only where a URL may be.
    return out.includes('://') ? redactUrl(out) : out;
  }
}

/**
 * The configuration's secrets: the passwords of the store's and Redis's URLs, the tokens (the HTTP
 * tokens named by environment variables read from `env`: the config keeps only their hashes), the webhook URL.
 */
export function configSecrets(config: { store: { url: string }; redis: string[]; httpToken: string | null; httpTokens?: Array<{ from: string }>; alertToken: string | null; alertWebhook: string | null }, env: NodeJS.ProcessEnv = process.env): string[] {
  const tokenValues = (config.httpTokens ?? []).map((t) => (t.from.startsWith('env ') ? env[t.from.slice(4)]?.trim() ?? '' : ''));
  return [...urlPasswords([config.store.url, ...config.redis, ...(config.alertWebhook ? [config.alertWebhook] : [])]), config.httpToken ?? '', ...tokenValues, config.alertToken ?? '', config.alertWebhook ?? ''];
}

/** The passwords in connection URLs (`scheme://user:password@host`), decoded and as written. */
export function urlPasswords(urls: Iterable<string>): string[] {
  const out: string[] = [];
  for (const url of urls) {
    for (const m of url.matchAll(/\b[a-z][a-z0-9+.-]*:\/\/[^\s/?#@:]*:([^\s/?#]*)@/gi)) {
      const raw = m[1]!;
      out.push(raw);
      try {
        out.push(decodeURIComponent(raw));
      } catch {
        // Not URL-encoded: the raw form is enough.
      }
    }
  }
  return out;
}

function cut(text: string): string {
  return text.length > MAX_LINE_CHARS ? `${text.slice(0, MAX_LINE_CHARS)}… (${text.length - MAX_LINE_CHARS} characters cut)` : text;
}

function errorJson(err: Error): Record<string, unknown> {
  return { type: err.name, message: err.message, ...(err.stack ? { stack: err.stack } : {}) };
}

/** JSON of the fields, values of secret-named keys hidden; null when there are none. */
export function fieldsJson(fields: Record<string, unknown>, redactor: Redactor): string | null {
  if (Object.keys(fields).length === 0) return null;
  const seen = new WeakSet<object>();
  let json: string;
  try {
    json = JSON.stringify(fields, (key, value: unknown) => {
      if (key !== '' && SECRET_KEY.test(key) && value !== undefined && value !== null) return '***';
      if (typeof value === 'bigint') return value.toString();
      if (value instanceof Error) return errorJson(value);
      if (typeof value === 'object' && value !== null) {
        if (seen.has(value)) return '[circular]';
        seen.add(value);
      }
      return value;
    });
  } catch {
    json = '{"unserialisable":true}';
  }
  return json === undefined || json === '{}' ? null : cut(redactor.text(json));
}

/** pino's calls: (obj, msg?, ...args), (err, msg?), or (msg, ...args). */
export function lineOf(args: unknown[], bound: Record<string, unknown>, redactor: Redactor): { line: string; fields: string | null } {
  const [first, ...rest] = args;
  let fields: Record<string, unknown> = bound;
  let line: string;
  if (first instanceof Error) {
    fields = { ...bound, err: errorJson(first) };
    line = rest.length > 0 ? format(...(rest as [unknown, ...unknown[]])) : first.message;
  } else if (typeof first === 'object' && first !== null) {
    const { msg, ...own } = first as Record<string, unknown>;
    fields = { ...bound, ...own };
    line = rest.length > 0 ? format(...(rest as [unknown, ...unknown[]])) : typeof msg === 'string' ? msg : '';
  } else {
    line = args.length > 0 ? format(...(args as [unknown, ...unknown[]])) : '';
  }
  return { line: cut(redactor.text(line)), fields: fieldsJson(fields, redactor) };
}
