/** Judging the side effects of attemptJob bodies (job-sources.mjs): duplicates, overlaps, periods. */

/** Side effects grouped by period key, then by attempt. */
export function byPeriod(effects) {
  const out = new Map();
  for (const e of effects) {
    const attempts = out.get(e.key) ?? new Map();
    out.set(e.key, attempts);
    const list = attempts.get(e.attempt) ?? [];
    list.push(e);
    attempts.set(e.attempt, list);
  }
  return out;
}

/** Starts per `<key>#<attempt>` that occur more than once, and periods whose body started more than once in all. */
export function duplicates(effects) {
  const perAttempt = new Map();
  const perKey = new Map();
  for (const e of effects) {
    if (e.ev !== 'start') continue;
    const k = `${e.key}#${e.attempt}`;
    perAttempt.set(k, (perAttempt.get(k) ?? 0) + 1);
    perKey.set(e.key, (perKey.get(e.key) ?? 0) + 1);
  }
  return {
    sameAttempt: [...perAttempt].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`),
    samePeriod: [...perKey].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`),
  };
}

/** The (period, attempt) pairs whose body started more than once. */
export function duplicateStarts(effects) {
  return duplicates(effects).sameAttempt;
}

/**
 * Attempts of one period never overlapped: attempt n+1 started after attempt n ended or aborted, or
 * after its node was killed (`deaths`: node -> kill time). `pausedOk` lists attempts allowed to
 * overlap because their node was paused (they must have aborted with lease-lost).
 */
export function overlappingAttempts(effects, deaths, pausedOk = new Set()) {
  const problems = [];
  for (const [key, attempts] of byPeriod(effects)) {
    const numbers = [...attempts.keys()].sort((a, b) => a - b);
    for (let i = 1; i < numbers.length; i++) {
      const prev = attempts.get(numbers[i - 1]);
      const next = attempts.get(numbers[i]);
      const nextStart = next.find((e) => e.ev === 'start')?.t;
      if (nextStart === undefined) continue;
      const prevStart = prev.find((e) => e.ev === 'start');
      const prevEnd = prev.find((e) => e.ev === 'end' || e.ev === 'abort' || e.ev === 'fail');
      const tag = `${key}#${numbers[i - 1]}`;
      if (prevEnd && prevEnd.t <= nextStart) continue;
      if (!prevEnd && prevStart && deaths.has(prevStart.node) && deaths.get(prevStart.node) <= nextStart) continue;
      if (pausedOk.has(tag) && prevEnd?.ev === 'abort' && prevEnd.reason === 'lease-lost') continue;
      problems.push(`${tag} overlapped attempt ${numbers[i]} (prev end ${prevEnd?.t ?? 'none'}, next start ${nextStart})`);
    }
  }
  return problems;
}

/** Every whole-second period between two instants (exclusive bounds), as ISO strings. */
export function secondsBetween(fromMs, toMs, stepMs = 1000) {
  const out = [];
  for (let t = Math.ceil((fromMs + 1) / stepMs) * stepMs; t < toMs; t += stepMs) out.push(new Date(t).toISOString());
  return out;
}
