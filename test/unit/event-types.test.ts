/**
 * The event-type catalog: every type the code writes has an entry and no entry is of a type it does not; each example
 * is what its schema says, exactly; and the JSON Schema the merchant API serves accepts the examples and refuses what
 * the schema refuses. The real bodies are checked by the integration tests that deliver them (catalogMismatches).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { HOLD_RELEASED_EVENT, MERCHANT_PING_EVENT } from '../../src/contracts/delivery.js';
import { HOLD_EVENT_WEBHOOK_TYPES } from '../../src/contracts/processor.js';
import { EVENT_TYPES, eventTypeCatalog } from '../../src/delivery/event-types.js';
import { catalogMismatches } from '../support/event-types.js';

const exampleOf = (type: string) =>
  structuredClone(EVENT_TYPES.find((e) => e.type === type)!.example) as {
    data: Record<string, unknown>;
  };

describe('the event-type catalog', () => {
  it('has one entry per type the code writes, and none else', () => {
    const written = [HOLD_RELEASED_EVENT, ...Object.values(HOLD_EVENT_WEBHOOK_TYPES), MERCHANT_PING_EVENT];
    expect(EVENT_TYPES.map((e) => e.type).sort()).toEqual(written.sort());
  });

  it('each example is what its schema says, exactly', () => {
    expect(catalogMismatches(EVENT_TYPES.map((e) => JSON.stringify(e.example)))).toEqual([]);
  });

  it('names what a body gets wrong: a missing or unnamed key, a wrong value, an unknown type', () => {
    const { data: _, ...noData } = exampleOf('hold.released');
    const extra = exampleOf('hold.captured');
    extra.data.note = 'x';
    const wrongOutcome = exampleOf('hold.reversed');
    wrongOutcome.data.outcome = 'captured';
    const bodies = [noData, extra, wrongOutcome, { type: 'hold.lost', data: {} }].map((b) => JSON.stringify(b));
    expect(catalogMismatches(bodies)).toEqual([
      expect.stringMatching(/^hold\.released: /),
      expect.stringMatching(/^hold\.captured: keys the catalog does not name/),
      expect.stringMatching(/^hold\.reversed: /),
      expect.stringMatching(/^no catalog entry for type hold\.lost/),
    ]);
  });

  it('its JSON Schema accepts each example and refuses a broken one; an added key stays allowed', () => {
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    for (const entry of eventTypeCatalog()) {
      const validate = ajv.compile(entry.schema);
      expect(validate(entry.example), `${entry.type}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      const broken = exampleOf(entry.type);
      broken.data.merchant_id = 42;
      expect(validate(broken), entry.type).toBe(false);
      const added = exampleOf(entry.type);
      added.data.added_later = true;
      expect(validate(added), entry.type).toBe(true);
    }
  });
});
