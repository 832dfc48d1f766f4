/** One builder of a hold workflow's search attributes, and DeliveryStatus a closed set the compiler enforces. */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DELIVERY_STATUS_VALUES,
  deliveryStartAttributes,
  deliveryStatusUpdate,
  EVENT_WORKFLOW_STATUS_VALUES,
  holdSearchAttributes,
} from '../../src/contracts/search-attributes.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const sources = (dir: string) =>
  fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => ({ file: path.join(dir, f), text: fs.readFileSync(path.join(ROOT, dir, f), 'utf8') }));

const plain = (attributes: ReturnType<typeof holdSearchAttributes>) =>
  Object.fromEntries(attributes.map((a) => [a.key.name, a.value]));

describe('search attributes', () => {
  it("a delivery starts pending, with its hold's region, id and merchant; an event workflow without a status", () => {
    expect(plain(deliveryStartAttributes('us', 'h_1', 'm_1'))).toEqual({
      Region: 'us',
      HoldId: 'h_1',
      MerchantId: 'm_1',
      DeliveryStatus: 'pending',
    });
    expect(plain(holdSearchAttributes({ region: 'eu', holdId: 'h_2' }))).toEqual({ Region: 'eu', HoldId: 'h_2' });
  });

  it('DeliveryStatus takes only the values of its two lists: a typo does not compile', () => {
    // @ts-expect-error: not a DeliveryStatus value (npm test runs tsc over the tests: an unused expectation fails it)
    expect(plain(deliveryStatusUpdate('evnt_gap'))).toEqual({ DeliveryStatus: 'evnt_gap' });
    for (const value of [...DELIVERY_STATUS_VALUES, ...EVENT_WORKFLOW_STATUS_VALUES]) {
      expect(plain(deliveryStatusUpdate(value))).toEqual({ DeliveryStatus: value });
    }
  });

  it('every attribute the product sets goes through the one helper (no hand-built key/value lists)', () => {
    const handBuilt = [
      ...sources('src/workflows'),
      ...sources('src/processor'),
      ...sources('src/delivery'),
      ...sources('src/operations'),
    ]
      .filter(({ text }) => /\{\s*key:\s*\w+Key,/.test(text))
      .map(({ file }) => file);
    expect(handBuilt).toEqual([]);
  });
});
