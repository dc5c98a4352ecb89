/**
 * Importing a job file as the scheduler does everywhere (the daemon's loader and the worker of an
 * `isolation: 'worker'` job): jiti, with no caches on disk (a read-only root filesystem must work),
 * and the `cluster-cron` alias so that job files may import the package without a package.json.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Jiti } from 'jiti';
import { DATA_EXTENSIONS, parseDataJobFile } from './data-file.js';

/** Job files may `import { defineJob } from 'cluster-cron'` without a package.json of their own. */
export const PACKAGE_ENTRY = fileURLToPath(new URL('../index.js', import.meta.url));

export type JobImporter = (file: string) => Promise<Record<string, unknown> | undefined>;

export function createJobImporter(): JobImporter {
  // jiti (a large module) is loaded with the first file that needs it: a folder of .mjs files never does.
  let made: Promise<Jiti> | undefined;
  const jitiOf = () => (made ??= import('jiti').then(({ createJiti }) => createJiti(import.meta.url, {
    moduleCache: false,
    fsCache: false,
    interopDefault: true,
    alias: { 'cluster-cron': PACKAGE_ENTRY },
  })));
  const jiti = {
    import: async (file: string) => (await jitiOf()).import(file),
    evalModule: async (source: string, options: Parameters<Jiti['evalModule']>[1]) => (await jitiOf()).evalModule(source, options),
  };
  return async (file) => {
    // Read before the import: if the file changes in between, the version recorded is the older one,
    // and the next reload sees a change (never the reverse, which would keep stale code).
    const source = readFileSync(file);
    const version = contentHash(source);
    lastImported.set(file, version);
    // A .json or .yaml job file is data (a command job): parsed, never executed.
    if (DATA_EXTENSIONS.has(extname(file).toLowerCase())) return { default: parseDataJobFile(file, source.toString('utf8')) };
    if (!NATIVE_EXTENSIONS.has(extname(file))) return jiti.import(file) as Promise<Record<string, unknown> | undefined>;
    const first = firstImported.get(file);
    if (first === undefined) firstImported.set(file, version);
    if (first === undefined || first === version) {
      const required = requireEsm(file);
      if (required) return required;
      return jiti.import(file) as Promise<Record<string, unknown> | undefined>;
    }
    // jiti hands `.mjs` (and `.js` under "type": "module") to Node's own import, which caches a module
    // by its URL for the life of the process: a changed file gets a URL of its own version. A file
    // that Node cannot import (it imports 'cluster-cron' with no package.json) is transpiled, as jiti's
    // own fallback does. A CommonJS `.js` file is cached by its file name too, whatever the URL.
    delete moduleCache[file];
    try {
      const ns = (await import(`${pathToFileURL(file).href}?v=${version}`)) as Record<string, unknown>;
      return 'default' in ns ? ns : { __esModule: true, ...ns };
    } catch {
      return (await jiti.evalModule(source.toString('utf8'), { filename: file, async: true, forceTranspile: true })) as Record<string, unknown> | undefined;
    }
  };
}

/**
 * A `.mjs` file through Node's require(esm) (Node 20.19 and later): the same module (cached under the
 * same URL) as its import() would give, for a third of the time (import() reads each file through
 * four asynchronous file operations: 10,000 files took 3.7 s against 1.5 s). Undefined when it cannot
 * be required (no require(esm) in this Node, a top-level await, which require() refuses before
 * evaluating anything, an error): the caller imports it as before, and an error is reported as
 * import() reports it (a module whose evaluation threw is not evaluated again: import() gives the
 * same error).
 */
function requireEsm(file: string): Record<string, unknown> | undefined {
  if (extname(file) !== '.mjs' || !(process.features as { require_module?: boolean }).require_module) return undefined;
  let ns: Record<string, unknown>;
  try {
    ns = requireModule(file) as Record<string, unknown>;
  } catch {
    return undefined;
  } finally {
    // The module stays in Node's ES module map (a require or import of it again gives the same
    // namespace, never a second evaluation); require's cache, and the list of children of the module
    // that required it, would only keep a CommonJS wrapper per file alive (1.7 KB a job file).
    const wrapper = moduleCache[file];
    delete moduleCache[file];
    const siblings = wrapper?.parent?.children;
    const at = wrapper && siblings ? siblings.indexOf(wrapper) : -1;
    if (at >= 0) siblings!.splice(at, 1);
  }
  // As import() hands it to jiti's interop: a module without a default export is marked an ES module.
  return 'default' in ns ? ns : { __esModule: true, ...ns };
}

const requireModule = createRequire(import.meta.url);

/** Files that jiti may import with Node's own (cached) import; `.ts` and `.mts` are transpiled afresh each time. */
const NATIVE_EXTENSIONS = new Set(['.mjs', '.js']);
const moduleCache = requireModule.cache;
/** Per file: the hash of the content this process imported first (under the file's plain URL). */
const firstImported = new Map<string, string>();

/** Per file: the hash of the content read when it was last imported in this thread. */
const lastImported = new Map<string, string>();

/** The content hash of `file` as last imported by this thread, if it was. */
export function importedVersion(file: string): string | undefined {
  return lastImported.get(file);
}

/** A short hash of a file's content: names a version of a module, and tells a changed job file on reload. */
export function contentHash(content: Buffer | string): string {
  return createHash('sha256').update(content).digest('hex').slice(0, 16);
}

/** The default export of an imported job module (jiti's interop: the module itself when it has none). */
export function defaultExportOf(mod: Record<string, unknown> | undefined): unknown {
  return mod && typeof mod === 'object' && 'default' in mod ? mod.default : mod;
}
