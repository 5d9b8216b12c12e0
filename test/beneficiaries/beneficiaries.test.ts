import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, TEST_MASTER_KEY, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import { ApiError } from '../../src/platform/errors.ts';
import {
  BENEFICIARY_TRANSITIONS,
  BeneficiaryService,
  deriveAccountLookupKey,
  startsWithHonorific,
  verifyBeneficiary,
  VERIFY_BENEFICIARY_TASK,
  type BeneficiaryView,
} from '../../src/beneficiaries/service.ts';

const URL = '/v1/pay/beneficiaries';
const ACCOUNT_LOOKUP_KEY = deriveAccountLookupKey(TEST_MASTER_KEY);
/** A seeded sandbox account (bank 002): สมชาย ใจดี / Somchai Jaidee, open. */
const SOMCHAI = { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' };

let app: TestApp;
let service: BeneficiaryService;
let live: MerchantCredentials;

beforeAll(async () => {
  // The service wires the routes and the verification job handler itself.
  app = await createTestApp();
  const services = app.instance.services;
  service = new BeneficiaryService({
    events: services.events,
    clock: services.clock,
    secretBox: services.secretBox,
    account_lookup_key: ACCOUNT_LOOKUP_KEY,
  });
  const liveKey = await services.tenancy.createApiKey(
    { actor_type: 'system', actor_id: 'test', request_id: null },
    { merchant_id: app.sandbox.merchant_id, scope_white_label_id: app.sandbox.white_label_id, livemode: true },
  );
  live = { ...app.sandbox, api_key: liveKey.api_key, signing_secret: liveKey.signing_secret };
});
afterAll(async () => {
  await app.close();
});

let keySequence = 0;
function create(body: unknown, options: { credentials?: MerchantCredentials; idempotency_key?: string } = {}) {
  keySequence += 1;
  return app.signed({
    method: 'POST',
    url: URL,
    body,
    idempotency_key: options.idempotency_key ?? `ben-${keySequence}`,
    credentials: options.credentials,
  });
}

function get(id: string, credentials?: MerchantCredentials) {
  return app.signed({ url: `${URL}/${id}`, credentials });
}

async function eventsOf(id: string): Promise<{ type: string; envelope: Record<string, unknown>; text: string }[]> {
  const { rows } = await app.instance.services.database.query<{ type: string; text: string }>(
    'SELECT type, envelope::text AS text FROM events WHERE object_id = $1 ORDER BY sequence',
    [id],
  );
  return rows.map((row) => ({ type: row.type, text: row.text, envelope: JSON.parse(row.text) as Record<string, unknown> }));
}

async function storedRowText(id: string): Promise<string> {
  const { rows } = await app.instance.services.database.query<{ text: string }>(
    'SELECT row_to_json(b)::text AS text FROM beneficiaries b WHERE beneficiary_id = $1',
    [id],
  );
  return rows[0]?.text ?? '';
}

async function jobsOf(id: string) {
  const { rows } = await app.instance.services.database.query<{ status: string; attempts: number; last_error: string | null; payload: unknown }>(
    'SELECT status, attempts, last_error, payload FROM jobs WHERE task = $1 AND job_key = $2 ORDER BY created_at',
    [VERIFY_BENEFICIARY_TASK, `${VERIFY_BENEFICIARY_TASK}:${id}`],
  );
  return rows;
}

/** Adds (or replaces) an account in the brand's sandbox directory. */
async function sandboxAccount(account: { bank_code: string; account_number: string; holder_name_th: string; holder_name_en?: string; status?: string }) {
  keySequence += 1;
  const response = await app.signed({ method: 'POST', url: '/v1/test/bank/accounts', body: account, idempotency_key: `acct-${keySequence}` });
  expect([200, 201]).toContain(response.statusCode);
}

describe('beneficiaries: creation and verification', () => {
  let created: BeneficiaryView;

  it('creates a pending beneficiary (201) with a masked number, and the full number nowhere', async () => {
    const response = await create({ ...SOMCHAI, account_name_en: 'Somchai Jaidee', promptpay_id: '0812345678', end_user_ref: 'user-1' });
    expect(response.statusCode).toBe(201);
    created = response.json<BeneficiaryView>();
    expect(created).toEqual({
      id: expect.stringMatching(/^ben_/) as string,
      object: 'beneficiary',
      version: 1,
      status: 'pending_verification',
      bank_code: '002',
      bank_name_th: 'ธนาคารกรุงเทพ',
      account_number_masked: '******7890',
      account_name_th: 'สมชาย ใจดี',
      account_name_en: 'Somchai Jaidee',
      promptpay_id_masked: '******5678',
      end_user_ref: 'user-1',
      verification: null,
      livemode: false,
      created_at: '2026-08-01T00:00:00.000Z',
      verified_at: null,
    });
    expect(response.body).not.toContain('1234567890');
    expect(response.body).not.toContain('0812345678');

    const events = await eventsOf(created.id);
    expect(events.map((event) => event.type)).toEqual(['beneficiary.created']);
    expect((events[0]!.envelope.data as { previous_attributes: unknown }).previous_attributes).toBeNull();
    expect(events[0]!.text).not.toContain('1234567890');

    const row = await storedRowText(created.id);
    expect(row).not.toBe('');
    expect(row).not.toContain('1234567890');
    expect(row).not.toContain('0812345678');
    const jobs = await jobsOf(created.id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.status).toBe('pending');
    expect(JSON.stringify(jobs[0]!.payload)).not.toContain('1234567890');
  });

  it('keeps the number sealed but recoverable for the payout', async () => {
    const account = { white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false };
    expect((await service.payee(app.instance.services.database, account, created.id))?.account_number).toBe('1234567890');
  });

  it('verifies it in the job: beneficiary.verified with previous status and version', async () => {
    app.clock.advance(5_000);
    await app.instance.worker.runDueJobs();
    const response = await get(created.id);
    expect(response.statusCode).toBe(200);
    const view = response.json<BeneficiaryView>();
    expect(view).toMatchObject({
      status: 'verified',
      version: 2,
      verification: { checked_at: '2026-08-01T00:00:05.000Z', name_match: true },
      verified_at: '2026-08-01T00:00:05.000Z',
    });
    expect(view.verification).not.toHaveProperty('failure_code');
    const events = await eventsOf(created.id);
    expect(events.map((event) => event.type)).toEqual(['beneficiary.created', 'beneficiary.verified']);
    const data = events[1]!.envelope.data as { object: BeneficiaryView; previous_attributes: Record<string, unknown> };
    expect(data.object).toEqual(view);
    expect(data.previous_attributes).toEqual({ status: 'pending_verification', verification: null, verified_at: null, version: 1 });
    expect(events[1]!.text).not.toContain('1234567890');
    expect((await jobsOf(created.id))[0]!.status).toBe('succeeded');
  });

  it('a stale or repeated verification does nothing', async () => {
    const services = app.instance.services;
    const payload = { white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false, beneficiary_id: created.id, version: 1 };
    const outcome = await verifyBeneficiary(services.database, app.clock, { events: services.events, secretBox: services.secretBox }, payload);
    expect(outcome).toBe('stale');
    expect((await eventsOf(created.id)).length).toBe(2);
  });

  it('creating the same account again returns the existing beneficiary (200), no new row or event', async () => {
    const response = await create({ ...SOMCHAI, account_name_th: 'ชื่ออื่น' });
    expect(response.statusCode).toBe(200);
    expect(response.json<BeneficiaryView>()).toMatchObject({ id: created.id, status: 'verified', version: 2, account_name_th: 'สมชาย ใจดี' });
    const { rows } = await app.instance.services.database.query<{ count: number }>(
      'SELECT count(*)::integer AS count FROM beneficiaries WHERE merchant_id = $1 AND livemode = false AND bank_code = $2 AND account_number_last4 = $3',
      [app.sandbox.merchant_id, '002', '7890'],
    );
    expect(rows[0]!.count).toBe(1);
    expect((await eventsOf(created.id)).length).toBe(2);
  });

  it('matches English against English when the Thai name differs', async () => {
    const response = await create({ bank_code: '002', account_number: '2345678901', account_name_th: 'วิภาวรรณ ศรีสุก', account_name_en: 'MS. WIPAWAN SRISUK' });
    expect(response.statusCode).toBe(201);
    await app.instance.worker.runDueJobs();
    expect((await get(response.json<BeneficiaryView>().id)).json()).toMatchObject({ status: 'verified', verification: { name_match: true } });
  });

  it.each([
    { label: 'name mismatch', body: { ...SOMCHAI, account_number: '0123456789', bank_code: '004' }, failure_code: 'name_mismatch', name_match: false },
    { label: 'closed account', body: { bank_code: '006', account_number: '9876543210', account_name_th: 'อนุชา แก้วมณี' }, failure_code: 'account_closed', name_match: true },
    { label: 'frozen account', body: { bank_code: '011', account_number: '6667778889', account_name_th: 'ณัฐธิดา บุญมา' }, failure_code: 'account_frozen', name_match: true },
    { label: 'unknown account', body: { bank_code: '014', account_number: '1231231231', account_name_th: 'ใครก็ไม่รู้' }, failure_code: 'account_not_found', name_match: false },
  ])('rejects on $label with beneficiary.verification_failed', async ({ body, failure_code, name_match }) => {
    const response = await create(body);
    expect(response.statusCode).toBe(201);
    const id = response.json<BeneficiaryView>().id;
    await app.instance.worker.runDueJobs();
    const view = (await get(id)).json<BeneficiaryView>();
    expect(view).toMatchObject({ status: 'rejected', version: 2, verified_at: null, verification: { name_match, failure_code } });
    const events = await eventsOf(id);
    expect(events.map((event) => event.type)).toEqual(['beneficiary.created', 'beneficiary.verification_failed']);
    expect((events[1]!.envelope.data as { previous_attributes: Record<string, unknown> }).previous_attributes).toMatchObject({
      status: 'pending_verification',
      version: 1,
    });
    expect(events[1]!.text).not.toContain(body.account_number);
  });

  it('verifies against an account the merchant added to the sandbox directory', async () => {
    await sandboxAccount({ bank_code: '069', account_number: '2005550001', holder_name_th: 'ทดสอบ ระบบ' });
    const response = await create({ bank_code: '069', account_number: '2005550001', account_name_th: 'ทดสอบ  ระบบ' });
    await app.instance.worker.runDueJobs();
    expect((await get(response.json<BeneficiaryView>().id)).json()).toMatchObject({ status: 'verified' });
  });

  it('live mode has no directory yet: stays pending, the job is retried, no number in its error', async () => {
    const response = await create(SOMCHAI, { credentials: live });
    expect(response.statusCode).toBe(201);
    const view = response.json<BeneficiaryView>();
    expect(view).toMatchObject({ livemode: true, status: 'pending_verification' });
    expect(view.id).not.toBe(created.id);
    await app.instance.worker.runDueJobs();
    expect((await get(view.id, live)).json()).toMatchObject({ status: 'pending_verification', version: 1, verification: null });
    const jobs = await jobsOf(view.id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ status: 'pending', attempts: 1 });
    expect(jobs[0]!.last_error).toContain('bank_unavailable');
    expect(jobs[0]!.last_error).not.toContain('1234567890');
    expect((await eventsOf(view.id)).map((event) => event.type)).toEqual(['beneficiary.created']);
    // Another environment's id is not found.
    expect((await get(view.id)).statusCode).toBe(404);
    expect((await get(created.id, live)).statusCode).toBe(404);
  });

  it('another merchant cannot see the beneficiary (404) and has its own for the same account', async () => {
    const other = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const response = await get(created.id, other);
    expect(response.statusCode).toBe(404);
    expect(errorOf(response).code).toBe('resource_not_found');
    const own = await create(SOMCHAI, { credentials: other });
    expect(own.statusCode).toBe(201);
    expect(own.json<BeneficiaryView>().id).not.toBe(created.id);
    expect((await get('ben_01UNKNOWN')).statusCode).toBe(404);
  });

  it('replays an idempotent POST with the same body and status', async () => {
    const body = { bank_code: '025', account_number: '8889990001', account_name_th: 'วรวุฒิ ประเสริฐศักดิ์' };
    const first = await create(body, { idempotency_key: 'ben-replay' });
    const second = await create(body, { idempotency_key: 'ben-replay' });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replay']).toBe('true');
    expect(second.body).toBe(first.body);
    expect((await eventsOf(first.json<BeneficiaryView>().id)).length).toBe(1);
  });

  it('has a transition table of four moves', () => {
    expect(BENEFICIARY_TRANSITIONS.list().map((rule) => `${rule.from ?? '(none)'}->${rule.to}`)).toEqual([
      '(none)->pending_verification',
      // A refund's payer, proven by the bank's verified transfer from the account (issue 32).
      '(none)->verified',
      'pending_verification->verified',
      'pending_verification->rejected',
    ]);
  });
});

