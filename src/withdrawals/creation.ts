import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError, fail, unwrap, type Result } from '../platform/errors.ts';
import { planCommand, type PlannedCommand, type ReadPart } from '../platform/read-part.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, SECOND_MS } from '../platform/time.ts';
import type { EventCause } from '../platform/cause.ts';
import type { FeeComputation } from '../fees/service.ts';
import type { BeneficiaryRow, InlineBeneficiary } from '../beneficiaries/service.ts';
import type { WithdrawalDependencies } from './dependencies.ts';
import { approvalTtlJob, expireJob } from './jobs.ts';
import * as repository from './repository.ts';
import * as refundsRepository from './refunds-repository.ts';
import { ORDER_SOURCE, type OrderTransitions } from './transitions.ts';
import type { RefundReasonCode, WithdrawalAccount, WithdrawalRow } from './types.ts';
import type { WithdrawalView } from './views.ts';

export interface CreateWithdrawalInput {
  amount_minor: number;
  merchant_reference: string;
  end_user_ref: string;
  beneficiary_id: string;
  metadata?: Record<string, string> | undefined;
  client?: Record<string, string | undefined> | undefined;
  /** Set when the order refunds a deposit to its payer (src/refunds/): the deposit, why, and what it may take. */
  refund?: RefundTerms | undefined;
}

/** What makes an order a refund of a deposit (issue 32, docs/decisions/refunds.md). */
export interface RefundTerms {
  deposit_id: string;
  reason_code: RefundReasonCode;
  note: string | null;
  /** What the deposit brought (its `amount_received_minor`): the cap of all its refunds together. */
  refundable_cap_minor: number;
}

/** The most refunds one deposit may have (migration 0034 backs it with a domain). */
export const MAX_REFUNDS_PER_DEPOSIT = 20;

/** How a creation differs from a merchant's request, when it is not one. */
export interface CreateWithdrawalOptions {
  /** Set when the order pays again a reversed fill of a settled order: the service's own order, not
   * a new request, so it skips the amount range, approval, the sandbox 402 and the fee. */
  replacement_of_withdrawal_id?: string | null;
  /** The refund whose reversed fill a replacement pays again: the replacement is a refund of the same deposit. */
  refund_replaced?: Pick<WithdrawalRow, 'refund_of_deposit_id' | 'refund_reason_code' | 'refund_note'>;
  /** The sandbox counterparty's standing liquidity: skips the amount range, approval and the sandbox 402. */
  sandbox_liquidity?: boolean;
  /**
   * A sandbox scenario's dedicated withdrawal (110.00, 102.00, 107.00 THB): kept out of the matching queue,
   * so that only the deposit it is opened for reserves it (migration 0031). Test mode only.
   */
  outside_matching_queue?: boolean;
  /** What the request's first statement answered for the creation's policy, reference and fee reads (`planForMerchant`). */
  prefetched_context?: repository.CreationContext<FeeComputation>;
}

/** POST /v1/pay/withdrawals as the merchant sends it: a beneficiary by id, or inline. */
export interface MerchantWithdrawalRequest {
  amount_minor: number;
  merchant_reference: string;
  end_user_ref: string;
  beneficiary_id?: string | undefined;
  beneficiary?: InlineBeneficiary | undefined;
  metadata?: Record<string, string> | undefined;
  client?: Record<string, string | undefined> | undefined;
}

/** What a planned merchant creation's first statement answered (`planForMerchant`). */
interface MerchantCreationPrefetch {
  beneficiary?: { row: BeneficiaryRow | null };
  context?: repository.CreationContext<FeeComputation>;
}


/** The creation of withdrawal orders: a merchant's request, the sandbox counterparty's liquidity, and replacements. */
export class WithdrawalCreation {
  constructor(
    private readonly deps: WithdrawalDependencies,
    private readonly transitions: OrderTransitions,
  ) {}

  /**
   * A sandbox scenario's 402 `insufficient_balance` (113.00 THB), which a merchant must handle whatever its
   * balance and whatever the state of the beneficiary (so the creation route asks this before it looks at
   * the beneficiary), with the balance's real figures. Null for every other amount and in live mode.
   */
  async sandboxScenarioRefusal(tx: Queryable, account: WithdrawalAccount, amount_minor: number): Promise<Result<never> | null> {
    if (!this.deps.scenarios(account.livemode).refusesAsInsufficient(amount_minor)) return null;
    const fee = await this.deps.fees.quote(tx, { ...account, channel: 'withdrawal' }, amount_minor);
    const balance = await this.deps.ledger.balance(tx, account);
    const pendingAt = await this.deps.ledger.nextClearingAt(tx, account);
    return fail('insufficient_balance', {
      details: {
        available_minor: balance.available_minor,
        required_minor: amount_minor + fee.fee_total_minor,
        pending_clearing_minor: balance.pending_clearing_minor,
        pending_clearing_available_at: pendingAt ? formatTimestamp(pendingAt) : null,
      },
    });
  }

