import crypto from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServiceInstance, type ServiceInstance } from '../../src/app.ts';
import { loadConfig } from '../../src/platform/config.ts';
import { createLogger } from '../../src/platform/logger.ts';
import type { Database, Queryable } from '../../src/platform/db.ts';
import { HOUR_MS, MINUTE_MS, SECOND_MS } from '../../src/platform/time.ts';
import { DeliveryDispatcher } from '../../src/webhooks/dispatcher.ts';
import { DeliveryClient } from '../../src/webhooks/http-client.ts';
import type { Webhooks } from '../../src/webhooks/index.ts';
import type { DeliveryView, EndpointView } from '../../src/webhooks/service.ts';
import type { SigningKeyRecord } from '../../src/webhooks/signing-keys.ts';
import { RETRY_DELAYS_MS } from '../../src/webhooks/types.ts';
import { DEFAULT_WEBHOOK_SETTINGS, type WebhookSettings } from '../../src/webhooks/settings.ts';
import { MemoryReceiverStore, ReferenceReceiver, SigningKeyCache, type PublishedKey } from '../../examples/webhook-receiver/receiver.ts';
import { TEST_MASTER_KEY, type MerchantCredentials } from '../support/app.ts';
import { usingPostgres } from '../support/database.ts';
import { createWebhookTestApp, depositObject, newDepositId, TEST_POLICY_WITH_LIVE_LOOPBACK, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';
import { answer, startScriptedReceiver, type Behaviour, type RecordedRequest, type ScriptedReceiver } from '../support/webhook-receivers.ts';

/**
 * Webhook delivery end to end: real HTTPS receivers (certificates from a test CA this file creates,
 * trusted by the delivery client through its explicit `extra_ca_pem`), the outbox, the dispatcher and
 * the back office, with the TestClock driving every retry. Each test works on its own merchant, so
 * that one service instance (one PGlite start) serves the whole file.
 */

let h: WebhookTestApp;
let webhooks: Webhooks;
const receivers: ScriptedReceiver[] = [];
const endpoints: EndpointView[] = [];

beforeAll(async () => {
  // A timeout no loaded test machine reaches for a local answer; tests of real hangs use their own
  // dispatcher with a short one (dispatcherWith).
  h = await createWebhookTestApp({ policy: TEST_POLICY_WITH_LIVE_LOOPBACK, settings: { timeout_ms: 5_000 } });
  webhooks = h.webhooks;
});

afterEach(async () => {
  // Deleting an endpoint ends its pending deliveries, so that no later clock move retries them.
  for (const endpoint of endpoints.splice(0)) await h.backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
  for (const receiver of receivers.splice(0)) await receiver.close();
});

afterAll(async () => {
  await h.close();
});

async function receiver(behaviour: (request: RecordedRequest) => Behaviour, tls: { key: string; cert: string } | null = h.certs.leaf): Promise<ScriptedReceiver> {
  const started = await startScriptedReceiver({ tls, behaviour });
  receivers.push(started);
  return started;
}

async function merchant(): Promise<MerchantCredentials> {
  return h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id });
}

async function endpointFor(account: MerchantCredentials, url: string, extra: Record<string, unknown> = {}): Promise<EndpointView> {
  const endpoint = await h.createEndpoint({ merchant_id: account.merchant_id, url, ...extra });
  endpoints.push(endpoint);
  return endpoint;
}

function emitFor(account: MerchantCredentials, type: string, object: Record<string, unknown>, livemode = false) {
  return h.emit(type, object, { merchant_id: account.merchant_id, white_label_id: account.white_label_id, livemode });
}

async function deliveries(endpoint: EndpointView): Promise<DeliveryView[]> {
  const response = await h.backoffice('GET', `/v1/bo/webhooks/${endpoint.id}/deliveries`);
  expect(response.statusCode, response.body).toBe(200);
  return (response.json() as { data: DeliveryView[] }).data;
}

