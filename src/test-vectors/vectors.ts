import crypto from 'node:crypto';
import { sha256Hex } from '../platform/crypto.ts';
import { canonicalString, signCanonical, sortQuery } from '../http/canonical.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import { signWebhookPayload } from '../webhooks/signing.ts';

/**
 * Offline test vectors (spec, GET /v1/webhooks/test-vectors). Everything here is deterministic and
 * built from public, unregistered credentials: the API key below does not exist in any database, and
 * the Ed25519 test key never signs a real event. A merchant checks their signer and verifier against
 * these without calling the service.
 */
export const TEST_VECTOR_API_KEY = 'sk_test_PUBLICxTESTxVECTORxNOTxREGISTERED';
export const TEST_VECTOR_SIGNING_SECRET = 'sig_test_PUBLICxTESTxVECTORxSECRETxDOxNOTxUSE';
const TEST_VECTOR_TIMESTAMP = '1785542400'; // 2026-08-01T00:00:00Z
const TEST_VECTOR_KID = 'test_vector_key_1';
// A published seed: anyone may derive the private key, which is why it only ever signs vectors.
const TEST_VECTOR_SEED_HEX = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const PKCS8_ED25519_PREFIX_HEX = '302e020100300506032b657004220420';

interface RequestVectorInput {
  description: string;
  method: 'GET' | 'POST';
  path: string;
  query: string;
  body: string;
  idempotency_key: string;
  nonce: string;
}

function requestVector(input: RequestVectorInput) {
  const canonical = canonicalString({
    timestamp: TEST_VECTOR_TIMESTAMP,
    nonce: input.nonce,
    method: input.method,
    path: input.path,
    query: input.query,
    body: input.body,
    idempotency_key: input.idempotency_key,
    api_version: CURRENT_API_VERSION,
  });
  const signature = signCanonical(TEST_VECTOR_SIGNING_SECRET, canonical);
  const headers: Record<string, string> = {
    Authorization: `Bearer ${TEST_VECTOR_API_KEY}`,
    'PG-Timestamp': TEST_VECTOR_TIMESTAMP,
    'PG-Nonce': input.nonce,
    'PG-Version': CURRENT_API_VERSION,
    'PG-Signature': signature,
  };
  if (input.idempotency_key) headers['Idempotency-Key'] = input.idempotency_key;
  if (input.body) headers['Content-Type'] = 'application/json';
  return {
    description: input.description,
    api_key: TEST_VECTOR_API_KEY,
    signing_secret: TEST_VECTOR_SIGNING_SECRET,
    method: input.method,
    path: input.path,
    query: input.query,
    sorted_query: sortQuery(input.query),
    body: input.body,
    body_base64: Buffer.from(input.body, 'utf8').toString('base64'),
    body_sha256: sha256Hex(input.body),
    timestamp: TEST_VECTOR_TIMESTAMP,
    nonce: input.nonce,
    idempotency_key: input.idempotency_key,
    api_version: CURRENT_API_VERSION,
    canonical_string: canonical,
    signature,
    headers,
  };
}

function testVectorKey(): { privateKey: crypto.KeyObject; spki_base64: string; raw_base64: string } {
  const privateKey = crypto.createPrivateKey({
    key: Buffer.from(PKCS8_ED25519_PREFIX_HEX + TEST_VECTOR_SEED_HEX, 'hex'),
    format: 'der',
    type: 'pkcs8',
  });
  const spki = crypto.createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  // The raw 32-byte key is the tail of the 44-byte SPKI encoding.
  return { privateKey, spki_base64: spki.toString('base64'), raw_base64: spki.subarray(spki.length - 32).toString('base64') };
}

