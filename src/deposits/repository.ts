import type { Queryable } from '../platform/db.ts';
import { backlogOf, type Backlog } from '../platform/backlog.ts';
import { deferWrite, holdsLock, rememberLocked, TransactionFacts } from '../platform/unit-of-work.ts';
import { appendParts, rowFromJson, type ReadPart } from '../platform/read-part.ts';
import { invariant } from '../platform/assert.ts';
import type { SenderRow, DepositAccount, DepositLegRow, DepositPolicyRow, DepositRow, DepositStatus } from './types.ts';

/** All SQL of deposits: policies, orders and legs, each query scoped by brand (and merchant for orders). */

const ORDER_COLUMNS = `white_label_id, merchant_id, livemode, deposit_id, version, status, merchant_reference, end_user_ref,
  amount_minor, sender_bank_code, sender_account_sealed, sender_account_hmac, sender_account_last4, sender_name_th, sender_name_en,
  sender_id, device_fingerprint, client, fill_preference, min_ttl_seconds, expires_in_seconds, return_url, metadata,
  liquidity_source, expires_at, wait_started_at, late_slip_accepted_until, expired_reason, canceled_by, cancel_reason_code,
  slip_received_at, slip_is_late, transferred_amount_minor, amount_received_minor, fee_total_minor, fee_breakdown,
  credited_amount_minor, partial, settled_via, balance_transaction_id, settled_at, clearing_available_at, overpayment, reversal,
  review, rejection, verification, slip_attempts, window_closed_at, created_at, updated_at`;

const LEG_COLUMNS = `white_label_id, deposit_id, leg_ref, sequence, amount_minor, expires_at, status, destination, withdrawal_id, withdrawal_leg_ref,
  receiver_bank_code, receiver_bank_name_th, receiver_account_last4, receiver_name_masked, created_at, updated_at, paid_minor`;

const POLICY_COLUMNS = `white_label_id, livemode, min_amount_minor, max_amount_minor, default_expires_in_seconds, max_expires_in_seconds,
  max_legs, liquidity_wait_seconds, gateway_bank_code, gateway_account_sealed, gateway_account_last4, gateway_account_name_th,
  four_eyes_min_amount_minor, qr_payload_enabled, policy_hold_min_amount_minor, created_at, updated_at`;

export async function findPolicy(db: Queryable, white_label_id: string, livemode: boolean): Promise<DepositPolicyRow | null> {
  const { rows } = await db.query<DepositPolicyRow>(`SELECT ${POLICY_COLUMNS} FROM deposit_policies WHERE white_label_id = $1 AND livemode = $2`, [
    white_label_id,
    livemode,
  ]);
  return rows[0] ?? null;
}

/** `findPolicy` as a read another statement carries (src/platform/read-part.ts). */
export function findPolicyPart(white_label_id: string, livemode: boolean): ReadPart<DepositPolicyRow | null> {
  return {
    sql: `(SELECT row_to_json(p) FROM (SELECT ${POLICY_COLUMNS} FROM deposit_policies WHERE white_label_id = $1 AND livemode = $2) AS p)`,
    params: [white_label_id, livemode],
    parse: (value) => rowFromJson<DepositPolicyRow>(value, ['created_at', 'updated_at']),
  };
}

export async function upsertPolicy(db: Queryable, row: Omit<DepositPolicyRow, 'created_at' | 'updated_at'>, now: Date): Promise<DepositPolicyRow> {
  const { rows } = await db.query<DepositPolicyRow>(
    `INSERT INTO deposit_policies (${POLICY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16)
     ON CONFLICT (white_label_id, livemode) DO UPDATE SET
       min_amount_minor = EXCLUDED.min_amount_minor, max_amount_minor = EXCLUDED.max_amount_minor,
       default_expires_in_seconds = EXCLUDED.default_expires_in_seconds, max_expires_in_seconds = EXCLUDED.max_expires_in_seconds,
       max_legs = EXCLUDED.max_legs, liquidity_wait_seconds = EXCLUDED.liquidity_wait_seconds,
       gateway_bank_code = EXCLUDED.gateway_bank_code, gateway_account_sealed = EXCLUDED.gateway_account_sealed,
       gateway_account_last4 = EXCLUDED.gateway_account_last4, gateway_account_name_th = EXCLUDED.gateway_account_name_th,
       four_eyes_min_amount_minor = EXCLUDED.four_eyes_min_amount_minor, qr_payload_enabled = EXCLUDED.qr_payload_enabled,
       policy_hold_min_amount_minor = EXCLUDED.policy_hold_min_amount_minor, updated_at = EXCLUDED.updated_at
     RETURNING ${POLICY_COLUMNS}`,
    [row.white_label_id, row.livemode, row.min_amount_minor, row.max_amount_minor, row.default_expires_in_seconds, row.max_expires_in_seconds,
      row.max_legs, row.liquidity_wait_seconds, row.gateway_bank_code, row.gateway_account_sealed, row.gateway_account_last4,
      row.gateway_account_name_th, row.four_eyes_min_amount_minor, row.qr_payload_enabled, row.policy_hold_min_amount_minor, now],
  );
  const stored = rows[0];
  if (!stored) throw new Error('deposit policy upsert returned no row');
  return stored;
}

