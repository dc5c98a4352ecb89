/**
 * A strict reader of the Prometheus text exposition format 0.0.4, as a scraper checks it: it throws
 * on the first line Prometheus would refuse or misread (bad name, label or value syntax, a sample
 * before its family's TYPE, a family's samples split by another family, a duplicate series, a
 * histogram whose buckets decrease or whose +Inf bucket is not its _count). Returns each series'
 * value by its text key (`name{a="x",b="y"}` with the labels sorted), each series' family and labels
 * by the same key, and each family's type.
 */
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

export interface ParsedText {
  series: Map<string, number>;
  types: Map<string, string>;
  /** By series key: its family (a histogram's _bucket, _sum and _count are the histogram's) and labels. */
  samples: Map<string, { family: string; labels: Map<string, string> }>;
}

/** As Prometheus reads a value (Go's ParseFloat): NaN and Inf in any case (prom-client writes `Nan` for an empty event-loop histogram). */
function parseValue(text: string, line: number): number {
  const lower = text.toLowerCase();
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (lower === 'nan') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: bad value ${JSON.stringify(text)}`);
  return Number(text);
}

/** `{a="x",...}` from index `i` of `s` (at the brace): the labels and the index after the closing brace. */
function parseLabels(s: string, i: number, line: number): { labels: Map<string, string>; end: number } {
  const labels = new Map<string, string>();
  i += 1;
  while (s[i] !== '}') {
    const eq = s.indexOf('=', i);
    if (eq < 0) throw new Error(`line ${line}: label without '='`);
    const name = s.slice(i, eq);
    if (!LABEL.test(name)) throw new Error(`line ${line}: bad label name ${JSON.stringify(name)}`);
    if (labels.has(name)) throw new Error(`line ${line}: label ${name} twice`);
    if (s[eq + 1] !== '"') throw new Error(`line ${line}: label ${name} not quoted`);
    let value = '';
    let j = eq + 2;
    for (;; j++) {
      const c = s[j];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const n = s[++j];
        if (n === 'n') value += '\n';
        else if (n === '\\' || n === '"') value += n;
        else throw new Error(`line ${line}: bad escape \\${n}`);
      } else if (c === '\n') throw new Error(`line ${line}: raw line feed in a label value`);
      else value += c;
    }
    labels.set(name, value);
    i = j + 1;
    if (s[i] === ',') i += 1;
    else if (s[i] !== '}') throw new Error(`line ${line}: expected ',' or '}' after label ${name}`);
  }
  return { labels, end: i + 1 };
}

export function seriesKey(name: string, labels: Map<string, string>): string {
  const parts = [...labels].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  return parts.length ? `${name}{${parts.join(',')}}` : name;
}

/** The family a sample belongs to: a histogram's _bucket, _sum and _count are its own family's. */
function familyOf(name: string, types: Map<string, string>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      if (types.get(base) === 'histogram' || types.get(base) === 'summary') return base;
    }
  }
  return name;
}

export function parsePrometheusText(text: string): ParsedText {
  const series = new Map<string, number>();
  const types = new Map<string, string>();
  const samples = new Map<string, { family: string; labels: Map<string, string> }>();
  const done = new Set<string>();
  let current: string | null = null;
  const buckets = new Map<string, Array<{ le: number; value: number }>>();
  const counts = new Map<string, number>();
  if (!text.endsWith('\n')) throw new Error('the text does not end with a line feed');
  const lines = text.split('\n');
  lines.pop();
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(raw);
      if (!m) return; // Other comments are allowed.
      const [, kind, name, rest] = m as unknown as [string, string, string, string | undefined];
      if (!NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
      if (kind === 'TYPE') {
        if (!rest || !TYPES.has(rest)) throw new Error(`line ${line}: bad type ${rest}`);
        if (types.has(name)) throw new Error(`line ${line}: a second TYPE for ${name}`);
        if (done.has(name) || current === name) throw new Error(`line ${line}: TYPE of ${name} after its samples`);
        types.set(name, rest);
      }
      return;
    }
    const brace = raw.indexOf('{');
    const space = raw.indexOf(' ');
    const nameEnd = brace >= 0 && brace < space ? brace : space;
    if (nameEnd <= 0) throw new Error(`line ${line}: no value`);
    const name = raw.slice(0, nameEnd);
    if (!NAME.test(name)) throw new Error(`line ${line}: bad metric name ${JSON.stringify(name)}`);
    let labels = new Map<string, string>();
    let rest = raw.slice(nameEnd);
    if (rest.startsWith('{')) {
      const parsed = parseLabels(raw, nameEnd, line);
      labels = parsed.labels;
      rest = raw.slice(parsed.end);
    }
    const fields = rest.trim().split(/ +/);
    if (!rest.startsWith(' ') || fields.length < 1 || fields.length > 2) throw new Error(`line ${line}: expected ' value [timestamp]'`);
    const value = parseValue(fields[0]!, line);
    const family = familyOf(name, types);
    if (!types.has(family)) throw new Error(`line ${line}: sample of ${family} before its TYPE`);
    if (family !== current) {
      if (done.has(family)) throw new Error(`line ${line}: samples of ${family} split by another family`);
      if (current) done.add(current);
      current = family;
    }
    const key = seriesKey(name, labels);
    if (series.has(key)) throw new Error(`line ${line}: series ${key} twice`);
    series.set(key, value);
    samples.set(key, { family, labels });
    if (types.get(family) === 'histogram') {
      const others = new Map([...labels].filter(([k]) => k !== 'le'));
      const group = seriesKey(family, others);
      if (name === `${family}_bucket`) {
        const le = labels.get('le');
        if (le === undefined) throw new Error(`line ${line}: bucket without le`);
        const list = buckets.get(group) ?? [];
        list.push({ le: parseValue(le, line), value });
        buckets.set(group, list);
      } else if (name === `${family}_count`) counts.set(group, value);
    }
  });
  for (const [group, list] of buckets) {
    const sorted = [...list].sort((a, b) => a.le - b.le);
    for (let i = 1; i < sorted.length; i++) {
      if (sorted[i]!.value < sorted[i - 1]!.value) throw new Error(`${group}: bucket le=${sorted[i]!.le} below le=${sorted[i - 1]!.le}`);
    }
    const inf = sorted[sorted.length - 1]!;
    if (inf.le !== Infinity) throw new Error(`${group}: no +Inf bucket`);
    if (counts.get(group) !== inf.value) throw new Error(`${group}: _count ${counts.get(group)} is not the +Inf bucket ${inf.value}`);
  }
  return { series, types, samples };
}
