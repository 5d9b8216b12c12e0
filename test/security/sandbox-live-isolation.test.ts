import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookTestApp, TEST_POLICY_WITH_LIVE_LOOPBACK, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';
import { answer, startScriptedReceiver, type ScriptedReceiver } from '../support/webhook-receivers.ts';
import { errorOf, type MerchantCredentials } from '../support/app.ts';
import { nextReference, runJobs, somchaiDepositBody } from '../support/slips.ts';
import { accountOf, fundAvailable, inTransaction } from '../support/withdrawals.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { DepositView } from '../../src/deposits/service.ts';

/**
 * Sandbox and live never cross (spec, What the service does §8): one merchant holding a sandbox key and a
 * live key, in a brand whose sandbox has the simulated counterparty and whose live side has a real
 * withdrawal, does the same things in both environments. Each key reaches only its environment's objects,
 * balance and events; matching never pairs a deposit with the other environment's withdrawal (and the
 * sandbox counterparty never serves live); webhooks of each environment go only to that environment's
 * endpoint, signed by that environment's key set; and nothing in the database links the two.
 */

let h: WebhookTestApp;
let sandbox: MerchantCredentials;
let live: MerchantCredentials;
let liveWithdrawer: MerchantCredentials;
let sandboxReceiver: ScriptedReceiver;
let liveReceiver: ScriptedReceiver;
const orders: { sandbox: DepositView[]; live: DepositView[] } = { sandbox: [], live: [] };
let liveWithdrawalId: string;

const actor = { actor_type: 'system' as const, actor_id: 'isolation-test', request_id: null };

beforeAll(async () => {
  h = await createWebhookTestApp({ policy: TEST_POLICY_WITH_LIVE_LOOPBACK });
  const app = h.app;
  sandbox = app.sandbox;
  // The same merchant's live key.
  const liveKey = await app.instance.services.tenancy.createApiKey(actor, { merchant_id: sandbox.merchant_id, scope_white_label_id: sandbox.white_label_id, livemode: true });
  live = { ...sandbox, api_key: liveKey.api_key, signing_secret: liveKey.signing_secret };
  expect(sandbox.api_key.startsWith('sk_test_') && live.api_key.startsWith('sk_live_')).toBe(true);

  // A live withdrawal of another merchant of the brand: the only live liquidity there is. A live
  // beneficiary cannot be verified here (no live bank directory), so the order is made through the
  // service, as the route would after its verification check.
  liveWithdrawer = await app.createMerchant({ white_label_id: sandbox.white_label_id, livemode: true });
  const withdrawerAccount = accountOf(liveWithdrawer, true);
  await fundAvailable(app, withdrawerAccount, 1_000_000);
  const created = await inTransaction(app, async (tx) => {
    const { beneficiary } = await app.instance.services.beneficiaries.create(tx, withdrawerAccount, { bank_code: '014', account_number: '1472583690', account_name_th: 'พิชัย สุวรรณรัตน์' }, SYSTEM_CAUSE);
    return app.instance.services.withdrawals.create(tx, withdrawerAccount, { amount_minor: 10_000, merchant_reference: nextReference('live-liquidity'), end_user_ref: 'live-payee', beneficiary_id: beneficiary.id }, SYSTEM_CAUSE);
  });
  if (!created.ok) throw new Error(created.error.code);
  liveWithdrawalId = created.value.id;

  sandboxReceiver = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => answer(200) });
  liveReceiver = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => answer(200) });
  await h.createEndpoint({ merchant_id: sandbox.merchant_id, mode: 'test', url: sandboxReceiver.url });
  await h.createEndpoint({ merchant_id: sandbox.merchant_id, mode: 'live', url: liveReceiver.url });

  // The same requests in both environments: 100.00 THB (a sandbox scenario: paid and settled by the
  // sandbox; in live an ordinary order that takes the live withdrawal), and 300.00 THB (matched by the
  // sandbox counterparty; nothing in live can take it, so it waits).
  for (const [environment, credentials] of [['sandbox', sandbox], ['live', live]] as const) {
    for (const amount_minor of [10_000, 30_000]) {
      const response = await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials, body: depositBody(amount_minor) });
      expect([201, 202], response.body).toContain(response.statusCode);
      orders[environment].push(response.json<DepositView>());
    }
  }
  // Time passes: the sandbox scenario pays and settles its order; live waits for liquidity.
  for (let second = 0; second < 15; second += 1) {
    app.clock.advance(1_000);
    await runJobs(app);
  }
  await h.webhooks.dispatcher.runUntilIdle();
});

