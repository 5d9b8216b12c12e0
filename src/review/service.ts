import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError, fail, ok, type Result } from '../platform/errors.ts';
import { ID_PREFIXES, newId } from '../platform/ids.ts';
import { formatTimestamp } from '../platform/time.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import type { EventCause } from '../platform/cause.ts';
import type { Actor } from '../platform/access.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { DepositService, DepositView } from '../deposits/service.ts';
import type { SettlementService } from '../settlement/service.ts';
import type { DepositAccount, DepositRow, ReviewObject } from '../deposits/types.ts';
import type { ReviewedReceipt, SlipsService } from '../slips/service.ts';
import type { VerificationService } from '../verification/service.ts';
import { rejectionOf, REVERSAL_DISPLAY_TH, type RejectionCode, type ReversalReasonCode } from './catalogue.ts';
import * as repository from './repository.ts';


/** The queue's counts are read up to this many orders; past it the desk says "more than". */
export const QUEUE_COUNT_LIMIT = 1000;

/** A count of the queue, read up to QUEUE_COUNT_LIMIT: `more` when there are more than `count`. */
export type QueueCount<T extends object> = T & { count: number; more: boolean };

/**
 * The review desk (issue 11): the queue of orders in review, what a reviewer reads about one, and the
 * decisions (approve, with four eyes where policy says; reject; escalate), each applied through the
 * deposit service's transitions and recorded with its audit row in one transaction. Also the
 * merchant's side of a review (evidence, force-complete) and the operator's reversal of a settled order.
 *
 * A decision locks the order first (DepositService.lockOrder: the order row, then the feeds of its
 * merchants), so two reviewers deciding at once are serialised: the second finds the review decided and
 * gets `review_already_decided`. The database backs four eyes with a unique index (one approval per
 * person per review) and a review's single outcome with another.
 *
 * The rules that compare reviewers compare people (staff identities, migration 0027), never credentials,
 * since one person may hold several (issue 28): the same person cannot give both approvals of a four-eyes
 * review, and whoever escalated a review does not decide it (`escalation_same_reviewer`), whichever of
 * their credentials they use.
 *
 * The service also decides some reviews itself (the sandbox's desk, scenario 102.00 THB): a `system` actor,
 * not a credential, so there is no person behind it and its decisions carry a null `staff_id` (the rule
 * `review_decisions_staff_iff_credential` of migration 0027 holds the database to that). Such a decision is
 * never the same person as anyone's; the system desk itself is one approver, named by its reviewer id, so
 * it approves a review once and its approval counts once (approverOf).
 */

/** Evidence items a merchant may attach to one order, and force-complete requests it may make. */
export const MAX_EVIDENCE_PER_ORDER = 20;
export const MAX_FORCE_COMPLETES_PER_ORDER = 5;

export interface ReviewDependencies {
  database: Database;
  clock: Clock;
  deposits: DepositService;
  /** Settles, reverses and records the payments of an order: the layer above deposits, withdrawals and the ledger. */
  settlement: SettlementService;
  slips: SlipsService;
  verification: VerificationService;
  tenancy: TenancyService;
}

/** Who decides, and how their request can be recognised when it is retried. */
export interface Reviewer {
  actor: Actor;
  reviewer_id: string;
  request_id: string;
  idempotency_key: string | null;
}

/**
 * A reviewer with the person behind their credential, as the rules of a decision compare them; `staff_id`
 * is null for the service's own desk (a `system` actor), which decides without a credential or a person.
 */
type Decider = Reviewer & { staff_id: string | null };

export type Decision =
  | { action: 'approve'; note: string | null; verified_amount_minor: number | null }
  | { action: 'reject'; note: string; rejection_code: RejectionCode }
  | { action: 'escalate'; note: string };

