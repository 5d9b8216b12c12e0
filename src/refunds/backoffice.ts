import crypto from 'node:crypto';
import { Rollback, type Database, type Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { CURRENT_API_VERSION, type EventCause } from '../platform/cause.ts';
import type { Actor } from '../platform/access.ts';
import type { AuditTrail } from '../platform/audit.ts';
import type { DepositService } from '../deposits/service.ts';
import type { RefundReasonCode, WithdrawalView } from '../withdrawals/service.ts';
import type { RefundService } from './service.ts';

/**
 * Refunds from the back office (issue 32, item 2; docs/decisions/refunds.md, "From the back office"): an operator
 * opens a refund of a brand's deposit for its merchant, with a reason and an internal note, and reads a deposit's
 * refunds. The refund is the merchant's own kind (`RefundService.create`, the deposit's merchant as the account):
 * the same payee, bounds, fee and wallet, the same `withdrawal.*` events on the merchant's feed. What the back office
 * adds is who asked and why, in the audit log, in the refund's transaction.
 */

/** The back-office staff member acting, and the request they act in. */
export interface RefundStaff {
  actor: Actor;
  credential_id: string;
  request_id: string;
  idempotency_key: string | null;
}

export interface OperatorRefundRequest {
  amount_minor: number;
  reason_code: RefundReasonCode;
  /** Internal: why the operator refunds, at least 20 characters (src/http/staff-note.ts). Kept in the audit log only. */
  note: string;
  /** The refund's own note, which its merchant reads on the withdrawal order (1–500 characters). */
  refund_note: string | null;
}

export interface BackofficeRefundDependencies {
  database: Database;
  deposits: DepositService;
  refunds: RefundService;
  audit: AuditTrail;
}

/** The audit action of a refund an operator opened. */
export const OPERATOR_REFUND_AUDIT_ACTION = 'refund.created';

function causeOf(staff: RefundStaff): EventCause {
  return { request_id: staff.request_id, idempotency_key: staff.idempotency_key, api_version: CURRENT_API_VERSION };
}

/**
 * The refund's reference for a request with an Idempotency-Key: the same credential sending the same key again names
 * the same reference, which the withdrawal table keeps unique per merchant, so a retry meets the first refund instead
 * of making a second. Back-office routes keep no idempotency records; this is the refund's own guard.
 */
function referenceOf(staff: RefundStaff): string | undefined {
  if (staff.idempotency_key === null) return undefined;
  const digest = crypto.createHash('sha256').update(`${staff.credential_id}\n${staff.idempotency_key}`).digest('hex');
  return `rfd_bo_${digest.slice(0, 32)}`;
}

export class BackofficeRefunds {
  constructor(private readonly deps: BackofficeRefundDependencies) {}

  /**
   * POST /v1/bo/deposits/{id}/refunds: a refund of the brand's deposit for its merchant, and its audit row, in one
   * transaction. Any refusal of the refund rolls back everything it wrote (its payee, perhaps) and is the answer.
   * The same credential repeating a request with the same Idempotency-Key gets the first refund back (`replayed`).
   */
  async open(white_label_id: string, deposit_id: string, request: OperatorRefundRequest, staff: RefundStaff): Promise<Result<{ refund: WithdrawalView; replayed: boolean }>> {
    const merchant_reference = referenceOf(staff);
    let outcome: Result<WithdrawalView>;
    try {
      outcome = await this.deps.database.transaction((tx) => this.openIn(tx, white_label_id, deposit_id, request, staff, merchant_reference));
    } catch (error) {
      if (!(error instanceof Rollback)) throw error;
      outcome = error.value as Result<WithdrawalView>;
    }
    if (outcome.ok) return ok({ refund: outcome.value, replayed: false });
    if (outcome.error.code !== 'merchant_reference_in_use' || merchant_reference === undefined) return outcome;
    const first = (await this.list(this.deps.database, white_label_id, deposit_id))?.find((refund) => refund.merchant_reference === merchant_reference);
    // The key made a refund of another deposit: the same key for another request.
    if (!first) return fail('idempotency_key_reused');
    return ok({ refund: first, replayed: true });
  }

  private async openIn(tx: Queryable, white_label_id: string, deposit_id: string, request: OperatorRefundRequest, staff: RefundStaff, merchant_reference: string | undefined): Promise<Result<WithdrawalView>> {
    const account = await this.deps.deposits.ownerInBrand(tx, white_label_id, deposit_id);
    if (!account) return fail('resource_not_found');
    const created = await this.deps.refunds.create(
      tx,
      account,
      deposit_id,
      { amount_minor: request.amount_minor, reason_code: request.reason_code, note: request.refund_note ?? undefined, merchant_reference },
      causeOf(staff),
    );
    if (!created.ok) throw new Rollback(created);
    invariant(created.value.refund_of_deposit_id === deposit_id, 'the refund is of the deposit asked for');
    await this.deps.audit.audit(tx, staff.actor, white_label_id, OPERATOR_REFUND_AUDIT_ACTION, 'withdrawal_order', created.value.id, {
      deposit_id,
      merchant_id: account.merchant_id,
      livemode: account.livemode,
      amount_minor: request.amount_minor,
      reason_code: request.reason_code,
      note: request.note,
    });
    return created;
  }

  /** GET /v1/bo/deposits/{id}/refunds: the refunds of a brand's deposit, oldest first; null for another brand's or an unknown one. */
  async list(db: Queryable, white_label_id: string, deposit_id: string): Promise<WithdrawalView[] | null> {
    const account = await this.deps.deposits.ownerInBrand(db, white_label_id, deposit_id);
    if (!account) return null;
    return this.deps.refunds.list(db, account, deposit_id);
  }
}
