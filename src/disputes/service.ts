import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, unwrap, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, HOUR_MS } from '../platform/time.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { cancelJobsByKey, scheduleJob, type JobHandler, type JobSpec } from '../jobs/index.ts';
import type { LedgerService } from '../ledger/service.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { Actor, BackofficeRole } from '../platform/access.ts';
import type { DepositService } from '../deposits/service.ts';
import type { LegCover, SettlementService } from '../settlement/service.ts';
import type { DepositRow } from '../deposits/types.ts';
import { REVERSAL_DISPLAY_TH } from '../review/catalogue.ts';
import type { WithdrawalService, WithdrawalView } from '../withdrawals/service.ts';
import type { DisputeSnapshot, ReceiptState, WithdrawalAccount } from '../withdrawals/types.ts';
import * as repository from './repository.ts';

/**
 * Withdrawal disputes (issue 11, item 6). A withdrawing merchant reports that a fill did not reach its
 * beneficiary (`withdrawal.disputed`, on its own feed only): the fill's receipt is no longer assumed,
 * and the depositing merchant's credit is held in clearing (its order says only that: `clearing_available_at`
 * null). A late slip that paid a leg whose reservation had gone to another deposit (ALLOCATION_CONFLICT)
 * opens one for the system on that withdrawal. Evidence is due before `respond_by`; an operator, or the
 * deadline job when no evidence came, resolves it for one side:
 *
 * - non-receipt, for the withdrawer: the deposit is reversed (MERCHANT_DISPUTE_LOST) through
 *   SettlementService.reverse, which reverses its fills and pays them again as the ledger design says;
 * - non-receipt, for the depositor: the hold is lifted and the fill's receipt is confirmed;
 * - allocation conflict, for the depositor (the payee did get the late transfer): the withdrawing
 *   merchant pays for it by an `adjustment` debit, which lets the review settle the deposit (LegCover);
 * - allocation conflict, for the withdrawer: nothing moves; the review cannot settle and rejects.
 *
 * Locks, in the documented order: the paying deposit's row and the feeds of every merchant involved
 * (DepositService.lockOrder), then the dispute row, then the withdrawal row, then wallets.
 */

/** Evidence is due this long after a dispute opens; the deadline job runs then. */
export const DISPUTE_RESPONSE_PERIOD_MS = 48 * HOUR_MS;
export const DISPUTE_DEADLINE_TASK = 'withdrawals.dispute_deadline';
/** Evidence items one dispute takes (the table's CHECK says the same). */
export const MAX_EVIDENCE_PER_DISPUTE = 10;
/** The reasons a withdrawer may give today (`dispute.reason_code` is an open enum). */
export const DISPUTE_REASON_CODES = ['FUNDS_NOT_RECEIVED', 'AMOUNT_DIFFERS'] as const;
export type DisputeReasonCode = (typeof DISPUTE_REASON_CODES)[number];
/**
 * Who reads and resolves disputes, the one rule for the API (routes.ts) and the console's pages: operators and the
 * platform administrator. Reviewers decide deposits; a dispute is money between two merchants.
 */
export const DISPUTE_ROLES = ['platform_admin', 'operator'] as const satisfies readonly BackofficeRole[];
export const ALLOCATION_CONFLICT_REASON_CODE = 'ALLOCATION_CONFLICT';

const SYSTEM_ACTOR: Actor = { actor_type: 'system', actor_id: 'withdrawals.dispute_deadline', request_id: null };

export interface DisputeDependencies {
  database: Database;
  clock: Clock;
  withdrawals: WithdrawalService;
  deposits: DepositService;
  /** Holds, releases and reverses the money of the deposit a disputed fill was paid by. */
  settlement: SettlementService;
  ledger: LedgerService;
  tenancy: TenancyService;
  /** The service's own address, for `dispute.evidence_url`. */
  public_base_url: () => string;
}

