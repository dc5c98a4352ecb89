/**
 * A command's stdout and stderr: each line to the run's log (stdout at info, stderr at warn, a line
 * longer than MAX_LOG_LINE cut), and the last TAIL_BYTES of both, in the order they arrived, kept to
 * be stored with the run (each stream decoded on its own).
 */
import { StringDecoder } from 'node:string_decoder';
import type { Logger } from '../../log.js';
import { RUN_LOG_STREAM } from '../../runlog/hook.js';

/** The output tail stored with a run: 64 KiB (UTF-8 bytes, the note of what was cut included). */
export const TAIL_BYTES = 64 * 1024;
/** Characters of one line in the log; the rest of the line is dropped there (not from the tail). */
export const MAX_LOG_LINE = 4096;

export class OutputTail {
  /** Decoded text, in the order it came: each stream has its own decoder, so that a character cut across two chunks of stdout stays whole when stderr wrote between them. */
  private chunks: string[] = [];
  private bytes = 0;
  private dropped = 0;
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };

  add(chunk: Buffer, stream: 'stdout' | 'stderr' = 'stdout'): void {
    this.push(this.decoders[stream].write(chunk));
  }

  private push(text: string): void {
    if (text === '') return;
    this.chunks.push(text);
    this.bytes += Buffer.byteLength(text);
    // Compacted now and then, so that a chatty command costs at most about twice the tail.
    if (this.bytes > 2 * TAIL_BYTES) this.compact();
  }

  /** Keeps the last TAIL_BYTES bytes or a little less, cut on a character boundary. */
  private compact(): void {
    const all = Buffer.from(this.chunks.join(''), 'utf8');
    let start = Math.max(0, all.length - TAIL_BYTES);
    while (start < all.length && (all[start]! & 0xc0) === 0x80) start++;
    this.dropped += start;
    const keep = all.subarray(start).toString('utf8');
    this.chunks = keep === '' ? [] : [keep];
    this.bytes = all.length - start;
  }

  /** The tail as text of at most TAIL_BYTES bytes; a cut start says how much came before. */
  text(): string {
    // A stream that ended inside a character: what was left of it reads as U+FFFD.
    this.push(this.decoders.stdout.end());
    this.push(this.decoders.stderr.end());
    this.compact();
    // NUL cannot be stored in PostgreSQL text; U+FFFD is what a reader of the output expects.
    const clean = (s: string) => s.replace(/\u0000/g, '\uFFFD');
    let text = clean(this.chunks.join(''));
    if (this.dropped === 0 && Buffer.byteLength(text) <= TAIL_BYTES) return text;
    // Cut from the front on a character boundary, with room for the note.
    let dropped = this.dropped;
    const note = () => `[… ${dropped} earlier bytes not kept]\n`;
    let buf = Buffer.from(text, 'utf8');
    const budget = TAIL_BYTES - Buffer.byteLength(note()) - 8;
    if (buf.length > budget) {
      dropped += buf.length - budget;
      buf = buf.subarray(buf.length - budget);
    }
    // The first bytes may be the end of a character cut in two.
    let start = 0;
    while (start < buf.length && start < 4 && (buf[start]! & 0xc0) === 0x80) start++;
    dropped += start;
    text = buf.subarray(start).toString('utf8');
    return note() + text;
  }
}

/** Splits one stream into lines for the log. */
export class LineLog {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  /** The rest of a line already logged cut. */
  private skipping = false;
  /** The last non-empty line (trimmed, at most 300 characters). */
  last: string | null = null;

  constructor(private readonly write: (line: string, cut: boolean) => void) {}

  add(chunk: Buffer): void {
    this.feed(this.decoder.write(chunk));
  }

  end(): void {
    this.feed(this.decoder.end());
    // A last line without its newline may still end with the \r of a CRLF.
    if (this.pending !== '' && !this.skipping) this.emit(this.pending.endsWith('\r') ? this.pending.slice(0, -1) : this.pending, false);
    this.pending = '';
    this.skipping = false;
  }

  private feed(text: string): void {
    let rest = text;
    for (;;) {
      const nl = rest.indexOf('\n');
      if (nl < 0) break;
      const line = this.pending + rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      this.pending = '';
      if (this.skipping) this.skipping = false;
      else this.emit(line.endsWith('\r') ? line.slice(0, -1) : line, false);
    }
    if (this.skipping) return;
    this.pending += rest;
    if (this.pending.length > MAX_LOG_LINE) {
      this.emit(this.pending.slice(0, MAX_LOG_LINE), true);
      this.pending = '';
      this.skipping = true;
    }
  }

  private emit(line: string, cut: boolean): void {
    const shown = line.length > MAX_LOG_LINE ? line.slice(0, MAX_LOG_LINE) : line;
    if (shown.trim() !== '') this.last = shown.trim().slice(0, 300);
    this.write(shown, cut || line.length > MAX_LOG_LINE);
  }
}

/** The log writers of a run's stdout (info) and stderr (warn). */
export function streamLoggers(log: Logger): { stdout: LineLog; stderr: LineLog } {
  const out = log.child({ stream: 'stdout' });
  const err = log.child({ stream: 'stderr' });
  // Stored under their stream in the attempt's log (see src/runlog/hook.ts).
  (out as unknown as Record<symbol, unknown>)[RUN_LOG_STREAM] = 'stdout';
  (err as unknown as Record<symbol, unknown>)[RUN_LOG_STREAM] = 'stderr';
  return {
    stdout: new LineLog((line, cut) => (cut ? out.info({ cut: true }, line) : out.info(line))),
    stderr: new LineLog((line, cut) => (cut ? err.warn({ cut: true }, line) : err.warn(line))),
  };
}
