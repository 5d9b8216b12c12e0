import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import { parse as parsePromptPay } from 'promptparse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import { TEST_MASTER_KEY } from '../support/app.ts';
import { createDeposit, getDeposit, postToUploadUrl, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { tableNames } from '../support/table-snapshot.ts';
import { backofficeRequest, buildTenantWorld, signedPost, STAFF_NOTE, type Exchange, type TenantWorld } from '../support/tenant-world.ts';

/**
 * The secrets scan (issue 13, item 4 and the table scan of "Secrets at rest"). A broad slice of real
 * traffic runs with a logger that keeps every line at the most verbose level: tenants, keys and staff
 * made through the back office; deposits paid through the sandbox bank with their slips, settled,
 * reviewed, reversed and overpaid; withdrawals filled, approved and disputed; claims; webhooks
 * delivered to a local receiver that fails and then recovers; idempotent replays; the hosted checkout
 * page and QR images; and errors of every kind (bad signatures, refused capabilities, validation
 * errors on fields that hold account numbers, conflicts).
 *
 * Every secret that traffic carried is collected from the requests and answers themselves: API keys,
 * signing secrets, back-office tokens and every bearer credential sent, slip capability tokens,
 * checkout link secrets, PromptPay QR payloads and the full account numbers inside them, every full
 * account number sent, the slips' mini-QR payloads, and the master key. Then:
 * 1. no log line holds any of them, nor anything shaped like one;
 * 2. no error body holds any of them;
 * 3. no row of any table holds one in plain text (sealed values are ciphertext and cannot match). The
 *    one exception is the sandbox bank's own records (`SANDBOX_BANK_TABLES`): they stand for the bank's
 *    books, outside the service, and hold the test accounts merchants create and read back in full.
 */

/** Tables of the simulated bank (src/sandbox, src/bank-directory): a real deployment has a bank there, not rows. */
const SANDBOX_BANK_TABLES = new Set(['sandbox_bank_accounts', 'sandbox_bank_transfers']);

/**
 * Shapes of secrets, for what no needle names (a secret of traffic this file did not see). Each starts
 * where a token starts (not inside a longer base64url run), so that sealed ciphertext does not match.
 */
const SECRET_SHAPES: { name: string; pattern: RegExp }[] = [
  { name: 'API key', pattern: /(?<![A-Za-z0-9_-])sk_(?:test|live)_[A-Za-z0-9_-]{8,}/ },
  { name: 'signing secret', pattern: /(?<![A-Za-z0-9_-])sig_(?:test|live)_[A-Za-z0-9_-]{8,}/ },
  { name: 'back-office token', pattern: /(?<![A-Za-z0-9_-])bo_[A-Za-z0-9_-]{16,}/ },
  { name: 'slip capability', pattern: /(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}/ },
  { name: 'PromptPay payload', pattern: /(?<![A-Za-z0-9_-])000201010212\d{2}/ },
];

interface Needle {
  value: string;
  kind: string;
}

let w: TenantWorld;
const logLines: string[] = [];
const exchanges: Exchange[] = [];
const needles = new Map<string, Needle>();

function addNeedle(value: string | undefined | null, kind: string): void {
  if (typeof value !== 'string' || value.length < 6) return;
  needles.set(value, { value, kind });
}

/** Full account numbers inside a PromptPay payload (tag 29: the receiver's bank and account, or a PromptPay id). */
function accountsInPayload(payload: string): string[] {
  const parsed = parsePromptPay(payload);
  const found: string[] = [];
  for (const sub of ['01', '02', '03', '04']) {
    const value = parsed?.getTagValue('29', sub) ?? parsed?.getTagValue('30', sub);
    if (!value) continue;
    found.push(value);
    if (sub === '04' && value.length > 3) found.push(value.slice(3));
  }
  return found;
}

/** Collects the secrets of one JSON document (a request or an answer) by the fields that hold them. */
function collect(value: unknown, key = ''): void {
  if (typeof value === 'string') {
    if (/^(token|api_key|signing_secret|secret|operator_token)$/.test(key)) addNeedle(value, key);
    if (/account_number$|^promptpay_id$/.test(key) && /^\d+$/.test(value)) addNeedle(value, 'account number');
    if (key === 'qr_payload') {
      addNeedle(value, 'QR payload');
      for (const account of accountsInPayload(value)) addNeedle(account, 'account number in a QR payload');
    }
    if (key === 'payload' && value.startsWith('00')) addNeedle(value, 'slip mini-QR payload');
    const link = /\/(cs_[A-Za-z0-9_-]{20,})/.exec(value);
    if (link) addNeedle(link[1], 'checkout link secret');
    return;
  }
  if (Array.isArray(value)) for (const item of value) collect(item, key);
  else if (value && typeof value === 'object') for (const [name, item] of Object.entries(value)) collect(item, name);
}

function jsonOf(text: unknown): unknown {
  try {
    return JSON.parse(Buffer.isBuffer(text) ? text.toString('utf8') : String(text));
  } catch {
    return null;
  }
}

function headerOf(exchange: Exchange, name: string): string | undefined {
  const headers = (exchange.request.headers ?? {}) as Record<string, string | string[] | undefined>;
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

beforeAll(async () => {
  const stream = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(...String(chunk).split('\n').filter((line) => line !== ''));
      done();
    },
  });
  w = await buildTenantWorld({ logger: createLogger('trace', stream), on_exchange: (exchange) => exchanges.push(exchange) });
  await moreTraffic();
}, 240_000);