/** The dispute as the withdrawing merchant reads it (the 202 of its evidence endpoint). */
export interface MerchantDisputeView {
  object: 'dispute';
  id: string;
  withdrawal_id: string;
  leg_ref: string;
  reason_code: string;
  amount_minor: number;
  currency: 'THB';
  status: 'open' | 'resolved';
  opened_at: string;
  respond_by: string;
  evidence_count: number;
  resolution?: { outcome: repository.DisputeOutcome; resolved_at: string };
  livemode: boolean;
}

/** The dispute as an operator reads it. */
export interface DisputeRecord {
  object: 'dispute';
  id: string;
  kind: repository.DisputeKind;
  status: repository.DisputeStatus;
  reason_code: string;
  amount_minor: number;
  currency: 'THB';
  livemode: boolean;
  withdrawal_id: string;
  withdrawal_merchant_id: string;
  leg_ref: string;
  deposit_id: string;
  deposit_merchant_id: string;
  deposit_leg_ref: string | null;
  note: string | null;
  funds_on_hold: boolean;
  opened_at: string;
  respond_by: string;
  evidence_count: number;
  resolution: {
    outcome: repository.DisputeOutcome;
    resolved_by: 'operator' | 'system';
    resolver_id: string | null;
    note: string | null;
    resolved_at: string;
    adjustment_balance_transaction_id: string | null;
    adjustment_reversal_balance_transaction_id: string | null;
  } | null;
}

export interface DisputeDetail extends DisputeRecord {
  evidence: { evidence_id: string; kind: repository.EvidenceKind; reference: string; note: string; created_at: string }[];
}

/** Who resolves a dispute: an operator (with a note and an audit row) or the deadline job. */
export interface Resolver {
  actor: Actor;
  resolved_by: 'operator' | 'system';
  /** The operator's back-office credential; null for the system. */
  resolver_id: string | null;
  note: string | null;
  cause: EventCause;
}

function holdsFunds(row: repository.DisputeRow): boolean {
  return row.status !== 'resolved' && (row.kind === 'allocation_conflict' || row.clearing_held);
}

export function disputeRecord(row: repository.DisputeRow): DisputeRecord {
  return {
    object: 'dispute',
    id: row.dispute_id,
    kind: row.kind,
    status: row.status,
    reason_code: row.reason_code,
    amount_minor: row.amount_minor,
    currency: 'THB',
    livemode: row.livemode,
    withdrawal_id: row.withdrawal_id,
    withdrawal_merchant_id: row.withdrawal_merchant_id,
    leg_ref: row.leg_ref,
    deposit_id: row.deposit_id,
    deposit_merchant_id: row.deposit_merchant_id,
    deposit_leg_ref: row.deposit_leg_ref,
    note: row.note,
    funds_on_hold: holdsFunds(row),
    opened_at: formatTimestamp(row.opened_at),
    respond_by: formatTimestamp(row.respond_by),
    evidence_count: row.evidence_count,
    resolution:
      row.status === 'resolved' && row.outcome && row.resolved_by && row.resolved_at
        ? {
            outcome: row.outcome,
            resolved_by: row.resolved_by,
            resolver_id: row.resolver_id,
            note: row.resolution_note,
            resolved_at: formatTimestamp(row.resolved_at),
            adjustment_balance_transaction_id: row.adjustment_balance_transaction_id,
            adjustment_reversal_balance_transaction_id: row.adjustment_reversal_balance_transaction_id,
          }
        : null,
  };
}

function merchantView(row: repository.DisputeRow): MerchantDisputeView {
  return {
    object: 'dispute',
    id: row.dispute_id,
    withdrawal_id: row.withdrawal_id,
    leg_ref: row.leg_ref,
    reason_code: row.reason_code,
    amount_minor: row.amount_minor,
    currency: 'THB',
    // Waiting for an operator after respond_by is still open to the merchant: nothing is decided yet.
    status: row.status === 'resolved' ? 'resolved' : 'open',
    opened_at: formatTimestamp(row.opened_at),
    respond_by: formatTimestamp(row.respond_by),
    evidence_count: row.evidence_count,
    ...(row.outcome && row.resolved_at ? { resolution: { outcome: row.outcome, resolved_at: formatTimestamp(row.resolved_at) } } : {}),
    livemode: row.livemode,
  };
}

