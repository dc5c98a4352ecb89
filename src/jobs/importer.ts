/**
 * Importing a job file as the scheduler does everywhere (the daemon's loader and the worker of an
 * `isolation: 'worker'` job): jiti, with no caches on disk (a read-only root filesystem must work),
 * and the `cluster-cron` alias so that job files may import the package without a package.json.
 */
import { fileURLToPath } from 'node:url';
import { createJiti } from 'jiti';

/** Job files may `import { defineJob } from 'cluster-cron'` without a package.json of their own. */
export const PACKAGE_ENTRY = fileURLToPath(new URL('../index.js', import.meta.url));

export type JobImporter = (file: string) => Promise<Record<string, unknown> | undefined>;

export function createJobImporter(): JobImporter {
  const jiti = createJiti(import.meta.url, {
    moduleCache: false,
    fsCache: false,
    interopDefault: true,
    alias: { 'cluster-cron': PACKAGE_ENTRY },
  });
  return (file) => jiti.import(file) as Promise<Record<string, unknown> | undefined>;
}

/** The default export of an imported job module (jiti's interop: the module itself when it has none). */
export function defaultExportOf(mod: Record<string, unknown> | undefined): unknown {
  return mod && typeof mod === 'object' && 'default' in mod ? mod.default : mod;
}
