import crypto from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/platform/ids.ts';
import { Rollback } from '../../src/platform/db.ts';
import { runInTestClock } from '../../src/platform/clock.ts';
import { DAY_MS, SECOND_MS } from '../../src/platform/time.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import type { EndpointView } from '../../src/webhooks/service.ts';
import { KEY_SWITCH_DELAY_MS, SANDBOX_KEY_OVERLAP_MS, type RotationResult, type SigningKeyRecord } from '../../src/webhooks/signing-keys.ts';
import { MemoryReceiverStore, ReferenceReceiver, SigningKeyCache, type PublishedKey } from '../../examples/webhook-receiver/receiver.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { createWebhookTestApp, depositObject, newDepositId, TEST_POLICY_WITH_LIVE_LOOPBACK, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';
import { startScriptedReceiver, type RecordedRequest, type ScriptedReceiver } from '../support/webhook-receivers.ts';

/**
 * Environment-separated signing keys and the 114.00 THB sandbox key-rotation scenario, through the
 * doors a merchant and an operator use: the public key list, real HTTPS receivers running the reference
 * receiver (keys fetched from GET /v1/webhooks/signing-keys, refetched on an unknown kid), the
 * dispatcher, the back office, GET /v1/pay/events, and the method the scenario engine calls. The
 * TestClock drives the 30-second switch and the overlap. The tests share one service instance and run
 * in order: each starts with no rotation waiting for its switch.
 */

let h: WebhookTestApp;
const receivers: ScriptedReceiver[] = [];
const endpoints: EndpointView[] = [];

beforeAll(async () => {
  h = await createWebhookTestApp({ policy: TEST_POLICY_WITH_LIVE_LOOPBACK, settings: { timeout_ms: 5_000 } });
});

afterEach(async () => {
  // Deleting an endpoint ends its pending deliveries and takes its feed out of later rotations' audience.
  for (const endpoint of endpoints.splice(0)) await h.backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
  for (const receiver of receivers.splice(0)) await receiver.close();
  // Whatever a test rotated has switched in before the next test starts.
  h.app.clock.advance(KEY_SWITCH_DELAY_MS + SECOND_MS);
});

afterAll(async () => {
  await h.close();
});

const run = () => h.webhooks.dispatcher.runUntilIdle();

async function publishedKeys(): Promise<SigningKeyRecord[]> {
  const response = await h.app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' });
  expect(response.statusCode).toBe(200);
  return (response.json() as { keys: SigningKeyRecord[] }).keys;
}

function statusOf(keys: SigningKeyRecord[], kid: string): string | undefined {
  return keys.find((key) => key.kid === kid)?.status;
}

/** A merchant's receiver: the reference receiver of the spec behind a real HTTPS server, with its own key cache. */
interface Receiver {
  target: ScriptedReceiver;
  store: MemoryReceiverStore;
}

function keyCache(): SigningKeyCache {
  return new SigningKeyCache(
    async () => (await h.app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' })).json() as { keys: PublishedKey[] },
    () => h.app.clock.now().getTime(),
  );
}

async function receiverFor(account: MerchantCredentials, livemode: boolean): Promise<Receiver> {
  const store = new MemoryReceiverStore();
  const reference = new ReferenceReceiver({ livemode, keys: keyCache(), store, now_ms: () => h.app.clock.now().getTime() });
  const target = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => ({ handle: (body, headers) => reference.handle(body, headers) }) });
  receivers.push(target);
  const endpoint = await h.createEndpoint({ merchant_id: account.merchant_id, url: target.url, mode: livemode ? 'live' : 'test' });
  endpoints.push(endpoint);
  return { target, store };
}

function kidOf(request: RecordedRequest): string {
  return /kid=([^,]+)/.exec(String(request.headers['x-pg-signature']))![1]!;
}

function eventTypes(receiver: Receiver): string[] {
  return receiver.target.requests.map((request) => String(request.headers['x-pg-event-type']));
}

function last(receiver: Receiver): RecordedRequest {
  return receiver.target.requests.at(-1)!;
}

/** The signature check a merchant would write with node:crypto alone, against a published list. */
function verifies(request: RecordedRequest, keys: SigningKeyRecord[]): boolean {
  const header = String(request.headers['x-pg-signature']);
  const pairs = new Map(header.split(',').filter((part) => part.includes('=')).map((part) => [part.slice(0, part.indexOf('=')), part.slice(part.indexOf('=') + 1)]));
  const key = keys.find((candidate) => candidate.kid === pairs.get('kid'));
  if (!key) return false;
  const publicKey = crypto.createPublicKey({ key: Buffer.from(key.public_key, 'base64'), format: 'der', type: 'spki' });
  const signed = Buffer.concat([Buffer.from(`v1.${pairs.get('t')}.${String(request.headers['x-pg-event-id'])}.`, 'utf8'), request.body]);
  return crypto.verify(null, signed, publicKey, Buffer.from(pairs.get('s') ?? '', 'base64url'));
}

