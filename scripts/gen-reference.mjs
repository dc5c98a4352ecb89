#!/usr/bin/env node
/**
 * Writes the reference pages under docs/reference/ from the code (`npm run docs:reference`; needs
 * `npm run build`: the generators import dist/). Each page is one module of scripts/reference/
 * exporting `{ file, generate() }`; test/unit/reference-docs.test.ts fails when a committed page
 * differs from what its generator gives now.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as cli from './reference/cli.mjs';
import * as configuration from './reference/configuration.mjs';
import * as jobFile from './reference/job-file.mjs';
import * as metrics from './reference/metrics.mjs';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The pages, each `{ file, generate() }` (file relative to the project root). */
export const PAGES = [cli, configuration, jobFile, metrics];

export async function writePages(pages = PAGES) {
  for (const p of pages) {
    const target = join(ROOT, p.file);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, await p.generate());
    process.stdout.write(`wrote ${p.file}\n`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await writePages();