/** One line of an order's queue entry: enough to pick the next order to work on. */
export interface ReviewQueueItem {
  object: 'review';
  deposit_id: string;
  merchant_id: string;
  livemode: boolean;
  amount_minor: number;
  opened_at: string;
  escalated: boolean;
  four_eyes_required: boolean;
  reasons: string[];
  estimated_resolution_bucket: ReviewObject['estimated_resolution_bucket'];
}

/** Everything a reviewer reads about one order. */
export interface ReviewDetail {
  object: 'review_detail';
  deposit_id: string;
  merchant_id: string;
  livemode: boolean;
  deposit: DepositView;
  /** V as the bank verified it from the order's slips (0 when none was verified). */
  bank_verified_amount_minor: number;
  approvals_required: number;
  /**
   * The approvals that count toward the decision: none by a person who escalated the review. `staff_id` is
   * null for an approval the service made itself (the sandbox's desk), which has no person.
   */
  approvals: { reviewer_id: string; staff_id: string | null; verified_amount_minor: number | null; amount_source: string | null; created_at: string }[];
  slips: (ReviewedReceipt & { image_url: string | null })[];
  evidence: { evidence_id: string; kind: string; reference: string; note: string; created_at: string }[];
  force_complete_requests: { request_id: string; claimed_verified_amount_minor: number; derived_verified_amount_minor: number; note: string; created_at: string }[];
  decisions: {
    decision_id: string;
    action: repository.DecisionAction;
    effect: repository.DecisionEffect;
    reviewer_id: string;
    /** Null for a decision the service made itself (the sandbox's desk), which has no person. */
    staff_id: string | null;
    note: string | null;
    rejection_code: string | null;
    verified_amount_minor: number | null;
    amount_source: string | null;
    review_opened_at: string;
    created_at: string;
  }[];
}

export interface DecisionOutcome {
  /** The decision row; null only for an escalation made outside the desk (there is no row to name). */
  decision_id: string | null;
  effect: repository.DecisionEffect;
  /** True when this answers a retried request (or the same decision repeated) and nothing changed. */
  replayed: boolean;
}

function causeOf(reviewer: Reviewer): EventCause {
  return { request_id: reviewer.request_id, idempotency_key: reviewer.idempotency_key, api_version: CURRENT_API_VERSION };
}

/**
 * Who made a decision, as the same-person rules compare deciders: the person behind the credential, or, for
 * a decision the service made itself (no person, null `staff_id`), the system reviewer as one approver of
 * its own. Comparing the null `staff_id`s themselves would make every system decision the same person as
 * every other, and comparing reviewer ids would let one person approve twice through two credentials; the
 * prefixes keep a person and a system reviewer from ever being taken for each other.
 */
function approverOf(decision: { reviewer_id: string; staff_id: string | null }): string {
  return decision.staff_id === null ? `system:${decision.reviewer_id}` : `person:${decision.staff_id}`;
}

/**
 * The deciders (approverOf) who escalated a review. An escalation asks someone else to decide, so its author
 * takes no part in the decision: they may not approve or reject, and an approval they gave before escalating
 * no longer counts (their escalation says they doubt it).
 */
function escalatorsOf(thisReview: readonly repository.DecisionRow[]): Set<string> {
  return new Set(thisReview.filter((decision) => decision.action === 'escalate').map(approverOf));
}

/** The approvals of one review that count toward its decision: one per approver, none by one who escalated it. */
function countedApprovals(thisReview: readonly repository.DecisionRow[]): repository.DecisionRow[] {
  const escalators = escalatorsOf(thisReview);
  return thisReview.filter((decision) => decision.action === 'approve' && !escalators.has(approverOf(decision)));
}

function validationError(path: string, reason: string, hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [hint === undefined ? { path, reason } : { path, reason, hint }] } });
}

export class ReviewService {
  constructor(private readonly deps: ReviewDependencies) {}