afterAll(async () => {
  await w?.close();
});

/** Traffic beyond the world's: decisions, errors, replays, failing webhooks, checkout pages, time passing. */
async function moreTraffic(): Promise<void> {
  const { app, victim, staff, objects } = w;
  const bo = (token: string, method: string, url: string, body?: unknown) => backofficeRequest(app, token, method, url, body);

  // Webhooks: the receiver fails for a while, so that deliveries are retried, then recovers.
  w.receiver.behaviour = () => ({ status: 500, body: 'receiver down' });

  // Back-office decisions.
  expect((await bo(staff.operator, 'POST', `/v1/bo/withdrawals/${objects.approval_withdrawal_ids[0]}/approve`, {})).statusCode).toBe(200);
  expect((await bo(staff.reviewer, 'POST', `/v1/bo/withdrawals/${objects.approval_withdrawal_ids[1]}/reject`, { note: STAFF_NOTE })).statusCode).toBe(200);
  expect((await bo(staff.reviewer, 'POST', `/v1/bo/reviews/${objects.review_deposit_ids[0]}/approve`, {})).statusCode).toBe(200);
  expect((await bo(staff.reviewer, 'POST', `/v1/bo/reviews/${objects.review_deposit_ids[1]}/reject`, { rejection_code: 'TRANSFER_NOT_RECEIVED', note: STAFF_NOTE })).statusCode).toBe(200);
  expect((await bo(staff.operator, 'POST', `/v1/bo/deposits/${objects.settled_deposit_id}/reverse`, { reason_code: 'OPS_ERROR', note: STAFF_NOTE })).statusCode).toBe(200);
  expect((await bo(staff.operator, 'POST', `/v1/bo/disputes/${objects.dispute_ids[0]}/resolve`, { outcome: 'depositor', note: STAFF_NOTE })).statusCode).toBe(200);
  expect((await bo(staff.operator, 'POST', `/v1/bo/claims/${w.brand.claim_ids[0]}/resolve`, { resolution_code: 'no_transfer_found', note: STAFF_NOTE })).statusCode).toBe(200);
  expect((await bo(staff.operator, 'POST', `/v1/bo/api-keys/${w.brand.spare_api_key_ids[0]}/revoke`)).statusCode).toBe(200);
  expect((await bo(staff.reviewer, 'POST', `/v1/bo/webhooks/${objects.endpoint_id}/deliveries/${objects.delivery_id}/resend`)).statusCode).toBe(202);
  expect((await bo(staff.admin, 'POST', '/v1/bo/deposit-policy', {
    white_label_id: victim.white_label_id, mode: 'live', min_amount_minor: 10_000, max_amount_minor: 5_000_000, default_expires_in_seconds: 900, max_expires_in_seconds: 3600,
    max_legs: 3, liquidity_wait_seconds: 300, gateway: { bank_code: '014', account_number: '9876543210', account_name_th: 'บริษัท เกตเวย์ จำกัด' },
  })).statusCode).toBe(200);
  expect((await bo(staff.operator, 'GET', `/v1/bo/reviews/${objects.review_deposit_ids[2]}`)).statusCode).toBe(200);
  expect((await bo(staff.operator, 'GET', `/v1/bo/reviews/${objects.review_deposit_ids[0]}/slips/${objects.review_receipt_id}/image`)).statusCode).toBe(200);
  expect((await bo(staff.operator, 'GET', `/v1/bo/merchants/${victim.merchant_id}/api-keys`)).statusCode).toBe(200);

  // A deposit creation replayed (its stored answer carries the capability and the QR payload), a new
  // capability, the order read back, its QR image and hosted checkout page.
  const body = {
    amount_minor: 17_000,
    currency: 'THB',
    merchant_reference: `secrets-${crypto.randomBytes(4).toString('hex')}`,
    end_user_ref: 'secrets-user',
    sender: { bank_code: '004', account_number: '6612345678', account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: 'device-secrets', ip: '203.0.113.8', user_agent: 'secrets-scan' },
  };
  const key = crypto.randomUUID();
  const first = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body, idempotency_key: key, credentials: victim });
  expect(first.statusCode, first.body).toBe(201);
  const replay = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body, idempotency_key: key, credentials: victim });
  expect(replay.headers['idempotent-replay']).toBe('true');
  const conflict = await app.signed({ method: 'POST', url: '/v1/pay/deposits', body: { ...body, amount_minor: 18_000 }, idempotency_key: key, credentials: victim });
  expect(conflict.statusCode).toBe(409);
  const order = first.json<{ id: string; checkout_url: string; legs: { qr_image_url: string }[] }>();
  expect((await signedPost(app, victim, `/v1/pay/deposits/${order.id}/slip-token`)).statusCode).toBe(200);
  await getDeposit(app, order.id, victim);
  const qr = new URL(order.legs[0]!.qr_image_url);
  expect((await app.instance.app.inject({ method: 'GET', url: `${qr.pathname}${qr.search}` })).statusCode).toBe(200);
  const checkout = new URL(order.checkout_url);
  const page = await app.instance.app.inject({ method: 'GET', url: checkout.pathname });
  expect(page.statusCode, page.body.slice(0, 200)).toBeLessThan(400);

  // Errors that carry secrets in their requests: refused signatures, capabilities, staff tokens, and
  // validation errors on fields that hold account numbers.
  expect((await app.signed({ url: '/v1/pay/balance', credentials: { ...victim, signing_secret: 'sig_test_not_the_secret_at_all' } })).statusCode).toBe(401);
  expect((await app.signed({ url: '/v1/pay/balance', credentials: { ...victim, api_key: `${victim.api_key}x` } })).statusCode).toBe(401);
  expect((await app.signed({ url: '/v1/pay/balance', credentials: w.victim_live, timestamp_seconds: Math.floor(app.clock.now().getTime() / 1000) - 1_000 })).statusCode).toBe(401);
  const invalidAccounts = await signedPost(app, victim, '/v1/pay/beneficiaries', { bank_code: '002', account_number: '123-456-78901', account_name_th: 'นาย สมชาย ใจดี' });
  expect(invalidAccounts.statusCode).toBe(422);
  const longAccount = await signedPost(app, victim, '/v1/pay/deposits', { ...body, merchant_reference: 'long-account', sender: { ...body.sender, account_number: '123456789012345678901234567890' } });
  expect(longAccount.statusCode).toBe(422);
  expect((await signedPost(app, victim, '/v1/test/bank/accounts/lookup', { bank_code: '004', account_number: '5550009999' })).statusCode).toBe(404);
  expect((await signedPost(app, victim, '/v1/pay/withdrawals', { amount_minor: 100_000_000, currency: 'THB', merchant_reference: 'too-much', end_user_ref: 'payee', beneficiary: { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } })).statusCode).toBeGreaterThanOrEqual(400);
  const upload = objects.open_deposit.slip_upload;
  expect((await postToUploadUrl(app, upload, '{"trans_ref":"X"}', 'application/json', { token: `${upload.token.slice(0, -2)}${upload.token.endsWith('AA') ? 'BB' : 'AA'}` })).statusCode).toBe(401);
  expect((await postToUploadUrl(app, upload, '{}', 'application/json', { headers: { authorization: `Bearer ${victim.api_key}` } })).statusCode).toBe(403);
  expect((await postToUploadUrl(app, upload, 'not json', 'application/json')).statusCode).toBe(400);
  expect((await bo(`${staff.operator}x`, 'GET', '/v1/bo/reviews')).statusCode).toBe(401);
  expect((await bo(victim.api_key, 'GET', '/v1/bo/reviews')).statusCode).toBe(403);
  expect((await bo(staff.reviewer, 'POST', `/v1/bo/reviews/${objects.review_deposit_ids[2]}/reject`, { rejection_code: 'TRANSFER_NOT_RECEIVED', note: 'short' })).statusCode).toBe(422);

  // A 105.00 THB order waits for liquidity and is matched: deposit.matched carries the legs' QR payloads, which
  // the stored event keeps sealed and the merchant's feed opens (docs/decisions/events.md).
  const waiting = await signedPost(app, victim, '/v1/pay/deposits', { ...body, amount_minor: 10_500, merchant_reference: 'secrets-waiting', sender: { ...body.sender, account_number: '6611122233' } });
  expect(waiting.statusCode, waiting.body).toBe(202);
  app.clock.advance(25_000);
  await runJobs(app);
  const matchedOrder = await getDeposit(app, waiting.json<{ id: string }>().id, victim);
  expect(matchedOrder.legs[0]?.qr_payload).toEqual(expect.any(String));
  const matchedEvents = await app.signed({ url: '/v1/pay/events?type=deposit.matched', credentials: victim });
  expect(matchedEvents.body).toContain(matchedOrder.legs[0]!.qr_payload!);

  // A slip of the new order through the sandbox bank, processed; then time passes: expiries, clearing,
  // fill auto-confirmation and webhook retries all run, and the receiver recovers.
  const created = await createDeposit(app, { amount_minor: 10_000, credentials: victim, sender: { bank_code: '004', account_number: '6698765432', account_name_th: 'สมชาย ใจดี' } });
  expect((await uploadMultipart(app, created.slip_upload, slipBytes(await sandboxTransfer(app, created, {}, victim)))).statusCode).toBe(202);
  await runJobs(app);
  await w.webhooks.dispatcher.runUntilIdle();
  w.receiver.behaviour = () => ({ status: 200 });
  for (let step = 0; step < 4; step += 1) {
    app.clock.advance(24 * HOUR_MS);
    await runJobs(app);
    await w.webhooks.dispatcher.runUntilIdle();
  }
  expect(w.receiver.requests.length, 'the receiver got deliveries').toBeGreaterThan(10);
}