function deadlineJob(row: repository.DisputeRow): JobSpec {
  return {
    task: DISPUTE_DEADLINE_TASK,
    payload: { white_label_id: row.white_label_id, dispute_id: row.dispute_id },
    run_at: row.respond_by,
    job_key: `${DISPUTE_DEADLINE_TASK}:${row.dispute_id}`,
    white_label_id: row.white_label_id,
  };
}

export class DisputeService {
  constructor(private readonly deps: DisputeDependencies) {}

  /** The order's `dispute` object for a dispute row, as the withdrawing merchant sees it. */
  private snapshotOf(row: repository.DisputeRow): DisputeSnapshot {
    const resolved = row.status === 'resolved';
    return {
      id: row.dispute_id,
      reason_code: row.reason_code,
      amount_minor: row.amount_minor,
      opened_at: formatTimestamp(row.opened_at),
      respond_by: formatTimestamp(row.respond_by),
      ...(resolved ? {} : { evidence_url: `${this.deps.public_base_url()}/v1/pay/disputes/${row.dispute_id}/evidence` }),
      leg_ref: row.leg_ref,
      status: resolved ? 'resolved' : 'open',
      ...(resolved && row.outcome && row.resolved_at ? { resolution: { outcome: row.outcome, resolved_at: formatTimestamp(row.resolved_at) } } : {}),
    };
  }

  /**
   * Writes the order's snapshot of its newest dispute and `funds_on_hold` (any unresolved dispute of
   * the order holding money), with the event of `trigger`. The order's row is locked by the caller.
   */
  private async recordOnWithdrawal(
    tx: Queryable,
    row: repository.DisputeRow,
    trigger: 'disputed' | 'dispute_resolved',
    receipt: { leg_ref: string; from: ReceiptState; to: ReceiptState } | undefined,
    cause: EventCause,
  ): Promise<void> {
    const state = await repository.disputeStateOfWithdrawal(tx, row.white_label_id, row.withdrawal_id);
    invariant(state.newest, 'the dispute just written belongs to the order');
    unwrap(
      await this.deps.withdrawals.recordDispute(tx, {
        white_label_id: row.white_label_id,
        withdrawal_id: row.withdrawal_id,
        trigger,
        dispute: this.snapshotOf(state.newest),
        funds_on_hold: state.funds_on_hold,
        ...(receipt ? { receipt } : {}),
        cause,
      }),
    );
  }

  private newRow(
    input: Omit<repository.DisputeRow, 'dispute_id' | 'status' | 'opened_at' | 'respond_by' | 'evidence_count' | 'outcome' | 'resolved_by' | 'resolver_id' | 'resolution_note' | 'resolved_at' | 'adjustment_balance_transaction_id' | 'adjustment_reversal_balance_transaction_id' | 'created_at' | 'updated_at'> & { dispute_id: string },
  ): repository.DisputeRow {
    const now = this.deps.clock.now();
    return {
      ...input,
      status: 'open',
      opened_at: now,
      respond_by: new Date(now.getTime() + DISPUTE_RESPONSE_PERIOD_MS),
      evidence_count: 0,
      outcome: null,
      resolved_by: null,
      resolver_id: null,
      resolution_note: null,
      resolved_at: null,
      adjustment_balance_transaction_id: null,
      adjustment_reversal_balance_transaction_id: null,
      created_at: now,
      updated_at: now,
    };
  }