  /** The brand's queue, oldest entry first, filterable by reason code and by escalation. */
  async queue(db: Queryable, white_label_id: string, filters: Omit<Parameters<DepositService['reviewQueue']>[2], 'limit'> & { limit: number }): Promise<ReviewQueueItem[]> {
    const entries = await this.queueWithReferences(db, white_label_id, filters);
    return entries.map(({ merchant_reference: _reference, ...item }) => item);
  }

  /** The queue with each order's `merchant_reference`, which the console shows beside the order id. */
  async queueWithReferences(
    db: Queryable,
    white_label_id: string,
    filters: Omit<Parameters<DepositService['reviewQueue']>[2], 'limit'> & { limit: number },
  ): Promise<(ReviewQueueItem & { merchant_reference: string })[]> {
    const entries = await this.deps.deposits.reviewQueue(db, white_label_id, filters);
    return entries.map(({ row }) => {
      invariant(row.review, 'an order in review has its review');
      return {
        object: 'review',
        deposit_id: row.deposit_id,
        merchant_id: row.merchant_id,
        livemode: row.livemode,
        amount_minor: row.amount_minor,
        opened_at: row.review.opened_at,
        escalated: row.review.escalated,
        four_eyes_required: row.review.four_eyes_required,
        reasons: row.review.reasons.map((reason) => reason.code),
        estimated_resolution_bucket: row.review.estimated_resolution_bucket,
        merchant_reference: row.merchant_reference,
      };
    });
  }

  /**
   * How many of the brand's orders in review name each reason code (the queue's counts per reason), each counted
   * up to QUEUE_COUNT_LIMIT: `more` says there are more than `count`. A page of the desk reads a bounded amount
   * however long the backlog; the exact backlog is the operations gauge `reviews_open`.
   */
  async queueCountsByReason(db: Queryable, white_label_id: string, livemode: boolean | null): Promise<QueueCount<{ reason_code: string }>[]> {
    const counts = await this.deps.deposits.countInReviewByReason(db, white_label_id, livemode, QUEUE_COUNT_LIMIT + 1);
    return counts.map((entry) => ({ reason_code: entry.reason_code, count: Math.min(entry.count, QUEUE_COUNT_LIMIT), more: entry.count > QUEUE_COUNT_LIMIT }));
  }

  /** How many of the brand's orders wait in review, in one environment or (null) both, counted up to QUEUE_COUNT_LIMIT. */
  async queueTotal(db: Queryable, white_label_id: string, livemode: boolean | null): Promise<QueueCount<object>> {
    const count = await this.deps.deposits.countInReviewUpTo(db, white_label_id, livemode, QUEUE_COUNT_LIMIT + 1);
    return { count: Math.min(count, QUEUE_COUNT_LIMIT), more: count > QUEUE_COUNT_LIMIT };
  }

