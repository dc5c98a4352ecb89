/**
 * `.json` and `.yaml`/`.yml` job files: data, not code, so they can define only a command job. A
 * syntax error is one line naming the line and column (the loader prefixes the file). YAML is read
 * as YAML 1.2 (core schema: `yes`/`on` stay strings, no timestamps), one document, unique keys.
 */
import { extname } from 'node:path';
import YAML from 'yaml';

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
    // V8 names the offset ("... in JSON at position 42"); say the line, as an editor shows it.
    const at = /at position (\d+)/.exec(message);
    const where = at ? lineColumn(text, Number(at[1])) : text.trim() === '' ? { line: 1, column: 1 } : null;
    const what = message.replace(/\s*in JSON at position \d+.*$/, '').replace(/\s*\(line \d+ column \d+\)/, '');
    throw new DataFileError(`invalid JSON${where ? ` at line ${where.line}, column ${where.column}` : ''}: ${text.trim() === '' ? 'the file is empty' : what}`);
  }
}

function parseYaml(text: string): unknown {
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
  return list[0]!.toJS({ maxAliasCount: 100 });
}
