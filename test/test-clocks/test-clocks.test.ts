import crypto from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createServiceInstance, type ExtraRouteModule, type ServiceInstance } from '../../src/app.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { enqueueJob, type JobHandler } from '../../src/jobs/index.ts';
import { loadConfig } from '../../src/platform/config.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS } from '../../src/platform/time.ts';
import type { BackofficeTestClockView, TestClockView } from '../../src/test-clocks/service.ts';
import type { DeliveryView } from '../../src/webhooks/service.ts';
import { errorOf, TEST_MASTER_KEY, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, nextReference, runJobs, sandboxTransfer, slipBytes, SOMCHAI_SENDER, uploadMultipart } from '../support/slips.ts';
import { createWebhookTestApp, TEST_POLICY_WITH_LIVE_LOOPBACK, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';
import { answer, startScriptedReceiver } from '../support/webhook-receivers.ts';

/**
 * Sandbox test clocks through the doors a merchant and the back office use: signed HTTP for the clock
 * and for the sandbox objects made under it, the real job worker for advances, the real dispatcher and
 * an HTTPS receiver for webhooks. Every test works on its own merchant of the sandbox brand, because a
 * merchant has one clock attached at a time; the TestClock (`app.clock`) is the real time of the
 * service, and each clock is frozen at an instant apart from it so that the two cannot be confused.
 */

let h: WebhookTestApp;
let app: TestApp;

beforeAll(async () => {
  h = await createWebhookTestApp({ policy: TEST_POLICY_WITH_LIVE_LOOPBACK, settings: { timeout_ms: 5_000 } });
  app = h.app;
  // The brand's sandbox counterparty (shared by every merchant) is opened by the first deposit that needs
  // it, with its own jobs; opened here in real time, it keeps them off the clocks of the tests below, so
  // that each advance's job runs count only the test's own objects.
  await createDeposit(app, { amount_minor: 15_000 });
});

afterAll(async () => {
  await h.close();
});

const iso = (instant: Date | number): string => new Date(instant).toISOString();

/** An instant `offset_ms` from the service's real time, on a whole second (a clock's frozen time). */
function fromNow(offset_ms: number): Date {
  return new Date(Math.floor(app.clock.now().getTime() / SECOND_MS) * SECOND_MS + offset_ms);
}

async function sandboxMerchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

const SYSTEM = { actor_type: 'system' as const, actor_id: 'test', request_id: null };

/** A live key of the same merchant (the fixture a brand's operator would issue). */
async function liveKeyOf(merchant: MerchantCredentials): Promise<MerchantCredentials> {
  const key = await app.instance.services.tenancy.createApiKey(SYSTEM, { merchant_id: merchant.merchant_id, scope_white_label_id: merchant.white_label_id, livemode: true });
  return { ...merchant, api_key: key.api_key, signing_secret: key.signing_secret };
}

function post(credentials: MerchantCredentials, url: string, body?: unknown, idempotency_key: string = crypto.randomUUID()): Promise<LightMyRequestResponse> {
  return app.signed({ method: 'POST', url, body, idempotency_key, credentials });
}

function get(credentials: MerchantCredentials, url: string): Promise<LightMyRequestResponse> {
  return app.signed({ url, credentials });
}

async function createClock(credentials: MerchantCredentials, body?: Record<string, unknown>): Promise<TestClockView> {
  const response = await post(credentials, '/v1/test/clocks', body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<TestClockView>();
}

async function getClock(credentials: MerchantCredentials, id: string): Promise<TestClockView> {
  const response = await get(credentials, `/v1/test/clocks/${id}`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<TestClockView>();
}

async function attachClock(credentials: MerchantCredentials, id: string): Promise<TestClockView> {
  const response = await post(credentials, `/v1/test/clocks/${id}/attach`);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<TestClockView>();
}

/** A clock frozen at `frozen`, attached to the merchant's sandbox. */
async function attachedClock(credentials: MerchantCredentials, frozen: Date): Promise<TestClockView> {
  const clock = await createClock(credentials, { frozen_time: iso(frozen) });
  return attachClock(credentials, clock.id);
}

/** Asks for an advance and lets the worker run it to the end, as a merchant polling until `ready` would see it. */
async function advanceTo(credentials: MerchantCredentials, id: string, target: Date): Promise<TestClockView> {
  const response = await post(credentials, `/v1/test/clocks/${id}/advance`, { frozen_time: iso(target) });
  expect(response.statusCode, response.body).toBe(202);
  expect(response.json()).toMatchObject({ status: 'advancing', status_details: { advancing: { target_frozen_time: iso(target) } } });
  await runJobs(app);
  const after = await getClock(credentials, id);
  expect(after.status).toBe('ready');
  return after;
}

async function balanceOf(credentials: MerchantCredentials): Promise<{ available_minor: number; pending_clearing_minor: number; as_of: string }> {
  const response = await get(credentials, '/v1/pay/balance');
  expect(response.statusCode, response.body).toBe(200);
  return response.json();
}

async function eventRows(object_id: string): Promise<{ type: string; created_at: string; test_clock_id: string | null; version: number | null }[]> {
  const { rows } = await app.testDatabase.database.query<{ type: string; created_at: Date; test_clock_id: string | null; version: number | null }>(
    `SELECT type, created_at, test_clock_id, (envelope->'data'->'object'->>'version')::int AS version FROM events WHERE object_id = $1 ORDER BY sequence`,
    [object_id],
  );
  return rows.map((row) => ({ ...row, created_at: iso(row.created_at) }));
}

async function jobsOfDeposit(deposit_id: string): Promise<{ task: string; status: string; test_clock_id: string | null }[]> {
  const { rows } = await app.testDatabase.database.query<{ task: string; status: string; test_clock_id: string | null }>(
    `SELECT task, status, test_clock_id FROM jobs WHERE payload->>'deposit_id' = $1 ORDER BY created_at, job_id`,
    [deposit_id],
  );
  return rows;
}

describe('the clock resource', () => {
  it('creates, lists, reads, attaches, advances and detaches a clock; every change has its event and audit row', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(2 * HOUR_MS);
    const created = await createClock(merchant, { name: ' Clearing rehearsal ', frozen_time: iso(frozen) });
    expect(created).toEqual({
      id: expect.stringMatching(/^clock_[0-9A-HJKMNP-TV-Z]{26}$/),
      object: 'test_clock',
      version: 1,
      name: 'Clearing rehearsal',
      frozen_time: iso(frozen),
      status: 'ready',
      attached: false,
      last_advance: null,
      livemode: false,
      created_at: iso(app.clock.now()),
    });
    // Without a body the clock starts at the real now and has no name.
    const plain = await createClock(merchant);
    expect(plain).toMatchObject({ name: null, frozen_time: iso(app.clock.now()), status: 'ready' });

    const listed = await get(merchant, '/v1/test/clocks');
    expect(listed.statusCode).toBe(200);
    expect(listed.json()).toEqual({ object: 'list', data: [created, plain], has_more: false });
    const firstPage = (await get(merchant, '/v1/test/clocks?limit=1')).json();
    expect(firstPage).toEqual({ object: 'list', data: [created], has_more: true });
    const secondPage = (await get(merchant, `/v1/test/clocks?limit=1&starting_after=${created.id}`)).json();
    expect(secondPage).toEqual({ object: 'list', data: [plain], has_more: false });
    expect(await getClock(merchant, created.id)).toEqual(created);

    const attached = await attachClock(merchant, created.id);
    expect(attached).toMatchObject({ attached: true, version: 2 });
    // Attaching the attached clock again changes nothing.
    expect(await attachClock(merchant, created.id)).toEqual(attached);

    const advanced = await advanceTo(merchant, created.id, new Date(frozen.getTime() + HOUR_MS));
    expect(advanced).toEqual({
      ...attached,
      version: 4,
      frozen_time: iso(frozen.getTime() + HOUR_MS),
      last_advance: {
        requested_frozen_time: iso(frozen.getTime() + HOUR_MS),
        reached_frozen_time: iso(frozen.getTime() + HOUR_MS),
        job_runs: 0,
        outcome: 'completed',
        finished_at: iso(app.clock.now()),
      },
    });

    const detached = await post(merchant, `/v1/test/clocks/${created.id}/detach`);
    expect(detached.statusCode).toBe(200);
    expect(detached.json()).toMatchObject({ attached: false, version: 5 });
    const detachedAgain = await post(merchant, `/v1/test/clocks/${created.id}/detach`);
    expect(detachedAgain.json()).toEqual(detached.json());

    const events = await eventRows(created.id);
    expect(events.map((event) => [event.type, event.version])).toEqual([
      ['test_clock.created', 1],
      ['test_clock.attached', 2],
      ['test_clock.advancing', 3],
      ['test_clock.ready', 4],
      ['test_clock.detached', 5],
    ]);
    // The clock's own events are real time, outside its timeline (and so delivered in real time).
    expect(events.every((event) => event.test_clock_id === null && event.created_at === iso(app.clock.now()))).toBe(true);
    const { rows: ready } = await app.testDatabase.database.query<{ text: string }>(`SELECT envelope::text AS text FROM events WHERE object_id = $1 AND type = 'test_clock.ready'`, [created.id]);
    expect(JSON.parse(ready[0]!.text).data.previous_attributes).toMatchObject({
      version: 3,
      status: 'advancing',
      frozen_time: iso(frozen),
      status_details: { advancing: { target_frozen_time: iso(frozen.getTime() + HOUR_MS) } },
      last_advance: null,
    });

    const { rows: audit } = await app.testDatabase.database.query<{ action: string; actor_type: string }>(
      'SELECT action, actor_type FROM audit_log WHERE target_id = $1 ORDER BY audit_id',
      [created.id],
    );
    expect(audit).toEqual([
      { action: 'test_clock.created', actor_type: 'api_key' },
      { action: 'test_clock.attached', actor_type: 'api_key' },
      { action: 'test_clock.advance_requested', actor_type: 'api_key' },
      { action: 'test_clock.advanced', actor_type: 'system' },
      { action: 'test_clock.detached', actor_type: 'api_key' },
    ]);
  });

  it('refuses malformed input with 422 validation_error naming the field, and changes nothing', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(-DAY_MS);
    const clock = await createClock(merchant, { frozen_time: iso(frozen) });
    const advance = `/v1/test/clocks/${clock.id}/advance`;
    const cases: [string, unknown, string, string][] = [
      ['/v1/test/clocks', { frozen_time: '2026-08-01T00:00:00Z' }, 'frozen_time', 'invalid_timestamp'],
      ['/v1/test/clocks', { frozen_time: 1785542400000 }, 'frozen_time', 'must_be_string'],
      ['/v1/test/clocks', { name: '   ' }, 'name', 'too_short'],
      ['/v1/test/clocks', { name: 'x'.repeat(101) }, 'name', 'too_long'],
      ['/v1/test/clocks', { colour: 'red' }, 'colour', 'unknown_field'],
      ['/v1/test/clocks', { frozen_time: iso(fromNow(366 * DAY_MS)) }, 'frozen_time', 'out_of_range'],
      ['/v1/test/clocks', { frozen_time: iso(fromNow(-366 * DAY_MS)) }, 'frozen_time', 'out_of_range'],
      [advance, {}, 'frozen_time', 'required'],
      [advance, { frozen_time: iso(frozen) }, 'frozen_time', 'must_be_after_frozen_time'],
      [advance, { frozen_time: iso(frozen.getTime() - HOUR_MS) }, 'frozen_time', 'must_be_after_frozen_time'],
      [advance, { frozen_time: iso(frozen.getTime() + 60 * DAY_MS + 1) }, 'frozen_time', 'too_far_ahead'],
      [`/v1/test/clocks/${clock.id}/attach`, { now: true }, 'now', 'unknown_field'],
    ];
    for (const [url, body, path, reason] of cases) {
      const response = await post(merchant, url, body);
      expect(response.statusCode, `${url} ${JSON.stringify(body)}`).toBe(422);
      expect(errorOf(response).code).toBe('validation_error');
      expect(errorOf(response).details.fields, `${url} ${JSON.stringify(body)}`).toContainEqual(expect.objectContaining({ path, reason }));
    }
    const badLimit = await get(merchant, '/v1/test/clocks?limit=0');
    expect(badLimit.statusCode).toBe(422);
    expect(errorOf(badLimit).details.fields).toContainEqual(expect.objectContaining({ path: 'limit', reason: 'out_of_range' }));

    // Nothing changed: one clock, as it was, and no advance job.
    expect((await get(merchant, '/v1/test/clocks')).json().data).toEqual([clock]);
    const { rows } = await app.testDatabase.database.query<{ count: number }>(`SELECT count(*)::int AS count FROM jobs WHERE task = 'test_clocks.advance' AND payload->>'test_clock_id' = $1`, [clock.id]);
    expect(rows[0]!.count).toBe(0);

    // The bound itself is allowed: exactly 60 days on.
    const farthest = await advanceTo(merchant, clock.id, new Date(frozen.getTime() + 60 * DAY_MS));
    expect(farthest.frozen_time).toBe(iso(frozen.getTime() + 60 * DAY_MS));
  });

  it('answers 404 to a live key on every clock route, before looking at its input, and to another merchant', async () => {
    const merchant = await sandboxMerchant();
    const clock = await createClock(merchant);
    const live = await liveKeyOf(merchant);
    const attempts: [string, string, unknown][] = [
      ['POST', '/v1/test/clocks', { frozen_time: 'not a time' }],
      ['GET', '/v1/test/clocks?limit=0', undefined],
      ['GET', `/v1/test/clocks/${clock.id}`, undefined],
      ['POST', `/v1/test/clocks/${clock.id}/attach`, undefined],
      ['POST', `/v1/test/clocks/${clock.id}/detach`, undefined],
      ['POST', `/v1/test/clocks/${clock.id}/advance`, { frozen_time: 'not a time' }],
    ];
    for (const [method, url, body] of attempts) {
      const response = method === 'GET' ? await get(live, url) : await post(live, url, body);
      expect(response.statusCode, `${method} ${url}`).toBe(404);
      expect(errorOf(response).code).toBe('resource_not_found');
    }

    const other = await sandboxMerchant();
    expect((await get(other, `/v1/test/clocks/${clock.id}`)).statusCode).toBe(404);
    for (const action of ['attach', 'detach']) expect((await post(other, `/v1/test/clocks/${clock.id}/${action}`)).statusCode).toBe(404);
    const foreignAdvance = await post(other, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(fromNow(HOUR_MS)) });
    expect(foreignAdvance.statusCode).toBe(404);
    expect((await get(other, '/v1/test/clocks')).json().data).toEqual([]);
    // The owner's clock is untouched.
    expect(await getClock(merchant, clock.id)).toEqual(clock);
  });

  it('replays an idempotent write with its original answer and never repeats its effect', async () => {
    const merchant = await sandboxMerchant();
    const key = crypto.randomUUID();
    const first = await post(merchant, '/v1/test/clocks', { name: 'Replayed' }, key);
    expect(first.statusCode).toBe(201);
    const again = await post(merchant, '/v1/test/clocks', { name: 'Replayed' }, key);
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replay']).toBe('true');
    expect(again.body).toBe(first.body);
    const reused = await post(merchant, '/v1/test/clocks', { name: 'Something else' }, key);
    expect(reused.statusCode).toBe(409);
    expect(errorOf(reused).code).toBe('idempotency_key_reused');
    expect((await get(merchant, '/v1/test/clocks')).json().data).toHaveLength(1);

    const clock = first.json<TestClockView>();
    const target = new Date(new Date(clock.frozen_time).getTime() + 5 * MINUTE_MS);
    const advanceKey = crypto.randomUUID();
    const started = await post(merchant, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(target) }, advanceKey);
    expect(started.statusCode).toBe(202);
    const startedAgain = await post(merchant, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(target) }, advanceKey);
    expect(startedAgain.statusCode).toBe(202);
    expect(startedAgain.headers['idempotent-replay']).toBe('true');
    await runJobs(app);
    // After the advance, the replay is still the original answer (a replayed 202 is not current state).
    const afterwards = await post(merchant, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(target) }, advanceKey);
    expect(afterwards.body).toBe(started.body);
    expect(await getClock(merchant, clock.id)).toMatchObject({ version: 3, frozen_time: iso(target), last_advance: { outcome: 'completed', requested_frozen_time: iso(target) } });
    expect((await eventRows(clock.id)).filter((event) => event.type === 'test_clock.advancing')).toHaveLength(1);
  });

  it('keeps one clock attached per sandbox, and holds the sandbox’s writes while its clock advances', async () => {
    const merchant = await sandboxMerchant();
    const first = await attachedClock(merchant, fromNow(HOUR_MS));
    const second = await createClock(merchant);
    const conflict = await post(merchant, `/v1/test/clocks/${second.id}/attach`);
    expect(conflict.statusCode).toBe(409);
    expect(errorOf(conflict)).toMatchObject({ code: 'test_clock_already_attached', retryable: false, details: { attached_test_clock_id: first.id } });
    expect(await getClock(merchant, second.id)).toEqual(second);

    const target = new Date(new Date(first.frozen_time).getTime() + MINUTE_MS);
    expect((await post(merchant, `/v1/test/clocks/${first.id}/advance`, { frozen_time: iso(target) })).statusCode).toBe(202);
    const twice = await post(merchant, `/v1/test/clocks/${first.id}/advance`, { frozen_time: iso(target.getTime() + MINUTE_MS) });
    expect(twice.statusCode).toBe(409);
    expect(errorOf(twice)).toMatchObject({ code: 'test_clock_advancing', retryable: true, retry_after_seconds: 1 });
    // A write of the sandbox waits (nothing is created at a time the advance is passing); a read answers at the frozen time.
    const depositBody = {
      amount_minor: 15_000,
      currency: 'THB',
      merchant_reference: nextReference('clock'),
      end_user_ref: 'clock-user',
      sender: SOMCHAI_SENDER,
      client: { device_fingerprint: 'clock-device', ip: '203.0.113.9', user_agent: 'clock-test' },
    };
    const held = await post(merchant, '/v1/pay/deposits', depositBody);
    expect(held.statusCode).toBe(409);
    expect(errorOf(held)).toMatchObject({ code: 'test_clock_advancing', details: { test_clock_id: first.id } });
    expect((await balanceOf(merchant)).as_of).toBe(first.frozen_time);
    await runJobs(app);
    expect(await getClock(merchant, first.id)).toMatchObject({ status: 'ready', frozen_time: iso(target) });
    const created = await post(merchant, '/v1/pay/deposits', depositBody);
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().created_at).toBe(iso(target));
  });
});