async function delivery(endpoint: EndpointView, delivery_id: string): Promise<DeliveryView> {
  const response = await h.backoffice('GET', `/v1/bo/webhooks/${endpoint.id}/deliveries/${delivery_id}`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json() as DeliveryView;
}

async function publishedKeys(): Promise<SigningKeyRecord[]> {
  const response = await h.app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' });
  expect(response.statusCode).toBe(200);
  return (response.json() as { keys: SigningKeyRecord[] }).keys;
}

async function storedEnvelopeText(event_id: string): Promise<string> {
  const { rows } = await h.app.testDatabase.database.query<{ text: string }>('SELECT envelope::text AS text FROM events WHERE event_id = $1', [event_id]);
  return rows[0]!.text;
}

/** The signature check a merchant would write with node:crypto alone. */
function verifiesIndependently(request: RecordedRequest, keys: SigningKeyRecord[]): boolean {
  const header = String(request.headers['x-pg-signature']);
  const pairs = new Map(header.split(',').filter((part) => part.includes('=')).map((part) => [part.slice(0, part.indexOf('=')), part.slice(part.indexOf('=') + 1)]));
  const key = keys.find((candidate) => candidate.kid === pairs.get('kid'));
  if (!key) return false;
  const publicKey = crypto.createPublicKey({ key: Buffer.from(key.public_key, 'base64'), format: 'der', type: 'spki' });
  const signed = Buffer.concat([Buffer.from(`v1.${pairs.get('t')}.${String(request.headers['x-pg-event-id'])}.`, 'utf8'), request.body]);
  return crypto.verify(null, signed, publicKey, Buffer.from(pairs.get('s') ?? '', 'base64url'));
}

const run = () => webhooks.dispatcher.runUntilIdle();

/** A dispatcher of this service with other settings (a short timeout, fewer slots). */
function dispatcherWith(overrides: Partial<WebhookSettings>): DeliveryDispatcher {
  const settings: WebhookSettings = { ...DEFAULT_WEBHOOK_SETTINGS, sandbox_loopback: true, extra_ca_pem: [h.certs.ca_pem], poll_interval_ms: 10, ...overrides };
  return new DeliveryDispatcher({
    openBody: (text) => h.app.instance.services.events.openStoredText(text),
    database: h.app.instance.services.database,
    clock: h.app.clock,
    logger: createLogger('silent'),
    signingKeys: webhooks.signingKeys,
    client: new DeliveryClient({ ...settings, policy: TEST_POLICY_WITH_LIVE_LOOPBACK }),
    endpointGone: (tx, white_label_id, endpoint_id) => webhooks.service.disableGoneEndpoint(tx, white_label_id, endpoint_id),
    settings,
  });
}

describe('a delivery', () => {
  it('sends the stored envelope bytes, signed so that an independent node:crypto check verifies them, with every header', async () => {
    const account = await merchant();
    const target = await receiver(() => answer(200));
    const endpoint = await endpointFor(account, target.url);
    const envelope = await emitFor(account, 'deposit.settled', depositObject(newDepositId(), 2, 'settled', { note: 'โอนเงินสำเร็จ 🎉👍🏽', flag: '🇹🇭' }));
    expect(await run()).toBe(1);

    expect(target.requests).toHaveLength(1);
    const request = target.requests[0]!;
    expect(request.method).toBe('POST');
    expect(request.body.equals(Buffer.from(await storedEnvelopeText(envelope.id), 'utf8'))).toBe(true);
    expect(JSON.parse(request.body.toString('utf8')).id).toBe(envelope.id);
    expect(request.headers).toMatchObject({
      'content-type': 'application/json',
      'x-pg-event-id': envelope.id,
      'x-pg-endpoint-id': endpoint.id,
      'x-pg-attempt': '1',
      'x-pg-resend': 'false',
      'x-pg-api-version': '2026-08-01',
      'x-pg-livemode': 'false',
      'x-pg-event-type': 'deposit.settled',
    });
    expect(String(request.headers['x-pg-delivery-id'])).toMatch(/^whd_[0-9A-Z]{26}$/);
    const signature = String(request.headers['x-pg-signature']);
    expect(signature).toMatch(/^v1,kid=whk_[0-9A-Z]{26},t=\d+,s=[A-Za-z0-9_-]+$/);
    expect(signature).toContain(`t=${Math.floor(h.app.clock.now().getTime() / 1000)},`);
    expect(verifiesIndependently(request, await publishedKeys())).toBe(true);
    // A flipped byte no longer verifies.
    expect(verifiesIndependently({ ...request, body: Buffer.from(request.body.toString().replace('settled', 'setTled')) }, await publishedKeys())).toBe(false);

    const [recorded] = await deliveries(endpoint);
    expect(recorded).toMatchObject({ status: 'succeeded', attempt_count: 1, last_http_status: 200, event_id: envelope.id });
    const detail = await delivery(endpoint, recorded!.id);
    expect(detail.attempts).toEqual([
      expect.objectContaining({ sequence: 1, attempt: 1, status: 'succeeded', http_status: 200, error: null, next_attempt_at: null, resend: false }),
    ]);
    expect(detail.attempts![0]!.kid).toBe(signature.split(',')[1]!.slice(4));
  });

  it('delivers deposit.matched with its QR payload in clear, signed, while the outbox keeps the payload sealed', async () => {
    const account = await merchant();
    const target = await receiver(() => answer(200));
    await endpointFor(account, target.url);
    const qr_payload = '00020101021229370016A000000677010111011300668123456785802TH53037645406105.005802TH6304ABCD';
    const legs = [{ leg_ref: 'dleg_1', sequence: 1, amount_minor: 10_500, receiver: { bank_code: '002' }, qr_payload, qr_image_url: 'https://pay.example/qr.png' }];
    const envelope = await emitFor(account, 'deposit.matched', depositObject(newDepositId(), 2, 'awaiting_payment', { legs }));
    const stored = await storedEnvelopeText(envelope.id);
    expect(stored).not.toContain(qr_payload);
    expect(stored).toContain('"qr_payload":"sealed:');
    expect(await run()).toBe(1);
    const request = target.requests[0]!;
    expect(request.body.toString('utf8')).toBe(JSON.stringify(envelope));
    expect((JSON.parse(request.body.toString('utf8')) as { data: { object: { legs: { qr_payload: string }[] } } }).data.object.legs[0]!.qr_payload).toBe(qr_payload);
    expect(verifiesIndependently(request, await publishedKeys())).toBe(true);
  });

  it('retries a failing endpoint on the fixed schedule with the same bytes and event id, ignoring Retry-After, and stops after 11 attempts', async () => {
    const account = await merchant();
    const target = await receiver(() => answer(500, { 'retry-after': '1' }));
    const endpoint = await endpointFor(account, target.url);
    const envelope = await emitFor(account, 'deposit.expired', depositObject(newDepositId(), 3, 'expired'));
    const start = h.app.clock.now().getTime();
    await run();
    expect(target.requests).toHaveLength(1);
    for (const [index, delay] of RETRY_DELAYS_MS.entries()) {
      h.app.clock.advance(delay - SECOND_MS);
      await run();
      expect(target.requests, `nothing before retry ${index + 2} is due`).toHaveLength(index + 1);
      h.app.clock.advance(SECOND_MS);
      await run();
      expect(target.requests, `retry ${index + 2} at its time`).toHaveLength(index + 2);
    }
    expect(h.app.clock.now().getTime() - start).toBe(92 * HOUR_MS + 36 * MINUTE_MS);
    h.app.clock.advance(200 * HOUR_MS);
    await run();
    expect(target.requests).toHaveLength(11);

    expect(target.requests.map((request) => request.headers['x-pg-attempt'])).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11']);
    expect(new Set(target.requests.map((request) => request.body.toString('base64')))).toEqual(new Set([Buffer.from(await storedEnvelopeText(envelope.id)).toString('base64')]));
    expect(new Set(target.requests.map((request) => request.headers['x-pg-event-id']))).toEqual(new Set([envelope.id]));
    expect(new Set(target.requests.map((request) => request.headers['x-pg-delivery-id'])).size).toBe(1);
    // Each attempt is signed at its own time, so every t is fresh.
    const times = target.requests.map((request) => Number(/t=(\d+)/.exec(String(request.headers['x-pg-signature']))![1]));
    let expected = start / 1000;
    for (const [index, time] of times.entries()) {
      expect(time).toBe(expected);
      expected += (RETRY_DELAYS_MS[index] ?? 0) / 1000;
    }
    const keys = await publishedKeys();
    expect(target.requests.every((request) => verifiesIndependently(request, keys))).toBe(true);

    const [recorded] = await deliveries(endpoint);
    expect(recorded).toMatchObject({ status: 'failed', failure_reason: 'attempts_exhausted', round_attempts: 11, next_attempt_at: null });
    const detail = await delivery(endpoint, recorded!.id);
    expect(detail.attempts).toHaveLength(11);
    expect(detail.attempts!.every((attempt) => attempt.status === 'failed' && attempt.http_status === 500 && attempt.error === 'unexpected_status')).toBe(true);
    expect(detail.attempts!.map((attempt) => attempt.next_attempt_at === null)).toEqual([...Array(10).fill(false), true]);
    expect(Date.parse(detail.attempts![0]!.next_attempt_at!) - Date.parse(detail.attempts![0]!.started_at)).toBe(MINUTE_MS);
  });

  it('410 stops at once, disables the endpoint and tells the merchant through webhook.endpoint.disabled', async () => {
    const account = await merchant();
    const gone = await receiver(() => answer(410));
    const healthy = await receiver(() => answer(204));
    const goneEndpoint = await endpointFor(account, gone.url);
    await endpointFor(account, healthy.url);
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();

    expect(gone.requests.length).toBeGreaterThanOrEqual(1);
    const countAtDisable = gone.requests.length;
    const endpointNow = (await h.backoffice('GET', `/v1/bo/webhooks/${goneEndpoint.id}`)).json() as EndpointView;
    expect(endpointNow).toMatchObject({ enabled: false, status: 'disabled', disabled_reason: 'endpoint_gone', version: 2 });
    const goneDeliveries = await deliveries(goneEndpoint);
    expect(goneDeliveries.every((item) => item.status === 'failed')).toBe(true);
    expect(goneDeliveries.map((item) => item.failure_reason).sort()).toContain('endpoint_gone');

    const notices = healthy.requests.filter((request) => request.headers['x-pg-event-type'] === 'webhook.endpoint.disabled');
    expect(notices).toHaveLength(1);
    const notice = JSON.parse(notices[0]!.body.toString('utf8'));
    expect(notice.data.object).toMatchObject({ object: 'webhook_endpoint', id: goneEndpoint.id, enabled: false, disabled_reason: 'endpoint_gone', version: 2 });
    expect(notice.data.previous_attributes).toMatchObject({ enabled: true, status: 'enabled', disabled_reason: null, version: 1 });

    // Nothing more reaches it: no retries, no new events.
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    h.app.clock.advance(2 * HOUR_MS);
    await run();
    expect(gone.requests).toHaveLength(countAtDisable);
  });

  it('treats a 3xx as a failure and never follows it', async () => {
    const account = await merchant();
    const trap = await receiver(() => answer(200));
    const redirecting = await receiver(() => answer(302, { location: trap.url }));
    const endpoint = await endpointFor(account, redirecting.url);
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();
    h.app.clock.advance(MINUTE_MS);
    await run();
    expect(redirecting.requests).toHaveLength(2);
    expect(trap.requests).toHaveLength(0);
    const [recorded] = await deliveries(endpoint);
    expect(recorded).toMatchObject({ status: 'pending', last_http_status: 302, last_error: 'redirect_not_followed', round_attempts: 2 });
  });

  it('counts no answer within the timeout, or a dropped connection, as a failed attempt and retries it', async () => {
    const account = await merchant();
    const hanging = await receiver(() => ({ hang: true }));
    const closing = await receiver(() => ({ close: true }));
    const hangingEndpoint = await endpointFor(account, hanging.url);
    const closingEndpoint = await endpointFor(account, closing.url);
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    const shortTimeout = dispatcherWith({ timeout_ms: 300 });
    await shortTimeout.runUntilIdle();
    const [timedOut] = await deliveries(hangingEndpoint);
    const [dropped] = await deliveries(closingEndpoint);
    expect(timedOut).toMatchObject({ status: 'pending', last_error: 'timeout', last_http_status: null });
    expect(dropped).toMatchObject({ status: 'pending', last_error: 'connection_closed', last_http_status: null });
    const attempt = (await delivery(hangingEndpoint, timedOut!.id)).attempts![0]!;
    expect(attempt.duration_ms).toBeGreaterThanOrEqual(290);
    h.app.clock.advance(MINUTE_MS);
    await shortTimeout.runUntilIdle();
    await shortTimeout.stop();
    expect(hanging.requests).toHaveLength(2);
    expect(closing.requests).toHaveLength(2);
    expect(hanging.requests[1]!.headers['x-pg-attempt']).toBe('2');
  });

  it('refuses a self-signed certificate; the test CA is trusted only because the client is given it explicitly', async () => {
    const account = await merchant();
    const selfSigned = await receiver(() => answer(200), h.certs.self_signed);
    const endpoint = await endpointFor(account, selfSigned.url);
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();
    expect(selfSigned.requests).toHaveLength(0);
    const [recorded] = await deliveries(endpoint);
    expect(recorded).toMatchObject({ status: 'pending', last_error: 'tls_certificate_invalid' });

    const signedByTestCa = await receiver(() => answer(200));
    const request = { endpoint_id: 'we_X', url: signedByTestCa.url, livemode: false, headers: {}, body: Buffer.from('{}') };
    const common = { timeout_ms: 2_000, endpoint_concurrency: 1, policy: TEST_POLICY_WITH_LIVE_LOOPBACK, sandbox_loopback: true };
    const withoutCa = new DeliveryClient(common);
    const withCa = new DeliveryClient({ ...common, extra_ca_pem: [h.certs.ca_pem] });
    expect(await withoutCa.send(request)).toMatchObject({ http_status: null, error: 'tls_certificate_invalid' });
    expect(await withCa.send(request)).toMatchObject({ http_status: 200, error: null });
    withoutCa.close();
    withCa.close();
  });

  it('keeps sandbox and live apart', async () => {
    const account = await merchant();
    const sandboxReceiver = await receiver(() => answer(200));
    const liveReceiver = await receiver(() => answer(200));
    await endpointFor(account, sandboxReceiver.url, { mode: 'test' });
    await endpointFor(account, liveReceiver.url, { mode: 'live' });
    const sandboxEvent = await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'), false);
    const liveEvent = await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'), true);
    await run();
    expect(sandboxReceiver.requests.map((request) => request.headers['x-pg-event-id'])).toEqual([sandboxEvent.id]);
    expect(liveReceiver.requests.map((request) => request.headers['x-pg-event-id'])).toEqual([liveEvent.id]);
    expect(sandboxReceiver.requests[0]!.headers['x-pg-livemode']).toBe('false');
    expect(liveReceiver.requests[0]!.headers['x-pg-livemode']).toBe('true');
    expect(JSON.parse(liveReceiver.requests[0]!.body.toString()).livemode).toBe(true);
  });

  it('sends subscribed types and always the five that cannot be turned off', async () => {
    const account = await merchant();
    const target = await receiver(() => answer(202));
    await endpointFor(account, target.url, { event_types: ['deposit.settled'] });
    for (const type of ['deposit.created', 'deposit.settled', 'deposit.reversed', 'balance.debited', 'withdrawal.fill_reversed', 'withdrawal.created', 'webhook.key.rotating', 'webhook.endpoint.disabled']) {
      await emitFor(account, type, type.endsWith('.created') ? depositObject(newDepositId(), 1, 'x') : depositObject(newDepositId(), 2, 'x'));
    }
    await run();
    expect(target.requests.map((request) => request.headers['x-pg-event-type']).sort()).toEqual(
      ['balance.debited', 'deposit.reversed', 'deposit.settled', 'webhook.endpoint.disabled', 'webhook.key.rotating', 'withdrawal.fill_reversed'],
    );
  });

  it('delivers to an endpoint the events written after its creation, not the ones before', async () => {
    const account = await merchant();
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();
    const target = await receiver(() => answer(200));
    await endpointFor(account, target.url);
    const after = await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();
    expect(target.requests.map((request) => request.headers['x-pg-event-id'])).toEqual([after.id]);
  });
});

describe('resend and replay', () => {
  it('resends a delivery with the same bytes and event id and X-PG-Resend: true, as a new round', async () => {
    const account = await merchant();
    const target = await receiver(() => answer(200));
    const endpoint = await endpointFor(account, target.url);
    await emitFor(account, 'deposit.settled', depositObject(newDepositId(), 2, 'settled'));
    await run();
    const [first] = await deliveries(endpoint);
    const response = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/deliveries/${first!.id}/resend`);
    expect(response.statusCode, response.body).toBe(202);
    expect(response.json()).toMatchObject({ id: first!.id, status: 'pending', round: 2, round_attempts: 0, resend: true });
    await run();
    expect(target.requests).toHaveLength(2);
    const [original, resent] = target.requests;
    expect(resent!.body.equals(original!.body)).toBe(true);
    expect(resent!.headers['x-pg-event-id']).toBe(original!.headers['x-pg-event-id']);
    expect(resent!.headers['x-pg-delivery-id']).toBe(original!.headers['x-pg-delivery-id']);
    expect(resent!.headers).toMatchObject({ 'x-pg-resend': 'true', 'x-pg-attempt': '1' });
    const detail = await delivery(endpoint, first!.id);
    expect(detail.attempts!.map((attempt) => [attempt.round, attempt.attempt, attempt.resend])).toEqual([[1, 1, false], [2, 1, true]]);
    const { rows } = await h.app.testDatabase.database.query<{ action: string }>('SELECT action FROM audit_log WHERE target_id = $1', [first!.id]);
    expect(rows.map((row) => row.action)).toEqual(['webhook_delivery.resent']);
  });

  it('replays the failed deliveries of the last 72 hours by default, and everything in a window on request', async () => {
    const account = await merchant();
    let failing = true;
    const target = await receiver(() => answer(failing ? 503 : 200));
    // An event before the endpoint existed: only a full replay sends it.
    const before = await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();
    h.app.clock.advance(SECOND_MS);
    const endpoint = await endpointFor(account, target.url);
    const failed = await emitFor(account, 'deposit.settled', depositObject(newDepositId(), 2, 'settled'));
    await run();
    // The operator switches the endpoint off while it fails: its pending delivery ends as failed.
    expect((await h.backoffice('PATCH', `/v1/bo/webhooks/${endpoint.id}`, { enabled: false })).statusCode).toBe(200);
    const refused = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/replay`, {});
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.code).toBe('webhook_endpoint_disabled');
    expect((await h.backoffice('PATCH', `/v1/bo/webhooks/${endpoint.id}`, { enabled: true })).statusCode).toBe(200);
    failing = false;

    const replay = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/replay`, {});
    expect(replay.statusCode, replay.body).toBe(202);
    expect(replay.json()).toMatchObject({ object: 'webhook_replay', only_failed: true, rearmed: 1, created: 0, limit_reached: false });
    await run();
    expect(target.requests.map((request) => [request.headers['x-pg-event-id'], request.headers['x-pg-resend']])).toEqual([
      [failed.id, 'false'],
      [failed.id, 'true'],
    ]);

    const full = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/replay`, {
      only_failed: false,
      created_after: new Date(h.app.clock.now().getTime() - HOUR_MS).toISOString(),
    });
    expect(full.json()).toMatchObject({ rearmed: 1, created: 1 });
    await run();
    expect(target.requests.slice(2).map((request) => request.headers['x-pg-event-id']).sort()).toEqual([before.id, failed.id].sort());
    expect(target.requests.slice(2).every((request) => request.headers['x-pg-resend'] === 'true')).toBe(true);

    const tooOld = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/replay`, {
      created_after: new Date(h.app.clock.now().getTime() - 73 * HOUR_MS).toISOString(),
    });
    expect(tooOld.statusCode).toBe(422);
    expect(tooOld.json().error.details.fields).toEqual([expect.objectContaining({ path: 'created_after', reason: 'outside_replay_window' })]);
  });

  it('defers a resend asked for while an attempt is in flight until that attempt ends: never two at once', async () => {
    const account = await merchant();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const target = await receiver((request) =>
      request.headers['x-pg-attempt'] === '1' && request.headers['x-pg-resend'] === 'false'
        ? { handle: async () => (await gate, { status: 500, body: {} }) }
        : answer(200),
    );
    const endpoint = await endpointFor(account, target.url);
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await webhooks.dispatcher.tick();
    await target.waitFor(1);
    const [inFlight] = await deliveries(endpoint);
    const resend = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/deliveries/${inFlight!.id}/resend`);
    expect(resend.json()).toMatchObject({ resend_requested: true, round: 1 });
    // Nothing else is claimed while the first attempt holds the delivery.
    expect((await webhooks.dispatcher.tick()).claimed).toBe(0);
    release();
    await webhooks.dispatcher.settle();
    await run();
    expect(target.requests.map((request) => [request.headers['x-pg-attempt'], request.headers['x-pg-resend']])).toEqual([['1', 'false'], ['1', 'true']]);
    expect(target.max_concurrent_per_delivery).toBe(1);
    expect(await delivery(endpoint, inFlight!.id)).toMatchObject({ status: 'succeeded', round: 2, resend_requested: false });
  });
});