/** The row key under which a transaction remembers that it holds an order's lock (src/platform/unit-of-work.ts). */
export function orderRowKey(white_label_id: string, deposit_id: string): string {
  return `deposit_orders:${white_label_id}:${deposit_id}`;
}

/**
 * What a transaction knows of an order it locked, kept among its facts (`LOCKED_ORDERS`) so
 * that the order and its legs are read once per transaction: the order's row lock keeps every other
 * transaction from changing them (the legs change only under their order's lock), and this
 * transaction's own writes of them all go through this file, which keeps the copy up to date.
 * `legs` is null until the legs are first read.
 */
interface LockedOrder {
  row: DepositRow;
  legs: DepositLegRow[] | null;
}

/** The orders a transaction holds locked, by `orderRowKey` (src/platform/unit-of-work.ts `TransactionFacts`). */
const LOCKED_ORDERS = new TransactionFacts<LockedOrder>('deposits.locked_orders');

/** The transaction's copy of an order it holds locked, if it has one. */
function lockedOrder(db: Queryable, white_label_id: string, deposit_id: string): LockedOrder | undefined {
  const key = orderRowKey(white_label_id, deposit_id);
  return holdsLock(db, key) ? LOCKED_ORDERS.get(db, key) : undefined;
}

/** Copies, so that a caller changing what it was given cannot change the transaction's copy. */
function copiedLegs(legs: readonly DepositLegRow[]): DepositLegRow[] {
  return legs.map((leg) => ({ ...leg }));
}

/** Applies a write of one leg to the transaction's copy of its order's legs, when it has them. */
function changeKnownLeg(db: Queryable, white_label_id: string, deposit_id: string, leg_ref: string, change: Partial<DepositLegRow>): void {
  const legs = lockedOrder(db, white_label_id, deposit_id)?.legs;
  const index = legs?.findIndex((leg) => leg.leg_ref === leg_ref) ?? -1;
  if (legs && index >= 0) legs[index] = { ...legs[index]!, ...change };
}

/**
 * Inserts a new order, queued in the transaction (src/platform/unit-of-work.ts). A merchant reference
 * taken by a concurrent creation makes the flush throw `taken()`, which rolls the creation back.
 */
export async function insertOrder(db: Queryable, row: DepositRow, taken: () => Error): Promise<void> {
  const key = orderRowKey(row.white_label_id, row.deposit_id);
  await deferWrite(db, {
    sql: `INSERT INTO deposit_orders (white_label_id, merchant_id, livemode, deposit_id, version, status, merchant_reference, end_user_ref,
       amount_minor, sender_bank_code, sender_account_sealed, sender_account_hmac, sender_account_last4, sender_name_th, sender_name_en,
       sender_id, device_fingerprint, client, fill_preference, min_ttl_seconds, expires_in_seconds, return_url, metadata,
       liquidity_source, expires_at, wait_started_at, late_slip_accepted_until, expired_reason, canceled_by, cancel_reason_code,
       created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,
             $26, $27, $28, $29, $30, $31, $32)
     ON CONFLICT (white_label_id, merchant_id, livemode, merchant_reference) DO NOTHING`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.deposit_id, row.version, row.status, row.merchant_reference, row.end_user_ref,
      row.amount_minor, row.sender_bank_code, row.sender_account_sealed, row.sender_account_hmac, row.sender_account_last4,
      row.sender_name_th, row.sender_name_en, row.sender_id, row.device_fingerprint, row.client === null ? null : JSON.stringify(row.client),
      row.fill_preference, row.min_ttl_seconds, row.expires_in_seconds, row.return_url,
      row.metadata === null ? null : JSON.stringify(row.metadata), row.liquidity_source, row.expires_at, row.wait_started_at,
      row.late_slip_accepted_until, row.expired_reason, row.canceled_by, row.cancel_reason_code, row.created_at, row.updated_at,
    ],
    expected_rows: 1,
    on_unexpected_rows: taken,
    rows_written: [key],
  });
  rememberLocked(db, key);
}

/** Writes the mutable columns where the stored version is still `expected_version` (optimistic check). */
export async function updateOrder(db: Queryable, row: DepositRow, expected_version: number): Promise<boolean> {
  const sql = `UPDATE deposit_orders
        SET version = $4, status = $5, liquidity_source = $6, expires_at = $7, wait_started_at = $8, late_slip_accepted_until = $9,
            expired_reason = $10, canceled_by = $11, cancel_reason_code = $12, updated_at = $13, slip_received_at = $14,
            slip_is_late = $15, transferred_amount_minor = $16, amount_received_minor = $17, fee_total_minor = $18,
            fee_breakdown = $19, credited_amount_minor = $20, partial = $21, settled_via = $22, balance_transaction_id = $23,
            settled_at = $24, clearing_available_at = $25, overpayment = $26, reversal = $27, review = $28, rejection = $29,
            verification = $30, slip_attempts = $31, window_closed_at = $32
      WHERE white_label_id = $1 AND deposit_id = $2 AND version = $3`;
  const params = [
      row.white_label_id, row.deposit_id, expected_version, row.version, row.status, row.liquidity_source, row.expires_at,
      row.wait_started_at, row.late_slip_accepted_until, row.expired_reason, row.canceled_by, row.cancel_reason_code, row.updated_at,
      row.slip_received_at, row.slip_is_late, row.transferred_amount_minor, row.amount_received_minor, row.fee_total_minor,
      row.fee_breakdown === null ? null : JSON.stringify(row.fee_breakdown), row.credited_amount_minor, row.partial, row.settled_via,
      row.balance_transaction_id, row.settled_at, row.clearing_available_at,
      row.overpayment === null ? null : JSON.stringify(row.overpayment), row.reversal === null ? null : JSON.stringify(row.reversal),
      row.review === null ? null : JSON.stringify(row.review), row.rejection === null ? null : JSON.stringify(row.rejection),
      row.verification === null ? null : JSON.stringify(row.verification), row.slip_attempts, row.window_closed_at,
  ];
  const key = orderRowKey(row.white_label_id, row.deposit_id);
  if (!holdsLock(db, key)) return (await db.query(sql, params)).rowCount === 1;
  // The transaction holds the row: the version cannot have moved, and the write is queued.
  await deferWrite(db, { sql, params, expected_rows: 1, rows_written: [key] });
  const known = lockedOrder(db, row.white_label_id, row.deposit_id);
  if (known) known.row = { ...row };
  return true;
}

