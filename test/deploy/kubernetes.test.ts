/**
 * deploy/kubernetes: every manifest parses, is valid against the Kubernetes schemas
 * (kubernetes-models) and has no field those schemas do not know (a misspelt field is otherwise
 * silently dropped); the facts that hold across files hold (probes on the HTTP port the ConfigMap
 * binds, stop budget above gracePeriod + lockTtl, a Forbid CronJob with the daemons' config, non-root
 * and read-only pods, references that resolve); the shipped job files and settings are accepted by
 * `bin/scheduler validate`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import * as core from 'kubernetes-models/v1';
import * as apps from 'kubernetes-models/apps/v1';
import * as batch from 'kubernetes-models/batch/v1';
import * as policy from 'kubernetes-models/policy/v1';
import { loadJobs } from '../../src/jobs/load.js';
import { parseDuration } from '../../src/time/duration.js';
import { runCli } from '../helpers/cli.js';
import { STOP_MARGIN_MS } from '../../src/daemon/stop-budget.js';
import { DEPLOY, knownVariables, ROOT } from './deploy-kit.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Obj = Record<string, any>;
interface Manifest { file: string; doc: Obj }

const DIR = join(DEPLOY, 'kubernetes');
const OVERLAY = join(DEPLOY, 'kubernetes-without-http-server');
/**
 * `kubectl kustomize` renders the base and the overlay. This machine (and so CI) has kubectl: under
 * CI=true the case always runs, and fails without kubectl rather than passing unseen; a laptop
 * without it skips it.
 */
const KUBECTL = process.env.CI === 'true' || spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8', timeout: 30_000 }).status === 0;
const GROUPS: Record<string, Record<string, unknown>> = { v1: core, 'apps/v1': apps, 'batch/v1': batch, 'policy/v1': policy };

function readManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const file of readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(DIR, file), 'utf8'))) {
      if (doc.errors.length || doc.warnings.length) throw new Error(`${file}: ${[...doc.errors, ...doc.warnings].map((e) => e.message).join('; ')}`);
      out.push({ file, doc: doc.toJS() as Obj });
    }
  }
  return out;
}

/** A model instance whose validation records every property the schema's validator reads. */
function recorder<T>(value: T, path: string, seen: Set<string>): T {
  if (value === null || typeof value !== 'object') return value;
  return new Proxy(value as object, {
    get(target, key, receiver) {
      if (typeof key === 'string') seen.add(`${path}/${key}`);
      return recorder(Reflect.get(target, key, receiver), `${path}/${String(key)}`, seen);
    },
    has(target, key) {
      if (typeof key === 'string') seen.add(`${path}/${key}`);
      return Reflect.has(target, key);
    },
  }) as T;
}

/**
 * Validate with the model class of its apiVersion/kind; returns the fields the schema does not know.
 * The generated validators read each property their schema declares (free-form maps such as labels
 * and ConfigMap data are walked whole), so a field present but never read is unknown to the schema.
 */
function validateManifest(m: Manifest): string[] {
  const Model = GROUPS[m.doc.apiVersion]?.[m.doc.kind] as (new (data: Obj) => { validate(): void; toJSON(): Obj }) | undefined;
  if (!Model) throw new Error(`${m.file}: no model for ${m.doc.apiVersion} ${m.doc.kind}`);
  const model = new Model(m.doc);
  model.validate();
  const seen = new Set<string>();
  model.validate.call(recorder(model, '', seen));
  const unknown: string[] = [];
  const walk = (v: unknown, p: string) => {
    if (v && typeof v === 'object') for (const [k, child] of Object.entries(v)) {
      if (!seen.has(`${p}/${k}`)) unknown.push(`${m.file}: ${m.doc.kind} ${p}/${k}`);
      walk(child, `${p}/${k}`);
    }
  };
  walk(model.toJSON(), '');
  return unknown;
}

