import type { Queryable } from '../platform/db.ts';
import { deferWrite } from '../platform/unit-of-work.ts';
import { rowFromJson, type ReadPart } from '../platform/read-part.ts';
import type { BalanceTransactionRow, Balances, ClearingRow, ClearingStatus, WalletAccount, WalletRow } from './types.ts';

/** All SQL of the ledger: wallets, balance transactions and clearings. */

/**
 * Locks the wallet for the rest of the transaction, creating it on first use. The lock is tried first
 * because the wallet almost always exists: one statement instead of an upsert and a select.
 */
export async function lockWallet(db: Queryable, account: WalletAccount, now: Date): Promise<WalletRow> {
  const select = 'SELECT * FROM wallets WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 FOR UPDATE';
  const keys = [account.white_label_id, account.merchant_id, account.livemode];
  const existing = (await db.query<WalletRow>(select, keys)).rows[0];
  return existing ?? createAndLockWallet(db, account, now);
}

/**
 * A wallet's first use: creates it and locks it in one statement. The update of a conflicting row (a
 * concurrent first use created it) changes nothing, but takes the row's lock as `FOR UPDATE` does and
 * returns the row as it is.
 */
export async function createAndLockWallet(db: Queryable, account: WalletAccount, now: Date): Promise<WalletRow> {
  const { rows } = await db.query<WalletRow>(
    `INSERT INTO wallets AS w (white_label_id, merchant_id, livemode, available_minor, pending_clearing_minor, reserved_minor,
       last_sequence, created_at, updated_at)
     VALUES ($1, $2, $3, 0, 0, 0, 0, $4, $4)
     ON CONFLICT (white_label_id, merchant_id, livemode) DO UPDATE SET last_sequence = w.last_sequence
     RETURNING *`,
    [account.white_label_id, account.merchant_id, account.livemode, now],
  );
  const row = rows[0];
  if (!row) throw new Error('wallet row missing after insert');
  return row;
}

/**
 * Locks the wallet (as `lockWallet`) and looks up movement keys in the same round trip: the movements
 * a call posts on one wallet, one or several. The lookup runs on the statement's snapshot, taken before
 * the lock was granted. The ledger takes the merchant's feed lock in a statement before this one, so a
 * writer of the wallet has committed before the snapshot is taken; should one ever commit in between, the
 * wallet's last sequence is ahead of the movements the snapshot saw, and the caller looks the keys up
 * again after the lock (`stale`): a movement is never missed. `existing` maps each key found to its
 * movement's id.
 */
export async function lockWalletFindingMovements(
  db: Queryable,
  account: WalletAccount,
  movement_keys: readonly string[],
  now: Date,
): Promise<{ wallet: WalletRow; existing: Map<string, string>; stale: boolean }> {
  const { rows } = await db.query<WalletRow & { existing_movements: Record<string, string> | null; seen_sequence: number }>(
    `SELECT w.*,
            (SELECT json_object_agg(b.movement_key, b.balance_transaction_id) FROM balance_transactions b
              WHERE b.white_label_id = $1 AND b.merchant_id = $2 AND b.livemode = $3 AND b.movement_key = ANY($4::text[])) AS existing_movements,
            (SELECT coalesce(max(b.sequence), 0) FROM balance_transactions b
              WHERE b.white_label_id = $1 AND b.merchant_id = $2 AND b.livemode = $3) AS seen_sequence
       FROM wallets w WHERE w.white_label_id = $1 AND w.merchant_id = $2 AND w.livemode = $3 FOR UPDATE OF w`,
    [account.white_label_id, account.merchant_id, account.livemode, [...movement_keys]],
  );
  const found = rows[0];
  if (!found) {
    // A wallet's first movement: created and locked (the statement above found no row to lock); no movement can exist yet.
    return { wallet: await createAndLockWallet(db, account, now), existing: new Map(), stale: false };
  }
  const { existing_movements, seen_sequence, ...wallet } = found;
  return { wallet, existing: new Map(Object.entries(existing_movements ?? {})), stale: Number(seen_sequence) !== wallet.last_sequence };
}

/** A wallet locked with the movement keys looked up (`lockWalletFindingMovements`), as the caller uses it. */
export interface LockedWalletAnswer {
  wallet: WalletRow;
  /** Each key found, with its movement's id. */
  existing: Map<string, string>;
  /** The wallet's last sequence is ahead of the movements the lookup saw: look the keys up again. */
  stale: boolean;
}

/**
 * The select of `lockWalletsFindingMovements`: several wallets of one brand and environment ($1, $2) locked in
 * merchant-id order, each with its own keys ($3, JSON `[{ merchant_id, movement_keys }]`) looked up.
 */