  /** One order as a reviewer reads it; null when it is not an order of this brand. */
  async detail(db: Queryable, white_label_id: string, deposit_id: string, image_url: (receipt_id: string) => string): Promise<ReviewDetail | null> {
    const found = await this.deps.deposits.viewInBrand(db, white_label_id, deposit_id);
    if (!found) return null;
    const { row, view } = found;
    const receipts = await this.deps.slips.receiptsForReview(db, white_label_id, deposit_id);
    const evidence = await repository.listEvidence(db, white_label_id, deposit_id);
    const forceCompletes = await repository.listForceCompletes(db, white_label_id, deposit_id);
    const decisions = await repository.listDecisions(db, white_label_id, deposit_id);
    const bank = await this.deps.verification.verifiedAmountOf(db, white_label_id, deposit_id);
    const currentReview = row.review ? row.review.opened_at : null;
    const approvals = countedApprovals(decisions.filter((decision) => formatTimestamp(decision.review_opened_at) === currentReview));
    return {
      object: 'review_detail',
      deposit_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      deposit: view,
      bank_verified_amount_minor: bank.amount_minor,
      approvals_required: row.review === null ? 0 : row.review.four_eyes_required || bank.amount_minor === 0 ? 2 : 1,
      approvals: approvals.map((decision) => ({
        reviewer_id: decision.reviewer_id,
        staff_id: decision.staff_id,
        verified_amount_minor: decision.verified_amount_minor,
        amount_source: decision.amount_source,
        created_at: formatTimestamp(decision.created_at),
      })),
      slips: receipts.map((receipt) => ({ ...receipt, image_url: receipt.media_type === null || receipt.evidence_purged_at !== null ? null : image_url(receipt.receipt_id) })),
      evidence: evidence.map((item) => ({ evidence_id: item.evidence_id, kind: item.kind, reference: item.reference, note: item.note, created_at: formatTimestamp(item.created_at) })),
      force_complete_requests: forceCompletes.map((item) => ({
        request_id: item.request_id,
        claimed_verified_amount_minor: item.claimed_verified_amount_minor,
        derived_verified_amount_minor: item.derived_verified_amount_minor,
        note: item.note,
        created_at: formatTimestamp(item.created_at),
      })),
      decisions: decisions.map((decision) => ({
        decision_id: decision.decision_id,
        action: decision.action,
        effect: decision.effect,
        reviewer_id: decision.reviewer_id,
        staff_id: decision.staff_id,
        note: decision.note,
        rejection_code: decision.rejection_code,
        verified_amount_minor: decision.verified_amount_minor,
        amount_source: decision.amount_source,
        review_opened_at: formatTimestamp(decision.review_opened_at),
        created_at: formatTimestamp(decision.created_at),
      })),
    };
  }

  /** A slip image for the reviewer (back-office credentials only). */
  image(db: Queryable, white_label_id: string, deposit_id: string, receipt_id: string) {
    return this.deps.slips.imageForReview(db, white_label_id, deposit_id, receipt_id);
  }

  /**
   * Applies one reviewer decision in one transaction: the order's transition (through DepositService),
   * the decision row and the audit row. Expected refusals are returned: `resource_not_found`,
   * `review_already_decided`, `four_eyes_same_reviewer`, `escalation_same_reviewer`,
   * `idempotency_key_reused`; bad amounts throw `validation_error`. A refusal writes nothing.
   */
  decide(white_label_id: string, deposit_id: string, reviewer: Reviewer, decision: Decision): Promise<Result<DecisionOutcome>> {
    return this.deps.database.transaction(async (tx) => {
      if (reviewer.idempotency_key !== null) {
        const earlier = await repository.findDecisionByKey(tx, white_label_id, reviewer.reviewer_id, reviewer.idempotency_key);
        if (earlier) {
          if (earlier.deposit_id !== deposit_id || earlier.action !== decision.action) return fail('idempotency_key_reused');
          return ok({ decision_id: earlier.decision_id, effect: earlier.effect, replayed: true });
        }
      }
      const row = await this.deps.deposits.lockOrder(tx, white_label_id, deposit_id);
      if (!row) return fail('resource_not_found');
      const decisions = await repository.listDecisions(tx, white_label_id, deposit_id);
      if (row.status !== 'under_review' || row.review === null) {
        // The same reviewer repeating the decision that ended the review gets it back unchanged.
        const ending = decisions.find((earlier) => earlier.effect === 'settled' || earlier.effect === 'rejected');
        const same =
          ending !== undefined &&
          ending.reviewer_id === reviewer.reviewer_id &&
          ending.action === decision.action &&
          (decision.action !== 'reject' || ending.rejection_code === decision.rejection_code);
        if (same) return ok({ decision_id: ending.decision_id, effect: ending.effect, replayed: true });
        return fail('review_already_decided', { details: { status: row.status } });
      }
      const review = row.review;
      const thisReview = decisions.filter((earlier) => formatTimestamp(earlier.review_opened_at) === review.opened_at);
      const decider = await this.deciderOf(tx, white_label_id, reviewer);
      // An escalation asks another person to decide: its author, through any of their credentials, may not.
      if (decision.action !== 'escalate' && escalatorsOf(thisReview).has(approverOf(decider))) return fail('escalation_same_reviewer');
      switch (decision.action) {
        case 'approve':
          return this.approve(tx, row, review, thisReview, decider, decision);
        case 'reject':
          return this.reject(tx, row, review, decider, decision);
        case 'escalate':
          return this.escalate(tx, row, review, thisReview, decider, decision);
        default: {
          const unknown: never = decision;
          throw new Error(`unknown decision ${JSON.stringify(unknown)}`);
        }
      }
    });
  }