function webhookVector(name: string, eventId: string, object: Record<string, unknown>) {
  const key = testVectorKey();
  const body = JSON.stringify({
    id: eventId,
    object: 'event',
    type: 'webhook.test_vector',
    api_version: CURRENT_API_VERSION,
    livemode: false,
    created_at: '2026-08-01T00:00:00.000Z',
    sequence: 1,
    account: { merchant_id: 'mch_01K0TESTVECTORMERCHANT0000', white_label_id: 'wl_01K0TESTVECTORBRAND000000' },
    data: { object },
  });
  const rawBody = Buffer.from(body, 'utf8');
  // The deliveries' own signer, so a vector can never drift from what a delivery sends.
  const signed = signWebhookPayload({ private_key: key.privateKey, kid: TEST_VECTOR_KID, t: Number(TEST_VECTOR_TIMESTAMP), event_id: eventId, body: rawBody });
  return {
    name,
    raw_body_base64: rawBody.toString('base64'),
    t: Number(TEST_VECTOR_TIMESTAMP),
    event_id: eventId,
    kid: TEST_VECTOR_KID,
    signature: signed.signature,
    signature_header: signed.header,
    public_key: key.spki_base64,
    raw_public_key: key.raw_base64,
    timestamp_validation: 'exempt_offline_only',
  };
}

/** Built once: the document is constant. */
let cached: Record<string, unknown> | null = null;

export function testVectorDocument(): Record<string, unknown> {
  if (cached) return cached;
  cached = {
    kind: 'webhook_test_vectors_v1',
    timestamp_validation:
      'The t of every vector is fixed in the past: skip the 300-second window check for these offline cryptographic tests only.',
    vectors: {
      thai: webhookVector('thai', 'evt_01K0TESTVECTORTHAI000000', {
        object: 'test_vector', note: 'โอนเงินสำเร็จ ขอบคุณค่ะ', name: 'สมชาย ใจดี',
      }),
      url: webhookVector('url', 'evt_01K0TESTVECTORURL0000000', {
        object: 'test_vector', return_url: 'https://merchant.example/return?order=A%2F1&lang=th&q=a+b#top',
      }),
      emoji: webhookVector('emoji', 'evt_01K0TESTVECTOREMOJI00000', {
        object: 'test_vector', note: 'paid 🎉👍🏽 ✅', flag: '🇹🇭',
      }),
    },
    api_request_vectors: {
      get_query: requestVector({
        description: 'GET with an unsorted query string; no body, no Idempotency-Key (empty lines 7 and 8 use the empty body hash and an empty key).',
        method: 'GET',
        path: '/v1/pay/events',
        query: 'since_sequence=42&limit=10&type=deposit.settled',
        body: '',
        idempotency_key: '',
        nonce: 'b1946ac92492d2347c6235b4d2611184',
      }),
      post_thai: requestVector({
        description: 'POST whose JSON body holds Thai text as UTF-8 bytes (not \\u escapes).',
        method: 'POST',
        path: '/v1/pay/deposits',
        query: '',
        body: JSON.stringify({
          amount_minor: 10000,
          currency: 'THB',
          merchant_reference: 'order-1001',
          end_user_ref: 'user-42',
          sender: { bank_code: '004', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' },
        }),
        idempotency_key: 'idem-thai-0001',
        nonce: '6f1ed002ab5595859014ebf0951522d9',
      }),
      post_emoji: requestVector({
        description: 'POST whose JSON body holds emoji (4-byte UTF-8 sequences) in metadata.',
        method: 'POST',
        path: '/v1/pay/deposits',
        query: '',
        body: JSON.stringify({
          amount_minor: 20000,
          currency: 'THB',
          merchant_reference: 'order-1002',
          end_user_ref: 'user-43',
          sender_id: 'snd_01K0TESTVECTORSENDER00000',
          metadata: { note: 'ขอบคุณ 🙏🎉', flag: '🇹🇭' },
        }),
        idempotency_key: 'idem-emoji-0001',
        nonce: 'd8e8fca2dc0f896fd7cb4cb0031ba249',
      }),
    },
  };
  return cached;
}
