/**
 * What the receiver takes as an event's time: RFC 3339 exactly, every field in range, years PostgreSQL's timestamptz
 * accepts. `Date.parse` took "1" and "2026-02-30", which the ledger then refused: the same signed event got 503 for
 * ever instead of a named 400.
 */
import { describe, expect, it } from 'vitest';
import { isRfc3339 } from '../../src/processor/openapi.js';
import { parseEvent } from '../../src/processor/receiver.js';

const body = (timestamp: unknown) =>
  JSON.stringify({ type: 'hold.reversed', timestamp, data: { hold_id: 'h_1', sequence: 1 } });
const refusalOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return { status: (err as { statusCode: number }).statusCode, code: (err as { code: string }).code };
  }
  return undefined;
};

describe('event timestamps', () => {
  it.each([
    '2026-11-30T02:00:00Z',
    '2026-11-30t02:00:00z',
    '2026-11-30T02:00:00.123456789Z',
    '2026-11-30T02:00:00+05:30',
    '2026-11-30T02:00:00-08:00',
    '2024-02-29T23:59:59Z',
    '2016-12-31T23:59:60Z',
    '0001-01-01T00:00:00Z',
  ])('takes %s', (text) => {
    expect(isRfc3339(text)).toBe(true);
    expect(parseEvent('evt_1', body(text)).occurredAt).toBe(text);
  });

  it.each([
    '1',
    '1764468000',
    'Nov 30 2026',
    '2026-11-30',
    '2026-11-30 02:00:00Z',
    '2026-11-30T02:00Z',
    '2026-11-30T02:00:00',
    '2026-02-30T00:00:00Z',
    '2025-02-29T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-11-31T00:00:00Z',
    '2026-11-30T24:00:00Z',
    '2026-11-30T02:60:00Z',
    '2026-11-30T02:00:61Z',
    '2026-11-30T02:00:00+24:00',
    '0000-01-01T00:00:00Z',
    '+002026-11-30T02:00:00Z',
    '2026-11-30T02:00:00.Z',
    ' 2026-11-30T02:00:00Z',
  ])('refuses %j with a named 400', (text) => {
    expect(isRfc3339(text)).toBe(false);
    expect(refusalOf(() => parseEvent('evt_1', body(text)))).toEqual({ status: 400, code: 'InvalidOccurredAt' });
  });

  it('refuses a timestamp that is not a string', () => {
    expect(refusalOf(() => parseEvent('evt_1', body(1764468000)))).toEqual({ status: 400, code: 'InvalidOccurredAt' });
    expect(refusalOf(() => parseEvent('evt_1', body(null)))).toEqual({ status: 400, code: 'InvalidOccurredAt' });
  });
});