  private creationContextPart(account: WithdrawalAccount, input: Pick<CreateWithdrawalInput, 'merchant_reference' | 'amount_minor'>, replacement: boolean): ReadPart<repository.CreationContext<FeeComputation>> {
    return repository.creationContextPart(account, input.merchant_reference, replacement ? null : this.deps.fees.quotePart({ ...account, channel: 'withdrawal' }, input.amount_minor));
  }

  /**
   * POST /v1/pay/withdrawals as a planned command (src/platform/read-part.ts): the beneficiary the request names
   * and the creation's policy, reference and fee reads ride on the request's idempotency statement, and
   * `createForMerchant` is given what they answered.
   */
  planForMerchant(account: WithdrawalAccount, request: MerchantWithdrawalRequest, cause: EventCause): PlannedCommand<WithdrawalView> {
    const context = this.creationContextPart(account, request, false);
    if (request.beneficiary_id === undefined) {
      return planCommand([context], (tx, [prefetched_context]) => this.createForMerchant(tx, account, request, cause, { context: prefetched_context }));
    }
    const beneficiary = this.deps.beneficiaries.forWithdrawalPart(account, request.beneficiary_id);
    return planCommand([beneficiary, context], (tx, [row, prefetched_context]) => this.createForMerchant(tx, account, request, cause, { beneficiary: { row }, context: prefetched_context }));
  }

  /**
   * A merchant's withdrawal request: the sandbox's 402 first (113.00 THB answers it before anything else is looked
   * at, the beneficiary included: spec table), then the beneficiary (named, or given inline and found or created),
   * which must be verified, then the order. Refusals throw the spec's error.
   */
  async createForMerchant(tx: Queryable, account: WithdrawalAccount, request: MerchantWithdrawalRequest, cause: EventCause, prefetched: MerchantCreationPrefetch = {}): Promise<WithdrawalView> {
    const scenario = await this.sandboxScenarioRefusal(tx, account, request.amount_minor);
    if (scenario && !scenario.ok) throw scenario.error;
    const beneficiary_id = await this.verifiedBeneficiaryOf(tx, account, request, cause, prefetched.beneficiary);
    const input = { amount_minor: request.amount_minor, merchant_reference: request.merchant_reference, end_user_ref: request.end_user_ref, beneficiary_id, metadata: request.metadata, client: request.client };
    return unwrap(await this.create(tx, account, input, cause, prefetched.context ? { prefetched_context: prefetched.context } : {}));
  }

  /** The id of the request's beneficiary, once it is known to be the caller's and verified. */
  private async verifiedBeneficiaryOf(tx: Queryable, account: WithdrawalAccount, request: MerchantWithdrawalRequest, cause: EventCause, prefetched?: { row: BeneficiaryRow | null }): Promise<string> {
    if (request.beneficiary_id !== undefined) {
      const beneficiary = await this.deps.beneficiaries.findForWithdrawal(tx, account, request.beneficiary_id, prefetched);
      if (!beneficiary) throw new ApiError('resource_not_found', { details: { field: 'beneficiary_id' } });
      if (beneficiary.status !== 'verified') {
        throw new ApiError('beneficiary_not_verified', { details: { beneficiary_id: beneficiary.id, status: beneficiary.status } });
      }
      return beneficiary.id;
    }
    const inline = request.beneficiary;
    invariant(inline, 'the schema requires beneficiary_id or beneficiary');
    const ensured = await this.deps.beneficiaries.ensureForWithdrawal(tx, account, inline, cause);
    if (!ensured.verified) {
      // The beneficiary and its verification job must survive this answer, so that the retry
      // after `beneficiary.verified` succeeds: the error keeps the writes made before it.
      throw new ApiError('beneficiary_not_verified', {
        commit_writes: true,
        details: { beneficiary_id: ensured.beneficiary.id, status: ensured.beneficiary.status },
      });
    }
    return ensured.beneficiary.id;
  }

