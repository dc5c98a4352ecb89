/**
 * Period math: the instants every node derives for a job, and their keys. DST behaviour is checked
 * against an independent enumeration (walk minute by minute in UTC, format each instant in the zone
 * with Intl, keep those whose wall time matches), never only against croner itself.
 */
import { describe, expect, it } from 'vitest';
import {
  compileSchedule,
  NICKNAMES,
  describePeriods,
  expandNickname,
  formatLocal,
  isPeriod,
  isValidTimezone,
  latestPeriodAtOrBefore,
  nextPeriodAfter,
  nextPeriods,
  periodKey,
  periodsBetween,
  utcOffset,
  type Schedule,
} from '../../src/time/schedule.js';

const iso = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);
const at = (s: string): Date => new Date(s);

// ---------------------------------------------------------------------------------------------
// The independent enumeration.

interface Wall {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

const wallFormats = new Map<string, Intl.DateTimeFormat>();
function wallTime(instantMs: number, timezone: string): Wall {
  let fmt = wallFormats.get(timezone);
  if (!fmt) {
    fmt = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone, hourCycle: 'h23',
      year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric',
    });
    wallFormats.set(timezone, fmt);
  }
  const parts = Object.fromEntries(fmt.formatToParts(new Date(instantMs)).map((p) => [p.type, p.value]));
  return {
    year: Number(parts.year), month: Number(parts.month), day: Number(parts.day),
    hour: Number(parts.hour), minute: Number(parts.minute),
  };
}

/** Every whole-minute UTC instant in [fromIso, toIso) whose wall time in the zone satisfies `match`. */
function enumerate(timezone: string, fromIso: string, toIso: string, match: (w: Wall) => boolean): string[] {
  const out: string[] = [];
  const end = Date.parse(toIso);
  for (let t = Date.parse(fromIso); t < end; t += 60_000) {
    if (match(wallTime(t, timezone))) out.push(new Date(t).toISOString());
  }
  return out;
}

/** What our functions yield in [fromIso, toIso), by two routes that must agree. */
function ours(schedule: Schedule, fromIso: string, toIso: string): string[] {
  const from = at(fromIso);
  const toInclusive = new Date(Date.parse(toIso) - 1);
  const between = periodsBetween(schedule, new Date(from.getTime() - 1), toInclusive).map((d) => d.toISOString());
  const walked: string[] = [];
  let cursor = nextPeriodAfter(schedule, new Date(from.getTime() - 1));
  while (cursor && cursor.getTime() < Date.parse(toIso)) {
    walked.push(cursor.toISOString());
    cursor = nextPeriodAfter(schedule, cursor);
  }
  expect(walked, 'nextPeriodAfter and periodsBetween disagree').toEqual(between);
  for (const p of between) expect(isPeriod(schedule, at(p)), `isPeriod(${p})`).toBe(true);
  return between;
}

// ---------------------------------------------------------------------------------------------

describe('compileSchedule: accepted expressions', () => {
  it('accepts a 5-field expression (minute hour day month weekday)', () => {
    const s = compileSchedule('0 2 * * *', 'UTC');
    expect(s.expression).toBe('0 2 * * *');
    expect(s.timezone).toBe('UTC');
    expect(iso(nextPeriodAfter(s, at('2026-05-10T12:00:00Z')))).toBe('2026-05-11T02:00:00.000Z');
  });

  it('accepts a 6-field expression with seconds first', () => {
    const s = compileSchedule('*/10 * * * * *', 'UTC');
    expect(nextPeriods(s, at('2026-05-10T12:00:03Z'), 3).map(iso)).toEqual([
      '2026-05-10T12:00:10.000Z', '2026-05-10T12:00:20.000Z', '2026-05-10T12:00:30.000Z',
    ]);
    const daily = compileSchedule('0 0 2 * * *', 'Asia/Shanghai');
    // 02:00 in Shanghai (UTC+8) is 18:00 UTC the day before.
    expect(iso(nextPeriodAfter(daily, at('2026-11-30T00:00:00Z')))).toBe('2026-11-30T18:00:00.000Z');
  });

  it('tolerates surrounding and repeated white space', () => {
    const s = compileSchedule('  0   2 * *  * ', 'UTC');
    expect(iso(nextPeriodAfter(s, at('2026-05-10T12:00:00Z')))).toBe('2026-05-11T02:00:00.000Z');
  });

  it('ORs day-of-month and day-of-week (Vixie cron), as croner documents', () => {
    // The 1st of the month OR a Monday. 2026-06-01 is a Monday; 2026-06-08 the next Monday.
    const s = compileSchedule('0 0 1 * MON', 'UTC');
    expect(nextPeriods(s, at('2026-05-30T00:00:00Z'), 3).map(iso)).toEqual([
      '2026-06-01T00:00:00.000Z', '2026-06-08T00:00:00.000Z', '2026-06-15T00:00:00.000Z',
    ]);
  });

  it('computes periods in the job zone: a 09:00 Europe/Berlin job is 07:00Z in summer, 08:00Z in winter', () => {
    const s = compileSchedule('0 9 * * *', 'Europe/Berlin');
    expect(iso(nextPeriodAfter(s, at('2026-07-01T00:00:00Z')))).toBe('2026-07-01T07:00:00.000Z');
    expect(iso(nextPeriodAfter(s, at('2026-12-01T00:00:00Z')))).toBe('2026-12-01T08:00:00.000Z');
  });
});

