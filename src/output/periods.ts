/**
 * Runs as history shows them: newest first, but the rows of one period (its shards and their
 * attempts) together, where the period's newest row is, shard by shard (attempts newest first).
 */
export function adjacentPeriods<T extends { job: string; scheduledAt: Date | string; shard: number; attempt: number }>(runs: T[]): T[] {
  const groups = new Map<string, T[]>();
  for (const r of runs) {
    const key = `${r.job}@${typeof r.scheduledAt === 'string' ? r.scheduledAt : r.scheduledAt.toISOString()}`;
    const group = groups.get(key);
    if (group) group.push(r);
    else groups.set(key, [r]);
  }
  return [...groups.values()].flatMap((g) => (g.length === 1 ? g : [...g].sort((a, b) => a.shard - b.shard || b.attempt - a.attempt)));
}

/** A shard as the views show it: `2/4` (ctx.shard.index / count); '' for an unsharded job's row. */
export function shardText(shard: number, count: number | undefined): string {
  if (count !== undefined && count > 1) return `${shard}/${count}`;
  return shard > 0 ? String(shard) : '';
}