export async function findOrder(db: Queryable, account: DepositAccount, deposit_id: string): Promise<DepositRow | null> {
  const { rows } = await db.query<DepositRow>(
    `SELECT ${ORDER_COLUMNS} FROM deposit_orders WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND deposit_id = $4`,
    [account.white_label_id, account.merchant_id, account.livemode, deposit_id],
  );
  return rows[0] ?? null;
}

/**
 * Locks an order for the rest of the transaction (jobs, which know only the brand and the id). A
 * transaction that locked it already gets its own copy back without a round trip (see LockedOrder).
 */
export async function lockOrderInBrand(db: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
  const known = lockedOrder(db, white_label_id, deposit_id);
  if (known) return { ...known.row };
  const { rows } = await db.query<DepositRow>(`SELECT ${ORDER_COLUMNS} FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2 FOR UPDATE`, [white_label_id, deposit_id]);
  const row = rows[0];
  if (!row) return null;
  keepLockedOrder(db, row);
  return row;
}

/**
 * Remembers an order this transaction locked, for `lockOrderInBrand` to answer without a round trip: the row
 * a statement that carried `lockOrderInBrandPart` answered (a statement of an earlier lock in the lock order),
 * or the one `lockOrderInBrand` read itself. A copy the transaction keeps already stays: it may have changed it.
 */
export function keepLockedOrder(db: Queryable, row: DepositRow): void {
  if (lockedOrder(db, row.white_label_id, row.deposit_id)) return;
  const key = orderRowKey(row.white_label_id, row.deposit_id);
  rememberLocked(db, key);
  LOCKED_ORDERS.set(db, key, { row: { ...row }, legs: null });
}

/** The timestamp columns of an order, which a row read as JSON has as text. */
const ORDER_DATE_COLUMNS = [
  'expires_at', 'wait_started_at', 'late_slip_accepted_until', 'slip_received_at', 'settled_at', 'clearing_available_at', 'window_closed_at', 'created_at', 'updated_at',
] as const satisfies readonly (keyof DepositRow)[];

/**
 * `lockOrderInBrand` as a read that a statement of an earlier lock in the lock order carries
 * (src/platform/read-part.ts, src/platform/lock-order.ts): the slip consumer's head-receipt statement takes
 * the order's lock with the receipt's. The subquery locks the row itself (`FOR UPDATE`), and, being
 * uncorrelated, it is run when the carrying statement projects its first row, after that statement's own
 * row locks: so the receipt is locked before the order, as the lock order says, and an order that a
 * concurrent transaction changed is answered as that transaction committed it (`test/platform/lock-order.test.ts`).
 * What it answered is handed to `keepLockedOrder`, which remembers the lock.
 */
export function lockOrderInBrandPart(white_label_id: string, deposit_id: string): ReadPart<DepositRow | null> {
  return {
    sql: `(SELECT row_to_json(o) FROM (SELECT ${ORDER_COLUMNS} FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2 FOR UPDATE) AS o)`,
    params: [white_label_id, deposit_id],
    parse: (value) => rowFromJson<DepositRow>(value, ORDER_DATE_COLUMNS),
  };
}

/** What `lockOrderWithLegsPart` answers: null when there is no such order (nothing else ran then). */
export type OrderWithLegs<Named> = { order: DepositRow; legs: DepositLegRow[]; named: Named } | null;

/**
 * `lockOrderInBrandPart` that also answers the order's legs and runs `named`, a read of another module that
 * locks what the legs name (the withdrawals: it is given the legs' withdrawal ids as a read), in the same
 * subquery. Both are in the projection of the select that locks the order, so they run once the order's row
 * is locked, and not at all when there is no order. The legs and the ids are read on the carrying statement's
 * snapshot, taken before the order's lock was granted: when that lock waited for a change that committed, they
 * can be older than the order, so the caller reads the legs again in a later statement and compares
 * (`DepositLocks.lockWithdrawalsAndFeedsOf`, src/deposits/order-locks.ts).
 */