describe('compileSchedule: nicknames', () => {
  const meaning: Array<[string, string]> = [
    ['@yearly', '0 0 1 1 *'], ['@annually', '0 0 1 1 *'], ['@monthly', '0 0 1 * *'], ['@weekly', '0 0 * * 0'],
    ['@daily', '0 0 * * *'], ['@midnight', '0 0 * * *'], ['@hourly', '0 * * * *'],
  ];

  it('knows exactly the Vixie cron nicknames but @reboot', () => {
    expect(Object.entries(NICKNAMES).sort()).toEqual([...meaning].sort());
  });

  for (const [nickname, expression] of meaning) {
    it(`${nickname} yields the periods of '${expression}' (in Europe/Berlin, across the spring-forward)`, () => {
      const s = compileSchedule(nickname, 'Europe/Berlin');
      expect(s.expression).toBe(nickname);
      expect(expandNickname(nickname)).toBe(expression);
      const from = at('2026-03-20T00:00:00Z');
      const ours = nextPeriods(s, from, 40).map(iso);
      expect(ours).toEqual(nextPeriods(compileSchedule(expression, 'Europe/Berlin'), from, 40).map(iso));
      for (const p of ours) expect(isPeriod(s, at(p!))).toBe(true);
    });
  }

  it('reads them in the job zone: @daily in New York is 05:00Z in winter, 04:00Z in summer; @weekly is Sunday', () => {
    expect(iso(nextPeriodAfter(compileSchedule('@daily', 'America/New_York'), at('2026-01-10T12:00:00Z')))).toBe('2026-01-11T05:00:00.000Z');
    expect(iso(nextPeriodAfter(compileSchedule('@midnight', 'America/New_York'), at('2026-07-10T12:00:00Z')))).toBe('2026-07-11T04:00:00.000Z');
    const weekly = nextPeriods(compileSchedule('@weekly', 'UTC'), at('2026-12-01T00:00:00Z'), 3).map(iso);
    expect(weekly).toEqual(['2026-12-06T00:00:00.000Z', '2026-12-13T00:00:00.000Z', '2026-12-20T00:00:00.000Z']);
    expect(iso(nextPeriodAfter(compileSchedule('@yearly', 'Asia/Shanghai'), at('2026-06-01T00:00:00Z')))).toBe('2026-12-31T16:00:00.000Z');
    expect(iso(nextPeriodAfter(compileSchedule('@hourly', 'Asia/Kolkata'), at('2026-06-01T00:00:00Z')))).toBe('2026-06-01T00:30:00.000Z');
  });

  it('are matched case-insensitively and with surrounding white space, like croner does', () => {
    expect(nextPeriods(compileSchedule(' @DAILY ', 'UTC'), at('2026-01-01T12:00:00Z'), 2).map(iso)).toEqual(['2026-01-02T00:00:00.000Z', '2026-01-03T00:00:00.000Z']);
  });

  it('refuses unknown ones, @reboot, and a nickname with anything after it, naming the known nicknames', () => {
    expect(() => compileSchedule('@sometimes', 'UTC')).toThrow(/^unknown nickname '@sometimes'; the nicknames are @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly$/);
    expect(() => compileSchedule('@reboot', 'UTC')).toThrow(/@reboot is not supported/);
    expect(() => compileSchedule('@daily 0', 'UTC')).toThrow(/unknown nickname '@daily 0'/);
    expect(() => compileSchedule('@', 'UTC')).toThrow(/unknown nickname '@'/);
    expect(expandNickname('@sometimes')).toBeUndefined();
    expect(expandNickname('0 0 * * *')).toBeUndefined();
    expect(expandNickname('@constructor')).toBeUndefined();
  });
});

