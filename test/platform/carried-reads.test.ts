import crypto from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { usingPostgres } from '../support/database.ts';
import { accountOf, fundAvailable, inTransaction, verifiedBeneficiary } from '../support/withdrawals.ts';
import { depositPolicyBody } from '../support/slips.ts';
import * as beneficiaries from '../../src/beneficiaries/repository.ts';
import * as deposits from '../../src/deposits/repository.ts';
import { PlannedRead, type ReadPart } from '../../src/platform/read-part.ts';

/**
 * Reads carried by a request's idempotency statement (src/platform/read-part.ts, issue 15): each carried
 * read answers what its plain read answers, the creation uses what it carried, and a request that is
 * replayed reads and locks nothing more than the key's record.
 */

let app: TestApp;
let merchant: MerchantCredentials;
let counter = 0;

beforeAll(async () => {
  app = await createTestApp();
  merchant = app.sandbox;
});
afterAll(async () => {
  await app.close();
});

function depositBody(amount_minor: number, end_user_ref = `user-${(counter += 1)}`) {
  return {
    amount_minor,
    currency: 'THB',
    merchant_reference: `carried-${(counter += 1)}`,
    end_user_ref,
    sender: { bank_code: '004', account_number: `02${String(counter).padStart(8, '0')}`, account_name_th: 'สมหญิง รักไทย' },
  };
}

async function carriedValue<Value>(part: ReadPart<Value>): Promise<Value> {
  return inTransaction(app, async (tx) => {
    const { rows } = await tx.query<{ value: unknown }>(`SELECT ${part.sql} AS value`, part.params);
    return part.parse(rows[0]?.value ?? null);
  });
}

describe('planned reads', () => {
  it('learn what the statement that carried them answered, once; one no statement carried answers nothing', async () => {
    const part: ReadPart<number> = { sql: '(SELECT $1::integer + 1)', params: [41], parse: (value) => Number(value) };
    const carried = new PlannedRead(part);
    const idle = new PlannedRead(part);
    expect(await carriedValue(carried.part)).toBe(42);
    expect(carried.take()).toEqual({ found: true, value: 42 });
    // Taken once: a later step reads anew.
    expect(carried.take()).toEqual({ found: false });
    expect(idle.take()).toEqual({ found: false });
  });
});

describe('carried reads', () => {
  it('answer what their plain reads answer, timestamps included', async () => {
    const account = accountOf(merchant);
    const beneficiary_id = await verifiedBeneficiary(app, account);
    const plain = await inTransaction(app, (tx) => beneficiaries.findById(tx, account, beneficiary_id));
    expect(plain).not.toBeNull();
    expect(plain?.verified_at).toBeInstanceOf(Date);
    expect(await carriedValue(beneficiaries.findByIdPart(account, beneficiary_id))).toEqual(plain);
    expect(await carriedValue(beneficiaries.findByIdPart(account, 'ben_missing'))).toBeNull();

    const stored = await app.backoffice({
      method: 'POST',
      url: '/v1/bo/deposit-policy',
      body: depositPolicyBody({ white_label_id: merchant.white_label_id, min_amount_minor: 50_000 }),
    });
    expect(stored.statusCode, stored.body).toBe(200);
    const policy = await inTransaction(app, (tx) => deposits.lockEndUserAndFindPolicy(tx, account, 'someone'));
    expect(policy?.created_at).toBeInstanceOf(Date);
    expect(await carriedValue(deposits.lockEndUserAndFindPolicyPart(account, 'someone'))).toEqual(policy);
  });

  it('deposit creation decides with the policy the idempotency statement carried', async () => {
    // The brand's policy stored above starts at 500.00 THB; the default would accept 200.00.
    const refused = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body: depositBody(20_000), idempotency_key: crypto.randomUUID(), credentials: merchant });
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json()).toMatchObject({ error: { code: 'amount_not_supported', details: { min_minor: 50_000, max_minor: 5_000_000 } } });
  });

  it('withdrawal creation decides with the beneficiary, reference and fee the idempotency statement carried', async () => {
    const payer = await app.createMerchant({ white_label_id: merchant.white_label_id });
    await fundAvailable(app, accountOf(payer), 10_000_000);
    const beneficiary_id = await verifiedBeneficiary(app, accountOf(payer));
    const body = { amount_minor: 1_000_000, currency: 'THB', merchant_reference: 'carried-wd-1', end_user_ref: 'payee-1', beneficiary_id };
    const created = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', body, idempotency_key: crypto.randomUUID(), credentials: payer });
    expect(created.statusCode, created.body).toBe(201);
    const again = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', body, idempotency_key: crypto.randomUUID(), credentials: payer });
    expect(again.json()).toMatchObject({ error: { code: 'merchant_reference_in_use' } });
    const missing = await app.signed({
      method: 'POST',
      url: '/v1/pay/withdrawals',
      body: { ...body, merchant_reference: 'carried-wd-2', beneficiary_id: 'ben_0000000000000000000000000' },
      idempotency_key: crypto.randomUUID(),
      credentials: payer,
    });
    expect(missing.json()).toMatchObject({ error: { code: 'resource_not_found', details: { field: 'beneficiary_id' } } });
  });

  it.skipIf(!usingPostgres)('a replayed request takes no lock of its carried reads; a new one waits for the end user it serialises', async () => {
    const end_user_ref = 'carried-lock-user';
    const body = depositBody(100_000, end_user_ref);
    const key = crypto.randomUUID();
    const first = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body, idempotency_key: key, credentials: merchant });
    expect(first.statusCode, first.body).toBe(201);

    // Another session holds the end user's creation lock, as a concurrent creation would.
    const holder = new pg.Client({ connectionString: app.testDatabase.url! });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`deposits:user:${merchant.white_label_id}:${merchant.merchant_id}:false:${end_user_ref}`]);
      const replay = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body, idempotency_key: key, credentials: merchant });
      expect(replay.headers['idempotent-replay']).toBe('true');
      expect(replay.body).toBe(first.body);

      let answered = false;
      const second = app.signed({ method: 'POST', url: '/v1/pay/deposits', body: { ...body, merchant_reference: 'carried-lock-2' }, idempotency_key: crypto.randomUUID(), credentials: merchant }).then((response) => {
        answered = true;
        return response;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered).toBe(false);
      await holder.query('COMMIT');
      const response = await second;
      // The same end user, amount and sender: the duplicate check, read after the lock, sees the first order.
      expect(response.json()).toMatchObject({ error: { code: 'duplicate_open_deposit' } });
    } finally {
      await holder.end();
    }
  });
});
