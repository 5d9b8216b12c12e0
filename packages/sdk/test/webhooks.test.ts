import crypto from 'node:crypto';
import http from 'node:http';
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MemoryEventStore,
  PaymentClient,
  SigningKeyCache,
  WebhookVerificationError,
  WebhookVerifier,
  applyEvent,
  isKnownEvent,
  signingKeysFrom,
  type ApplyOutcome,
  type DepositOrder,
  type PaymentEvent,
  type WebhookSigningKey,
  type WithdrawalOrder,
} from '../src/index.ts';
import { createWebhookTestApp, type WebhookTestApp } from '../../../test/support/webhook-receiver-harness.ts';

/**
 * Webhook verification and the version-conditional store, on real deliveries: the service's dispatcher
 * delivers to a merchant server on loopback whose handler is the SDK (verify over the raw bytes with the
 * keys fetched from GET /v1/webhooks/signing-keys, then applyEvent). The sandbox's out-of-order replay
 * proves the store's receiver rules; a sandbox key rotation (114.00 THB) proves the key cache's refetch.
 */

interface Received {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  status: number;
  outcome: ApplyOutcome | null;
  reason: string | null;
  event: PaymentEvent | null;
  /** The order in which verified events were handed to the store (deliveries run in parallel, so not always the arrival order). */
  applied_index: number | null;
}

let h: WebhookTestApp;
let baseUrl: string;
let server: http.Server;
let receiverUrl: string;
let client: PaymentClient;
let keyFetches = 0;
let verifier: WebhookVerifier;
const store = new MemoryEventStore();
const received: Received[] = [];
let appliedCount = 0;

beforeAll(async () => {
  h = await createWebhookTestApp();
  await h.app.instance.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(h.app.instance.app.server.address() as net.AddressInfo).port}`;
  h.app.clock.set(new Date());
  const clock = h.app.clock;
  client = new PaymentClient({ base_url: baseUrl, api_key: h.app.sandbox.api_key, signing_secret: h.app.sandbox.signing_secret, now_ms: () => clock.now().getTime() });
  const fetchKeys = signingKeysFrom(baseUrl);
  verifier = new WebhookVerifier({
    livemode: false,
    keys: new SigningKeyCache(async () => {
      keyFetches += 1;
      return fetchKeys();
    }, () => clock.now().getTime()),
    now_ms: () => clock.now().getTime(),
  });
  // The merchant's server: raw bytes in, verified event applied, 200; anything unverifiable, 400.
  server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      const entry: Received = { headers: request.headers, body, status: 0, outcome: null, reason: null, event: null, applied_index: null };
      received.push(entry);
      verifier
        .verify(body, request.headers)
        .then(async (event) => {
          entry.event = event;
          entry.applied_index = appliedCount++;
          entry.outcome = await applyEvent(store, event, clock.now().getTime());
          entry.status = 200;
        })
        .catch((error: unknown) => {
          entry.reason = error instanceof WebhookVerificationError ? error.reason : 'internal';
          entry.status = error instanceof WebhookVerificationError ? 400 : 500;
        })
        .finally(() => response.writeHead(entry.status, { 'content-type': 'application/json' }).end(JSON.stringify({ outcome: entry.outcome, reason: entry.reason })));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/webhooks`;
  await h.createEndpoint({ url: receiverUrl });
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await h.close();
});