describe('describePeriods from a given instant (next --from)', () => {
  it('starts strictly after the instant, and flags a DST change between the instant and the first period', () => {
    const s = compileSchedule('0 2 * * *', 'Europe/Berlin');
    const views = describePeriods(s, at('2026-03-28T01:00:00Z'), 2);
    // 28 March 02:00 CET is exactly the instant: not included. 29 March 02:00 does not exist: 03:00 CEST.
    expect(views).toEqual([
      { utc: '2026-03-29T01:00:00.000Z', local: '2026-03-29T03:00:00+02:00', dst: 'UTC offset +01:00 -> +02:00' },
      { utc: '2026-03-30T00:00:00.000Z', local: '2026-03-30T02:00:00+02:00' },
    ]);
  });

  it('each local time equals formatLocal, in zones with DST, half-hour and quarter-hour offsets and LMT offsets with seconds (Monrovia until 1972, Amsterdam until 1937)', () => {
    for (const zone of ['America/New_York', 'Europe/Berlin', 'Asia/Kolkata', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'Africa/Monrovia', 'Europe/Amsterdam', 'America/St_Johns', 'UTC']) {
      for (const [expr, from] of [['0 */7 * * *', '1930-01-01T00:00:00Z'], ['*/13 * * * *', '1971-12-31T00:00:00Z'], ['0 30 1,2,3 * * *', '2026-03-01T00:00:00Z']] as const) {
        for (const v of describePeriods(compileSchedule(expr, zone), at(from), 150)) expect(v.local, `${zone} ${expr} ${v.utc}`).toBe(formatLocal(new Date(v.utc), zone));
      }
    }
  });

  // 20,000 in a zone with DST (croner takes about 120 us a period there: the CLI's 100,000 are
  // checked in UTC by the cli tests); the local time of each is formatLocal's.
  it('gives 20000 periods of an every-second job in order, one second apart, across a fall-back', () => {
    const views = describePeriods(compileSchedule('* * * * * *', 'America/New_York'), at('2026-11-01T05:00:00.500Z'), 20_000);
    expect(views).toHaveLength(20_000);
    expect(views[0]!.utc).toBe('2026-11-01T05:00:01.000Z');
    expect(views.at(-1)!.utc).toBe(new Date(Date.parse('2026-11-01T05:00:01.000Z') + 19_999_000).toISOString());
    for (let i = 0; i < views.length; i += 97) expect(views[i]!.local).toBe(formatLocal(new Date(views[i]!.utc), 'America/New_York'));
    for (let i = 1; i < views.length; i++) {
      if (Date.parse(views[i]!.utc) - Date.parse(views[i - 1]!.utc) !== 1000) throw new Error(`not one second apart at ${i}: ${views[i - 1]!.utc} ${views[i]!.utc}`);
    }
    // The fall-back (06:00Z, 02:00 EDT -> 01:00 EST) is flagged once.
    expect(views.filter((v) => v.dst).map((v) => [v.utc, v.dst])).toEqual([['2026-11-01T06:00:00.000Z', 'UTC offset -04:00 -> -05:00']]);
  }, 60_000);
});

describe('compileSchedule: rejected expressions say what is wrong', () => {
  const cases: Array<[string, string, string, RegExp]> = [
    ['a non-cron text', 'not a cron', 'UTC', /expected 5 fields .* or 6 .*got 3/],
    ['an empty expression', '', 'UTC', /expected 5 fields/],
    ['4 fields', '* * * *', 'UTC', /expected 5 fields .*got 4/],
    ['7 fields', '0 0 0 * * * *', 'UTC', /expected 5 fields .* or 6 \(seconds first\), got 7/],
    ['a minute out of range', '61 * * * *', 'UTC', /minute.*61|61.*minute/i],
    ['an hour out of range', '0 25 * * *', 'UTC', /hour.*25|25.*hour/i],
    ['an impossible date (31 February)', '0 0 31 2 *', 'UTC', /never matches/],
    ['an impossible date (30 February)', '0 0 30 2 *', 'UTC', /never matches/],
    ['an unknown time zone', '0 0 * * *', 'Mars/Olympus', /unknown time zone 'Mars\/Olympus'/],
    ['an empty time zone', '0 0 * * *', '', /unknown time zone/],
  ];
  for (const [what, expression, zone, message] of cases) {
    it(`rejects ${what}: ${JSON.stringify(expression)} in ${JSON.stringify(zone)}`, () => {
      expect(() => compileSchedule(expression, zone)).toThrow(message);
    });
  }

  it('does not leak croner prefixes into the message', () => {
    let message = '';
    try {
      compileSchedule('61 * * * *', 'UTC');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).not.toMatch(/^CronPattern/);
    expect(message).not.toBe('');
  });

  it('accepts the 29th of February (a leap day exists)', () => {
    const s = compileSchedule('0 0 29 2 *', 'UTC');
    expect(iso(nextPeriodAfter(s, at('2026-01-01T00:00:00Z')))).toBe('2028-02-29T00:00:00.000Z');
  });
});

