/**
 * The reference pages under docs/reference/ are what scripts/gen-reference.mjs writes from the code
 * now: a flag, setting or job field renamed (or added, or described anew) without `npm run
 * docs:reference` fails here. Needs `npm run build` (the generators read dist/).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PAGES, ROOT } from '../../scripts/gen-reference.mjs';
import * as cliPage from '../../scripts/reference/cli.mjs';
import * as configurationPage from '../../scripts/reference/configuration.mjs';
import * as jobFilePage from '../../scripts/reference/job-file.mjs';
import { SETTINGS } from '../../src/config/settings.js';
import { JOB_FIELDS } from '../../src/jobs/fields.js';

function committed(file: string): string {
  const path = join(ROOT, file);
  if (!existsSync(path)) throw new Error(`${file} is missing: run \`npm run docs:reference\` and commit it`);
  return readFileSync(path, 'utf8');
}

const stale = (file: string) => `${file} differs from what its generator writes now: run \`npm run docs:reference\` and commit the page`;

describe('the reference pages match the code', () => {
  it('lists the CLI, configuration and job-file pages', () => {
    expect(PAGES.map((p) => p.file)).toEqual(expect.arrayContaining(['docs/reference/cli.md', 'docs/reference/configuration.md', 'docs/reference/job-file.md']));
  });

  for (const page of PAGES) {
    it(`${page.file} is current`, async () => {
      expect(committed(page.file), stale(page.file)).toBe(await page.generate());
    });
  }
});

describe('the check can fail', () => {
  it('a renamed flag gives another CLI page, naming the new flag', () => {
    const program = cliPage.buildProgram();
    const utc = program.commands.find((c) => c.name() === 'history')!.options.find((o) => o.long === '--utc')!;
    Object.assign(utc, { long: '--in-utc', flags: '--in-utc' });
    const page = cliPage.generate(program);
    expect(page).not.toBe(committed(cliPage.file));
    expect(page).toContain('| `history` | `--in-utc` |');
    expect(committed(cliPage.file)).toContain('| `history` | `--utc` |');
  });

  it('a renamed environment variable gives another configuration page', () => {
    const settings = { ...SETTINGS, store: { ...SETTINGS.store, env: 'SCHEDULER_STORE_URL' } };
    const page = configurationPage.generate(settings);
    expect(page).not.toBe(committed(configurationPage.file));
    expect(page).toContain('| `store` | `SCHEDULER_STORE_URL` | `--store` |');
  });

  it('a renamed job field gives another job-file page', () => {
    const { catchUp, ...rest } = JOB_FIELDS;
    const page = jobFilePage.generate({ ...rest, catchup: catchUp });
    expect(page).not.toBe(committed(jobFilePage.file));
    expect(page).toContain('| `catchup` | duration | `15m` |');
    expect(page).not.toContain('`catchUp`');
  });
});

describe('what the pages say', () => {
  it('every command, setting and job field has its row', () => {
    const cli = committed(cliPage.file);
    for (const c of cliPage.buildProgram().commands.filter((c) => c.name() !== 'help')) expect(cli).toMatch(new RegExp(`^\\| \`${c.name()}[ \`]`, 'm'));
    const config = committed(configurationPage.file);
    for (const [key, spec] of Object.entries(SETTINGS)) expect(config).toContain(`| \`${key}\` | \`${spec.env}\` |`);
    const jobs = committed(jobFilePage.file);
    for (const field of Object.keys(JOB_FIELDS)) expect(jobs).toContain(`| \`${field}\` |`);
  });

  it('the CLI page says which common flags are taken before the command', () => {
    const cli = committed(cliPage.file);
    for (const flag of ['--config <file>', '--jobs <dir>', '--store <url>', '--redis <urls>', '--node-id <name>', '--log-level <level>', '--json']) {
      expect(cli).toMatch(new RegExp(`^\\| \`${flag}\` \\| yes \\|`, 'm'));
    }
    expect(cli).toMatch(/^\| `--load-timeout <duration>` \| no \|/m);
  });
});
