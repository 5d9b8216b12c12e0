import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { usingPostgres } from '../support/database.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { accountOf, fundAvailable } from '../support/withdrawals.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * Refunds under concurrency, on PostgreSQL, where row locks are real: a merchant's refunds of its deposits are
 * created, canceled and filled all at once: the sandbox counterparty's chunk deposits fill them (a test-mode refund is
 * the sandbox's to fill, docs/decisions/sandbox.md), run by the worker while the merchant's requests and another
 * merchant's depositors' payments go on, and afterwards every deposit's allowance
 * says exactly what its refunds claim (each live refund's amount, what each closed one paid), never more than the
 * deposit brought, with no deadlock (40P01) and no 5xx on the way.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

const ROUNDS = 4;
const DEPOSITS = 4;

async function settledDeposits(owner: MerchantCredentials, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const order = await createDeposit(app, { amount_minor: 100_000, credentials: owner });
    const response = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, owner)));
    expect(response.statusCode, response.body).toBe(202);
    ids.push(order.id);
  }
  await runJobs(app);
  for (const id of ids) expect((await getDeposit(app, id, owner)).status).toBe('settled');
  return ids;
}

/**
 * Another merchant's end user pays into the brand's withdrawals (the sandbox counterparty's standing ones: a test-mode
 * refund is out of the matching queue), taking the feeds and wallets a refund's fill takes too.
 */
async function depositorPays(payer: MerchantCredentials, amount_minor: number): Promise<number> {
  const order = await createDeposit(app, { amount_minor, credentials: payer });
  const response = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, payer)));
  return response.statusCode;
}

async function deadlocks(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ deadlocks: number }>('SELECT deadlocks::int AS deadlocks FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0]?.deadlocks ?? 0);
}

/** Each deposit's allowance beside what its refunds claim, read from the orders themselves. */
async function claimsOf(deposit_ids: readonly string[]) {
  const { rows } = await app.testDatabase.database.query<{ deposit_id: string; committed_minor: number; cap: number; claimed: number }>(
    `SELECT a.deposit_id, a.committed_minor, a.refundable_cap_minor AS cap,
            (SELECT coalesce(sum(CASE WHEN w.status IN ('pending_approval', 'open', 'partially_filled') THEN w.amount_total_minor ELSE w.filled_minor END), 0)::bigint
               FROM withdrawal_orders w WHERE w.white_label_id = a.white_label_id AND w.refund_of_deposit_id = a.deposit_id) AS claimed
       FROM withdrawal_refund_allowances a WHERE a.deposit_id = ANY($1::text[])`,
    [deposit_ids],
  );
  return rows;
}

describe('refunds under concurrency', () => {
  it.skipIf(!usingPostgres)('creations, cancels and fills of refunds at once: no deadlock, no 5xx, every allowance equals its refunds’ claim', async () => {
    const owner = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const payer = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const deposit_ids = await settledDeposits(owner, DEPOSITS);
    app.clock.advance(72 * HOUR_MS + 1);
    await runJobs(app);
    await fundAvailable(app, accountOf(owner), 1_000_000);
    const deadlocksBefore = await deadlocks();
    const failures: string[] = [];
    const refunds: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const work: Promise<void>[] = [];
      // The sandbox's next chunks fall due (5 s after a refund opens, or after its previous fill): the worker makes,
      // pays and settles them while this round's creations, cancels and payments run.
      app.clock.advance(6_000);
      work.push(runJobs(app).then(() => undefined));
      for (const deposit_id of deposit_ids) {
        work.push(
          app
            .signed({ method: 'POST', url: `/v1/pay/deposits/${deposit_id}/refunds`, idempotency_key: crypto.randomUUID(), credentials: owner, body: { amount_minor: 30_000, reason_code: 'customer_request' } })
            .then((response) => {
              if (response.statusCode >= 500) failures.push(`create: ${response.statusCode} ${response.body}`);
              if (response.statusCode === 201) refunds.push(response.json<WithdrawalView>().id);
            }),
        );
      }
      for (const id of refunds.filter((_, index) => index % 3 === round % 3)) {
        work.push(
          app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: owner }).then((response) => {
            if (response.statusCode >= 500) failures.push(`cancel: ${response.statusCode} ${response.body}`);
          }),
        );
      }
      work.push(depositorPays(payer, 10_000).then((status) => void (status >= 500 && failures.push(`pay: ${status}`))));
      work.push(depositorPays(payer, 20_000).then((status) => void (status >= 500 && failures.push(`pay: ${status}`))));
      await Promise.all(work);
      await runJobs(app);
    }
    expect(failures).toEqual([]);
    expect(await deadlocks()).toBe(deadlocksBefore);
    // The run did what it says: refunds were opened, some canceled, some paid by the sandbox's chunk deposits.
    const { rows: shape } = await app.testDatabase.database.query<{ refunds: number; canceled: number; paid: number }>(
      `SELECT count(*)::int AS refunds, count(*) FILTER (WHERE status = 'canceled')::int AS canceled, count(*) FILTER (WHERE filled_minor > 0)::int AS paid
         FROM withdrawal_orders WHERE refund_of_deposit_id = ANY($1::text[])`,
      [deposit_ids],
    );
    expect(shape[0]!.refunds).toBe(refunds.length);
    expect(shape[0]!.canceled).toBeGreaterThan(0);
    expect(shape[0]!.paid).toBeGreaterThan(0);
    const claims = await claimsOf(deposit_ids);
    expect(claims.length).toBe(DEPOSITS);
    for (const row of claims) {
      expect(row.committed_minor, row.deposit_id).toBe(row.claimed);
      expect(row.committed_minor).toBeLessThanOrEqual(row.cap);
    }
  });
});
