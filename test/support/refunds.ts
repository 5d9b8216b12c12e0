import { expect } from 'vitest';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import type { MerchantCredentials, TestApp } from './app.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from './slips.ts';
import { accountOf, fundAvailable } from './withdrawals.ts';

/**
 * Helpers for refund tests (issue 32), each through the door a merchant uses: a sandbox deposit that settles from its
 * declared sender (the proven payer a refund pays), its credit cleared on the test clock, and the merchant's reads of
 * its balance, its refunds and its withdrawals over signed HTTP.
 */

export interface RefundBalance {
  available_minor: number;
  pending_clearing_minor: number;
  reserved_minor: number;
}

/**
 * What a merchant holds beside a deposit's credit when its tests refund: a deposit's credit is what it brought less its
 * fee, and a refund of all of it, with the withdrawal fee on top, needs more than that credit.
 */
export const OTHER_MONEY_MINOR = 20_000;

export async function balanceOf(app: TestApp, credentials: MerchantCredentials): Promise<RefundBalance> {
  const response = await app.signed({ url: '/v1/pay/balance', credentials });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<RefundBalance>();
}

/**
 * A sandbox deposit of `amount_minor` paid with `paid_minor` from its declared sender, settled, for `owner`. An excess
 * is not received: the order takes its amount (A = X) and the excess becomes a claim.
 */
export async function settledDeposit(app: TestApp, owner: MerchantCredentials, amount_minor: number, paid_minor = amount_minor): Promise<DepositView> {
  const order = await createDeposit(app, { amount_minor, credentials: owner });
  const transfer = await sandboxTransfer(app, order, paid_minor === amount_minor ? {} : { amount_minor: paid_minor }, owner);
  const response = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  const settled = await getDeposit(app, order.id, owner);
  expect(settled).toMatchObject({ status: 'settled', amount_received_minor: amount_minor });
  return settled;
}

/** Lets every pending credit clear (72 hours on the test clock) and gives `owner` other cleared money for the fees. */
export async function clearCredits(app: TestApp, owner: MerchantCredentials): Promise<void> {
  app.clock.advance(72 * HOUR_MS + 1);
  await runJobs(app);
  await fundAvailable(app, accountOf(owner), OTHER_MONEY_MINOR);
}

export async function refundsOf(app: TestApp, owner: MerchantCredentials, deposit_id: string): Promise<WithdrawalView[]> {
  const response = await app.signed({ url: `/v1/pay/deposits/${deposit_id}/refunds`, credentials: owner });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ data: WithdrawalView[] }>().data;
}

export async function withdrawalOf(app: TestApp, owner: MerchantCredentials, id: string): Promise<WithdrawalView> {
  const response = await app.signed({ url: `/v1/pay/withdrawals/${id}`, credentials: owner });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<WithdrawalView>();
}
