import crypto from 'node:crypto';
import { parse } from 'promptparse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, TEST_MASTER_KEY, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { accountOf, depositServiceWithoutSandboxLiquidity, fundAvailable, inTransaction, verifiedBeneficiary } from '../support/withdrawals.ts';
import { depositPolicyBody } from '../support/slips.ts';
import { hmacSha256Hex } from '../../src/platform/crypto.ts';
import { DEPOSIT_TRANSITIONS, type CreateDepositInput, type DepositView } from '../../src/deposits/service.ts';
import { maskName } from '../../src/deposits/masking.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import { SlipTokenSigner } from '../../src/slip-capability/capability.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import { MATCHING_QUEUE_HEAD_ORDERS } from '../../src/withdrawals/repository.ts';
import { PLANNED_PER_CALL } from '../../src/platform/db.ts';

/**
 * Deposit orders up to the slip (issue 4, first slice): creation rules, peer-to-peer matching through
 * the withdrawal side, the sandbox counterparty, the liquidity wait, expiry, cancel, the slip upload
 * capability. Each block uses its own end users, so the open-order caps do not leak between tests.
 */

let app: TestApp;
let userCounter = 0;
const HOUR_MS = 3600_000;

beforeAll(async () => {
  app = await createTestApp(process.env.DEBUG_DEPOSITS ? { logger: (await import('../../src/platform/logger.ts')).createLogger('error') } : {});
});
afterAll(async () => {
  await app.close();
});

function nextUser(): string {
  userCounter += 1;
  return `end-user-${userCounter}`;
}

const SENDER = { bank_code: '004', account_number: '0123456789', account_name_th: 'สมหญิง รักไทย' };

function body(amount_minor: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const user = nextUser();
  return {
    amount_minor,
    currency: 'THB',
    merchant_reference: `ref-${user}`,
    end_user_ref: user,
    // A sender account of its own, so that the merchant-wide duplicate check never links two tests.
    sender: { ...SENDER, account_number: `01${String(userCounter).padStart(8, '0')}` },
    client: { device_fingerprint: `fp-${user}`, ip: '203.0.113.7', user_agent: 'Mozilla/5.0' },
    ...extra,
  };
}

async function createDeposit(payload: unknown, credentials?: MerchantCredentials, idempotency_key = `dep-${crypto.randomUUID()}`) {
  return app.signed({ method: 'POST', url: '/v1/pay/deposits', body: payload, idempotency_key, ...(credentials ? { credentials } : {}) });
}

async function getDeposit(id: string, credentials?: MerchantCredentials): Promise<DepositView> {
  const response = await app.signed({ url: `/v1/pay/deposits/${id}`, ...(credentials ? { credentials } : {}) });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<DepositView>();
}

async function eventsOf(id: string) {
  const { rows } = await app.testDatabase.database.query<{ type: string; text: string }>('SELECT type, envelope::text AS text FROM events WHERE object_id = $1 ORDER BY sequence', [id]);
  return rows.map((row) => ({ type: row.type, text: row.text, data: (JSON.parse(row.text) as { data: { object: DepositView; previous_attributes: Record<string, unknown> | null } }).data }));
}

async function countDeposits(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM deposit_orders');
  return Number(rows[0]?.count);
}

/**
 * A brand of its own, so that matching sees no other test's orders, with a depositor and a withdrawer funded
 * with `funds_minor` and a verified payee.
 */
async function brandWithWithdrawer(name: string, funds_minor: number): Promise<{ brand_id: string; depositor: MerchantCredentials; withdrawer: MerchantCredentials; beneficiary_id: string }> {
  const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 't', request_id: null }, { name });
  const depositor = await app.createMerchant({ white_label_id: brand.id });
  const withdrawer = await app.createMerchant({ white_label_id: brand.id });
  const account = accountOf(withdrawer);
  await fundAvailable(app, account, funds_minor);
  const beneficiary_id = await verifiedBeneficiary(app, account);
  return { brand_id: brand.id, depositor, withdrawer, beneficiary_id };
}

async function withdrawalOfLeg(deposit: DepositView): Promise<{ withdrawal_id: string; merchant_id: string }[]> {
  const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; merchant_id: string }>(
    `SELECT d.withdrawal_id, w.merchant_id FROM deposit_legs d JOIN withdrawal_legs w ON w.white_label_id = d.white_label_id AND w.leg_ref = d.withdrawal_leg_ref
      WHERE d.deposit_id = $1 ORDER BY d.sequence`,
    [deposit.id],
  );
  return rows;
}

