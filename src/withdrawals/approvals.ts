import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, unwrap, type Result } from '../platform/errors.ts';
import type { Actor } from '../platform/access.ts';
import { SECOND_MS } from '../platform/time.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { cancelJobsByKey } from '../jobs/index.ts';
import type { WithdrawalDependencies } from './dependencies.ts';
import { APPROVAL_TTL_TASK, expireJob } from './jobs.ts';
import * as repository from './repository.ts';
import type { OrderTransitions } from './transitions.ts';
import type { WithdrawalRow } from './types.ts';
import { fillView, withdrawalView, type WithdrawalView } from './views.ts';

/** The back office's decision on an order waiting for approval (`decideApprovalByStaff`). */
export interface StaffApprovalDecision {
  white_label_id: string;
  withdrawal_id: string;
  decision: 'approve' | 'reject';
  note: string | null;
  actor: Actor;
  cause: EventCause;
}

/**
 * Approval by brand policy and the back office's reads: an order at or above the brand's threshold waits
 * for an operator's decision or its deadline, and the back office reads orders in the whole brand, except
 * those of the merchants the service runs itself.
 */
export class WithdrawalApprovals {
  constructor(
    private readonly deps: WithdrawalDependencies,
    private readonly transitions: OrderTransitions,
  ) {}

  /**
   * True when an order belongs to a merchant the service runs itself. Such an order answers 404 on every
   * back-office route, as the merchant does (tenancy's lookups skip `system_owned`), so that no operator
   * reads, approves or rejects what only the sandbox may act on, nor learns its state from an error.
   */
  private async hiddenFromBackOffice(db: Queryable, row: Pick<WithdrawalRow, 'white_label_id' | 'merchant_id'>): Promise<boolean> {
    return (await this.deps.service_owned_merchants(db, row.white_label_id)).includes(row.merchant_id);
  }

  /** Approves an order waiting for approval: it enters the matching queue with a fresh expiry. */
  async approve(tx: Queryable, white_label_id: string, withdrawal_id: string, note: string | null, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    // The owner is judged before the state, so that a hidden order's state never shows in an error.
    if (!row || (await this.hiddenFromBackOffice(tx, row))) return null;
    if (row.status !== 'pending_approval') return fail('withdrawal_not_pending_approval', { details: { status: row.status } });
    const now = this.deps.clock.now();
    // Past its approval deadline the order is being canceled (its job may just be late): too late to approve.
    if (row.approval_expires_at && row.approval_expires_at.getTime() <= now.getTime()) {
      return fail('withdrawal_not_pending_approval', { details: { status: row.status, reason: 'approval_ttl_expired' } });
    }
    const policy = await this.deps.policies.policyFor(tx, row.white_label_id, row.livemode);
    const after: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      status: 'open',
      approval_expires_at: null,
      expires_at: new Date(now.getTime() + policy.expires_in_seconds * SECOND_MS),
      review_note: note,
      updated_at: now,
    };
    await cancelJobsByKey(tx, `${APPROVAL_TTL_TASK}:${row.withdrawal_id}`);
    // A sandbox scenario's first chunk (107.00 THB, a test-mode refund) comes a few seconds after the approval.
    const scenarioJobs = this.deps.scenarios(after.livemode).afterApproval(after);
    return this.transitions.apply(tx, { before: row, after, trigger: 'approve', cause, jobs: [expireJob(after), ...scenarioJobs] });
  }

  /**
   * The back office's decision on an order waiting for approval, with its audit row, in one transaction.
   * Null for an order the back office may not reach; a refusal throws its catalogue error and nothing is
   * written (the transaction rolls back).
   */
  decideApprovalByStaff(input: StaffApprovalDecision): Promise<WithdrawalView | null> {
    return this.deps.database.transaction(async (tx) => {
      const result =
        input.decision === 'approve'
          ? await this.approve(tx, input.white_label_id, input.withdrawal_id, input.note, input.cause)
          : await this.reject(tx, input.white_label_id, input.withdrawal_id, input.note ?? '', input.cause);
      if (!result) return null;
      const view = unwrap(result);
      const action = input.decision === 'approve' ? 'withdrawal.approved' : 'withdrawal.rejected';
      await this.deps.audit.audit(tx, input.actor, input.white_label_id, action, 'withdrawal_order', view.id, { note: input.note });
      return view;
    });
  }

  /** Rejects an order waiting for approval: the full amount and fee return to available. */
  async reject(tx: Queryable, white_label_id: string, withdrawal_id: string, note: string, cause: EventCause): Promise<Result<WithdrawalView> | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!row || (await this.hiddenFromBackOffice(tx, row))) return null;
    if (row.status !== 'pending_approval') return fail('withdrawal_not_pending_approval', { details: { status: row.status } });
    return this.transitions.close(tx, row, { ...row, version: row.version + 1 }, { status: 'rejected', trigger: 'reject', reason_code: 'approval_rejected', closed_by: 'operator', note }, cause);
  }

  /** The approval deadline job: an order still waiting is canceled with `approval_ttl_expired`. */
  async expireApproval(tx: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, withdrawal_id);
    if (!row || row.status !== 'pending_approval' || !row.approval_expires_at) return null;
    if (row.approval_expires_at.getTime() > this.deps.clock.now().getTime()) return null;
    const result = await this.transitions.close(
      tx,
      row,
      { ...row, version: row.version + 1 },
      { status: 'canceled', trigger: 'approval_ttl_expired', reason_code: 'approval_ttl_expired', closed_by: 'system' },
      SYSTEM_CAUSE,
    );
    invariant(result.ok, 'a locked order closes');
    return result.value;
  }

  /** Orders waiting for approval in a brand and environment, oldest first. */
  async pendingApproval(db: Queryable, white_label_id: string, livemode: boolean, limit: number): Promise<WithdrawalView[]> {
    const hidden = await this.deps.service_owned_merchants(db, white_label_id);
    return (await repository.listPendingApproval(db, white_label_id, livemode, Math.min(Math.max(limit, 1), 200), hidden)).map(withdrawalView);
  }

  /** An order anywhere in a brand (back office), or null; an order of the service's own merchants is null too. */
  async getInBrand(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalView | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, withdrawal_id);
    if (!row || (await this.hiddenFromBackOffice(db, row))) return null;
    const fills = await repository.listFills(db, row.white_label_id, row.withdrawal_id);
    // The back office reads the reviewer's note beside the order; merchants and events never do.
    return { ...withdrawalView(row), fills: fills.map((leg) => fillView(leg, true)), ...(row.review_note ? { review_note: row.review_note } : {}) };
  }
}