  /**
   * Creates an order: fee locked from the schedule of this moment, amount plus fee moved from
   * available to reserved, status `open` or `pending_approval` by the brand's policy. Returns
   * `insufficient_balance` (nothing created, nothing locked) or `merchant_reference_in_use`.
   * The beneficiary must be the caller's and verified; the route checks that before calling.
   */
  async create(tx: Queryable, account: WithdrawalAccount, input: CreateWithdrawalInput, cause: EventCause, options: CreateWithdrawalOptions = {}): Promise<Result<WithdrawalView>> {
    const now = this.deps.clock.now();
    const replacement_of_withdrawal_id = options.replacement_of_withdrawal_id ?? null;
    const replacement = replacement_of_withdrawal_id !== null;
    const internal = replacement || options.sandbox_liquidity === true;
    invariant(!options.sandbox_liquidity || !account.livemode, 'sandbox liquidity exists in test mode only');
    invariant(!options.outside_matching_queue || !account.livemode, 'only sandbox scenarios keep an order out of the matching queue');
    // The policy, the reference and the fee quote are read in one round trip, carried by the request's
    // idempotency statement when it came through HTTP (`planForMerchant`); a replacement pays no fee.
    invariant(!replacement || options.prefetched_context === undefined, 'a replacement reads its own context');
    const context = options.prefetched_context ?? (await repository.readCreationContext(tx, this.creationContextPart(account, input, replacement)));
    const policy = this.deps.policies.fromRow(context.policy);
    // Whole baht (spec, Limits: "Amount | Whole baht, greater than 0"): depositors fill withdrawals in whole-baht legs.
    if (!internal && (input.amount_minor % 100 !== 0 || input.amount_minor < policy.min_amount_minor || input.amount_minor > policy.max_amount_minor)) {
      return fail('amount_not_supported', { details: { min_minor: policy.min_amount_minor, max_minor: policy.max_amount_minor } });
    }
    if (context.reference_taken) {
      return fail('merchant_reference_in_use', { details: { merchant_reference: input.merchant_reference } });
    }
    const fee = replacement
      ? {
          fee_total_minor: 0,
          fee_breakdown: [
            { component: 'processing_fee', amount_minor: 0, rate_bps: 0 },
            { component: 'fixed_fee', amount_minor: 0 },
            { component: 'vat', amount_minor: 0, rate_bps: 0 },
          ],
        }
      : context.carried;
    invariant(fee !== null, 'a creation that pays a fee has its quote');
    const withdrawal_id = newId('withdrawal');
    const locked = input.amount_minor + fee.fee_total_minor;
    invariant(Number.isSafeInteger(locked), 'amount plus fee is a safe integer');

    if (!internal) {
      const scenario = await this.sandboxScenarioRefusal(tx, account, input.amount_minor);
      if (scenario) return scenario;
    }
    // A refund that its deposit cannot take is refused before anything is written (the refunds layer holds the
    // deposit's lock, so no other refund of it moves the allowance until this transaction ends).
    if (input.refund) {
      const refusal = refundRefusal(await refundsRepository.findRefundAllowance(tx, account.white_label_id, input.refund.deposit_id), input.refund, input.amount_minor);
      if (refusal) return refusal;
    }
    const reserved = await this.deps.ledger.post(tx, {
      account,
      type: 'withdrawal_reserved',
      amount_minor: locked,
      bucket_from: 'available',
      bucket_to: 'reserved',
      movement_key: `withdrawal_reserved:${withdrawal_id}`,
      source: { type: ORDER_SOURCE, id: withdrawal_id },
      cause,
    });
    if (!reserved.ok) return reserved;
    // The allowance is the last lock of the lock order, after the wallet (src/platform/lock-order.ts).
    if (input.refund) await this.commitRefund(tx, account, input.refund, input.amount_minor, now);
    const replaced = options.refund_replaced;
    if (replaced?.refund_of_deposit_id) {
      // The reversal just gave this chunk's claim back; the replacement pays it to the same payer again.
      invariant(replacement, 'only a replacement continues a refund');
      await refundsRepository.adjustRefundCommitment(tx, account.white_label_id, replaced.refund_of_deposit_id, input.amount_minor, now);
    }

    const needsApproval = !internal && policy.approval_threshold_minor !== null && input.amount_minor >= policy.approval_threshold_minor;
    const approvalExpiresAt = needsApproval ? new Date(now.getTime() + policy.approval_ttl_seconds * SECOND_MS) : null;
    const expiresAt = new Date((approvalExpiresAt ?? now).getTime() + policy.expires_in_seconds * SECOND_MS);
    const client = input.client ? (Object.fromEntries(Object.entries(input.client).filter(([, value]) => value !== undefined)) as Record<string, string>) : null;
    const row: WithdrawalRow = {
      ...account,
      withdrawal_id,
      version: 1,
      status: needsApproval ? 'pending_approval' : 'open',
      merchant_reference: input.merchant_reference,
      end_user_ref: input.end_user_ref,
      beneficiary_id: input.beneficiary_id,
      amount_total_minor: input.amount_minor,
      fee_total_minor: fee.fee_total_minor,
      fee_breakdown: fee.fee_breakdown,
      fee_recognized_minor: 0,
      filled_minor: 0,
      reserved_minor: 0,
      remaining_minor: input.amount_minor,
      refunded_minor: null,
      settled_splits: 0,
      max_splits: policy.max_splits,
      expires_at: expiresAt,
      approval_expires_at: approvalExpiresAt,
      refund_of_deposit_id: input.refund?.deposit_id ?? replaced?.refund_of_deposit_id ?? null,
      refund_reason_code: input.refund?.reason_code ?? replaced?.refund_reason_code ?? null,
      refund_note: input.refund?.note ?? replaced?.refund_note ?? null,
      replacement_of_withdrawal_id,
      metadata: input.metadata ?? null,
      client,
      close_reason_code: null,
      closed_by: null,
      review_note: null,
      reserve_balance_transaction_id: reserved.value.id,
      release_balance_transaction_id: null,
      created_at: now,
      updated_at: now,
      closed_at: null,
      dispute: null,
      funds_on_hold: false,
      // 107.00 THB and test-mode refunds: such an order is filled by the sandbox's chunks alone (src/sandbox/hooks.ts).
      in_matching_queue: options.outside_matching_queue !== true && (internal || this.deps.scenarios(account.livemode).inMatchingQueue({ white_label_id: account.white_label_id, amount_total_minor: input.amount_minor, refund_of_deposit_id: input.refund?.deposit_id ?? null })),
    };
    const created = await this.transitions.apply(tx, {
      before: null,
      after: row,
      trigger: 'create',
      cause,
      // The sandbox counterparty's deposits fill a merchant's 107.00 THB order in three chunks, and a test-mode refund.
      jobs: [needsApproval ? approvalTtlJob(row) : expireJob(row), ...(internal ? [] : this.deps.scenarios(row.livemode).afterCreation(row))],
    });
    // A creation has no version to lose; a reference taken meanwhile is thrown by the insert's flush.
    invariant(created.ok, 'a creation transition always persists');
    return created;
  }

