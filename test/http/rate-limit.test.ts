import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, openSecondInstance, type TestApp } from '../support/app.ts';
import { testWriteRoutes } from '../support/test-routes.ts';
import { usingPostgres } from '../support/database.ts';
import { signedHeaders } from '../../src/http/canonical.ts';

const URL = '/v1/pay/test-writes';
const RATE_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-ratelimit-scope', 'retry-after'];
let app: TestApp;

beforeAll(async () => {
  app = await createTestApp({ extra_modules: [testWriteRoutes()] });
});
afterAll(async () => {
  await app.close();
});

function startOfNextWindow(): void {
  const now = app.clock.now().getTime();
  app.clock.set(new Date(Math.ceil((now + 1) / 60_000) * 60_000));
}

describe('rate headers on every response', () => {
  it('carries the six headers on 200, 401, 404, 405, 422 and back-office answers', async () => {
    const responses = [
      await app.signed({ url: '/v1/pay/banks' }),
      await app.signed({ url: '/v1/pay/banks', headers: { 'pg-signature': 'v1=00' } }),
      await app.signed({ url: '/v1/pay/nothing-here' }),
      await app.instance.app.inject({ method: 'DELETE', url: '/v1/pay/banks' }),
      await app.signed({ method: 'POST', url: URL, body: { amount_minor: 'x' }, idempotency_key: 'h-1' }),
      await app.backoffice({ url: '/v1/bo/brands' }),
      await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors' }),
    ];
    for (const response of responses) {
      for (const header of RATE_HEADERS) expect(response.headers[header], `${header} on ${response.statusCode}`).toBeDefined();
    }
    expect(responses.map((response) => response.statusCode)).toEqual([200, 401, 404, 405, 422, 200, 200]);
  });
});

describe('pay_write: 600 per minute per API key', () => {
  it('counts writes per key and answers 429 rate_limited on the 601st', async () => {
    startOfNextWindow();
    const other = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    let last = null;
    for (let index = 0; index < 600; index += 1) {
      // Several end users so that the per-user bucket does not trip first.
      last = await app.signed({
        method: 'POST', url: URL, credentials: other, idempotency_key: `w-${index}`,
        body: { amount_minor: 1, end_user_ref: `u-${index % 100}`, client: { device_fingerprint: 'd', ip: '198.51.100.1', user_agent: 'ua' } },
      });
      expect(last.statusCode).toBe(201);
    }
    expect(last!.headers['ratelimit-policy']).toBe('600;w=60');
    expect(last!.headers['ratelimit-remaining']).toBe('0');
    const limited = await app.signed({ method: 'POST', url: URL, credentials: other, idempotency_key: 'w-601', body: { amount_minor: 1, end_user_ref: 'u-new' } });
    expect(limited.statusCode).toBe(429);
    const error = errorOf(limited);
    expect(error.code).toBe('rate_limited');
    expect(error.retryable).toBe(true);
    expect(error.details).toEqual({ bucket: 'pay_write', scope: 'api_key' });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(error.retry_after_seconds).toBe(Number(limited.headers['retry-after']));
    // The sandbox key of the same merchant brand has its own bucket.
    expect((await app.signed({ method: 'POST', url: URL, idempotency_key: 'w-sandbox', body: { amount_minor: 1 } })).statusCode).toBe(201);
    app.clock.advance(60_000);
    expect((await app.signed({ method: 'POST', url: URL, credentials: other, idempotency_key: 'w-602', body: { amount_minor: 1, end_user_ref: 'u-x' } })).statusCode).toBe(201);
  });
});

