/** The job set's version (src/jobs/job-set.ts) and the warning when live nodes' versions differ (src/nodes/job-sets.ts). */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { jobSetVersion } from '../../src/jobs/job-set.js';
import { JOB_SET_SKEW_MS, JobSetSkew } from '../../src/nodes/job-sets.js';
import type { ListedNode } from '../../src/store/types.js';
import { removeTempDirs, tempDir } from './_fixtures.js';

afterAll(() => removeTempDirs());

describe('the job set version', () => {
  it('is the same for the same files in any folder, and changes with a file\'s content, name, or a file added', () => {
    const [a, b] = [tempDir('jobset-a-'), tempDir('jobset-b-')];
    for (const dir of [a, b]) {
      writeFileSync(join(dir, 'report.mjs'), 'export default { schedule: "@daily", run() {} };');
      writeFileSync(join(dir, 'README.txt'), 'not a job file');
      mkdirSync(join(dir, '..data'));
    }
    writeFileSync(join(b, 'notes.md'), 'not a job file either');
    const v = jobSetVersion(a);
    expect(v).toMatch(/^[0-9a-f]{12}$/);
    expect(jobSetVersion(b)).toBe(v);
    writeFileSync(join(b, 'report.mjs'), 'export default { schedule: "@hourly", run() {} };');
    expect(jobSetVersion(b)).not.toBe(v);
    writeFileSync(join(a, 'sync.mjs'), 'export default {};');
    expect(jobSetVersion(a)).not.toBe(v);
    expect(jobSetVersion(join(a, 'missing'))).toMatch(/^[0-9a-f]{12}$/);
  });
});

describe('live nodes whose job sets differ', () => {
  const node = (id: string, jobSet: string | null, alive = true) => ({ id, jobSet, alive }) as ListedNode;
  it(`are named in one warning once they differed for ${JOB_SET_SKEW_MS / 1000} s, and one line says when they agree again`, () => {
    const lines: Array<[string, string]> = [];
    const log = pino({ level: 'info' }, { write: (l: string) => { const o = JSON.parse(l) as { level: number; msg: string }; lines.push([o.level === 40 ? 'warn' : 'info', o.msg]); } });
    let t = 0;
    const skew = new JobSetSkew('n1', log, JOB_SET_SKEW_MS, () => t);
    const seen = (...nodes: ListedNode[]) => skew.observe([node('n1', 'aaa'), ...nodes], 'aaa');
    seen(node('n2', 'aaa'), node('n3', 'bbb'), node('n4', 'ccc', false));
    t = JOB_SET_SKEW_MS - 1;
    seen(node('n2', 'aaa'), node('n3', 'bbb'));
    expect(lines).toEqual([]);
    t = JOB_SET_SKEW_MS;
    seen(node('n2', 'aaa'), node('n3', 'bbb'));
    seen(node('n2', 'aaa'), node('n3', 'bbb'));
    expect(lines).toEqual([['warn', 'job sets differ for over 60 s: this node runs aaa; n3 runs bbb: their jobs folders are not the same']]);
    // n3 got the files: agree again. A node that differs only briefly (a deploy in progress) is never named.
    seen(node('n2', 'aaa'), node('n3', 'aaa'));
    t += 30_000;
    seen(node('n2', 'ddd'), node('n3', 'aaa'));
    t += 20_000;
    seen(node('n2', 'aaa'), node('n3', 'aaa'));
    expect(lines.slice(1)).toEqual([['info', 'job sets agree again: every live node runs aaa']]);
  });
});