describe('isValidTimezone', () => {
  it('knows IANA zones and refuses made-up ones', () => {
    expect(isValidTimezone('UTC')).toBe(true);
    expect(isValidTimezone('America/New_York')).toBe(true);
    expect(isValidTimezone('Europe/Berlin')).toBe(true);
    expect(isValidTimezone('Mars/Olympus')).toBe(false);
    expect(isValidTimezone('')).toBe(false);
  });
});

describe('latestPeriodAtOrBefore / nextPeriodAfter / periodsBetween', () => {
  const every5 = compileSchedule('*/5 * * * *', 'UTC');

  it('includes the instant itself when it is a period', () => {
    expect(iso(latestPeriodAtOrBefore(every5, at('2026-04-01T10:05:00.000Z')))).toBe('2026-04-01T10:05:00.000Z');
  });

  it('returns the previous period for an instant one millisecond before a period', () => {
    expect(iso(latestPeriodAtOrBefore(every5, at('2026-04-01T10:04:59.999Z')))).toBe('2026-04-01T10:00:00.000Z');
  });

  it('returns the period for an instant just after it (a late timer gives the same period)', () => {
    expect(iso(latestPeriodAtOrBefore(every5, at('2026-04-01T10:05:00.001Z')))).toBe('2026-04-01T10:05:00.000Z');
    expect(iso(latestPeriodAtOrBefore(every5, at('2026-04-01T10:09:59.999Z')))).toBe('2026-04-01T10:05:00.000Z');
  });

  it('yields whole-second instants for 6-field expressions', () => {
    const s = compileSchedule('*/10 * * * * *', 'UTC');
    expect(iso(latestPeriodAtOrBefore(s, at('2026-04-01T10:00:17.345Z')))).toBe('2026-04-01T10:00:10.000Z');
    expect(iso(latestPeriodAtOrBefore(s, at('2026-04-01T10:00:20.000Z')))).toBe('2026-04-01T10:00:20.000Z');
  });

  it('nextPeriodAfter is strictly after its argument', () => {
    expect(iso(nextPeriodAfter(every5, at('2026-04-01T10:05:00.000Z')))).toBe('2026-04-01T10:10:00.000Z');
  });

  it('periodsBetween is (from, to], oldest first, and keeps the latest ones past the limit', () => {
    const from = at('2026-04-01T10:00:00.000Z');
    const to = at('2026-04-01T10:20:00.000Z');
    expect(periodsBetween(every5, from, to).map(iso)).toEqual([
      '2026-04-01T10:05:00.000Z', '2026-04-01T10:10:00.000Z', '2026-04-01T10:15:00.000Z', '2026-04-01T10:20:00.000Z',
    ]);
    expect(periodsBetween(every5, from, to, 2).map(iso)).toEqual(['2026-04-01T10:15:00.000Z', '2026-04-01T10:20:00.000Z']);
    expect(periodsBetween(every5, to, to)).toEqual([]);
  });

  it('isPeriod is true only on the instants of the expression', () => {
    expect(isPeriod(every5, at('2026-04-01T10:05:00.000Z'))).toBe(true);
    expect(isPeriod(every5, at('2026-04-01T10:05:00.001Z'))).toBe(false);
    expect(isPeriod(every5, at('2026-04-01T10:06:00.000Z'))).toBe(false);
  });

  it('gives every node the same period whatever moment its timer fired', () => {
    const s = compileSchedule('0 2 * * *', 'Asia/Shanghai');
    const fired = ['2026-11-30T18:00:00.000Z', '2026-11-30T18:00:00.004Z', '2026-11-30T18:00:01.250Z', '2026-11-30T18:03:00.000Z'];
    const keys = fired.map((f) => periodKey('nightly-report', latestPeriodAtOrBefore(s, at(f))!));
    expect(new Set(keys)).toEqual(new Set(['nightly-report@2026-11-30T18:00:00.000Z']));
  });
});

