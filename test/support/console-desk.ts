import crypto from 'node:crypto';
import { expect } from 'vitest';
import type { MerchantCredentials, TestApp } from './app.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from './slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from './withdrawals.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import type { BackofficeClaimView } from '../../src/review/claims.ts';
import type { DisputeDetail } from '../../src/disputes/service.ts';

/**
 * Claims and disputes for the console's tests, made through the doors their users use: an order that expired
 * unpaid and whose late-slip window closed, with claims opened for it through POST /v1/bo/claims; and a brand of
 * its own where a funded merchant's withdrawal is filled by another merchant's deposit paid at the sandbox bank,
 * disputed by the withdrawer (with evidence) over signed HTTP.
 */

const HOUR_MS = 3_600_000;
const WITHDRAWAL_AMOUNT = 12_000;

/** An order of the merchant that expired unpaid, its late-slip window closed (the clock moves 24 hours on). */
export async function expiredOrder(app: TestApp, credentials: MerchantCredentials): Promise<string> {
  const order = await createDeposit(app, { amount_minor: 12_000, credentials });
  app.clock.advance(15 * 60_000 + 1);
  await runJobs(app);
  expect((await getDeposit(app, order.id, credentials)).status).toBe('expired');
  app.clock.advance(24 * HOUR_MS);
  return order.id;
}

/** A late-slip claim on the order, opened by the platform administrator as staff would for a payer. */
export async function lateSlipClaim(app: TestApp, white_label_id: string, deposit_id: string, evidence: { trans_ref: string; note?: string }): Promise<BackofficeClaimView> {
  const response = await app.backoffice({ method: 'POST', url: '/v1/bo/claims', body: { white_label_id, deposit_id, cause: 'late_slip', evidence: { sending_bank_code: '004', ...evidence } } });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<BackofficeClaimView>();
}

/** A brand of its own with a funded withdrawing merchant (a verified payee) and a depositing merchant. */
export interface DisputeWorld {
  brand: string;
  withdrawer: MerchantCredentials;
  depositor: MerchantCredentials;
  beneficiary_id: string;
}

export async function disputeWorld(app: TestApp): Promise<DisputeWorld> {
  const withdrawer = await app.createMerchant();
  const depositor = await app.createMerchant({ white_label_id: withdrawer.white_label_id });
  await fundAvailable(app, accountOf(withdrawer), 1_000_000);
  return { brand: withdrawer.white_label_id, withdrawer, depositor, beneficiary_id: await verifiedBeneficiary(app, accountOf(withdrawer)) };
}

/**
 * A withdrawal filled by a settled deposit, disputed by the withdrawer (FUNDS_NOT_RECEIVED, with `note`) and
 * given one evidence item: the dispute as an operator reads it.
 */
export async function disputedFill(app: TestApp, world: DisputeWorld, texts: { note: string; reference: string; evidence_note: string }): Promise<DisputeDetail> {
  const reference = `wd-${crypto.randomBytes(6).toString('hex')}`;
  const withdrawal = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    credentials: world.withdrawer,
    body: { amount_minor: WITHDRAWAL_AMOUNT, currency: 'THB', merchant_reference: reference, end_user_ref: `payee-${reference}`, beneficiary_id: world.beneficiary_id },
  });
  expect(withdrawal.statusCode, withdrawal.body).toBe(201);
  const order = await createDeposit(app, { amount_minor: WITHDRAWAL_AMOUNT, credentials: world.depositor });
  const upload = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, {}, world.depositor)));
  expect(upload.statusCode, upload.body).toBe(202);
  await runJobs(app);
  const filled = (await app.signed({ url: `/v1/pay/withdrawals/${withdrawal.json<WithdrawalView>().id}`, credentials: world.withdrawer })).json<WithdrawalView>();
  const leg_ref = filled.fills?.[0]?.leg_ref;
  expect(leg_ref, JSON.stringify(filled)).toBeTruthy();
  const opened = await app.signed({
    method: 'POST',
    url: `/v1/pay/withdrawals/${filled.id}/disputes`,
    idempotency_key: crypto.randomUUID(),
    credentials: world.withdrawer,
    body: { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED', note: texts.note },
  });
  expect(opened.statusCode, opened.body).toBe(201);
  const dispute_id = opened.json<WithdrawalView>().dispute!.id;
  const evidence = await app.signed({
    method: 'POST',
    url: `/v1/pay/disputes/${dispute_id}/evidence`,
    idempotency_key: crypto.randomUUID(),
    credentials: world.withdrawer,
    body: { kind: 'bank_statement_line', reference: texts.reference, note: texts.evidence_note },
  });
  expect(evidence.statusCode, evidence.body).toBe(202);
  const detail = await app.backoffice({ url: `/v1/bo/disputes/${dispute_id}?white_label_id=${world.brand}` });
  expect(detail.statusCode, detail.body).toBe(200);
  return detail.json<DisputeDetail>();
}