function emit(account: MerchantCredentials, livemode: boolean): Promise<EventEnvelope> {
  return h.emit('deposit.created', depositObject(newDepositId(), 1, 'awaiting_payment'), {
    merchant_id: account.merchant_id,
    white_label_id: account.white_label_id,
    livemode,
  });
}

function sandboxMerchant(): Promise<MerchantCredentials> {
  return h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id });
}

function rotateForScenario(account: MerchantCredentials, request_id = newId('request')): Promise<RotationResult> {
  return h.webhooks.signingKeys.rotateForSandboxScenario({ white_label_id: account.white_label_id, merchant_id: account.merchant_id, request_id });
}

/** The events of a merchant's sandbox feed, read as the merchant reads them (signed GET /v1/pay/events). */
async function sandboxFeed(account: MerchantCredentials): Promise<EventEnvelope[]> {
  const response = await h.app.signed({ url: '/v1/pay/events?limit=500', credentials: account });
  expect(response.statusCode, response.body).toBe(200);
  return (response.json() as { data: EventEnvelope[] }).data;
}

async function storedSet(kid: string): Promise<{ white_label_id: string; livemode: boolean }> {
  const { rows } = await h.app.testDatabase.database.query<{ white_label_id: string; livemode: boolean }>(
    'SELECT white_label_id, livemode FROM webhook_signing_keys WHERE kid = $1',
    [kid],
  );
  expect(rows).toHaveLength(1);
  return rows[0]!;
}

async function liveRotationEvents(): Promise<number> {
  const { rows } = await h.app.testDatabase.database.query<{ count: number }>(
    "SELECT count(*)::int AS count FROM events WHERE livemode AND type = 'webhook.key.rotating'",
  );
  return rows[0]!.count;
}

describe('one key set per environment', () => {
  it('signs sandbox deliveries with the brand’s sandbox set and live ones with the live set, all verifiable from GET /v1/webhooks/signing-keys', async () => {
    // The key published before anything was delivered is the platform key of old: it stays the live key.
    const before = await publishedKeys();
    expect(before.map((key) => key.status)).toEqual(['active']);
    const platformKid = before[0]!.kid;

    const account = await sandboxMerchant();
    const elsewhere = await h.app.createMerchant();
    const sandbox = await receiverFor(account, false);
    const live = await receiverFor(account, true);
    const otherBrand = await receiverFor(elsewhere, false);
    await emit(account, false);
    await emit(account, true);
    await emit(elsewhere, false);
    await run();

    // The reference receivers fetched the list, verified each signature, and applied each event.
    expect(sandbox.store.applied).toHaveLength(1);
    expect(live.store.applied).toHaveLength(1);
    expect(otherBrand.store.applied).toHaveLength(1);
    const sandboxKid = kidOf(last(sandbox));
    const liveKid = kidOf(last(live));
    const otherBrandKid = kidOf(last(otherBrand));
    expect(liveKid).toBe(platformKid);
    expect(new Set([sandboxKid, liveKid, otherBrandKid]).size).toBe(3);

    const keys = await publishedKeys();
    for (const request of [last(sandbox), last(live), last(otherBrand)]) expect(verifies(request, keys)).toBe(true);
    // Every set is listed, the live set first; no kid is listed twice, and every record has the spec's fields only.
    expect(keys[0]!.kid).toBe(liveKid);
    expect(new Set(keys.map((key) => key.kid)).size).toBe(keys.length);
    expect(keys.filter((key) => [sandboxKid, liveKid, otherBrandKid].includes(key.kid)).map((key) => key.status)).toEqual(['active', 'active', 'active']);
    for (const key of keys) {
      expect(Object.keys(key).sort()).toEqual(['alg', 'format', 'kid', 'not_after', 'not_before', 'public_key', 'raw_public_key', 'status']);
    }
    expect(await storedSet(liveKid)).toEqual({ white_label_id: '', livemode: true });
    expect(await storedSet(sandboxKid)).toEqual({ white_label_id: account.white_label_id, livemode: false });
    expect(await storedSet(otherBrandKid)).toEqual({ white_label_id: elsewhere.white_label_id, livemode: false });
  });
});