describe('beneficiaries: validation', () => {
  function fieldsOf(response: { statusCode: number; json: () => unknown }) {
    expect(response.statusCode).toBe(422);
    const error = (response.json() as { error: { code: string; details: { fields: { path: string; reason: string }[] } } }).error;
    expect(error.code).toBe('validation_error');
    return error.details.fields.map((field) => `${field.path}:${field.reason}`).sort();
  }

  it('names every bad field with its reason', async () => {
    const response = await create({
      bank_code: '2',
      account_number: '12-3456',
      account_name_th: 'นายสมชาย ใจดี',
      promptpay_id: '12345',
      end_user_ref: 'x'.repeat(65),
      nickname: 'x',
    });
    expect(fieldsOf(response)).toEqual([
      'account_name_th:must_not_contain_title',
      'account_number:must_be_digits',
      'bank_code:unknown_bank',
      'end_user_ref:too_long',
      'nickname:unknown_field',
      'promptpay_id:must_be_digits',
    ]);
    expect(response.body).not.toContain('12-3456');
  });

  it('requires bank_code, account_number and account_name_th', async () => {
    expect(fieldsOf(await create({}))).toEqual(['account_name_th:required', 'account_number:required', 'bank_code:required']);
  });

  it('refuses a bank that is not in the list, and one that cannot receive', async () => {
    expect(fieldsOf(await create({ ...SOMCHAI, bank_code: '999' }))).toEqual(['bank_code:unknown_bank']);
    expect(fieldsOf(await create({ ...SOMCHAI, bank_code: '067' }))).toEqual(['bank_code:bank_not_receiving']);
  });

  it('refuses Thai and English honorifics, attached or spaced', async () => {
    for (const name of ['นางสาวสมหญิง รักไทย', 'น.ส. สมหญิง', 'Mr. Somchai', 'นาย']) {
      expect(fieldsOf(await create({ ...SOMCHAI, account_name_th: name }))).toEqual(['account_name_th:must_not_contain_title']);
    }
    expect(startsWithHonorific('สมชาย ใจดี')).toBe(false);
    expect(startsWithHonorific('  Mrs Somying')).toBe(true);
  });
});

