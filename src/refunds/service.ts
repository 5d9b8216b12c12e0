import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { EventCause } from '../platform/cause.ts';
import type { BeneficiaryService } from '../beneficiaries/service.ts';
import type { DepositService } from '../deposits/service.ts';
import type { SlipsService } from '../slips/service.ts';
import type { RefundReasonCode, WithdrawalService, WithdrawalView } from '../withdrawals/service.ts';

/**
 * Refunds to the payer (issue 32, docs/decisions/refunds.md): a refund is a withdrawal of the merchant's wallet to
 * the account the bank verified as the sender of a settled deposit. It spans deposits (the order and its payer),
 * slips (what the bank verified), beneficiaries (the payee) and withdrawals (the order, its allowance and its money),
 * so it lives here, above them; none of them calls back up.
 */

/** What opening a refund can answer besides its success, whichever door it came through (merchant, back office, claim). */
export const REFUND_ERROR_CODES = [
  'resource_not_found',
  'deposit_not_refundable',
  'refund_exceeds_refundable',
  'refund_limit_reached',
  'refund_payee_unverified',
  'insufficient_balance',
  'amount_not_supported',
  'beneficiary_not_verified',
  'withdrawal_state_conflict',
] as const;

export interface RefundAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

export interface RefundRequest {
  amount_minor: number;
  reason_code: RefundReasonCode;
  note?: string | undefined;
  metadata?: Record<string, string> | undefined;
  /**
   * The refund's own reference, when the caller derives it (the back office, from its request's Idempotency-Key,
   * so that a retried request meets the first refund); a fresh `rfd_` reference otherwise. Never the merchant's.
   */
  merchant_reference?: string | undefined;
}

export interface RefundDependencies {
  deposits: DepositService;
  withdrawals: WithdrawalService;
  beneficiaries: BeneficiaryService;
  slips: SlipsService;
}

export class RefundService {
  constructor(private readonly deps: RefundDependencies) {}

  /**
   * Opens a refund of a settled deposit, in the caller's transaction: the deposit is locked first (a reversal of it
   * queues behind), its payer must be proven by the bank (`refund_payee_unverified` otherwise), the payee is that
   * account, and the withdrawal is created with the refund's claim on the deposit (`refund_exceeds_refundable`,
   * `refund_limit_reached`) and the wallet's reservation (`insufficient_balance`) in the same transaction.
   */
  async create(tx: Queryable, account: RefundAccount, deposit_id: string, request: RefundRequest, cause: EventCause): Promise<Result<WithdrawalView>> {
    const deposit = await this.deps.deposits.lockForRefund(tx, account, deposit_id);
    if (!deposit) return fail('resource_not_found');
    if (deposit.status !== 'settled') return fail('deposit_not_refundable', { details: { deposit_id, status: deposit.status } });
    invariant(deposit.amount_received_minor !== null && deposit.amount_received_minor > 0, 'a settled deposit brought money');
    if (!(await this.deps.slips.payerProven(tx, account.white_label_id, deposit_id))) {
      return fail('refund_payee_unverified', { details: { deposit_id, reason: 'sender_not_verified' } });
    }
    const payee = await this.deps.beneficiaries.ensureProvenPayer(tx, account, { ...deposit.payer, end_user_ref: deposit.end_user_ref }, cause);
    if (!payee.ok) return payee;
    return this.deps.withdrawals.create(
      tx,
      account,
      {
        amount_minor: request.amount_minor,
        // The merchant names the deposit, not the payout; the refund's own reference is ours and unique.
        merchant_reference: request.merchant_reference ?? `rfd_${newId('withdrawal').slice('wdr_'.length)}`,
        end_user_ref: deposit.end_user_ref,
        beneficiary_id: payee.value.id,
        metadata: request.metadata,
        refund: { deposit_id, reason_code: request.reason_code, note: request.note ?? null, refundable_cap_minor: deposit.amount_received_minor },
      },
      cause,
    );
  }

  /** The refunds of one of the caller's deposits, oldest first; null for a deposit that is not the caller's. */
  async list(db: Queryable, account: RefundAccount, deposit_id: string): Promise<WithdrawalView[] | null> {
    // Whose the deposit is, without building its object (instructions, checkout link): only the scope is needed.
    const owner = await this.deps.deposits.ownerInBrand(db, account.white_label_id, deposit_id);
    if (!owner || owner.merchant_id !== account.merchant_id || owner.livemode !== account.livemode) return null;
    return this.deps.withdrawals.refundsOf(db, account, deposit_id);
  }
}
