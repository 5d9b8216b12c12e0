import { invariant } from '../platform/assert.ts';
import { PLANNED_PER_CALL, type Queryable } from '../platform/db.ts';
import { deferWrite, holdsLock, rememberLocked, TransactionFacts } from '../platform/unit-of-work.ts';
import { appendParts, rowFromJson, type ReadPart } from '../platform/read-part.ts';
import type { WithdrawalAccount, WithdrawalLegRow, WithdrawalPolicyRow, WithdrawalRow, WithdrawalStatus } from './types.ts';

/**
 * All SQL of withdrawals: policies, orders and legs. Every query of tenant data is scoped by the
 * brand, and order queries by (brand, merchant, livemode) unless the caller is the brand's own
 * matching or back office, which name the brand explicitly.
 */

/** Every column of an order row, in `WithdrawalRow`'s order (the module's other repositories read orders with it too). */
export const ORDER_COLUMNS = `white_label_id, merchant_id, livemode, withdrawal_id, version, status, merchant_reference, end_user_ref,
  beneficiary_id, amount_total_minor, fee_total_minor, fee_breakdown, fee_recognized_minor, filled_minor, reserved_minor,
  remaining_minor, refunded_minor, settled_splits, max_splits, expires_at, approval_expires_at, refund_of_deposit_id,
  replacement_of_withdrawal_id, metadata, client, close_reason_code, closed_by, review_note, reserve_balance_transaction_id,
  release_balance_transaction_id, created_at, updated_at, closed_at, dispute, funds_on_hold, in_matching_queue, refund_reason_code,
  refund_note`;

const LEG_COLUMNS = `white_label_id, merchant_id, livemode, withdrawal_id, leg_ref, deposit_leg_key, deposit_id, amount_minor,
  reserved_amount_minor, status, sequence, fee_recognized_minor, settled_at, balance_transaction_id, fee_balance_transaction_id, auto_confirm_at,
  receipt_state, release_reason_code, reversal_reason_code, replacement_withdrawal_id, created_at, updated_at`;

/** The columns of a policy row, qualified by `p`, as `findPolicy` and `readCreationContext` read them. */
const POLICY_COLUMNS = `p.white_label_id, p.livemode, p.approval_threshold_minor, p.approval_ttl_seconds, p.expires_in_seconds,
  p.max_splits, p.min_amount_minor, p.max_amount_minor, p.created_at, p.updated_at`;

export async function findPolicy(db: Queryable, white_label_id: string, livemode: boolean): Promise<WithdrawalPolicyRow | null> {
  const { rows } = await db.query<WithdrawalPolicyRow>(
    `SELECT ${POLICY_COLUMNS} FROM withdrawal_policies p WHERE p.white_label_id = $1 AND p.livemode = $2`,
    [white_label_id, livemode],
  );
  return rows[0] ?? null;
}

/** What a creation reads before it decides (`readCreationContext`). */
export interface CreationContext<Carried> {
  /** The brand's policy; null: the default. */
  policy: WithdrawalPolicyRow | null;
  /** Another withdrawal of the merchant and environment has this merchant_reference. */
  reference_taken: boolean;
  /** What the carried read of another module answered (the fee quote). */
  carried: Carried | null;
}

/**
 * What a creation reads before it decides, in one round trip: the brand's policy (null: the default), whether
 * the merchant reference is taken, and a read another module owns that the creation needs as well (its fee
 * quote, src/platform/read-part.ts). As a part itself, so that the request's idempotency statement can carry
 * the whole of it (`readCreationContext` sends it alone otherwise).
 */
export function creationContextPart<Carried>(account: WithdrawalAccount, merchant_reference: string, carried: ReadPart<Carried> | null): ReadPart<CreationContext<Carried>> {
  const params: unknown[] = [account.white_label_id, account.livemode, account.merchant_id, merchant_reference];
  const [carriedSql = 'NULL'] = appendParts(carried ? [carried] : [], params);
  return {
    sql: `(SELECT json_build_object(
              'policy', (SELECT row_to_json(x) FROM (SELECT ${POLICY_COLUMNS} FROM withdrawal_policies p WHERE p.white_label_id = $1 AND p.livemode = $2) AS x),
              'reference_taken', EXISTS (SELECT 1 FROM withdrawal_orders
                                          WHERE white_label_id = $1 AND merchant_id = $3 AND livemode = $2 AND merchant_reference = $4),
              'carried', ${carriedSql}))`,
    params,
    parse: (value) => {
      const answer = value as { policy: unknown; reference_taken: boolean; carried: unknown } | null;
      invariant(answer !== null, 'the creation read answers one object');
      return {
        policy: rowFromJson<WithdrawalPolicyRow>(answer.policy, ['created_at', 'updated_at']),
        reference_taken: answer.reference_taken,
        carried: carried ? carried.parse(answer.carried ?? null) : null,
      };
    },
  };
}

export async function readCreationContext<Carried>(db: Queryable, part: ReadPart<CreationContext<Carried>>): Promise<CreationContext<Carried>> {
  const { rows } = await db.query<{ context: unknown }>(`SELECT ${part.sql} AS context`, part.params);
  return part.parse(rows[0]?.context ?? null);
}

