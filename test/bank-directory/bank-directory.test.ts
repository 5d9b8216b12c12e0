import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { namesMatch, normaliseName } from '../../src/bank-directory/port.ts';
import { seedSandboxDirectory } from '../../src/bank-directory/routes.ts';
import { SANDBOX_SEED_ACCOUNTS, SandboxBankDirectory } from '../../src/bank-directory/sandbox-adapter.ts';
import { countAccounts } from '../../src/bank-directory/repository.ts';
import { InvariantViolation } from '../../src/platform/assert.ts';
import { findBank, forgetBankList } from '../../src/banks/service.ts';
import type { Queryable } from '../../src/platform/db.ts';

const ACCOUNTS = '/v1/test/bank/accounts';

let app: TestApp;
let directory: SandboxBankDirectory;

beforeAll(async () => {
  app = await createTestApp();
  directory = new SandboxBankDirectory(app.instance.services.database, app.clock);
});
afterAll(async () => {
  await app.close();
});

/** Reads an account through the sandbox endpoint (a POST: the number never goes into a URL). */
function readAccount(bank_code: string, account_number: string, credentials?: MerchantCredentials) {
  return app.signed({
    method: 'POST',
    url: `${ACCOUNTS}/lookup`,
    body: { bank_code, account_number },
    idempotency_key: `lookup-${bank_code}-${account_number}-${Math.random()}`,
    credentials,
  });
}

function lookup(bank_code: string, account_number: string, white_label_id = app.sandbox.white_label_id, merchant_id = app.sandbox.merchant_id) {
  return directory.lookupAccount({ white_label_id, merchant_id, livemode: false, bank_code, account_number });
}

let keySequence = 0;
function createAccount(body: unknown, options: { credentials?: MerchantCredentials; idempotency_key?: string } = {}) {
  keySequence += 1;
  return app.signed({
    method: 'POST',
    url: ACCOUNTS,
    body,
    idempotency_key: options.idempotency_key ?? `bank-dir-${keySequence}`,
    credentials: options.credentials,
  });
}

