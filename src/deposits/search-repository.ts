import { invariant } from '../platform/assert.ts';
import { PLANNED_PER_CALL, type Queryable } from '../platform/db.ts';
import { addOrderSearchFilters, SqlConditions } from '../platform/sql-conditions.ts';
import type { DepositStatus } from './types.ts';

/**
 * The SQL of the back office's brand-wide deposit search (the console's orders page, migration 0046's indexes).
 * Unlike the merchant's list, it is scoped by the brand alone; the mode is a filter.
 */

/** The filters of a brand-wide search; null leaves a filter out. */
export interface BrandSearchFilters {
  /** Exact ids (an id typed in, or the orders a bank reference names), at most `BRAND_SEARCH_MAX_IDS`. */
  deposit_ids: readonly string[] | null;
  merchant_reference: string | null;
  end_user_ref: string | null;
  status: DepositStatus | null;
  livemode: boolean | null;
  /** Inclusive lower bound on `created_at`. */
  created_from: Date | null;
  /** Exclusive upper bound on `created_at`. */
  created_to: Date | null;
  /** The (created_at, deposit_id) of the last row of the previous page; pages run newest first. */
  after: { created_at: Date; deposit_id: string } | null;
  /** Rows to read: a page and one more. */
  limit: number;
}

/** One row of the search: what a result line shows. */
export interface DepositSearchRow {
  deposit_id: string;
  merchant_id: string;
  livemode: boolean;
  status: DepositStatus;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  created_at: Date;
}

export const BRAND_SEARCH_MAX_ROWS = 101;
export const BRAND_SEARCH_MAX_IDS = 50;

/**
 * One page of a brand's deposits, newest first. The statement names only the filters that are set and is
 * planned per call with its values, so that each shape takes the index that fits it (the primary key for ids,
 * deposit_orders_brand_reference, _end_user, _status, _mode, or _created for the time range alone): one catch-all
 * statement's generic plan could only use the brand's scope and would walk its whole history for a rare value.
 */
export async function searchOrdersInBrand(db: Queryable, white_label_id: string, filters: BrandSearchFilters): Promise<DepositSearchRow[]> {
  invariant(Number.isSafeInteger(filters.limit) && filters.limit >= 1 && filters.limit <= BRAND_SEARCH_MAX_ROWS, 'a search reads a bounded page');
  invariant(filters.deposit_ids === null || filters.deposit_ids.length <= BRAND_SEARCH_MAX_IDS, 'a search names a bounded set of ids');
  const where = new SqlConditions({ conditions: ['white_label_id = $1'], params: [white_label_id] });
  where.addIfSet(filters.deposit_ids === null ? null : [...filters.deposit_ids], (at) => `deposit_id = ANY($${at}::text[])`);
  addOrderSearchFilters(where, filters);
  if (filters.after !== null) where.addValues([filters.after.created_at, filters.after.deposit_id], (at) => `(created_at, deposit_id) < ($${at}::timestamptz, $${at + 1}::text)`);
  const limit = where.parameter(filters.limit);
  const { rows } = await db.query<DepositSearchRow>(
    `${PLANNED_PER_CALL} SELECT deposit_id, merchant_id, livemode, status, merchant_reference, end_user_ref, amount_minor, created_at
       FROM deposit_orders WHERE ${where.where()}
      ORDER BY created_at DESC, deposit_id DESC LIMIT $${limit}`,
    where.params,
  );
  return rows.map((row) => ({ ...row, amount_minor: Number(row.amount_minor) }));
}