export async function upsertPolicy(db: Queryable, row: Omit<WithdrawalPolicyRow, 'created_at' | 'updated_at'>, now: Date): Promise<WithdrawalPolicyRow> {
  const { rows } = await db.query<WithdrawalPolicyRow>(
    `INSERT INTO withdrawal_policies (white_label_id, livemode, approval_threshold_minor, approval_ttl_seconds, expires_in_seconds,
       max_splits, min_amount_minor, max_amount_minor, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
     ON CONFLICT (white_label_id, livemode) DO UPDATE SET
       approval_threshold_minor = EXCLUDED.approval_threshold_minor, approval_ttl_seconds = EXCLUDED.approval_ttl_seconds,
       expires_in_seconds = EXCLUDED.expires_in_seconds, max_splits = EXCLUDED.max_splits,
       min_amount_minor = EXCLUDED.min_amount_minor, max_amount_minor = EXCLUDED.max_amount_minor, updated_at = EXCLUDED.updated_at
     RETURNING white_label_id, livemode, approval_threshold_minor, approval_ttl_seconds, expires_in_seconds, max_splits,
               min_amount_minor, max_amount_minor, created_at, updated_at`,
    [row.white_label_id, row.livemode, row.approval_threshold_minor, row.approval_ttl_seconds, row.expires_in_seconds,
      row.max_splits, row.min_amount_minor, row.max_amount_minor, now],
  );
  const stored = rows[0];
  if (!stored) throw new Error('policy upsert returned no row');
  return stored;
}

/** The row key under which a transaction remembers that it holds an order's lock (src/platform/unit-of-work.ts). */
export function orderRowKey(white_label_id: string, withdrawal_id: string): string {
  return `withdrawal_orders:${white_label_id}:${withdrawal_id}`;
}

/** A leg's row key, as its writes name the row they write (src/platform/unit-of-work.ts `rows_written`). */
function legRowKey(white_label_id: string, leg_ref: string): string {
  return `withdrawal_legs:${white_label_id}:${leg_ref}`;
}

/**
 * Inserts a new order, queued in the transaction (src/platform/unit-of-work.ts). A merchant reference
 * taken by a concurrent creation makes the flush throw `taken()`, which rolls the creation back.
 */
export async function insertOrder(db: Queryable, row: WithdrawalRow, taken: () => Error): Promise<void> {
  const key = orderRowKey(row.white_label_id, row.withdrawal_id);
  await deferWrite(db, {
    sql: `INSERT INTO withdrawal_orders (${ORDER_COLUMNS})
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,
                  $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37, $38)
          ON CONFLICT (white_label_id, merchant_id, livemode, merchant_reference) DO NOTHING`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.withdrawal_id, row.version, row.status, row.merchant_reference,
      row.end_user_ref, row.beneficiary_id, row.amount_total_minor, row.fee_total_minor, JSON.stringify(row.fee_breakdown),
      row.fee_recognized_minor, row.filled_minor, row.reserved_minor, row.remaining_minor, row.refunded_minor, row.settled_splits,
      row.max_splits, row.expires_at, row.approval_expires_at, row.refund_of_deposit_id, row.replacement_of_withdrawal_id,
      row.metadata === null ? null : JSON.stringify(row.metadata), row.client === null ? null : JSON.stringify(row.client),
      row.close_reason_code, row.closed_by, row.review_note, row.reserve_balance_transaction_id,
      row.release_balance_transaction_id, row.created_at, row.updated_at, row.closed_at,
      row.dispute === null ? null : JSON.stringify(row.dispute), row.funds_on_hold, row.in_matching_queue, row.refund_reason_code,
      row.refund_note,
    ],
    expected_rows: 1,
    on_unexpected_rows: taken,
    rows_written: [key],
  });
  rememberLocked(db, key);
}

/**
 * Writes every mutable column of an order where the stored version is `expected_version`: the
 * optimistic check of `applyTransition`. Identity columns (ids, amounts ordered, fee) never change.
 */
export async function updateOrder(db: Queryable, row: WithdrawalRow, expected_version: number): Promise<boolean> {
  const sql = `UPDATE withdrawal_orders
        SET version = $4, status = $5, fee_recognized_minor = $6, filled_minor = $7, reserved_minor = $8, remaining_minor = $9,
            refunded_minor = $10, settled_splits = $11, expires_at = $12, approval_expires_at = $13, close_reason_code = $14,
            closed_by = $15, review_note = $16, release_balance_transaction_id = $17, updated_at = $18, closed_at = $19,
            dispute = $20, funds_on_hold = $21
      WHERE white_label_id = $1 AND withdrawal_id = $2 AND version = $3`;
  const params = [
      row.white_label_id, row.withdrawal_id, expected_version, row.version, row.status, row.fee_recognized_minor, row.filled_minor,
      row.reserved_minor, row.remaining_minor, row.refunded_minor, row.settled_splits, row.expires_at, row.approval_expires_at,
      row.close_reason_code, row.closed_by, row.review_note, row.release_balance_transaction_id, row.updated_at, row.closed_at,
      row.dispute === null ? null : JSON.stringify(row.dispute), row.funds_on_hold,
  ];
  const key = orderRowKey(row.white_label_id, row.withdrawal_id);
  forgetCandidate(db, row.white_label_id, row.withdrawal_id);
  if (!holdsLock(db, key)) return (await db.query(sql, params)).rowCount === 1;
  // The transaction holds the row: the version cannot have moved, and the write is queued.
  await deferWrite(db, { sql, params, expected_rows: 1, rows_written: [key] });
  if (lockedOrder(db, row.white_label_id, row.withdrawal_id)) LOCKED_ORDERS.set(db, key, { ...row });
  return true;
}

/** The caller's own order, or null (another merchant's or environment's id is null too). */
export async function findOrder(db: Queryable, account: WithdrawalAccount, withdrawal_id: string): Promise<WithdrawalRow | null> {
  const { rows } = await db.query<WithdrawalRow>(
    `SELECT ${ORDER_COLUMNS} FROM withdrawal_orders
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND withdrawal_id = $4`,
    [account.white_label_id, account.merchant_id, account.livemode, withdrawal_id],
  );
  return rows[0] ?? null;
}

/** The orders a transaction locked through this file, by `orderRowKey` (src/platform/unit-of-work.ts `TransactionFacts`). */
const LOCKED_ORDERS = new TransactionFacts<WithdrawalRow>('withdrawals.locked_orders');

