/** Which MySQL-family servers get INSERT ... RETURNING (one round trip on the claim path). */
import { describe, expect, it } from 'vitest';
import { mariaDbWithReturning } from '../../src/store/dialect/mysql.js';

describe('mariaDbWithReturning', () => {
  it.each([
    ['10.11.19-MariaDB-0+deb12u1', true],
    ['10.6.18-MariaDB', true],
    ['10.5.0-MariaDB-log', true],
    ['11.4.2-MariaDB-ubu2404', true],
    ['10.4.34-MariaDB', false],
    ['8.0.36', false],
    ['8.4.0-commercial', false],
    ['5.7.44-log', false],
    ['', false],
  ])('%s -> %s', (version, expected) => {
    expect(mariaDbWithReturning(version)).toBe(expected);
  });
});
