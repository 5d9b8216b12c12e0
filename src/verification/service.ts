import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import type { Metrics } from '../ops/metrics.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError } from '../platform/errors.ts';
import { formatTimestamp, MINUTE_MS } from '../platform/time.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { findBank } from '../banks/service.ts';
import type { JobHandler } from '../jobs/index.ts';
import { LegsChangedMeanwhile, senderVerified, type DepositService, type PaymentParties } from '../deposits/service.ts';
import type { SettlementService } from '../settlement/service.ts';
import type { DepositStatus, ReviewReason, VerificationBooleans } from '../deposits/types.ts';
import { MAX_RECEIPTS_PER_ORDER, PROCESS_SLIP_TASK, type SlipsService, type StoredEvidence } from '../slips/service.ts';
import type { SlipReceiptRow } from '../slips/types.ts';
import type { BankVerifier, TransferLookup, UnavailableReason, VerifiedTransfer } from './bank-port.ts';
import { accountsMatch, assess, type Assessment } from './checks.ts';
import { fourEyesRequired, policyHolds } from '../deposits/policy.ts';
import { orderReasons, reviewReason } from './reasons.ts';
import { parseSlipPayload, type SlipReference } from './slip-payload.ts';
import type { SlipReader } from './slip-reader.ts';
import * as repository from './repository.ts';
import { PlannedRead } from '../platform/read-part.ts';

/**
 * The slip pipeline after the 202 (spec, "How the result arrives after a 202"): a consumer claims each
 * receipt, moves the order to `slip_processing` (`deposit.slip_received`), reads the slip's mini-QR (the
 * client's `payload` when given and valid, else the pixels), asks the bank for the transfer it names,
 * runs the six checks against the order, and ends the slip in one of the spec's outcomes through the
 * deposit service's settlement functions, which are the only way money moves.
 *
 * Receipts of one order are processed one at a time in arrival order, each in two steps that never hold
 * a transaction across I/O: read the head receipt, its slip and the bank's answer (no transaction), then
 * claim and decide (one transaction, which re-checks that the receipt is still the head). Both events,
 * `deposit.slip_received` and the outcome's, are written in that order by the one commit. A crash between
 * the steps leaves nothing behind, and the job's retry starts again; a repeated step finds the receipt done
 * and changes nothing.
 *
 * When the bank cannot answer, the claim is committed alone (the order shows `slip_processing`) and the
 * job retries with the queue's backoff, resuming at the claimed receipt; after BANK_CHECK_WAIT_MS the slip
 * goes to review with BANK_DISABLED ("bank checking is off") instead of waiting longer.
 */

/** How long a slip waits for an unreachable bank before a person is asked to check it instead. */
export const BANK_CHECK_WAIT_MS = 5 * MINUTE_MS;

/**
 * Thrown at the deciding transaction's flush when another order claimed the slip's transfer after the
 * transaction read it unclaimed (`deferTransferClaim`): the decision is taken again, as a duplicate.
 */
export class TransferClaimedMeanwhile extends Error {
  override name = 'TransferClaimedMeanwhile';
  constructor() {
    super('another order claimed the transfer while this slip was being decided');
  }
}

/** How many times one receipt is decided in a run: the first decision and a retry for each reason in `processHead`. */
const DECIDE_MAX_ATTEMPTS = 4;

/** Thrown to have the job retried later: the bank gave no answer and the wait is not over. */
export class BankCheckPending extends Error {
  override name = 'BankCheckPending';
  constructor(reason: UnavailableReason) {
    super(`bank verification unavailable (${reason}); the slip waits and is asked about again`);
  }
}

export interface VerificationDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  slips: SlipsService;
  deposits: DepositService;
  /** Settles, reverses and records the payments of an order: the layer above deposits, withdrawals and the ledger. */
  settlement: SettlementService;
  reader: SlipReader;
  /** The bank-verification adapter of a brand and environment: the sandbox bank for test mode, the brand's provider(s) for live. */
  verifierFor: (scope: { white_label_id: string; livemode: boolean }) => BankVerifier;
  /** Opens the dispute of an allocation conflict (the disputes module, built before this service). */
  allocation_conflicts: AllocationConflictHandler;
}