export function lockOrderWithLegsPart<Named>(white_label_id: string, deposit_id: string, named: (ids: ReadPart<string[]>) => ReadPart<Named>): ReadPart<OrderWithLegs<Named>> {
  const legs = legsPart(white_label_id, deposit_id);
  const namedPart = named(legWithdrawalIdsPart(white_label_id, deposit_id));
  const params: unknown[] = [white_label_id, deposit_id];
  const [legsSql, namedSql] = appendParts([legs, namedPart], params);
  return {
    sql: `(SELECT json_build_object('order', row_to_json(o), 'legs', ${legsSql}, 'named', ${namedSql})
             FROM (SELECT ${ORDER_COLUMNS} FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2 FOR UPDATE) AS o)`,
    params,
    parse: (value) => {
      if (value === null || value === undefined) return null;
      const answer = value as { order: unknown; legs: unknown; named: unknown };
      const order = rowFromJson<DepositRow>(answer.order, ORDER_DATE_COLUMNS);
      invariant(order !== null, 'the projection of a locked order carries the order');
      return { order, legs: legs.parse(answer.legs), named: namedPart.parse(answer.named) };
    },
  };
}

/** An order by id within a brand, for a capability link that names the brand (no merchant in scope). */
export async function findOrderInBrand(db: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
  const { rows } = await db.query<DepositRow>(`SELECT ${ORDER_COLUMNS} FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2`, [white_label_id, deposit_id]);
  return rows[0] ?? null;
}

/**
 * Serialises one end user's creations until the transaction ends (a transaction-scoped advisory lock),
 * and reads the brand's policy in the same round trip: a creation needs both first. The policy is
 * read with the statement's snapshot, which the lock does not need to order: only the creation conflicts,
 * read after it, must see what the end user's earlier creations committed.
 */
export async function lockEndUserAndFindPolicy(db: Queryable, account: DepositAccount, end_user_ref: string): Promise<DepositPolicyRow | null> {
  const { rows } = await db.query<DepositPolicyRow & { locked: string }>(
    `SELECT ${POLICY_COLUMNS}, pg_advisory_xact_lock(hashtextextended($3, 0))::text AS locked
       FROM (VALUES (1)) AS one (x) LEFT JOIN deposit_policies ON white_label_id = $1 AND livemode = $2`,
    [account.white_label_id, account.livemode, endUserLockText(account, end_user_ref)],
  );
  const row = rows[0];
  if (!row) throw new Error('the end-user lock returned no row');
  if (row.white_label_id === null) return null;
  const { locked: _locked, ...policy } = row;
  return policy;
}

/** The advisory lock that serialises one end user's creations. */
function endUserLockText(account: DepositAccount, end_user_ref: string): string {
  return `deposits:user:${account.white_label_id}:${account.merchant_id}:${account.livemode}:${end_user_ref}`;
}

/**
 * `lockEndUserAndFindPolicy` as a read another statement carries (the request's idempotency statement,
 * src/platform/read-part.ts): the same lock, taken when the carrying statement evaluates it, and the same
 * policy row (null: the brand has none).
 */
export function lockEndUserAndFindPolicyPart(account: DepositAccount, end_user_ref: string): ReadPart<DepositPolicyRow | null> {
  // The policy is `findPolicyPart`'s read, which takes the same $1 and $2.
  const policy = findPolicyPart(account.white_label_id, account.livemode);
  return {
    sql: `(SELECT json_build_object('locked', pg_advisory_xact_lock(hashtextextended($3, 0))::text, 'policy', ${policy.sql}))`,
    params: [...policy.params, endUserLockText(account, end_user_ref)],
    parse: (value) => policy.parse((value as { policy?: unknown } | null)?.policy ?? null),
  };
}

/** What creation checks about the merchant's and the end user's other orders, read in one statement. */
export interface CreationConflicts {
  /** Another deposit of the merchant and environment has this merchant_reference. */
  reference_taken: boolean;
  /** Orders awaiting payment with the same amount and the same sender account (the duplicate check), oldest first. */
  duplicate_ids: string[];
  /**
   * The end user's open unpaid orders (awaiting liquidity or payment), oldest first; two concurrent creations
   * for one user count each other through the end user's advisory lock. Only the device's, when a fingerprint
   * is given.
   */
  open_ids: string[];
}

/** What `creationConflictsPart` is asked about: the new order's reference, amount, sender and end user. */
export interface CreationConflictsInput {
  merchant_reference: string;
  amount_minor: number;
  sender_account_hmac: string;
  end_user_ref: string;
  device_fingerprint: string | null;
}

/**
 * The three checks of a creation, as one read another statement carries (src/platform/read-part.ts): the
 * matching queue's candidate statement, or a statement of its own (`readCreationConflicts`). Either runs
 * after the end user's advisory lock, in a later statement, so that its snapshot sees every order committed
 * by a creation it waited for. The end user's open orders are not locked: the advisory lock already
 * serialises the end user's creations, and the read carried by the candidate statement, which locks
 * withdrawal orders, must wait for no deposit order (a rank before them, src/platform/lock-order.ts).
 */