describe('isolation', () => {
  it('a hanging endpoint does not delay a healthy one', async () => {
    const account = await merchant();
    const hanging = await receiver(() => ({ hang: true }));
    const healthy = await receiver(() => answer(200));
    await endpointFor(account, hanging.url);
    await endpointFor(account, healthy.url);
    const timeout_ms = 3_000;
    const dispatcher = dispatcherWith({ timeout_ms, endpoint_concurrency: 2, max_in_flight: 8 });
    for (let index = 0; index < 30; index += 1) await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    const started = performance.now();
    dispatcher.start();
    try {
      await healthy.waitFor(30, 2_500);
      const elapsed = performance.now() - started;
      // Every healthy delivery arrived before the first hanging attempt could even time out, and
      // the hanging endpoint never had more than its two slots.
      expect(elapsed).toBeLessThan(timeout_ms);
      expect(hanging.requests).toHaveLength(2);
    } finally {
      await dispatcher.stop();
    }
    expect(healthy.max_concurrent_per_delivery).toBe(1);
  });
});

describe('isolation of dead endpoints', () => {
  it('holds an endpoint that stopped answering to one lease, and gives a fast one leases waiting for its slots', async () => {
    const account = await merchant();
    let dead = true;
    const target = await receiver(() => (dead ? { hang: true } : answer(200)));
    await endpointFor(account, target.url);
    for (let index = 0; index < 17; index += 1) await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    const dispatcher = dispatcherWith({ timeout_ms: 300, endpoint_concurrency: 3 });
    try {
      // An endpoint not known to answer fast gets one lease per sending slot.
      expect((await dispatcher.tick()).claimed).toBe(3);
      await dispatcher.settle();
      expect(target.requests).toHaveLength(3);
      // It stopped answering: one lease at a time now.
      expect((await dispatcher.tick()).claimed).toBe(1);
      await dispatcher.settle();
      dead = false;
      expect((await dispatcher.tick()).claimed).toBe(1);
      await dispatcher.settle();
      // It answered, and quickly: its three slots are back, plus leases waiting for them (four times).
      expect((await dispatcher.tick()).claimed).toBe(12);
      await target.waitFor(3 + 1 + 1 + 3);
      await dispatcher.settle();
      expect(target.requests).toHaveLength(3 + 1 + 1 + 12);
    } finally {
      await dispatcher.stop();
    }
  });
});

