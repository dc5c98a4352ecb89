/**
 * The Dockerfile cannot be built here (no container engine), so this checks what can be checked
 * without one: its stages, what each COPY takes exists and is not excluded by .dockerignore, the
 * runtime stage carries production dependencies and dist/ only, runs as a non-root user, and starts
 * `node bin/scheduler run`; and the image agrees with the Kubernetes manifests.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DEPLOY, ROOT } from './deploy-kit.js';

interface Instruction { op: string; args: string; line: number }
interface Stage { base: string; name: string; steps: Instruction[] }

function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    if (!line.trim() || line.trim().startsWith('#')) continue;
    while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1)} ${lines[++i]!.trim()}`;
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`Dockerfile line ${start + 1}: ${line}`);
    const step = { op: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start + 1 };
    if (step.op === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(step.args)!;
      stages.push({ base: from[1]!, name: from[2] ?? String(stages.length), steps: [] });
    } else {
      if (!stages.length) throw new Error(`Dockerfile line ${start + 1}: ${step.op} before FROM`);
      stages.at(-1)!.steps.push(step);
    }
  }
  return stages;
}

/** COPY's flags, sources and destination. */
function copyOf(step: Instruction) {
  const words = step.args.split(/\s+/);
  const flags = words.filter((w) => w.startsWith('--'));
  const rest = words.filter((w) => !w.startsWith('--'));
  return { from: flags.find((f) => f.startsWith('--from='))?.slice('--from='.length), sources: rest.slice(0, -1), dest: rest.at(-1)! };
}

/** Whether .dockerignore (simple patterns: names, paths, `*.ext`) excludes a path of the context. */
function ignored(patterns: string[], path: string): boolean {
  const clean = path.replace(/^\.\//, '').replace(/\/$/, '');
  return patterns.some((p) => {
    const re = new RegExp(`^${p.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(/.*)?$`);
    return re.test(clean);
  });
}

const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const runtime = stages.at(-1)!;
const steps = (stage: Stage, op: string) => stage.steps.filter((s) => s.op === op);
const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

describe('Dockerfile', () => {
  it('has a build stage and a runtime stage on Node 20, as package.json\'s engines say', () => {
    expect(stages.map((s) => s.name)).toEqual(['build', 'runtime']);
    expect(pkg.engines.node).toBe('>=20');
    for (const s of stages) expect(s.base).toMatch(/^node:20[-.]/);
  });

  it('every file a COPY takes from the context exists and is not excluded by .dockerignore', () => {
    const sources = stages.flatMap((s) => steps(s, 'COPY').map(copyOf).filter((c) => !c.from).flatMap((c) => c.sources));
    expect(sources.sort()).toEqual(['bin', 'package-lock.json', 'package.json', 'src', 'tsconfig.json']);
    for (const src of sources) {
      expect(existsSync(join(ROOT, src)), src).toBe(true);
      expect(ignored(ignore, src), `${src} excluded by .dockerignore`).toBe(false);
    }
    // The tests of this check itself: what the context must not carry is excluded.
    for (const path of ['node_modules', 'dist', '.git', 'data', 'test/unit/cli.test.ts', 'server.log']) expect(ignored(ignore, path), path).toBe(true);
  });

  it('the build stage installs from the lock file, builds dist/ and drops the dev dependencies', () => {
    const build = stages[0]!;
    const runs = steps(build, 'RUN').map((s) => s.args).join('\n');
    expect(runs).toMatch(/npm ci\b/);
    expect(runs).toMatch(/npm run build\b/);
    expect(runs).toMatch(/npm prune --omit=dev\b/);
    // The build reads the same tsconfig the project builds with, and bin/scheduler starts dist/cli/entry.js.
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.json');
    expect(readFileSync(join(ROOT, 'bin/scheduler'), 'utf8')).toContain('../dist/cli/entry.js');
  });

  it('the runtime stage: production dependencies and dist/ from the build stage, no npm install of its own', () => {
    const copies = steps(runtime, 'COPY').map(copyOf);
    for (const c of copies.filter((c) => c.from)) expect(stages.slice(0, -1).map((s) => s.name)).toContain(c.from);
    const fromBuild = copies.filter((c) => c.from === 'build').flatMap((c) => c.sources);
    expect(fromBuild).toEqual(expect.arrayContaining(['/app/node_modules', '/app/dist', '/app/package.json']));
    expect(fromBuild).not.toContain('/app/src');
    expect(steps(runtime, 'RUN').map((s) => s.args).join('\n')).not.toMatch(/\bnpm (ci|install)\b/);
    expect(steps(runtime, 'WORKDIR').at(-1)?.args).toBe('/app');
    expect(copies.find((c) => c.sources.includes('bin'))?.dest).toBe('./bin');
  });

  it('runs as a numeric non-root user (so Kubernetes can check runAsNonRoot) and starts `node bin/scheduler run`', () => {
    const user = steps(runtime, 'USER').at(-1)?.args;
    expect(user).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user!.split(':')[0])).toBeGreaterThan(0);
    expect(JSON.parse(steps(runtime, 'ENTRYPOINT').at(-1)!.args)).toEqual(['node', 'bin/scheduler']);
    expect(JSON.parse(steps(runtime, 'CMD').at(-1)!.args)).toEqual(['run']);
  });

  it('its jobs folder is where the Kubernetes pods mount the jobs ConfigMap', () => {
    const env = steps(runtime, 'ENV').map((s) => s.args).join(' ');
    const jobsDir = /SCHEDULER_JOBS_DIR=(\S+)/.exec(env)?.[1];
    expect(jobsDir).toBeDefined();
    expect(steps(runtime, 'RUN').map((s) => s.args).join('\n')).toContain(`mkdir -p ${jobsDir}`);
    const deployment = parse(readFileSync(join(DEPLOY, 'kubernetes/deployment.yaml'), 'utf8'));
    const mounts: { mountPath: string }[] = deployment.spec.template.spec.containers[0].volumeMounts;
    expect(mounts.map((m) => m.mountPath)).toContain(jobsDir);
    const configMaps = readFileSync(join(DEPLOY, 'kubernetes/configmap.yaml'), 'utf8');
    expect(configMaps).toContain(`SCHEDULER_JOBS_DIR: ${jobsDir}`);
  });
});