  /**
   * POST /v1/pay/withdrawals/{id}/disputes: the withdrawing merchant reports non-receipt of a fill.
   * Only while the fill awaits confirmation (before `auto_confirm_at`), once per fill. Returns the order
   * with `dispute` and `funds_on_hold`; null when the order is not the caller's.
   */
  async open(
    tx: Queryable,
    account: WithdrawalAccount,
    withdrawal_id: string,
    input: { leg_ref: string; reason_code: DisputeReasonCode; note: string | null; request_id: string; cause: EventCause },
  ): Promise<Result<WithdrawalView> | null> {
    const brand = account.white_label_id;
    if (!(await this.deps.withdrawals.get(tx, account, withdrawal_id))) return null;
    // Which deposit paid the fill is read before any lock: the deposit's locks come first.
    const leg = (await this.deps.withdrawals.legsOf(tx, brand, withdrawal_id)).find((candidate) => candidate.leg_ref === input.leg_ref);
    if (!leg || (leg.status !== 'filled' && leg.status !== 'reversed')) {
      return fail('validation_error', { details: { fields: [{ path: 'leg_ref', reason: 'not_a_fill_of_this_order', hint: 'a leg_ref from the fills of this withdrawal' }] } });
    }
    const deposit = await this.deps.deposits.lockOrder(tx, brand, leg.deposit_id);
    invariant(deposit, 'a fill was paid by a deposit of the brand');
    const earlier = await repository.findDisputeByLeg(tx, brand, leg.leg_ref);
    if (earlier) return fail('fill_already_disputed', { details: { leg_ref: leg.leg_ref, dispute_id: earlier.dispute_id } });
    const locked = await this.deps.withdrawals.lockForDispute(tx, brand, withdrawal_id);
    invariant(locked, 'the order exists');
    const fill = locked.legs.find((candidate) => candidate.leg_ref === leg.leg_ref);
    invariant(fill, 'a leg does not disappear');
    const now = this.deps.clock.now();
    const awaiting = fill.status === 'filled' && fill.receipt_state === 'awaiting_confirmation' && fill.auto_confirm_at !== null && fill.auto_confirm_at.getTime() > now.getTime();
    if (!awaiting) {
      return fail('dispute_window_closed', {
        details: { leg_ref: fill.leg_ref, receipt_state: fill.receipt_state, auto_confirm_at: fill.auto_confirm_at ? formatTimestamp(fill.auto_confirm_at) : null },
      });
    }
    const dispute_id = newId('dispute');
    // The depositor's credit is held before the dispute is written, so that the row says whether it was.
    const hold = unwrap(await this.deps.settlement.holdFunds(tx, { white_label_id: brand, deposit_id: deposit.deposit_id, hold_reason: `dispute ${dispute_id}`, cause: input.cause }));
    const row = this.newRow({
      white_label_id: brand,
      dispute_id,
      livemode: locked.order.livemode,
      kind: 'non_receipt',
      withdrawal_id,
      withdrawal_merchant_id: locked.order.merchant_id,
      leg_ref: fill.leg_ref,
      deposit_id: deposit.deposit_id,
      deposit_merchant_id: deposit.merchant_id,
      deposit_leg_ref: null,
      reason_code: input.reason_code,
      amount_minor: fill.amount_minor,
      note: input.note,
      clearing_held: hold.held,
      request_id: input.request_id,
    });
    invariant(await repository.insertDispute(tx, row), 'the deposit lock serialises disputes of one fill');
    await this.recordOnWithdrawal(tx, row, 'disputed', { leg_ref: fill.leg_ref, from: 'awaiting_confirmation', to: 'disputed' }, input.cause);
    await scheduleJob(tx, this.deps.clock, deadlineJob(row));
    const view = await this.deps.withdrawals.get(tx, account, withdrawal_id);
    invariant(view, 'the caller reads its own order');
    return ok(view);
  }