/**
 * The transaction's copy of an order it locked through this file (`LOCKED_ORDERS`),
 * so that the order is read once per transaction: its row lock keeps every other transaction from
 * changing it, and this transaction's own writes of it (`updateOrder`) keep the copy up to date.
 */
function lockedOrder(db: Queryable, white_label_id: string, withdrawal_id: string): WithdrawalRow | undefined {
  const key = orderRowKey(white_label_id, withdrawal_id);
  return holdsLock(db, key) ? LOCKED_ORDERS.get(db, key) : undefined;
}

/** The transaction's copy of an order it holds locked (see `lockedOrder`), or null. */
export function heldOrder(db: Queryable, white_label_id: string, withdrawal_id: string): WithdrawalRow | null {
  const known = lockedOrder(db, white_label_id, withdrawal_id);
  return known ? { ...known } : null;
}

/** Remembers the lock of an order just read FOR UPDATE, and keeps a copy of the row. */
function keepLocked(db: Queryable, row: WithdrawalRow): void {
  const key = orderRowKey(row.white_label_id, row.withdrawal_id);
  rememberLocked(db, key);
  LOCKED_ORDERS.set(db, key, { ...row });
}

/**
 * Locks an order for the rest of the transaction; scoped by brand only (matching and back office). A
 * transaction that locked it already gets its copy back without a round trip (see `lockedOrder`).
 */