/**
 * What happens beside the review when a late slip paid a leg whose withdrawal could not take it again
 * (ALLOCATION_CONFLICT): the disputes module opens a dispute on that withdrawal, in the transaction that
 * sends the order to review (which holds the order's locks).
 */
export type AllocationConflictHandler = (
  tx: Queryable,
  input: { white_label_id: string; deposit_id: string; deposit_leg_ref: string; withdrawal_id: string; withdrawal_leg_ref: string; amount_minor: number; cause: EventCause },
) => Promise<void>;

/** What the consumer does with a claimed receipt, by the order's status when it was claimed. */
type Mode = 'pipeline' | 'attached' | 'after_settlement';

/** The mode of a receipt claimed by an earlier run that did not finish, by its order's status now. */
function modeOfClaimed(status: DepositStatus): Mode {
  return status === 'slip_processing' ? 'pipeline' : status === 'settled' ? 'after_settlement' : 'attached';
}

/** How the slip's reference was read, and what the bank said: kept on the receipt, without personal data. */
interface Reading {
  reference: SlipReference | null;
  source: 'client_payload' | 'pixels' | 'reference_fields' | null;
  unreadable_reason: string | null;
  reference_only: boolean;
  lookup: Exclude<TransferLookup, { outcome: 'bank_disabled' }> | { outcome: 'bank_disabled'; bank_code: string; cause: 'bank_unavailable' | 'verification_unavailable' } | null;
}

function transferRecord(transfer: VerifiedTransfer): Record<string, unknown> {
  return { ...transfer, occurred_at: formatTimestamp(transfer.occurred_at) };
}

export class VerificationService {
  constructor(private readonly deps: VerificationDependencies) {}

  /**
   * V as the bank verified it for an order: the sum of the transfers its slips claimed (each transfer
   * counts for one order only, the duplicate check). Zero when no slip of the order was verified.
   */
  async verifiedAmountOf(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ amount_minor: number; transfers: number }> {
    const transfers = await repository.transfersOfDeposit(db, white_label_id, deposit_id);
    const amount_minor = transfers.reduce((sum, transfer) => sum + transfer.amount_minor, 0);
    invariant(Number.isSafeInteger(amount_minor) && amount_minor >= 0, 'verified transfers sum to whole satang');
    return { amount_minor, transfers: transfers.length };
  }

  /**
   * The bank-verified transfers an order's slips claimed (sending bank, the bank's transaction reference, amount,
   * when), for the back office's order page.
   */
  transfersOf(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ sending_bank_code: string; trans_ref: string; amount_minor: number; receipt_id: string; created_at: Date }[]> {
    return repository.transfersOfDeposit(db, white_label_id, deposit_id);
  }

  /** The orders of a brand whose slips claimed a transfer with this bank reference (the console's search), at most `limit`. */
  depositIdsOfTransferReference(db: Queryable, white_label_id: string, trans_ref: string, limit: number): Promise<string[]> {
    return repository.depositIdsOfTransferReference(db, white_label_id, trans_ref, limit);
  }

  /** Instantiates the QR decoder before the worker takes slips: a broken deployment fails at start. */
  warmUp(): Promise<void> {
    return this.deps.reader.warmUp();
  }

  /** The job handler: processes the order's unprocessed receipts, oldest first. */
  jobHandlers(): Record<string, JobHandler> {
    return {
      [PROCESS_SLIP_TASK]: async (job) => {
        const receipt_id = typeof job.payload.receipt_id === 'string' ? job.payload.receipt_id : null;
        await this.processOrder(String(job.payload.white_label_id), String(job.payload.deposit_id), receipt_id);
      },
    };
  }

  /**
   * Processes the unprocessed receipts of an order in arrival order (there are at most three). Each
   * receipt's job runs this; a job whose receipt an earlier job already processed finds nothing to do.
   *
   * A job that names its receipt (`receipt_id`) stops once this run has recorded that receipt's outcome,
   * instead of opening one more transaction only to find the queue empty. Every later receipt has a job of
   * its own, enqueued in the transaction that stored it, so it is claimable only after that receipt is
   * visible, and its job processes it. A run that did not record its own receipt (another run of the same
   * receipt was first, or the head was an older receipt) keeps going as before, so that no receipt is left
   * behind a run that took over its predecessor.
   */
  async processOrder(white_label_id: string, deposit_id: string, receipt_id: string | null = null): Promise<void> {
    for (let round = 0; round < MAX_RECEIPTS_PER_ORDER; round += 1) {
      const processed = await this.processHead(white_label_id, deposit_id);
      if (processed === null) return;
      if (receipt_id !== null && processed.concluded === receipt_id) return;
    }
  }