describe('objects made under a clock', () => {
  it('expires a sandbox deposit when the clock passes expires_at, not before, and never by the real-time worker', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(3 * HOUR_MS);
    const clock = await attachedClock(merchant, frozen);
    const deposit = await createDeposit(app, { amount_minor: 15_000, credentials: merchant });
    expect(deposit.created_at).toBe(iso(frozen));
    const expiresAt = new Date(deposit.expires_at);
    expect(expiresAt.getTime() - frozen.getTime()).toBe(900 * SECOND_MS);
    const jobs = await jobsOfDeposit(deposit.id);
    expect(jobs.map((job) => job.task)).toContain('deposits.expire');
    expect(jobs.every((job) => job.test_clock_id === clock.id)).toBe(true);

    // Real time goes far past the deadline; the ordinary worker does not touch the clock's jobs.
    app.clock.advance(5 * HOUR_MS);
    await runJobs(app);
    expect((await getDeposit(app, deposit.id, merchant)).status).toBe('awaiting_payment');
    expect((await jobsOfDeposit(deposit.id)).every((job) => job.status === 'pending')).toBe(true);

    const justBefore = await advanceTo(merchant, clock.id, new Date(expiresAt.getTime() - 1));
    expect(justBefore.last_advance?.job_runs).toBe(0);
    expect((await getDeposit(app, deposit.id, merchant)).status).toBe('awaiting_payment');

    const past = await advanceTo(merchant, clock.id, new Date(expiresAt.getTime() + SECOND_MS));
    expect(past.last_advance).toMatchObject({ outcome: 'completed', job_runs: 1 });
    expect(await getDeposit(app, deposit.id, merchant)).toMatchObject({
      status: 'expired',
      is_terminal: false,
      late_slip_accepted_until: iso(expiresAt.getTime() + DAY_MS),
    });
    const events = await eventRows(deposit.id);
    expect(events.map((event) => [event.type, event.created_at, event.test_clock_id])).toEqual([
      ['deposit.created', iso(frozen), clock.id],
      ['deposit.expired', iso(expiresAt), clock.id],
    ]);
  });

  it('settles a deposit at the clock’s time and moves its credit to available when the clock passes T+72 h', async () => {
    const merchant = await sandboxMerchant();
    // Two days ahead of real time: the order's slip capability is issued in the clock's time, which real
    // time would call not yet valid, so the upload is judged at the order's clock time (the CLI test
    // covers a clock behind real time).
    const frozen = fromNow(2 * DAY_MS);
    const clock = await attachedClock(merchant, frozen);
    const deposit = await createDeposit(app, { amount_minor: 20_000, credentials: merchant });
    const transfer = await sandboxTransfer(app, deposit, {}, merchant);
    expect(transfer.occurred_at).toBe(iso(frozen));
    // The end user's upload carries no merchant key: the order's clock is found from the order itself.
    const upload = await uploadMultipart(app, deposit.slip_upload, slipBytes(transfer));
    expect(upload.statusCode, upload.body).toBe(202);
    expect(upload.json().received_at).toBe(iso(frozen));
    await runJobs(app);
    expect((await getDeposit(app, deposit.id, merchant)).status).toBe('awaiting_payment');

    await advanceTo(merchant, clock.id, new Date(frozen.getTime() + MINUTE_MS));
    const settled = await getDeposit(app, deposit.id, merchant);
    expect(settled).toMatchObject({ status: 'settled', settled_at: iso(frozen), clearing_available_at: iso(frozen.getTime() + 72 * HOUR_MS) });
    const credited = settled.credited_amount_minor as number;
    expect(credited).toBeGreaterThan(0);
    expect(await balanceOf(merchant)).toMatchObject({ available_minor: 0, pending_clearing_minor: credited, as_of: iso(frozen.getTime() + MINUTE_MS) });

    await advanceTo(merchant, clock.id, new Date(frozen.getTime() + 72 * HOUR_MS - SECOND_MS));
    expect(await balanceOf(merchant)).toMatchObject({ available_minor: 0, pending_clearing_minor: credited });

    await advanceTo(merchant, clock.id, new Date(frozen.getTime() + 72 * HOUR_MS + SECOND_MS));
    expect(await balanceOf(merchant)).toMatchObject({ available_minor: credited, pending_clearing_minor: 0 });
    const { rows } = await app.testDatabase.database.query<{ created_at: Date; test_clock_id: string | null }>(
      `SELECT created_at, test_clock_id FROM events WHERE merchant_id = $1 AND type = 'balance.cleared'`,
      [merchant.merchant_id],
    );
    expect(rows.map((row) => [iso(row.created_at), row.test_clock_id])).toEqual([[iso(frozen.getTime() + 72 * HOUR_MS), clock.id]]);
  });

  it('makes a webhook retry due by advancing the clock, not by real time; the real dispatcher delivers it', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(HOUR_MS);
    const clock = await attachedClock(merchant, frozen);
    let answered = 0;
    const receiver = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => (++answered === 1 ? answer(500) : answer(200)) });
    const endpoint = await h.createEndpoint({ merchant_id: merchant.merchant_id, url: receiver.url, event_types: ['deposit.created'] });
    try {
      const deposit = await createDeposit(app, { amount_minor: 15_000, credentials: merchant });
      const run = () => h.webhooks.dispatcher.runUntilIdle();
      expect(await run()).toBe(1);
      const deliveries = await h.backoffice('GET', `/v1/bo/webhooks/${endpoint.id}/deliveries`);
      const [delivery] = (deliveries.json() as { data: DeliveryView[] }).data;
      expect(delivery).toMatchObject({ status: 'pending', last_http_status: 500, last_attempt_at: iso(frozen), next_attempt_at: iso(frozen.getTime() + MINUTE_MS) });

      app.clock.advance(2 * HOUR_MS);
      expect(await run()).toBe(0);
      await advanceTo(merchant, clock.id, new Date(frozen.getTime() + 30 * SECOND_MS));
      expect(await run()).toBe(0);
      await advanceTo(merchant, clock.id, new Date(frozen.getTime() + 2 * MINUTE_MS));
      expect(await run()).toBe(1);

      const detail = await h.backoffice('GET', `/v1/bo/webhooks/${endpoint.id}/deliveries/${delivery!.id}`);
      expect(detail.json()).toMatchObject({
        status: 'succeeded',
        attempts: [
          { attempt: 1, http_status: 500, started_at: iso(frozen), next_attempt_at: iso(frozen.getTime() + MINUTE_MS) },
          { attempt: 2, http_status: 200, started_at: iso(frozen.getTime() + MINUTE_MS), next_attempt_at: null },
        ],
      });
      expect(receiver.requests.map((request) => [request.headers['x-pg-event-id'], request.headers['x-pg-attempt']])).toEqual([
        [delivery!.event_id, '1'],
        [delivery!.event_id, '2'],
      ]);
      expect(JSON.parse(receiver.requests[1]!.body.toString('utf8'))).toMatchObject({ type: 'deposit.created', created_at: iso(frozen), data: { object: { id: deposit.id } } });
      // The signature's t is the real time, so that the receiver's 300-second check holds.
      expect(String(receiver.requests[1]!.headers['x-pg-signature'])).toContain(`t=${Math.floor(app.clock.now().getTime() / 1000)}`);
    } finally {
      await h.backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
      await receiver.close();
    }
  });

  it('a full replay of an event written on a clock delivers it on that clock, as its first delivery would have been', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(HOUR_MS);
    const clock = await attachedClock(merchant, frozen);
    // The event is written before the endpoint exists: only a full replay makes its delivery.
    const deposit = await createDeposit(app, { amount_minor: 15_000, credentials: merchant });
    const receiver = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => answer(200) });
    const endpoint = await h.createEndpoint({ merchant_id: merchant.merchant_id, url: receiver.url, event_types: ['deposit.created'] });
    try {
      const replay = await h.backoffice('POST', `/v1/bo/webhooks/${endpoint.id}/replay`, {
        only_failed: false,
        created_after: iso(app.clock.now().getTime() - HOUR_MS),
        created_before: iso(frozen.getTime() + MINUTE_MS),
      });
      expect(replay.statusCode, replay.body).toBe(202);
      expect(replay.json()).toMatchObject({ rearmed: 0, created: 1 });
      const { rows } = await app.testDatabase.database.query<{ test_clock_id: string | null; next_attempt_at: Date }>(
        `SELECT d.test_clock_id, d.next_attempt_at FROM webhook_deliveries d JOIN events e ON e.white_label_id = d.white_label_id AND e.event_id = d.event_id
          WHERE d.endpoint_id = $1 AND e.object_id = $2`,
        [endpoint.id, deposit.id],
      );
      expect(rows.map((row) => [row.test_clock_id, iso(row.next_attempt_at)])).toEqual([[clock.id, iso(frozen)]]);
      expect(await h.webhooks.dispatcher.runUntilIdle()).toBe(1);
      expect(receiver.requests.map((request) => request.headers['x-pg-resend'])).toEqual(['true']);
    } finally {
      await h.backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
      await receiver.close();
    }
  });

  it('keeps the objects of a detached clock on it, while the merchant’s new objects and other merchants run in real time', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(10 * DAY_MS);
    const clock = await attachedClock(merchant, frozen);
    const onClock = await createDeposit(app, { amount_minor: 15_000, credentials: merchant });
    expect((await post(merchant, `/v1/test/clocks/${clock.id}/detach`)).statusCode).toBe(200);
    const realTime = await createDeposit(app, { amount_minor: 20_000, credentials: merchant });
    expect(realTime.created_at).toBe(iso(app.clock.now()));
    const neighbour = await sandboxMerchant();
    const neighbours = await createDeposit(app, { amount_minor: 15_000, credentials: neighbour });
    expect(neighbours.created_at).toBe(iso(app.clock.now()));
    expect((await balanceOf(neighbour)).as_of).toBe(iso(app.clock.now()));
    expect((await jobsOfDeposit(neighbours.id)).every((job) => job.test_clock_id === null)).toBe(true);

    app.clock.advance(20 * MINUTE_MS);
    await runJobs(app);
    expect((await getDeposit(app, realTime.id, merchant)).status).toBe('expired');
    expect((await getDeposit(app, neighbours.id, neighbour)).status).toBe('expired');
    expect((await getDeposit(app, onClock.id, merchant)).status).toBe('awaiting_payment');
    expect((await eventRows(neighbours.id)).every((event) => event.test_clock_id === null)).toBe(true);

    // The merchant may still advance its detached clock, and the order made under it follows.
    await advanceTo(merchant, clock.id, new Date(frozen.getTime() + HOUR_MS));
    expect((await getDeposit(app, onClock.id, merchant)).status).toBe('expired');
  });

  it('never uses a clock for live requests of the same merchant', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(-30 * DAY_MS);
    await attachedClock(merchant, frozen);
    const live = await liveKeyOf(merchant);
    expect((await balanceOf(merchant)).as_of).toBe(iso(frozen));
    const liveBalance = await get(live, '/v1/pay/balance');
    expect(liveBalance.statusCode).toBe(200);
    expect(liveBalance.json()).toMatchObject({ livemode: true, as_of: iso(app.clock.now()) });
    const liveEvents = await get(live, '/v1/pay/events');
    expect(liveEvents.statusCode).toBe(200);
    expect(liveEvents.json().data).toEqual([]);
  });
});

