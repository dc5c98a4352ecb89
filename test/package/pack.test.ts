/**
 * The package as a user gets it: `npm pack` of this project, installed with `npm install <tarball>`
 * into an empty project of its own (a package.json, a jobs folder with a `.ts` job importing
 * `cluster-cron` and a `.mjs` job), then driven through the bin npm linked there. What is judged is
 * what a user sees: the files the tarball holds, the commands' output and exit statuses, the files
 * the job bodies write, and `tsc` over a file that uses the package's types.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Daemon, ROOT } from '../helpers/cli.js';
import { Workspace } from '../helpers/workspace.js';
import { waitFor } from '../harness/process.mjs';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; devDependencies: Record<string, string> };

interface Result { code: number | null; stdout: string; stderr: string }

/**
 * A command to completion. No `npm_*` variable of the npm that started vitest (its prefix, its
 * package) reaches the child, nor a SCHEDULER_* of the caller.
 */
function sh(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}, timeoutMs = 90_000): Promise<Result> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && !k.startsWith('SCHEDULER_')));
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...base, ...env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ code, stdout, stderr: err && code === null ? `${stderr}\n${err.message}` : stderr });
    });
  });
}

/**
 * better-sqlite3's install script asks GitHub for a prebuilt binary (not reachable here) and else
 * compiles SQLite (a minute or more). prebuild-install also takes a tarball from a local folder,
 * named as the download would be: this one holds the binary the project's own install built, for
 * the same better-sqlite3 version, Node ABI, platform and architecture, so the install script
 * really runs and really unpacks it.
 */
async function localPrebuild(dir: string): Promise<void> {
  const sqliteDir = dirname(createRequire(join(ROOT, 'package.json')).resolve('better-sqlite3/package.json'));
  const { version } = JSON.parse(readFileSync(join(sqliteDir, 'package.json'), 'utf8')) as { version: string };
  const { header } = process.report.getReport() as { header: { glibcVersionRuntime?: string } };
  const libc = process.platform === 'linux' && !header.glibcVersionRuntime ? 'musl' : '';
  mkdirSync(dir, { recursive: true });
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}${libc}-${process.arch}.tar.gz`;
  const tar = await sh('tar', ['-czf', join(dir, name), '-C', sqliteDir, 'build/Release/better_sqlite3.node'], ROOT);
  if (tar.code !== 0) throw new Error(`tar of better-sqlite3's binary: ${tar.stderr}`);
}

// Each body appends `<trigger> <periodKey>` to a file named after itself in $EFFECTS_DIR.
const TS_JOB = `import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineJob } from 'cluster-cron';

export default defineJob({
  schedule: '* * * * * *',
  catchUp: '1m',
  run(ctx) {
    appendFileSync(join(process.env.EFFECTS_DIR!, 'typed.log'), \`\${ctx.trigger} \${ctx.periodKey}\\n\`);
    return { attempt: ctx.attempt };
  },
});
`;
const MJS_JOB = `import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

export default {
  schedule: '* * * * * *',
  catchUp: '1m',
  run(ctx) {
    appendFileSync(join(process.env.EFFECTS_DIR, 'plain.log'), \`\${ctx.trigger} \${ctx.periodKey}\\n\`);
  },
};
`;
const USES_TYPES = join(ROOT, 'test', 'fixtures', 'package', 'uses-types.ts');