  /**
   * The reviewer with the person behind their credential. The service's own desk (a `system` actor, the
   * sandbox's) decides without a credential, so it has no person and its decisions carry a null staff_id;
   * its reviewer id must then not be a credential's id. The database refuses such a row too, but only when
   * the row is written at the end of the decision; checking here names the mistake where it is made. Every
   * credential is issued to a person (migration 0027), so a credential whose person is not found is a
   * broken invariant, not a refusal to answer.
   */
  private async deciderOf(tx: Queryable, white_label_id: string, reviewer: Reviewer): Promise<Decider> {
    if (reviewer.actor.actor_type === 'system') {
      invariant(!reviewer.reviewer_id.startsWith(ID_PREFIXES.backoffice_credential), 'the service decides as itself, not with a credential');
      return { ...reviewer, staff_id: null };
    }
    const staff_id = await this.deps.tenancy.staffOfCredential(tx, white_label_id, reviewer.reviewer_id);
    invariant(staff_id !== null, 'a reviewer credential of the brand names its person');
    return { ...reviewer, staff_id };
  }

  /**
   * Approve: V is the bank's verified amount when the order's slips were verified (a reviewer's other
   * figure is refused); without it the reviewer enters the amount they verified, and then two
   * reviewers must agree on it. With four eyes the first approval is recorded and changes nothing; the
   * second, by another person, settles exactly as automatic settlement does (`settled_via: review`).
   * An escalation does not add four eyes: it already brought a second person to the review, and its
   * author's approval stops counting (escalatorsOf). The service's own desk approves once, as one approver
   * (approverOf): it never gives both approvals of a four-eyes review, and a person may give the other.
   */
  private async approve(
    tx: Queryable,
    row: DepositRow,
    review: ReviewObject,
    thisReview: repository.DecisionRow[],
    reviewer: Decider,
    decision: Extract<Decision, { action: 'approve' }>,
  ): Promise<Result<DecisionOutcome>> {
    const bank = await this.deps.verification.verifiedAmountOf(tx, row.white_label_id, row.deposit_id);
    let verified_amount_minor: number;
    let amount_source: 'bank' | 'reviewer';
    if (bank.amount_minor > 0) {
      if (decision.verified_amount_minor !== null && decision.verified_amount_minor !== bank.amount_minor) {
        throw validationError('verified_amount_minor', 'differs_from_verified_transfers', `the bank verified ${bank.amount_minor}`);
      }
      verified_amount_minor = bank.amount_minor;
      amount_source = 'bank';
    } else {
      if (decision.verified_amount_minor === null) throw validationError('verified_amount_minor', 'required', 'no slip of this order was verified by the bank');
      verified_amount_minor = decision.verified_amount_minor;
      amount_source = 'reviewer';
    }
    // One approval per person, through whichever credential, and one by the service's own desk: the unique
    // indexes of migration 0027 back this.
    const approver = approverOf(reviewer);
    if (thisReview.some((earlier) => earlier.action === 'approve' && approverOf(earlier) === approver)) return fail('four_eyes_same_reviewer');
    const approvals = countedApprovals(thisReview);
    const fourEyes = review.four_eyes_required || amount_source === 'reviewer';
    const record = (effect: repository.DecisionEffect, deposit_version: number): repository.DecisionRow =>
      this.decisionRow(row, review, reviewer, { action: 'approve', effect, note: decision.note, rejection_code: null, verified_amount_minor, amount_source }, deposit_version);

    if (fourEyes && approvals.length === 0) {
      const first = record('approval_recorded', row.version);
      await repository.insertDecision(tx, first);
      await this.deps.tenancy.audit(tx, reviewer.actor, row.white_label_id, 'review.approval_recorded', 'deposit_order', row.deposit_id, {
        decision_id: first.decision_id,
        verified_amount_minor,
        amount_source,
      });
      return ok({ decision_id: first.decision_id, effect: first.effect, replayed: false });
    }
    const first = approvals[0];
    if (first && first.verified_amount_minor !== verified_amount_minor) {
      throw validationError('verified_amount_minor', 'differs_from_first_approval', `the first approver verified ${String(first.verified_amount_minor)}`);
    }
    const settled = await this.deps.settlement.settle(tx, {
      white_label_id: row.white_label_id,
      deposit_id: row.deposit_id,
      transferred_amount_minor: verified_amount_minor,
      settled_via: 'review',
      cause: causeOf(reviewer),
    });
    if (!settled.ok) return settled;
    const decided = record('settled', settled.value.version);
    await repository.insertDecision(tx, decided);
    await this.deps.tenancy.audit(tx, reviewer.actor, row.white_label_id, 'review.approved', 'deposit_order', row.deposit_id, {
      decision_id: decided.decision_id,
      verified_amount_minor,
      amount_source,
      approvers: [...approvals.map((approval) => approval.reviewer_id), reviewer.reviewer_id],
      // The people who approved, in order; null stands for an approval of the service's own desk, which has no person.
      approver_staff_ids: [...approvals.map((approval) => approval.staff_id), reviewer.staff_id],
    });
    return ok({ decision_id: decided.decision_id, effect: decided.effect, replayed: false });
  }