describe('the 114.00 THB scenario: rotateForSandboxScenario', () => {
  it('rotates the brand’s sandbox set, tells its sandbox feeds, lists the new kid at once as next, switches within 60 seconds, and leaves live alone', async () => {
    const account = await sandboxMerchant();
    const neighbour = await sandboxMerchant();
    const elsewhere = await h.app.createMerchant();
    const sandbox = await receiverFor(account, false);
    const live = await receiverFor(account, true);
    const neighbourSandbox = await receiverFor(neighbour, false);
    const neighbourLive = await receiverFor(neighbour, true);
    const otherBrand = await receiverFor(elsewhere, false);
    await emit(account, false);
    await emit(account, true);
    await emit(elsewhere, false);
    await run();
    const oldKid = kidOf(last(sandbox));
    const liveKid = kidOf(last(live));
    const otherBrandKid = kidOf(last(otherBrand));
    const liveRotationsBefore = await liveRotationEvents();

    const rotatedAt = h.app.clock.now().getTime();
    const rotation = await rotateForScenario(account);
    const switchAt = Date.parse(rotation.signing_switches_at);
    expect(rotation).toMatchObject({ object: 'webhook_key_rotation', livemode: false, rotated: true, previous_kid: oldKid, new_key: { status: 'next', alg: 'Ed25519' }, announced_to: 2 });
    expect(switchAt - rotatedAt).toBe(KEY_SWITCH_DELAY_MS);
    expect(switchAt - rotatedAt).toBeLessThanOrEqual(60 * SECOND_MS);
    expect(Date.parse(rotation.previous_key_not_after!)).toBe(switchAt + SANDBOX_KEY_OVERLAP_MS);
    const newKid = rotation.new_key.kid;

    // Published at once, before it signs anything; the old sandbox key and the live key still sign.
    const listed = await publishedKeys();
    expect(statusOf(listed, newKid)).toBe('next');
    expect(statusOf(listed, oldKid)).toBe('active');
    expect(statusOf(listed, liveKid)).toBe('active');
    expect(statusOf(listed, otherBrandKid)).toBe('active');
    expect(listed.find((key) => key.kid === newKid)).toEqual(rotation.new_key);

    // The announcement reaches the merchant's sandbox feed and the brand's other sandbox feed, signed by
    // the old key (it has not switched yet); no live feed and no other brand hears of it.
    await run();
    const announcement = sandbox.target.requests.find((request) => request.headers['x-pg-event-type'] === 'webhook.key.rotating');
    expect(announcement).toBeDefined();
    const envelope = JSON.parse(announcement!.body.toString('utf8')) as EventEnvelope;
    expect(envelope.livemode).toBe(false);
    expect(envelope.account.merchant_id).toBe(account.merchant_id);
    expect(envelope.data.object).toEqual({
      object: 'webhook_key_rotation',
      id: newKid,
      livemode: false,
      new_key: rotation.new_key,
      previous_kid: oldKid,
      signing_switches_at: rotation.signing_switches_at,
      previous_key_not_after: rotation.previous_key_not_after,
    });
    expect(kidOf(announcement!)).toBe(oldKid);
    expect(sandbox.store.applied.map((entry) => entry.type)).toEqual(['deposit.created', 'webhook.key.rotating']);
    expect(eventTypes(neighbourSandbox)).toEqual(['webhook.key.rotating']);
    expect(neighbourSandbox.store.applied).toHaveLength(1);
    expect(eventTypes(live)).toEqual(['deposit.created']);
    expect(eventTypes(neighbourLive)).toEqual([]);
    expect(eventTypes(otherBrand)).toEqual(['deposit.created']);
    expect(await liveRotationEvents()).toBe(liveRotationsBefore);

    // One second before the switch the old sandbox key still signs.
    h.app.clock.set(new Date(switchAt - SECOND_MS));
    await emit(account, false);
    await emit(account, true);
    await run();
    const signedByOldKey = last(sandbox);
    expect(kidOf(signedByOldKey)).toBe(oldKid);
    expect(kidOf(last(live))).toBe(liveKid);

    // From the switch on the new kid signs sandbox deliveries; the receiver met an unknown kid, refetched
    // the list once and verified it. Live keeps its kid, and the other brand keeps its own sandbox key.
    h.app.clock.set(new Date(switchAt));
    await emit(account, false);
    await emit(account, true);
    await emit(elsewhere, false);
    await run();
    expect(kidOf(last(sandbox))).toBe(newKid);
    expect(kidOf(last(live))).toBe(liveKid);
    expect(kidOf(last(otherBrand))).toBe(otherBrandKid);
    expect(sandbox.store.applied).toHaveLength(4);
    expect(live.store.applied).toHaveLength(3);

    // During the overlap the old kid is still listed, as retiring, and still verifies what it signed:
    // by hand, and by a receiver that started after the switch with an empty key cache.
    h.app.clock.advance(SECOND_MS);
    const during = await publishedKeys();
    expect(statusOf(during, newKid)).toBe('active');
    expect(during.find((key) => key.kid === oldKid)).toMatchObject({ status: 'retiring', not_after: rotation.previous_key_not_after });
    expect(statusOf(during, liveKid)).toBe('active');
    expect(verifies(signedByOldKey, during)).toBe(true);
    const restarted = new ReferenceReceiver({ livemode: false, keys: keyCache(), now_ms: () => h.app.clock.now().getTime() });
    expect(await restarted.handle(signedByOldKey.body, signedByOldKey.headers)).toMatchObject({ status: 200, body: { ok: true } });

    // After the overlap the old kid is gone from the list; the new one and the live one remain.
    h.app.clock.set(new Date(switchAt + SANDBOX_KEY_OVERLAP_MS));
    const after = await publishedKeys();
    expect(statusOf(after, oldKid)).toBeUndefined();
    expect(statusOf(after, newKid)).toBe('active');
    expect(statusOf(after, liveKid)).toBe('active');
    expect(await liveRotationEvents()).toBe(liveRotationsBefore);
  });

  it('answers a rotation already waiting for its switch, tells each merchant once, and answers a run asked again without writing anything', async () => {
    const withEndpoint = await sandboxMerchant();
    const withoutEndpoint = await sandboxMerchant();
    await receiverFor(withEndpoint, false);

    const first = await rotateForScenario(withEndpoint, 'req_RUN_FIRST');
    expect(first).toMatchObject({ rotated: true, announced_to: 1 });
    // Another merchant's run while the switch is pending gets the same key; its feed had not been told,
    // so it is told now, with its own request id.
    const second = await rotateForScenario(withoutEndpoint, 'req_RUN_SECOND');
    expect(second).toMatchObject({ rotated: false, new_key: { kid: first.new_key.kid, status: 'next' }, signing_switches_at: first.signing_switches_at, announced_to: 1 });
    const told = (await sandboxFeed(withoutEndpoint)).filter((event) => event.type === 'webhook.key.rotating');
    expect(told.map((event) => [event.data.object.id, event.request?.id, event.livemode])).toEqual([[first.new_key.kid, 'req_RUN_SECOND', false]]);
    // A merchant already told is not told twice by another run of its own.
    expect(await rotateForScenario(withEndpoint, 'req_RUN_THIRD')).toMatchObject({ rotated: false, new_key: { kid: first.new_key.kid }, announced_to: 0 });

    // The step's job runs again (at least once): the same run answers what it got, even after the
    // switch, and writes no event and no key.
    const feedBefore = (await sandboxFeed(withEndpoint)).length;
    const keysBefore = await publishedKeys();
    expect(await rotateForScenario(withEndpoint, 'req_RUN_FIRST')).toEqual({ ...first, announced_to: 0 });
    h.app.clock.set(new Date(Date.parse(first.signing_switches_at)));
    expect(await rotateForScenario(withEndpoint, 'req_RUN_FIRST')).toEqual({ ...first, new_key: { ...first.new_key, status: 'active' }, announced_to: 0 });
    expect((await sandboxFeed(withEndpoint)).length).toBe(feedBefore);
    expect((await publishedKeys()).map((key) => key.kid)).toEqual(keysBefore.map((key) => key.kid));

    // Two runs at once (another one after the switch) make one key: one rotates, the other answers it.
    const [left, right] = await Promise.all([rotateForScenario(withEndpoint), rotateForScenario(withoutEndpoint)]);
    expect([left.rotated, right.rotated].sort()).toEqual([false, true]);
    expect(left.new_key.kid).toBe(right.new_key.kid);
    expect(left.previous_kid).toBe(first.new_key.kid);
  });

  it('runs in the caller’s transaction when given one: rolled back with it, committed with it', async () => {
    const account = await sandboxMerchant();
    const database = h.app.instance.services.database;
    const before = (await publishedKeys()).map((key) => key.kid);
    const undone: { rotation?: RotationResult } = {};
    await expect(
      database.transaction(async (tx) => {
        undone.rotation = await h.webhooks.signingKeys.rotateForSandboxScenario({ white_label_id: account.white_label_id, merchant_id: account.merchant_id, request_id: 'req_ROLLED_BACK' }, tx);
        throw new Rollback(null);
      }),
    ).rejects.toBeInstanceOf(Rollback);
    expect(undone.rotation).toMatchObject({ rotated: true });
    expect((await publishedKeys()).map((key) => key.kid)).toEqual(before);
    expect((await sandboxFeed(account)).filter((event) => event.type === 'webhook.key.rotating')).toEqual([]);

    const kept = await database.transaction((tx) =>
      h.webhooks.signingKeys.rotateForSandboxScenario({ white_label_id: account.white_label_id, merchant_id: account.merchant_id, request_id: 'req_ROLLED_BACK' }, tx),
    );
    expect(kept).toMatchObject({ rotated: true, announced_to: 1 });
    expect(kept.new_key.kid).not.toBe(undone.rotation!.new_key.kid);
    expect(statusOf(await publishedKeys(), kept.new_key.kid)).toBe('next');
    expect((await sandboxFeed(account)).filter((event) => event.type === 'webhook.key.rotating').map((event) => event.data.object.id)).toEqual([kept.new_key.kid]);
  });
});