function hitsIn(text: string): string[] {
  const hits: string[] = [];
  for (const needle of needles.values()) if (text.includes(needle.value)) hits.push(`${needle.kind} ${needle.value.slice(0, 12)}…`);
  for (const shape of SECRET_SHAPES) {
    const found = shape.pattern.exec(text);
    if (found) hits.push(`something shaped like a ${shape.name}: ${found[0].slice(0, 12)}…`);
  }
  return hits;
}

describe('secrets never reach a log, an error body or a table in plain text', () => {
  it('collects the secrets the traffic carried', () => {
    for (const exchange of exchanges) {
      collect(jsonOf(exchange.request.payload));
      collect(jsonOf(exchange.response.body));
      const authorization = headerOf(exchange, 'authorization');
      if (authorization) addNeedle(authorization.replace(/^Bearer\s+/i, ''), 'bearer credential');
    }
    addNeedle(TEST_MASTER_KEY.toString('base64'), 'master key');
    addNeedle(TEST_MASTER_KEY.toString('hex'), 'master key');
    const kinds = new Set([...needles.values()].map((needle) => needle.kind));
    // The scan means something only if the traffic carried every kind of secret.
    for (const kind of ['token', 'api_key', 'signing_secret', 'bearer credential', 'account number', 'QR payload', 'account number in a QR payload', 'checkout link secret', 'slip mini-QR payload']) {
      expect(kinds, `traffic carried a ${kind}`).toContain(kind);
    }
    process.stdout.write(`secrets scan: ${exchanges.length} requests, ${logLines.length} log lines, ${needles.size} secrets of ${kinds.size} kinds\n`);
  });

  it('no log line holds one', () => {
    expect(logLines.length).toBeGreaterThan(exchanges.length);
    const hits = logLines.flatMap((line) => hitsIn(line).map((hit) => `${hit} in ${line.slice(0, 300)}`));
    expect(hits).toEqual([]);
  });

  it('no error body holds one', () => {
    const errors = exchanges.filter((exchange) => exchange.response.statusCode >= 400);
    expect(errors.length).toBeGreaterThan(10);
    const hits = errors.flatMap((exchange) => hitsIn(exchange.response.body).map((hit) => `${hit} in ${exchange.request.method} ${exchange.request.url}: ${exchange.response.body.slice(0, 200)}`));
    expect(hits).toEqual([]);
  });

  it('no table holds one in plain text (sealed values are fine)', async () => {
    const db = w.app.testDatabase.database;
    const tables = await tableNames(db);
    const hits: string[] = [];
    let rowsScanned = 0;
    for (const table of tables) {
      if (SANDBOX_BANK_TABLES.has(table)) continue;
      const { rows } = await db.query<{ text: string }>(`SELECT r::text AS text FROM "${table}" r`);
      rowsScanned += rows.length;
      for (const row of rows) for (const hit of hitsIn(row.text)) hits.push(`${table}: ${hit}`);
    }
    process.stdout.write(`secrets scan: ${rowsScanned} rows of ${tables.length - SANDBOX_BANK_TABLES.size} tables\n`);
    expect(rowsScanned).toBeGreaterThan(500);
    expect([...new Set(hits)]).toEqual([]);
  });
});