export function creationConflictsPart(account: DepositAccount, input: CreationConflictsInput): ReadPart<CreationConflicts> {
  return {
    sql: `(SELECT json_build_object(
              'reference_taken', EXISTS (SELECT 1 FROM deposit_orders
                                          WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND merchant_reference = $4),
              'duplicate_ids', ARRAY(SELECT deposit_id FROM deposit_orders
                                      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND status = 'awaiting_payment'
                                        AND amount_minor = $5 AND sender_account_hmac = $6
                                      ORDER BY created_at, deposit_id),
              'open_ids', ARRAY(SELECT deposit_id FROM deposit_orders
                                 WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND end_user_ref = $7
                                   AND status IN ('awaiting_liquidity', 'awaiting_payment')
                                   AND ($8::text IS NULL OR device_fingerprint = $8::text)
                                 ORDER BY created_at, deposit_id)))`,
    params: [
      account.white_label_id, account.merchant_id, account.livemode, input.merchant_reference, input.amount_minor,
      input.sender_account_hmac, input.end_user_ref, input.device_fingerprint,
    ],
    parse: (value) => {
      const answer = value as CreationConflicts | null;
      if (!answer) throw new Error('the creation checks answered nothing');
      return { reference_taken: answer.reference_taken, duplicate_ids: answer.duplicate_ids, open_ids: answer.open_ids };
    },
  };
}

/** `creationConflictsPart` in a statement of its own, for a creation whose matching sent no candidate statement. */
export async function readCreationConflicts(db: Queryable, part: ReadPart<CreationConflicts>): Promise<CreationConflicts> {
  const { rows } = await db.query<{ conflicts: unknown }>(`SELECT ${part.sql} AS conflicts`, part.params);
  return part.parse(rows[0]?.conflicts ?? null);
}

/** Queued in the transaction with its order (src/platform/unit-of-work.ts). */
export async function insertLeg(db: Queryable, row: DepositLegRow): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO deposit_legs (${LEG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
    params: [
      row.white_label_id, row.deposit_id, row.leg_ref, row.sequence, row.amount_minor, row.expires_at, row.status, row.destination, row.withdrawal_id,
      row.withdrawal_leg_ref, row.receiver_bank_code, row.receiver_bank_name_th, row.receiver_account_last4, row.receiver_name_masked,
      row.created_at, row.updated_at, row.paid_minor,
    ],
    expected_rows: 1,
    rows_written: [`deposit_legs:${row.white_label_id}:${row.leg_ref}`],
  });
  // The legs are read again when next asked for, in their stored order.
  const known = lockedOrder(db, row.white_label_id, row.deposit_id);
  if (known) known.legs = null;
}

/** An order's legs in sequence; read once per transaction that holds the order locked (see LockedOrder). */
export async function listLegs(db: Queryable, white_label_id: string, deposit_id: string): Promise<DepositLegRow[]> {
  const known = lockedOrder(db, white_label_id, deposit_id);
  if (known?.legs) return copiedLegs(known.legs);
  const { rows } = await db.query<DepositLegRow>(
    `SELECT ${LEG_COLUMNS} FROM deposit_legs WHERE white_label_id = $1 AND deposit_id = $2 ORDER BY sequence`,
    [white_label_id, deposit_id],
  );
  if (known) known.legs = copiedLegs(rows);
  return rows;
}

/** True when the transaction holds the order's lock (it locked the row, or inserted it). */
export function holdsOrder(db: Queryable, white_label_id: string, deposit_id: string): boolean {
  return holdsLock(db, orderRowKey(white_label_id, deposit_id));
}

/**
 * The legs of an order the transaction holds locked, when it has read them already (see LockedOrder);
 * null when they are still to be read.
 */
export function knownLegs(db: Queryable, white_label_id: string, deposit_id: string): DepositLegRow[] | null {
  const legs = lockedOrder(db, white_label_id, deposit_id)?.legs;
  return legs ? copiedLegs(legs) : null;
}

/**
 * `listLegs` as a read another module's statement carries (src/platform/read-part.ts), for an order this
 * transaction holds locked: the statement that locks the withdrawals the legs name, or, for a change of the
 * order alone, the one that locks the depositor's feed (`DepositLocks.lockForOwnChange`). The legs change only
 * under their order's lock, which an earlier statement took, so that statement's snapshot sees them as
 * they are. The answer is kept as the transaction's copy (`keepLegs`).
 */
export function legsPart(white_label_id: string, deposit_id: string): ReadPart<DepositLegRow[]> {
  return {
    sql: `(SELECT coalesce(json_agg(row_to_json(l) ORDER BY l.sequence), '[]'::json)
             FROM (SELECT ${LEG_COLUMNS} FROM deposit_legs WHERE white_label_id = $1 AND deposit_id = $2) AS l)`,
    params: [white_label_id, deposit_id],
    parse: (value) => (value as unknown[]).map((leg) => rowFromJson<DepositLegRow>(leg, ['expires_at', 'created_at', 'updated_at'])!),
  };
}

/** The withdrawals an order's legs name, as a read another statement carries: a JSON array of ids, null for none. */
export function legWithdrawalIdsPart(white_label_id: string, deposit_id: string): ReadPart<string[]> {
  return {
    sql: `(SELECT json_agg(DISTINCT withdrawal_id) FROM deposit_legs WHERE white_label_id = $1 AND deposit_id = $2 AND withdrawal_id IS NOT NULL)`,
    params: [white_label_id, deposit_id],
    parse: (value) => (value === null || value === undefined ? [] : (value as string[])),
  };
}

/** Keeps legs read by a carried read (`legsPart`) as the transaction's copy, as `listLegs` keeps what it reads. */
export function keepLegs(db: Queryable, white_label_id: string, deposit_id: string, legs: readonly DepositLegRow[]): void {
  const known = lockedOrder(db, white_label_id, deposit_id);
  if (known) known.legs = copiedLegs(legs);
}

