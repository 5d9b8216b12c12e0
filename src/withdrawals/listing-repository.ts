import { invariant } from '../platform/assert.ts';
import { PLANNED_PER_CALL, type Queryable } from '../platform/db.ts';
import { addOrderSearchFilters, SqlConditions } from '../platform/sql-conditions.ts';
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

/** The filters of the back office's brand-wide search (the console's orders page); null leaves a filter out. */
export interface BrandSearchFilters {
  /** Exact ids (an id typed in, or the orders a bank reference paid), at most `BRAND_SEARCH_MAX_IDS`. */
  withdrawal_ids: readonly string[] | null;
  merchant_reference: string | null;
  end_user_ref: string | null;
  status: WithdrawalStatus | null;
  livemode: boolean | null;
  /** Inclusive lower bound on `created_at`. */
  created_from: Date | null;
  /** Exclusive upper bound on `created_at`. */
  created_to: Date | null;
  /** The (created_at, withdrawal_id) of the last row of the previous page; pages run newest first. */
  after: { created_at: Date; withdrawal_id: string } | null;
  /** Merchants whose orders the back office never shows (the service's own, such as the sandbox counterparty). */
  hidden_merchant_ids: readonly string[];
  /** Rows to read: a page and one more. */
  limit: number;
}

/** One row of the search: what a result line shows. */
export interface WithdrawalSearchRow {
  withdrawal_id: string;
  merchant_id: string;
  livemode: boolean;
  status: WithdrawalStatus;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  created_at: Date;
}

export const BRAND_SEARCH_MAX_IDS = 50;

/**
 * One page of a brand's withdrawals, newest first, built like `listOrdersOfMerchant` (only the filters that are
 * set, planned per call) over migration 0046's brand-scoped indexes: the primary key for ids,
 * withdrawal_orders_brand_reference, _end_user, _status, _mode, or _created for the time range alone.
 */
export async function searchOrdersInBrand(db: Queryable, white_label_id: string, filters: BrandSearchFilters): Promise<WithdrawalSearchRow[]> {
  invariant(Number.isSafeInteger(filters.limit) && filters.limit >= 1 && filters.limit <= ORDER_LIST_MAX_ROWS, 'a search reads a bounded page');
  invariant(filters.withdrawal_ids === null || filters.withdrawal_ids.length <= BRAND_SEARCH_MAX_IDS, 'a search names a bounded set of ids');
  const where = new SqlConditions({ conditions: ['white_label_id = $1', 'merchant_id <> ALL($2::text[])'], params: [white_label_id, [...filters.hidden_merchant_ids]] });
  where.addIfSet(filters.withdrawal_ids === null ? null : [...filters.withdrawal_ids], (at) => `withdrawal_id = ANY($${at}::text[])`);
  addOrderSearchFilters(where, filters);
  if (filters.after !== null) where.addValues([filters.after.created_at, filters.after.withdrawal_id], (at) => `(created_at, withdrawal_id) < ($${at}::timestamptz, $${at + 1}::text)`);
  const limit = where.parameter(filters.limit);
  const { rows } = await db.query<WithdrawalSearchRow>(
    `${PLANNED_PER_CALL} SELECT withdrawal_id, merchant_id, livemode, status, merchant_reference, end_user_ref, amount_total_minor AS amount_minor, created_at
       FROM withdrawal_orders WHERE ${where.where()}
      ORDER BY created_at DESC, withdrawal_id DESC LIMIT $${limit}`,
    where.params,
  );
  return rows.map((row) => ({ ...row, amount_minor: Number(row.amount_minor) }));
}

/** The withdrawals that legs of these deposits reserved or paid (by withdrawal_legs_by_deposit), at most `limit`. */
export async function withdrawalIdsOfDeposits(db: Queryable, white_label_id: string, deposit_ids: readonly string[], limit: number): Promise<string[]> {
  invariant(deposit_ids.length <= BRAND_SEARCH_MAX_IDS && limit <= BRAND_SEARCH_MAX_IDS, 'a bounded set of deposits and withdrawals');
  if (deposit_ids.length === 0) return [];
  const { rows } = await db.query<{ withdrawal_id: string }>(
    'SELECT DISTINCT withdrawal_id FROM withdrawal_legs WHERE white_label_id = $1 AND deposit_id = ANY($2::text[]) ORDER BY withdrawal_id LIMIT $3',
    [white_label_id, [...deposit_ids], limit],
  );
  return rows.map((row) => row.withdrawal_id);
}
