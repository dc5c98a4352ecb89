/**
 * Every relative link and #anchor in README.md and docs/**\/*.md resolves: a file that exists, a
 * heading that exists (in the same page or in another one). The check is remark-validate-links, run
 * as remark-cli runs it: every page is processed by one processor with a file set, and the plugin's
 * completer then checks the links of all of them together, so cross-file `page.md#heading` links are
 * checked as well (without a file set, the plugin's Node API checks only the same page's headings).
 * The test over test/fixtures/docs-links/ shows that the check fails on a missing file, a missing
 * anchor in the same page and a missing anchor in another page.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { remark } from 'remark';
import remarkValidateLinks from 'remark-validate-links';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** Pages the README must link to: the generated references and the testing page. */
const LINKED_FROM_README = [
  'docs/testing.md',
  'docs/reference/cli.md',
  'docs/reference/configuration.md',
  'docs/reference/job-file.md',
  'docs/reference/metrics.md',
];

/** The markdown files under `dir` (relative to `root`), recursively, in name order. */
function markdownUnder(root: string, dir: string): string[] {
  const abs = join(root, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return markdownUnder(root, path);
      return entry.name.endsWith('.md') ? [path] : [];
    });
}

type Completer = (set: { valueOf(): unknown[] }) => Promise<void> | void;

/**
 * Runs remark-validate-links over `files` (paths relative to `root`) and returns one line per broken
 * link: `<file>:<line>:<column>: <the plugin's reason>`. `skip`: paths (relative to `root`) whose
 * links are not checked (with or without a #hash).
 */
async function brokenLinks(root: string, files: string[], skip: string[] = []): Promise<string[]> {
  // The part of unified-engine's FileSet that the plugin uses: it registers its completer with
  // use(), offers the files its links name with add() (we process only `files`; a named file outside
  // them is checked for existence by the plugin itself), and reads the processed files back with
  // valueOf() once every file has been through the processor.
  const completers: Completer[] = [];
  const fileSet = { use: (completer: Completer) => void completers.push(completer), add: () => fileSet };
  const skipPathPatterns = skip.map((path) => new RegExp(`^${escapeRegExp(join(root, path))}(#.*)?$`));
  const processor = remark().use(remarkValidateLinks as never, { repository: false, root, skipPathPatterns }, fileSet);
  const processed: Awaited<ReturnType<typeof processor.process>>[] = [];
  for (const path of files) {
    processed.push(await processor.process({ cwd: root, path, value: readFileSync(join(root, path), 'utf8') }));
  }
  for (const completer of completers) await completer({ valueOf: () => processed });
  return processed.flatMap((file) =>
    [...file.messages]
      .sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0))
      .map((m) => `${relative(root, resolve(root, file.path))}:${m.line ?? '?'}:${m.column ?? '?'}: ${m.reason}`),
  );
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('documentation links', () => {
  it('every relative link and #anchor in README.md, CHANGELOG.md, bench/README.md and docs/ resolves', async () => {
    const files = ['README.md', 'CHANGELOG.md', 'bench/README.md', ...markdownUnder(ROOT, 'docs')];
    expect(files.length).toBeGreaterThan(5);
    const broken = await brokenLinks(ROOT, files);
    expect(broken, broken.join('\n')).toEqual([]);
  });

  it('the README links to the reference pages and the testing page', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    for (const path of LINKED_FROM_README) {
      expect(readme, path).toContain(`](${path}`);
      expect(existsSync(join(ROOT, path)), path).toBe(true);
    }
  });

  it('fails on a link to a missing file and on a missing #anchor, in the same page or another', async () => {
    const root = join(ROOT, 'test/fixtures/docs-links');
    const files = ['README.md', ...markdownUnder(root, 'docs')];
    const broken = await brokenLinks(root, files);
    expect(broken).toEqual([
      'README.md:5:11: Cannot find file `docs/missing.md`',
      'README.md:7:11: Cannot find heading for `#no-such-heading`',
      'README.md:9:21: Cannot find heading for `#no-such-heading` in `docs/page.md`',
      'docs/page.md:5:13: Cannot find heading for `#gone` in `../README.md`',
    ]);
  });
});
