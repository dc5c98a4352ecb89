/**
 * `.json` and `.yaml`/`.yml` job files: data, not code, so they can define only a command job. A
 * syntax error is one line naming the line and column (the loader prefixes the file), never a piece
 * of the file (a value there may be a token). YAML is read
 * as YAML 1.2 (core schema: `yes`/`on` stay strings, no timestamps), one document, unique keys.
 */
import { extname } from 'node:path';
import { createRequire } from 'node:module';
import type * as YamlModule from 'yaml';

/** Job files that hold data, not code: they can define only a command job. */
export const DATA_EXTENSIONS: ReadonlySet<string> = new Set(['.json', '.yaml', '.yml']);

export class DataFileError extends Error {}

export function parseDataJobFile(file: string, text: string): unknown {
  return extname(file).toLowerCase() === '.json' ? parseJson(text) : parseYaml(text);
}

function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const line = before.split('\n').length;
  return { line, column: offset - (before.lastIndexOf('\n') + 1) + 1 };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    const message = (err as Error).message;
    // V8 names the offset ("... in JSON at position 42"); say the line, as an editor shows it. Its
    // "Unexpected token" message names no offset but quotes the file around it (a token there would be
    // printed): the offset is found again, and only the kind of error is said.
    const at = /at position (\d+)/.exec(message);
    const quoting = / is not valid JSON$/.test(message);
    const offset = at ? Number(at[1]) : quoting ? firstBadOffset(text) : null;
    const where = offset !== null ? lineColumn(text, offset) : text.trim() === '' ? { line: 1, column: 1 } : null;
    const what = quoting ? 'Unexpected character'
      : message.replace(/\s*(?:in JSON )?at position \d+.*$/, '').replace(/\s*\(line \d+ column \d+\)/, '');
    throw new DataFileError(`invalid JSON${where ? ` at line ${where.line}, column ${where.column}` : ''}: ${text.trim() === '' ? 'the file is empty' : what}`);
  }
}

/**
 * The offset of the first character JSON.parse refuses: the shortest refused start of the text ends
 * with it (a start that is only cut short says "end of JSON input", or names its own end).
 */
function firstBadOffset(text: string): number | null {
  const refused = (length: number): boolean => {
    try {
      JSON.parse(text.slice(0, length));
      return false;
    } catch (err) {
      const message = (err as Error).message;
      if (/end of JSON input/.test(message)) return false;
      const at = /at position (\d+)/.exec(message);
      return !at || Number(at[1]) < length;
    }
  };
  if (!refused(text.length)) return null;
  let lo = 1;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (refused(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo - 1;
}

/** yaml, loaded with the first .yaml job file (a folder without one never loads it). */
let yaml: typeof YamlModule | undefined;

function parseYaml(text: string): unknown {
  const YAML = (yaml ??= createRequire(import.meta.url)('yaml') as typeof YamlModule);
  const docs = YAML.parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true });
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    const error = doc.errors[0];
    if (error) {
      const pos = error.linePos?.[0];
      throw new DataFileError(`invalid YAML${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}: ${error.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}`);
    }
  }
  if (list.length > 1) throw new DataFileError(`invalid YAML: ${list.length} documents (---): expected one job per file`);
  if (list.length === 0) return null;
  const doc = list[0]!;
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    // The yaml package's own text names the alias, which is often a value (`password: *Pa55word`).
    if (err instanceof ReferenceError) {
      const where = unresolvedAlias(doc, text);
      throw new DataFileError(`invalid YAML${where ? ` at line ${where.line}, column ${where.column}` : ''}: an alias with no anchor: quote values starting with *`);
    }
    throw new DataFileError(`invalid YAML: ${(err as Error).message.split(/[:\n]/)[0]}`);
  }
}

/** Where the first alias that names no anchor is. */
function unresolvedAlias(doc: YamlModule.Document.Parsed, text: string): { line: number; column: number } | null {
  let at: number | null = null;
  const YAML = yaml!;
  YAML.visit(doc, {
    Alias(_, node) {
      if (node.resolve(doc) !== undefined || !node.range) return undefined;
      at = node.range[0];
      return YAML.visit.BREAK;
    },
  });
  return at === null ? null : lineColumn(text, at);
}