describe('signing key rotation', () => {
  it('publishes the new key, announces it, switches signing within 60 seconds, and lists the old key until not_after', async () => {
    const account = await merchant();
    const store = new MemoryReceiverStore();
    const cache = new SigningKeyCache(async () => (await h.app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' })).json() as { keys: PublishedKey[] }, () => h.app.clock.now().getTime());
    // The back-office rotation rotates the live key set and tells live feeds only (sandbox keys have their
    // own set: test/webhooks/key-rotation-sandbox.test.ts), so this receiver is a live one.
    const reference = new ReferenceReceiver({ livemode: true, keys: cache, store, now_ms: () => h.app.clock.now().getTime() });
    const target = await receiver(() => ({ handle: (body, headers) => reference.handle(body, headers) }));
    await endpointFor(account, target.url, { mode: 'live' });
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'), true);
    await run();
    const oldKid = /kid=([^,]+)/.exec(String(target.requests[0]!.headers['x-pg-signature']))![1];
    expect(store.applied).toHaveLength(1);

    const rotation = await h.backoffice('POST', '/v1/bo/webhook-signing-keys/rotate', {});
    expect(rotation.statusCode, rotation.body).toBe(200);
    const rotated = rotation.json();
    expect(rotated).toMatchObject({ rotated: true, previous_kid: oldKid, new_key: { status: 'next', alg: 'Ed25519', format: 'spki_der_base64' } });
    expect(Date.parse(rotated.signing_switches_at) - h.app.clock.now().getTime()).toBeLessThanOrEqual(60 * SECOND_MS);
    // The list also carries the brand's sandbox set (earlier tests delivered sandbox events); the live set
    // comes first.
    const keys = await publishedKeys();
    expect(keys.slice(0, 2).map((key) => [key.kid, key.status])).toEqual([[rotated.new_key.kid, 'next'], [oldKid, 'active']]);
    expect(keys[1]!.not_after).toBe(rotated.previous_key_not_after);
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual(['alg', 'format', 'kid', 'not_after', 'not_before', 'public_key', 'raw_public_key', 'status']);
      expect(Buffer.from(key.raw_public_key, 'base64').equals(Buffer.from(key.public_key, 'base64').subarray(12))).toBe(true);
    }
    // Asking again while the switch is pending answers the same rotation.
    expect((await h.backoffice('POST', '/v1/bo/webhook-signing-keys/rotate', {})).json()).toMatchObject({ rotated: false, new_key: { kid: rotated.new_key.kid } });

    await run();
    const announcement = target.requests.find((request) => request.headers['x-pg-event-type'] === 'webhook.key.rotating');
    expect(announcement).toBeDefined();
    expect(JSON.parse(announcement!.body.toString()).data.object).toMatchObject({ object: 'webhook_key_rotation', id: rotated.new_key.kid, previous_kid: oldKid });
    expect(String(announcement!.headers['x-pg-signature'])).toContain(`kid=${oldKid},`);

    h.app.clock.advance(30 * SECOND_MS);
    await emitFor(account, 'deposit.settled', depositObject(newDepositId(), 2, 'settled'), true);
    await run();
    const last = target.requests.at(-1)!;
    expect(String(last.headers['x-pg-signature'])).toContain(`kid=${rotated.new_key.kid},`);
    // The reference receiver met an unknown kid, refetched once, verified and applied it.
    expect(store.applied.map((entry) => entry.type)).toEqual(['deposit.created', 'webhook.key.rotating', 'deposit.settled']);
    expect((await publishedKeys()).slice(0, 2).map((key) => [key.kid, key.status])).toEqual([[rotated.new_key.kid, 'active'], [oldKid, 'retiring']]);
    h.app.clock.advance(24 * HOUR_MS);
    expect((await publishedKeys()).map((key) => key.kid).filter((kid) => kid === rotated.new_key.kid || kid === oldKid)).toEqual([rotated.new_key.kid]);
    const { rows } = await h.app.testDatabase.database.query<{ private_key_sealed: string }>('SELECT private_key_sealed FROM webhook_signing_keys');
    expect(rows.every((row) => row.private_key_sealed.startsWith('v2.') && !row.private_key_sealed.includes('MC4CAQ'))).toBe(true);
  });
});

describe('restarts and several processes', () => {
  /** Another service instance on the same database: a restarted process, or a second one. */
  async function openInstance(database: Database, timeout_ms = 5_000): Promise<{ instance: ServiceInstance; webhooks: Webhooks }> {
    const instance = createServiceInstance({
      config: loadConfig({ LOG_LEVEL: 'silent' }),
      database,
      clock: h.app.clock,
      logger: createLogger('silent'),
      master_key: TEST_MASTER_KEY,
      webhooks: {
          policy: TEST_POLICY_WITH_LIVE_LOOPBACK,
          settings: { timeout_ms, poll_interval_ms: 10, endpoint_concurrency: 4, max_in_flight: 32, sandbox_loopback: true, extra_ca_pem: [h.certs.ca_pem] },
        },
      owns_database: false,
    });
    await instance.app.ready();
    return { instance, webhooks: instance.services.webhooks };
  }

  async function otherDatabase(): Promise<Database> {
    return usingPostgres ? h.app.testDatabase.openAnother() : h.app.testDatabase.database;
  }

  it('a restart in the middle of a retry loop loses nothing, and a vanished process is recovered without overlap', async () => {
    const account = await merchant();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const target = await receiver((request) => {
      const attempt = Number(request.headers['x-pg-attempt']);
      if (attempt === 1) return answer(500);
      if (attempt === 2) return { handle: async () => (await gate, { status: 200, body: {} }) };
      return answer(200);
    });
    const endpoint = await endpointFor(account, target.url);
    await emitFor(account, 'deposit.settled', depositObject(newDepositId(), 2, 'settled'));

    // Process one makes attempt 1 and stops (a graceful restart): the retry is a row with a due time.
    const first = await openInstance(await otherDatabase());
    await first.webhooks.dispatcher.runUntilIdle();
    await first.webhooks.dispatcher.stop();
    await first.instance.stop();
    expect(target.requests).toHaveLength(1);

    // Process two makes attempt 2 and then vanishes mid-attempt: it can no longer record anything.
    const second = await openInstance(await otherDatabase());
    let crashed = false;
    const crashable: Database = {
      engine: second.instance.services.database.engine,
      query: (sql, params) => (crashed ? Promise.reject(new Error('process gone')) : second.instance.services.database.query(sql, params)),
      exec: (sql) => second.instance.services.database.exec(sql),
      transaction: (work) => (crashed ? Promise.reject(new Error('process gone')) : second.instance.services.database.transaction(work)),
      close: async () => {},
    } as Database;
    const vanishing = new DeliveryDispatcher({
      openBody: (text) => second.instance.services.events.openStoredText(text),
      database: crashable,
      clock: h.app.clock,
      logger: createLogger('silent'),
      signingKeys: second.webhooks.signingKeys,
      client: new DeliveryClient({ timeout_ms: 5_000, endpoint_concurrency: 4, policy: TEST_POLICY_WITH_LIVE_LOOPBACK, sandbox_loopback: true, extra_ca_pem: [h.certs.ca_pem] }),
      endpointGone: async (_tx: Queryable) => {},
      settings: { ...DEFAULT_WEBHOOK_SETTINGS, timeout_ms: 5_000 },
    });
    h.app.clock.advance(MINUTE_MS);
    expect((await vanishing.tick()).claimed).toBe(1);
    await target.waitFor(2);
    crashed = true;

    // Process three, meanwhile: the lease is held, so attempt 2 is not sent a second time.
    const third = await openInstance(await otherDatabase());
    expect(await third.webhooks.dispatcher.runUntilIdle()).toBe(0);
    expect(target.requests).toHaveLength(2);

    // The vanished process's attempt ends at the receiver; its lease runs out and is recovered as
    // lost; the schedule goes on with attempt 3, never overlapping attempt 2.
    release();
    await vanishing.stop();
    // Its lease: four times its 5-second timeout plus the 30-second margin.
    h.app.clock.advance(4 * 5 * SECOND_MS + 30 * SECOND_MS + SECOND_MS);
    await third.webhooks.dispatcher.runUntilIdle();
    h.app.clock.advance(5 * MINUTE_MS);
    await third.webhooks.dispatcher.runUntilIdle();
    expect(target.requests.map((request) => request.headers['x-pg-attempt'])).toEqual(['1', '2', '3']);
    expect(target.max_concurrent_per_delivery).toBe(1);
    const [recorded] = await deliveries(endpoint);
    expect(recorded).toMatchObject({ status: 'succeeded', attempt_count: 3 });
    const detail = await delivery(endpoint, recorded!.id);
    expect(detail.attempts!.map((attempt) => [attempt.attempt, attempt.status])).toEqual([[1, 'failed'], [2, 'lost'], [3, 'succeeded']]);
    await third.webhooks.dispatcher.stop();
    await third.instance.stop();
    await second.webhooks.dispatcher.stop();
    await second.instance.stop();
  });

  it.runIf(usingPostgres)('dispatchers in two processes deliver every event exactly once, never one delivery twice at a time', async () => {
    const account = await merchant();
    const targets = [
      await receiver(() => answer(200)),
      await receiver(() => ({ handle: async () => (await new Promise((resolve) => setTimeout(resolve, 2)), { status: 200, body: {} }) })),
      await receiver(() => answer(204)),
    ];
    for (const target of targets) await endpointFor(account, target.url);
    // A generous timeout: this test is about exclusivity, and a loaded machine must not turn answers into retries.
    const one = await openInstance(await otherDatabase(), 10_000);
    const two = await openInstance(await otherDatabase(), 10_000);
    const count = 150;
    for (let index = 0; index < count; index += 1) await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    one.webhooks.dispatcher.start();
    two.webhooks.dispatcher.start();
    try {
      for (const target of targets) await target.waitFor(count, 20_000);
    } finally {
      await one.webhooks.dispatcher.stop();
      await two.webhooks.dispatcher.stop();
      await one.instance.stop();
      await two.instance.stop();
    }
    for (const target of targets) {
      expect(target.requests).toHaveLength(count);
      expect(new Set(target.requests.map((request) => request.headers['x-pg-delivery-id'])).size).toBe(count);
      expect(target.max_concurrent_per_delivery).toBe(1);
    }
    const { rows } = await h.app.testDatabase.database.query<{ attempts: number; succeeded: number }>(
      `SELECT count(*)::int AS attempts, count(*) FILTER (WHERE a.status = 'succeeded')::int AS succeeded
         FROM webhook_delivery_attempts a
         JOIN webhook_deliveries d ON d.white_label_id = a.white_label_id AND d.delivery_id = a.delivery_id
        WHERE d.merchant_id = $1`,
      [account.merchant_id],
    );
    expect(rows[0]).toEqual({ attempts: count * targets.length, succeeded: count * targets.length });
  });
});

describe('housekeeping', () => {
  it('purges finished deliveries with their attempts after 31 days, and never a pending one', async () => {
    // The earlier tests moved the clock by weeks: their history goes first.
    h.app.clock.advance(32 * 24 * HOUR_MS);
    await webhooks.purgeFinished();
    const account = await merchant();
    const healthy = await receiver(() => answer(200));
    const failing = await receiver(() => answer(500));
    const healthyEndpoint = await endpointFor(account, healthy.url);
    const failingEndpoint = await endpointFor(account, failing.url);
    await emitFor(account, 'deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'));
    await run();
    h.app.clock.advance(30 * 24 * HOUR_MS);
    expect(await webhooks.purgeFinished()).toBe(0);
    h.app.clock.advance(2 * 24 * HOUR_MS);
    expect(await webhooks.purgeFinished()).toBeGreaterThanOrEqual(1);
    expect(await deliveries(healthyEndpoint)).toEqual([]);
    expect(await deliveries(failingEndpoint)).toEqual([expect.objectContaining({ status: 'pending' })]);
    const { rows } = await h.app.testDatabase.database.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM webhook_delivery_attempts a WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.white_label_id = a.white_label_id AND d.delivery_id = a.delivery_id)',
    );
    expect(rows[0]!.count).toBe(0);
  });

  it('a round reads the finished deliveries by their completion time, not the whole table (migration 0048)', async () => {
    // With sequential scans off, the plan shows whether an index can serve the purge at all: at a month's size the
    // planner takes it, and without it every round scanned every delivery.
    const db = h.app.testDatabase.database;
    const plan = await db.transaction(async (tx) => {
      await tx.query('SET LOCAL enable_seqscan = off');
      const { rows } = await tx.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT white_label_id, delivery_id FROM webhook_deliveries
          WHERE status <> 'pending' AND leased_by IS NULL AND completed_at < now() ORDER BY completed_at LIMIT 5000`,
      );
      return rows.map((row) => row['QUERY PLAN']).join('\n');
    });
    expect(plan).toContain('webhook_deliveries_finished');
    expect(plan).not.toContain('Seq Scan');
  });
});