  /**
   * The slip pipeline found that a late slip paid a leg whose withdrawal could not take it again
   * (ALLOCATION_CONFLICT): a dispute on that withdrawal, for the part the slip paid into the leg. The
   * caller holds the deposit's locks (it has just sent the order to review). Once per leg.
   */
  async openForAllocationConflict(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; deposit_leg_ref: string; withdrawal_id: string; withdrawal_leg_ref: string; amount_minor: number; cause: EventCause },
  ): Promise<void> {
    invariant(Number.isSafeInteger(input.amount_minor) && input.amount_minor > 0, 'a late slip paid a positive amount into the leg');
    const deposit = await this.deps.deposits.lockOrder(tx, input.white_label_id, input.deposit_id);
    invariant(deposit, 'the conflict belongs to a deposit');
    if (await repository.findDisputeByLeg(tx, input.white_label_id, input.withdrawal_leg_ref)) return;
    const locked = await this.deps.withdrawals.lockForDispute(tx, input.white_label_id, input.withdrawal_id);
    invariant(locked, 'a deposit leg names a withdrawal of the brand');
    const row = this.newRow({
      white_label_id: input.white_label_id,
      dispute_id: newId('dispute'),
      livemode: locked.order.livemode,
      kind: 'allocation_conflict',
      withdrawal_id: input.withdrawal_id,
      withdrawal_merchant_id: locked.order.merchant_id,
      leg_ref: input.withdrawal_leg_ref,
      deposit_id: input.deposit_id,
      deposit_merchant_id: deposit.merchant_id,
      deposit_leg_ref: input.deposit_leg_ref,
      reason_code: ALLOCATION_CONFLICT_REASON_CODE,
      amount_minor: input.amount_minor,
      note: null,
      clearing_held: false,
      request_id: input.cause.request_id,
    });
    invariant(await repository.insertDispute(tx, row), 'the deposit lock serialises disputes of one leg');
    await this.recordOnWithdrawal(tx, row, 'disputed', undefined, input.cause);
    await scheduleJob(tx, this.deps.clock, deadlineJob(row));
  }

  /**
   * POST /v1/pay/disputes/{id}/evidence: the withdrawing merchant's evidence, before `respond_by` and
   * while the dispute is open; at most MAX_EVIDENCE_PER_DISPUTE items. Null when the dispute is not
   * the caller's. Nothing in the order changes: the evidence is the operator's to read.
   */
  async addEvidence(
    tx: Queryable,
    account: WithdrawalAccount,
    dispute_id: string,
    input: { kind: repository.EvidenceKind; reference: string; note: string; request_id: string },
  ): Promise<Result<MerchantDisputeView> | null> {
    const found = await repository.findDispute(tx, account.white_label_id, dispute_id);
    if (!found || found.withdrawal_merchant_id !== account.merchant_id || found.livemode !== account.livemode) return null;
    const row = await repository.lockDispute(tx, account.white_label_id, dispute_id);
    invariant(row, 'a dispute is never deleted');
    const now = this.deps.clock.now();
    if (row.status !== 'open' || now.getTime() >= row.respond_by.getTime()) {
      return fail('dispute_evidence_closed', { details: { status: merchantView(row).status, respond_by: formatTimestamp(row.respond_by) } });
    }
    if (row.evidence_count >= MAX_EVIDENCE_PER_DISPUTE) return fail('evidence_limit_reached', { details: { limit: MAX_EVIDENCE_PER_DISPUTE } });
    await repository.insertEvidence(tx, {
      white_label_id: row.white_label_id,
      evidence_id: newId('dispute_evidence'),
      dispute_id: row.dispute_id,
      merchant_id: account.merchant_id,
      livemode: row.livemode,
      kind: input.kind,
      reference: input.reference,
      note: input.note,
      request_id: input.request_id,
      created_at: now,
    });
    const after: repository.DisputeRow = { ...row, evidence_count: row.evidence_count + 1, updated_at: now };
    invariant(await repository.updateDispute(tx, after, 'open'), 'the dispute is locked');
    return ok(merchantView(after));
  }

  /** The brand's disputes for the back office. */
  /** Which of these deposits have a dispute not yet resolved: the evidence retention keeps their slips (src/slips/retention.ts). */
  ordersWithOpenDisputes(db: Queryable, orders: readonly { white_label_id: string; deposit_id: string }[]): Promise<{ white_label_id: string; deposit_id: string }[]> {
    return repository.ordersWithOpenDisputes(db, orders);
  }

  async list(db: Queryable, white_label_id: string, filters: repository.DisputeListFilters): Promise<DisputeRecord[]> {
    return (await repository.listDisputes(db, white_label_id, filters)).map(disputeRecord);
  }

  /** One dispute with its evidence; null when it is not the brand's. */
  async detail(db: Queryable, white_label_id: string, dispute_id: string): Promise<DisputeDetail | null> {
    const row = await repository.findDispute(db, white_label_id, dispute_id);
    if (!row) return null;
    const evidence = await repository.listEvidence(db, white_label_id, dispute_id);
    return {
      ...disputeRecord(row),
      evidence: evidence.map((item) => ({ evidence_id: item.evidence_id, kind: item.kind, reference: item.reference, note: item.note, created_at: formatTimestamp(item.created_at) })),
    };
  }

  /**
   * An operator resolves a dispute for one side, in one transaction with its audit row. A resolved
   * dispute answers `dispute_already_resolved`, except to the operator who resolved it the same way,
   * who gets it back unchanged (`replayed`). Two operators at once queue on the deposit's lock.
   */
  resolve(white_label_id: string, dispute_id: string, outcome: repository.DisputeOutcome, resolver: Resolver): Promise<Result<{ dispute: DisputeDetail; replayed: boolean }>> {
    invariant(resolver.resolved_by === 'operator' && resolver.resolver_id !== null && resolver.note !== null, 'an operator resolves with a note');
    return this.deps.database.transaction(async (tx) => {
      const found = await repository.findDispute(tx, white_label_id, dispute_id);
      if (!found) return fail('resource_not_found');
      const deposit = await this.deps.deposits.lockOrder(tx, white_label_id, found.deposit_id);
      invariant(deposit, 'a dispute names a deposit of the brand');
      const row = await repository.lockDispute(tx, white_label_id, dispute_id);
      invariant(row, 'a dispute is never deleted');
      let replayed = false;
      if (row.status === 'resolved') {
        const same = row.resolved_by === 'operator' && row.resolver_id === resolver.resolver_id && row.outcome === outcome;
        if (!same) return fail('dispute_already_resolved', { details: { outcome: row.outcome, resolved_by: row.resolved_by } });
        replayed = true;
      } else {
        const applied = await this.apply(tx, row, deposit, outcome, resolver);
        if (!applied.ok) return applied;
        await cancelJobsByKey(tx, `${DISPUTE_DEADLINE_TASK}:${row.dispute_id}`);
      }
      const dispute = await this.detail(tx, white_label_id, dispute_id);
      invariant(dispute, 'the dispute exists');
      return ok({ dispute, replayed });
    });
  }

  /**
   * The deadline job at `respond_by`: with no evidence the dispute closes for the depositor (or, when
   * another decision already moved the money, for the withdrawer with nothing left to move); with
   * evidence it waits for an operator. A late or repeated run finds nothing to do.
   */
  async deadline(white_label_id: string, dispute_id: string): Promise<void> {
    await this.deps.database.transaction(async (tx) => {
      const found = await repository.findDispute(tx, white_label_id, dispute_id);
      if (!found || found.status !== 'open') return;
      const deposit = await this.deps.deposits.lockOrder(tx, white_label_id, found.deposit_id);
      invariant(deposit, 'a dispute names a deposit of the brand');
      const row = await repository.lockDispute(tx, white_label_id, dispute_id);
      const now = this.deps.clock.now();
      if (!row || row.status !== 'open' || row.respond_by.getTime() > now.getTime()) return;
      if (row.evidence_count > 0) {
        invariant(await repository.updateDispute(tx, { ...row, status: 'awaiting_decision', updated_at: now }, 'open'), 'the dispute is locked');
        return;
      }
      const system: Resolver = { actor: SYSTEM_ACTOR, resolved_by: 'system', resolver_id: null, note: null, cause: SYSTEM_CAUSE };
      const forDepositor = await this.apply(tx, row, deposit, 'depositor', system);
      if (!forDepositor.ok) unwrap(await this.apply(tx, row, deposit, 'withdrawer', system));
    });
  }

  /**
   * Applies an outcome to a locked, unresolved dispute (the deposit's locks and the dispute's are held).
   * Refusals come before anything is written; after them every step must succeed.
   */
  private async apply(tx: Queryable, row: repository.DisputeRow, deposit: DepositRow, outcome: repository.DisputeOutcome, resolver: Resolver): Promise<Result<void>> {
    invariant(row.status !== 'resolved', 'a dispute is resolved once');
    const brand = row.white_label_id;
    const locked = await this.deps.withdrawals.lockForDispute(tx, brand, row.withdrawal_id);
    invariant(locked, 'a dispute names a withdrawal of the brand');
    const leg = locked.legs.find((candidate) => candidate.leg_ref === row.leg_ref);
    invariant(leg, 'a dispute names a leg of its withdrawal');
    let receipt: { leg_ref: string; from: ReceiptState; to: ReceiptState } | undefined;
    let adjustment: string | null = null;

    if (row.kind === 'non_receipt') {
      if (outcome === 'depositor') {
        // A fill reversed meanwhile (an operator reversed the deposit) cannot be confirmed as received.
        if (leg.status !== 'filled') return fail('dispute_not_resolvable', { details: { reason: 'fill_reversed', leg_ref: leg.leg_ref } });
        // Another open dispute on a fill of the same deposit keeps its credit held.
        if (row.clearing_held && (await repository.countOtherHolds(tx, brand, row.deposit_id, row.dispute_id)) === 0) {
          unwrap(await this.deps.settlement.releaseFunds(tx, { white_label_id: brand, deposit_id: row.deposit_id, cause: resolver.cause }));
        }
        receipt = { leg_ref: leg.leg_ref, from: 'disputed', to: 'confirmed' };
      } else if (leg.status === 'filled') {
        // The beneficiary did not get the chunk: the deposit is reversed, which takes the (held) credit
        // back from pending clearing, reverses its fills and pays them again as the ledger design says.
        unwrap(
          await this.deps.settlement.reverse(tx, {
            white_label_id: brand,
            deposit_id: row.deposit_id,
            reason_code: 'MERCHANT_DISPUTE_LOST',
            reason_display_th: REVERSAL_DISPLAY_TH.MERCHANT_DISPUTE_LOST,
            cause: resolver.cause,
          }),
        );
      }
      // Otherwise the fill was reversed already: the withdrawer has its money back, nothing more moves.
    } else if (outcome === 'depositor') {
      // Only an order still in review can be settled with the adjustment; one rejected meanwhile credits no one.
      if (deposit.status !== 'under_review') return fail('dispute_not_resolvable', { details: { reason: 'deposit_not_in_review', deposit_status: deposit.status } });
      // The payee did receive the late transfer: the withdrawing merchant pays for it (it may leave a debt).
      const posted = await this.deps.ledger.post(tx, {
        account: { white_label_id: brand, merchant_id: row.withdrawal_merchant_id, livemode: row.livemode },
        type: 'adjustment',
        amount_minor: row.amount_minor,
        bucket_from: 'available',
        bucket_to: null,
        movement_key: `dispute_adjustment:${row.dispute_id}`,
        source: { type: 'withdrawal_dispute', id: row.dispute_id },
        reason_code: ALLOCATION_CONFLICT_REASON_CODE,
        cause: resolver.cause,
      });
      invariant(posted.ok, 'an adjustment may overdraw available and is never refused');
      adjustment = posted.value.id;
    }
    // An allocation conflict resolved for the withdrawer moves nothing: the review cannot settle the late leg.

    const now = this.deps.clock.now();
    const resolved: repository.DisputeRow = {
      ...row,
      status: 'resolved',
      outcome,
      resolved_by: resolver.resolved_by,
      resolver_id: resolver.resolver_id,
      resolution_note: resolver.note,
      resolved_at: now,
      adjustment_balance_transaction_id: adjustment,
      updated_at: now,
    };
    invariant(await repository.updateDispute(tx, resolved, row.status), 'the dispute is locked');
    await this.recordOnWithdrawal(tx, resolved, 'dispute_resolved', receipt, resolver.cause);
    await this.deps.tenancy.audit(tx, resolver.actor, brand, 'dispute.resolved', 'withdrawal_dispute', row.dispute_id, {
      outcome,
      resolved_by: resolver.resolved_by,
      kind: row.kind,
      note: resolver.note,
      adjustment_balance_transaction_id: adjustment,
    });
    return ok(undefined);
  }
}