  /** Reject: `rejected` with the catalogue's display texts; the reviewer's note stays internal. */
  private async reject(tx: Queryable, row: DepositRow, review: ReviewObject, reviewer: Decider, decision: Extract<Decision, { action: 'reject' }>): Promise<Result<DecisionOutcome>> {
    const rejected = await this.deps.deposits.rejectReview(tx, {
      white_label_id: row.white_label_id,
      deposit_id: row.deposit_id,
      rejection: rejectionOf(decision.rejection_code),
      cause: causeOf(reviewer),
    });
    if (!rejected.ok) return rejected;
    const decided = this.decisionRow(row, review, reviewer, { action: 'reject', effect: 'rejected', note: decision.note, rejection_code: decision.rejection_code }, rejected.value.version);
    await repository.insertDecision(tx, decided);
    await this.deps.tenancy.audit(tx, reviewer.actor, row.white_label_id, 'review.rejected', 'deposit_order', row.deposit_id, {
      decision_id: decided.decision_id,
      rejection_code: decision.rejection_code,
    });
    return ok({ decision_id: decided.decision_id, effect: decided.effect, replayed: false });
  }

  /** Escalate: `version` moves, money and status do not; escalating an escalated review changes nothing. */
  private async escalate(
    tx: Queryable,
    row: DepositRow,
    review: ReviewObject,
    thisReview: repository.DecisionRow[],
    reviewer: Decider,
    decision: Extract<Decision, { action: 'escalate' }>,
  ): Promise<Result<DecisionOutcome>> {
    if (review.escalated) {
      // Escalated already (by this decision desk, or by whoever escalated first): nothing to change.
      const earlier = thisReview.find((candidate) => candidate.action === 'escalate');
      return ok({ decision_id: earlier?.decision_id ?? null, effect: 'escalated', replayed: true });
    }
    const escalated = await this.deps.deposits.escalateReview(tx, { white_label_id: row.white_label_id, deposit_id: row.deposit_id, cause: causeOf(reviewer) });
    if (!escalated.ok) return escalated;
    const decided = this.decisionRow(row, review, reviewer, { action: 'escalate', effect: 'escalated', note: decision.note, rejection_code: null }, escalated.value.version);
    await repository.insertDecision(tx, decided);
    await this.deps.tenancy.audit(tx, reviewer.actor, row.white_label_id, 'review.escalated', 'deposit_order', row.deposit_id, { decision_id: decided.decision_id });
    return ok({ decision_id: decided.decision_id, effect: decided.effect, replayed: false });
  }

