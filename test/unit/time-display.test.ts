import { describe, expect, it } from 'vitest';
import { formatLocal, localParts, relativeTime, truncate, zoneOffset } from '../../src/time/display.js';

describe('time display', () => {
  const at = new Date('2026-12-01T06:00:03.250Z');

  it('shows an instant in the job\'s zone: full, to the minute, and compact', () => {
    expect(formatLocal(at, 'Asia/Shanghai')).toBe('2026-12-01 14:00:03');
    expect(formatLocal(at, 'Asia/Shanghai', 'minute')).toBe('2026-12-01 14:00');
    expect(formatLocal(at, 'Asia/Shanghai', 'compact')).toBe('12-01 14:00:03');
    expect(formatLocal(at, 'UTC', 'compact')).toBe('12-01 06:00:03');
    // Midnight is 00, not 24 (hourCycle h23), and the day rolls over with the zone.
    expect(formatLocal(new Date('2026-12-01T15:00:00Z'), 'Asia/Tokyo')).toBe('2026-12-02 00:00:00');
    expect(formatLocal(new Date('2026-12-01T03:00:00Z'), 'America/New_York')).toBe('2026-11-30 22:00:00');
  });

  it('names the zone\'s offset at that instant, DST included', () => {
    expect(zoneOffset(at, 'UTC')).toBe('Z');
    expect(zoneOffset(at, 'Asia/Shanghai')).toBe('+08');
    expect(zoneOffset(at, 'Asia/Kolkata')).toBe('+05:30');
    expect(zoneOffset(new Date('2026-07-01T12:00:00Z'), 'Europe/Berlin')).toBe('+02');
    expect(zoneOffset(new Date('2026-12-01T12:00:00Z'), 'Europe/Berlin')).toBe('+01');
    expect(localParts(at, 'America/St_Johns').offset).toBe('-03:30');
  });

  it('says how far from now, in the largest whole unit, floored', () => {
    const now = new Date('2026-12-01T12:00:00Z');
    const plus = (ms: number) => new Date(now.getTime() + ms);
    expect(relativeTime(plus(180_000), now)).toBe('in 3m');
    expect(relativeTime(plus(-2 * 3_600_000 - 59_000), now)).toBe('2h ago');
    expect(relativeTime(plus(59_999), now)).toBe('in 59s');
    expect(relativeTime(plus(-45_000), now)).toBe('45s ago');
    expect(relativeTime(plus(500), now)).toBe('now');
    expect(relativeTime(plus(47 * 3_600_000), now)).toBe('in 47h');
    expect(relativeTime(plus(-3 * 86_400_000), now)).toBe('3d ago');
  });

  it('truncates with an ellipsis to exactly the width', () => {
    expect(truncate('short', 30)).toBe('short');
    const long = 'a'.repeat(31);
    expect(truncate(long, 30)).toBe(`${'a'.repeat(29)}…`);
    expect(truncate(long, 30)).toHaveLength(30);
  });
});