  /**
   * Processes the oldest unprocessed receipt of the order: null when there is none, else the receipt whose
   * outcome this run recorded (`concluded`), or null there when another run recorded it first.
   *
   * The slip is read and the bank asked first, outside any transaction, from the head receipt as a plain read
   * sees it; then one transaction locks the receipt, checks it is still the head, claims it (the order's
   * `slip_processing` and `deposit.slip_received`) and decides it. When the bank gives no answer yet (or the
   * reading fails), the claim is committed alone, as the spec's consumer claims a slip after its 202, so that
   * the order shows `slip_processing` while the job waits to try again; the next run decides the claimed receipt.
   */
  private async processHead(white_label_id: string, deposit_id: string): Promise<{ concluded: string | null } | null> {
    const head = await this.deps.slips.peekHeadOfQueueWithEvidence(this.deps.database, white_label_id, deposit_id);
    if (head === null) return null;
    let reading: Reading;
    try {
      reading = await this.read(head.receipt, head.stored);
    } catch (error) {
      // A receipt claimed by an earlier run (the bank did not answer then either) stays as it is.
      if (head.receipt.status !== 'claimed') await this.deps.database.transaction((tx) => this.claimAlone(tx, white_label_id, deposit_id));
      throw error;
    }
    const decide = (allocation_conflict: boolean, conflict_leg_ref: string | null = null) =>
      this.deps.database.transaction((tx) => this.decide(tx, head.receipt, reading, allocation_conflict, conflict_leg_ref));
    let allocationConflict = false;
    let conflictLegRef: string | null = null;
    // A decision rolled back for one of the reasons below is taken again, knowing why: an allocation conflict
    // (then decided as such), a transfer claimed meanwhile (its holder is then known), legs changed while the
    // order's lock was waited for (the lock is then held by no one, or by another change of the same kind).
    for (let attempt = 1; ; attempt += 1) {
      try {
        const concluded = await decide(allocationConflict, conflictLegRef);
        return { concluded: concluded ? head.receipt.receipt_id : null };
      } catch (error) {
        if (attempt >= DECIDE_MAX_ATTEMPTS) throw error;
        if (error instanceof ApiError && error.code === 'alloc_state_conflict' && !allocationConflict) {
          // A late slip whose destination went to another payment meanwhile: settling rolled back whole,
          // and the slip goes to a person instead (ALLOCATION_CONFLICT); the refusal names the deposit leg.
          allocationConflict = true;
          conflictLegRef = typeof error.details.leg_ref === 'string' ? error.details.leg_ref : null;
        } else if (!(error instanceof TransferClaimedMeanwhile) && !(error instanceof LegsChangedMeanwhile)) {
          throw error;
        }
      }
    }
  }

  /**
   * The claim committed on its own, for a slip the bank has not answered about yet: the head receipt and its
   * order locked in one statement (the receipt first, as the lock order says), then `claim`.
   */
  private async claimAlone(tx: Queryable, white_label_id: string, deposit_id: string): Promise<void> {
    const orderLock = this.deps.deposits.orderLockRead(white_label_id, deposit_id);
    const head = await this.deps.slips.headOfQueue(tx, white_label_id, deposit_id, [orderLock.part]);
    if (!head) return;
    const order = await this.deps.deposits.lockForSlip(tx, white_label_id, deposit_id, orderLock);
    invariant(order, 'a receipt belongs to an order');
    await this.claim(tx, head.receipt, order, { mark_claimed: true, uploads: head.uploads });
  }