describe('beneficiaries: the withdrawal side', () => {
  const account = () => ({ white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false });
  const inline = { bank_code: '014', account_number: '1472583690', account_name_th: 'พิชัย สุวรรณรัตน์', promptpay_id: '1234567890123' };

  it('ensureForWithdrawal creates and enqueues a new one, unverified; again returns it; verified after the job', async () => {
    const db = app.instance.services.database;
    const first = await db.transaction((tx) => service.ensureForWithdrawal(tx, account(), inline, SYSTEM_CAUSE));
    expect(first).toMatchObject({ created: true, verified: false, beneficiary: { status: 'pending_verification', promptpay_id_masked: '******0123' } });
    const again = await db.transaction((tx) => service.ensureForWithdrawal(tx, account(), inline, SYSTEM_CAUSE));
    expect(again).toMatchObject({ created: false, verified: false, beneficiary: { id: first.beneficiary.id } });
    expect(await jobsOf(first.beneficiary.id)).toHaveLength(1);
    await app.instance.worker.runDueJobs();
    const after = await db.transaction((tx) => service.ensureForWithdrawal(tx, account(), inline, SYSTEM_CAUSE));
    expect(after).toMatchObject({ created: false, verified: true, beneficiary: { id: first.beneficiary.id, status: 'verified' } });
    expect((await eventsOf(first.beneficiary.id)).map((event) => event.type)).toEqual(['beneficiary.created', 'beneficiary.verified']);
  });

  it('ensureForWithdrawal rolls back with the caller, and names fields under beneficiary.', async () => {
    const db = app.instance.services.database;
    const error = await db
      .transaction((tx) => service.ensureForWithdrawal(tx, account(), { ...inline, bank_code: '070' }, SYSTEM_CAUSE))
      .catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).details).toEqual({ fields: [{ path: 'beneficiary.bank_code', reason: 'bank_not_receiving', hint: 'this bank cannot receive payouts' }] });

    const marker = { bank_code: '030', account_number: '020012345678', account_name_th: 'มาลี พึ่งบุญ' };
    await db
      .transaction(async (tx) => {
        await service.ensureForWithdrawal(tx, account(), marker, SYSTEM_CAUSE);
        throw new Error('withdrawal refused');
      })
      .catch(() => undefined);
    const { rows } = await db.query("SELECT 1 FROM beneficiaries WHERE bank_code = '030'");
    expect(rows).toHaveLength(0);
  });

  it('findForWithdrawal is scoped to the merchant and environment', async () => {
    const db = app.instance.services.database;
    const response = await create({ bank_code: '025', account_number: '9990001112', account_name_th: 'สุภาพร เจริญผล' });
    const id = response.json<BeneficiaryView>().id;
    expect(await db.transaction((tx) => service.findForWithdrawal(tx, account(), id))).toMatchObject({ id, status: 'pending_verification' });
    expect(await db.transaction((tx) => service.findForWithdrawal(tx, { ...account(), livemode: true }, id))).toBeNull();
    expect(await db.transaction((tx) => service.findForWithdrawal(tx, { ...account(), merchant_id: 'mch_other' }, id))).toBeNull();
  });
});