  private decisionRow(
    row: DepositRow,
    review: ReviewObject,
    reviewer: Decider,
    decided: Pick<repository.DecisionRow, 'action' | 'effect' | 'note' | 'rejection_code'> & Partial<Pick<repository.DecisionRow, 'verified_amount_minor' | 'amount_source'>>,
    deposit_version: number,
  ): repository.DecisionRow {
    return {
      white_label_id: row.white_label_id,
      decision_id: newId('review_decision'),
      deposit_id: row.deposit_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      review_opened_at: new Date(review.opened_at),
      action: decided.action,
      effect: decided.effect,
      reviewer_id: reviewer.reviewer_id,
      staff_id: reviewer.staff_id,
      note: decided.note,
      rejection_code: decided.rejection_code,
      verified_amount_minor: decided.verified_amount_minor ?? null,
      amount_source: decided.amount_source ?? null,
      idempotency_key: reviewer.idempotency_key,
      deposit_version,
      created_at: this.deps.clock.now(),
    };
  }

  /** Locks a merchant's own order for a review change; null when it is not this merchant's (404). */
  private async lockOwnOrder(tx: Queryable, account: DepositAccount, deposit_id: string): Promise<DepositRow | null> {
    const row = await this.deps.deposits.lockOrder(tx, account.white_label_id, deposit_id);
    if (!row || row.merchant_id !== account.merchant_id || row.livemode !== account.livemode) return null;
    return row;
  }

  private async ownView(tx: Queryable, account: DepositAccount, deposit_id: string): Promise<DepositView> {
    const view = await this.deps.deposits.get(tx, account, deposit_id);
    invariant(view, 'the merchant reads its own order');
    return view;
  }

  /**
   * POST /v1/pay/deposits/{id}/evidence: a pointer into the merchant's evidence store for the reviewer.
   * Status, version and review clock do not change (nothing in the order changes; the evidence is the
   * reviewer's to read). Only while the order is in review (`deposit_not_reviewable` otherwise).
   */
  async addEvidence(
    tx: Queryable,
    account: DepositAccount,
    deposit_id: string,
    input: { kind: repository.EvidenceRow['kind']; reference: string; note: string; request_id: string },
  ): Promise<Result<DepositView> | null> {
    const row = await this.lockOwnOrder(tx, account, deposit_id);
    if (!row) return null;
    if (row.status !== 'under_review') return fail('deposit_not_reviewable', { details: { status: row.status } });
    const counts = await repository.countAttachments(tx, account.white_label_id, deposit_id);
    if (counts.evidence >= MAX_EVIDENCE_PER_ORDER) return fail('evidence_limit_reached', { details: { limit: MAX_EVIDENCE_PER_ORDER } });
    await repository.insertEvidence(tx, {
      ...account,
      evidence_id: newId('deposit_evidence'),
      deposit_id,
      kind: input.kind,
      reference: input.reference,
      note: input.note,
      request_id: input.request_id,
      created_at: this.deps.clock.now(),
    });
    return ok(await this.ownView(tx, account, deposit_id));
  }