/** A leg by its brand, order and reference: the order names the transaction's copy of its legs (see LockedOrder). */
type LegKey = Pick<DepositLegRow, 'white_label_id' | 'deposit_id' | 'leg_ref'>;

/** Points a deposit leg at a new withdrawal leg (a late slip reserving its withdrawal again). */
export async function relinkLeg(db: Queryable, leg: LegKey, withdrawal_leg_ref: string, now: Date): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE deposit_legs SET withdrawal_leg_ref = $3, status = 'reserved', updated_at = $4
      WHERE white_label_id = $1 AND leg_ref = $2 AND status = 'released' RETURNING leg_ref`,
    [leg.white_label_id, leg.leg_ref, withdrawal_leg_ref, now],
  );
  if (rows.length !== 1) return false;
  changeKnownLeg(db, leg.white_label_id, leg.deposit_id, leg.leg_ref, { withdrawal_leg_ref, status: 'reserved', updated_at: now });
  return true;
}

/** Records what verified slips paid into a leg of an order still waiting for its other legs. */
export async function setLegPaid(db: Queryable, leg: LegKey, paid_minor: number, now: Date): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE deposit_legs SET paid_minor = $3, updated_at = $4 WHERE white_label_id = $1 AND leg_ref = $2 AND status = 'reserved' RETURNING leg_ref`,
    [leg.white_label_id, leg.leg_ref, paid_minor, now],
  );
  if (rows.length !== 1) return false;
  changeKnownLeg(db, leg.white_label_id, leg.deposit_id, leg.leg_ref, { paid_minor, updated_at: now });
  return true;
}

/**
 * `setLegStatus` where the caller's transaction holds the leg's order lock: queued, the flush checking
 * that the leg was still `from` (src/platform/unit-of-work.ts).
 */
export async function setLockedLegStatus(db: Queryable, leg: DepositLegRow, from: DepositLegRow['status']): Promise<void> {
  await deferWrite(db, {
    sql: 'UPDATE deposit_legs SET status = $4, updated_at = $5 WHERE white_label_id = $1 AND leg_ref = $2 AND status = $3',
    params: [leg.white_label_id, leg.leg_ref, from, leg.status, leg.updated_at],
    expected_rows: 1,
    rows_written: [`deposit_legs:${leg.white_label_id}:${leg.leg_ref}`],
  });
  changeKnownLeg(db, leg.white_label_id, leg.deposit_id, leg.leg_ref, { status: leg.status, updated_at: leg.updated_at });
}

export async function setLegStatus(db: Queryable, leg: LegKey, from: DepositLegRow['status'], to: DepositLegRow['status'], now: Date): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE deposit_legs SET status = $4, updated_at = $5 WHERE white_label_id = $1 AND leg_ref = $2 AND status = $3 RETURNING leg_ref`,
    [leg.white_label_id, leg.leg_ref, from, to, now],
  );
  if (rows.length !== 1) return false;
  changeKnownLeg(db, leg.white_label_id, leg.deposit_id, leg.leg_ref, { status: to, updated_at: now });
  return true;
}

export interface ListFilters {
  status: DepositStatus | null;
  end_user_ref: string | null;
  created_from: Date | null;
  created_to: Date | null;
  descending: boolean;
  /** The (created_at, deposit_id) of the last row of the previous page. */
  after: { created_at: Date; deposit_id: string } | null;
  limit: number;
}

/** One page of the merchant's orders, keyset-paged on (created_at, deposit_id) in either direction. */
export async function listOrders(db: Queryable, account: DepositAccount, filters: ListFilters): Promise<DepositRow[]> {
  // Two fixed statements (one per direction) so that each is prepared once and can use the index.
  const sql = filters.descending
    ? `SELECT ${ORDER_COLUMNS} FROM deposit_orders
        WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3
          AND ($4::text IS NULL OR status = $4::text) AND ($5::text IS NULL OR end_user_ref = $5::text)
          AND ($6::timestamptz IS NULL OR created_at >= $6::timestamptz) AND ($7::timestamptz IS NULL OR created_at < $7::timestamptz)
          AND ($8::timestamptz IS NULL OR (created_at, deposit_id) < ($8::timestamptz, $9::text))
        ORDER BY created_at DESC, deposit_id DESC LIMIT $10`
    : `SELECT ${ORDER_COLUMNS} FROM deposit_orders
        WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3
          AND ($4::text IS NULL OR status = $4::text) AND ($5::text IS NULL OR end_user_ref = $5::text)
          AND ($6::timestamptz IS NULL OR created_at >= $6::timestamptz) AND ($7::timestamptz IS NULL OR created_at < $7::timestamptz)
          AND ($8::timestamptz IS NULL OR (created_at, deposit_id) > ($8::timestamptz, $9::text))
        ORDER BY created_at, deposit_id LIMIT $10`;
  const { rows } = await db.query<DepositRow>(sql, [
    account.white_label_id, account.merchant_id, account.livemode, filters.status, filters.end_user_ref, filters.created_from,
    filters.created_to, filters.after?.created_at ?? null, filters.after?.deposit_id ?? null, filters.limit,
  ]);
  return rows;
}

/** The legs of many orders at once (a list page). */
export async function listLegsOfOrders(db: Queryable, white_label_id: string, deposit_ids: string[]): Promise<DepositLegRow[]> {
  if (deposit_ids.length === 0) return [];
  const { rows } = await db.query<DepositLegRow>(
    `SELECT ${LEG_COLUMNS} FROM deposit_legs WHERE white_label_id = $1 AND deposit_id = ANY($2::text[]) ORDER BY deposit_id, sequence`,
    [white_label_id, deposit_ids],
  );
  return rows;
}

const SENDER_COLUMNS = `white_label_id, merchant_id, livemode, sender_id, end_user_ref, bank_code, account_sealed, account_hmac,
  account_last4, name_th, name_en, verified_by_deposit_id, created_at, last_used_at`;

/**
 * Registers a verified sender once per (end user, account); a repeat only refreshes `last_used_at`.
 * Queued in the transaction (src/platform/unit-of-work.ts): a sender row is written only by a settlement,
 * which holds its merchant's event feed lock (src/platform/lock-order.ts), so no other transaction can
 * hold the row when the write leaves at the end, and nothing reads it before then.
 */
export async function upsertSender(db: Queryable, row: SenderRow): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO senders (${SENDER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
     ON CONFLICT (white_label_id, merchant_id, livemode, end_user_ref, account_hmac) DO UPDATE SET last_used_at = EXCLUDED.last_used_at`,
    params: [row.white_label_id, row.merchant_id, row.livemode, row.sender_id, row.end_user_ref, row.bank_code, row.account_sealed, row.account_hmac,
      row.account_last4, row.name_th, row.name_en, row.verified_by_deposit_id, row.created_at, row.last_used_at],
    expected_rows: 1,
    rows_written: [`senders:${row.white_label_id}:${row.merchant_id}:${row.livemode}:${row.end_user_ref}:${row.account_hmac}`],
  });
}