const LOCK_WALLETS_FINDING_MOVEMENTS = `SELECT w.*,
            (SELECT json_object_agg(b.movement_key, b.balance_transaction_id) FROM balance_transactions b
              WHERE b.white_label_id = w.white_label_id AND b.merchant_id = w.merchant_id AND b.livemode = w.livemode
                AND b.movement_key IN (SELECT json_array_elements_text(wanted.movement_keys))) AS existing_movements,
            (SELECT coalesce(max(b.sequence), 0) FROM balance_transactions b
              WHERE b.white_label_id = w.white_label_id AND b.merchant_id = w.merchant_id AND b.livemode = w.livemode) AS seen_sequence
       FROM wallets w JOIN json_to_recordset($3::json) AS wanted (merchant_id text, movement_keys json) ON wanted.merchant_id = w.merchant_id
      WHERE w.white_label_id = $1 AND w.livemode = $2
      ORDER BY w.merchant_id
      FOR UPDATE OF w`;

type LockedWalletRow = WalletRow & { existing_movements: Record<string, string> | null; seen_sequence: number };

function lockedWalletAnswers(rows: readonly LockedWalletRow[]): Map<string, LockedWalletAnswer> {
  const answered = new Map<string, LockedWalletAnswer>();
  for (const { existing_movements, seen_sequence, ...wallet } of rows) {
    answered.set(wallet.merchant_id, { wallet, existing: new Map(Object.entries(existing_movements ?? {})), stale: Number(seen_sequence) !== wallet.last_sequence });
  }
  return answered;
}

/**
 * `lockWalletFindingMovements` for several wallets of one brand and environment in one statement, locked in
 * merchant-id order, each with its own keys looked up. A wallet that does not exist yet is absent from the
 * answer (its first movement creates it). The caller holds every one of these merchants' feeds, which every
 * lock of a wallet follows, so no lock here waits; `stale` is still answered per wallet, as
 * `lockWalletFindingMovements` answers it.
 */
export async function lockWalletsFindingMovements(
  db: Queryable,
  white_label_id: string,
  livemode: boolean,
  wanted: readonly { merchant_id: string; movement_keys: readonly string[] }[],
): Promise<Map<string, LockedWalletAnswer>> {
  const { rows } = await db.query<LockedWalletRow>(LOCK_WALLETS_FINDING_MOVEMENTS, [white_label_id, livemode, JSON.stringify(wanted)]);
  return lockedWalletAnswers(rows);
}

/**
 * `lockWalletsFindingMovements` as a read that the statement locking these merchants' feeds carries
 * (src/events/repository.ts `lockFeeds`, which runs its carried reads once every feed is locked): the wallets
 * are locked after their feeds, as the lock order says, in the same round trip.
 */
export function lockWalletsFindingMovementsPart(
  white_label_id: string,
  livemode: boolean,
  wanted: readonly { merchant_id: string; movement_keys: readonly string[] }[],
): ReadPart<Map<string, LockedWalletAnswer>> {
  return {
    sql: `(SELECT coalesce(json_agg(row_to_json(l) ORDER BY l.merchant_id), '[]'::json) FROM (${LOCK_WALLETS_FINDING_MOVEMENTS}) AS l)`,
    params: [white_label_id, livemode, JSON.stringify(wanted)],
    parse: (value) => lockedWalletAnswers(((value ?? []) as unknown[]).map((row) => rowFromJson<LockedWalletRow>(row, ['created_at', 'updated_at'])!)),
  };
}

export async function findWallet(db: Queryable, account: WalletAccount): Promise<WalletRow | null> {
  const { rows } = await db.query<WalletRow>('SELECT * FROM wallets WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3', [
    account.white_label_id,
    account.merchant_id,
    account.livemode,
  ]);
  return rows[0] ?? null;
}

/**
 * Writes a wallet's new balances after the movements `from_sequence + 1` to `to_sequence` (one or several
 * of one call), queued in the transaction (src/platform/unit-of-work.ts) that holds the wallet's lock; the
 * sequence guard must still find the row as it locked it when the write is sent.
 */
export async function updateWallet(
  db: Queryable,
  account: WalletAccount,
  balances: Balances,
  sequences: { from_sequence: number; to_sequence: number },
  now: Date,
): Promise<void> {
  await deferWrite(db, {
    sql: `UPDATE wallets SET available_minor = $4, pending_clearing_minor = $5, reserved_minor = $6, last_sequence = $7, updated_at = $8
           WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND last_sequence = $9`,
    params: [account.white_label_id, account.merchant_id, account.livemode, balances.available_minor, balances.pending_clearing_minor,
      balances.reserved_minor, sequences.to_sequence, now, sequences.from_sequence],
    expected_rows: 1,
    on_unexpected_rows: () => new Error('wallet sequence moved under a held lock'),
    rows_written: [`wallets:${account.white_label_id}:${account.merchant_id}:${account.livemode}`],
  });
}