describe('periodKey', () => {
  it('is <job>@<ISO-8601 UTC instant with milliseconds>', () => {
    expect(periodKey('nightly-report', at('2026-11-30T18:00:00Z'))).toBe('nightly-report@2026-11-30T18:00:00.000Z');
  });

  it('is in UTC whatever zone the instant was written in', () => {
    expect(periodKey('job', at('2026-12-01T02:00:00+08:00'))).toBe('job@2026-11-30T18:00:00.000Z');
  });
});

// ---------------------------------------------------------------------------------------------
// DST. 2026 transitions:
//   America/New_York: spring forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z);
//                     fall back     2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
//   Europe/Berlin:    spring forward 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z);
//                     fall back     2026-10-25 03:00 CEST -> 02:00 CET (01:00Z).

interface Transition {
  zone: string;
  kind: 'spring-forward' | 'fall-back';
  /** A window of three UTC days around the transition. */
  from: string;
  to: string;
  /** The instant the offset changes. */
  change: string;
  before: string;
  after: string;
}

const TRANSITIONS: Transition[] = [
  { zone: 'America/New_York', kind: 'spring-forward', from: '2026-03-07T00:00:00Z', to: '2026-03-10T00:00:00Z', change: '2026-03-08T07:00:00.000Z', before: '-05:00', after: '-04:00' },
  { zone: 'America/New_York', kind: 'fall-back', from: '2026-10-31T00:00:00Z', to: '2026-11-03T00:00:00Z', change: '2026-11-01T06:00:00.000Z', before: '-04:00', after: '-05:00' },
  { zone: 'Europe/Berlin', kind: 'spring-forward', from: '2026-03-28T00:00:00Z', to: '2026-03-31T00:00:00Z', change: '2026-03-29T01:00:00.000Z', before: '+01:00', after: '+02:00' },
  { zone: 'Europe/Berlin', kind: 'fall-back', from: '2026-10-24T00:00:00Z', to: '2026-10-27T00:00:00Z', change: '2026-10-25T01:00:00.000Z', before: '+02:00', after: '+01:00' },
];

describe('DST: the reference data of these tests is what we think it is', () => {
  for (const t of TRANSITIONS) {
    it(`${t.zone} ${t.kind}: offset ${t.before} -> ${t.after} at ${t.change}`, () => {
      expect(utcOffset(new Date(Date.parse(t.change) - 1), t.zone)).toBe(t.before);
      expect(utcOffset(at(t.change), t.zone)).toBe(t.after);
    });
  }
});

describe('DST: interval expressions yield exactly the independently enumerated instants', () => {
  const expressions: Array<[string, (w: Wall) => boolean]> = [
    ['30 * * * *', (w) => w.minute === 30],
    ['0 * * * *', (w) => w.minute === 0],
    ['*/15 * * * *', (w) => w.minute % 15 === 0],
    ['0 0 * * * *', (w) => w.minute === 0], // 6 fields, seconds first
  ];
  for (const t of TRANSITIONS) {
    for (const [expression, match] of expressions) {
      it(`${t.zone} ${t.kind}: '${expression}' equals the minute-by-minute walk`, () => {
        const expected = enumerate(t.zone, t.from, t.to, match);
        expect(expected.length).toBeGreaterThan(0);
        expect(ours(compileSchedule(expression, t.zone), t.from, t.to)).toEqual(expected);
      });
    }
  }

  it("America/New_York fall-back: '30 * * * *' runs at both 01:30s (EDT 05:30Z and EST 06:30Z)", () => {
    const s = compileSchedule('30 * * * *', 'America/New_York');
    const day = ours(s, '2026-11-01T04:00:00Z', '2026-11-01T08:00:00Z');
    expect(day).toEqual(['2026-11-01T04:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-01T07:30:00.000Z']);
    expect(day.map((p) => formatLocal(at(p), 'America/New_York'))).toEqual([
      '2026-11-01T00:30:00-04:00', '2026-11-01T01:30:00-04:00', '2026-11-01T01:30:00-05:00', '2026-11-01T02:30:00-05:00',
    ]);
  });

  it("America/New_York spring-forward: '30 * * * *' has no 02:30 and no extra run (01:30 EST then 03:30 EDT)", () => {
    const s = compileSchedule('30 * * * *', 'America/New_York');
    expect(ours(s, '2026-03-08T06:00:00Z', '2026-03-08T08:00:00Z')).toEqual(['2026-03-08T06:30:00.000Z', '2026-03-08T07:30:00.000Z']);
  });

  it("Europe/Berlin fall-back: '30 * * * *' runs at both 02:30s (CEST 00:30Z and CET 01:30Z)", () => {
    const s = compileSchedule('30 * * * *', 'Europe/Berlin');
    const day = ours(s, '2026-10-25T00:00:00Z', '2026-10-25T02:00:00Z');
    expect(day.map((p) => formatLocal(at(p), 'Europe/Berlin'))).toEqual(['2026-10-25T02:30:00+02:00', '2026-10-25T02:30:00+01:00']);
  });
});

