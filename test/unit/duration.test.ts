/** Durations: a number of milliseconds or a string such as `500ms`, `30s`, `10m`, `1h30m`, `1d`. */
import { describe, expect, it } from 'vitest';
import { DURATION_EXPECTED, formatDuration, parseDuration } from '../../src/time/duration.js';

describe('parseDuration: accepted values', () => {
  const cases: Array<[unknown, number]> = [
    ['500ms', 500],
    ['30s', 30_000],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['1h30m', 5_400_000],
    ['1d', 86_400_000],
    ['1d2h3m4s5ms', 86_400_000 + 2 * 3_600_000 + 3 * 60_000 + 4000 + 5],
    ['1.5s', 1500],
    ['0s', 0],
    [' 30s ', 30_000],
    ['1500', 1500],
    ['0', 0],
    [1500, 1500],
    [0, 0],
    [250.4, 250],
  ];
  for (const [input, ms] of cases) {
    it(`${JSON.stringify(input)} is ${ms} ms`, () => {
      expect(parseDuration(input)).toBe(ms);
    });
  }
});

describe('parseDuration: refused values', () => {
  const cases: Array<[string, unknown]> = [
    ["''", ''],
    ["'   '", '   '],
    ["'10x' (unknown unit)", '10x'],
    ["'-5s' (negative)", '-5s'],
    ["'m' (unit without number)", 'm'],
    ["'10' followed by garbage '10s!'", '10s!'],
    ["'30 s' (space inside)", '30 s'],
    ["'s30'", 's30'],
    ["'1e3'", '1e3'],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['-1 (negative number)', -1],
    ['-5000 (negative number)', -5000],
    ['an object', { ms: 500 }],
    ['an array', [500]],
    ['null', null],
    ['undefined', undefined],
    ['true', true],
  ];
  for (const [what, input] of cases) {
    it(`refuses ${what}`, () => {
      expect(parseDuration(input)).toBeUndefined();
    });
  }
});

describe('DURATION_EXPECTED', () => {
  it('tells the user the accepted forms', () => {
    for (const example of ['500ms', '30s', '10m', '1h30m', '1d']) expect(DURATION_EXPECTED).toContain(example);
    expect(DURATION_EXPECTED).toMatch(/milliseconds/);
  });
});

describe('formatDuration', () => {
  it('prints short human forms that parse back to the same value', () => {
    const cases: Array<[number, string]> = [
      [500, '500ms'], [30_000, '30s'], [90_000, '1m30s'], [5_400_000, '1h30m'], [86_400_000, '1d'], [1500, '1s500ms'],
    ];
    for (const [ms, text] of cases) {
      expect(formatDuration(ms)).toBe(text);
      expect(parseDuration(text)).toBe(ms);
    }
  });
});