describe('bank directory port (sandbox adapter): lookups', () => {
  it('finds a seeded account with its Thai and English names', async () => {
    expect(await lookup('002', '1234567890')).toEqual({
      outcome: 'found',
      holder_name_th: 'สมชาย ใจดี',
      holder_name_en: 'Somchai Jaidee',
      account_status: 'open',
    });
  });

  it('finds a business account, and an account without an English name', async () => {
    expect(await lookup('002', '3456789012')).toMatchObject({ outcome: 'found', holder_name_th: 'บริษัท ตัวอย่าง จำกัด' });
    expect(await lookup('014', '7778889990')).toMatchObject({ outcome: 'found', holder_name_en: null });
  });

  it('answers not_found for an unknown number, and for a known number at another bank', async () => {
    expect(await lookup('002', '1111111111')).toEqual({ outcome: 'not_found' });
    expect(await lookup('004', '1234567890')).toEqual({ outcome: 'not_found' });
  });

  it('reports closed and frozen accounts as found with their status', async () => {
    expect(await lookup('006', '9876543210')).toMatchObject({ outcome: 'found', account_status: 'closed' });
    expect(await lookup('011', '6667778889')).toMatchObject({ outcome: 'found', account_status: 'frozen' });
  });

  it('answers bank_unavailable for an unavailable bank (098) and an unknown bank code', async () => {
    expect(await lookup('098', '1234567890')).toEqual({ outcome: 'bank_unavailable' });
    expect(await lookup('999', '1234567890')).toEqual({ outcome: 'bank_unavailable' });
  });

  it("never answers with another brand's account", async () => {
    const other = await app.createMerchant();
    const created = await createAccount({ bank_code: '004', account_number: '5550001111', holder_name_th: 'ลับเฉพาะ แบรนด์อื่น' }, { credentials: other });
    expect(created.statusCode).toBe(201);
    expect(await lookup('004', '5550001111', other.white_label_id, other.merchant_id)).toMatchObject({ outcome: 'found' });
    expect(await lookup('004', '5550001111')).toEqual({ outcome: 'not_found' });
    const seen = await readAccount('004', '5550001111');
    expect(seen.statusCode).toBe(404);
  });

  it("never answers with another merchant's account of the same brand, nor lets it change the shared baseline", async () => {
    const neighbour = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    // The neighbour adds an account of its own and freezes a seeded one, for itself.
    expect((await createAccount({ bank_code: '069', account_number: '7770001111', holder_name_th: 'เฉพาะ ร้านข้างเคียง' }, { credentials: neighbour })).statusCode).toBe(201);
    const frozen = await createAccount({ bank_code: '025', account_number: '9990001112', holder_name_th: 'สุภาพร เจริญผล', status: 'frozen' }, { credentials: neighbour });
    expect(frozen.statusCode).toBe(200);
    expect(await lookup('025', '9990001112', neighbour.white_label_id, neighbour.merchant_id)).toMatchObject({ account_status: 'frozen' });
    expect(await lookup('069', '7770001111', neighbour.white_label_id, neighbour.merchant_id)).toMatchObject({ outcome: 'found' });
    // The sandbox merchant sees neither: the baseline account is still open, the neighbour's is unknown.
    expect(await lookup('025', '9990001112')).toMatchObject({ outcome: 'found', account_status: 'open' });
    expect(await lookup('069', '7770001111')).toEqual({ outcome: 'not_found' });
    expect((await readAccount('069', '7770001111')).statusCode).toBe(404);
    expect((await readAccount('025', '9990001112')).json()).toMatchObject({ status: 'open' });
    // A beneficiary of the sandbox merchant at the account the neighbour froze for itself still verifies.
    const beneficiary = await app.signed({
      method: 'POST',
      url: '/v1/pay/beneficiaries',
      idempotency_key: `ben-${Math.random()}`,
      body: { bank_code: '025', account_number: '9990001112', account_name_th: 'สุภาพร เจริญผล' },
    });
    expect(beneficiary.statusCode, beneficiary.body).toBeLessThan(300);
    await app.instance.worker.runDueJobs();
    const read = await app.signed({ url: `/v1/pay/beneficiaries/${beneficiary.json<{ id: string }>().id}` });
    expect(read.json()).toMatchObject({ status: 'verified' });
  });

  it('refuses live lookups with an invariant violation (wiring picks the adapter per mode)', async () => {
    await expect(
      directory.lookupAccount({ white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: true, bank_code: '002', account_number: '1234567890' }),
    ).rejects.toBeInstanceOf(InvariantViolation);
  });
});

describe('bank directory port (sandbox adapter): availability', () => {
  it('is available on both sides for a two-sided bank', async () => {
    expect(await directory.bankAvailability({ bank_code: '002', side: 'sender' })).toEqual({ available: true });
    expect(await directory.bankAvailability({ bank_code: '002', side: 'receiver' })).toEqual({ available: true });
  });

  it('is available as sender only for a sender-only bank (067)', async () => {
    expect(await directory.bankAvailability({ bank_code: '067', side: 'sender' })).toEqual({ available: true });
    expect(await directory.bankAvailability({ bank_code: '067', side: 'receiver' })).toEqual({ available: false });
  });

  it('is unavailable with the Thai message for 098, on every side', async () => {
    for (const side of ['sender', 'receiver'] as const) {
      const answer = await directory.bankAvailability({ bank_code: '098', side });
      expect(answer.available).toBe(false);
      expect(answer.message_th).toMatch(/ธนาคาร/);
    }
  });

  it('is unavailable without a message for an unknown bank', async () => {
    expect(await directory.bankAvailability({ bank_code: '999', side: 'sender' })).toEqual({ available: false });
  });
});

