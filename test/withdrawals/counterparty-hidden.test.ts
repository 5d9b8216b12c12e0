import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit } from '../support/slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * Issue 28, item 6: the sandbox counterparty (the merchant the service runs itself, `system_owned`) is not
 * addressable from the back office, and neither are its withdrawals. Every back-office withdrawal route,
 * reads and actions, answers 404 `resource_not_found` for its orders, exactly as for an unknown id, before
 * any state is looked at, and changes nothing. An ordinary merchant's order of the same brand stays
 * reachable, so that the test shows the counterparty is hidden, not the routes broken.
 */

const NOTE = 'Checked against the payee list: the order is not ours to decide.';
const actor = { actor_type: 'system' as const, actor_id: 'counterparty-hidden-test', request_id: null };

let app: TestApp;
let merchant: MerchantCredentials;
let operator: string;
let reviewer: string;
/** The counterparty's standing withdrawal, opened by a deposit of the brand and left with nothing reserved. */
let counterpartyOrderId: string;

interface OrderSnapshot {
  status: string;
  version: number;
  reserved_minor: number;
  remaining_minor: number;
  review_note: string | null;
  updated_at: Date;
}

async function counterpartyOrders(white_label_id: string): Promise<string[]> {
  const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string }>(
    `SELECT w.withdrawal_id FROM sandbox_counterparties c
       JOIN withdrawal_orders w ON w.white_label_id = c.white_label_id AND w.merchant_id = c.merchant_id
      WHERE c.white_label_id = $1 ORDER BY w.created_at, w.withdrawal_id`,
    [white_label_id],
  );
  return rows.map((row) => row.withdrawal_id);
}

/** The order, the brand's audit rows and its events, to prove a refused request changed none of them. */
async function snapshot(withdrawal_id: string): Promise<{ order: OrderSnapshot; audits: number; events: number }> {
  const database = app.testDatabase.database;
  const order = await database.query<OrderSnapshot>(
    'SELECT status, version, reserved_minor, remaining_minor, review_note, updated_at FROM withdrawal_orders WHERE withdrawal_id = $1',
    [withdrawal_id],
  );
  const audits = await database.query<{ count: number }>('SELECT count(*)::int AS count FROM audit_log WHERE white_label_id = $1', [merchant.white_label_id]);
  const events = await database.query<{ count: number }>('SELECT count(*)::int AS count FROM events WHERE white_label_id = $1', [merchant.white_label_id]);
  return { order: order.rows[0]!, audits: audits.rows[0]!.count, events: events.rows[0]!.count };
}

function backOfficeRequests(withdrawal_id: string) {
  return [
    { method: 'GET' as const, url: `/v1/bo/withdrawals/${withdrawal_id}` },
    { method: 'POST' as const, url: `/v1/bo/withdrawals/${withdrawal_id}/approve`, body: {} },
    { method: 'POST' as const, url: `/v1/bo/withdrawals/${withdrawal_id}/approve`, body: { note: NOTE } },
    { method: 'POST' as const, url: `/v1/bo/withdrawals/${withdrawal_id}/reject`, body: { note: NOTE } },
  ];
}

/** Every back-office withdrawal route, with both roles that may use it, answers 404 and changes nothing. */
async function expectHidden(withdrawal_id: string): Promise<void> {
  const before = await snapshot(withdrawal_id);
  for (const token of [operator, reviewer]) {
    for (const request of backOfficeRequests(withdrawal_id)) {
      const response = await app.backoffice({ ...request, token });
      expect(response.statusCode, `${request.method} ${request.url}: ${response.body}`).toBe(404);
      expect(errorOf(response).code).toBe('resource_not_found');
      // The same answer as an id that does not exist at all: nothing tells the two apart.
      const unknown = await app.backoffice({ ...request, url: request.url.replace(withdrawal_id, 'wd_01K0UNKNOWN0000000000000000'), token });
      expect(unknown.statusCode).toBe(404);
      expect(errorOf(response)).toEqual({ ...errorOf(unknown), request_id: errorOf(response).request_id });
    }
  }
  expect(await snapshot(withdrawal_id)).toEqual(before);
}