describe('time of the scenario’s rotation', () => {
  it('follows the service clock, not the merchant’s sandbox test clock the scenario step runs under', async () => {
    const account = await sandboxMerchant();
    const realNow = h.app.clock.now().getTime();
    // A step of a scenario order made under a test clock advanced 30 days ahead runs in that clock's time;
    // the brand's key set, shared by every merchant of the brand, still switches 30 real seconds from now.
    const scope = { test_clock_id: 'clock_01JTESTCLOCKAHEADOFREALTIME', white_label_id: account.white_label_id, merchant_id: account.merchant_id, now: new Date(realNow + 30 * DAY_MS) };
    const rotation = await runInTestClock(scope, () => rotateForScenario(account));
    expect(rotation.rotated).toBe(true);
    expect(Date.parse(rotation.signing_switches_at)).toBe(realNow + KEY_SWITCH_DELAY_MS);
    expect(Date.parse(rotation.previous_key_not_after!)).toBe(realNow + KEY_SWITCH_DELAY_MS + SANDBOX_KEY_OVERLAP_MS);
    expect(statusOf(await publishedKeys(), rotation.new_key.kid)).toBe('next');
    h.app.clock.advance(KEY_SWITCH_DELAY_MS);
    expect(statusOf(await publishedKeys(), rotation.new_key.kid)).toBe('active');
  });
});

