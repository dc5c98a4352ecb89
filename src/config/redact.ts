/**
 * `scheme://user:password@` (the user may be empty). The password runs to the last `@` before the
 * end of the authority, so a password that itself contains `@` is hidden whole; the pattern is global,
 * so every URL of a comma-separated list (SCHEDULER_REDIS) is redacted, not only the first.
 */
const CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#@:]*):[^\s/?#]*@/gi;

/** Hides the password in a connection URL: `mysql://app:secret@db/x` -> `mysql://app:***@db/x`. */
export function redactUrl(value: string): string {
  return value.replace(CREDENTIALS, (_m, scheme: string, user: string) => `${scheme}${user}:***@`);
}

/** Redacts every URL-looking part of a free text (error messages from drivers may quote them). */
export function redactText(text: string): string {
  return redactUrl(text);
}