export async function listSenders(db: Queryable, account: DepositAccount, end_user_ref: string): Promise<SenderRow[]> {
  const { rows } = await db.query<SenderRow>(
    `SELECT ${SENDER_COLUMNS} FROM senders WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND end_user_ref = $4
      ORDER BY last_used_at DESC, sender_id LIMIT 50`,
    [account.white_label_id, account.merchant_id, account.livemode, end_user_ref],
  );
  return rows;
}

export async function findSender(db: Queryable, account: DepositAccount, sender_id: string): Promise<SenderRow | null> {
  const { rows } = await db.query<SenderRow>(
    `SELECT ${SENDER_COLUMNS} FROM senders WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND sender_id = $4`,
    [account.white_label_id, account.merchant_id, account.livemode, sender_id],
  );
  return rows[0] ?? null;
}

export type { DepositStatus };

/** Filters of the review queue (back office): the brand's orders in review, oldest entry first. */
export interface ReviewQueueFilters {
  livemode: boolean | null;
  /** Only orders whose review names this reason code. */
  reason_code: string | null;
  escalated: boolean | null;
  /** Only reviews opened before this time (formatTimestamp text): the ones that have waited at least so long. */
  opened_before?: string | null;
  /** Resume after this entry (the last of the previous page). */
  after: { opened_at: string; deposit_id: string } | null;
  limit: number;
}

/** A column list with each column named through a table alias (`o.white_label_id, o.merchant_id, ...`). */
function prefixed(alias: string, columns: string): string {
  return columns
    .split(',')
    .map((column) => `${alias}.${column.trim()}`)
    .join(', ');
}

/**
 * The queue's statement for the filters: a reason filter walks deposit_review_reasons (migration 0042) in the
 * queue's order, the escalated reviews walk their own partial index, and the rest walk
 * deposit_orders_review_queue; each reads the orders' rows of one page only. `review.opened_at` is written by
 * formatTimestamp (UTC, three millisecond digits, Z), so its text sorts as its time does and the indexes on that
 * text serve the order and the cursor. The texts differ so that each has a plan of its own: the planner uses a
 * partial index only for a statement whose text implies the index's predicate.
 */
function reviewQueueStatement(white_label_id: string, filters: ReviewQueueFilters): { text: string; values: unknown[] } {
  const values: unknown[] = [white_label_id, filters.livemode, filters.after?.opened_at ?? null, filters.after?.deposit_id ?? null, filters.opened_before ?? null, filters.limit];
  if (filters.reason_code !== null) {
    const text = `SELECT ${prefixed('o', ORDER_COLUMNS)} FROM deposit_review_reasons r
       JOIN deposit_orders o ON o.white_label_id = r.white_label_id AND o.deposit_id = r.deposit_id AND o.status = 'under_review'
      WHERE r.white_label_id = $1 AND ($2::boolean IS NULL OR r.livemode = $2::boolean)
        AND ($3::text IS NULL OR (r.opened_at, r.deposit_id) > ($3::text, $4::text))
        AND ($5::text IS NULL OR r.opened_at < $5::text)
        AND r.reason_code = $7::text AND ($8::boolean IS NULL OR r.escalated = $8::boolean)
      ORDER BY r.opened_at, r.deposit_id
      LIMIT $6`;
    return { text, values: [...values, filters.reason_code, filters.escalated] };
  }
  const head = `SELECT ${ORDER_COLUMNS} FROM deposit_orders
      WHERE white_label_id = $1 AND status = 'under_review' AND ($2::boolean IS NULL OR livemode = $2::boolean)
        AND ($3::text IS NULL OR ((review ->> 'opened_at'), deposit_id) > ($3::text, $4::text))
        AND ($5::text IS NULL OR (review ->> 'opened_at') < $5::text)`;
  const order = `ORDER BY (review ->> 'opened_at'), deposit_id LIMIT $6`;
  if (filters.escalated === true) return { text: `${head} AND (review ->> 'escalated') = 'true' ${order}`, values };
  if (filters.escalated === false) return { text: `${head} AND (review ->> 'escalated') = 'false' ${order}`, values };
  return { text: `${head} ${order}`, values };
}

