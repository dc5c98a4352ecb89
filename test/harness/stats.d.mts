/** Types of test/harness/stats.mjs. */
export interface Summary {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}
export function percentile(sorted: number[], p: number): number;
export function summarise(values: Iterable<number>): Summary;
export function fmt(v: number, digits?: number): string;
export function table(rows: unknown[][]): string;
export function countBy(values: Iterable<string | number>): Record<string, number>;
