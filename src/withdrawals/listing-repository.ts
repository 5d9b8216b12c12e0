import { invariant } from '../platform/assert.ts';
import { PLANNED_PER_CALL, type Queryable } from '../platform/db.ts';
import { ORDER_COLUMNS } from './repository.ts';
import type { WithdrawalAccount, WithdrawalRow, WithdrawalStatus } from './types.ts';

/** The SQL of the merchant's withdrawal list (GET /v1/pay/withdrawals, migration 0035's indexes). */

/** The filters of the merchant's withdrawal list (`listOrdersOfMerchant`); null leaves a filter out. */
export interface OrderListFilters {
  status: WithdrawalStatus | null;
  refund_of_deposit_id: string | null;
  merchant_reference: string | null;
  end_user_ref: string | null;
  /** Inclusive lower bound on `created_at`. */
  created_from: Date | null;
  /** Exclusive upper bound on `created_at`. */
  created_to: Date | null;
  descending: boolean;
  /** The (created_at, withdrawal_id) of the last row of the previous page. */
  after: { created_at: Date; withdrawal_id: string } | null;
  /** Rows to read: a page and one more, at most `ORDER_LIST_MAX_ROWS`. */
  limit: number;
}

/** The most rows one list statement reads: the route's largest page (100) and the row that tells a next page exists. */
export const ORDER_LIST_MAX_ROWS = 101;

/**
 * One page of the merchant's orders, keyset-paged on (created_at, withdrawal_id) in either direction.
 * The statement names only the filters that are set, and is planned per call with its values: each shape
 * then uses the index that fits it (migration 0035: the listing index, or the ones that lead with
 * refund_of_deposit_id, end_user_ref or status after the merchant's scope; merchant_reference has the unique
 * key), where one catch-all statement's generic plan could only use the merchant's scope and would filter
 * the merchant's whole history for a rare value.
 */
export async function listOrdersOfMerchant(db: Queryable, account: WithdrawalAccount, filters: OrderListFilters): Promise<WithdrawalRow[]> {
  invariant(Number.isSafeInteger(filters.limit) && filters.limit >= 1 && filters.limit <= ORDER_LIST_MAX_ROWS, 'a list reads a bounded page');
  const params: unknown[] = [account.white_label_id, account.merchant_id, account.livemode];
  const conditions = ['white_label_id = $1', 'merchant_id = $2', 'livemode = $3'];
  const add = (condition: (position: number) => string, value: unknown) => {
    params.push(value);
    conditions.push(condition(params.length));
  };
  if (filters.status !== null) add((at) => `status = $${at}::text`, filters.status);
  if (filters.refund_of_deposit_id !== null) add((at) => `refund_of_deposit_id = $${at}::text`, filters.refund_of_deposit_id);
  if (filters.merchant_reference !== null) add((at) => `merchant_reference = $${at}::text`, filters.merchant_reference);
  if (filters.end_user_ref !== null) add((at) => `end_user_ref = $${at}::text`, filters.end_user_ref);
  if (filters.created_from !== null) add((at) => `created_at >= $${at}::timestamptz`, filters.created_from);
  if (filters.created_to !== null) add((at) => `created_at < $${at}::timestamptz`, filters.created_to);
  const direction = filters.descending ? 'DESC' : 'ASC';
  if (filters.after !== null) {
    const { created_at, withdrawal_id } = filters.after;
    params.push(created_at, withdrawal_id);
    conditions.push(`(created_at, withdrawal_id) ${filters.descending ? '<' : '>'} ($${params.length - 1}::timestamptz, $${params.length}::text)`);
  }
  params.push(filters.limit);
  const { rows } = await db.query<WithdrawalRow>(
    `${PLANNED_PER_CALL} SELECT ${ORDER_COLUMNS} FROM withdrawal_orders WHERE ${conditions.join(' AND ')}
      ORDER BY created_at ${direction}, withdrawal_id ${direction} LIMIT $${params.length}`,
    params,
  );
  return rows;
}