describe('the back office', () => {
  it('shows a brand’s clocks to its staff and lets operators advance them; other brands get 404', async () => {
    const tenancy = app.instance.services.tenancy;
    const brand = app.sandbox.white_label_id;
    const operator = (await tenancy.createBackofficeCredential(SYSTEM, { white_label_id: brand, role: 'operator', name: 'Clock operator' })).token;
    const reviewer = (await tenancy.createBackofficeCredential(SYSTEM, { white_label_id: brand, role: 'reviewer', name: 'Clock reviewer' })).token;
    const elsewhere = await tenancy.createBrand(SYSTEM, { name: 'Clockless brand' });
    const foreignOperator = (await tenancy.createBackofficeCredential(SYSTEM, { white_label_id: elsewhere.id, role: 'operator', name: 'Foreign operator' })).token;
    const merchant = await sandboxMerchant();
    const frozen = fromNow(6 * HOUR_MS);
    const clock = await attachedClock(merchant, frozen);

    const listed = await h.backoffice('GET', `/v1/bo/test-clocks?merchant_id=${merchant.merchant_id}`, undefined, reviewer);
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json()).toMatchObject({ object: 'list', has_more: false, data: [{ id: clock.id, merchant_id: merchant.merchant_id, white_label_id: brand, attached: true }] });
    const asAdmin = await h.backoffice('GET', `/v1/bo/test-clocks/${clock.id}?white_label_id=${brand}`);
    expect(asAdmin.json<BackofficeTestClockView>()).toMatchObject({ id: clock.id, frozen_time: iso(frozen) });
    expect((await h.backoffice('GET', `/v1/bo/test-clocks/${clock.id}`, undefined, foreignOperator)).statusCode).toBe(404);
    expect((await h.backoffice('GET', `/v1/bo/test-clocks?merchant_id=${merchant.merchant_id}`, undefined, foreignOperator)).json().data).toEqual([]);

    const target = iso(frozen.getTime() + DAY_MS);
    const byReviewer = await h.backoffice('POST', `/v1/bo/test-clocks/${clock.id}/advance`, { frozen_time: target }, reviewer);
    expect(byReviewer.statusCode).toBe(403);
    expect(errorOf(byReviewer).code).toBe('scope_denied');
    expect((await h.backoffice('POST', `/v1/bo/test-clocks/${clock.id}/advance`, { frozen_time: target }, foreignOperator)).statusCode).toBe(404);
    const invalid = await h.backoffice('POST', `/v1/bo/test-clocks/${clock.id}/advance`, { frozen_time: iso(frozen) }, operator);
    expect(invalid.statusCode).toBe(422);
    expect(errorOf(invalid).details.fields).toContainEqual(expect.objectContaining({ path: 'frozen_time', reason: 'must_be_after_frozen_time' }));

    const started = await h.backoffice('POST', `/v1/bo/test-clocks/${clock.id}/advance`, { frozen_time: target }, operator);
    expect(started.statusCode).toBe(202);
    expect(started.json()).toMatchObject({ status: 'advancing', merchant_id: merchant.merchant_id });
    // The same request again (the back office keeps no idempotency records) answers the clock as it is.
    const repeated = await h.backoffice('POST', `/v1/bo/test-clocks/${clock.id}/advance`, { frozen_time: target }, operator);
    expect(repeated.statusCode).toBe(200);
    expect(repeated.headers['idempotent-replay']).toBe('true');
    await runJobs(app);
    const finished = await h.backoffice('POST', `/v1/bo/test-clocks/${clock.id}/advance`, { frozen_time: target }, operator);
    expect(finished.statusCode).toBe(200);
    expect(finished.json()).toMatchObject({ status: 'ready', frozen_time: target, last_advance: { outcome: 'completed' } });
    expect(await getClock(merchant, clock.id)).toMatchObject({ frozen_time: target, version: 4 });
    const { rows } = await app.testDatabase.database.query<{ actor_type: string }>(`SELECT actor_type FROM audit_log WHERE target_id = $1 AND action = 'test_clock.advance_requested'`, [clock.id]);
    expect(rows).toEqual([{ actor_type: 'backoffice_credential' }]);
  });
});