const manifests = readManifests();
const find = (kind: string, name?: string): Obj => {
  const found = manifests.filter((m) => m.doc.kind === kind && (name === undefined || m.doc.metadata?.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name ?? ''}, found ${found.length}`);
  return found[0]!.doc;
};
const deployment = find('Deployment');
const cronJob = find('CronJob');
const pdb = find('PodDisruptionBudget');
const settings = find('ConfigMap', 'cluster-cron-config');
const jobsMap = find('ConfigMap', 'cluster-cron-jobs');
const secret = find('Secret');
const kustomization = find('Kustomization');
const daemonPod = deployment.spec.template.spec as Obj;
const passPod = cronJob.spec.jobTemplate.spec.template.spec as Obj;
const container = (pod: Obj): Obj => {
  expect(pod.containers).toHaveLength(1);
  return pod.containers[0];
};
const httpSetting = () => /^(.+):(\d+)$/.exec(settings.data.SCHEDULER_HTTP as string)!;

const tmp = mkdtempSync(join(tmpdir(), 'deploy-k8s-'));
const jobsDir = join(tmp, 'jobs');
beforeAll(() => {
  mkdirSync(jobsDir);
  for (const [name, source] of Object.entries(jobsMap.data as Record<string, string>)) writeFileSync(join(jobsDir, name), source);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('Kubernetes manifests', () => {
  it('every manifest is valid against its Kubernetes schema, with no unknown field', () => {
    const objects = manifests.filter((m) => m.doc.kind !== 'Kustomization');
    expect(objects.map((m) => `${m.doc.apiVersion} ${m.doc.kind}`).sort()).toEqual(
      ['apps/v1 Deployment', 'batch/v1 CronJob', 'policy/v1 PodDisruptionBudget', 'v1 ConfigMap', 'v1 ConfigMap', 'v1 Namespace', 'v1 Secret'].sort());
    expect(objects.flatMap(validateManifest)).toEqual([]);
  });

  it('the schema check does catch a wrong type, a missing port and a misspelt field', () => {
    const broken = (edit: (d: Obj) => void): Manifest => {
      const doc = structuredClone(deployment);
      edit(doc);
      return { file: 'deployment.yaml', doc };
    };
    expect(() => validateManifest(broken((d) => (d.spec.replicas = 'three')))).toThrow(/replicas must be integer/);
    expect(() => validateManifest(broken((d) => delete d.spec.template.spec.containers[0].livenessProbe.httpGet.port))).toThrow(/port/);
    expect(validateManifest(broken((d) => {
      const sc = d.spec.template.spec.containers[0].securityContext;
      sc.readOnlyRootFilesytem = sc.readOnlyRootFilesystem;
      delete sc.readOnlyRootFilesystem;
    }))).toEqual(['deployment.yaml: Deployment /spec/template/spec/containers/0/securityContext/readOnlyRootFilesytem']);
  });

  it('kustomization.yaml lists every manifest but the example Secret, and names the image the pods use', () => {
    const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'secret.example.yaml').sort();
    expect([...kustomization.resources].sort()).toEqual(files);
    expect(kustomization.resources).not.toContain('secret.example.yaml');
    const repo = (image: string) => image.replace(/:[^:/]+$/, '');
    expect(kustomization.images.map((i: Obj) => i.name)).toEqual([repo(container(daemonPod).image)]);
    expect(container(passPod).image).toBe(container(daemonPod).image);
  });

  it('the Deployment: 3 identical daemons whose probes hit the HTTP port that SCHEDULER_HTTP binds on all addresses', () => {
    expect(deployment.spec.replicas).toBe(3);
    expect(deployment.spec.selector.matchLabels).toEqual(deployment.spec.template.metadata.labels);
    const c = container(daemonPod);
    expect(c.args).toEqual(['run']);
    const [, host, port] = httpSetting();
    expect(host, 'the kubelet probes the pod IP, not loopback').toBe('0.0.0.0');
    const portOf = (ref: string | number) => (typeof ref === 'number' ? ref : c.ports.find((p: Obj) => p.name === ref)?.containerPort);
    expect(c.livenessProbe.httpGet.path).toBe('/healthz');
    expect(c.readinessProbe.httpGet.path).toBe('/readyz');
    expect(c.startupProbe.httpGet.path).toBe('/healthz');
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) expect(portOf(probe.httpGet.port)).toBe(Number(port));
    // The start-up probe leaves time for migrations and the job files' loads (loadTimeout 10 s each).
    expect(c.startupProbe.periodSeconds * c.startupProbe.failureThreshold).toBeGreaterThanOrEqual(60);
    expect(c.env).toContainEqual({ name: 'SCHEDULER_NODE_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } });
    for (const kind of ['requests', 'limits']) {
      expect(c.resources[kind].cpu, kind).toBeDefined();
      expect(c.resources[kind].memory, kind).toBeDefined();
    }
  });

  it('terminationGracePeriodSeconds exceeds gracePeriod + the largest lockTtl of the shipped jobs + STOP_MARGIN_MS (8.5 s)', async () => {
    const graceMs = parseDuration(settings.data.SCHEDULER_GRACE_PERIOD)!;
    expect(graceMs).toBeGreaterThan(0);
    const { jobs, invalid } = await loadJobs(jobsDir, 'UTC');
    expect(invalid).toEqual([]);
    expect(jobs.length).toBeGreaterThan(0);
    const stopMs = graceMs + Math.max(...jobs.map((j) => j.lockTtlMs)) + STOP_MARGIN_MS;
    for (const pod of [daemonPod, passPod]) expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(stopMs);
  });

  it('both pods run non-root with a read-only root filesystem, no privilege escalation, no capabilities', () => {
    const dockerUser = /^USER\s+(\d+)/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1];
    for (const pod of [daemonPod, passPod]) {
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(pod.securityContext.runAsUser).not.toBe(0);
      expect(String(pod.securityContext.runAsUser), 'the image\'s USER').toBe(dockerUser);
      expect(pod.securityContext.seccompProfile).toEqual({ type: 'RuntimeDefault' });
      expect(pod.automountServiceAccountToken).toBe(false);
      const sc = container(pod).securityContext;
      expect(sc.runAsNonRoot).toBe(true);
      expect(sc.readOnlyRootFilesystem).toBe(true);
      expect(sc.allowPrivilegeEscalation).toBe(false);
      expect(sc.capabilities.drop).toEqual(['ALL']);
    }
  });

  it('the jobs folder comes from the jobs ConfigMap, read-only at SCHEDULER_JOBS_DIR; /tmp is an emptyDir; every mount has its volume', () => {
    for (const pod of [daemonPod, passPod]) {
      const volumes = new Map<string, Obj>(pod.volumes.map((v: Obj) => [v.name, v]));
      const mounts: Obj[] = container(pod).volumeMounts;
      for (const mount of mounts) expect(volumes.has(mount.name), mount.name).toBe(true);
      const jobs = mounts.find((m) => m.mountPath === settings.data.SCHEDULER_JOBS_DIR);
      expect(jobs?.readOnly).toBe(true);
      expect(volumes.get(jobs!.name)!.configMap.name).toBe(jobsMap.metadata.name);
      const tmpMount = mounts.find((m) => m.mountPath === '/tmp');
      expect(volumes.get(tmpMount!.name)!.emptyDir).toBeDefined();
    }
  });

  it('settings come from the ConfigMap, the store and Redis URLs from the Secret, and every name is one the scheduler reads', () => {
    const known = knownVariables();
    for (const pod of [daemonPod, passPod]) {
      const c = container(pod);
      expect(c.envFrom).toEqual([{ configMapRef: { name: settings.metadata.name } }, { secretRef: { name: secret.metadata.name } }]);
      for (const e of c.env) expect(known.has(e.name), e.name).toBe(true);
    }
    for (const name of [...Object.keys(settings.data), ...Object.keys(secret.stringData)]) expect(known.has(name), name).toBe(true);
    expect(Object.keys(secret.stringData).sort()).toEqual(['SCHEDULER_REDIS', 'SCHEDULER_STORE']);
    expect(Object.keys(settings.data).filter((k) => k in secret.stringData)).toEqual([]);
  });

  it('the example Secret holds placeholders only, plainly not real', () => {
    for (const value of Object.values(secret.stringData as Record<string, string>)) {
      for (const url of value.split(',')) {
        const u = new URL(url);
        expect(u.password).toBe('REPLACE-ME');
        expect(u.hostname.endsWith('.example.invalid'), u.hostname).toBe(true);
      }
    }
    expect(readFileSync(join(DIR, 'secret.example.yaml'), 'utf8')).toMatch(/EXAMPLE ONLY: placeholder values/);
  });

  it('the PodDisruptionBudget covers the daemons and leaves a quorum of them up', () => {
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.template.metadata.labels);
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(pdb.spec.maxUnavailable).toBeLessThan(deployment.spec.replicas);
  });

  it('the CronJob runs run-once with concurrencyPolicy Forbid, a starting deadline, and the daemons\' configuration', () => {
    expect(cronJob.spec.concurrencyPolicy).toBe('Forbid');
    // Under 10 s the CronJob controller may never start it; at or over the interval, missed passes pile up.
    expect(cronJob.spec.startingDeadlineSeconds).toBeGreaterThanOrEqual(10);
    expect(cronJob.spec.startingDeadlineSeconds).toBeLessThan(60);
    expect(cronJob.spec.schedule).toBe('* * * * *');
    const c = container(passPod);
    expect(c.args).toEqual(['run-once']);
    expect(passPod.restartPolicy).toBe('Never');
    expect(cronJob.spec.jobTemplate.spec.backoffLimit).toBe(0);
    expect(c.env).toContainEqual({ name: 'SCHEDULER_HTTP', value: 'off' });
    const d = container(daemonPod);
    expect(c.envFrom).toEqual(d.envFrom);
    expect(c.volumeMounts).toEqual(d.volumeMounts);
    expect(passPod.volumes).toEqual(daemonPod.volumes);
    expect(c.resources).toEqual(d.resources);
  });

  it('the without-http-server overlay sets SCHEDULER_HTTP=off and removes the three probes and the http port', () => {
    const overlay = parse(readFileSync(join(OVERLAY, 'kustomization.yaml'), 'utf8')) as Obj;
    expect(overlay.resources).toEqual(['../kubernetes']);
    expect(overlay.patches).toHaveLength(2);
    /** The patch of `target` applied to a copy of `base`: only the ops listed, on paths that exist in the base. */
    const apply = (base: Obj, target: Obj): Obj => {
      const found = overlay.patches.find((p: Obj) => p.target.kind === target.kind && p.target.name === target.metadata.name);
      expect(found, `a patch of ${target.kind} ${target.metadata.name}`).toBeDefined();
      const patched = structuredClone(base);
      for (const { op, path, value } of parse(found.patch) as { op: string; path: string; value?: unknown }[]) {
        const keys = path.split('/').slice(1);
        const parent = keys.slice(0, -1).reduce<any>((o, k) => o?.[k], patched);
        expect(parent?.[keys.at(-1)!], `${path} exists in the base`).toBeDefined();
        if (op === 'remove') delete parent[keys.at(-1)!];
        else if (op === 'replace') parent[keys.at(-1)!] = value;
        else throw new Error(`unexpected op ${op} on ${path}`);
      }
      return patched;
    };
    const config = apply(settings, settings);
    expect(config.data).toEqual({ ...settings.data, SCHEDULER_HTTP: 'off' });
    expect(knownVariables().has('SCHEDULER_HTTP')).toBe(true);
    const patched = apply(deployment, deployment);
    const c = patched.spec.template.spec.containers[0];
    expect(Object.keys(c).filter((k) => /Probe$/.test(k))).toEqual([]);
    expect(c.ports).toBeUndefined();
    // Nothing else of the container changes.
    const { startupProbe: _s, livenessProbe: _l, readinessProbe: _r, ports: _p, ...rest } = container(daemonPod);
    expect(c).toEqual(rest);
    expect(validateManifest({ file: 'without-http-server', doc: patched })).toEqual([]);
    expect(validateManifest({ file: 'without-http-server', doc: config })).toEqual([]);
  });

  it.runIf(KUBECTL)('kubectl kustomize renders the base and the overlay into documents the schemas accept (skipped without kubectl, outside CI)', () => {
    for (const dir of [DIR, OVERLAY]) {
      const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, `kubectl kustomize ${dir}: ${r.stderr}`).toBe(0);
      const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
      expect(docs.map((d) => d.kind).sort()).toEqual(['ConfigMap', 'ConfigMap', 'CronJob', 'Deployment', 'Namespace', 'PodDisruptionBudget']);
      for (const doc of docs) expect(validateManifest({ file: `${dir} ${doc.kind}`, doc }), `${doc.kind} ${doc.metadata.name}`).toEqual([]);
      const http = docs.find((d) => d.metadata.name === 'cluster-cron-config')!.data.SCHEDULER_HTTP;
      const probes = Object.keys(docs.find((d) => d.kind === 'Deployment')!.spec.template.spec.containers[0]).filter((k) => /Probe$/.test(k));
      if (dir === OVERLAY) {
        expect(http).toBe('off');
        expect(probes).toEqual([]);
      } else {
        expect(http).toBe('0.0.0.0:9464');
        expect(probes).toHaveLength(3);
      }
    }
  });

  it('bin/scheduler validate accepts the shipped job files with the pods\' settings (ConfigMap, example Secret, env)', async () => {
    for (const [pod, kind] of [[daemonPod, 'run'], [passPod, 'run-once']] as const) {
      const env: Record<string, string> = { ...settings.data, ...secret.stringData, SCHEDULER_JOBS_DIR: jobsDir };
      for (const e of container(pod).env) env[e.name] = e.value ?? 'cluster-cron-abc12';
      const r = await runCli(['validate', '--json'], { env, cwd: tmp });
      expect(r.stderr, kind).toBe('');
      expect(r.code, kind).toBe(0);
      expect(JSON.parse(r.stdout), kind).toMatchObject({ valid: true, jobs: Object.keys(jobsMap.data).map((f) => f.replace(/\.[^.]+$/, '')) });
    }
  });
});