beforeAll(async () => {
  app = await createTestApp();
  // A brand of its own, so that its counterparty and approval queue are this file's alone.
  merchant = await app.createMerchant();
  const tenancy = app.instance.services.tenancy;
  operator = (await tenancy.createBackofficeCredential(actor, { white_label_id: merchant.white_label_id, role: 'operator', name: 'op' })).token;
  reviewer = (await tenancy.createBackofficeCredential(actor, { white_label_id: merchant.white_label_id, role: 'reviewer', name: 'rev' })).token;
  // The brand's first test-mode deposit finds no withdrawal, so the counterparty opens a standing one;
  // canceling the deposit releases its leg, leaving the standing order open with nothing reserved.
  const deposit = await createDeposit(app, { amount_minor: 20_000, credentials: merchant });
  const canceled = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${deposit.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: merchant });
  expect(canceled.statusCode, canceled.body).toBe(200);
  const orders = await counterpartyOrders(merchant.white_label_id);
  expect(orders).toHaveLength(1);
  counterpartyOrderId = orders[0]!;
  expect((await snapshot(counterpartyOrderId)).order).toMatchObject({ status: 'open', reserved_minor: 0 });
});

afterAll(async () => {
  await app.close();
});

describe("the sandbox counterparty's withdrawals in the back office", () => {
  it('GET, approve and reject of its open order answer 404 resource_not_found, never its state, and change nothing', async () => {
    await expectHidden(counterpartyOrderId);
  });

  it('an order of it waiting for approval is neither listed nor approved nor rejected', async () => {
    // The sandbox never asks approval for its own orders; this one is put in the queue by hand, so that a
    // route that reached the order would visibly act on it (approve reopens it, reject closes it).
    await app.testDatabase.database.query(
      `UPDATE withdrawal_orders SET status = 'pending_approval', approval_expires_at = $2 WHERE withdrawal_id = $1`,
      [counterpartyOrderId, new Date(app.clock.now().getTime() + 3_600_000)],
    );
    await expectHidden(counterpartyOrderId);
    for (const token of [operator, reviewer]) {
      const queue = await app.backoffice({ url: '/v1/bo/withdrawal-approvals?mode=test', token });
      expect(queue.statusCode, queue.body).toBe(200);
      expect(queue.json<{ data: WithdrawalView[] }>().data.map((order) => order.id)).not.toContain(counterpartyOrderId);
    }
  });

  it("an ordinary merchant's order of the same brand is still read, listed and rejected", async () => {
    const policy = { mode: 'test', approval_threshold_minor: 50_000, approval_ttl_seconds: 3600, expires_in_seconds: 7200, max_splits: 5, min_amount_minor: 100, max_amount_minor: 10_000_000 };
    expect((await app.backoffice({ method: 'POST', url: '/v1/bo/withdrawal-policy', body: policy, token: operator })).statusCode).toBe(200);
    const account = accountOf(merchant);
    await fundAvailable(app, account, 1_000_000);
    const beneficiary_id = await verifiedBeneficiary(app, account);
    const created = await app.signed({
      method: 'POST',
      url: '/v1/pay/withdrawals',
      idempotency_key: crypto.randomUUID(),
      credentials: merchant,
      body: { amount_minor: 60_000, currency: 'THB', merchant_reference: `hidden-control-${crypto.randomUUID()}`, end_user_ref: 'user-1', beneficiary_id },
    });
    expect(created.statusCode, created.body).toBe(201);
    const order = created.json<WithdrawalView>();
    expect(order.status).toBe('pending_approval');
    const queue = await app.backoffice({ url: '/v1/bo/withdrawal-approvals?mode=test', token: reviewer });
    expect(queue.json<{ data: WithdrawalView[] }>().data.map((item) => item.id)).toEqual([order.id]);
    expect((await app.backoffice({ url: `/v1/bo/withdrawals/${order.id}`, token: reviewer })).statusCode).toBe(200);
    const rejected = await app.backoffice({ method: 'POST', url: `/v1/bo/withdrawals/${order.id}/reject`, body: { note: NOTE }, token: operator });
    expect(rejected.statusCode, rejected.body).toBe(200);
    expect(rejected.json<WithdrawalView>().status).toBe('rejected');
  });
});
