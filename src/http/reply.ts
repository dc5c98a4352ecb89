/** An HTTP answer as the routes give it, and the helpers every route uses (below the server and its access rules). */
export interface Reply {
  status: number;
  body: string;
  contentType: string;
  headers?: Record<string, string>;
}

export const json = (status: number, doc: unknown, headers?: Record<string, string>): Reply =>
  ({ status, body: `${JSON.stringify(doc)}\n`, contentType: 'application/json; charset=utf-8', ...(headers ? { headers } : {}) });

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}