afterAll(async () => {
  await sandboxReceiver?.close();
  await liveReceiver?.close();
  await h?.close();
});

function depositBody(amount_minor: number): Record<string, unknown> {
  return somchaiDepositBody(amount_minor, { prefix: 'cross', account_prefix: '77', ip: '203.0.113.9' });
}

describe('sandbox and live never cross', () => {
  it('objects: each carries its environment, and each key reaches only its own', async () => {
    expect(orders.sandbox.map((order) => [order.livemode, order.status])).toEqual([
      [false, 'awaiting_payment'],
      [false, 'awaiting_payment'],
    ]);
    expect(orders.live.map((order) => [order.livemode, order.status])).toEqual([
      [true, 'awaiting_payment'],
      [true, 'awaiting_liquidity'],
    ]);
    for (const [own, other, credentials] of [['sandbox', 'live', sandbox], ['live', 'sandbox', live]] as const) {
      for (const order of orders[own]) expect((await h.app.signed({ url: `/v1/pay/deposits/${order.id}`, credentials })).statusCode).toBe(200);
      for (const order of orders[other]) {
        const read = await h.app.signed({ url: `/v1/pay/deposits/${order.id}`, credentials });
        expect(read.statusCode).toBe(404);
        expect(errorOf(read).code).toBe('resource_not_found');
        const cancel = await h.app.signed({ method: 'POST', url: `/v1/pay/deposits/${order.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials });
        expect(cancel.statusCode).toBe(404);
        const token = await h.app.signed({ method: 'POST', url: `/v1/pay/deposits/${order.id}/slip-token`, idempotency_key: crypto.randomUUID(), credentials });
        expect(token.statusCode).toBe(404);
      }
      const listed = (await h.app.signed({ url: '/v1/pay/deposits?limit=100', credentials })).json<{ data: DepositView[] }>().data;
      expect(listed.map((order) => order.id).sort()).toEqual(orders[own].map((order) => order.id).sort());
    }
    // The live withdrawal is not the sandbox key's to read or act on.
    expect((await h.app.signed({ url: `/v1/pay/withdrawals/${liveWithdrawalId}`, credentials: { ...liveWithdrawer, api_key: sandbox.api_key, signing_secret: sandbox.signing_secret } })).statusCode).toBe(404);
  });

  it('the sandbox bank and the sandbox scenarios never touch a live order', async () => {
    const liveOrder = orders.live[0]!;
    const transfer = await h.app.signed({ method: 'POST', url: '/v1/test/bank/transfers', idempotency_key: crypto.randomUUID(), credentials: sandbox, body: { deposit_id: liveOrder.id } });
    expect(transfer.statusCode).toBe(404);
    // A live key cannot reach the sandbox bank at all.
    const liveTransfer = await h.app.signed({ method: 'POST', url: '/v1/test/bank/transfers', idempotency_key: crypto.randomUUID(), credentials: live, body: { deposit_id: liveOrder.id } });
    expect(liveTransfer.statusCode).toBeGreaterThanOrEqual(400);
    expect((await h.app.signed({ url: `/v1/pay/deposits/${liveOrder.id}`, credentials: live })).json<DepositView>().status).toBe('awaiting_payment');
    const { rows } = await h.app.testDatabase.database.query(`SELECT 1 FROM jobs WHERE task = 'sandbox.scenario_step' AND payload->>'order_id' = ANY($1::text[])`, [orders.live.map((order) => order.id)]);
    expect(rows).toHaveLength(0);
    // The sandbox's 100.00 THB order was paid and settled by its scenario meanwhile.
    expect((await h.app.signed({ url: `/v1/pay/deposits/${orders.sandbox[0]!.id}`, credentials: sandbox })).json<DepositView>().status).toBe('settled');
  });

  it('matching: a deposit only ever reserves a withdrawal of its own environment; the sandbox counterparty never serves live', async () => {
    const { rows } = await h.app.testDatabase.database.query<{ deposit_id: string; deposit_livemode: boolean; withdrawal_id: string; withdrawal_livemode: boolean }>(
      `SELECT d.deposit_id, d.livemode AS deposit_livemode, w.withdrawal_id, w.livemode AS withdrawal_livemode
         FROM deposit_legs l
         JOIN deposit_orders d ON d.white_label_id = l.white_label_id AND d.deposit_id = l.deposit_id
         JOIN withdrawal_orders w ON w.white_label_id = l.white_label_id AND w.withdrawal_id = l.withdrawal_id`,
    );
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.filter((row) => row.deposit_livemode !== row.withdrawal_livemode)).toEqual([]);
    // The live 100.00 THB order took the live withdrawal, the only live liquidity.
    expect(rows.filter((row) => row.deposit_id === orders.live[0]!.id).map((row) => row.withdrawal_id)).toEqual([liveWithdrawalId]);
    // The live 300.00 THB order waits with no legs, though the sandbox counterparty could have covered it.
    const waiting = (await h.app.signed({ url: `/v1/pay/deposits/${orders.live[1]!.id}`, credentials: live })).json<DepositView>();
    expect(waiting).toMatchObject({ status: 'awaiting_liquidity', legs: [] });
    // The system counterparty has no live order and no live money.
    const { rows: counterpartyLive } = await h.app.testDatabase.database.query(
      `SELECT 1 FROM withdrawal_orders w JOIN sandbox_counterparties c ON c.white_label_id = w.white_label_id AND c.merchant_id = w.merchant_id WHERE w.livemode
        UNION ALL SELECT 1 FROM balance_transactions b JOIN sandbox_counterparties c ON c.white_label_id = b.white_label_id AND c.merchant_id = b.merchant_id WHERE b.livemode`,
    );
    expect(counterpartyLive).toHaveLength(0);
  });

  it('balances: the sandbox money of a settled sandbox order is not in the live wallet', async () => {
    const sandboxBalance = (await h.app.signed({ url: '/v1/pay/balance', credentials: sandbox })).json<{ pending_clearing_minor: number; available_minor: number; reserved_minor: number }>();
    const liveBalance = (await h.app.signed({ url: '/v1/pay/balance', credentials: live })).json<{ pending_clearing_minor: number; available_minor: number; reserved_minor: number }>();
    expect(sandboxBalance.pending_clearing_minor).toBeGreaterThan(0);
    expect(liveBalance).toMatchObject({ pending_clearing_minor: 0, available_minor: 0, reserved_minor: 0 });
  });

  it('events: each key’s feed holds only its environment’s events, and every event matches its object’s environment', async () => {
    for (const [credentials, livemode] of [[sandbox, false], [live, true]] as const) {
      const response = await h.app.signed({ url: '/v1/pay/events?since_sequence=0&limit=100', credentials });
      expect(response.statusCode, response.body).toBe(200);
      const events = response.json<{ data: { livemode: boolean; data: { object: { id: string; livemode?: boolean } } }[] }>().data;
      expect(events.length).toBeGreaterThan(0);
      expect(events.every((event) => event.livemode === livemode && (event.data.object.livemode ?? livemode) === livemode)).toBe(true);
    }
    const { rows } = await h.app.testDatabase.database.query(
      `SELECT event_id FROM events WHERE (envelope->>'livemode')::boolean IS DISTINCT FROM livemode
          OR (envelope::jsonb->'data'->'object' ? 'livemode' AND (envelope->'data'->'object'->>'livemode')::boolean IS DISTINCT FROM livemode)`,
    );
    expect(rows).toEqual([]);
  });

  it('webhooks: each environment’s events reach only its endpoint, signed by its own key set', async () => {
    expect(sandboxReceiver.requests.length).toBeGreaterThan(0);
    expect(liveReceiver.requests.length).toBeGreaterThan(0);
    const { rows: keys } = await h.app.testDatabase.database.query<{ kid: string; livemode: boolean }>('SELECT kid, livemode FROM webhook_signing_keys');
    const environmentOfKid = new Map(keys.map((key) => [key.kid, key.livemode]));
    for (const [receiver, livemode] of [[sandboxReceiver, false], [liveReceiver, true]] as const) {
      for (const request of receiver.requests) {
        const body = JSON.parse(request.body.toString('utf8')) as { livemode: boolean; data: { object: { livemode?: boolean } } };
        expect(body.livemode).toBe(livemode);
        expect(request.headers['x-pg-livemode']).toBe(String(livemode));
        const kid = /kid=([^,]+)/.exec(String(request.headers['x-pg-signature']))?.[1];
        expect(environmentOfKid.get(kid ?? '')).toBe(livemode);
      }
    }
    const sandboxEvents = new Set(sandboxReceiver.requests.map((request) => request.headers['x-pg-event-id']));
    expect(liveReceiver.requests.some((request) => sandboxEvents.has(request.headers['x-pg-event-id']))).toBe(false);
  });
});