export async function findByMovementKey(db: Queryable, account: WalletAccount, movement_key: string): Promise<BalanceTransactionRow | null> {
  const { rows } = await db.query<BalanceTransactionRow>(
    'SELECT * FROM balance_transactions WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND movement_key = $4',
    [account.white_label_id, account.merchant_id, account.livemode, movement_key],
  );
  return rows[0] ?? null;
}

export async function findBalanceTransaction(db: Queryable, account: WalletAccount, id: string): Promise<BalanceTransactionRow | null> {
  const { rows } = await db.query<BalanceTransactionRow>(
    'SELECT * FROM balance_transactions WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND balance_transaction_id = $4',
    [account.white_label_id, account.merchant_id, account.livemode, id],
  );
  return rows[0] ?? null;
}

/** Queued in the transaction like the wallet write that goes with it. */
export async function insertBalanceTransaction(db: Queryable, row: BalanceTransactionRow): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO balance_transactions (white_label_id, merchant_id, livemode, balance_transaction_id, sequence, movement_key, type,
       direction, amount_minor, currency, bucket_from, bucket_to, available_at, available_after, pending_clearing_after,
       reserved_after, source_type, source_id, reverses_balance_transaction_id, reason_code, reason_display_th,
       cleared_from_balance_transaction_id, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.balance_transaction_id, row.sequence, row.movement_key, row.type,
      row.direction, row.amount_minor, row.currency, row.bucket_from, row.bucket_to, row.available_at, row.available_after,
      row.pending_clearing_after, row.reserved_after, row.source_type, row.source_id, row.reverses_balance_transaction_id,
      row.reason_code, row.reason_display_th, row.cleared_from_balance_transaction_id, row.created_at,
    ],
    expected_rows: 1,
  });
}

/** The balances re-derived from the movements alone, and the count of movements. */
export async function foldMovements(db: Queryable, account: WalletAccount): Promise<Balances & { movements: number; last_sequence: number }> {
  const { rows } = await db.query<Balances & { movements: number; last_sequence: number }>(
    `SELECT coalesce(sum(CASE WHEN bucket_to = 'available' THEN amount_minor ELSE 0 END)
                   - sum(CASE WHEN bucket_from = 'available' THEN amount_minor ELSE 0 END), 0)::bigint AS available_minor,
            coalesce(sum(CASE WHEN bucket_to = 'pending_clearing' THEN amount_minor ELSE 0 END)
                   - sum(CASE WHEN bucket_from = 'pending_clearing' THEN amount_minor ELSE 0 END), 0)::bigint AS pending_clearing_minor,
            coalesce(sum(CASE WHEN bucket_to = 'reserved' THEN amount_minor ELSE 0 END)
                   - sum(CASE WHEN bucket_from = 'reserved' THEN amount_minor ELSE 0 END), 0)::bigint AS reserved_minor,
            count(*)::int AS movements,
            coalesce(max(sequence), 0)::bigint AS last_sequence
       FROM balance_transactions WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3`,
    [account.white_label_id, account.merchant_id, account.livemode],
  );
  const row = rows[0];
  if (!row) throw new Error('fold returned no row');
  return row;
}

export async function insertClearing(db: Queryable, row: ClearingRow): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO clearings (white_label_id, merchant_id, livemode, credit_balance_transaction_id, amount_minor, available_at, status,
       hold_reason, released_balance_transaction_id, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.credit_balance_transaction_id, row.amount_minor, row.available_at,
      row.status, row.hold_reason, row.released_balance_transaction_id, row.created_at, row.updated_at,
    ],
    expected_rows: 1,
    rows_written: [`clearings:${row.white_label_id}:${row.credit_balance_transaction_id}`],
  });
}

/** Locks a clearing row; the wallet lock is always taken first by callers, so locks never cross. */
export async function lockClearing(db: Queryable, white_label_id: string, credit_balance_transaction_id: string): Promise<ClearingRow | null> {
  const { rows } = await db.query<ClearingRow>(
    'SELECT * FROM clearings WHERE white_label_id = $1 AND credit_balance_transaction_id = $2 FOR UPDATE',
    [white_label_id, credit_balance_transaction_id],
  );
  return rows[0] ?? null;
}

export async function updateClearing(
  db: Queryable,
  white_label_id: string,
  credit_balance_transaction_id: string,
  change: { status: ClearingStatus; available_at: Date | null; hold_reason: string | null; released_balance_transaction_id: string | null },
  now: Date,
): Promise<void> {
  await db.query(
    `UPDATE clearings SET status = $3, available_at = $4, hold_reason = $5, released_balance_transaction_id = $6, updated_at = $7
      WHERE white_label_id = $1 AND credit_balance_transaction_id = $2`,
    [white_label_id, credit_balance_transaction_id, change.status, change.available_at, change.hold_reason,
      change.released_balance_transaction_id, now],
  );
}

