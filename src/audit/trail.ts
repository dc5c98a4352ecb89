/**
 * Recording an operator action: the one path every action takes (pause, resume, a manual run or
 * re-run, prune), called where the command has decided (done or refused). The trail is a record,
 * not a gate: a write that fails leaves the action's own outcome and exit status as they are and
 * costs one warning line instead.
 */
import { hostname, userInfo } from 'node:os';
import { redactText } from '../config/redact.js';
import { errorMessage } from '../errors.js';
import type { AuditEntry, AuditStore } from '../store/types.js';

/** Who acts from this command line: `user@host` (the OS user; $USER or the uid where there is no passwd entry). */
export function cliActor(): string {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    // A container's uid without a passwd entry: userInfo() throws.
    user = process.env.USER || process.env.LOGNAME || `uid ${process.getuid?.() ?? 'unknown'}`;
  }
  return `${user}@${hostname()}`;
}

/** Writes the entry; on failure writes one warning line with `warn` (stderr by default) and returns false. */
export async function recordAction(store: AuditStore | null | undefined, entry: AuditEntry, warn: (line: string) => void = stderrLine): Promise<boolean> {
  if (!store) return false;
  try {
    await store.record(entry);
    return true;
  } catch (err) {
    warnUnrecorded(entry, err, warn);
    return false;
  }
}

/** The one warning line of an entry that could not be written (the store could not be opened, or refused the row). */
export function warnUnrecorded(entry: AuditEntry, err: unknown, warn: (line: string) => void = stderrLine): void {
  const what = `${entry.action}${entry.job ? ` ${entry.job}` : ''} (${entry.result})`;
  warn(`scheduler: warning: the audit trail could not record ${what}: ${redactText(errorMessage(err))}`);
}

function stderrLine(line: string): void {
  process.stderr.write(`${line.split('\n')[0]}\n`);
}
