import { invariant } from '../platform/assert.ts';
import type { Queryable } from '../platform/db.ts';
import { ORDER_COLUMNS } from './repository.ts';
import type { WithdrawalAccount, WithdrawalRow } from './types.ts';

/**
 * The SQL of refunds of deposits (issue 32, migration 0034): each deposit's allowance, which its refunds' claim on it
 * may not pass, and the refund orders of one deposit. Orders themselves are written by repository.ts.
 */

/** What the refunds of one deposit may still take (migration 0034, `withdrawal_refund_allowances`). */
export interface RefundAllowanceRow {
  refundable_cap_minor: number;
  committed_minor: number;
  refund_count: number;
}

/**
 * Commits a new refund's amount against its deposit's allowance, creating the allowance with the deposit's credit as its
 * cap: one statement, whose conflict path locks the row, so concurrent refunds of one deposit queue here and each sees
 * the others' commitments. Null when the amount would pass the cap or the count its bound: nothing is written then.
 * The CHECK `withdrawal_refund_allowances_within_cap` refuses the same row should this statement's condition be lost.
 */
export async function commitRefund(
  db: Queryable,
  input: WithdrawalAccount & { deposit_id: string; refundable_cap_minor: number; amount_minor: number; max_refunds: number; now: Date },
): Promise<RefundAllowanceRow | null> {
  const { rows } = await db.query<RefundAllowanceRow>(
    `INSERT INTO withdrawal_refund_allowances AS a (white_label_id, merchant_id, livemode, deposit_id, refundable_cap_minor, committed_minor,
       refund_count, created_at, updated_at)
     SELECT $1::text, $2::text, $3::boolean, $4::text, $5::bigint, $6::bigint, 1, $8::timestamptz, $8::timestamptz WHERE $6::bigint <= $5::bigint
     ON CONFLICT (white_label_id, deposit_id) DO UPDATE SET committed_minor = a.committed_minor + EXCLUDED.committed_minor,
       refund_count = a.refund_count + 1, updated_at = EXCLUDED.updated_at
       WHERE a.committed_minor + EXCLUDED.committed_minor <= a.refundable_cap_minor AND a.refund_count < $7
     RETURNING refundable_cap_minor, committed_minor, refund_count`,
    [input.white_label_id, input.merchant_id, input.livemode, input.deposit_id, input.refundable_cap_minor, input.amount_minor, input.max_refunds, input.now],
  );
  return rows[0] ?? null;
}

/**
 * Moves a commitment of a deposit's refunds up (a replacement order pays a reversed chunk again) or down (a refund closed
 * with something unpaid, or a closed refund's fill reversed): the caller holds the refund's order lock, and the change
 * is asserted to keep the row within its rules.
 */
export async function adjustRefundCommitment(db: Queryable, white_label_id: string, deposit_id: string, delta_minor: number, now: Date): Promise<void> {
  const { rowCount } = await db.query(
    `UPDATE withdrawal_refund_allowances SET committed_minor = committed_minor + $3, updated_at = $4
      WHERE white_label_id = $1 AND deposit_id = $2`,
    [white_label_id, deposit_id, delta_minor, now],
  );
  invariant(rowCount === 1, `the refunds of ${deposit_id} have their allowance`);
}

/** A deposit's allowance as it stands; null before its first refund. */
export async function findRefundAllowance(db: Queryable, white_label_id: string, deposit_id: string): Promise<RefundAllowanceRow | null> {
  const { rows } = await db.query<RefundAllowanceRow>(
    `SELECT refundable_cap_minor, committed_minor, refund_count
       FROM withdrawal_refund_allowances WHERE white_label_id = $1 AND deposit_id = $2`,
    [white_label_id, deposit_id],
  );
  return rows[0] ?? null;
}

/** The refunds of a deposit (at most the allowance's bound on their count, replacements included), oldest first. */
export async function listRefundsOfDeposit(db: Queryable, account: WithdrawalAccount, deposit_id: string, limit: number): Promise<WithdrawalRow[]> {
  const { rows } = await db.query<WithdrawalRow>(
    `SELECT ${ORDER_COLUMNS} FROM withdrawal_orders
      WHERE white_label_id = $1 AND refund_of_deposit_id = $2 AND merchant_id = $3 AND livemode = $4
      ORDER BY created_at, withdrawal_id LIMIT $5`,
    [account.white_label_id, deposit_id, account.merchant_id, account.livemode, limit],
  );
  return rows;
}

/** The live refunds of a deposit, locked in id order (the lock order of orders of one kind), for closing them. */
export async function lockLiveRefundsOfDeposit(db: Queryable, white_label_id: string, deposit_id: string, limit: number): Promise<WithdrawalRow[]> {
  const { rows } = await db.query<WithdrawalRow>(
    `SELECT ${ORDER_COLUMNS} FROM withdrawal_orders
      WHERE white_label_id = $1 AND refund_of_deposit_id = $2 AND status IN ('pending_approval', 'open', 'partially_filled')
      ORDER BY withdrawal_id LIMIT $3 FOR UPDATE`,
    [white_label_id, deposit_id, limit],
  );
  return rows;
}