/** The earliest time pending money becomes available (null when nothing pending has a time). */
export async function nextClearingAt(db: Queryable, account: WalletAccount): Promise<Date | null> {
  const { rows } = await db.query<{ next_at: Date | null }>(
    `SELECT min(available_at) AS next_at FROM clearings
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND status = 'pending'`,
    [account.white_label_id, account.merchant_id, account.livemode],
  );
  return rows[0]?.next_at ?? null;
}

/**
 * A page of a wallet's movements, newest first: those before `before_sequence` (null: from the newest). The
 * unique (brand, merchant, mode, sequence) index serves the order and the cursor.
 */
export async function listBalanceTransactions(db: Queryable, account: WalletAccount, before_sequence: number | null, limit: number): Promise<BalanceTransactionRow[]> {
  const { rows } = await db.query<BalanceTransactionRow>(
    `SELECT * FROM balance_transactions
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND ($4::bigint IS NULL OR sequence < $4::bigint)
      ORDER BY sequence DESC LIMIT $5`,
    [account.white_label_id, account.merchant_id, account.livemode, before_sequence, limit],
  );
  return rows;
}

/** A clearing with the origin of its credit (the deposit it came from). */
export interface ClearingScheduleRow extends ClearingRow {
  source_type: string;
  source_id: string;
}

/** Where a page of the clearing schedule starts: after this clearing, in the list's own order. */
export interface ClearingCursor {
  at: Date;
  credit_balance_transaction_id: string;
}

const CLEARING_SCHEDULE = {
  // Pending clearings by the time they clear (index clearings_pending).
  pending: `SELECT c.*, b.source_type, b.source_id FROM clearings c
      JOIN balance_transactions b ON b.white_label_id = c.white_label_id AND b.balance_transaction_id = c.credit_balance_transaction_id
     WHERE c.white_label_id = $1 AND c.merchant_id = $2 AND c.livemode = $3 AND c.status = 'pending'
       AND ($4::timestamptz IS NULL OR (c.available_at, c.credit_balance_transaction_id) > ($4::timestamptz, $5::text))
     ORDER BY c.available_at, c.credit_balance_transaction_id LIMIT $6`,
  // Held clearings have no time: by when they were credited (index clearings_held, migration 0045).
  held: `SELECT c.*, b.source_type, b.source_id FROM clearings c
      JOIN balance_transactions b ON b.white_label_id = c.white_label_id AND b.balance_transaction_id = c.credit_balance_transaction_id
     WHERE c.white_label_id = $1 AND c.merchant_id = $2 AND c.livemode = $3 AND c.status = 'held'
       AND ($4::timestamptz IS NULL OR (c.created_at, c.credit_balance_transaction_id) > ($4::timestamptz, $5::text))
     ORDER BY c.created_at, c.credit_balance_transaction_id LIMIT $6`,
} as const;

/** A page of a wallet's pending or held clearings, in the order of `CLEARING_SCHEDULE`. */
export async function listClearings(
  db: Queryable,
  account: WalletAccount,
  status: 'pending' | 'held',
  after: ClearingCursor | null,
  limit: number,
): Promise<ClearingScheduleRow[]> {
  const { rows } = await db.query<ClearingScheduleRow>(CLEARING_SCHEDULE[status], [
    account.white_label_id,
    account.merchant_id,
    account.livemode,
    after?.at ?? null,
    after?.credit_balance_transaction_id ?? null,
    limit,
  ]);
  return rows;
}

/**
 * The movements of one order of a brand: those whose source is the order, those named by id (a fill's
 * movements), and the clearing releases of any of them, oldest first and at most `limit`. By
 * balance_transactions_source and the primary key.
 */
export async function movementsOfSource(
  db: Queryable,
  white_label_id: string,
  source: { type: string; id: string },
  balance_transaction_ids: readonly string[],
  limit: number,
): Promise<BalanceTransactionRow[]> {
  const { rows } = await db.query<BalanceTransactionRow>(
    `WITH own AS (
       SELECT * FROM balance_transactions
        WHERE white_label_id = $1 AND ((source_type = $2 AND source_id = $3) OR balance_transaction_id = ANY($4::text[]))
        LIMIT $5
     )
     SELECT * FROM (
       SELECT * FROM own
       UNION
       SELECT b.* FROM balance_transactions b
        WHERE b.white_label_id = $1 AND b.source_type = 'balance_transaction' AND b.source_id IN (SELECT balance_transaction_id FROM own)
     ) AS movements
     ORDER BY created_at, sequence LIMIT $5`,
    [white_label_id, source.type, source.id, [...balance_transaction_ids], limit],
  );
  return rows;
}