  /**
   * Claims the locked head receipt, its order locked too. The order moves as the state table says:
   * `awaiting_payment` / `expired` → `slip_processing`, `canceled` → `under_review` (CANCELED_ORDER_SLIP);
   * a slip for an order in review is attached to it; a settled order keeps its status (the slip may be a
   * transfer after settlement). A receipt already claimed by a run that did not finish is resumed. Answers
   * what is done with the slip next, or null when the receipt is concluded here (refused). `mark_claimed`
   * records the claim on the receipt, for a claim committed before its decision.
   */
  private async claim(
    tx: Queryable,
    receipt: SlipReceiptRow,
    order: { status: DepositStatus; merchant_id: string; livemode: boolean },
    /** `uploads`: the slips the order has had, which its `attempts_left` counts (spec: at most 3 uploads). */
    options: { mark_claimed: boolean; uploads: number },
  ): Promise<Mode | null> {
    // The order's tenant must be the one the capability named when the slip was taken.
    invariant(order.merchant_id === receipt.merchant_id && order.livemode === receipt.livemode, 'a receipt stays with its order');
    const status = order.status;
    if (receipt.status === 'claimed') return modeOfClaimed(status);
    const input = { white_label_id: receipt.white_label_id, deposit_id: receipt.deposit_id, received_at: receipt.received_at, uploads: options.uploads, cause: SYSTEM_CAUSE };
    let mode: Mode;
    switch (status) {
      case 'awaiting_payment':
      case 'expired':
      case 'canceled': {
        const received = await this.deps.deposits.markSlipReceived(tx, input);
        if (!received.ok) {
          await this.deps.slips.complete(tx, receipt, { outcome: `refused_${received.error.code}`, verification: null, transfer: null });
          return null;
        }
        mode = received.value.status === 'under_review' ? 'attached' : 'pipeline';
        break;
      }
      case 'under_review': {
        const attached = await this.deps.deposits.attachSlipToReview(tx, input);
        invariant(attached.ok, 'an order in review takes a slip');
        mode = 'attached';
        break;
      }
      case 'settled':
        mode = 'after_settlement';
        break;
      default:
        // Rejected, reversed: nothing a slip can change (the intake refuses these; this is the race).
        await this.deps.slips.complete(tx, receipt, { outcome: 'not_applicable', verification: null, transfer: null });
        return null;
    }
    if (options.mark_claimed) await this.deps.slips.markClaimed(tx, receipt);
    return mode;
  }

  /**
   * Outside any transaction: the slip's reference, and the bank's answer about it. The image is the one read
   * with the head receipt (`stored`), when the blob store let it.
   */
  private async read(receipt: SlipReceiptRow, stored: StoredEvidence | null): Promise<Reading> {
    const evidence = await this.deps.slips.openEvidence(this.deps.database, receipt, stored);
    const reading: Reading = { reference: null, source: null, unreadable_reason: null, reference_only: evidence.image === null, lookup: null };
    if (evidence.image === null) {
      const fields = evidence.fields;
      invariant(fields?.trans_ref !== undefined && fields.sending_bank_code !== undefined, 'a reference-only slip has its reference');
      reading.reference = { sending_bank_code: fields.sending_bank_code, trans_ref: fields.trans_ref };
      reading.source = 'reference_fields';
    } else {
      const given = evidence.fields?.payload === undefined ? null : parseSlipPayload(evidence.fields.payload);
      if (given?.ok) {
        reading.reference = given.reference;
        reading.source = 'client_payload';
      } else {
        const read = await this.deps.reader.read(evidence.image.bytes);
        if (read.outcome === 'read') {
          reading.reference = read.reference;
          reading.source = 'pixels';
        } else {
          reading.unreadable_reason = read.reason;
        }
      }
    }
    if (reading.reference === null) return reading;
    const bank = await findBank(this.deps.database, reading.reference.sending_bank_code);
    if (!bank) {
      // A mini-QR naming a bank that does not exist names no transfer either.
      reading.lookup = { outcome: 'not_found' };
      return reading;
    }
    if (!bank.available) {
      reading.lookup = { outcome: 'bank_disabled', bank_code: reading.reference.sending_bank_code, cause: 'bank_unavailable' };
      return reading;
    }
    const lookup = await this.deps.verifierFor({ white_label_id: receipt.white_label_id, livemode: receipt.livemode }).verifyTransfer({
      white_label_id: receipt.white_label_id,
      livemode: receipt.livemode,
      sending_bank_code: reading.reference.sending_bank_code,
      trans_ref: reading.reference.trans_ref,
    });
    if (lookup.outcome === 'bank_disabled') {
      // A provider whose account needs an operator (quota used up, credentials refused) is no answer about
      // the bank: the slip goes to a person at once, as verification_unavailable, since waiting cannot help.
      const cause = lookup.operator_alert === undefined ? 'bank_unavailable' : 'verification_unavailable';
      reading.lookup = { outcome: 'bank_disabled', bank_code: reading.reference.sending_bank_code, cause };
      return reading;
    }
    if (lookup.outcome === 'unavailable') {
      const waited = this.deps.clock.now().getTime() - receipt.received_at.getTime();
      if (waited < BANK_CHECK_WAIT_MS) throw new BankCheckPending(lookup.reason);
      reading.lookup = { outcome: 'bank_disabled', bank_code: reading.reference.sending_bank_code, cause: 'verification_unavailable' };
      return reading;
    }
    reading.lookup = lookup;
    return reading;
  }