describe('the packed package, installed into an empty project', () => {
  const ws = new Workspace('cron-pack-');
  const app = ws.dir;
  const effects = ws.path('effects');
  let packed: { filename: string; files: Array<{ path: string }> };
  let installed: Result;

  beforeAll(async () => {
    // --ignore-scripts: prepack would empty dist/ while the file beside this one runs bin/scheduler
    // from it; the pretest script has just built it.
    mkdirSync(ws.path('pack'));
    const pack = await sh('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', ws.path('pack')], ROOT);
    expect(pack.code, pack.stderr).toBe(0);
    packed = (JSON.parse(pack.stdout) as Array<typeof packed>)[0]!;

    writeFileSync(ws.path('package.json'), `${JSON.stringify({
      name: 'my-service', private: true, type: 'module',
      allowScripts: { 'better-sqlite3': true },
      devDependencies: { '@types/node': pkg.devDependencies['@types/node'] },
    }, null, 2)}\n`);
    ws.writeJob('typed.ts', TS_JOB);
    ws.writeJob('plain.mjs', MJS_JOB);
    copyFileSync(USES_TYPES, ws.path('uses-types.ts'));
    writeFileSync(ws.path('tsconfig.json'), JSON.stringify({
      // skipLibCheck off: the declarations the package ships are checked too.
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: false },
      files: ['uses-types.ts'],
    }));
    await localPrebuild(ws.path('prebuilds'));
    // prebuild-install's settings file, found by looking up from node_modules/better-sqlite3.
    writeFileSync(ws.path('.prebuild-installrc'), `local-prebuilds=${ws.path('prebuilds')}\n`);
    mkdirSync(effects);

    // --prefer-offline: the packages the project's `npm ci` cached, the registry for what is not.
    installed = await sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(ws.path('pack'), packed.filename)], app, {}, 110_000);
  });

  afterAll(() => ws.cleanup());

  const npx = (...args: string[]) => sh('npx', ['--no-install', 'scheduler', ...args], app, {
    SCHEDULER_LOG_LEVEL: 'warn', SCHEDULER_HTTP: 'off', EFFECTS_DIR: effects,
  });

  it('holds the bin, the compiled code and its declarations, the license and the docs, and nothing else', () => {
    const files = packed.files.map((f) => f.path).sort();
    for (const needed of ['LICENSE', 'README.md', 'CHANGELOG.md', 'package.json', 'bin/scheduler', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/entry.js']) {
      expect(files).toContain(needed);
    }
    expect(files.filter((f) => !/^(dist|bin)\//.test(f))).toEqual(['CHANGELOG.md', 'LICENSE', 'README.md', 'package.json']);
    // No source map: they would point at src/, which is not shipped.
    expect(files.filter((f) => !/\.(js|d\.ts)$/.test(f) && f.startsWith('dist/'))).toEqual([]);
  });

  it('installs with npm install <tarball>', () => {
    expect(installed.code, `${installed.stdout}\n${installed.stderr}`).toBe(0);
    expect(existsSync(ws.path('node_modules', '.bin', 'scheduler'))).toBe(true);
  });

  it('prints its version: scheduler --version, -V, and --version after a command', async () => {
    for (const args of [['--version'], ['-V'], ['validate', '--version']]) {
      const r = await npx(...args);
      expect({ args, code: r.code, stdout: r.stdout.trim() }, r.stderr).toEqual({ args, code: 0, stdout: pkg.version });
    }
  });

  it('validates the project\'s .ts and .mjs job files', async () => {
    const r = await npx('validate');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`2 job(s) valid in ${ws.jobsDir}`);
  });

  it('run-once runs both jobs once each, on SQLite', async () => {
    const r = await npx('run-once', '--store', 'sqlite:./data/run-once.db');
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    for (const job of ['typed', 'plain']) {
      const lines = ws.lines(`effects/${job}.log`);
      expect(lines, job).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^catch-up ${job}@\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.000Z$`));
    }
  });

  it('the installed scheduler run starts on SQLite, runs an every-second job, and stops on SIGTERM with 0', async () => {
    // As a service manager starts it: the link npm made in node_modules/.bin, signalled by pid.
    // (npx in between would not pass a SIGTERM sent to its own pid on to the daemon.)
    const daemon = new Daemon([], {
      cwd: app, command: [ws.path('node_modules', '.bin', 'scheduler')],
      env: { SCHEDULER_STORE: 'sqlite:./data/daemon.db', SCHEDULER_HTTP: 'off', SCHEDULER_LOG_LEVEL: 'info', EFFECTS_DIR: effects },
    });
    try {
      await daemon.waitStarted();
      await waitFor('a scheduled run of the .ts job', () => ws.lines('effects/typed.log').some((l) => l.startsWith('schedule typed@')), 20_000);
      expect(await daemon.stop('SIGTERM'), daemon.errors).toBe(0);
      expect(daemon.logs().map((l) => l.msg)).toContain('stopped');
    } finally {
      await daemon.terminate(5_000);
    }
  });

  it('a TypeScript file using defineJob and the ctx types passes tsc --noEmit', async () => {
    const r = await sh(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], app);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  });
});
