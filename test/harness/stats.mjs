/** Small statistics and a text table, for the benchmarks' reports. */

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarise(values) {
  const s = [...values].sort((a, b) => a - b);
  const sum = s.reduce((a, b) => a + b, 0);
  return {
    count: s.length,
    min: s[0] ?? NaN,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    max: s[s.length - 1] ?? NaN,
    mean: s.length ? sum / s.length : NaN,
  };
}

export const fmt = (v, digits = 1) => (Number.isFinite(v) ? v.toFixed(digits) : '-');

/** Rows of cells as aligned columns: the first left-aligned, the others right-aligned. */
export function table(rows) {
  if (rows.length === 0) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => {
    const s = String(c ?? '');
    return i === 0 ? s.padEnd(widths[i]) : s.padStart(widths[i]);
  }).join('  ')).join('\n');
}

/** How many times each value occurs. */
export function countBy(values) {
  const out = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