  /**
   * The claim and the outcome, in one transaction, for the receipt read before it: true when this run recorded
   * the outcome, false when another run had (the receipt is no longer the order's head). The locks are those
   * of a settlement, taken before anything changes: the receipt with the order, the withdrawals the legs name,
   * then the feeds (src/platform/lock-order.ts); the claim is a change of the order alone, which may then widen.
   */
  private async decide(tx: Queryable, peeked: SlipReceiptRow, reading: Reading, allocation_conflict: boolean, conflict_leg_ref: string | null = null): Promise<boolean> {
    // The order's lock and the withdrawals its legs name ride on the receipt's statement, in the lock order.
    const orderLock = this.deps.deposits.settlementLockRead(peeked.white_label_id, peeked.deposit_id);
    const head = await this.deps.slips.headOfQueue(tx, peeked.white_label_id, peeked.deposit_id, [orderLock.part]);
    // Another run of this receipt finished first: its outcome stands.
    if (!head || head.receipt.receipt_id !== peeked.receipt_id) return false;
    const receipt = head.receipt;
    const order = await this.deps.deposits.lockForSlip(tx, receipt.white_label_id, receipt.deposit_id, orderLock);
    invariant(order, 'a receipt belongs to an order');
    // Who holds the slip's transfer already (the duplicate check) rides on the order's feed-lock statement.
    // A slip for a settled order is checked after settlement, which reads its transfer itself.
    const found = reading.lookup?.outcome === 'found' && order.status !== 'settled' ? reading.lookup.transfer : null;
    const holderRead =
      found === null
        ? null
        : new PlannedRead(repository.transferHolderPart({ white_label_id: receipt.white_label_id, livemode: receipt.livemode, sending_bank_code: found.sending_bank_code, trans_ref: found.trans_ref }));
    const locked = await this.deps.deposits.lockPaymentParties(tx, receipt.white_label_id, receipt.deposit_id, holderRead === null ? [] : [holderRead.part]);
    invariant(locked, 'a receipt belongs to an order');
    const mode = await this.claim(tx, receipt, order, { mark_claimed: false, uploads: head.uploads });
    if (mode === null) return true;
    invariant(mode !== 'after_settlement' || found === null, 'a slip after settlement reads no transfer holder');
    // The claim changed the order (slip_processing, a review, an attached slip); the checks read it as it is now.
    const parties = receipt.status === 'claimed' ? locked.parties : await this.deps.deposits.partiesAfterOwnChange(tx, locked.parties);
    const record = {
      source: reading.source,
      unreadable_reason: reading.unreadable_reason,
      bank: reading.lookup === null ? null : reading.lookup.outcome,
    };
    const finish = async (outcome: string, extra: Record<string, unknown> = {}, transfer: VerifiedTransfer | null = null): Promise<true> => {
      await this.deps.slips.complete(tx, receipt, { outcome, verification: { ...record, ...extra }, transfer: transfer === null ? null : transferRecord(transfer) });
      // Counted before the commit: a commit that then fails is retried and counted again. The counter is
      // an operator's rate of outcomes, not a record; the receipt row is the record.
      this.deps.metrics.slips_processed_total.inc({ outcome, source: reading.source ?? 'none' });
      this.deps.metrics.slip_processing_delay_seconds.observe((this.deps.clock.now().getTime() - receipt.received_at.getTime()) / 1000);
      this.deps.logger.info({ receipt_id: receipt.receipt_id, deposit_id: receipt.deposit_id, outcome, source: reading.source, bank: record.bank }, 'slip processed');
      return true;
    };
    const target = { white_label_id: receipt.white_label_id, deposit_id: receipt.deposit_id, cause: SYSTEM_CAUSE };
    const fourEyes = fourEyesRequired(parties.order, parties.four_eyes_min_amount_minor);
    const policy_hold = policyHolds(parties.order, parties.policy_hold_min_amount_minor);
    const toReview = async (reasons: ReviewReason[], verification?: VerificationBooleans) => {
      const reviewed = await this.deps.deposits.sendToReview(tx, { ...target, reasons: orderReasons(reasons), four_eyes_required: fourEyes, ...(verification ? { verification } : {}) });
      invariant(reviewed.ok, 'an order processing a slip can go to review');
    };

    if (reading.reference === null) {
      if (mode === 'pipeline') {
        const rejected = await this.deps.deposits.markSlipUnreadable(tx, target);
        invariant(rejected.ok, 'an order processing a slip can reject an unreadable one');
      }
      return finish('unreadable');
    }
    const lookup = reading.lookup;
    invariant(lookup !== null && lookup.outcome !== 'unavailable', 'a read slip has the bank answer');
    if (lookup.outcome !== 'found') {
      const reasons = [lookup.outcome === 'bank_disabled' ? reviewReason('BANK_DISABLED', { bank_code: lookup.bank_code, cause: lookup.cause }) : reviewReason('TRANSFER_NOT_FOUND')];
      if (reading.reference_only) reasons.push(reviewReason('NO_SLIP_IMAGE'));
      if (policy_hold) reasons.push(reviewReason('POLICY_HOLD'));
      if (mode === 'pipeline') await toReview(reasons);
      return finish(mode === 'pipeline' ? 'under_review' : mode === 'attached' ? 'attached_to_review' : 'not_verified', { reasons: reasons.map((reason) => reason.code) });
    }

    const transfer = lookup.transfer;
    const scope = { white_label_id: receipt.white_label_id, livemode: receipt.livemode, sending_bank_code: transfer.sending_bank_code, trans_ref: transfer.trans_ref };
    if (mode === 'after_settlement') return this.afterSettlement(tx, receipt, parties, transfer, finish);

    const assessWith = (duplicate: boolean): Assessment =>
      assess({ order: parties.order, legs: parties.legs, sender: parties.sender, transfer, duplicate, reference_only: reading.reference_only, policy_hold, now: this.deps.clock.now() });
    // The transfer is claimed for this order only when one of its legs received it: a slip of someone
    // else's transfer (wrong receiver) must not block that transfer's own order. The holder was read with
    // the feed locks; an unclaimed transfer is claimed with the transaction's last writes, and one claimed
    // by another order in between rolls this decision back to be taken again (TransferClaimedMeanwhile).
    const carriedHolder = holderRead === null ? ({ found: false } as const) : holderRead.take();
    const holder = carriedHolder.found ? carriedHolder.value : await repository.findTransfer(tx, scope);
    const held = holder !== null && holder.receipt_id !== receipt.receipt_id ? holder : null;
    let assessment = assessWith(false);
    if (assessment.leg_ref !== null && holder === null) {
      await repository.deferTransferClaim(
        tx,
        { ...scope, deposit_id: receipt.deposit_id, receipt_id: receipt.receipt_id, amount_minor: transfer.amount_minor, created_at: this.deps.clock.now() },
        () => new TransferClaimedMeanwhile(),
      );
    }
    if (held !== null) assessment = assessWith(true);
    const summary = { booleans: assessment.verification, reasons: assessment.reasons.map((reason) => reason.code), leg_ref: assessment.leg_ref, duplicate: held !== null };
    if (mode === 'attached') return finish('attached_to_review', summary, transfer);

    if (allocation_conflict) {
      await toReview([reviewReason('ALLOCATION_CONFLICT'), ...assessment.reasons], assessment.verification);
      const conflicted = parties.legs.find((leg) => leg.leg_ref === conflict_leg_ref && leg.destination === 'withdrawal');
      if (conflicted?.withdrawal_id && conflicted.withdrawal_leg_ref) {
        // What the slip paid into that leg (at most the leg): the amount the withdrawer is asked about.
        const paid = assessment.paid_by_leg[conflicted.leg_ref] ?? assessment.transferred_minor;
        await this.deps.allocation_conflicts(tx, {
          white_label_id: receipt.white_label_id,
          deposit_id: receipt.deposit_id,
          deposit_leg_ref: conflicted.leg_ref,
          withdrawal_id: conflicted.withdrawal_id,
          withdrawal_leg_ref: conflicted.withdrawal_leg_ref,
          amount_minor: Math.min(paid, conflicted.amount_minor),
          cause: SYSTEM_CAUSE,
        });
      }
      return finish('under_review', { ...summary, reasons: ['ALLOCATION_CONFLICT', ...summary.reasons] }, transfer);
    }
    switch (assessment.next) {
      case 'review':
        await toReview(assessment.reasons, assessment.verification);
        return finish('under_review', summary, transfer);
      case 'wait': {
        const recorded = await this.deps.settlement.recordLegPayments(tx, { ...target, paid_by_leg: assessment.paid_by_leg, verification: assessment.verification });
        invariant(recorded.ok, 'an order processing a slip records a paid leg');
        return finish('leg_paid', summary, transfer);
      }
      case 'settle': {
        const settled = await this.deps.settlement.settle(tx, {
          ...target,
          transferred_amount_minor: assessment.transferred_minor,
          paid_by_leg: assessment.paid_by_leg,
          settled_via: 'auto',
          verification: assessment.verification,
          sender_verified: senderVerified(assessment.verification),
          read_ahead: locked.read_ahead,
        });
        invariant(settled.ok, 'an order processing a verified slip settles');
        return finish('settled', summary, transfer);
      }
      default: {
        const unknown: never = assessment.next;
        throw new Error(`unknown assessment ${String(unknown)}`);
      }
    }
  }