  /**
   * Takes a refund's amount from what its deposit may still refund (`withdrawal_refund_allowances`, one statement whose
   * conflict path locks the row). `refundRefusal` has already answered every refusal the allowance could give; one found
   * here lost a race that the deposit's lock should have made impossible, and throws, rolling back the reservation.
   */
  private async commitRefund(tx: Queryable, account: WithdrawalAccount, refund: RefundTerms, amount_minor: number, now: Date): Promise<void> {
    invariant(refund.refundable_cap_minor > 0, 'a refunded deposit brought money');
    const terms = { ...account, deposit_id: refund.deposit_id, refundable_cap_minor: refund.refundable_cap_minor, amount_minor, max_refunds: MAX_REFUNDS_PER_DEPOSIT, now };
    const committed = await refundsRepository.commitRefund(tx, terms);
    if (committed) {
      invariant(committed.committed_minor <= committed.refundable_cap_minor, `${refund.deposit_id}: refunds stay within the deposit's credit`);
      return;
    }
    const refusal = refundRefusal(await refundsRepository.findRefundAllowance(tx, account.white_label_id, refund.deposit_id), refund, amount_minor);
    invariant(refusal !== null && !refusal.ok, 'an allowance that refused a refund says why');
    throw refusal.error;
  }
}

/**
 * Why a deposit's allowance cannot take a refund, or null when it can: 409 `refund_limit_reached` once the deposit has
 * its most refunds, 422 `refund_exceeds_refundable` with `details.refundable_minor` (what is left) when the amount is more.
 */
function refundRefusal(allowance: refundsRepository.RefundAllowanceRow | null, refund: RefundTerms, amount_minor: number): Result<never> | null {
  if (allowance && allowance.refund_count >= MAX_REFUNDS_PER_DEPOSIT) {
    return fail('refund_limit_reached', { details: { deposit_id: refund.deposit_id, max_refunds: MAX_REFUNDS_PER_DEPOSIT } });
  }
  const refundable_minor = allowance ? allowance.refundable_cap_minor - allowance.committed_minor : refund.refundable_cap_minor;
  if (amount_minor <= refundable_minor) return null;
  return fail('refund_exceeds_refundable', { details: { deposit_id: refund.deposit_id, amount_minor, refundable_minor } });
}
