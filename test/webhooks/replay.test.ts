import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { signWebhookPayload } from '../../src/webhooks/signing.ts';
import { MemoryReceiverStore, ReferenceReceiver, SigningKeyCache, type PublishedKey } from '../../examples/webhook-receiver/receiver.ts';

/**
 * POST /v1/test/webhooks/replay-out-of-order: the outbox gets the test orders' events in the wrong
 * order (delivery follows the outbox sequence), and the reference receiver, fed those exact bytes in
 * that order, ends with the spec's required results for cases A, B and C.
 */

let app: TestApp;
beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

interface ReplayAnswer {
  object: string;
  cases: { case: 'A' | 'B' | 'C'; object_id: string; event_ids: string[]; expected_final: Record<string, unknown> }[];
}

describe('replay out of order', () => {
  it('writes cases A, B and C out of sequence, and a version-checking receiver ends as the spec requires', async () => {
    const response = await app.signed({ method: 'POST', url: '/v1/test/webhooks/replay-out-of-order', idempotency_key: 'replay-1' });
    expect(response.statusCode).toBe(202);
    const answer = response.json<ReplayAnswer>();
    expect(answer.cases.map((item) => item.case)).toEqual(['A', 'B', 'C']);

    const { rows } = await app.testDatabase.database.query<{ event_id: string; text: string }>(
      'SELECT event_id, envelope::text AS text FROM events WHERE merchant_id = $1 AND livemode = false ORDER BY sequence',
      [app.sandbox.merchant_id],
    );
    const replayIds = new Set(answer.cases.flatMap((item) => item.event_ids));
    const delivered = rows.filter((row) => replayIds.has(row.event_id));
    expect(delivered.map((row) => row.event_id)).toEqual(answer.cases.flatMap((item) => item.event_ids));
    // Versions really arrive out of order: A 1,3,2; B 1,2,4,3; C 1,4,2,3.
    const versions = delivered.map((row) => (JSON.parse(row.text) as { data: { object: { version: number } } }).data.object.version);
    expect(versions).toEqual([1, 3, 2, 1, 2, 4, 3, 1, 4, 2, 3]);

    const keys = crypto.generateKeyPairSync('ed25519');
    const published: PublishedKey = {
      kid: 'whk_REPLAY',
      alg: 'Ed25519',
      public_key: keys.publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
      format: 'spki_der_base64',
      raw_public_key: '',
      status: 'active',
      not_before: '2026-01-01T00:00:00.000Z',
      not_after: null,
    };
    const nowMs = app.clock.now().getTime();
    const store = new MemoryReceiverStore();
    const receiver = new ReferenceReceiver({ livemode: false, keys: new SigningKeyCache(async () => ({ keys: [published] }), () => nowMs), now_ms: () => nowMs, store });
    for (const row of delivered) {
      const body = Buffer.from(row.text, 'utf8');
      const signed = signWebhookPayload({ private_key: keys.privateKey, kid: published.kid, t: Math.floor(nowMs / 1000), event_id: row.event_id, body });
      const result = await receiver.handle(body, { 'x-pg-signature': signed.header, 'x-pg-event-id': row.event_id });
      expect(result.status).toBe(200);
    }
    const [a, b, c] = answer.cases;
    expect(store.object('deposit_order', a!.object_id)).toMatchObject({ status: 'settled', version: 3 });
    expect(store.object('deposit_order', b!.object_id)).toMatchObject({ status: 'reversed', version: 4 });
    expect(store.object('withdrawal_order', c!.object_id)).toMatchObject({ version: 4, remaining_minor: 0 });
    // No money moved and nothing was reserved for the test orders.
    const { rows: movements } = await app.testDatabase.database.query('SELECT 1 FROM balance_transactions WHERE merchant_id = $1', [app.sandbox.merchant_id]);
    expect(movements).toHaveLength(0);
  });

  it('does not exist for a live key', async () => {
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    const response = await app.signed({ method: 'POST', url: '/v1/test/webhooks/replay-out-of-order', idempotency_key: 'replay-live', credentials: live });
    expect(response.statusCode).toBe(404);
    expect(errorOf(response).code).toBe('resource_not_found');
  });
});
