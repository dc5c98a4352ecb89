/**
 * One POST of an alert to the webhook, bounded by a timeout. The URL may carry a token (in its path
 * or query) and the bearer token is a secret: neither appears in an error this module makes.
 */
import { errorMessage } from '../errors.js';
import { redactText } from '../config/redact.js';
import type { AlertBody } from './body.js';

/** How long one POST may take, connecting included. */
export const POST_TIMEOUT_MS = 5000;

/**
 * The webhook URL as it may be shown: scheme, host and port; a password, the path and the query are
 * hidden (Slack-style URLs carry their secret in the path, others in `?token=`).
 */
export function redactWebhookUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    // Not a URL: show its scheme at most.
    const scheme = /^([a-z][a-z0-9+.-]*:)/i.exec(value)?.[1];
    return scheme ? `${scheme}***` : '***';
  }
  const user = url.username ? `${url.username}${url.password ? ':***' : ''}@` : '';
  const rest = url.pathname !== '/' || url.search || url.hash ? '/***' : '';
  return `${url.protocol}//${user}${url.host}${rest}`;
}

export interface WebhookOptions {
  url: string;
  token?: string | null;
  timeoutMs?: number;
}

export class Webhook {
  readonly shownUrl: string;
  constructor(private readonly options: WebhookOptions) {
    this.shownUrl = redactWebhookUrl(options.url);
  }

  /** Resolves when the receiver answered 2xx; throws an Error whose message names what went wrong (secrets hidden). */
  async post(body: AlertBody): Promise<void> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'idempotency-key': body.id,
      'user-agent': 'cluster-cron-alerts',
    };
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    let response: Response;
    try {
      response = await fetch(this.options.url, {
        method: 'POST', headers, body: JSON.stringify(body), redirect: 'manual',
        signal: AbortSignal.timeout(this.options.timeoutMs ?? POST_TIMEOUT_MS),
      });
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause;
      const timedOut = (err as { name?: string }).name === 'TimeoutError';
      const what = timedOut ? `no answer within ${this.options.timeoutMs ?? POST_TIMEOUT_MS} ms` : cause ? `${errorMessage(err)}: ${errorMessage(cause)}` : errorMessage(err);
      throw new Error(`POST ${this.shownUrl}: ${this.hide(what)}`);
    }
    // The body is not needed; reading it frees the connection.
    await response.arrayBuffer().catch(() => undefined);
    if (response.status < 200 || response.status > 299) {
      throw new Error(`POST ${this.shownUrl}: answered HTTP ${response.status}${response.statusText ? ` ${this.hide(response.statusText)}` : ''}`);
    }
  }

  private hide(text: string): string {
    let out = text.split(this.options.url).join(this.shownUrl);
    if (this.options.token) out = out.split(this.options.token).join('***');
    return redactText(out);
  }
}
