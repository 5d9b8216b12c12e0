import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_VERSION,
  WebhookVerificationError,
  WebhookVerifier,
  canonicalString,
  encodeQuery,
  sha256Hex,
  signRequest,
  sortQuery,
  type TestVectors,
  type WebhookSigningKey,
} from '../src/index.ts';
import { startService, type ListeningService } from './support/service.ts';

/**
 * The SDK's signer and verifier against the service's published vectors, fetched over HTTP from the
 * running service (GET /v1/webhooks/test-vectors): every line of every merchant-request vector, every
 * header, and every webhook vector's signature.
 */

let service: ListeningService;
let vectors: TestVectors;

beforeAll(async () => {
  service = await startService();
  vectors = await service.client().webhooks.testVectors();
});
afterAll(async () => {
  await service.close();
});

describe('merchant request signing (api_request_vectors)', () => {
  it('reproduces every vector: sorted query, body hash, canonical string, signature and headers', () => {
    const entries = Object.entries(vectors.api_request_vectors);
    expect(entries.length).toBeGreaterThanOrEqual(3);
    for (const [name, vector] of entries) {
      const body = Buffer.from(vector.body_base64, 'base64');
      expect(body.toString('utf8'), name).toBe(vector.body);
      expect(sortQuery(vector.query), name).toBe(vector.sorted_query);
      expect(sha256Hex(body), name).toBe(vector.body_sha256);
      expect(vector.api_version, name).toBe(API_VERSION);
      const canonical = canonicalString({
        timestamp: vector.timestamp,
        nonce: vector.nonce,
        method: vector.method,
        path: vector.path,
        query: vector.query,
        body,
        idempotency_key: vector.idempotency_key,
        api_version: vector.api_version,
      });
      expect(canonical, name).toBe(vector.canonical_string);
      const headers = signRequest({
        api_key: vector.api_key,
        signing_secret: vector.signing_secret,
        method: vector.method,
        path: vector.path,
        query: vector.query,
        ...(body.length > 0 ? { body } : {}),
        ...(vector.idempotency_key ? { idempotency_key: vector.idempotency_key } : {}),
        timestamp_seconds: Number(vector.timestamp),
        nonce: vector.nonce,
      });
      const expected = Object.fromEntries(Object.entries(vector.headers).filter(([header]) => header !== 'Content-Type').map(([header, value]) => [header.toLowerCase(), value]));
      expect(headers, name).toEqual(expected);
    }
  });

  it('a query built by the client is sent in the order the canonical string sorts it', () => {
    expect(encodeQuery({ since_sequence: 42, limit: 10, type: 'deposit.settled', skipped: undefined })).toBe('limit=10&since_sequence=42&type=deposit.settled');
    expect(encodeQuery({ q: 'a b&c' })).toBe('q=a%20b%26c');
    expect(sortQuery(encodeQuery({ b: 1, a: 2 }))).toBe(encodeQuery({ b: 1, a: 2 }));
  });
});

describe('webhook verification (vectors)', () => {
  it('verifies every published vector over its raw bytes, and refuses a changed byte', async () => {
    const entries = Object.values(vectors.vectors);
    expect(entries.length).toBeGreaterThanOrEqual(3);
    for (const vector of entries) {
      const key: WebhookSigningKey = {
        kid: vector.kid, alg: 'Ed25519', public_key: vector.public_key, format: 'spki_der_base64', raw_public_key: vector.raw_public_key,
        status: 'active', not_before: '2026-01-01T00:00:00.000Z', not_after: null,
      };
      // The vectors' t is fixed in the past: the receiver's clock is set to it for these offline checks only.
      const verifier = new WebhookVerifier({ livemode: false, keys: async () => [key], now_ms: () => vector.t * 1000 });
      const body = Buffer.from(vector.raw_body_base64, 'base64');
      const headers = { 'x-pg-signature': vector.signature_header, 'x-pg-event-id': vector.event_id };
      const event = await verifier.verify(body, headers);
      expect(event).toMatchObject({ id: vector.event_id, type: 'webhook.test_vector', livemode: false });
      const changed = Buffer.from(body);
      changed[changed.length - 2] = changed[changed.length - 2]! ^ 1;
      await expect(verifier.verify(changed, headers)).rejects.toMatchObject({ reason: 'signature_invalid' });
      // The same signature on the real clock is outside the 300-second window.
      const now = new WebhookVerifier({ livemode: false, keys: async () => [key] });
      await expect(now.verify(body, headers)).rejects.toBeInstanceOf(WebhookVerificationError);
      await expect(now.verify(body, headers)).rejects.toMatchObject({ reason: 'timestamp_out_of_window' });
    }
  });
});