describe('namesMatch', () => {
  const somchai = { holder_name_th: 'สมชาย ใจดี', holder_name_en: 'Somchai Jaidee' };

  it('matches the exact Thai and English names', () => {
    expect(namesMatch('สมชาย ใจดี', somchai)).toBe(true);
    expect(namesMatch('Somchai Jaidee', somchai)).toBe(true);
  });

  it('strips Thai honorifics, attached or spaced', () => {
    expect(namesMatch('นายสมชาย ใจดี', somchai)).toBe(true);
    expect(namesMatch('นาย สมชาย ใจดี', somchai)).toBe(true);
    const somying = { holder_name_th: 'สมหญิง รักไทย', holder_name_en: null };
    for (const declared of ['นางสมหญิง รักไทย', 'นางสาวสมหญิง รักไทย', 'นางสาว สมหญิง รักไทย', 'น.ส.สมหญิง รักไทย', 'ด.ญ.สมหญิง รักไทย']) {
      expect(namesMatch(declared, somying), declared).toBe(true);
    }
    expect(namesMatch('ด.ช. สมชาย ใจดี', somchai)).toBe(true);
    // The holder's stored name may carry the honorific too.
    expect(namesMatch('สมชาย ใจดี', { holder_name_th: 'นายสมชาย ใจดี', holder_name_en: null })).toBe(true);
  });

  it('strips English honorifics with or without a dot, in any case', () => {
    for (const declared of ['Mr Somchai Jaidee', 'Mr. Somchai Jaidee', 'MR.Somchai Jaidee', 'mrs somchai jaidee', 'Ms. Somchai Jaidee', 'Miss Somchai Jaidee']) {
      expect(namesMatch(declared, somchai), declared).toBe(true);
    }
  });

  it('ignores surrounding, repeated and invisible whitespace, and Latin case', () => {
    expect(namesMatch('  สมชาย   ใจดี ', somchai)).toBe(true);
    expect(namesMatch('สมชาย\u00a0ใจดี', somchai)).toBe(true);
    expect(namesMatch('สมชาย\u200b ใจดี', somchai)).toBe(true);
    expect(namesMatch('SOMCHAI   jaidee', somchai)).toBe(true);
    expect(namesMatch('Somchai\tJaidee', somchai)).toBe(true);
  });

  it('does not match a different name, a partial name, or a one-mark difference', () => {
    expect(namesMatch('สมชาย', somchai)).toBe(false);
    expect(namesMatch('สมชาย ใจดีมาก', somchai)).toBe(false);
    expect(namesMatch('สมชาย ใจด', somchai)).toBe(false);
    expect(namesMatch('Somchay Jaidee', somchai)).toBe(false);
    expect(namesMatch('สมชายใจดี', somchai)).toBe(false);
  });

  it('compares English only against the English name, and never matches an empty name', () => {
    expect(namesMatch('Somchai Jaidee', { holder_name_th: 'สมชาย ใจดี', holder_name_en: null })).toBe(false);
    expect(namesMatch('', somchai)).toBe(false);
    expect(namesMatch('นาย', { holder_name_th: 'นาย', holder_name_en: null })).toBe(false);
  });

  it('does not strip a word that only starts like an English honorific', () => {
    expect(normaliseName('Missy Elliott')).toBe('missy elliott');
    expect(normaliseName('Mrsomchai')).toBe('mrsomchai');
  });
});