  /**
   * POST /v1/pay/deposits/{id}/force-complete: asks a reviewer to accept a short payment. Only for an
   * order in review for a reason other than the amount (a clean short-pay settled on its own), and only
   * when the bank verified 0 < V < X from the order's slips; the merchant's figure is kept but V is what
   * an approval uses. The order does not change: the reviewer decides.
   */
  async forceComplete(
    tx: Queryable,
    account: DepositAccount,
    deposit_id: string,
    input: { verified_amount_minor: number; note: string; request_id: string },
  ): Promise<Result<DepositView> | null> {
    const row = await this.lockOwnOrder(tx, account, deposit_id);
    if (!row) return null;
    if (input.verified_amount_minor >= row.amount_minor) {
      throw validationError('verified_amount_minor', 'must_be_less_than_amount', `below ${row.amount_minor}`);
    }
    if (row.status !== 'under_review' || row.review === null) return fail('deposit_not_reviewable', { details: { status: row.status } });
    if (!row.review.reasons.some((reason) => reason.code !== 'AMOUNT_MISMATCH')) {
      return fail('deposit_not_reviewable', { details: { status: row.status, reason: 'no_other_review_reason' } });
    }
    const bank = await this.deps.verification.verifiedAmountOf(tx, account.white_label_id, deposit_id);
    if (bank.amount_minor <= 0 || bank.amount_minor >= row.amount_minor) {
      return fail('deposit_not_reviewable', { details: { status: row.status, reason: bank.amount_minor <= 0 ? 'no_verified_transfer' : 'not_a_short_payment' } });
    }
    const counts = await repository.countAttachments(tx, account.white_label_id, deposit_id);
    if (counts.force_completes >= MAX_FORCE_COMPLETES_PER_ORDER) return fail('evidence_limit_reached', { details: { limit: MAX_FORCE_COMPLETES_PER_ORDER } });
    await repository.insertForceComplete(tx, {
      ...account,
      request_id: input.request_id,
      deposit_id,
      claimed_verified_amount_minor: input.verified_amount_minor,
      derived_verified_amount_minor: bank.amount_minor,
      note: input.note,
      created_at: this.deps.clock.now(),
    });
    return ok(await this.ownView(tx, account, deposit_id));
  }

  /**
   * An operator reverses a settled order (one of the spec's six reason codes): the deposit service
   * takes the credit back (pending clearing inside 72 h, else available) and reverses its fills. The
   * same reversal repeated answers the reversed order; another reason on a reversed order is refused.
   */
  reverse(
    white_label_id: string,
    deposit_id: string,
    operator: Reviewer,
    input: { reason_code: ReversalReasonCode; note: string },
  ): Promise<Result<{ view: DepositView; replayed: boolean }>> {
    return this.deps.database.transaction(async (tx) => {
      const row = await this.deps.deposits.lockOrder(tx, white_label_id, deposit_id);
      if (!row) return fail('resource_not_found');
      if (row.status === 'reversed') {
        if (row.reversal?.reason_code !== input.reason_code) return fail('deposit_state_conflict', { details: { status: row.status, reason_code: row.reversal?.reason_code } });
        const found = await this.deps.deposits.viewInBrand(tx, white_label_id, deposit_id);
        invariant(found, 'the order exists');
        return ok({ view: found.view, replayed: true });
      }
      if (row.status !== 'settled') return fail('deposit_state_conflict', { details: { status: row.status } });
      const reversed = await this.deps.settlement.reverse(tx, {
        white_label_id,
        deposit_id,
        reason_code: input.reason_code,
        reason_display_th: REVERSAL_DISPLAY_TH[input.reason_code],
        cause: causeOf(operator),
      });
      if (!reversed.ok) return reversed;
      await this.deps.tenancy.audit(tx, operator.actor, white_label_id, 'deposit.reversed', 'deposit_order', deposit_id, {
        reason_code: input.reason_code,
        note: input.note,
        balance_transaction_id: reversed.value.reversal?.balance_transaction_id ?? null,
      });
      return ok({ view: reversed.value, replayed: false });
    });
  }
}