describe('POST /v1/pay/deposits: matched at once (201)', () => {
  let deposit: DepositView & { slip_upload: { token: string; upload_url: string; expires_at: string; max_bytes: number; content_types: string[] } };

  it('matches a sandbox deposit with the counterparty: awaiting_payment, one leg, a real PromptPay QR, slip_upload', async () => {
    const payload = body(10_000, { metadata: { cart: 'C-9' } });
    const response = await createDeposit(payload);
    expect(response.statusCode, response.body).toBe(201);
    expect(response.headers['cache-control']).toBe('no-store');
    deposit = response.json();
    const now = app.clock.now().getTime();
    expect(deposit).toMatchObject({
      object: 'deposit_order',
      version: 1,
      status: 'awaiting_payment',
      is_terminal: false,
      amount_minor: 10_000,
      currency: 'THB',
      liquidity_source: 'internal',
      leg_count: 1,
      expires_at: new Date(now + 15 * 60_000).toISOString(),
      sender: { bank_code: '004', account_number_masked: expect.stringMatching(/^\*{6}\d{4}$/) as string, account_name_th_masked: 'สม*** รัก***' },
      metadata: { cart: 'C-9' },
      livemode: false,
    });
    expect(deposit.id).toMatch(/^dep_/);
    const [leg] = deposit.legs;
    expect(leg).toMatchObject({ sequence: 1, amount_minor: 10_000, leg_status: 'pending', method: 'promptpay_qr', expires_at: deposit.expires_at });
    expect(leg?.leg_ref).toMatch(/^dleg_/);
    // The counterparty pays out to one of its two sandbox-bank accounts.
    const payees = {
      '014': { receiver: { bank_code: '014', bank_name_th: 'ธนาคารไทยพาณิชย์', account_number_masked: '******3690', account_name_masked: 'พิชั*** สุว***' }, target: '0141472583690' },
      '025': { receiver: { bank_code: '025', bank_name_th: 'ธนาคารกรุงศรีอยุธยา', account_number_masked: '******0001', account_name_masked: 'วร*** ปร***' }, target: '0258889990001' },
    } as const;
    const payee = payees[(leg?.receiver.bank_code ?? '014') as keyof typeof payees];
    expect(leg?.receiver).toEqual(payee.receiver);
    // The QR is a valid EMVCo payload (CRC checked) for that account and amount.
    const qr = parse(leg?.qr_payload ?? '', true);
    expect(qr).not.toBeNull();
    expect(qr?.getTagValue('54')).toBe('100.00');
    expect(qr?.getTagValue('29', '04')).toBe(payee.target);
    expect(deposit.slip_upload).toMatchObject({
      upload_url: `${app.instance.services.publicBaseUrl()}/v1/pay/deposits/${deposit.id}/slip`,
      max_bytes: 4_194_304,
      content_types: ['image/jpeg', 'image/png', 'image/webp', 'application/json'],
      // The late-slip window (24 h) and the claim week after it, where uploads answer 410 with a claim_url.
      expires_at: new Date(now + 15 * 60_000 + 24 * HOUR_MS + 7 * 24 * HOUR_MS).toISOString(),
    });
    // The deposit's sender and the payee's full account number never appear in the event.
    const events = await eventsOf(deposit.id);
    expect(events.map((event) => event.type)).toEqual(['deposit.created']);
    expect(events[0]!.data.previous_attributes).toBeNull();
    expect(events[0]!.data.object.status).toBe('awaiting_payment');
    for (const secret of [deposit.slip_upload.token, leg?.qr_payload ?? 'x', payee.target.slice(3), (payload.sender as { account_number: string }).account_number]) expect(events[0]!.text).not.toContain(secret);
  });

  it('reserves the leg on the counterparty’s withdrawal, never the depositor’s own', async () => {
    const [target] = await withdrawalOfLeg(deposit);
    expect(target?.merchant_id).not.toBe(app.sandbox.merchant_id);
    const { rows } = await app.testDatabase.database.query<{ reserved_minor: number; amount_total_minor: number; filled_minor: number; remaining_minor: number }>(
      'SELECT reserved_minor, amount_total_minor, filled_minor, remaining_minor FROM withdrawal_orders WHERE withdrawal_id = $1',
      [target?.withdrawal_id],
    );
    expect(rows[0]?.reserved_minor).toBe(10_000);
    expect(rows[0]!.amount_total_minor).toBe(rows[0]!.filled_minor + rows[0]!.reserved_minor + rows[0]!.remaining_minor);
  });

  it('GET shows the payment instructions but never the slip token; another merchant gets 404', async () => {
    const view = await getDeposit(deposit.id);
    const answer = await app.signed({ url: `/v1/pay/deposits/${deposit.id}` });
    expect(answer.headers['cache-control']).toBe('no-store');
    expect(view).not.toHaveProperty('slip_upload');
    expect(JSON.stringify(view)).not.toContain(deposit.slip_upload.token);
    expect(view.legs[0]?.qr_payload).toBe(deposit.legs[0]?.qr_payload);
    const stranger = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    expect((await app.signed({ url: `/v1/pay/deposits/${deposit.id}`, credentials: stranger })).statusCode).toBe(404);
  });

  it('the slip token verifies for its upload URL and deposit only', async () => {
    const signer = new SlipTokenSigner(TEST_MASTER_KEY);
    const now = app.clock.now();
    const good = signer.verify(deposit.slip_upload.token, { url: deposit.slip_upload.upload_url, deposit_id: deposit.id, now });
    expect(good.ok).toBe(true);
    if (!good.ok) return;
    expect(good.claims).toMatchObject({ aud: 'pg-slip-ingest', scope: 'slip:write', wl: app.sandbox.white_label_id, livemode: false, dep: deposit.id, api_version: '2026-08-01' });
    expect(good.claims.hold_until).toBe(Date.parse(deposit.expires_at) / 1000);
    expect(good.claims.rate_subject).toMatch(/^rs_[0-9a-f]{32}$/);
    const check = (token: string, overrides: Partial<{ url: string; deposit_id: string; now: Date }> = {}) =>
      signer.verify(token, { url: deposit.slip_upload.upload_url, deposit_id: deposit.id, now, ...overrides });
    expect(check(deposit.slip_upload.token, { url: `${deposit.slip_upload.upload_url}?x=1` })).toEqual({ ok: false, reason: 'wrong_url' });
    expect(check(deposit.slip_upload.token, { deposit_id: 'dep_01K0OTHER0000000000000000' })).toEqual({ ok: false, reason: 'wrong_deposit' });
    expect(check(deposit.slip_upload.token, { now: new Date(Date.parse(deposit.slip_upload.expires_at)) })).toEqual({ ok: false, reason: 'expired' });
    // Any changed claim breaks the signature; another key is unknown; junk is malformed.
    const [header, payload, signature] = deposit.slip_upload.token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
    for (const [name, value] of Object.entries({ wl: 'wl_other', livemode: true, dep: 'dep_other', htu: 'https://evil.example/slip', rate_subject: 'rs_x', api_version: '2030-01-01', hold_until: 1, exp: 9_999_999_999 })) {
      const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, [name]: value })).toString('base64url')}.${signature}`;
      expect(check(forged), name).toEqual({ ok: false, reason: 'bad_signature' });
    }
    expect(new SlipTokenSigner(Buffer.alloc(32, 9)).verify(deposit.slip_upload.token, { url: deposit.slip_upload.upload_url, deposit_id: deposit.id, now }).ok).toBe(false);
    expect(check('x'.repeat(5000))).toEqual({ ok: false, reason: 'malformed' });
    expect(check('a.b')).toEqual({ ok: false, reason: 'malformed' });
    // A token signed with the right key but for another audience or scope is refused too.
    const seed = Buffer.from(hmacSha256Hex(TEST_MASTER_KEY, 'deposits.slip_token.ed25519.v1'), 'hex');
    const privateKey = crypto.createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });
    const resign = (changes: Record<string, unknown>) => {
      const input = `${header}.${Buffer.from(JSON.stringify({ ...claims, ...changes })).toString('base64url')}`;
      return `${input}.${crypto.sign(null, Buffer.from(input), privateKey).toString('base64url')}`;
    };
    expect(check(resign({}))).toMatchObject({ ok: true });
    expect(check(resign({ aud: 'pg-other' }))).toEqual({ ok: false, reason: 'wrong_audience' });
    expect(check(resign({ scope: 'slip:read' }))).toEqual({ ok: false, reason: 'wrong_scope' });
  });

  it('qr_image_url serves the PNG without credentials, only with its signature and before the deadline', async () => {
    const url = deposit.legs[0]?.qr_image_url ?? '';
    expect(url.startsWith(`${app.instance.services.publicBaseUrl()}/v1/pay/deposits/${deposit.id}/legs/${deposit.legs[0]?.leg_ref}/qr.png?`)).toBe(true);
    expect(url).not.toContain(deposit.legs[0]?.qr_payload ?? 'x');
    for (const accountNumber of ['1472583690', '8889990001']) expect(url).not.toContain(accountNumber);
    const path = url.slice(app.instance.services.publicBaseUrl().length);
    const image = await app.instance.app.inject({ method: 'GET', url: path });
    expect(image.statusCode).toBe(200);
    expect(image.headers['content-type']).toBe('image/png');
    expect(image.headers['cache-control']).toBe('private, no-store');
    expect(image.rawPayload.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    const tampered = path.replace(/signature=([A-Za-z0-9_-])/, (_match, first: string) => `signature=${first === 'A' ? 'B' : 'A'}`);
    expect((await app.instance.app.inject({ method: 'GET', url: tampered })).statusCode).toBe(404);
    const otherLeg = path.replace(deposit.legs[0]?.leg_ref ?? '', 'dleg_01K0NOTTHISLEG000000000000');
    expect((await app.instance.app.inject({ method: 'GET', url: otherLeg })).statusCode).toBe(404);
    const withoutSignature = await app.instance.app.inject({ method: 'GET', url: path.split('?')[0] ?? '' });
    expect(withoutSignature.statusCode).toBe(422);
  });

  it('POST /slip-token issues a fresh capability with Cache-Control: no-store', async () => {
    const response = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${deposit.id}/slip-token`, idempotency_key: `st-${deposit.id}` });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    const upload = response.json<{ token: string; upload_url: string }>();
    expect(upload.token).not.toBe(deposit.slip_upload.token);
    expect(upload.upload_url).toBe(deposit.slip_upload.upload_url);
  });
});

