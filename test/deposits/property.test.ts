import crypto from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { ERROR_CODES, codeToStatus } from '../../src/platform/errors.ts';

/**
 * Random bodies thrown at POST /v1/pay/deposits (issue 4, bad input): whatever the body, the answer is
 * never a 5xx, every error is one of the catalogue's codes with its status, and a refused request
 * leaves no order, no reservation and no event behind. Valid fields are mixed with broken ones so that
 * the requests reach every rule, not only the schema.
 */

let app: TestApp;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

async function footprint(): Promise<string> {
  const { rows } = await app.testDatabase.database.query<{ orders: number; legs: number; reserved: number; events: number }>(
    `SELECT (SELECT count(*) FROM deposit_orders)::integer AS orders,
            (SELECT count(*) FROM withdrawal_legs)::integer AS legs,
            (SELECT coalesce(sum(reserved_minor), 0) FROM withdrawal_orders)::bigint AS reserved,
            (SELECT count(*) FROM events)::integer AS events`,
  );
  return JSON.stringify(rows[0]);
}

const junk = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 80 }),
  fc.constant(''),
  fc.constant('๐๑๒'),
  fc.constant('x'.repeat(300)),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
);

const amount = fc.oneof(
  fc.constantFrom(10_000, 10_050, 9_900, 5_000_100, 0, -100, 10_000.5, 2 ** 53, 1e13),
  fc.integer({ min: 100, max: 60_000 }).map((baht) => baht * 100),
  junk,
);

const sender = fc.oneof(
  fc.record({
    bank_code: fc.oneof(fc.constantFrom('002', '004', '014', '098', '067', '999', '02', 'abc'), junk),
    account_number: fc.oneof(fc.stringMatching(/^[0-9]{6,20}$/), fc.constantFrom('12-34', '', '1'.repeat(25)), junk),
    account_name_th: fc.oneof(fc.constantFrom('สมชาย ใจดี', 'นายสมชาย ใจดี', 'Mr. Somchai', ' '), junk),
  }),
  junk,
);

const body = fc.record(
  {
    amount_minor: amount,
    currency: fc.oneof(fc.constant('THB'), junk),
    merchant_reference: fc.oneof(fc.uuid().map((id) => id.slice(0, 30)), junk),
    end_user_ref: fc.oneof(fc.uuid().map((id) => `user-${id.slice(0, 8)}`), junk),
    sender,
    sender_id: fc.oneof(fc.constant('snd_01K0NOSUCH0000000000000000'), junk),
    client: fc.oneof(fc.record({ device_fingerprint: fc.string({ maxLength: 20 }), ip: fc.constant('198.51.100.1'), user_agent: fc.constant('ua') }), junk),
    fill_preference: fc.oneof(fc.constantFrom('any', 'internal_only', 'cheapest'), junk),
    min_ttl_seconds: fc.oneof(fc.integer({ min: -10, max: 90_000 }), junk),
    expires_in_seconds: fc.oneof(fc.integer({ min: 0, max: 90_000 }), junk),
    return_url: fc.oneof(fc.constantFrom('https://shop.example/back', 'javascript:alert(1)', 'not a url'), junk),
    metadata: fc.oneof(fc.dictionary(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 600 }), { maxKeys: 25 }), junk),
    surprise: junk,
  },
  { requiredKeys: [] },
);

describe('POST /v1/pay/deposits with random bodies', () => {
  it('never answers 5xx; every refusal is a catalogue code and leaves no order, reservation or event', async () => {
    await fc.assert(
      fc.asyncProperty(body, async (payload) => {
        const before = await footprint();
        const response = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body: payload, idempotency_key: crypto.randomUUID() });
        expect(response.statusCode, response.body).toBeLessThan(500);
        if (response.statusCode >= 400) {
          const error = response.json<{ error: { code: string } }>().error;
          expect(ERROR_CODES as string[]).toContain(error.code);
          expect(codeToStatus(error.code as never)).toBe(response.statusCode);
          expect(await footprint(), response.body).toBe(before);
        } else {
          expect([201, 202]).toContain(response.statusCode);
        }
      }),
      { numRuns: 150 },
    );
  }, 120_000);
});