function depositParams(amount_minor: number) {
  const reference = `hook-${crypto.randomBytes(6).toString('hex')}`;
  return {
    amount_minor,
    currency: 'THB' as const,
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { bank_code: '002', account_number: `66${crypto.randomInt(10_000_000, 99_999_999)}`, account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.10', user_agent: 'sdk-webhooks' },
  };
}

async function deliver(): Promise<Received[]> {
  const before = received.length;
  await h.webhooks.dispatcher.runUntilIdle();
  return received.slice(before);
}

describe('verifying real deliveries', () => {
  it('verifies a delivery over its raw bytes and applies it; the same event again is a duplicate', async () => {
    const order = await client.deposits.create(depositParams(10_000));
    const arrived = await deliver();
    const created = arrived.find((entry) => entry.event?.type === 'deposit.created');
    expect(created).toMatchObject({ status: 200, outcome: 'applied', reason: null });
    const event = created!.event!;
    if (!isKnownEvent(event) || event.type !== 'deposit.created') throw new Error('a deposit.created event');
    // Narrowed by type: data.object is a DepositOrder without its legs (only deposit.matched carries them).
    const object: Omit<DepositOrder, 'legs'> = event.data.object;
    expect(object).toMatchObject({ id: order.id, version: 1, status: 'awaiting_payment' });
    expect(store.get<DepositOrder & Record<string, unknown>>('deposit_order', order.id)).toMatchObject({ version: 1 });
    // The same bytes again (a redelivery): verified, and a duplicate.
    expect(await applyEvent(store, await verifier.verify(created!.body, created!.headers))).toBe('duplicate');
  });

  it('refuses a changed byte, a changed event id, a malformed header, a short signature, the wrong environment and a stale t', async () => {
    const sample = received.find((entry) => entry.status === 200)!;
    const headers = { ...sample.headers } as Record<string, string>;
    const reason = (body: Buffer, changed: Record<string, string>, using = verifier) =>
      using.verify(body, { ...headers, ...changed }).then(
        () => 'verified',
        (error: unknown) => (error instanceof WebhookVerificationError ? error.reason : 'thrown'),
      );
    const tampered = Buffer.from(sample.body);
    tampered[10] = tampered[10]! ^ 1;
    expect(await reason(tampered, {})).toBe('signature_invalid');
    expect(await reason(sample.body, { 'x-pg-event-id': 'evt_01K0NOTTHISEVENT000000000' })).toBe('signature_invalid');
    const signature = headers['x-pg-signature']!;
    expect(await reason(sample.body, { 'x-pg-signature': `${signature},s=AAAA` })).toBe('signature_malformed');
    expect(await reason(sample.body, { 'x-pg-signature': signature.replace(/s=[A-Za-z0-9_-]+/, `s=${Buffer.alloc(63).toString('base64url')}`) })).toBe('signature_malformed');
    expect(await reason(sample.body, { 'x-pg-signature': signature.replace(/^v1,/, '') })).toBe('signature_malformed');
    // Pairs are read by name: the same pairs in another order verify.
    const reordered = signature.split(',').reverse().join(',');
    expect(await reason(sample.body, { 'x-pg-signature': reordered })).toBe('verified');
    const { 'x-pg-signature': _dropped, ...withoutSignature } = headers;
    expect(await verifier.verify(sample.body, withoutSignature).catch((error: WebhookVerificationError) => error.reason)).toBe('signature_missing');
    const live = new WebhookVerifier({ livemode: true, keys: verifier.keys, now_ms: () => h.app.clock.now().getTime() });
    expect(await reason(sample.body, {}, live)).toBe('livemode_mismatch');
    const later = new WebhookVerifier({ livemode: false, keys: verifier.keys, now_ms: () => h.app.clock.now().getTime() + 301_000 });
    expect(await reason(sample.body, {}, later)).toBe('timestamp_out_of_window');
  });

  it('a verified body whose id is not X-PG-Event-Id is refused after the signature', async () => {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
    const key: WebhookSigningKey = {
      kid: 'whk_local_test', alg: 'Ed25519', format: 'spki_der_base64', status: 'active', not_before: '2026-01-01T00:00:00.000Z', not_after: null,
      public_key: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'), raw_public_key: '',
    };
    const body = Buffer.from(JSON.stringify({ id: 'evt_B', object: 'event', type: 'deposit.created', livemode: false, sequence: 1, created_at: '2026-08-01T00:00:00.000Z', data: { object: { id: 'dep_x', object: 'deposit_order', version: 1 } } }));
    const t = Math.floor(Date.now() / 1000);
    const s = crypto.sign(null, Buffer.concat([Buffer.from(`v1.${t}.evt_A.`), body]), privateKey).toString('base64url');
    const local = new WebhookVerifier({ livemode: false, keys: async () => [key] });
    await expect(local.verify(body, { 'x-pg-signature': `v1,kid=whk_local_test,t=${t},s=${s}`, 'x-pg-event-id': 'evt_A' })).rejects.toMatchObject({ reason: 'event_id_mismatch' });
  });
});

describe('the version-conditional store (spec: out-of-order replay, cases A, B and C)', () => {
  it('ends each case in its highest version: A settled, B reversed with no second credit, C at the last fill', async () => {
    const replay = await client.request<{ cases: { case: string; object_id: string; event_ids: string[]; expected_final: Record<string, unknown> }[] }>({
      method: 'POST',
      path: '/v1/test/webhooks/replay-out-of-order',
    });
    expect(replay.http_status).toBe(202);
    const arrived = await deliver();
    const ids = new Set(replay.data.cases.flatMap((item) => item.event_ids));
    const ours = arrived.filter((entry) => entry.event && ids.has(entry.event.id));
    expect(ours).toHaveLength(ids.size);
    expect(ours.every((entry) => entry.status === 200)).toBe(true);
    // Older versions arrived after newer ones and changed nothing. The dispatcher delivers in parallel, so which
    // versions came late varies from run to run: each event must be applied exactly when its version is above
    // every version of its object applied before it, in the order the store was given them.
    const highest = new Map<string, number>();
    for (const entry of [...ours].sort((left, right) => (left.applied_index ?? 0) - (right.applied_index ?? 0))) {
      const object = entry.event!.data.object as { id: string; version: number };
      const before = highest.get(object.id) ?? 0;
      expect(entry.outcome, `${entry.event!.type} version ${object.version} after version ${before}`).toBe(object.version > before ? 'applied' : 'stale');
      highest.set(object.id, Math.max(before, object.version));
    }
    // Each case writes a newer version before an older one (their sequence order), so in practice some arrive late.
    expect(ours.filter((entry) => entry.outcome === 'stale').length).toBeGreaterThanOrEqual(1);
    const [a, b, c] = replay.data.cases;
    expect(store.get('deposit_order', a!.object_id)).toMatchObject({ status: 'settled', version: 3 });
    expect(store.get('deposit_order', b!.object_id)).toMatchObject({ status: 'reversed', version: 4 });
    expect(store.get<WithdrawalOrder & Record<string, unknown>>('withdrawal_order', c!.object_id)).toMatchObject({ remaining_minor: 0, version: 4 });
    for (const item of replay.data.cases) expect(store.get(item.case === 'C' ? 'withdrawal_order' : 'deposit_order', item.object_id)).toMatchObject(item.expected_final);
  });

  it('applies an immutable object once per id and keeps event ids for at least 31 days', async () => {
    const memory = new MemoryEventStore({ max_seen: 2 });
    const transaction = { id: 'btxn_1', object: 'balance_transaction', amount_minor: 100 };
    const event = (id: string): PaymentEvent => ({ id, object: 'event', type: 'balance.credited', api_version: '2026-08-01', livemode: false, created_at: '2026-08-01T00:00:00.000Z', sequence: 1, account: { merchant_id: 'm', white_label_id: 'w' }, data: { object: transaction } }) as unknown as PaymentEvent;
    expect(await applyEvent(memory, event('evt_1'), 0)).toBe('applied');
    expect(await applyEvent(memory, event('evt_2'), 1)).toBe('stale');
    expect(await applyEvent(memory, event('evt_1'), 2)).toBe('duplicate');
    // Bounded: beyond max_seen the oldest id is forgotten.
    await applyEvent(memory, event('evt_3'), 3);
    expect(await memory.hasSeen('evt_1')).toBe(false);
    expect(await memory.hasSeen('evt_3')).toBe(true);
  });
});

describe('the signing-key cache', () => {
  it('refetches once on a new kid (the 114.00 THB rotation), throttles forged kids, and expires after 24 hours', async () => {
    const clock = h.app.clock;
    await deliver();
    const fetchesBefore = keyFetches;
    expect(fetchesBefore).toBeGreaterThanOrEqual(1);
    // 114.00 THB: the sandbox rotates the brand's key set; the new kid signs 30 seconds later.
    await client.deposits.create(depositParams(11_400));
    clock.advance(5_000);
    await h.app.instance.worker.runDueJobs();
    const announced = await deliver();
    const rotating = announced.find((entry) => entry.event?.type === 'webhook.key.rotating');
    expect(rotating).toMatchObject({ status: 200 });
    const oldKid = /kid=([^,]+)/.exec(String(rotating!.headers['x-pg-signature']))![1];
    clock.advance(31_000);
    await client.deposits.create(depositParams(10_000));
    const afterSwitch = await deliver();
    const newKid = /kid=([^,]+)/.exec(String(afterSwitch[0]!.headers['x-pg-signature']))![1];
    expect(newKid).not.toBe(oldKid);
    expect(afterSwitch.every((entry) => entry.status === 200)).toBe(true);
    expect(keyFetches).toBe(fetchesBefore + 1);

    // A forged kid: at most one refetch per 10 seconds (the new kid's refetch just now counts), whatever
    // the number of attempts, so forged kids cannot make the receiver hammer the service.
    const sample = afterSwitch[0]!;
    const forged = { ...sample.headers, 'x-pg-signature': String(sample.headers['x-pg-signature']).replace(/kid=[^,]+/, 'kid=whk_forged') } as unknown as Record<string, string>;
    for (let attempt = 0; attempt < 5; attempt += 1) {
      await expect(verifier.verify(sample.body, forged)).rejects.toMatchObject({ reason: 'unknown_kid' });
    }
    expect(keyFetches).toBe(fetchesBefore + 1);
    clock.advance(11_000);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      await expect(verifier.verify(sample.body, forged)).rejects.toMatchObject({ reason: 'unknown_kid' });
    }
    expect(keyFetches).toBe(fetchesBefore + 2);
    // A day later the cached list is read again before a known kid is trusted.
    clock.advance(24 * 60 * 60 * 1000);
    await client.deposits.create(depositParams(10_000));
    const nextDay = await deliver();
    expect(nextDay.length).toBeGreaterThan(0);
    expect(nextDay.every((entry) => entry.status === 200)).toBe(true);
    expect(keyFetches).toBe(fetchesBefore + 3);
  });
});