describe('DST: fixed-time daily jobs', () => {
  /** Daily periods we yield compared with the walk, in the transition window. */
  function daily(zone: string, expression: string, hour: number, minute: number, t: Transition) {
    return {
      walk: enumerate(zone, t.from, t.to, (w) => w.hour === hour && w.minute === minute),
      ours: ours(compileSchedule(expression, zone), t.from, t.to),
    };
  }
  const find = (zone: string, kind: Transition['kind']) => TRANSITIONS.find((t) => t.zone === zone && t.kind === kind)!;

  it('America/New_York spring-forward gap rule: a 02:30 daily job runs at 03:00 EDT (the end of the gap) that day', () => {
    const t = find('America/New_York', 'spring-forward');
    const r = daily(t.zone, '30 2 * * *', 2, 30, t);
    // The walk has no 02:30 on 2026-03-08: the wall clock skips it.
    expect(r.walk).toEqual(['2026-03-07T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
    expect(r.ours).toEqual(['2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z']);
    expect(formatLocal(at('2026-03-08T07:00:00.000Z'), t.zone)).toBe('2026-03-08T03:00:00-04:00');
    // Exactly one extra instant, and it is the moment the offset changed.
    expect(r.ours.filter((p) => !r.walk.includes(p))).toEqual([t.change]);
  });

  it('Europe/Berlin spring-forward gap rule: a 02:30 daily job runs at 03:00 CEST (the end of the gap) that day', () => {
    const t = find('Europe/Berlin', 'spring-forward');
    const r = daily(t.zone, '30 2 * * *', 2, 30, t);
    expect(r.walk).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-30T00:30:00.000Z']);
    expect(r.ours).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
    expect(formatLocal(at('2026-03-29T01:00:00.000Z'), t.zone)).toBe('2026-03-29T03:00:00+02:00');
    expect(r.ours.filter((p) => !r.walk.includes(p))).toEqual([t.change]);
  });

  it('gap rule with seconds: a 6-field 02:30:00 New York job also runs at 03:00 EDT on the spring-forward day', () => {
    const t = find('America/New_York', 'spring-forward');
    expect(ours(compileSchedule('0 30 2 * * *', t.zone), t.from, t.to)).toEqual([
      '2026-03-07T07:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-09T06:30:00.000Z',
    ]);
  });

  it('a daily job outside the gap is unaffected on the spring-forward day (01:30 New York: walk and ours agree)', () => {
    const t = find('America/New_York', 'spring-forward');
    const r = daily(t.zone, '30 1 * * *', 1, 30, t);
    expect(r.ours).toEqual(r.walk);
    expect(r.ours).toHaveLength(3);
  });

  it('America/New_York fall-back overlap rule: a 01:30 daily job runs once, at the first 01:30 (EDT)', () => {
    const t = find('America/New_York', 'fall-back');
    const r = daily(t.zone, '30 1 * * *', 1, 30, t);
    // The wall clock shows 01:30 twice on 2026-11-01 (EDT 05:30Z, then EST 06:30Z).
    expect(r.walk).toEqual(['2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-02T06:30:00.000Z']);
    expect(r.ours).toEqual(['2026-10-31T05:30:00.000Z', '2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']);
    expect(formatLocal(at('2026-11-01T05:30:00.000Z'), t.zone)).toBe('2026-11-01T01:30:00-04:00');
    expect(r.walk.filter((p) => !r.ours.includes(p))).toEqual(['2026-11-01T06:30:00.000Z']);
  });

  it('Europe/Berlin fall-back overlap rule: a 02:30 daily job runs once, at the first 02:30 (CEST)', () => {
    const t = find('Europe/Berlin', 'fall-back');
    const r = daily(t.zone, '30 2 * * *', 2, 30, t);
    expect(r.walk).toEqual(['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-25T01:30:00.000Z', '2026-10-26T01:30:00.000Z']);
    expect(r.ours).toEqual(['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
    expect(formatLocal(at('2026-10-25T00:30:00.000Z'), t.zone)).toBe('2026-10-25T02:30:00+02:00');
  });

  it('every daily period lies on a distinct local date across all four transitions (no day runs twice or is skipped)', () => {
    for (const t of TRANSITIONS) {
      for (const [expression, zone] of [['30 2 * * *', t.zone], ['30 1 * * *', t.zone]] as const) {
        const periods = ours(compileSchedule(expression, zone), t.from, t.to);
        const dates = periods.map((p) => formatLocal(at(p), zone).slice(0, 10));
        expect(new Set(dates).size, `${zone} ${expression}: ${periods.join(', ')}`).toBe(dates.length);
        for (let i = 1; i < dates.length; i++) {
          const gapDays = (Date.parse(dates[i]!) - Date.parse(dates[i - 1]!)) / 86_400_000;
          expect(gapDays, `${zone} ${expression}: ${dates.join(', ')}`).toBe(1);
        }
      }
    }
  });

  it('the period instants are monotonic across a transition (next after a period is later)', () => {
    for (const t of TRANSITIONS) {
      const s = compileSchedule('30 2 * * *', t.zone);
      let cursor: Date | null = at(t.from);
      for (let i = 0; i < 4; i++) {
        const next: Date | null = nextPeriodAfter(s, cursor!);
        expect(next!.getTime()).toBeGreaterThan(cursor!.getTime());
        cursor = next;
      }
    }
  });
});

describe('formatLocal and utcOffset', () => {
  it('formats YYYY-MM-DDTHH:mm:ss±hh:mm in the zone', () => {
    expect(formatLocal(at('2026-11-30T18:00:00Z'), 'Asia/Shanghai')).toBe('2026-12-01T02:00:00+08:00');
    expect(formatLocal(at('2026-07-01T04:05:06Z'), 'America/New_York')).toBe('2026-07-01T00:05:06-04:00');
    expect(formatLocal(at('2026-01-01T00:00:00Z'), 'UTC')).toBe('2026-01-01T00:00:00+00:00');
    expect(formatLocal(at('2026-01-01T00:00:00Z'), 'Asia/Kolkata')).toBe('2026-01-01T05:30:00+05:30');
  });

  it('prints midnight as 00, never 24', () => {
    expect(formatLocal(at('2026-05-01T22:00:00Z'), 'Europe/Berlin')).toBe('2026-05-02T00:00:00+02:00');
  });
});

describe('describePeriods', () => {
  const LOCAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$/;

  it('gives utc (ISO) and local (YYYY-MM-DDTHH:mm:ss±hh:mm) for each of the next periods', () => {
    const views = describePeriods(compileSchedule('0 2 * * *', 'Asia/Shanghai'), at('2026-11-30T00:00:00Z'), 3);
    expect(views).toEqual([
      { utc: '2026-11-30T18:00:00.000Z', local: '2026-12-01T02:00:00+08:00' },
      { utc: '2026-12-01T18:00:00.000Z', local: '2026-12-02T02:00:00+08:00' },
      { utc: '2026-12-02T18:00:00.000Z', local: '2026-12-03T02:00:00+08:00' },
    ]);
    for (const v of views) expect(v.local).toMatch(LOCAL);
  });

  it('flags dst exactly on the first period after a spring-forward (New York, daily 02:30)', () => {
    const views = describePeriods(compileSchedule('30 2 * * *', 'America/New_York'), at('2026-03-05T12:00:00Z'), 5);
    expect(views.map((v) => v.local)).toEqual([
      '2026-03-06T02:30:00-05:00', '2026-03-07T02:30:00-05:00', '2026-03-08T03:00:00-04:00', '2026-03-09T02:30:00-04:00', '2026-03-10T02:30:00-04:00',
    ]);
    expect(views.map((v) => v.dst !== undefined)).toEqual([false, false, true, false, false]);
    expect(views[2]!.dst).toContain('-05:00');
    expect(views[2]!.dst).toContain('-04:00');
  });

  it('flags dst exactly on the first period after a fall-back (New York, hourly :30, the second 01:30)', () => {
    const views = describePeriods(compileSchedule('30 * * * *', 'America/New_York'), at('2026-11-01T04:00:00Z'), 4);
    expect(views.map((v) => v.local)).toEqual([
      '2026-11-01T00:30:00-04:00', '2026-11-01T01:30:00-04:00', '2026-11-01T01:30:00-05:00', '2026-11-01T02:30:00-05:00',
    ]);
    expect(views.map((v) => v.dst !== undefined)).toEqual([false, false, true, false]);
  });

  it('flags dst in Europe/Berlin on both transitions', () => {
    const spring = describePeriods(compileSchedule('0 12 * * *', 'Europe/Berlin'), at('2026-03-27T12:00:00Z'), 4);
    expect(spring.map((v) => v.local)).toEqual([
      '2026-03-28T12:00:00+01:00', '2026-03-29T12:00:00+02:00', '2026-03-30T12:00:00+02:00', '2026-03-31T12:00:00+02:00',
    ]);
    expect(spring.map((v) => v.dst !== undefined)).toEqual([false, true, false, false]);
    const fall = describePeriods(compileSchedule('0 12 * * *', 'Europe/Berlin'), at('2026-10-23T00:00:00Z'), 4);
    expect(fall.map((v) => v.dst !== undefined)).toEqual([false, false, true, false]);
    expect(fall[2]!.local).toBe('2026-10-25T12:00:00+01:00');
  });

  it('flags the very first period when the offset changed since the previous period', () => {
    // Asked just before the 2026-03-08 03:00 EDT period: the last period was -05:00.
    const views = describePeriods(compileSchedule('30 2 * * *', 'America/New_York'), at('2026-03-08T06:59:00Z'), 2);
    expect(views[0]!.local).toBe('2026-03-08T03:00:00-04:00');
    expect(views[0]!.dst).toBeDefined();
    expect(views[1]!.dst).toBeUndefined();
  });

  it('does not flag anything when no transition lies between the periods', () => {
    const views = describePeriods(compileSchedule('30 2 * * *', 'America/New_York'), at('2026-03-08T08:00:00Z'), 5);
    expect(views.every((v) => v.dst === undefined)).toBe(true);
    const utc = describePeriods(compileSchedule('*/15 * * * *', 'UTC'), at('2026-03-29T00:00:00Z'), 10);
    expect(utc.every((v) => v.dst === undefined)).toBe(true);
  });
});

describe('nextPeriodAfter answers from the spans of periods it keeps: the same instants as croner, asked afresh', () => {
  it('random and creeping references over schedules with seconds, DST zones, yearly and sparse ones', () => {
    const seed = Number(process.env.SCHEDULE_SEED ?? Date.now() % 100_000);
    let state = seed;
    const random = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const cases: Array<[string, string]> = [
      ['* * * * * *', 'UTC'], ['*/7 * * * * *', 'UTC'], ['0 30 2 * * *', 'Europe/Berlin'], ['0 0 1 1 *', 'Asia/Shanghai'],
      ['0 0 29 2 *', 'UTC'], ['0 30 1 * * 0', 'America/New_York'], ['@hourly', 'Australia/Lord_Howe'],
    ];
    const start = Date.UTC(2026, 2, 1);
    for (const [expression, zone] of cases) {
      const memo = compileSchedule(expression, zone);
      const fresh = () => compileSchedule(expression, zone).cron;
      const oracle = fresh();
      let at = start;
      for (let i = 0; i < 400; i++) {
        // Mostly creeping forward (as the sweeps do), sometimes a jump back or far ahead.
        const r = random();
        at = r < 0.7 ? at + Math.floor(random() * 3_000) : r < 0.85 ? at - Math.floor(random() * 86_400_000) : at + Math.floor(random() * 400 * 86_400_000);
        const got = nextPeriodAfter(memo, new Date(at));
        const want = oracle.nextRun(new Date(at));
        expect(got?.toISOString() ?? null, `${expression} ${zone} after ${new Date(at).toISOString()} (seed ${seed})`).toBe(want?.toISOString() ?? null);
      }
    }
  });
});