export async function lockOrderInBrand(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalRow | null> {
  const known = lockedOrder(db, white_label_id, withdrawal_id);
  if (known) return { ...known };
  const { rows } = await db.query<WithdrawalRow>(
    `SELECT ${ORDER_COLUMNS} FROM withdrawal_orders WHERE white_label_id = $1 AND withdrawal_id = $2 FOR UPDATE`,
    [white_label_id, withdrawal_id],
  );
  const row = rows[0];
  if (!row) return null;
  keepLocked(db, row);
  return row;
}

export async function findOrderInBrand(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalRow | null> {
  const { rows } = await db.query<WithdrawalRow>(`SELECT ${ORDER_COLUMNS} FROM withdrawal_orders WHERE white_label_id = $1 AND withdrawal_id = $2`, [
    white_label_id,
    withdrawal_id,
  ]);
  return rows[0] ?? null;
}

/**
 * Takes a locked order out of the matching queue for good (migration 0031's column): no deposit reserves it again. Not
 * part of the order's object, so its version does not move; the order still closes by its leg, its cancel or its expiry.
 */
export async function leaveMatchingQueue(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<void> {
  const { rowCount } = await db.query('UPDATE withdrawal_orders SET in_matching_queue = false WHERE white_label_id = $1 AND withdrawal_id = $2', [white_label_id, withdrawal_id]);
  invariant(rowCount === 1, `${withdrawal_id} exists`);
}

/**
 * How many of the oldest live orders the prepared oldest-first statement looks at (`lockMatchable`). The
 * head of the queue holds the orders most amounts can take, less those other matchers hold (at most one
 * per pooled connection of every process) and those too small, expired, full of splits or the
 * depositor's own; past this many the statement planned per call takes over.
 */
export const MATCHING_QUEUE_HEAD_ORDERS = 64;

/** The most candidates one matching-queue statement locks (`WithdrawalService.findMatchable` asks for 1 to 50). */
const MATCHABLE_LIMIT_MAXIMUM = 50;

/**
 * The conditions on a locked candidate. The limit on splits counts the order's reserved legs.
 *
 * `hidden_from_the_planner` compares with the values through scalar subqueries, which PostgreSQL plans as
 * parameters it does not know, in a custom plan as in the generic one. The head-of-queue statement takes
 * it: a custom plan that sees the amount estimates more candidates per order looked at than the generic
 * plan, so the prepared statement's generic plan always looked dearer and was never chosen; the statement
 * was planned again on every call (0.5 ms, five times its execution, measured 2026-11-26). Its plan does
 * not depend on the values, so nothing is lost by hiding them.
 */
function matchableConditions(values: 'seen_by_the_planner' | 'hidden_from_the_planner'): string {
  const hidden = values === 'hidden_from_the_planner';
  const amount = hidden ? '(SELECT $3::bigint)' : '$3';
  const now = hidden ? '(SELECT $4::timestamptz)' : '$4';
  const excluded = hidden ? '(SELECT $5::text)' : '$5::text';
  // In the head statement the brand and environment are the head's (the same row by its primary key), so
  // they are named there only.
  const scope = hidden ? '' : 'o.white_label_id = $1 AND o.livemode = $2 AND ';
  // An order out of the queue (a sandbox scenario's own, migration 0031) is reserved only by the deposit naming it.
  return `${scope}o.status IN ('open', 'partially_filled') AND o.in_matching_queue
        AND o.remaining_minor > 0 AND o.remaining_minor >= ${amount} AND o.expires_at > ${now}
        AND (${excluded} IS NULL OR o.merchant_id <> ${excluded})
        AND o.settled_splits + (SELECT count(*) FROM withdrawal_legs l
                                 WHERE l.white_label_id = o.white_label_id AND l.withdrawal_id = o.withdrawal_id
                                   AND l.status = 'reserved') < o.max_splits`;
}

/** What a candidate row answers besides its columns: its legs holding a reservation and its version in the statement's snapshot. */
const CANDIDATE_EXTRAS = `(SELECT count(*)::integer FROM withdrawal_legs l
              WHERE l.white_label_id = o.white_label_id AND l.withdrawal_id = o.withdrawal_id AND l.status = 'reserved') AS reserved_legs,
            (SELECT s.version FROM withdrawal_orders s
              WHERE s.white_label_id = o.white_label_id AND s.withdrawal_id = o.withdrawal_id) AS version_in_snapshot`;

type MatchableShape = 'queue_head' | 'oldest_planned_per_call' | 'largest_first';

/**
 * The three matching-queue statements, each in the order of its index (migration 0010). The literal
 * `remaining_minor > 0` repeats the indexes' predicate so that a plan made without the values can still
 * use them.
 *
 * - `queue_head`, prepared: the oldest `MATCHING_QUEUE_HEAD_ORDERS` live orders from the oldest-first
 *   index, each joined to its row, which is checked and locked. Its plan does not depend on the amount, so
 *   the generic plan is the right one for every amount and the statement is never planned again.
 * - `oldest_planned_per_call`: the same order over the whole queue, planned with the values on every call,
 *   because the short way depends on the amount: the oldest end for an amount most orders can take, the
 *   `remaining_minor` range for one that few or none can take. Sent only when the head had no candidate.
 * - `largest_first`, prepared: rule 3 and the suggested amounts, in the largest-first index's order.
 */
function matchableStatement(shape: MatchableShape, carriedColumns: string, limit: number): string {
  // The limit is written into the text (one statement per limit, 1 to 50): a plan made without the values
  // assumes a `LIMIT $n` takes a tenth of the rows, which made the generic plan of the head look seven times
  // dearer than a custom one, so PostgreSQL planned the prepared statement again on every call.
  invariant(Number.isInteger(limit) && limit >= 1 && limit <= MATCHABLE_LIMIT_MAXIMUM, 'a matching-queue limit is an integer from 1 to 50');
  const select = `SELECT ${carriedColumns} ${ORDER_COLUMNS}, ${CANDIDATE_EXTRAS}`;
  if (shape === 'queue_head') {
    // The head's columns are renamed so that the unqualified order columns name the joined row only. The
    // head is read in index order and the join keeps that order, so the rows are locked oldest first and
    // the statement stops at the first `limit` it can lock, as the whole-queue statement does.
    return `${select}
       FROM (SELECT h.white_label_id AS head_white_label_id, h.withdrawal_id AS head_withdrawal_id, h.created_at AS head_created_at
               FROM withdrawal_orders h
              WHERE h.white_label_id = $1 AND h.livemode = $2 AND h.status IN ('open', 'partially_filled') AND h.remaining_minor > 0
                AND h.in_matching_queue
              ORDER BY h.created_at, h.withdrawal_id
              LIMIT ${MATCHING_QUEUE_HEAD_ORDERS}) head
       JOIN withdrawal_orders o ON o.white_label_id = head.head_white_label_id AND o.withdrawal_id = head.head_withdrawal_id
      WHERE ${matchableConditions('hidden_from_the_planner')}
      ORDER BY head.head_created_at, head.head_withdrawal_id
      LIMIT ${limit}
      FOR UPDATE OF o SKIP LOCKED`;
  }
  const order = shape === 'largest_first' ? 'o.remaining_minor DESC, o.created_at, o.withdrawal_id' : 'o.created_at, o.withdrawal_id';
  return `${shape === 'oldest_planned_per_call' ? PLANNED_PER_CALL : ''} ${select}
       FROM withdrawal_orders o
      WHERE ${matchableConditions('seen_by_the_planner')}
      ORDER BY ${order}
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED`;
}

/**
 * The matching queue: live orders of one brand and environment that can take a leg of `amount_minor`
 * now (enough remaining, not expired, a split left), oldest first, locked with SKIP LOCKED so that
 * concurrent matchers take different orders. `exclude_merchant_id` keeps a merchant from paying itself.
 *
 * Oldest first looks at the head of the queue with a prepared statement, and only when the head has fewer
 * candidates than asked, at the whole queue with a statement planned per call (`matchableStatement`).
 * Planning that statement was a fifth of the database time of a deposit creation (docs/benchmarks.md). The
 * answer is the same either way: a candidate in the head is older than any order behind it, and the orders
 * the first statement locked are this transaction's, which the second one takes again.
 */
export async function lockMatchable(
  db: Queryable,
  input: { white_label_id: string; livemode: boolean; amount_minor: number; now: Date; exclude_merchant_id: string | null; limit: number; largest_first: boolean },
  carried: readonly ReadPart<unknown>[] = [],
): Promise<WithdrawalRow[]> {
  if (input.largest_first) return (await lockMatchableWith(db, 'largest_first', input, carried)).candidates;
  const head = await lockMatchableWith(db, 'queue_head', input, carried);
  if (head.candidates.length >= input.limit) return head.candidates;
  // Reads the head answered are kept already; they ride again only when the head answered none. An order
  // the head locked but dropped as stale is locked by this transaction, so the statement below, on a new
  // snapshot, finds it again (SKIP LOCKED skips only other transactions' locks) and reads it as it is.
  return (await lockMatchableWith(db, 'oldest_planned_per_call', input, head.answered ? [] : carried)).candidates;
}

async function lockMatchableWith(
  db: Queryable,
  shape: MatchableShape,
  input: { white_label_id: string; livemode: boolean; amount_minor: number; now: Date; exclude_merchant_id: string | null; limit: number },
  carried: readonly ReadPart<unknown>[],
): Promise<{ candidates: WithdrawalRow[]; answered: boolean }> {
  // The answer also carries what a reservation of the order must know, so that `reserveLeg` need not read it
  // again (see `rememberCandidate`): the legs holding a reservation, and the order's version as this
  // statement's snapshot saw it, which differs from the locked row's when a change committed in between.
  // Reads of the caller's that ride on the statement (src/platform/read-part.ts), each answered in every row and
  // parsed from the first (a statement that finds no candidate answers none of them).
  const params: unknown[] = [input.white_label_id, input.livemode, input.amount_minor, input.now, input.exclude_merchant_id];
  const carriedColumns = appendParts(carried, params).map((sql, index) => `${sql} AS carried_${index},`);
  const { rows } = await db.query<WithdrawalRow & { reserved_legs: number; version_in_snapshot: number | null } & Record<string, unknown>>(
    matchableStatement(shape, carriedColumns.join(' '), input.limit),
    params,
  );
  const first = rows[0];
  if (first) carried.forEach((part, index) => part.parse(first[`carried_${index}`] ?? null));
  const candidates: WithdrawalRow[] = [];
  for (const { reserved_legs, version_in_snapshot, ...answered } of rows) {
    const order: Record<string, unknown> = answered;
    carried.forEach((_, index) => delete order[`carried_${index}`]);
    const row = order as unknown as WithdrawalRow;
    rememberLocked(db, orderRowKey(row.white_label_id, row.withdrawal_id));
    // A change committed between the statement's snapshot and its lock: the lock took the newer row and
    // rechecked the row's own columns, but the statement counted its legs in the older snapshot, so the
    // order may have no split left. It stays locked and is not offered: a candidate must take its leg
    // (MatchingService asserts it), and only a new read can say whether this one would.
    if (version_in_snapshot === null || Number(version_in_snapshot) !== Number(row.version)) continue;
    rememberCandidate(db, row, Number(reserved_legs), input.now);
    candidates.push(row);
  }
  return { candidates, answered: first !== undefined };
}

/** Orders as the matching queue read and locked them, by `orderRowKey` (src/platform/unit-of-work.ts `TransactionFacts`). */
const CANDIDATES = new TransactionFacts<LockedCandidate>('withdrawals.candidates');

/**
 * Remembers an order as the matching queue locked it, with its legs holding a reservation, for a
 * reservation later in the transaction. Only for an order whose locked version the statement's snapshot
 * saw (`lockMatchableWith` does not offer the others): every change of an order's reserved legs moves its
 * version, so an unchanged version means the count holds.
 */
function rememberCandidate(db: Queryable, row: WithdrawalRow, reserved_legs: number, read_at: Date): void {
  CANDIDATES.set(db, orderRowKey(row.white_label_id, row.withdrawal_id), { row, reserved_legs, read_at });
}

/** An order as the matching queue read and locked it, and the instant its statement found it live. */
export interface LockedCandidate {
  row: WithdrawalRow;
  /** Its legs holding a reservation, counted by the statement. */
  reserved_legs: number;
  /** The `now` the statement compared `expires_at` with. */
  read_at: Date;
}

/** Forgets what the matching queue read of an order: a write of the order or of its legs makes it stale. */
function forgetCandidate(db: Queryable, white_label_id: string, withdrawal_id: string): void {
  CANDIDATES.delete(db, orderRowKey(white_label_id, withdrawal_id));
}

/**
 * The order as this transaction's matching queue read and locked it, with its legs holding a reservation,
 * or null when it was not read so or has been written since. The row lock kept it unchanged, so it is what
 * a new read would answer. Taken once: the reservation that uses it writes the order.
 */
export function takeCandidate(db: Queryable, white_label_id: string, withdrawal_id: string): LockedCandidate | null {
  const key = orderRowKey(white_label_id, withdrawal_id);
  const candidate = CANDIDATES.take(db, key);
  if (!candidate.found) return null;
  invariant(holdsLock(db, key), 'a candidate is locked by this transaction');
  return candidate.value;
}

/**
 * Locks these orders of one brand in withdrawal-id order and returns their owners: the withdrawal rank of
 * the lock order (src/platform/lock-order.ts), taken before the owners' event feeds. The rows are kept
 * for the transaction (see `lockedOrder`), and a transaction that holds every one of them already (a
 * deposit locks its withdrawals on each change) is answered from them without a round trip.
 */
export async function lockOrdersOf(db: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
  if (withdrawal_ids.length === 0) return [];
  const ids = [...new Set(withdrawal_ids)];
  const known = ids.map((withdrawal_id) => lockedOrder(db, white_label_id, withdrawal_id));
  if (known.every((row) => row !== undefined)) return [...new Set(known.map((row) => row!.merchant_id))];
  const { rows } = await db.query<WithdrawalRow>(
    `SELECT ${ORDER_COLUMNS} FROM withdrawal_orders WHERE white_label_id = $1 AND withdrawal_id = ANY($2::text[])
      ORDER BY withdrawal_id FOR UPDATE`,
    [white_label_id, ids],
  );
  for (const row of rows) keepLocked(db, row);
  return [...new Set(rows.map((row) => row.merchant_id))];
}

/**
 * `lockOrdersOf` for the orders a read of another module names (src/platform/read-part.ts: `ids` answers
 * their ids as a JSON array, or null for none), with that module's reads carried in the same statement: a
 * deposit's change names its withdrawals through its legs, and reading the legs first cost a round trip of
 * its own. The orders are locked in withdrawal-id order, as `lockOrdersOf` locks them. The statement always
 * answers one row at least, so the carried reads are answered when no order is named too. The carried reads
 * and the ids are read on the statement's snapshot, taken before a lock it waits for is granted: only reads
 * that no lock taken here orders belong here (a deposit's legs, which change only under the deposit's own
 * lock, taken by an earlier statement of the transaction).
 */
export async function lockOrdersNamedBy(
  db: Queryable,
  white_label_id: string,
  ids: ReadPart<unknown>,
  carried: readonly ReadPart<unknown>[],
): Promise<{ owners: string[]; carried: unknown[] }> {
  const params: unknown[] = [white_label_id];
  const carriedColumns = appendParts(carried, params).map((sql, index) => `${sql} AS carried_${index},`);
  const [idsSql] = appendParts([ids], params);
  const { rows } = await db.query<Partial<WithdrawalRow> & Record<string, unknown>>(
    `SELECT ${carriedColumns.join(' ')} o.*
       FROM (VALUES (1)) AS one (x)
       LEFT JOIN (SELECT ${ORDER_COLUMNS} FROM withdrawal_orders
                   WHERE white_label_id = $1 AND withdrawal_id IN (SELECT json_array_elements_text(${idsSql}))
                   ORDER BY withdrawal_id FOR UPDATE) AS o ON true`,
    params,
  );
  const first = rows[0];
  invariant(first !== undefined, 'the statement answers one row at least');
  const answers = carried.map((part, index) => part.parse(first[`carried_${index}`] ?? null));
  const locked: WithdrawalRow[] = [];
  for (const answered of rows) {
    if (answered.withdrawal_id === null || answered.withdrawal_id === undefined) continue;
    const order: Record<string, unknown> = { ...answered };
    carried.forEach((_, index) => delete order[`carried_${index}`]);
    const row = order as unknown as WithdrawalRow;
    keepLocked(db, row);
    locked.push(row);
  }
  return { owners: [...new Set(locked.map((row) => row.merchant_id))], carried: answers };
}

/** The timestamp columns of an order, which a row read as JSON has as text. */
const ORDER_DATE_COLUMNS = ['expires_at', 'approval_expires_at', 'created_at', 'updated_at', 'closed_at'] as const satisfies readonly (keyof WithdrawalRow)[];

/**
 * `lockOrdersNamedBy` as a read that another module's statement carries: the orders `ids` names (a JSON array of
 * ids, or null for none) locked in withdrawal-id order, answered as rows. For a statement that takes an earlier
 * lock of the lock order first and runs this after it (a deposit order's lock, `DepositService.settlementLockRead`);
 * the carrying module hands the rows back (`keepLockedOrders`), so that later locks of them cost nothing.
 */
export function lockOrdersNamedByPart(white_label_id: string, ids: ReadPart<unknown>): ReadPart<WithdrawalRow[]> {
  const params: unknown[] = [white_label_id];
  const [idsSql] = appendParts([ids], params);
  return {
    sql: `(SELECT coalesce(json_agg(row_to_json(o) ORDER BY o.withdrawal_id), '[]'::json)
             FROM (SELECT ${ORDER_COLUMNS} FROM withdrawal_orders
                    WHERE white_label_id = $1 AND withdrawal_id IN (SELECT json_array_elements_text(${idsSql}))
                    ORDER BY withdrawal_id FOR UPDATE) AS o)`,
    params,
    parse: (value) => ((value ?? []) as unknown[]).map((row) => rowFromJson<WithdrawalRow>(row, ORDER_DATE_COLUMNS)!),
  };
}

/** Remembers the locks of orders another module's statement took for this transaction (`lockOrdersNamedByPart`). */
export function keepLockedOrders(db: Queryable, rows: readonly WithdrawalRow[]): void {
  for (const row of rows) keepLocked(db, row);
}

/** The merchants that own these orders (one brand). */
export async function merchantsOf(db: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
  if (withdrawal_ids.length === 0) return [];
  const { rows } = await db.query<{ merchant_id: string }>(
    'SELECT DISTINCT merchant_id FROM withdrawal_orders WHERE white_label_id = $1 AND withdrawal_id = ANY($2::text[])',
    [white_label_id, [...withdrawal_ids]],
  );
  return rows.map((row) => row.merchant_id);
}

/** Queued in the transaction (src/platform/unit-of-work.ts); the leg's order is locked by it. */
export async function insertLeg(db: Queryable, row: WithdrawalLegRow): Promise<void> {
  forgetCandidate(db, row.white_label_id, row.withdrawal_id);
  forgetHeldLeg(db, row);
  await deferWrite(db, {
    sql: `INSERT INTO withdrawal_legs (${LEG_COLUMNS})
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.withdrawal_id, row.leg_ref, row.deposit_leg_key, row.deposit_id,
      row.amount_minor, row.reserved_amount_minor, row.status, row.sequence, row.fee_recognized_minor, row.settled_at, row.balance_transaction_id,
      row.fee_balance_transaction_id, row.auto_confirm_at, row.receipt_state, row.release_reason_code, row.reversal_reason_code,
      row.replacement_withdrawal_id, row.created_at, row.updated_at,
    ],
    expected_rows: 1,
    rows_written: [legRowKey(row.white_label_id, row.leg_ref)],
  });
}

const LEG_UPDATE_SQL = `UPDATE withdrawal_legs
    SET status = $4, sequence = $5, fee_recognized_minor = $6, settled_at = $7, balance_transaction_id = $8,
        fee_balance_transaction_id = $9, auto_confirm_at = $10, receipt_state = $11, release_reason_code = $12,
        reversal_reason_code = $13, replacement_withdrawal_id = $14, updated_at = $15, amount_minor = $16
  WHERE white_label_id = $1 AND leg_ref = $2 AND status = $3`;

function legUpdateParams(row: WithdrawalLegRow, expected_status: WithdrawalLegRow['status']): unknown[] {
  return [
    row.white_label_id, row.leg_ref, expected_status, row.status, row.sequence, row.fee_recognized_minor, row.settled_at,
    row.balance_transaction_id, row.fee_balance_transaction_id, row.auto_confirm_at, row.receipt_state, row.release_reason_code,
    row.reversal_reason_code, row.replacement_withdrawal_id, row.updated_at, row.amount_minor,
  ];
}

/** Moves a leg on from `expected_status`; a short fill also lowers `amount_minor` to what was paid. */
export async function updateLeg(db: Queryable, row: WithdrawalLegRow, expected_status: WithdrawalLegRow['status']): Promise<boolean> {
  forgetCandidate(db, row.white_label_id, row.withdrawal_id);
  forgetHeldLeg(db, row);
  const result = await db.query(LEG_UPDATE_SQL, legUpdateParams(row, expected_status));
  return result.rowCount === 1;
}

/**
 * `updateLeg` where the caller's transaction holds the leg's order lock, so the leg cannot have moved:
 * queued (src/platform/unit-of-work.ts), with the flush checking that it still was `expected_status`.
 * Without the lock it is sent at once and the same check throws.
 */
export async function updateLockedLeg(db: Queryable, row: WithdrawalLegRow, expected_status: WithdrawalLegRow['status']): Promise<void> {
  forgetCandidate(db, row.white_label_id, row.withdrawal_id);
  forgetHeldLeg(db, row);
  if (!holdsLock(db, orderRowKey(row.white_label_id, row.withdrawal_id))) {
    invariant(await updateLeg(db, row, expected_status), 'the leg is locked through its order');
    return;
  }
  await deferWrite(db, {
    sql: LEG_UPDATE_SQL,
    params: legUpdateParams(row, expected_status),
    expected_rows: 1,
    rows_written: [legRowKey(row.white_label_id, row.leg_ref)],
  });
}

/**
 * What a reservation reads about an order's legs ($1 brand, $2 order, $3 the deposit leg's key): the leg that
 * key reserved already, if any, and how many of the order's legs hold a reservation now.
 */
const RESERVATION_LEG_COLUMNS = `(SELECT leg_ref FROM withdrawal_legs WHERE white_label_id = $1 AND deposit_leg_key = $3) AS existing_leg_ref,
  (SELECT count(*)::integer FROM withdrawal_legs WHERE white_label_id = $1 AND withdrawal_id = $2 AND status = 'reserved') AS reserved_legs`;

/**
 * What a reservation must know about an order's legs, in one read: the leg a deposit leg already
 * reserved (the call is idempotent by `deposit_leg_key`), and how many legs hold a reservation now.
 * Read after the order's row lock, in a statement of its own, so it sees every leg committed before.
 */
export async function legsOfReservation(
  db: Queryable,
  white_label_id: string,
  withdrawal_id: string,
  deposit_leg_key: string,
): Promise<{ existing_leg_ref: string | null; reserved_legs: number }> {
  const { rows } = await db.query<{ existing_leg_ref: string | null; reserved_legs: number }>(
    `SELECT ${RESERVATION_LEG_COLUMNS}`,
    [white_label_id, withdrawal_id, deposit_leg_key],
  );
  const row = rows[0];
  if (!row) throw new Error('the reservation read returned no row');
  return { existing_leg_ref: row.existing_leg_ref, reserved_legs: Number(row.reserved_legs) };
}

/**
 * The order and what a reservation must know about its legs, in one read, for a transaction that already
 * holds the order's lock from an earlier statement (the matching queue locked it): this statement's
 * snapshot is taken after that lock, so it sees every leg committed before, and no one can add one since.
 */
export async function readHeldOrderForReservation(
  db: Queryable,
  white_label_id: string,
  withdrawal_id: string,
  deposit_leg_key: string,
): Promise<{ row: WithdrawalRow; existing_leg_ref: string | null; reserved_legs: number } | null> {
  invariant(holdsLock(db, orderRowKey(white_label_id, withdrawal_id)), 'the order is locked by this transaction');
  const { rows } = await db.query<WithdrawalRow & { existing_leg_ref: string | null; reserved_legs: number }>(
    `SELECT ${ORDER_COLUMNS}, ${RESERVATION_LEG_COLUMNS} FROM withdrawal_orders WHERE white_label_id = $1 AND withdrawal_id = $2`,
    [white_label_id, withdrawal_id, deposit_leg_key],
  );
  const found = rows[0];
  if (!found) return null;
  const { existing_leg_ref, reserved_legs, ...row } = found;
  return { row: row as WithdrawalRow, existing_leg_ref, reserved_legs: Number(reserved_legs) };
}

/**
 * Legs of orders this transaction holds locked, as a statement that carried `legPart` answered them, and those
 * orders' next fill numbers (`nextFillSequencePart`), by leg and by order (`keepHeldLegReads`). A leg cannot
 * move under its order's lock, so each stays what `findLeg` and `nextFillSequence` would read until this
 * transaction writes one of the order's legs, which forgets them (`forgetHeldLeg`). Each is taken once.
 */
const HELD_LEGS = new TransactionFacts<WithdrawalLegRow | null>('withdrawals.held_legs');
const HELD_NEXT_FILLS = new TransactionFacts<number>('withdrawals.held_next_fills');

/** Forgets what a carried read answered about a leg and its order's fill numbers: a write of one of the order's legs makes it stale. */
function forgetHeldLeg(db: Queryable, row: Pick<WithdrawalLegRow, 'white_label_id' | 'withdrawal_id' | 'leg_ref'>): void {
  HELD_LEGS.delete(db, legRowKey(row.white_label_id, row.leg_ref));
  HELD_NEXT_FILLS.delete(db, orderRowKey(row.white_label_id, row.withdrawal_id));
}

/**
 * Keeps what a statement answered for `legPart` and `nextFillSequencePart` reads of orders this transaction
 * holds locked, for `findLeg` and `nextFillSequence` to take instead of a round trip each.
 */
export function keepHeldLegReads(
  db: Queryable,
  white_label_id: string,
  answers: { legs: readonly { leg_ref: string; row: WithdrawalLegRow | null }[]; next_fills: readonly { withdrawal_id: string; next: number }[] },
): void {
  for (const { leg_ref, row } of answers.legs) HELD_LEGS.set(db, legRowKey(white_label_id, leg_ref), row);
  for (const { withdrawal_id, next } of answers.next_fills) HELD_NEXT_FILLS.set(db, orderRowKey(white_label_id, withdrawal_id), next);
}

/** `findLeg` as a read another module's statement carries (src/platform/read-part.ts), for a leg whose order the transaction has locked. */
export function legPart(white_label_id: string, leg_ref: string): ReadPart<WithdrawalLegRow | null> {
  return {
    sql: `(SELECT row_to_json(l) FROM (SELECT ${LEG_COLUMNS} FROM withdrawal_legs WHERE white_label_id = $1 AND leg_ref = $2) AS l)`,
    params: [white_label_id, leg_ref],
    parse: (value) => rowFromJson<WithdrawalLegRow>(value, ['settled_at', 'auto_confirm_at', 'created_at', 'updated_at']),
  };
}

/** `nextFillSequence` as a carried read, for an order the transaction has locked (see `legPart`). */
export function nextFillSequencePart(white_label_id: string, withdrawal_id: string): ReadPart<number> {
  return {
    sql: `(SELECT coalesce(max(sequence), 0)::integer + 1 FROM withdrawal_legs WHERE white_label_id = $1 AND withdrawal_id = $2)`,
    params: [white_label_id, withdrawal_id],
    parse: (value) => Number(value ?? 1),
  };
}

/** A leg; what a carried read answered about it (`keepHeldLegReads`) is taken instead of a round trip. */
export async function findLeg(db: Queryable, white_label_id: string, leg_ref: string): Promise<WithdrawalLegRow | null> {
  const held = HELD_LEGS.take(db, legRowKey(white_label_id, leg_ref));
  if (held.found) return held.value;
  const { rows } = await db.query<WithdrawalLegRow>(`SELECT ${LEG_COLUMNS} FROM withdrawal_legs WHERE white_label_id = $1 AND leg_ref = $2`, [
    white_label_id,
    leg_ref,
  ]);
  return rows[0] ?? null;
}

/** Whose payee a leg pays: the owning order's account and beneficiary, in one read. */
export async function findLegOwner(
  db: Queryable,
  white_label_id: string,
  leg_ref: string,
): Promise<{ white_label_id: string; merchant_id: string; livemode: boolean; beneficiary_id: string } | null> {
  const { rows } = await db.query<{ white_label_id: string; merchant_id: string; livemode: boolean; beneficiary_id: string }>(
    `SELECT o.white_label_id, o.merchant_id, o.livemode, o.beneficiary_id
       FROM withdrawal_legs l
       JOIN withdrawal_orders o ON o.white_label_id = l.white_label_id AND o.withdrawal_id = l.withdrawal_id
      WHERE l.white_label_id = $1 AND l.leg_ref = $2`,
    [white_label_id, leg_ref],
  );
  return rows[0] ?? null;
}

/**
 * Whether a leg belongs to an order, and a read another module owns about that order (its beneficiary's
 * payee), as one carried read (src/platform/read-part.ts): `findLegOwner` and the payee read in the
 * statement that carries it, for an order whose owner the caller knows already.
 */
export function legOfOrderWith<Carried>(white_label_id: string, withdrawal_id: string, leg_ref: string, carried: ReadPart<Carried>): ReadPart<{ leg_of_order: boolean; carried: Carried }> {
  const params: unknown[] = [white_label_id, withdrawal_id, leg_ref];
  const [carriedSql] = appendParts([carried], params);
  return {
    sql: `(SELECT json_build_object(
              'leg_of_order', EXISTS (SELECT 1 FROM withdrawal_legs WHERE white_label_id = $1 AND withdrawal_id = $2 AND leg_ref = $3),
              'carried', ${carriedSql}))`,
    params,
    parse: (value) => {
      const answer = value as { leg_of_order: boolean; carried: unknown } | null;
      invariant(answer !== null, 'the leg read answers one object');
      return { leg_of_order: answer.leg_of_order, carried: carried.parse(answer.carried ?? null) };
    },
  };
}

export async function listLegs(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalLegRow[]> {
  const { rows } = await db.query<WithdrawalLegRow>(
    `SELECT ${LEG_COLUMNS} FROM withdrawal_legs WHERE white_label_id = $1 AND withdrawal_id = $2 ORDER BY created_at, leg_ref`,
    [white_label_id, withdrawal_id],
  );
  return rows;
}

/** The settled fills of an order, in fill order (reversed fills are not settled and are left out). */
export async function listFills(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<WithdrawalLegRow[]> {
  const { rows } = await db.query<WithdrawalLegRow>(
    `SELECT ${LEG_COLUMNS} FROM withdrawal_legs
      WHERE white_label_id = $1 AND withdrawal_id = $2 AND status = 'filled' ORDER BY sequence`,
    [white_label_id, withdrawal_id],
  );
  return rows;
}

/** The next fill number of an order (a reversed fill keeps its number). */
export async function nextFillSequence(db: Queryable, white_label_id: string, withdrawal_id: string): Promise<number> {
  // Taken from a carried read (`keepHeldLegReads`) when one answered it since the order's legs were last written.
  const held = HELD_NEXT_FILLS.take(db, orderRowKey(white_label_id, withdrawal_id));
  if (held.found) return held.value;
  const { rows } = await db.query<{ next: number }>(
    `SELECT coalesce(max(sequence), 0)::integer + 1 AS next FROM withdrawal_legs WHERE white_label_id = $1 AND withdrawal_id = $2`,
    [white_label_id, withdrawal_id],
  );
  return Number(rows[0]?.next ?? 1);
}

/**
 * Orders waiting for approval in a brand, oldest first (the back-office approval queue), without those of
 * `hidden_merchant_ids` (the service's own merchants).
 */
export async function listPendingApproval(
  db: Queryable,
  white_label_id: string,
  livemode: boolean,
  limit: number,
  hidden_merchant_ids: readonly string[],
): Promise<WithdrawalRow[]> {
  const { rows } = await db.query<WithdrawalRow>(
    `SELECT ${ORDER_COLUMNS} FROM withdrawal_orders
      WHERE white_label_id = $1 AND livemode = $2 AND status = 'pending_approval' AND merchant_id <> ALL($4::text[])
      ORDER BY created_at, withdrawal_id LIMIT $3`,
    [white_label_id, livemode, limit, hidden_merchant_ids],
  );
  return rows;
}

export type { WithdrawalStatus };
