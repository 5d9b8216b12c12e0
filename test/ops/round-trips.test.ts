import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import { runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';

/**
 * Round trips per command (issue 15): every statement the service sends, and BEGIN and COMMIT of every
 * transaction, counted by the engine's statement observer while one command runs through its door (HTTP,
 * or the job worker). The bounds are today's counts, a ratchet: a change that adds a round trip fails
 * here, and one that removes some lowers the bound. docs/benchmarks.md has the goals and what remains.
 */

/** The most round trips each command may take (measured on both engines; they send the same statements). */
const ROUND_TRIP_BOUNDS = {
  withdrawal_creation: 5,
  deposit_creation: 5,
  slip_upload: 10,
  slip_processing: 9,
  /** The same for a depositor whose wallet exists (every settlement after its first): no statement creates it. */
  slip_processing_wallet_exists: 8,
} as const;

function expectWithin(recorded: Recorded, bound: number): void {
  expect(recorded.round_trips, `round trips:\n${recorded.statements.join('\n')}`).toBeLessThanOrEqual(bound);
}

interface Recorded {
  round_trips: number;
  statements: string[];
}

let recording: Recorded | null = null;

function note(sql: string): void {
  if (!recording) return;
  recording.round_trips += 1;
  recording.statements.push(sql.split(';\n').map((part) => part.replace(/\s+/g, ' ').trim().slice(0, 70)).join(' ;; '));
}

async function measure<T>(run: () => Promise<T>): Promise<{ value: T; recorded: Recorded }> {
  recording = { round_trips: 0, statements: [] };
  try {
    const value = await run();
    return { value, recorded: recording };
  } finally {
    recording = null;
  }
}

let app: TestApp;
let depositor: MerchantCredentials;
let payer: MerchantCredentials;
let beneficiary_id: string;
let counter = 0;
let deposit: CreatedDeposit;

beforeAll(async () => {
  app = await createTestApp();
  // The engine tells every round trip it makes, deferred writes sent together included.
  app.testDatabase.database.statement_observer = (sql) => note(sql);
  depositor = app.sandbox;
  payer = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  await fundAvailable(app, accountOf(payer), 100_000_000);
  beneficiary_id = await verifiedBeneficiary(app, accountOf(payer));
});
afterAll(async () => {
  await app.close();
});

function withdrawalBody(amount_minor: number) {
  counter += 1;
  return { amount_minor, currency: 'THB', merchant_reference: `wd-${counter}`, end_user_ref: `payee-${counter}`, beneficiary_id };
}

function depositBody(amount_minor: number) {
  counter += 1;
  return {
    amount_minor,
    currency: 'THB',
    merchant_reference: `dep-${counter}`,
    end_user_ref: `user-${counter}`,
    sender: { bank_code: '004', account_number: `01${String(counter).padStart(8, '0')}`, account_name_th: 'สมหญิง รักไทย' },
    client: { device_fingerprint: `fp-${counter}`, ip: '203.0.113.7', user_agent: 'Mozilla/5.0' },
  };
}

describe('round trips per command', () => {
  it('withdrawal creation', async () => {
    // The first creation of a merchant warms caches (policies, fees); the second is the one measured.
    const warm = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', body: withdrawalBody(5_000_000), idempotency_key: crypto.randomUUID(), credentials: payer });
    expect(warm.statusCode, warm.body).toBe(201);
    const { value: response, recorded } = await measure(() =>
      app.signed({ method: 'POST', url: '/v1/pay/withdrawals', body: withdrawalBody(5_000_000), idempotency_key: crypto.randomUUID(), credentials: payer }),
    );
    expect(response.statusCode, response.body).toBe(201);
    expectWithin(recorded, ROUND_TRIP_BOUNDS.withdrawal_creation);
  });

  it('deposit creation, matched at once (201)', async () => {
    const warm = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body: depositBody(10_000), idempotency_key: crypto.randomUUID(), credentials: depositor });
    expect(warm.statusCode, warm.body).toBe(201);
    const { value: response, recorded } = await measure(() =>
      app.signed({ method: 'POST', url: '/v1/pay/deposits', body: depositBody(10_000), idempotency_key: crypto.randomUUID(), credentials: depositor }),
    );
    expect(response.statusCode, response.body).toBe(201);
    expectWithin(recorded, ROUND_TRIP_BOUNDS.deposit_creation);
    deposit = response.json<CreatedDeposit>();
  });

  it('slip upload (202) and its processing by the worker: verified, settled, credited, the withdrawal filled', async () => {
    await runJobs(app);
    const transfer = await sandboxTransfer(app, deposit, {}, depositor);
    const { value: accepted, recorded: upload } = await measure(() => uploadMultipart(app, deposit.slip_upload, slipBytes(transfer)));
    expect(accepted.statusCode, accepted.body).toBe(202);
    expectWithin(upload, ROUND_TRIP_BOUNDS.slip_upload);
    const { recorded: processing } = await measure(() => runJobs(app));
    expectWithin(processing, ROUND_TRIP_BOUNDS.slip_processing);
    const settled = await app.signed({ url: `/v1/pay/deposits/${deposit.id}`, credentials: depositor });
    expect(settled.json<{ status: string }>().status).toBe('settled');
  });

  it('slip processing for a depositor whose wallet exists (the common case: every settlement after its first)', async () => {
    const created = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body: depositBody(10_000), idempotency_key: crypto.randomUUID(), credentials: depositor });
    expect(created.statusCode, created.body).toBe(201);
    const next = created.json<CreatedDeposit>();
    await runJobs(app);
    const transfer = await sandboxTransfer(app, next, {}, depositor);
    const accepted = await uploadMultipart(app, next.slip_upload, slipBytes(transfer));
    expect(accepted.statusCode, accepted.body).toBe(202);
    const { recorded: processing } = await measure(() => runJobs(app));
    expectWithin(processing, ROUND_TRIP_BOUNDS.slip_processing_wallet_exists);
    const settled = await app.signed({ url: `/v1/pay/deposits/${next.id}`, credentials: depositor });
    expect(settled.json<{ status: string }>().status).toBe('settled');
  });
});