export async function listInReview(db: Queryable, white_label_id: string, filters: ReviewQueueFilters): Promise<DepositRow[]> {
  const statement = reviewQueueStatement(white_label_id, filters);
  const { rows } = await db.query<DepositRow>(statement.text, statement.values);
  return rows;
}

/**
 * How many of a brand's orders in review name each reason code (an order with two reasons counts under both),
 * each count read up to `up_to` rows and no further: the codes come from a loose scan of
 * deposit_review_reasons_queue (one probe per distinct code), each count from an index-only scan bounded by its
 * LIMIT, so the work of one call is bounded by the number of codes times `up_to`, however long the queue. The
 * inner ORDER BY is the index's own order: without it a generic plan may count by a sequential scan, which for a
 * rare code reads the whole table before its LIMIT.
 */
export async function countInReviewByReason(db: Queryable, white_label_id: string, livemode: boolean | null, up_to: number): Promise<{ reason_code: string; count: number }[]> {
  const { rows } = await db.query<{ reason_code: string; count: string | number }>(
    `WITH RECURSIVE codes(code) AS (
       SELECT min(reason_code) FROM deposit_review_reasons WHERE white_label_id = $1
       UNION ALL
       SELECT (SELECT min(r.reason_code) FROM deposit_review_reasons r WHERE r.white_label_id = $1 AND r.reason_code > codes.code)
         FROM codes WHERE codes.code IS NOT NULL
     )
     SELECT codes.code AS reason_code, counted.count
       FROM codes, LATERAL (
         SELECT count(*) AS count FROM (
           SELECT 1 FROM deposit_review_reasons r
            WHERE r.white_label_id = $1 AND r.reason_code = codes.code AND ($2::boolean IS NULL OR r.livemode = $2::boolean)
            ORDER BY r.opened_at, r.deposit_id LIMIT $3) AS bounded) AS counted
      WHERE codes.code IS NOT NULL AND counted.count > 0
      ORDER BY codes.code LIMIT 100`,
    [white_label_id, livemode, up_to],
  );
  return rows.map((row) => ({ reason_code: row.reason_code, count: Number(row.count) }));
}

/**
 * How many of a brand's orders wait in review, read up to `up_to` and no further: an index-only scan of the
 * projection's primary key, one entry per order and reason, bounded by its LIMIT.
 */
export async function countInReviewUpTo(db: Queryable, white_label_id: string, livemode: boolean | null, up_to: number): Promise<number> {
  const { rows } = await db.query<{ count: string | number }>(
    `SELECT count(*) AS count FROM (
       SELECT DISTINCT deposit_id FROM deposit_review_reasons
        WHERE white_label_id = $1 AND ($2::boolean IS NULL OR livemode = $2::boolean)
        ORDER BY deposit_id LIMIT $3) AS bounded`,
    [white_label_id, livemode, up_to],
  );
  return Number(rows[0]?.count ?? 0);
}

/**
 * Orders waiting in review across every brand, by mode, with the oldest entry of each: the reviewers' backlog for
 * the operations gauges (a brand's own, bounded count is countInReviewUpTo). One scan of the partial index
 * deposit_orders_review_queue, whose size is the number of orders in review (bounded by what reviewers can
 * work, not by traffic), so the counts are exact and the oldest entries the true oldest.
 */
export async function readOpenReviewBacklog(db: Queryable): Promise<{ live: Backlog; test: Backlog }> {
  const { rows } = await db.query<{ livemode: boolean; count: number; oldest_at: string | null }>(
    `SELECT livemode, count(*)::int AS count, min(review ->> 'opened_at') AS oldest_at
       FROM deposit_orders WHERE status = 'under_review' GROUP BY livemode`,
  );
  return { live: backlogOf(rows.find((row) => row.livemode)), test: backlogOf(rows.find((row) => !row.livemode)) };
}

/** Which of these orders are under review (the evidence retention keeps their slips). */
export async function ordersUnderReview(db: Queryable, orders: readonly { white_label_id: string; deposit_id: string }[]): Promise<{ white_label_id: string; deposit_id: string }[]> {
  if (orders.length === 0) return [];
  const { rows } = await db.query<{ white_label_id: string; deposit_id: string }>(
    `SELECT DISTINCT t.white_label_id, t.deposit_id FROM deposit_orders t
       JOIN unnest($1::text[], $2::text[]) AS k(white_label_id, deposit_id) ON t.white_label_id = k.white_label_id AND t.deposit_id = k.deposit_id
      WHERE t.status = 'under_review'`,
    [orders.map((order) => order.white_label_id), orders.map((order) => order.deposit_id)],
  );
  return rows;
}
