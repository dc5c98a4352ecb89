/** parseInstant: the ISO-8601 instants the command line takes (`next --from`). */
import { describe, expect, it } from 'vitest';
import { parseInstant } from '../../src/time/instant.js';

const iso = (text: string): string | undefined => parseInstant(text)?.toISOString();

describe('parseInstant', () => {
  it('reads a date and time with Z or an offset, with or without seconds and fractions', () => {
    expect(iso('2026-11-30T18:00:00.000Z')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-11-30T18:00:00Z')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-11-30T18:00Z')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-11-30t18:00:00z')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-11-30T19:00:00+01:00')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-11-30T13:30:00-0430')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-12-01T02:00+08')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2026-11-30T18:00:00.123456789Z')).toBe('2026-11-30T18:00:00.123Z');
    expect(iso('2026-11-30T18:00:00,5Z')).toBe('2026-11-30T18:00:00.500Z');
    expect(iso(' 2026-11-30T18:00:00Z ')).toBe('2026-11-30T18:00:00.000Z');
    expect(iso('2028-02-29T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z');
    expect(iso('0050-01-01T00:00:00Z')).toBe('0050-01-01T00:00:00.000Z');
  });

  const refused = [
    '', 'now', 'tomorrow', '1764525600000', '2026-11-30', '2026-11-30T18:00:00', '2026-11-30 18:00:00Z',
    '2026-02-30T00:00:00Z', '2026-02-29T00:00:00Z', '2026-13-01T00:00:00Z', '2026-00-10T00:00:00Z', '2026-11-00T00:00:00Z',
    '2026-11-30T24:00:00Z', '2026-11-30T18:60:00Z', '2026-11-30T18:00:60Z', '2026-11-30T18:00:00+24:00', '2026-11-30T18:00:00+01:60',
    'Mon, 30 Nov 2026 18:00:00 GMT', '2026-11-30T18:00:00Zjunk',
  ];
  for (const text of refused) {
    it(`refuses ${JSON.stringify(text)}`, () => {
      expect(parseInstant(text)).toBeUndefined();
    });
  }
});
