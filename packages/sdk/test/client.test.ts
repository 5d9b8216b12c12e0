import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  ApiError,
  ConnectionError,
  PaymentClient,
  isApiError,
  type CreateDepositParams,
  type CursorPage,
  type DepositOrder,
  type FieldProblem,
  type RetryNotice,
  type WithdrawalOrder,
} from '../src/index.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../../../test/support/withdrawals.ts';
import { startProxy, startService, type ListeningService, type Proxy } from './support/service.ts';

/**
 * The SDK client against the real service over HTTP: typed resources, typed errors, and retries that
 * keep the Idempotency-Key and sign every attempt afresh. A recording proxy between the two drops or
 * answers chosen requests; every attempt it forwards is judged by the real service, which refuses a
 * reused nonce or a wrong signature, so a retry that passed through was signed correctly.
 */

let service: ListeningService;
let proxy: Proxy;
let counter = 0;

beforeAll(async () => {
  service = await startService();
  proxy = await startProxy(service.base_url);
});
afterAll(async () => {
  await proxy.close();
  await service.close();
});

function depositParams(overrides: Partial<CreateDepositParams> = {}): CreateDepositParams {
  counter += 1;
  const reference = `sdk-${process.pid}-${counter}-${crypto.randomBytes(3).toString('hex')}`;
  return {
    amount_minor: 10_000,
    currency: 'THB',
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { bank_code: '002', account_number: `77${String(counter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.9', user_agent: 'sdk-test' },
    ...overrides,
  };
}

/** A client through the proxy that records its retries and waits no real time. */
function proxiedClient(overrides: Partial<ConstructorParameters<typeof PaymentClient>[0]> = {}) {
  const retries: RetryNotice[] = [];
  const waits: number[] = [];
  const client = new PaymentClient({
    base_url: proxy.url,
    api_key: service.app.sandbox.api_key,
    signing_secret: service.app.sandbox.signing_secret,
    sleep: async (ms) => void waits.push(ms),
    on_retry: (retry) => void retries.push(retry),
    ...overrides,
  });
  return { client, retries, waits };
}

describe('typed resources', () => {
  it('creates, reads, lists and cancels a deposit; reads banks, balance and senders', async () => {
    const client = service.client();
    const created = await client.deposits.create(depositParams());
    expectTypeOf(created).toEqualTypeOf<DepositOrder>();
    expect(created).toMatchObject({ object: 'deposit_order', status: 'awaiting_payment', amount_minor: 10_000, version: 1, livemode: false });
    expect(created.checkout_url).toMatch(/^http/);
    expect(created.slip_upload?.upload_url).toMatch(/\/slip$/);
    const read = await client.deposits.retrieve(created.id);
    expect(read).toMatchObject({ id: created.id, status: 'awaiting_payment' });
    const page = await client.deposits.list({ limit: 1, end_user_ref: created.end_user_ref });
    expect(page).toMatchObject({ object: 'list', has_more: false, data: [expect.objectContaining({ id: created.id })] });
    const canceled = await client.deposits.cancel(created.id);
    expect(canceled).toMatchObject({ id: created.id, status: 'canceled', canceled_by: 'merchant', version: 2 });
    const banks = await client.banks.list();
    expect(banks.data.some((bank) => bank.bank_code === '002')).toBe(true);
    const balance = await client.balance.retrieve();
    expect(balance).toMatchObject({ object: 'balance', currency: 'THB', livemode: false });
    expect(Number.isSafeInteger(balance.available_minor)).toBe(true);
    const senders = await client.senders.list(created.end_user_ref);
    // A sender is registered once a payment from it settles; this order was canceled unpaid.
    expect(senders).toEqual({ object: 'list', data: [] });
    const events = await client.events.list({ since_sequence: 0, limit: 500 });
    expect(events.data.filter((event) => event.data.object.id === created.id).map((event) => event.type)).toEqual(['deposit.created', 'deposit.canceled']);
  });

  it('the same Idempotency-Key twice answers the stored response, marked as a replay', async () => {
    const client = service.client();
    const key = crypto.randomUUID();
    const params = depositParams();
    const first = await client.request<DepositOrder>({ method: 'POST', path: '/v1/pay/deposits', body: params, idempotency_key: key });
    const second = await client.request<DepositOrder>({ method: 'POST', path: '/v1/pay/deposits', body: params, idempotency_key: key });
    expect(first).toMatchObject({ http_status: 201, idempotent_replay: false, attempts: 1 });
    expect(second).toMatchObject({ http_status: 201, idempotent_replay: true });
    expect(second.data.id).toBe(first.data.id);
    expect(first.request_id).toMatch(/^req_/);
  });
});

describe('withdrawals.list', () => {
  it('lists withdrawals with typed filters, follows the cursor, and refuses a cursor of other filters', async () => {
    // A merchant of its own, funded, so that the balance the other tests expect of the sandbox merchant stays as it is.
    const merchant = await service.app.createMerchant({ white_label_id: service.app.sandbox.white_label_id });
    const account = accountOf(merchant);
    await fundAvailable(service.app, account, 1_000_000);
    const beneficiary_id = await verifiedBeneficiary(service.app, account);
    const client = service.client({ api_key: merchant.api_key, signing_secret: merchant.signing_secret });
    const created: WithdrawalOrder[] = [];
    for (let index = 0; index < 3; index += 1) {
      const reference = `sdk-wd-${crypto.randomUUID()}`;
      created.push(await client.withdrawals.create({ amount_minor: 5_000, currency: 'THB', merchant_reference: reference, end_user_ref: 'user-sdk-list', beneficiary_id }));
    }
    const newestFirst = [...created].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1)).map((order) => order.id);

    const first = await client.withdrawals.list({ end_user_ref: 'user-sdk-list', status: 'open', limit: 2 });
    expectTypeOf(first).toEqualTypeOf<CursorPage<WithdrawalOrder>>();
    expect(first).toMatchObject({ object: 'list', has_more: true });
    expect(first.data[0]).not.toHaveProperty('fills');
    const second = await client.withdrawals.list({ end_user_ref: 'user-sdk-list', status: 'open', limit: 2, cursor: first.next_cursor! });
    expect(second).toMatchObject({ has_more: false, next_cursor: null });
    expect([...first.data, ...second.data].map((order) => order.id)).toEqual(newestFirst);

    const exact = await client.withdrawals.list({ merchant_reference: created[1]!.merchant_reference });
    expect(exact.data.map((order) => order.id)).toEqual([created[1]!.id]);

    const refused = await client.withdrawals.list({ end_user_ref: 'user-sdk-list', status: 'canceled', cursor: first.next_cursor! }).catch((error: unknown) => error);
    expect(isApiError(refused, 'cursor_filter_mismatch')).toBe(true);
  });
});

describe('typed errors', () => {
  it('expose code, retryable, details and request_id, narrowed by code; a non-retryable code is sent once', async () => {
    const { client, retries } = proxiedClient();
    const before = proxy.requests.length;
    const error = await client.deposits.create(depositParams({ amount_minor: 10_050 })).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(ApiError);
    if (!isApiError(error)) throw new Error('not an ApiError');
    expect(error).toMatchObject({ http_status: 422, retryable: false });
    expect(['amount_not_supported', 'validation_error']).toContain(error.code);
    expect(error.request_id).toMatch(/^req_/);
    expect(proxy.requests.length - before).toBe(1);
    expect(retries).toEqual([]);

    const invalid = await client.deposits.create({ ...depositParams(), sender: { bank_code: '002', account_number: '12-34', account_name_th: 'นาย สมชาย' } }).catch((thrown: unknown) => thrown);
    expect(isApiError(invalid, 'validation_error')).toBe(true);
    if (isApiError(invalid, 'validation_error')) {
      expectTypeOf(invalid.details.fields).toEqualTypeOf<FieldProblem[]>();
      expect(invalid.details.fields.map((field) => field.reason)).toEqual(expect.arrayContaining(['must_be_digits', 'must_not_contain_title']));
    }
    const missing = await client.deposits.retrieve('dep_01K0NOSUCHDEPOSIT00000000').catch((thrown: unknown) => thrown as ApiError);
    expect(missing).toMatchObject({ code: 'resource_not_found', http_status: 404, retryable: false });
  });

  it('a wrong signing secret is signature_invalid, never retried', async () => {
    const { client, retries } = proxiedClient({ signing_secret: 'sig_test_wrong' });
    const before = proxy.requests.length;
    await expect(client.balance.retrieve()).rejects.toMatchObject({ code: 'signature_invalid', http_status: 401, retryable: false });
    expect(proxy.requests.length - before).toBe(1);
    expect(retries).toEqual([]);
  });

  it('a retryable code that awaits a change (insufficient_balance) is returned at once, still marked retryable', async () => {
    const { client } = proxiedClient();
    const before = proxy.requests.length;
    const error = await client.withdrawals
      .create({ amount_minor: 50_000, currency: 'THB', merchant_reference: `wd-${crypto.randomUUID()}`, end_user_ref: 'user-wd', beneficiary: { bank_code: '004', account_number: '1234567890', account_name_th: 'สมหญิง ใจดี' } })
      .then(
        () => null,
        (thrown: unknown) => thrown as ApiError,
      );
    expect(error).toBeInstanceOf(ApiError);
    if (error === null) throw new Error('the withdrawal was created');
    // Either the beneficiary is still being verified or the balance is short: both await a change.
    expect(['beneficiary_not_verified', 'insufficient_balance']).toContain(error.code);
    expect(error.retryable).toBe(true);
    expect(proxy.requests.length - before).toBe(1);
  });
});

describe('retries', () => {
  it('a lost connection is retried with the same Idempotency-Key and a new nonce, timestamp and signature; the service accepts the retry', async () => {
    let dropped = 0;
    proxy.action = (request) => (request.method === 'POST' && dropped++ < 2 ? 'drop' : 'forward');
    let now = Date.now();
    const { client, retries, waits } = proxiedClient({ now_ms: () => (now += 1_000), random: () => 0.5 });
    const before = proxy.requests.length;
    try {
      const created = await client.deposits.create(depositParams());
      expect(created.status).toBe('awaiting_payment');
    } finally {
      proxy.action = () => 'forward';
    }
    const attempts = proxy.requests.slice(before);
    expect(attempts).toHaveLength(3);
    const keys = new Set(attempts.map((attempt) => attempt.headers['idempotency-key']));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(attempts.map((attempt) => attempt.headers['pg-nonce'])).size).toBe(3);
    expect(new Set(attempts.map((attempt) => attempt.headers['pg-timestamp'])).size).toBe(3);
    expect(new Set(attempts.map((attempt) => attempt.headers['pg-signature'])).size).toBe(3);
    expect(attempts.every((attempt) => attempt.body.equals(attempts[0]!.body))).toBe(true);
    expect(retries.map((retry) => [retry.attempt, retry.error.constructor.name])).toEqual([[1, 'ConnectionError'], [2, 'ConnectionError']]);
    // Exponential backoff from 500 ms (random 0.5 is the middle of the ±20 % jitter).
    expect(waits).toEqual([500, 1000]);
  });

  it('the attempts are bounded: a service that never answers fails after max_attempts with a ConnectionError', async () => {
    proxy.action = () => 'drop';
    const { client, retries } = proxiedClient({ max_attempts: 3 });
    const before = proxy.requests.length;
    try {
      await expect(client.balance.retrieve()).rejects.toBeInstanceOf(ConnectionError);
    } finally {
      proxy.action = () => 'forward';
    }
    expect(proxy.requests.length - before).toBe(3);
    expect(retries).toHaveLength(2);
  });

  it('load shedding (503 with retry_after_seconds) waits that long plus at most 20 %, then retries', async () => {
    let shed = 0;
    proxy.action = (request) =>
      request.url.startsWith('/v1/pay/balance') && shed++ < 1
        ? {
            status: 503,
            headers: { 'retry-after': '2' },
            body: JSON.stringify({ error: { code: 'service_unavailable', type: 'api_error', message: 'shedding', message_th: '', retryable: true, retry_after_seconds: 2, request_id: 'req_proxy', details: {} } }),
          }
        : 'forward';
    const low = proxiedClient({ random: () => 0 });
    const high = proxiedClient({ random: () => 0.999999 });
    try {
      await low.client.balance.retrieve();
      shed = 0;
      await high.client.balance.retrieve();
    } finally {
      proxy.action = () => 'forward';
    }
    expect(low.waits).toEqual([2_000]);
    expect(high.waits).toEqual([2_400]);
    expect(low.retries[0]?.error).toMatchObject({ code: 'service_unavailable', retry_after_seconds: 2 });
  });

  it('a wait longer than max_retry_wait_ms is not waited: the error goes to the caller', async () => {
    proxy.action = () => ({
      status: 503,
      headers: { 'retry-after': '120' },
      body: JSON.stringify({ error: { code: 'service_unavailable', type: 'api_error', message: 'shedding', message_th: '', retryable: true, retry_after_seconds: 120, request_id: 'req_proxy', details: {} } }),
    });
    const { client, waits } = proxiedClient();
    try {
      await expect(client.balance.retrieve()).rejects.toMatchObject({ code: 'service_unavailable', retry_after_seconds: 120 });
    } finally {
      proxy.action = () => 'forward';
    }
    expect(waits).toEqual([]);
  });

  it('a real 429 from the service: waits Retry-After (plus jitter) on the service clock, retries with the same key, and the order is created once', async () => {
    const clock = service.app.clock;
    clock.set(new Date());
    const waits: number[] = [];
    const retries: RetryNotice[] = [];
    const client = service.client({
      now_ms: () => clock.now().getTime(),
      // The wait passes on the service's clock, where its rate windows are counted.
      sleep: async (ms) => {
        waits.push(ms);
        clock.advance(ms);
      },
      random: () => 0.5,
      on_retry: (retry) => void retries.push(retry),
    });
    const user = depositParams();
    // The per-user creation bucket holds 10 a minute; each order is canceled so the open-order cap stays clear.
    for (let index = 0; index < 10; index += 1) {
      const order = await client.deposits.create({ ...depositParams(), end_user_ref: user.end_user_ref, client: user.client! });
      await client.deposits.cancel(order.id);
    }
    const key = crypto.randomUUID();
    const created = await client.request<DepositOrder>({ method: 'POST', path: '/v1/pay/deposits', body: { ...depositParams(), end_user_ref: user.end_user_ref, client: user.client }, idempotency_key: key });
    expect(created).toMatchObject({ http_status: 201, attempts: 2 });
    expect(retries).toHaveLength(1);
    const limited = retries[0]!.error as ApiError<'rate_limited'>;
    expect(limited).toMatchObject({ code: 'rate_limited', http_status: 429, retryable: true });
    expect(limited.details).toMatchObject({ bucket: 'pay_create_per_user' });
    const asked = (limited.retry_after_seconds ?? limited.retry_after_header_seconds)!;
    expect(asked).toBeGreaterThan(0);
    expect(waits).toEqual([Math.round(asked * 1000 * 1.1)]);
    const listed = await client.deposits.list({ end_user_ref: user.end_user_ref, limit: 100 });
    expect(listed.data.filter((order) => order.status === 'awaiting_payment')).toHaveLength(1);
  });
});

describe('client options', () => {
  it('refuses a base URL with a query or credentials, and a missing key', () => {
    const good = { base_url: 'https://pay.example', api_key: 'sk_test_x', signing_secret: 'secret' };
    expect(() => new PaymentClient({ ...good, base_url: 'ftp://pay.example' })).toThrow(TypeError);
    expect(() => new PaymentClient({ ...good, base_url: 'https://user:pw@pay.example' })).toThrow(TypeError);
    expect(() => new PaymentClient({ ...good, base_url: 'https://pay.example/?a=1' })).toThrow(TypeError);
    expect(() => new PaymentClient({ ...good, api_key: '' })).toThrow(TypeError);
    expect(() => new PaymentClient({ ...good, max_attempts: 0 })).toThrow(RangeError);
    expect(new PaymentClient({ ...good, base_url: 'https://pay.example/' }).base_url).toBe('https://pay.example');
  });
});
