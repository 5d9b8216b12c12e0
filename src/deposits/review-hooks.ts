import type { Queryable } from '../platform/db.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import type { EventCause } from '../platform/cause.ts';
import * as repository from './repository.ts';
import type { DepositChanges } from './order-changes.ts';
import type { DepositLocks } from './order-locks.ts';
import { MAX_SLIP_UPLOADS } from './transitions.ts';
import { depositView, type DepositView } from './views.ts';
import type { DepositRow, RejectionObject, ReviewReason, VerificationBooleans } from './types.ts';

/**
 * What the review desk and the slip pipeline change of an order short of settling it: sending it to review,
 * escalation, rejection, an unreadable slip; and the desk's reads of its queue.
 */
export class DepositReviewHooks {
  constructor(
    private readonly changes: DepositChanges,
    private readonly locks: DepositLocks,
  ) {}

  /** Verification sends the order to review (`deposit.under_review` with `review.reasons[]`). */
  async sendToReview(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; reasons: ReviewReason[]; four_eyes_required?: boolean; verification?: VerificationBooleans; cause: EventCause },
  ): Promise<Result<DepositView>> {
    const row = await this.locks.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'under_review') return ok(await this.changes.view(tx, row));
    if (row.status !== 'slip_processing') return fail('deposit_state_conflict', { details: { status: row.status } });
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'under_review',
      review: await this.changes.newReview(tx, row, input.reasons, input.four_eyes_required ?? false),
      verification: input.verification ?? row.verification,
      updated_at: this.changes.now(),
    };
    return ok(await this.changes.transition(tx, { before: row, after, trigger: 'review', cause: input.cause }));
  }

  /** Escalation moves `version` only: money and status stay (`deposit.review_updated`). */
  async escalateReview(tx: Queryable, input: { white_label_id: string; deposit_id: string; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.locks.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'under_review' || !row.review) return fail('deposit_state_conflict', { details: { status: row.status } });
    if (row.review.escalated) return ok(await this.changes.view(tx, row));
    const after: DepositRow = { ...row, version: row.version + 1, review: { ...row.review, escalated: true, estimated_resolution_bucket: 'extended' }, updated_at: this.changes.now() };
    return ok(await this.changes.transition(tx, { before: row, after, trigger: 'escalate', cause: input.cause }));
  }

  /**
   * A reviewer does not approve: `rejected` (`deposit.rejected`), with display texts and never the
   * reviewer's notes; reserved legs go back to their withdrawals. There is no automatic refund.
   */
  async rejectReview(tx: Queryable, input: { white_label_id: string; deposit_id: string; rejection: RejectionObject; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.locks.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'rejected') return ok(await this.changes.view(tx, row));
    if (row.status !== 'under_review') return fail('deposit_state_conflict', { details: { status: row.status } });
    const legs = await this.changes.releaseLegs(tx, row, 'deposit_rejected', input.cause);
    const after: DepositRow = { ...row, version: row.version + 1, status: 'rejected', rejection: input.rejection, updated_at: this.changes.now() };
    return ok(await this.changes.transition(tx, { before: row, after, trigger: 'reject', cause: input.cause, legs }));
  }

  /**
   * The slip image could not be read: back to `awaiting_payment` while the order has not expired (or
   * when verified slips already paid some of its legs, which the deadline then settles), else `expired`
   * (legs released, late-slip window from the deadline). `deposit.slip_rejected` says the slip, not the
   * money, was refused: its `slip_rejection` has `retryable` true and the uploads left.
   */
  async markSlipUnreadable(tx: Queryable, input: { white_label_id: string; deposit_id: string; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.locks.lockForChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'slip_processing') return fail('deposit_state_conflict', { details: { status: row.status } });
    const now = this.changes.now();
    const rejection = { slip_rejection: { retryable: true, reason_code: 'SLIP_UNREADABLE', attempts_left: MAX_SLIP_UPLOADS - row.slip_attempts } };
    const partlyPaid = (await repository.listLegs(tx, row.white_label_id, row.deposit_id)).some((leg) => leg.status === 'reserved' && leg.paid_minor > 0);
    if (partlyPaid || (!row.slip_is_late && row.expires_at.getTime() > now.getTime())) {
      return ok(
        await this.changes.transition(tx, {
          before: row,
          after: { ...row, version: row.version + 1, status: 'awaiting_payment', updated_at: now },
          trigger: 'slip_unreadable',
          cause: input.cause,
          event_extra: rejection,
          // The expiry job may have run while the slip was processed and left the deadline to this consumer.
          jobs: [this.changes.expireJob(row)],
        }),
      );
    }
    const legs = row.slip_is_late ? [] : await this.changes.releaseLegs(tx, row, 'deposit_expired', input.cause);
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'expired',
      expired_reason: row.expired_reason ?? 'no_payment',
      late_slip_accepted_until: row.late_slip_accepted_until ?? this.changes.lateSlipAcceptedUntil(row),
      updated_at: now,
    };
    return ok(await this.changes.transition(tx, { before: row, after, trigger: 'slip_unreadable', cause: input.cause, legs, event_extra: rejection }));
  }

  /** An order of a brand as the back office reads it (any merchant of the brand, either environment). */
  async viewInBrand(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ row: DepositRow; view: DepositView } | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    return { row, view: await this.changes.view(db, row) };
  }

  /** The brand's orders in review, oldest entry first, with their legs read in one statement. */
  async reviewQueue(db: Queryable, white_label_id: string, filters: repository.ReviewQueueFilters): Promise<{ row: DepositRow; view: DepositView }[]> {
    const rows = await repository.listInReview(db, white_label_id, filters);
    const legs = rows.length === 0 ? [] : await repository.listLegsOfOrders(db, white_label_id, rows.map((row) => row.deposit_id));
    const now = this.changes.now();
    return rows.map((row) => ({ row, view: depositView(row, legs.filter((leg) => leg.deposit_id === row.deposit_id), { now }) }));
  }

  /** How many of a brand's orders in review name each reason code, each counted up to `up_to`. */
  countInReviewByReason(db: Queryable, white_label_id: string, livemode: boolean | null, up_to: number): Promise<{ reason_code: string; count: number }[]> {
    return repository.countInReviewByReason(db, white_label_id, livemode, up_to);
  }

  /** How many of a brand's orders wait in review (in one environment, or both), counted up to `up_to`. */
  countInReviewUpTo(db: Queryable, white_label_id: string, livemode: boolean | null, up_to: number): Promise<number> {
    return repository.countInReviewUpTo(db, white_label_id, livemode, up_to);
  }
}