describe('waiting for liquidity (202)', () => {
  it('sandbox 105.00 THB waits 25 s, then deposit.matched moves it to awaiting_payment with legs and a new expires_at', async () => {
    const response = await createDeposit(body(10_500));
    expect(response.statusCode).toBe(202);
    const waiting = response.json<DepositView & { retry_after_seconds: number }>();
    expect(waiting).toMatchObject({ status: 'awaiting_liquidity', legs: [], retry_after_seconds: 10, is_terminal: false });
    // The header says what the body says: poll no sooner than in 10 seconds.
    expect(response.headers['retry-after']).toBe('10');
    expect(waiting).not.toHaveProperty('slip_upload');
    expect(waiting.liquidity).toMatchObject({ wait_started_at: app.clock.now().toISOString(), retry_interval_ms: 10_000 });
    const early = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${waiting.id}/slip-token`, idempotency_key: `early-${waiting.id}` });
    // A waiting order gets a destination when it is matched: a retry may succeed.
    expect(errorOf(early)).toMatchObject({ code: 'deposit_not_payable', retryable: true, details: { status: 'awaiting_liquidity' } });

    // Retries every 10 seconds, and one at exactly 25 seconds, when the scenario's liquidity arrives.
    for (let round = 0; round < 2; round += 1) {
      app.clock.advance(10_000);
      await app.instance.worker.runDueJobs();
    }
    expect((await getDeposit(waiting.id)).status).toBe('awaiting_liquidity');
    app.clock.advance(4_999);
    await app.instance.worker.runDueJobs();
    expect((await getDeposit(waiting.id)).status).toBe('awaiting_liquidity');
    app.clock.advance(1);
    await app.instance.worker.runDueJobs();
    const matched = await getDeposit(waiting.id);
    expect(matched).toMatchObject({ status: 'awaiting_payment', version: 2, leg_count: 1, liquidity_source: 'internal' });
    expect(matched.expires_at).toBe(new Date(app.clock.now().getTime() + 15 * 60_000).toISOString());
    const events = await eventsOf(waiting.id);
    expect(events.map((event) => event.type)).toEqual(['deposit.created', 'deposit.matched']);
    expect(events[1]!.data.previous_attributes).toMatchObject({ status: 'awaiting_liquidity', version: 1 });
    // The removed `liquidity` is a changed key: previous_attributes names it with what version 1 showed (spec, Envelope).
    const createdObject = events[0]!.data.object as DepositView;
    expect(createdObject.liquidity).toMatchObject({ wait_started_at: waiting.liquidity!.wait_started_at, retry_interval_ms: 10_000 });
    expect(events[1]!.data.previous_attributes).toMatchObject({ liquidity: createdObject.liquidity, legs: [] });
    expect(events[1]!.data.object).not.toHaveProperty('liquidity');
    // deposit.matched is the only event with payment instructions: receivers, qr_payload and a QR link that is served.
    // The outbox keeps the QR payload sealed (it holds the payee's full account number); the merchant's feed opens it.
    expect(events[1]!.text).not.toContain(matched.legs[0]!.qr_payload!);
    expect(events[1]!.text).toContain('"qr_payload":"sealed:');
    const feed = await app.signed({ url: '/v1/pay/events?type=deposit.matched&order=desc&limit=100' });
    expect(feed.statusCode, feed.body).toBe(200);
    const delivered = feed.json<{ data: { type: string; data: { object: DepositView } }[] }>().data.find((event) => event.data.object.id === waiting.id);
    const matchedLeg = delivered!.data.object.legs[0]!;
    expect(matchedLeg.receiver).toMatchObject({ bank_code: expect.stringMatching(/^\d{3}$/) as string, account_number_masked: expect.any(String) as string });
    expect(matchedLeg.qr_payload).toBe(matched.legs[0]!.qr_payload);
    expect(matchedLeg.qr_image_url).toBe(matched.legs[0]!.qr_image_url);
    expect(matchedLeg.qr_image_url!.startsWith(`${app.instance.services.publicBaseUrl()}/v1/pay/deposits/${waiting.id}/legs/`)).toBe(true);
    const image = await app.instance.app.inject({ method: 'GET', url: matchedLeg.qr_image_url!.slice(app.instance.services.publicBaseUrl().length) });
    expect(image.statusCode).toBe(200);
    expect(image.headers['content-type']).toBe('image/png');
    expect(events[0]!.data.object).not.toHaveProperty('legs');
    const token = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${waiting.id}/slip-token`, idempotency_key: `late-${waiting.id}` });
    expect(token.statusCode).toBe(200);
  });
});

