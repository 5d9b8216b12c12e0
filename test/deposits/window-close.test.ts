import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOUR_MS, MINUTE_MS } from '../../src/platform/time.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { createDeposit, getDeposit, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { createWebhookTestApp, TEST_POLICY_WITH_LIVE_LOOPBACK, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';
import { answer, startScriptedReceiver, type ScriptedReceiver } from '../support/webhook-receivers.ts';

/**
 * The end of the late-slip window as a change of the order (issue 31): `is_terminal` turns true only when the
 * close job runs at `late_slip_accepted_until`, with a new `version`, `previous_attributes` `{is_terminal: false}`
 * and the event `deposit.closed`, delivered to a webhook endpoint that takes every event type. Driven by the job
 * worker on the test clock, and delivered over HTTPS by the real dispatcher.
 */

let h: WebhookTestApp;
const receivers: ScriptedReceiver[] = [];

beforeAll(async () => {
  h = await createWebhookTestApp({ policy: TEST_POLICY_WITH_LIVE_LOOPBACK, settings: { timeout_ms: 5_000 } });
});
afterAll(async () => {
  for (const receiver of receivers) await receiver.close();
  await h.close();
});

interface Delivered {
  type: string;
  data: { object: DepositView; previous_attributes: Record<string, unknown> | null };
}

async function merchantWithReceivers(): Promise<{ account: MerchantCredentials; everything: ScriptedReceiver; expiredOnly: ScriptedReceiver }> {
  const account = await h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id });
  const everything = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => answer(200) });
  const expiredOnly = await startScriptedReceiver({ tls: h.certs.leaf, behaviour: () => answer(200) });
  receivers.push(everything, expiredOnly);
  await h.createEndpoint({ merchant_id: account.merchant_id, url: everything.url });
  await h.createEndpoint({ merchant_id: account.merchant_id, url: expiredOnly.url, event_types: ['deposit.expired'] });
  return { account, everything, expiredOnly };
}

/** The events of one order a receiver got, by version: deliveries carry no order, the version does. */
function delivered(receiver: ScriptedReceiver, deposit_id: string): Delivered[] {
  return receiver.requests
    .map((request) => JSON.parse(request.body.toString('utf8')) as Delivered)
    .filter((event) => event.data.object.id === deposit_id)
    .sort((left, right) => left.data.object.version - right.data.object.version);
}

async function runWorker(): Promise<void> {
  await h.app.instance.worker.runDueJobs();
}

describe('the close of the late-slip window', () => {
  it('turns is_terminal true on an expired order with a new version and deposit.closed, delivered to an endpoint taking every event', async () => {
    const { account, everything, expiredOnly } = await merchantWithReceivers();
    const order = await createDeposit(h.app, { amount_minor: 12_000, credentials: account });
    h.app.clock.advance(15 * MINUTE_MS);
    await runWorker();
    const expired = await getDeposit(h.app, order.id, account);
    expect(expired).toMatchObject({ status: 'expired', is_terminal: false });

    // One minute before the window's end nothing is due; at its end the order still reads as before until the job runs.
    h.app.clock.advance(24 * HOUR_MS - MINUTE_MS);
    await runWorker();
    expect(await getDeposit(h.app, order.id, account)).toMatchObject({ is_terminal: false, version: expired.version });
    h.app.clock.advance(MINUTE_MS);
    expect(await getDeposit(h.app, order.id, account)).toMatchObject({ is_terminal: false, version: expired.version });
    await runWorker();
    const final = await getDeposit(h.app, order.id, account);
    expect(final).toMatchObject({ status: 'expired', is_terminal: true, version: expired.version + 1, late_slip_accepted_until: expired.late_slip_accepted_until });

    await h.webhooks.dispatcher.runUntilIdle();
    const events = delivered(everything, order.id);
    expect(events.map((event) => event.type)).toEqual(['deposit.created', 'deposit.expired', 'deposit.closed']);
    expect(events[2]?.data.object).toMatchObject({ id: order.id, status: 'expired', is_terminal: true, version: final.version });
    expect(events[2]?.data.previous_attributes).toEqual({ is_terminal: false, version: expired.version });
    // An endpoint that chose its event types gets only those.
    expect(delivered(expiredOnly, order.id).map((event) => event.type)).toEqual(['deposit.expired']);
  });

  it('closes a canceled order the same way, and leaves an expired order that took a late slip to its slip', async () => {
    const { account, everything } = await merchantWithReceivers();
    const canceledOrder = await createDeposit(h.app, { amount_minor: 12_000, credentials: account });
    const canceled = await h.app.signed({ method: 'POST', url: `/v1/pay/deposits/${canceledOrder.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: account });
    expect(canceled.json<DepositView>()).toMatchObject({ status: 'canceled', is_terminal: false });

    const latePaid = await createDeposit(h.app, { amount_minor: 12_000, credentials: account });
    const transfer = await sandboxTransfer(h.app, latePaid, {}, account);
    h.app.clock.advance(15 * MINUTE_MS);
    await runWorker();
    expect((await getDeposit(h.app, latePaid.id, account)).status).toBe('expired');
    expect((await uploadMultipart(h.app, latePaid.slip_upload, slipBytes(transfer))).statusCode).toBe(202);
    await runWorker();
    const processed = await getDeposit(h.app, latePaid.id, account);
    expect(processed.status).not.toBe('expired');

    h.app.clock.advance(24 * HOUR_MS);
    await runWorker();
    const closed = await getDeposit(h.app, canceledOrder.id, account);
    expect(closed).toMatchObject({ status: 'canceled', is_terminal: true, version: canceled.json<DepositView>().version + 1 });
    // The late slip decided that order: the close job found it in another status and changed nothing.
    expect(await getDeposit(h.app, latePaid.id, account)).toMatchObject({ status: processed.status, version: processed.version });

    await h.webhooks.dispatcher.runUntilIdle();
    expect(delivered(everything, canceledOrder.id).map((event) => event.type)).toEqual(['deposit.created', 'deposit.canceled', 'deposit.closed']);
    expect(delivered(everything, latePaid.id).map((event) => event.type)).not.toContain('deposit.closed');
  });
});