describe('sandbox endpoints', () => {
  it('creates an account (201) that the port then finds, and reads it back', async () => {
    const response = await createAccount({
      bank_code: '025',
      account_number: '123456',
      holder_name_th: 'ทดสอบ ระบบ',
      holder_name_en: 'Thotsop Rabop',
      account_type: 'business',
    });
    expect(response.statusCode).toBe(201);
    expect(response.json()).toMatchObject({
      object: 'sandbox_bank_account',
      livemode: false,
      bank_code: '025',
      account_number: '123456',
      holder_name_th: 'ทดสอบ ระบบ',
      holder_name_en: 'Thotsop Rabop',
      account_type: 'business',
      status: 'open',
      created_at: '2026-08-01T00:00:00.000Z',
    });
    expect(await lookup('025', '123456')).toEqual({
      outcome: 'found',
      holder_name_th: 'ทดสอบ ระบบ',
      holder_name_en: 'Thotsop Rabop',
      account_status: 'open',
    });
    const read = await readAccount('025', '123456');
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(response.json());
  });

  it('replaces an existing account (200), e.g. to freeze it', async () => {
    const response = await createAccount({ bank_code: '002', account_number: '2345678901', holder_name_th: 'วิภาวรรณ ศรีสุข', status: 'frozen' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ status: 'frozen', holder_name_en: null, account_type: 'personal' });
    expect(await lookup('002', '2345678901')).toMatchObject({ account_status: 'frozen' });
  });

  it('replays the POST for the same Idempotency-Key and carries the rate headers', async () => {
    const body = { bank_code: '030', account_number: '020011112222', holder_name_th: 'ซ้ำ สองครั้ง' };
    const first = await createAccount(body, { idempotency_key: 'bank-dir-replay' });
    const second = await createAccount(body, { idempotency_key: 'bank-dir-replay' });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replay']).toBe('true');
    expect(second.body).toBe(first.body);
    for (const header of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-ratelimit-scope', 'retry-after']) {
      expect(first.headers[header], header).toBeDefined();
    }
    expect(first.headers['ratelimit-policy']).toBe('600;w=60');
    expect(first.headers['x-ratelimit-scope']).toBe('api_key');
    // The lookup is a POST (the number stays out of the URL), so it counts in the write bucket.
    const read = await readAccount('030', '020011112222');
    expect(read.headers['ratelimit-policy']).toBe('600;w=60');
  });

  it('answers 404 resource_not_found to a live key, whatever the body', async () => {
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const valid = await createAccount({ bank_code: '002', account_number: '9999999999', holder_name_th: 'ไลฟ์ โหมด' }, { credentials: live });
    expect(valid.statusCode).toBe(404);
    expect(errorOf(valid).code).toBe('resource_not_found');
    const invalid = await createAccount({ bank_code: 'x' }, { credentials: live });
    expect(invalid.statusCode).toBe(404);
    const read = await readAccount('002', '1234567890', live);
    expect(read.statusCode).toBe(404);
    expect(errorOf(read).code).toBe('resource_not_found');
    expect(await lookup('002', '9999999999')).toEqual({ outcome: 'not_found' });
  });

  it('answers 404 for an unknown account, and for a malformed code or number', async () => {
    for (const path of ['002/1111111111', '999/1234567890', '02/1234567890', '002/12345', '002/12345x7890']) {
      const [bank_code, account_number] = path.split('/') as [string, string];
      const response = await readAccount(bank_code, account_number);
      expect(response.statusCode, path).toBe(404);
      expect(errorOf(response).code).toBe('resource_not_found');
    }
  });

  it('refuses invalid bodies with exact fields and reasons', async () => {
    const cases: Array<[unknown, Array<{ path: string; reason: string }>]> = [
      [{ bank_code: '999', account_number: '1234567890', holder_name_th: 'ก ข' }, [{ path: 'bank_code', reason: 'unknown_bank' }]],
      [{ bank_code: '02', account_number: '1234567890', holder_name_th: 'ก ข' }, [{ path: 'bank_code', reason: 'unknown_bank' }]],
      [{ bank_code: '002', account_number: '123-456-7890', holder_name_th: 'ก ข' }, [{ path: 'account_number', reason: 'must_be_digits' }]],
      [{ bank_code: '002', account_number: '12345', holder_name_th: 'ก ข' }, [{ path: 'account_number', reason: 'must_be_digits' }]],
      [{ bank_code: '002', account_number: '1'.repeat(21), holder_name_th: 'ก ข' }, [{ path: 'account_number', reason: 'must_be_digits' }]],
      [{ bank_code: '002', account_number: '1234567890', holder_name_th: '   ' }, [{ path: 'holder_name_th', reason: 'too_short' }]],
      [{ bank_code: '002', account_number: '1234567890', holder_name_th: 'ก'.repeat(101) }, [{ path: 'holder_name_th', reason: 'too_long' }]],
      [{ bank_code: '002', account_number: '1234567890', holder_name_th: 'ก ข', holder_name_en: '' }, [{ path: 'holder_name_en', reason: 'too_short' }]],
      [{ bank_code: '002', account_number: '1234567890', holder_name_th: 'ก ข', status: 'dormant' }, [{ path: 'status', reason: 'not_allowed_value' }]],
      [{ bank_code: '002', account_number: '1234567890', holder_name_th: 'ก ข', account_type: 'joint' }, [{ path: 'account_type', reason: 'not_allowed_value' }]],
      [{ bank_code: '002', account_number: '1234567890', holder_name_th: 'ก ข', nickname: 'x' }, [{ path: 'nickname', reason: 'unknown_field' }]],
      [{ bank_code: '002', account_number: 1234567890, holder_name_th: 'ก ข' }, [{ path: 'account_number', reason: 'must_be_string' }]],
      [
        { account_number: '1234567890' },
        [
          { path: 'bank_code', reason: 'required' },
          { path: 'holder_name_th', reason: 'required' },
        ],
      ],
    ];
    for (const [body, fields] of cases) {
      const response = await createAccount(body);
      expect(response.statusCode, JSON.stringify(body)).toBe(422);
      const error = errorOf(response);
      expect(error.code).toBe('validation_error');
      const got = (error.details.fields as Array<{ path: string; reason: string }>).map(({ path, reason }) => ({ path, reason }));
      expect(got, JSON.stringify(body)).toEqual(fields);
    }
    // Nothing was written by the refused requests.
    expect(await lookup('002', '1234567890')).toMatchObject({ holder_name_th: 'สมชาย ใจดี' });
  });
});

