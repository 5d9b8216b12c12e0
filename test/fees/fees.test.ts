import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import {
  computeFee,
  FeeService,
  MAX_FEE_BASE_MINOR,
  PLATFORM_DEFAULT_SCHEDULES,
  recognizeFee,
  recognizeFill,
  type FeeScheduleTerms,
} from '../../src/fees/service.ts';
import { InvariantViolation } from '../../src/platform/assert.ts';

function schedule(channel: 'deposit' | 'withdrawal', processing_fee_bps: number, fixed_fee_minor: number, vat_bps: number): FeeScheduleTerms {
  return { channel, processing_fee_bps, fixed_fee_minor, vat_bps };
}

/** round_half_up(amount * bps / 10000), by its definition: r*10000 <= a*bps + 5000 < (r+1)*10000. */
function isHalfUp(result: number, amount: bigint, bps: number): boolean {
  const scaled = amount * BigInt(bps) + 5000n;
  return BigInt(result) * 10000n <= scaled && scaled < (BigInt(result) + 1n) * 10000n;
}

function vatOf(preVat: number, vatBps: number): number {
  return Number((BigInt(preVat) * BigInt(vatBps) + 5000n) / 10000n);
}

describe('computeFee', () => {
  it('prices the platform defaults exactly', () => {
    expect(computeFee(PLATFORM_DEFAULT_SCHEDULES.deposit, 10_000)).toEqual({
      fee_total_minor: 161,
      fee_breakdown: [
        { component: 'processing_fee', amount_minor: 150, rate_bps: 150 },
        { component: 'fixed_fee', amount_minor: 0 },
        { component: 'vat', amount_minor: 11, rate_bps: 700 }, // 10.5 rounds up
      ],
      capped: false,
    });
    expect(computeFee(PLATFORM_DEFAULT_SCHEDULES.withdrawal, 50_000)).toEqual({
      fee_total_minor: 1070,
      fee_breakdown: [
        { component: 'processing_fee', amount_minor: 0, rate_bps: 0 },
        { component: 'fixed_fee', amount_minor: 1000 },
        { component: 'vat', amount_minor: 70, rate_bps: 700 },
      ],
      capped: false,
    });
  });

  it('rounds each component half up at .5 and below .5 down', () => {
    const terms = schedule('deposit', 150, 0, 0);
    expect(computeFee(terms, 100).fee_breakdown[0].amount_minor).toBe(2); // 1.5
    expect(computeFee(terms, 300).fee_breakdown[0].amount_minor).toBe(5); // 4.5
    expect(computeFee(terms, 299).fee_breakdown[0].amount_minor).toBe(4); // 4.485
    expect(computeFee(terms, 33).fee_breakdown[0].amount_minor).toBe(0); // 0.495
    expect(computeFee(schedule('withdrawal', 0, 50, 1000), 1).fee_breakdown[2].amount_minor).toBe(5); // 5.0
    expect(computeFee(schedule('withdrawal', 0, 5, 1000), 1).fee_breakdown[2].amount_minor).toBe(1); // 0.5
    expect(computeFee(schedule('withdrawal', 0, 4, 1000), 1).fee_breakdown[2].amount_minor).toBe(0); // 0.4
  });

  it('computes VAT on the already-rounded processing and fixed fees', () => {
    // processing 49.5 -> 50; VAT on 50 is 3.5 -> 4 (on the unrounded 49.5 it would be 3.465 -> 3).
    const result = computeFee(schedule('deposit', 150, 0, 700), 3300);
    expect(result.fee_breakdown.map((item) => item.amount_minor)).toEqual([50, 0, 4]);
    expect(result.fee_total_minor).toBe(54);
    // VAT covers the fixed fee too: (15 + 25) * 7% = 2.8 -> 3.
    expect(computeFee(schedule('withdrawal', 150, 25, 700), 1000).fee_breakdown.map((item) => item.amount_minor)).toEqual([15, 25, 3]);
  });

  it('keeps all three components, in order, when the schedule is zero', () => {
    expect(computeFee(schedule('deposit', 0, 0, 0), 123_400)).toEqual({
      fee_total_minor: 0,
      fee_breakdown: [
        { component: 'processing_fee', amount_minor: 0, rate_bps: 0 },
        { component: 'fixed_fee', amount_minor: 0 },
        { component: 'vat', amount_minor: 0, rate_bps: 0 },
      ],
      capped: false,
    });
  });

  it('caps a tiny deposit at its amount, cutting the fixed fee first and keeping VAT consistent', () => {
    // 100 satang, 1.5% + 10 baht + VAT: uncapped 2 + 1000 + 70 = 1072 > 100.
    const result = computeFee(schedule('deposit', 150, 1000, 700), 100);
    expect(result.fee_breakdown.map((item) => item.amount_minor)).toEqual([2, 91, 7]);
    expect(result.fee_total_minor).toBe(100);
    expect(result.capped).toBe(true);
    // A 100 % rate: the processing fee itself is cut to the largest pre-VAT fee that fits (93 + 7).
    expect(computeFee(schedule('deposit', 10_000, 0, 700), 100).fee_breakdown.map((item) => item.amount_minor)).toEqual([93, 0, 7]);
    // When VAT rounding leaves a satang unused, the fee stays below the amount rather than breaking the rule.
    const odd = computeFee(schedule('deposit', 10_000, 0, 700), 1000);
    expect(odd.fee_total_minor).toBeLessThanOrEqual(1000);
    expect(odd.fee_breakdown[2].amount_minor).toBe(vatOf(odd.fee_breakdown[0].amount_minor, 700));
    // Withdrawals are never capped: the fee is added on top.
    expect(computeFee(schedule('withdrawal', 0, 1000, 700), 100).fee_total_minor).toBe(1070);
  });

  it('stays exact at the top of its domain and refuses anything outside it', () => {
    const top = computeFee(schedule('withdrawal', 9999, 1_000_000_000_000, 10_000), MAX_FEE_BASE_MINOR);
    expect(top.fee_breakdown.map((item) => item.amount_minor)).toEqual([999_900_000_000, 1_000_000_000_000, 1_999_900_000_000]);
    expect(top.fee_total_minor).toBe(3_999_800_000_000);
    expect(() => computeFee(PLATFORM_DEFAULT_SCHEDULES.deposit, MAX_FEE_BASE_MINOR + 1)).toThrow(InvariantViolation);
    expect(() => computeFee(PLATFORM_DEFAULT_SCHEDULES.deposit, 1.5)).toThrow(InvariantViolation);
    expect(() => computeFee(PLATFORM_DEFAULT_SCHEDULES.deposit, -1)).toThrow(InvariantViolation);
    expect(() => computeFee(schedule('deposit', 10_001, 0, 0), 100)).toThrow(InvariantViolation);
    expect(() => computeFee(schedule('deposit', 0, -1, 0), 100)).toThrow(InvariantViolation);
  });

  const scheduleArbitrary = fc.record({
    channel: fc.constantFrom('deposit' as const, 'withdrawal' as const),
    processing_fee_bps: fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.constantFrom(0, 150, 10_000)),
    fixed_fee_minor: fc.oneof(fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 1_000_000_000_000 }), fc.constant(0)),
    vat_bps: fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.constant(700)),
  });

  it('property: integer components that sum to the total, deposit fee within the amount, deterministic', () => {
    fc.assert(
      fc.property(scheduleArbitrary, fc.oneof(fc.integer({ min: 1, max: 1_000_000_000_000 }), fc.integer({ min: 1, max: 10_000 })), (terms, base) => {
        const result = computeFee(terms, base);
        const [processing, fixed, vat] = result.fee_breakdown;
        for (const item of result.fee_breakdown) {
          expect(Number.isSafeInteger(item.amount_minor) && item.amount_minor >= 0).toBe(true);
        }
        expect(result.fee_breakdown.map((item) => item.component)).toEqual(['processing_fee', 'fixed_fee', 'vat']);
        expect(processing.amount_minor + fixed.amount_minor + vat.amount_minor).toBe(result.fee_total_minor);
        expect(processing.rate_bps).toBe(terms.processing_fee_bps);
        expect(vat.rate_bps).toBe(terms.vat_bps);
        // VAT always follows the rule from what remains of the pre-VAT fee.
        expect(isHalfUp(vat.amount_minor, BigInt(processing.amount_minor + fixed.amount_minor), terms.vat_bps)).toBe(true);
        if (!result.capped) {
          expect(isHalfUp(processing.amount_minor, BigInt(base), terms.processing_fee_bps)).toBe(true);
          expect(fixed.amount_minor).toBe(terms.fixed_fee_minor);
        }
        if (terms.channel === 'deposit') {
          expect(result.fee_total_minor).toBeLessThanOrEqual(base);
          if (result.capped) {
            // The cap is the largest pre-VAT fee that fits, and the fixed fee is cut first.
            const preVat = processing.amount_minor + fixed.amount_minor;
            expect(preVat + 1 + vatOf(preVat + 1, terms.vat_bps)).toBeGreaterThan(base);
            const uncappedProcessing = Number((BigInt(base) * BigInt(terms.processing_fee_bps) + 5000n) / 10000n);
            expect(fixed.amount_minor === 0 || processing.amount_minor === uncappedProcessing).toBe(true);
          }
        } else {
          expect(result.capped).toBe(false);
        }
        expect(computeFee({ ...terms }, base)).toEqual(result);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('recognizeFee', () => {
  it('recognises in proportion to what is paid out, the last fill taking the remainder', () => {
    expect([10_000, 10_000, 30_000].reduce<{ filled: number; parts: number[] }>(
      (state, fill) => ({ filled: state.filled + fill, parts: [...state.parts, recognizeFill(1070, 50_000, state.filled, fill)] }),
      { filled: 0, parts: [] },
    ).parts).toEqual([214, 214, 642]);
    expect([recognizeFee(100, 3, 1), recognizeFee(100, 3, 2), recognizeFee(100, 3, 3)]).toEqual([33, 66, 100]);
    expect(recognizeFee(0, 500, 500)).toBe(0);
    expect(recognizeFee(1070, 50_000, 0)).toBe(0);
    expect(() => recognizeFee(1070, 50_000, 50_001)).toThrow(InvariantViolation);
    expect(() => recognizeFee(1070, 0, 0)).toThrow(InvariantViolation);
    expect(() => recognizeFill(1070, 50_000, 0, 0)).toThrow(InvariantViolation);
  });

  it('property: per-fill parts are non-negative, sum to the fee exactly and never run ahead', () => {
    const order = fc
      .record({ total: fc.oneof(fc.integer({ min: 1, max: 1_000_000_000_000 }), fc.integer({ min: 1, max: 50 })), fee: fc.integer({ min: 0, max: 4_000_000_000_000 }) })
      .chain(({ total, fee }) =>
        fc
          .uniqueArray(fc.integer({ min: 1, max: Math.max(1, total - 1) }), { maxLength: Math.min(20, total - 1) })
          .map((cuts) => {
            const points = [...cuts.filter((cut) => cut < total)].sort((left, right) => left - right);
            const fills = [...points, total].map((point, index) => point - (index === 0 ? 0 : points[index - 1]!));
            return { total, fee, fills };
          }),
      );
    fc.assert(
      fc.property(order, ({ total, fee, fills }) => {
        let filled = 0;
        let recognized = 0;
        for (const fill of fills) {
          expect(fill).toBeGreaterThan(0);
          const part = recognizeFill(fee, total, filled, fill);
          expect(Number.isSafeInteger(part) && part >= 0).toBe(true);
          filled += fill;
          recognized += part;
          expect(recognized).toBe(recognizeFee(fee, total, filled));
          const ceiling = (BigInt(fee) * BigInt(filled) + BigInt(total) - 1n) / BigInt(total);
          expect(BigInt(recognized) <= ceiling).toBe(true);
        }
        expect(filled).toBe(total);
        expect(recognized).toBe(fee);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('GET /v1/pay/quote', () => {
  let app: TestApp;
  let fees: FeeService;
  let sibling: MerchantCredentials;
  let liveSibling: MerchantCredentials;
  let otherBrand: MerchantCredentials;
  let bareBrand: MerchantCredentials;

  beforeAll(async () => {
    app = await createTestApp();
    fees = new FeeService(app.instance.services.clock);
    sibling = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    liveSibling = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    otherBrand = await app.createMerchant();
    bareBrand = await app.createMerchant();
  });
  afterAll(async () => {
    await app.close();
  });

  async function quote(query: string, credentials?: MerchantCredentials) {
    return app.signed({ url: `/v1/pay/quote?${query}`, credentials });
  }

  it('falls back to the platform default when the brand has no schedule', async () => {
    const deposit = await quote('channel=deposit&amount_minor=10000', bareBrand);
    expect(deposit.statusCode).toBe(200);
    expect(deposit.json()).toEqual({
      object: 'fee_quote',
      channel: 'deposit',
      amount_minor: 10_000,
      currency: 'THB',
      fee_total_minor: 161,
      fee_breakdown: [
        { component: 'processing_fee', amount_minor: 150, rate_bps: 150 },
        { component: 'fixed_fee', amount_minor: 0 },
        { component: 'vat', amount_minor: 11, rate_bps: 700 },
      ],
      net_amount_minor: 9839,
      livemode: false,
      quoted_at: '2026-08-01T00:00:00.000Z',
    });
    const withdrawal = await quote('amount_minor=50000&channel=withdrawal', bareBrand);
    expect(withdrawal.statusCode).toBe(200);
    const body = withdrawal.json() as Record<string, unknown>;
    expect(Object.keys(body)).toEqual([
      'object', 'channel', 'amount_minor', 'currency', 'fee_total_minor', 'fee_breakdown', 'total_debit_minor', 'livemode', 'quoted_at',
    ]);
    expect(body).toMatchObject({ channel: 'withdrawal', fee_total_minor: 1070, total_debit_minor: 51_070 });
  });

  it('uses the brand default, and a merchant override before it, per environment', async () => {
    const brand = app.sandbox.white_label_id;
    const db = app.testDatabase.database;
    await fees.setSchedule(db, { white_label_id: brand, merchant_id: null, livemode: false, channel: 'deposit', processing_fee_bps: 200, fixed_fee_minor: 500, vat_bps: 700 });
    await fees.setSchedule(db, { white_label_id: brand, merchant_id: null, livemode: false, channel: 'withdrawal', processing_fee_bps: 50, fixed_fee_minor: 1500, vat_bps: 700 });
    await fees.setSchedule(db, { white_label_id: brand, merchant_id: app.sandbox.merchant_id, livemode: false, channel: 'deposit', processing_fee_bps: 100, fixed_fee_minor: 0, vat_bps: 700 });

    // The sandbox merchant's own deposit schedule: 1% of 100,000 = 1000, VAT 70.
    const own = (await quote('channel=deposit&amount_minor=100000')).json() as Record<string, unknown>;
    expect(own).toMatchObject({ fee_total_minor: 1070, net_amount_minor: 98_930 });
    // Its withdrawals fall back to the brand default: 0.5% of 100,000 = 500 + 1500, VAT 140.
    const ownWithdrawal = (await quote('channel=withdrawal&amount_minor=100000')).json() as Record<string, unknown>;
    expect(ownWithdrawal).toMatchObject({
      fee_total_minor: 2140,
      total_debit_minor: 102_140,
      fee_breakdown: [
        { component: 'processing_fee', amount_minor: 500, rate_bps: 50 },
        { component: 'fixed_fee', amount_minor: 1500 },
        { component: 'vat', amount_minor: 140, rate_bps: 700 },
      ],
    });
    // Another merchant of the brand gets the brand default: 2000 + 500, VAT 175.
    expect((await quote('channel=deposit&amount_minor=100000', sibling)).json()).toMatchObject({ fee_total_minor: 2675, net_amount_minor: 97_325 });
    // The live key of the brand gets the platform default: the schedules above are sandbox ones.
    expect((await quote('channel=deposit&amount_minor=100000', liveSibling)).json()).toMatchObject({ fee_total_minor: 1605, livemode: true });

    // A change applies to the next quote (upsert, no duplicate row).
    await fees.setSchedule(db, { white_label_id: brand, merchant_id: app.sandbox.merchant_id, livemode: false, channel: 'deposit', processing_fee_bps: 0, fixed_fee_minor: 300, vat_bps: 0 });
    expect((await quote('channel=deposit&amount_minor=100000')).json()).toMatchObject({ fee_total_minor: 300, net_amount_minor: 99_700 });
    const { rows } = await db.query<{ count: number }>('SELECT count(*)::int AS count FROM fee_schedules WHERE white_label_id = $1', [brand]);
    expect(rows[0]!.count).toBe(3);
    expect(await fees.scheduleFor(db, { white_label_id: brand, merchant_id: sibling.merchant_id, livemode: false, channel: 'deposit' })).toEqual({
      channel: 'deposit', processing_fee_bps: 200, fixed_fee_minor: 500, vat_bps: 700, source: 'brand',
    });
  });

  it("never uses another brand's schedule", async () => {
    const db = app.testDatabase.database;
    await fees.setSchedule(db, { white_label_id: otherBrand.white_label_id, merchant_id: null, livemode: false, channel: 'withdrawal', processing_fee_bps: 10_000, fixed_fee_minor: 99_999, vat_bps: 0 });
    await fees.setSchedule(db, { white_label_id: otherBrand.white_label_id, merchant_id: otherBrand.merchant_id, livemode: false, channel: 'deposit', processing_fee_bps: 10_000, fixed_fee_minor: 0, vat_bps: 0 });
    expect((await quote('channel=withdrawal&amount_minor=50000', bareBrand)).json()).toMatchObject({ fee_total_minor: 1070 });
    expect((await quote('channel=deposit&amount_minor=10000', bareBrand)).json()).toMatchObject({ fee_total_minor: 161 });
    expect((await quote('channel=withdrawal&amount_minor=100000')).json()).toMatchObject({ fee_total_minor: 2140 });
    // …while the other brand's own merchant does get it.
    expect((await quote('channel=withdrawal&amount_minor=1', otherBrand)).json()).toMatchObject({ fee_total_minor: 100_000 });
    expect((await quote('channel=deposit&amount_minor=10000', otherBrand)).json()).toMatchObject({ fee_total_minor: 10_000, net_amount_minor: 0 });
    // A merchant of one brand cannot be given a schedule under another brand (composite foreign key).
    await expect(
      fees.setSchedule(db, { white_label_id: otherBrand.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false, channel: 'deposit', processing_fee_bps: 0, fixed_fee_minor: 0, vat_bps: 0 }),
    ).rejects.toThrow();
  });

  it('carries the rate headers of the pay_read bucket', async () => {
    const response = await quote('channel=deposit&amount_minor=10000');
    expect(response.statusCode).toBe(200);
    for (const header of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-ratelimit-scope', 'retry-after']) {
      expect(response.headers[header], header).toBeDefined();
    }
    expect(response.headers['ratelimit-policy']).toBe('1200;w=60');
    expect(response.headers['x-ratelimit-scope']).toBe('api_key');
  });

  it('validates the query with exact codes and fields', async () => {
    const cases: Array<[string, Array<Record<string, string>>]> = [
      ['amount_minor=100', [{ path: 'channel', reason: 'required' }]],
      ['channel=deposit', [{ path: 'amount_minor', reason: 'required' }]],
      ['channel=card&amount_minor=100', [{ path: 'channel', reason: 'not_allowed_value' }]],
      ['channel=deposit&amount_minor=100.5', [{ path: 'amount_minor', reason: 'must_be_integer', hint: 'must_be_integer_minor_units' }]],
      ['channel=withdrawal&amount_minor=1e3', [{ path: 'amount_minor', reason: 'must_be_integer', hint: 'must_be_integer_minor_units' }]],
      ['channel=withdrawal&amount_minor=', [{ path: 'amount_minor', reason: 'must_be_integer', hint: 'must_be_integer_minor_units' }]],
      ['channel=withdrawal&amount_minor=0', [{ path: 'amount_minor', reason: 'too_small', hint: 'must_be_positive' }]],
      ['channel=deposit&amount_minor=-100', [{ path: 'amount_minor', reason: 'too_small', hint: 'must_be_positive' }]],
      ['channel=withdrawal&amount_minor=1000000000001', [{ path: 'amount_minor', reason: 'too_large', hint: 'at_most_1000000000000' }]],
      ['channel=withdrawal&amount_minor=99999999999999999999', [{ path: 'amount_minor', reason: 'too_large', hint: 'at_most_1000000000000' }]],
      ['channel=deposit&amount_minor=100&currency=THB', [{ path: 'currency', reason: 'unknown_field' }]],
      ['channel=deposit&channel=withdrawal&amount_minor=100', [{ path: 'channel', reason: 'repeated_parameter' }]],
    ];
    for (const [query, fields] of cases) {
      const response = await quote(query);
      expect(response.statusCode, query).toBe(422);
      const error = errorOf(response);
      expect(error.code, query).toBe('validation_error');
      expect(error.details.fields, query).toEqual(fields);
    }
  });

  it('refuses a deposit outside the brand’s deposit policy (whole baht, its range) as creation does, but quotes such a withdrawal', async () => {
    for (const amount of [150, 10_050, 9_900, 5_000_100]) {
      const response = await quote(`channel=deposit&amount_minor=${amount}`);
      expect(response.statusCode, String(amount)).toBe(422);
      // The range of the brand's deposit policy (the default: 100 to 50,000 baht), as creation states it.
      expect(errorOf(response)).toMatchObject({ code: 'amount_not_supported', details: { min_minor: 10_000, max_minor: 5_000_000 } });
    }
    expect((await quote('channel=deposit&amount_minor=5000000')).statusCode).toBe(200);
    const withdrawal = await quote('channel=withdrawal&amount_minor=150', bareBrand);
    expect(withdrawal.statusCode).toBe(200);
    expect(withdrawal.json()).toMatchObject({ amount_minor: 150, fee_total_minor: 1070, total_debit_minor: 1220 });
  });

  it('needs the pay:read scope', async () => {
    const eventsOnly = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, scopes: ['events:read'] });
    const response = await quote('channel=deposit&amount_minor=100', eventsOnly);
    expect(response.statusCode).toBe(403);
    expect(errorOf(response).code).toBe('scope_denied');
  });
});