describe('the back-office rotation', () => {
  it('rotates the live set only: live feeds are told and switch, the sandbox signer and sandbox feeds are untouched', async () => {
    const account = await sandboxMerchant();
    const sandbox = await receiverFor(account, false);
    const live = await receiverFor(account, true);
    await emit(account, false);
    await emit(account, true);
    await run();
    const sandboxKid = kidOf(last(sandbox));
    const oldLiveKid = kidOf(last(live));

    // The route has no environment selector: it is the live set's door.
    expect((await h.backoffice('POST', '/v1/bo/webhook-signing-keys/rotate', { mode: 'test' })).statusCode).toBe(422);
    const response = await h.backoffice('POST', '/v1/bo/webhook-signing-keys/rotate', {});
    expect(response.statusCode, response.body).toBe(200);
    const rotation = response.json() as RotationResult;
    expect(rotation).toMatchObject({ rotated: true, previous_kid: oldLiveKid, new_key: { status: 'next' } });
    const listed = await publishedKeys();
    expect(listed.slice(0, 2).map((key) => [key.kid, key.status])).toEqual([[rotation.new_key.kid, 'next'], [oldLiveKid, 'active']]);
    expect(statusOf(listed, sandboxKid)).toBe('active');

    await run();
    expect(eventTypes(live)).toEqual(['deposit.created', 'webhook.key.rotating']);
    expect(eventTypes(sandbox)).toEqual(['deposit.created']);

    h.app.clock.set(new Date(Date.parse(rotation.signing_switches_at)));
    await emit(account, false);
    await emit(account, true);
    await run();
    expect(kidOf(last(live))).toBe(rotation.new_key.kid);
    expect(kidOf(last(sandbox))).toBe(sandboxKid);
    expect(live.store.applied).toHaveLength(3);
    expect(sandbox.store.applied).toHaveLength(2);
    expect(statusOf(await publishedKeys(), sandboxKid)).toBe('active');
  });
});