describe('an advance', () => {
  /**
   * A chain of test jobs, each enqueueing the next a minute later in its own clock's time, started by
   * a signed request of the sandbox (so under its clock); a second service instance on the same
   * database runs advances with small bounds (12 runs per advance, 5 per slice), so that the bound and
   * the slices show without 10,000 job runs.
   */
  interface ChainLink {
    link: number;
    links: number;
    fail_once_at: number | null;
    backdate_at: number | null;
  }
  const runs: { link: number; attempt: number; at: string }[] = [];
  const chainHandler: JobHandler = async (job, context) => {
    const payload = job.payload as unknown as ChainLink;
    runs.push({ link: payload.link, attempt: job.attempt, at: iso(context.clock.now()) });
    if (payload.link === payload.fail_once_at && job.attempt === 1) throw new Error('this link fails its first attempt');
    if (payload.link >= payload.links) return;
    // A link may schedule the next one an hour in the past: it then runs at once, at the clock's current time.
    const offset_ms = payload.link === payload.backdate_at ? -HOUR_MS : MINUTE_MS;
    await context.database.transaction((tx) =>
      enqueueJob(tx, context.clock, {
        task: 'test.clock_chain',
        payload: { ...payload, link: payload.link + 1 },
        run_at: new Date(context.clock.now().getTime() + offset_ms),
        white_label_id: job.white_label_id,
      }),
    );
  };
  const chainRoute: ExtraRouteModule = (services) => (registrar) =>
    registrar.merchant({
      method: 'POST',
      url: '/v1/test/clock-chains',
      scope: 'pay:write',
      body: z.object({ links: z.number().int().min(1).max(100), fail_once_at: z.number().int().optional(), backdate_at: z.number().int().optional() }).strict(),
      async handler({ context, db, body }) {
        const link: ChainLink = { link: 1, links: body.links, fail_once_at: body.fail_once_at ?? null, backdate_at: body.backdate_at ?? null };
        const job_id = await enqueueJob(db, services.clock, { task: 'test.clock_chain', payload: { ...link }, white_label_id: context.white_label_id });
        return { status: 201, body: { job_id } };
      },
    });

  let limited: ServiceInstance;
  beforeAll(async () => {
    limited = createServiceInstance({
      config: loadConfig({ LOG_LEVEL: 'silent' }),
      database: app.testDatabase.database,
      clock: app.clock,
      logger: createLogger('silent'),
      master_key: TEST_MASTER_KEY,
      extra_modules: [chainRoute],
      job_handlers: { 'test.clock_chain': chainHandler },
      owns_database: false,
      test_clock_limits: { max_job_runs_per_advance: 12, slice_max_job_runs: 5 },
    });
    await limited.app.ready();
  });
  afterAll(async () => {
    await limited.stop();
  });

  function signedOnLimited(credentials: MerchantCredentials, url: string, body: unknown): Promise<LightMyRequestResponse> {
    const payload = JSON.stringify(body);
    const headers = signedHeaders({
      api_key: credentials.api_key,
      signing_secret: credentials.signing_secret,
      method: 'POST',
      target: url,
      body: payload,
      idempotency_key: crypto.randomUUID(),
      timestamp_seconds: Math.floor(app.clock.now().getTime() / 1000),
    });
    return limited.app.inject({ method: 'POST', url, headers, payload });
  }

  it('runs due jobs one at a time in order, each at its own time, with retries; stops at its bound and says so; the next advance goes on', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(4 * HOUR_MS);
    const clock = await attachedClock(merchant, frozen);
    const started = await signedOnLimited(merchant, '/v1/test/clock-chains', { links: 20, fail_once_at: 3, backdate_at: 5 });
    expect(started.statusCode, started.body).toBe(201);
    // The real-time worker of either instance leaves the chain alone.
    await runJobs(app);
    await limited.worker.runDueJobs();
    expect(runs).toEqual([]);

    const target = new Date(frozen.getTime() + HOUR_MS);
    expect((await signedOnLimited(merchant, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(target) })).statusCode).toBe(202);
    await limited.worker.runDueJobs();
    const at = (offset_ms: number) => iso(frozen.getTime() + offset_ms);
    // Link 3 fails once and is retried a second later (the queue's backoff, in clock time); link 5
    // schedules link 6 an hour back, which runs at once, at the time reached, never earlier.
    expect(runs).toEqual([
      { link: 1, attempt: 1, at: at(0) },
      { link: 2, attempt: 1, at: at(MINUTE_MS) },
      { link: 3, attempt: 1, at: at(2 * MINUTE_MS) },
      { link: 3, attempt: 2, at: at(2 * MINUTE_MS + SECOND_MS) },
      { link: 4, attempt: 1, at: at(3 * MINUTE_MS + SECOND_MS) },
      { link: 5, attempt: 1, at: at(4 * MINUTE_MS + SECOND_MS) },
      { link: 6, attempt: 1, at: at(4 * MINUTE_MS + SECOND_MS) },
      { link: 7, attempt: 1, at: at(5 * MINUTE_MS + SECOND_MS) },
      { link: 8, attempt: 1, at: at(6 * MINUTE_MS + SECOND_MS) },
      { link: 9, attempt: 1, at: at(7 * MINUTE_MS + SECOND_MS) },
      { link: 10, attempt: 1, at: at(8 * MINUTE_MS + SECOND_MS) },
      { link: 11, attempt: 1, at: at(9 * MINUTE_MS + SECOND_MS) },
    ]);
    const stopped = await getClock(merchant, clock.id);
    expect(stopped).toMatchObject({
      status: 'ready',
      frozen_time: at(9 * MINUTE_MS + SECOND_MS),
      last_advance: { requested_frozen_time: iso(target), reached_frozen_time: at(9 * MINUTE_MS + SECOND_MS), job_runs: 12, outcome: 'job_limit_reached' },
    });
    const { rows: slices } = await app.testDatabase.database.query<{ slice: number }>(
      `SELECT (payload->>'slice')::int AS slice FROM jobs WHERE task = 'test_clocks.advance' AND payload->>'test_clock_id' = $1 ORDER BY created_at, job_id`,
      [clock.id],
    );
    expect(slices.map((row) => row.slice)).toEqual([1, 2, 3]);

    // The next advance to the same target runs the rest and completes.
    expect((await signedOnLimited(merchant, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(target) })).statusCode).toBe(202);
    await limited.worker.runDueJobs();
    expect(runs.slice(12).map((run) => run.link)).toEqual([12, 13, 14, 15, 16, 17, 18, 19, 20]);
    expect(runs.at(-1)).toEqual({ link: 20, attempt: 1, at: at(18 * MINUTE_MS + SECOND_MS) });
    expect(await getClock(merchant, clock.id)).toMatchObject({ status: 'ready', frozen_time: iso(target), last_advance: { job_runs: 9, outcome: 'completed' } });
  });

  it('waits for a job left running by a crashed advance, then takes it over in its turn', async () => {
    const merchant = await sandboxMerchant();
    const frozen = fromNow(8 * HOUR_MS);
    const clock = await attachedClock(merchant, frozen);
    runs.length = 0;
    const started = await signedOnLimited(merchant, '/v1/test/clock-chains', { links: 3 });
    expect(started.statusCode, started.body).toBe(201);
    // What a worker that died while running the first link leaves behind: the job running, its lease live.
    const crashed = await app.testDatabase.database.query(
      `UPDATE jobs SET status = 'running', attempts = 1, locked_by = 'a-crashed-worker', locked_until = $2::timestamptz + interval '15 seconds'
        WHERE job_id = $1 AND test_clock_id = $3 RETURNING job_id`,
      [started.json().job_id, app.clock.now(), clock.id],
    );
    expect(crashed.rows).toHaveLength(1);
    const target = new Date(frozen.getTime() + HOUR_MS);
    expect((await signedOnLimited(merchant, `/v1/test/clocks/${clock.id}/advance`, { frozen_time: iso(target) })).statusCode).toBe(202);
    await limited.worker.runDueJobs();
    expect(runs).toEqual([]);
    expect(await getClock(merchant, clock.id)).toMatchObject({ status: 'advancing' });

    app.clock.advance(16 * SECOND_MS);
    await limited.worker.runDueJobs();
    expect(runs).toEqual([
      { link: 1, attempt: 2, at: iso(frozen) },
      { link: 2, attempt: 1, at: iso(frozen.getTime() + MINUTE_MS) },
      { link: 3, attempt: 1, at: iso(frozen.getTime() + 2 * MINUTE_MS) },
    ]);
    expect(await getClock(merchant, clock.id)).toMatchObject({ status: 'ready', frozen_time: iso(target), last_advance: { job_runs: 3, outcome: 'completed' } });
  });
});