/**
 * Which late deposit legs a resolved dispute's adjustment paid (ALLOCATION_CONFLICT: the withdrawer was
 * credited what a late slip paid into a withdrawal that could no longer take it), and the giving back of
 * such an adjustment when the deposit is reversed. The deposit service asks this while it settles and
 * reverses; it reads only the disputes' own rows and posts to the ledger, so it is built before the
 * deposit service and the dispute workflow (`DisputeService`), which calls the deposit service.
 */
export class DisputeCovers implements LegCover {
  constructor(private readonly deps: { clock: Clock; ledger: LedgerService }) {}

  async coveredAmount(db: Queryable, input: { white_label_id: string; deposit_id: string; deposit_leg_ref: string }): Promise<number | null> {
    return (await repository.findStandingCover(db, input.white_label_id, input.deposit_id, input.deposit_leg_ref))?.amount_minor ?? null;
  }

  async reverseCover(tx: Queryable, input: { white_label_id: string; deposit_id: string; deposit_leg_ref: string; cause: EventCause }): Promise<void> {
    const cover = await repository.findStandingCover(tx, input.white_label_id, input.deposit_id, input.deposit_leg_ref);
    if (!cover) return;
    // The deposit's locks are held by the reversal; the dispute row, then the withdrawer's wallet, follow.
    const row = await repository.lockDispute(tx, input.white_label_id, cover.dispute_id);
    invariant(row && row.adjustment_balance_transaction_id && row.adjustment_reversal_balance_transaction_id === null, 'a standing cover is given back once');
    const posted = await this.deps.ledger.post(tx, {
      account: { white_label_id: row.white_label_id, merchant_id: row.withdrawal_merchant_id, livemode: row.livemode },
      type: 'adjustment',
      amount_minor: row.amount_minor,
      bucket_from: null,
      bucket_to: 'available',
      movement_key: `dispute_adjustment_reversal:${row.dispute_id}`,
      source: { type: 'withdrawal_dispute', id: row.dispute_id },
      reason_code: ALLOCATION_CONFLICT_REASON_CODE,
      cause: input.cause,
    });
    invariant(posted.ok, 'a credit cannot be refused');
    const after: repository.DisputeRow = { ...row, adjustment_reversal_balance_transaction_id: posted.value.id, updated_at: this.deps.clock.now() };
    invariant(await repository.updateDispute(tx, after, 'resolved'), 'the dispute is locked');
  }
}


/** The deadline job handler: one short transaction, a no-op once the dispute moved on. */
export function createDisputeJobHandlers(disputes: DisputeService): Record<string, JobHandler> {
  return {
    [DISPUTE_DEADLINE_TASK]: async (job) => {
      await disputes.deadline(String(job.payload.white_label_id), String(job.payload.dispute_id));
    },
  };
}