describe('per-user creation buckets', () => {
  const client = { device_fingerprint: 'device-a', ip: '192.0.2.10', user_agent: 'Mozilla/5.0' };

  it('pay_create_per_user: 10 per minute per end user when client is complete', async () => {
    startOfNextWindow();
    for (let index = 0; index < 10; index += 1) {
      const response = await app.signed({ method: 'POST', url: URL, idempotency_key: `pu-${index}`, body: { amount_minor: 1, end_user_ref: 'alice', client } });
      expect(response.statusCode).toBe(201);
      // Until the end user's bucket refuses, the headers report the key's (spec, Limits: "`RateLimit-Policy` shows `600;w=60`").
      expect(response.headers).toMatchObject({ 'ratelimit-policy': '600;w=60', 'x-ratelimit-scope': 'api_key' });
    }
    const limited = await app.signed({ method: 'POST', url: URL, idempotency_key: 'pu-10', body: { amount_minor: 1, end_user_ref: 'alice', client } });
    expect(limited.statusCode).toBe(429);
    expect(errorOf(limited).details).toEqual({ bucket: 'pay_create_per_user', scope: 'user' });
    expect(limited.headers['x-ratelimit-scope']).toBe('user');
    expect(limited.headers['ratelimit-policy']).toBe('10;w=60');
    const bob = await app.signed({ method: 'POST', url: URL, idempotency_key: 'pu-bob', body: { amount_minor: 1, end_user_ref: 'bob', client } });
    expect(bob.statusCode).toBe(201);
  });

  it('a request refused at admission (a replayed nonce, a body that fails validation) does not count in the end user’s bucket', async () => {
    // The admission statement counts the further buckets only for an admitted request (src/tenancy/repository.ts),
    // so that a captured request replayed within its timestamp window cannot lock an end user out.
    startOfNextWindow();
    const body = { amount_minor: 1, end_user_ref: 'carol', client };
    const first = await app.signed({ method: 'POST', url: URL, idempotency_key: 'carol-0', body, nonce: 'carol-nonce-0000' });
    expect(first.statusCode).toBe(201);
    for (let index = 0; index < 12; index += 1) {
      const replayed = await app.signed({ method: 'POST', url: URL, idempotency_key: 'carol-0', body, nonce: 'carol-nonce-0000' });
      expect(errorOf(replayed).code).toBe('nonce_replayed');
      const invalid = await app.signed({ method: 'POST', url: URL, idempotency_key: `carol-bad-${index}`, body: { ...body, amount_minor: 'one' } });
      expect(invalid.statusCode).toBe(422);
    }
    for (let index = 1; index < 10; index += 1) {
      const response = await app.signed({ method: 'POST', url: URL, idempotency_key: `carol-${index}`, body });
      expect(response.statusCode, `request ${index}`).toBe(201);
    }
    const limited = await app.signed({ method: 'POST', url: URL, idempotency_key: 'carol-10', body });
    expect(limited.statusCode).toBe(429);
  });

  it('pay_create_shared: without a complete client every user of the merchant shares one coarse bucket', async () => {
    startOfNextWindow();
    for (let index = 0; index < 60; index += 1) {
      const response = await app.signed({ method: 'POST', url: URL, idempotency_key: `sh-${index}`, body: { amount_minor: 1, end_user_ref: `user-${index}` } });
      expect(response.statusCode).toBe(201);
    }
    const partialClient = { device_fingerprint: 'only-this' };
    const limited = await app.signed({ method: 'POST', url: URL, idempotency_key: 'sh-60', body: { amount_minor: 1, end_user_ref: 'someone-new', client: partialClient } });
    expect(limited.statusCode).toBe(429);
    expect(errorOf(limited).details).toEqual({ bucket: 'pay_create_shared', scope: 'merchant' });
    const complete = await app.signed({ method: 'POST', url: URL, idempotency_key: 'sh-61', body: { amount_minor: 1, end_user_ref: 'someone-new', client } });
    expect(complete.statusCode).toBe(201);
  });
});

describe.skipIf(!usingPostgres)('buckets are shared across processes (PostgreSQL)', () => {
  it('two instances on two pools count into one bucket', async () => {
    startOfNextWindow();
    const second = await openSecondInstance(app);
    try {
      const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
      const timestamp = Math.floor(app.clock.now().getTime() / 1000);
      let remaining = '';
      for (let index = 0; index < 10; index += 1) {
        const target = index % 2 === 0 ? app.instance.app : second.app;
        const response = await target.inject({
          method: 'GET',
          url: '/v1/pay/banks',
          headers: signedHeaders({ api_key: merchant.api_key, signing_secret: merchant.signing_secret, method: 'GET', target: '/v1/pay/banks', timestamp_seconds: timestamp }),
        });
        expect(response.statusCode).toBe(200);
        remaining = String(response.headers['ratelimit-remaining']);
      }
      expect(remaining).toBe('1190');
    } finally {
      await second.stop();
    }
  });
});
