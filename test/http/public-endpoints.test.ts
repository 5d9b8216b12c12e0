import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

interface RequestVector {
  api_key: string;
  signing_secret: string;
  method: string;
  path: string;
  query: string;
  sorted_query: string;
  body: string;
  body_sha256: string;
  timestamp: string;
  nonce: string;
  idempotency_key: string;
  api_version: string;
  canonical_string: string;
  signature: string;
  headers: Record<string, string>;
}

describe('GET /v1/webhooks/test-vectors', () => {
  it('needs no authentication and is stable', async () => {
    const first = await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors' });
    const second = await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors' });
    expect(first.statusCode).toBe(200);
    expect(first.body).toBe(second.body);
    expect(first.json().kind).toBe('webhook_test_vectors_v1');
  });

  it('api_request_vectors recompute independently with node:crypto, and the credential is not registered', async () => {
    const document = (await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors' })).json();
    const vectors = document.api_request_vectors as Record<string, RequestVector>;
    expect(Object.keys(vectors).sort()).toEqual(['get_query', 'post_emoji', 'post_thai']);
    for (const [name, vector] of Object.entries(vectors)) {
      const sorted = vector.query.split('&').filter(Boolean).sort().join('&');
      expect(vector.sorted_query, name).toBe(sorted);
      const bodyHash = crypto.createHash('sha256').update(Buffer.from(vector.body, 'utf8')).digest('hex');
      expect(vector.body_sha256).toBe(bodyHash);
      const canonical = `v1\n${vector.timestamp}\n${vector.nonce}\n${vector.method}\n${vector.path}\n${sorted}\n${bodyHash}\n${vector.idempotency_key}\n${vector.api_version}\n`;
      expect(vector.canonical_string).toBe(canonical);
      const signature = crypto.createHmac('sha256', vector.signing_secret).update(canonical).digest('hex');
      expect(vector.signature).toBe(`v1=${signature}`);
      expect(vector.headers['PG-Signature']).toBe(vector.signature);
      // The public credential must never authenticate.
      const response = await app.instance.app.inject({
        method: vector.method as 'GET',
        url: vector.query ? `${vector.path}?${vector.query}` : vector.path,
        headers: vector.headers,
        payload: vector.body || undefined,
      });
      expect(response.statusCode, name).toBeGreaterThanOrEqual(400);
      if (name === 'get_query') expect(errorOf(response).code).toBe('api_key_invalid');
    }
    expect(vectors.post_thai!.body).toContain('สมชาย');
    expect(vectors.post_emoji!.body).toMatch(/\p{Extended_Pictographic}/u);
    expect(vectors.get_query!.sorted_query).toBe('limit=10&since_sequence=42&type=deposit.settled');
  });

  it('Ed25519 vectors thai, url and emoji verify with the published key', async () => {
    const document = (await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors' })).json();
    for (const name of ['thai', 'url', 'emoji']) {
      const vector = document.vectors[name];
      const body = Buffer.from(vector.raw_body_base64, 'base64');
      expect(JSON.parse(body.toString('utf8')).id).toBe(vector.event_id);
      expect(JSON.parse(body.toString('utf8')).type).toBe('webhook.test_vector');
      const key = crypto.createPublicKey({ key: Buffer.from(vector.public_key, 'base64'), format: 'der', type: 'spki' });
      const signed = Buffer.concat([Buffer.from(`v1.${vector.t}.${vector.event_id}.`), body]);
      expect(crypto.verify(null, signed, key, Buffer.from(vector.signature, 'base64url'))).toBe(true);
      expect(vector.signature_header).toBe(`v1,kid=${vector.kid},t=${vector.t},s=${vector.signature}`);
      expect(vector.signature).not.toContain('=');
      expect(Buffer.from(vector.raw_public_key, 'base64')).toHaveLength(32);
    }
  });
});

describe('GET /v1/pay/banks', () => {
  it('lists the Thai banks with codes, names, availability and side', async () => {
    const response = await app.signed({ url: '/v1/pay/banks' });
    expect(response.statusCode).toBe(200);
    const banks = response.json().data as Array<Record<string, unknown>>;
    const byCode = new Map(banks.map((bank) => [bank.bank_code, bank]));
    expect(byCode.get('004')).toEqual({ bank_code: '004', name_th: 'ธนาคารกสิกรไทย', name_en: 'Kasikornbank', available: true, side: ['sender', 'receiver'] });
    expect(byCode.get('014')?.name_en).toBe('Siam Commercial Bank');
    for (const bank of banks) {
      expect(bank.bank_code).toMatch(/^[0-9]{3}$/);
      expect(String(bank.name_th)).toMatch(/^ธนาคาร/);
      if (bank.available) expect('message_th' in bank).toBe(false);
      else expect(String(bank.message_th)).toMatch(/[\u0E00-\u0E7F]/);
    }
    expect(banks.some((bank) => bank.available === false)).toBe(true);
  });

  it('requires merchant authentication', async () => {
    const response = await app.instance.app.inject({ method: 'GET', url: '/v1/pay/banks' });
    expect(errorOf(response).code).toBe('api_key_invalid');
  });
});

describe('operations endpoints', () => {
  it('health, readiness and Prometheus metrics', async () => {
    expect((await app.instance.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    // Readiness turns on in listen(); this instance was only made ready for inject.
    expect((await app.instance.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503);
    await app.signed({ url: '/v1/pay/banks' });
    // Without METRICS_TOKEN the metrics (every tenant's traffic by route) are not served at all.
    expect((await app.instance.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
  });

  it('/metrics answers only the scraper holding METRICS_TOKEN', async () => {
    const token = 'metrics-scraper-token-0123456789abcdef';
    const scraped = await createTestApp({ config: { METRICS_TOKEN: token } });
    try {
      await scraped.signed({ url: '/v1/pay/banks' });
      for (const authorization of [undefined, 'Bearer wrong-token-of-the-same-length-000000', `Basic ${token}`, `Bearer ${token}x`]) {
        const refused = await scraped.instance.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
        expect(refused.statusCode, authorization).toBe(401);
        expect(refused.body).not.toContain('http_requests_total');
      }
      const metrics = await scraped.instance.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${token}` } });
      expect(metrics.statusCode).toBe(200);
      expect(metrics.body).toContain('http_requests_total{method="GET",route="/v1/pay/banks",status="200"}');
      expect(metrics.body).toContain('http_request_duration_seconds_bucket');
    } finally {
      await scraped.close();
    }
  });
});
