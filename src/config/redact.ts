/** Hides the password in a connection URL: `mysql://app:secret@db/x` -> `mysql://app:***@db/x`. */
export function redactUrl(value: string): string {
  return value.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/@:]*):([^/@]*)@/i, (_m, scheme: string, user: string) => `${scheme}${user}:***@`)
    .replace(/^([a-z][a-z0-9+.-]*:\/\/):([^/@]*)@/i, (_m, scheme: string) => `${scheme}:***@`);
}

/** Redacts every URL-looking part of a free text (error messages from drivers may quote them). */
export function redactText(text: string): string {
  return text.replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/@:]*):([^\s/@]*)@/gi, (_m, scheme: string, user: string) => `${scheme}${user}:***@`);
}