  /**
   * A slip for a settled order: a new transfer that reached one of the order's receivers is money paid
   * after settlement (a claim and `deposit.overpaid`, status unchanged, V and A untouched); the order's
   * own transfer again, another order's transfer, or money sent elsewhere changes nothing.
   */
  private async afterSettlement(
    tx: Queryable,
    receipt: SlipReceiptRow,
    parties: PaymentParties,
    transfer: VerifiedTransfer,
    finish: (outcome: string, extra?: Record<string, unknown>, transfer?: VerifiedTransfer | null) => Promise<true>,
  ): Promise<true> {
    const received = parties.legs.some(
      (leg) => leg.receiver !== null && leg.receiver.bank_code === transfer.receiver.bank_code && accountsMatch(transfer.receiver.account_number, leg.receiver.account_number),
    );
    if (!received) return finish('ignored_after_settlement', { reasons: ['RECEIVER_MISMATCH'] }, transfer);
    const holder = await repository.claimTransfer(tx, {
      white_label_id: receipt.white_label_id,
      livemode: receipt.livemode,
      sending_bank_code: transfer.sending_bank_code,
      trans_ref: transfer.trans_ref,
      deposit_id: receipt.deposit_id,
      receipt_id: receipt.receipt_id,
      amount_minor: transfer.amount_minor,
      created_at: this.deps.clock.now(),
    });
    if (holder.receipt_id !== receipt.receipt_id) return finish('ignored_after_settlement', { reasons: ['DUPLICATE_SLIP'] }, transfer);
    const recorded = await this.deps.settlement.recordAdditionalTransfer(tx, {
      white_label_id: receipt.white_label_id,
      deposit_id: receipt.deposit_id,
      amount_minor: transfer.amount_minor,
      slip_received_at: receipt.received_at,
      transfer_key: `${transfer.sending_bank_code}:${transfer.trans_ref}`,
      cause: SYSTEM_CAUSE,
    });
    invariant(recorded.ok, 'a settled order records a transfer after settlement');
    return finish('additional_transfer', {}, transfer);
  }
}