describe('the liquidity wait running out', () => {
  it('with no liquidity at all (live mode) the wait runs out: canceled no_liquidity_available, window null, terminal', async () => {
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const response = await createDeposit(body(20_000), live);
    expect(response.statusCode).toBe(202);
    const waiting = response.json<DepositView>();
    expect(waiting.liquidity?.suggested_amounts_minor).toEqual([]);
    app.clock.advance(5 * 60_000);
    await app.instance.worker.runDueJobs();
    app.clock.advance(10_000);
    await app.instance.worker.runDueJobs();
    const canceled = await getDeposit(waiting.id, live);
    expect(canceled).toMatchObject({ status: 'canceled', canceled_by: 'system', cancel_reason_code: 'no_liquidity_available', late_slip_accepted_until: null, is_terminal: true });
    const last = (await eventsOf(waiting.id)).at(-1);
    expect(last?.type).toBe('deposit.canceled');
    expect(last?.data.previous_attributes).toMatchObject({ status: 'awaiting_liquidity', liquidity: { suggested_amounts_minor: [] } });
  });
});

describe('expiry and cancel', () => {
  it('an unpaid order expires at expires_at, releases its reservation, and keeps a 24 h late-slip window', async () => {
    const created = (await createDeposit(body(12_000))).json<DepositView>();
    app.clock.advance(15 * 60_000);
    await app.instance.worker.runDueJobs();
    const expired = await getDeposit(created.id);
    expect(expired).toMatchObject({
      status: 'expired',
      expired_reason: 'no_payment',
      is_terminal: false,
      late_slip_accepted_until: new Date(Date.parse(created.expires_at) + 24 * HOUR_MS).toISOString(),
    });
    expect(expired.legs[0]).not.toHaveProperty('qr_payload');
    expect(await withdrawalLegStatuses(created.id)).toEqual(['released']);
    expect((await eventsOf(created.id)).map((event) => event.type)).toEqual(['deposit.created', 'deposit.expired']);
    // A late slip may still come within the window, so a capability is still issued; after it, none.
    expect((await app.signed({ method: 'POST', url: `/v1/pay/deposits/${created.id}/slip-token`, idempotency_key: `exp-${created.id}` })).statusCode).toBe(200);
    app.clock.advance(24 * HOUR_MS);
    // The window has passed, but the order changes only when the close job runs: until then it reads as before.
    expect(await getDeposit(created.id)).toMatchObject({ is_terminal: false, version: expired.version });
    await app.instance.worker.runDueJobs();
    const final = await getDeposit(created.id);
    expect(final).toMatchObject({ status: 'expired', is_terminal: true, version: expired.version + 1 });
    const events = await eventsOf(created.id);
    expect(events.map((event) => event.type)).toEqual(['deposit.created', 'deposit.expired', 'deposit.closed']);
    expect(events[2]?.data.object).toMatchObject({ status: 'expired', is_terminal: true, version: expired.version + 1 });
    expect(events[2]?.data.previous_attributes).toEqual({ is_terminal: false, version: expired.version });
    // The merchant's feed carries it too.
    const feed = (await app.signed({ url: '/v1/pay/events?type=deposit.closed' })).json<{ data: { type: string; data: { object: { id: string } } }[] }>();
    expect(feed.data.filter((event) => event.data.object.id === created.id).map((event) => event.type)).toContain('deposit.closed');
    // Running the worker again changes nothing: one close per order.
    await app.instance.worker.runDueJobs();
    expect((await getDeposit(created.id)).version).toBe(expired.version + 1);
    const closed = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${created.id}/slip-token`, idempotency_key: `closed-${created.id}` });
    // Final: no retry can make it payable again (spec, Error body: `retryable` is "True when a retry may succeed").
    expect(errorOf(closed)).toMatchObject({ code: 'deposit_not_payable', retryable: false, details: { status: 'expired' } });
  });

  it('the merchant cancels an unpaid order: reservation released, 409 deposit_not_cancelable after', async () => {
    const created = (await createDeposit(body(13_000))).json<DepositView>();
    const [target] = await withdrawalOfLeg(created);
    const reservedBefore = await reservedOf(target!.withdrawal_id);
    const response = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${created.id}/cancel`, idempotency_key: `cancel-${created.id}` });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ status: 'canceled', canceled_by: 'merchant', cancel_reason_code: 'merchant_request', is_terminal: false, version: 2 });
    expect(await reservedOf(target!.withdrawal_id)).toBe(reservedBefore - 13_000);
    const again = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${created.id}/cancel`, idempotency_key: `cancel2-${created.id}` });
    expect(again.statusCode).toBe(409);
    expect(errorOf(again)).toMatchObject({ code: 'deposit_not_cancelable', details: { status: 'canceled' } });
    const unknown = await app.signed({ method: 'POST', url: '/v1/pay/deposits/dep_01K0NOSUCH00000000000000000/cancel', idempotency_key: 'cancel-unknown' });
    expect(unknown.statusCode).toBe(404);
  });

  async function withdrawalLegStatuses(deposit_id: string): Promise<string[]> {
    const { rows } = await app.testDatabase.database.query<{ status: string }>(
      `SELECT w.status FROM deposit_legs d JOIN withdrawal_legs w ON w.white_label_id = d.white_label_id AND w.leg_ref = d.withdrawal_leg_ref
        WHERE d.deposit_id = $1 ORDER BY d.sequence`,
      [deposit_id],
    );
    return rows.map((row) => row.status);
  }

  async function reservedOf(withdrawal_id: string): Promise<number> {
    const { rows } = await app.testDatabase.database.query<{ reserved_minor: number }>('SELECT reserved_minor FROM withdrawal_orders WHERE withdrawal_id = $1', [withdrawal_id]);
    return Number(rows[0]?.reserved_minor);
  }
});

describe('matching rule', () => {
  it('takes one leg from the oldest order that covers the amount, else few legs from the largest, never the depositor’s own', async () => {
    const { depositor, withdrawer, beneficiary_id } = await brandWithWithdrawer('Matching Brand', 10_000_000);
    const ownAccount = accountOf(depositor);
    await fundAvailable(app, ownAccount, 10_000_000);
    const ownBeneficiary = await verifiedBeneficiary(app, ownAccount);
    const withdraw = async (credentials: MerchantCredentials, beneficiary: string, amount_minor: number) => {
      const response = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', idempotency_key: crypto.randomUUID(), credentials, body: { amount_minor, currency: 'THB', merchant_reference: crypto.randomUUID().slice(0, 30), end_user_ref: 'w', beneficiary_id: beneficiary } });
      expect(response.statusCode).toBe(201);
      return response.json<WithdrawalView>();
    };
    const own = await withdraw(depositor, ownBeneficiary, 1_000_000);
    app.clock.advance(1_000);
    const small = await withdraw(withdrawer, beneficiary_id, 30_000);
    app.clock.advance(1_000);
    const older = await withdraw(withdrawer, beneficiary_id, 50_000);
    app.clock.advance(1_000);
    const newer = await withdraw(withdrawer, beneficiary_id, 50_000);

    // Without the sandbox counterparty (which would always cover the whole amount), as in live mode.
    const plain = depositServiceWithoutSandboxLiquidity(app);
    const deposit = async (amount_minor: number) =>
      (await inTransaction(app, (tx) => plain.create(tx, accountOf(depositor), body(amount_minor) as unknown as CreateDepositInput, SYSTEM_CAUSE))).deposit;

    const one = await deposit(40_000);
    expect((await withdrawalOfLeg(one)).map((leg) => leg.withdrawal_id)).toEqual([older.id]);
    // 60,000 fits no single order now (remaining 30,000 / 10,000 / 50,000): two legs, largest first.
    const split = await deposit(60_000);
    expect(split.legs.map((leg) => leg.amount_minor)).toEqual([50_000, 10_000]);
    expect((await withdrawalOfLeg(split)).map((leg) => leg.withdrawal_id)).toEqual([newer.id, small.id]);
    // 20,000 + 10,000 left cannot cover 40,000; the depositor's own 1,000,000 is never used: it waits.
    const none = await deposit(40_000);
    expect(none).toMatchObject({ status: 'awaiting_liquidity', legs: [] });
    expect(none.liquidity?.suggested_amounts_minor).toEqual([20_000, 10_000]);
    expect((await withdrawalOfLeg(none)).map((leg) => leg.withdrawal_id)).not.toContain(own.id);
  });
});

describe('storage of a creation', () => {
  it('keeps the sealed idempotency answer in its own row, with nothing moved out of line (migration 0024)', async () => {
    const response = await createDeposit(body(10_000));
    expect(response.statusCode).toBe(201);
    const { rows } = await app.testDatabase.database.query<{ answer_bytes: number; toast_bytes: string }>(
      `SELECT max(pg_column_size(r.response_body)) AS answer_bytes,
              (SELECT pg_relation_size(c.reltoastrelid) FROM pg_class c WHERE c.relname = 'idempotency_records')::text AS toast_bytes
         FROM idempotency_records r`,
    );
    // A deposit's answer is over PostgreSQL's 2 KB threshold, so without the table's toast_tuple_target it would be moved out.
    expect(Number(rows[0]?.answer_bytes)).toBeGreaterThan(2048);
    expect(rows[0]?.toast_bytes).toBe('0');
  });
});

describe('matching rule behind the head of the queue', () => {
  it('takes the oldest order that covers the amount when none of the oldest orders can, and the oldest of the head when one can', async () => {
    const { depositor, withdrawer, beneficiary_id } = await brandWithWithdrawer('Queue Head Brand', 100_000_000);
    const withdraw = async (amount_minor: number) => {
      const response = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', idempotency_key: crypto.randomUUID(), credentials: withdrawer, body: { amount_minor, currency: 'THB', merchant_reference: crypto.randomUUID().slice(0, 30), end_user_ref: 'w', beneficiary_id } });
      expect(response.statusCode).toBe(201);
      app.clock.advance(1_000);
      return response.json<WithdrawalView>();
    };
    // The whole head of the queue is too small for 50,000; the orders that can take it come after it.
    const head: WithdrawalView[] = [];
    for (let index = 0; index < MATCHING_QUEUE_HEAD_ORDERS; index += 1) head.push(await withdraw(20_000));
    const behind = await withdraw(100_000);
    // Larger, so that a split (largest first) would have taken it: only the oldest-first rule picks `behind`.
    const newest = await withdraw(150_000);

    const plain = depositServiceWithoutSandboxLiquidity(app);
    const deposit = async (amount_minor: number) =>
      (await inTransaction(app, (tx) => plain.create(tx, accountOf(depositor), body(amount_minor) as unknown as CreateDepositInput, SYSTEM_CAUSE))).deposit;
    const candidateStatements: string[] = [];
    const previousObserver = app.testDatabase.database.statement_observer;
    app.testDatabase.database.statement_observer = (sql, duration_ms) => {
      previousObserver?.(sql, duration_ms);
      if (sql.includes('FOR UPDATE') && sql.includes('SKIP LOCKED')) candidateStatements.push(sql.includes(PLANNED_PER_CALL) ? 'whole queue' : 'head');
    };
    try {
      const large = await deposit(50_000);
      expect((await withdrawalOfLeg(large)).map((leg) => leg.withdrawal_id)).toEqual([behind.id]);
      expect(candidateStatements).toEqual(['head', 'whole queue']);
      candidateStatements.length = 0;
      const small = await deposit(20_000);
      expect((await withdrawalOfLeg(small)).map((leg) => leg.withdrawal_id)).toEqual([head[0]!.id]);
      expect(candidateStatements).toEqual(['head']);
    } finally {
      app.testDatabase.database.statement_observer = previousObserver;
    }
    expect(newest.status).toBe('open');
  });
});

describe('a withdrawal that expires while a deposit is being matched to it', () => {
  it('is reserved as the match found it live: the creation answers 201, not 500', async () => {
    const { depositor, withdrawer, beneficiary_id } = await brandWithWithdrawer('Expiring Candidate Brand', 100_000_000);
    const created = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', idempotency_key: crypto.randomUUID(), credentials: withdrawer, body: { amount_minor: 100_000, currency: 'THB', merchant_reference: crypto.randomUUID().slice(0, 30), end_user_ref: 'w', beneficiary_id } });
    expect(created.statusCode).toBe(201);
    const withdrawal = created.json<WithdrawalView>();
    // One millisecond before its expiry, and the clock moves past it while the creation's candidate
    // statement is answered: the match and the reservation are then given two different instants.
    app.clock.advance(Date.parse(withdrawal.expires_at as string) - app.clock.now().getTime() - 1);
    const previousObserver = app.testDatabase.database.statement_observer;
    let moved = false;
    app.testDatabase.database.statement_observer = (sql, duration_ms) => {
      previousObserver?.(sql, duration_ms);
      if (!moved && sql.includes('FOR UPDATE') && sql.includes('SKIP LOCKED')) {
        moved = true;
        app.clock.advance(10);
      }
    };
    let response;
    try {
      response = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials: depositor, body: body(20_000) });
    } finally {
      app.testDatabase.database.statement_observer = previousObserver;
    }
    expect(moved).toBe(true);
    expect(response.statusCode, response.body).toBe(201);
    const deposit = response.json<DepositView>();
    expect((await withdrawalOfLeg(deposit)).map((leg) => leg.withdrawal_id)).toEqual([withdrawal.id]);
  });
});

describe('POST /v1/pay/deposits: bad input changes nothing', () => {
  it('answers each rule with its code and details, creating no order', async () => {
    const before = await countDeposits();
    const expectCode = async (payload: unknown, status: number, code: string, details?: Record<string, unknown>) => {
      const response = await createDeposit(payload);
      expect(response.statusCode, JSON.stringify(payload)).toBe(status);
      expect(errorOf(response).code, JSON.stringify(payload)).toBe(code);
      if (details) expect(errorOf(response).details, JSON.stringify(payload)).toMatchObject(details);
      return errorOf(response);
    };
    await expectCode(body(10_050), 422, 'amount_not_supported', { min_minor: 10_000, max_minor: 5_000_000 });
    await expectCode(body(9_900), 422, 'amount_not_supported');
    await expectCode(body(5_000_100), 422, 'amount_not_supported');
    await expectCode(body(10_000, { sender: undefined }), 422, 'sender_required');
    await expectCode(body(10_000, { sender: undefined, sender_id: 'snd_01K0NOSUCH0000000000000000' }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'sender_id', reason: 'unknown_sender' })] });
    await expectCode(body(10_000, { sender: { ...SENDER, account_name_th: 'นางสาวสมหญิง รักไทย' } }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'sender.account_name_th', reason: 'must_not_contain_title' })] });
    await expectCode(body(10_000, { sender: { ...SENDER, account_name_th: 'Mrs. Somying' } }), 422, 'validation_error');
    await expectCode(body(10_000, { sender: { ...SENDER, account_number: '012-345-6789' } }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'sender.account_number', reason: 'must_be_digits' })] });
    await expectCode(body(10_000, { sender: { ...SENDER, bank_code: '999' } }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'sender.bank_code', reason: 'unknown_bank' })] });
    const unavailable = await expectCode(body(10_000, { sender: { ...SENDER, bank_code: '098' } }), 409, 'sender_bank_unavailable', { bank_code: '098', retry_after_hint_seconds: 1800 });
    expect(unavailable.retryable).toBe(true);
    expect(typeof unavailable.details.public_message_th).toBe('string');
    expect(unavailable.details.alternative_banks).toContainEqual(expect.objectContaining({ bank_code: '002' }));
    await expectCode(body(10_000, { min_ttl_seconds: 3601 }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'min_ttl_seconds', reason: 'exceeds_order_lifetime' })] });
    await expectCode(body(10_000, { expires_in_seconds: 59 }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'expires_in_seconds', reason: 'too_small' })] });
    await expectCode(body(10_000, { return_url: 'javascript:alert(1)' }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'return_url' })] });
    await expectCode(body(10_000, { fill_preference: 'cheapest' }), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'fill_preference', reason: 'not_allowed_value' })] });
    await expectCode(body(10_000, { currency: 'USD' }), 422, 'validation_error');
    await expectCode(body(10_000.5), 422, 'validation_error', { fields: [expect.objectContaining({ path: 'amount_minor', reason: 'must_be_integer', hint: 'must_be_integer_minor_units' })] });
    expect(await countDeposits()).toBe(before);
  });

  it('clamps expires_in_seconds to the brand policy and accepts a min_ttl that fits', async () => {
    const response = await createDeposit(body(10_000, { expires_in_seconds: 86_400, min_ttl_seconds: 3600 }));
    expect(response.statusCode).toBe(201);
    expect(response.json<DepositView>().expires_at).toBe(new Date(app.clock.now().getTime() + 3600_000).toISOString());
  });

  it('409 merchant_reference_in_use, duplicate_open_deposit and too_many_open_deposits with the open ids', async () => {
    const first = body(10_000);
    const created = (await createDeposit(first)).json<DepositView>();
    const reused = await createDeposit({ ...body(10_000), merchant_reference: first.merchant_reference });
    expect(errorOf(reused).code).toBe('merchant_reference_in_use');
    const duplicate = await createDeposit({ ...first, merchant_reference: 'another-ref' });
    expect(errorOf(duplicate)).toMatchObject({ code: 'duplicate_open_deposit', details: { open_deposit_ids: [created.id] } });
    // With a complete client: two open orders per device, then the cap.
    const second = await createDeposit({ ...first, merchant_reference: 'second-ref', amount_minor: 11_000 });
    expect(second.statusCode).toBe(201);
    const third = await createDeposit({ ...first, merchant_reference: 'third-ref', amount_minor: 12_000 });
    expect(errorOf(third)).toMatchObject({ code: 'too_many_open_deposits', details: { limit: 2 } });
    expect((errorOf(third).details as { open_deposit_ids: string[] }).open_deposit_ids).toHaveLength(2);
    // Without a client the cap is one per end user.
    const bare = body(10_000, { client: undefined });
    expect((await createDeposit(bare)).statusCode).toBe(201);
    const bareAgain = await createDeposit({ ...bare, merchant_reference: 'bare-2', amount_minor: 20_000 });
    expect(errorOf(bareAgain)).toMatchObject({ code: 'too_many_open_deposits', details: { limit: 1 } });
  });
});

describe('masking and the transition table', () => {
  it('masks each word to two characters and three asterisks, keeping Thai marks with their consonant', () => {
    expect(maskName('สมชาย ใจดี')).toBe('สม*** ใจ***');
    expect(maskName('นิ่ม ทอง')).toBe('นิ่ม*** ทอ***');
    expect(maskName('Somchai  Jaidee')).toBe('So*** Ja***');
  });

  it('has the nine statuses and the moves built so far', () => {
    expect(DEPOSIT_TRANSITIONS.statuses).toHaveLength(9);
    expect(DEPOSIT_TRANSITIONS.list().map((rule) => `${rule.from ?? '-'}>${rule.to}:${rule.trigger}`).sort()).toEqual(
      [
        '->awaiting_liquidity:create',
        '->awaiting_payment:create',
        'awaiting_liquidity>awaiting_payment:matched',
        'awaiting_liquidity>canceled:cancel',
        'awaiting_liquidity>canceled:liquidity_timeout',
        'awaiting_payment>canceled:cancel',
        'awaiting_payment>expired:expire',
        'awaiting_payment>slip_processing:slip_received',
        'slip_processing>settled:settle',
        'under_review>settled:settle',
        'settled>reversed:reverse',
        'settled>settled:overpaid',
        'expired>slip_processing:slip_received',
        'slip_processing>under_review:review',
        'canceled>under_review:review',
        'under_review>under_review:escalate',
        'under_review>rejected:reject',
        'slip_processing>awaiting_payment:slip_unreadable',
        'slip_processing>expired:slip_unreadable',
        'slip_processing>awaiting_payment:leg_paid',
        'awaiting_payment>settled:settle',
        'awaiting_payment>under_review:review',
        'under_review>under_review:slip_attached',
        'settled>settled:funds_held',
        'settled>settled:funds_released',
        'expired>expired:close',
        'canceled>canceled:close',
      ].sort(),
    );
  });
});

describe('concurrency', () => {
  it('two deposits never reserve the same satang: 30 concurrent creations against a shared pool', async () => {
    const { brand_id, depositor, withdrawer, beneficiary_id } = await brandWithWithdrawer('Race Brand', 10_000_000);
    for (let index = 0; index < 5; index += 1) {
      const response = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', idempotency_key: `race-w-${index}`, credentials: withdrawer, body: { amount_minor: 30_000, currency: 'THB', merchant_reference: `race-w-${index}`, end_user_ref: 'w', beneficiary_id } });
      expect(response.statusCode).toBe(201);
    }
    const responses = await Promise.all(Array.from({ length: 30 }, () => createDeposit(body(10_000), depositor)));
    expect(responses.filter((response) => response.statusCode !== 201 && response.statusCode !== 202).map((response) => response.body)).toEqual([]);
    const { rows: withdrawals } = await app.testDatabase.database.query<{ withdrawal_id: string; amount_total_minor: number; filled_minor: number; reserved_minor: number; remaining_minor: number; legs_minor: number }>(
      `SELECT o.withdrawal_id, o.amount_total_minor, o.filled_minor, o.reserved_minor, o.remaining_minor,
              coalesce((SELECT sum(amount_minor) FROM withdrawal_legs l WHERE l.white_label_id = o.white_label_id AND l.withdrawal_id = o.withdrawal_id AND l.status = 'reserved'), 0)::bigint AS legs_minor
         FROM withdrawal_orders o WHERE o.white_label_id = $1`,
      [brand_id],
    );
    for (const row of withdrawals) {
      expect(row.reserved_minor).toBe(Number(row.legs_minor));
      expect(row.amount_total_minor).toBe(row.filled_minor + row.reserved_minor + row.remaining_minor);
      expect(row.reserved_minor).toBeLessThanOrEqual(row.amount_total_minor);
    }
    // Each deposit leg is its own withdrawal leg, and each deposit's legs sum to its amount.
    const { rows: legs } = await app.testDatabase.database.query<{ withdrawal_leg_ref: string; deposit_id: string; amount_minor: number }>(
      'SELECT withdrawal_leg_ref, deposit_id, amount_minor FROM deposit_legs WHERE white_label_id = $1',
      [brand_id],
    );
    expect(new Set(legs.map((leg) => leg.withdrawal_leg_ref)).size).toBe(legs.length);
    const matched = responses.filter((response) => response.statusCode === 201).map((response) => response.json<DepositView>());
    for (const deposit of matched) expect(legs.filter((leg) => leg.deposit_id === deposit.id).reduce((sum, leg) => sum + Number(leg.amount_minor), 0)).toBe(10_000);
    // The pool of 150,000 can take at most 15 deposits of 10,000 apart from the sandbox counterparty's.
    const pool = withdrawals.filter((row) => row.amount_total_minor === 30_000).reduce((sum, row) => sum + row.reserved_minor, 0);
    expect(pool).toBeLessThanOrEqual(150_000);
  });
});

describe('external gateway fallback liquidity', () => {
  it('a brand’s gateway account takes a deposit nothing else can match, unless the merchant asked for internal only', async () => {
    const policy = {
      white_label_id: app.sandbox.white_label_id,
      mode: 'live',
      min_amount_minor: 10_000,
      max_amount_minor: 1_000_000,
      default_expires_in_seconds: 600,
      max_expires_in_seconds: 1800,
      max_legs: 2,
      liquidity_wait_seconds: 120,
      gateway: { bank_code: '014', account_number: '5550001112', account_name_th: 'บริษัท เกตเวย์ จำกัด' },
    };
    const bad = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: { ...policy, min_amount_minor: 10_050 } });
    expect(bad.statusCode).toBe(422);
    const set = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: policy });
    expect(set.statusCode).toBe(200);
    expect(set.json()).toMatchObject({ object: 'deposit_policy', source: 'brand', max_legs: 2, gateway: { bank_code: '014', account_number_masked: '******1112' } });
    expect(set.body).not.toContain('5550001112');
    const { rows } = await app.testDatabase.database.query<{ details: unknown }>("SELECT details FROM audit_log WHERE action = 'deposit_policy.updated'");
    expect(JSON.stringify(rows)).not.toContain('5550001112');
    const read = await app.backoffice({ url: `/v1/bo/deposit-policy?mode=live&white_label_id=${app.sandbox.white_label_id}` });
    expect(read.json()).toMatchObject({ liquidity_wait_seconds: 120, gateway: { account_number_masked: '******1112' } });

    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const response = await createDeposit(body(30_000), live);
    expect(response.statusCode).toBe(201);
    const deposit = response.json<DepositView>();
    expect(deposit).toMatchObject({ liquidity_source: 'external_gateway', leg_count: 1, legs: [{ amount_minor: 30_000, receiver: { bank_code: '014', account_number_masked: '******1112', account_name_masked: 'บริ*** เก*** จำกั***' } }] });
    expect(parse(deposit.legs[0]?.qr_payload ?? '', true)?.getTagValue('29', '04')).toBe('0145550001112');
    expect(deposit.expires_at).toBe(new Date(app.clock.now().getTime() + 600_000).toISOString());

    const internalOnly = await createDeposit(body(30_000, { fill_preference: 'internal_only' }), live);
    expect(internalOnly.statusCode).toBe(202);

    // Settling a gateway leg fills no withdrawal and credits the merchant as usual.
    const services = app.instance.services;
    await inTransaction(app, (tx) => services.deposits.markSlipReceived(tx, { white_label_id: app.sandbox.white_label_id, deposit_id: deposit.id, received_at: app.clock.now(), cause: SYSTEM_CAUSE }));
    const settled = await inTransaction(app, (tx) =>
      services.settlement.settle(tx, { white_label_id: app.sandbox.white_label_id, deposit_id: deposit.id, transferred_amount_minor: 30_000, settled_via: 'auto', cause: SYSTEM_CAUSE }),
    );
    expect(settled.ok && settled.value).toMatchObject({ status: 'settled', legs: [{ leg_status: 'complete' }] });
    expect((await app.signed({ url: '/v1/pay/balance', credentials: live })).json()).toMatchObject({ pending_clearing_minor: 30_000 - 482 });
  });
});

describe('a brand switch that turns qr_payload off', () => {
  it('hides every leg’s qr_payload of the brand’s orders (201 and GET), keeps qr_image_url, and leaves other brands alone', async () => {
    const { brand_id, depositor } = await brandWithWithdrawer('No raw QR brand', 500_000);
    const policy = depositPolicyBody({ white_label_id: brand_id });
    const off = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: { ...policy, qr_payload_enabled: false } });
    expect(off.statusCode, off.body).toBe(200);
    expect(off.json()).toMatchObject({ qr_payload_enabled: false, source: 'brand' });
    const read = await app.backoffice({ url: `/v1/bo/deposit-policy?mode=test&white_label_id=${brand_id}` });
    expect(read.json()).toMatchObject({ qr_payload_enabled: false });
    expect((await app.backoffice({ url: `/v1/bo/deposit-policy?mode=live&white_label_id=${brand_id}` })).json()).toMatchObject({ qr_payload_enabled: true, source: 'default' });

    const created = await createDeposit(body(20_000), depositor);
    expect(created.statusCode, created.body).toBe(201);
    const deposit = created.json<DepositView>();
    expect(deposit.legs.length).toBeGreaterThan(0);
    for (const leg of deposit.legs) {
      expect(leg).not.toHaveProperty('qr_payload');
      expect(leg.qr_image_url).toMatch(/\/qr\.png\?/);
    }
    const shown = await getDeposit(deposit.id, depositor);
    for (const leg of shown.legs) {
      expect(leg).not.toHaveProperty('qr_payload');
      expect(leg.qr_image_url).toBeDefined();
    }
    // The image link still serves the QR: the switch names the raw string only.
    const image = await app.instance.app.inject({ method: 'GET', url: (shown.legs[0]?.qr_image_url ?? '').slice(app.instance.services.publicBaseUrl().length) });
    expect(image.statusCode).toBe(200);

    // deposit.matched, the one event with payment instructions, follows the switch too (sandbox 105.00: a 25 s wait).
    const waiting = await createDeposit(body(10_500), depositor);
    expect(waiting.statusCode, waiting.body).toBe(202);
    app.clock.advance(25_000);
    await app.instance.worker.runDueJobs();
    const matchedEvent = (await eventsOf(waiting.json<DepositView>().id)).find((event) => event.type === 'deposit.matched');
    expect(matchedEvent?.data.object.legs.length).toBeGreaterThan(0);
    for (const leg of matchedEvent!.data.object.legs) {
      expect(leg).not.toHaveProperty('qr_payload');
      expect(leg.qr_image_url).toMatch(/\/qr\.png\?/);
    }

    // Another brand's orders keep their payload.
    const other = (await createDeposit(body(10_000))).json<DepositView>();
    expect(other.legs[0]?.qr_payload).toMatch(/^000201/);

    // Switching it back on (the omitted field means the default) shows the payload on the open order at once.
    const on = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: policy });
    expect(on.json()).toMatchObject({ qr_payload_enabled: true });
    expect((await getDeposit(deposit.id, depositor)).legs[0]?.qr_payload).toMatch(/^000201/);
  });
});

describe('crossing deposits', () => {
  it('deposits of two merchants paying each other’s withdrawals at once all succeed (no deadlock)', async () => {
    const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 't', request_id: null }, { name: 'Crossing Brand' });
    const merchants = [await app.createMerchant({ white_label_id: brand.id }), await app.createMerchant({ white_label_id: brand.id })];
    for (const merchant of merchants) {
      const account = accountOf(merchant);
      await fundAvailable(app, account, 100_000_000);
      const beneficiary_id = await verifiedBeneficiary(app, account);
      for (let index = 0; index < 5; index += 1) {
        const response = await app.signed({ method: 'POST', url: '/v1/pay/withdrawals', idempotency_key: crypto.randomUUID(), credentials: merchant, body: { amount_minor: 1_000_000, currency: 'THB', merchant_reference: `x-${index}`, end_user_ref: 'w', beneficiary_id } });
        expect(response.statusCode).toBe(201);
      }
    }
    const responses = await Promise.all(Array.from({ length: 40 }, (_, index) => createDeposit(body(10_000), merchants[index % 2])));
    expect(responses.filter((response) => response.statusCode !== 201).map((response) => response.body)).toEqual([]);
  });
});