describe('seeding', () => {
  it('seeds a brand on first use and is idempotent', async () => {
    const db = app.instance.services.database;
    const brand = await app.createMerchant();
    expect(await countAccounts(db, brand.white_label_id)).toBe(0);
    expect(await lookup('002', '1234567890', brand.white_label_id)).toMatchObject({ outcome: 'found' });
    expect(await countAccounts(db, brand.white_label_id)).toBe(SANDBOX_SEED_ACCOUNTS.length);
    expect(await seedSandboxDirectory(db, brand.white_label_id)).toBe(0);
    expect(await seedSandboxDirectory(db, brand.white_label_id)).toBe(0);
    expect(await countAccounts(db, brand.white_label_id)).toBe(SANDBOX_SEED_ACCOUNTS.length);
  });

  it('seeds an empty brand directly, then inserts nothing the second time', async () => {
    const db = app.instance.services.database;
    const brand = await app.createMerchant();
    expect(await seedSandboxDirectory(db, brand.white_label_id)).toBe(SANDBOX_SEED_ACCOUNTS.length);
    expect(await seedSandboxDirectory(db, brand.white_label_id)).toBe(0);
    expect(await countAccounts(db, brand.white_label_id)).toBe(SANDBOX_SEED_ACCOUNTS.length);
  });

  it('seeds realistic data: about 20 accounts across the eight banks, with closed and frozen ones', () => {
    expect(SANDBOX_SEED_ACCOUNTS.length).toBeGreaterThanOrEqual(18);
    expect(new Set(SANDBOX_SEED_ACCOUNTS.map((account) => account.bank_code))).toEqual(new Set(['002', '004', '006', '011', '014', '025', '030', '069']));
    expect(SANDBOX_SEED_ACCOUNTS.some((account) => account.status === 'closed')).toBe(true);
    expect(SANDBOX_SEED_ACCOUNTS.some((account) => account.status === 'frozen')).toBe(true);
    expect(SANDBOX_SEED_ACCOUNTS.some((account) => account.account_type === 'business')).toBe(true);
    // Stored without honorifics, so that the stored name is already the normalised one.
    for (const account of SANDBOX_SEED_ACCOUNTS) expect(normaliseName(account.holder_name_th)).toBe(account.holder_name_th);
  });
});

describe('the bank list copy', () => {
  it('answers lookups from one read of the table, and sees an update once the copy is dropped', async () => {
    const database = app.instance.services.database;
    forgetBankList();
    let statements = 0;
    const counting: Queryable = {
      query: (sql, params) => {
        statements += 1;
        return database.query(sql, params);
      },
      exec: (sql) => database.exec(sql),
    };
    const bangkok = await findBank(counting, '002');
    const unknown = await findBank(counting, '999');
    const siam = await findBank(counting, '014');
    expect(statements).toBe(1);
    expect(bangkok?.bank_code).toBe('002');
    expect(unknown).toBeNull();
    expect(Object.isFrozen(siam)).toBe(true);
    const { rows } = await database.query("SELECT * FROM banks WHERE bank_code = '014'");
    expect(siam).toEqual(rows[0]);
    expect(siam?.available).toBe(true);
    await database.query("UPDATE banks SET available = false, message_th = 'ปิดปรับปรุงระบบชั่วคราว' WHERE bank_code = '014'");
    try {
      // Within its lifetime the copy answers; a dropped copy is read again.
      expect((await findBank(counting, '014'))?.available).toBe(true);
      forgetBankList();
      expect((await findBank(counting, '014'))?.available).toBe(false);
      expect(statements).toBe(2);
    } finally {
      await database.query("UPDATE banks SET available = true, message_th = NULL WHERE bank_code = '014'");
      forgetBankList();
    }
  });
});
