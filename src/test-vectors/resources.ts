import { z } from 'zod';

/** GET /v1/webhooks/test-vectors: the offline test vectors document (spec), kind `webhook_test_vectors_v1`. */
const webhookVectorSchema = z.object({
  name: z.string(),
  raw_body_base64: z.string().meta({ description: 'The exact body bytes, standard base64.' }),
  t: z.number().int(),
  event_id: z.string(),
  kid: z.string(),
  signature: z.string().meta({ description: 'base64url, no padding.' }),
  signature_header: z.string().meta({ description: 'The X-PG-Signature value.' }),
  public_key: z.string().meta({ description: 'SPKI, standard base64.' }),
  raw_public_key: z.string(),
  timestamp_validation: z.literal('exempt_offline_only'),
});

const requestVectorSchema = z.object({
  description: z.string(),
  api_key: z.string().meta({ description: 'A public, unregistered credential for offline use only.' }),
  signing_secret: z.string(),
  method: z.enum(['GET', 'POST']),
  path: z.string(),
  query: z.string(),
  sorted_query: z.string(),
  body: z.string(),
  body_base64: z.string(),
  body_sha256: z.string(),
  timestamp: z.string(),
  nonce: z.string(),
  idempotency_key: z.string(),
  api_version: z.string(),
  canonical_string: z.string(),
  signature: z.string(),
  headers: z.record(z.string(), z.string()),
});

export const testVectorDocumentSchema = z
  .object({
    kind: z.literal('webhook_test_vectors_v1'),
    timestamp_validation: z.string(),
    vectors: z.object({ thai: webhookVectorSchema, url: webhookVectorSchema, emoji: webhookVectorSchema }),
    api_request_vectors: z.object({ get_query: requestVectorSchema, post_thai: requestVectorSchema, post_emoji: requestVectorSchema }),
  })
  .meta({ id: 'webhook_test_vectors' });
