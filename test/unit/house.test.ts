/**
 * The house (issue 21): no import circle in src/ and no room too big. The circle check is
 * dependency-cruiser with the project's .dependency-cruiser.cjs, run as a user would run it; a
 * fixture folder with a circle on purpose shows the check can fail and names the circle.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './_fixtures.js';

const DEPCRUISE = join(ROOT, 'node_modules', '.bin', 'depcruise');
const MAX_LINES = 600;

/** depcruise over `target` (relative to the root) with the project's config: its exit code and all it printed. */
function cruise(target: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    execFile(DEPCRUISE, [target, '--config', '.dependency-cruiser.cjs', '--output-type', 'err'], { cwd: ROOT, timeout: 100_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, output: `${stdout}${stderr}` });
    });
  });
}

function lineCount(text: string): number {
  if (text === '') return 0;
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe('the house', () => {
  it('src/ has no import circle (type-only imports count) and every import resolves', async () => {
    const { code, output } = await cruise('src');
    expect(code, output).toBe(0);
    expect(output).toMatch(/no dependency violations found \(\d{3,} modules/);
  });

  it('the circle check fails on a circle made on purpose, and names its files', async () => {
    const { code, output } = await cruise('test/fixtures/import-circle');
    expect(code, output).not.toBe(0);
    expect(output).toContain('no-circular');
    expect(output).toMatch(/import-circle\/a\.ts →\s+test\/fixtures\/import-circle\/b\.ts →\s+test\/fixtures\/import-circle\/a\.ts/);
  });

  it(`no file in src/ is over ${MAX_LINES} lines`, () => {
    const files = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `src/${f.split('\\').join('/')}`);
    expect(files.length).toBeGreaterThan(100);
    const over = files
      .map((f) => ({ file: f, lines: lineCount(readFileSync(join(ROOT, f), 'utf8')) }))
      .filter((f) => f.lines > MAX_LINES)
      .map((f) => `${f.file} (${f.lines} lines)`);
    expect(over).toEqual([]);
  });
});
