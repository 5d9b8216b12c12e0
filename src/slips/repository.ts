import type { Queryable } from '../platform/db.ts';
import type { BlobAddress } from './evidence-store.ts';
import type { SlipReceiptRow, SlipReceiptStatus } from './types.ts';

/** All SQL of the slips module: evidence blobs and receipts, each query scoped by brand. */

const RECEIPT_COLUMNS = `white_label_id, merchant_id, livemode, receipt_id, deposit_id, idempotency_key, request_id, fingerprint, shape,
  media_type, size_bytes, image_sha256, blob_store, wrapped_key, fields_sealed, received_at, status, outcome, verification,
  transfer_sealed, processed_at`;

export async function insertBlob(db: Queryable, address: BlobAddress, bytes: Buffer): Promise<void> {
  await db.query('INSERT INTO slip_blobs (white_label_id, blob_key, ciphertext, created_at) VALUES ($1, $2, $3, now())', [
    address.white_label_id,
    address.blob_key,
    bytes,
  ]);
}

export async function findBlob(db: Queryable, address: BlobAddress): Promise<Buffer | null> {
  const { rows } = await db.query<{ ciphertext: Uint8Array }>('SELECT ciphertext FROM slip_blobs WHERE white_label_id = $1 AND blob_key = $2', [
    address.white_label_id,
    address.blob_key,
  ]);
  const found = rows[0];
  if (!found) return null;
  // pg returns a Buffer, PGlite a Uint8Array: one type for callers.
  return Buffer.isBuffer(found.ciphertext) ? found.ciphertext : Buffer.from(found.ciphertext.buffer, found.ciphertext.byteOffset, found.ciphertext.byteLength);
}

/**
 * The two locks of an upload, in one round trip. The key's lock is tried, not waited for: a second
 * request with the same key while the first runs is `idempotency_in_flight`. The order's lock is
 * waited for, so that uploads to one order are counted one after another (the limit of three).
 */
export async function lockUpload(db: Queryable, key_lock: string, order_lock: string): Promise<boolean> {
  // CASE evaluates in order: the order's lock is waited for only once the key's lock was taken.
  const { rows } = await db.query<{ key_locked: boolean }>(
    `SELECT CASE WHEN pg_try_advisory_xact_lock(hashtextextended($1, 0))
                 THEN pg_advisory_xact_lock(hashtextextended($2, 0))::text = ''
                 ELSE false END AS key_locked`,
    [key_lock, order_lock],
  );
  return rows[0]?.key_locked === true;
}

/** The receipt stored under this key, and how many receipts the order has, read after the locks. */
export async function readUploadState(
  db: Queryable,
  scope: { white_label_id: string; deposit_id: string; idempotency_key: string },
): Promise<{ existing: SlipReceiptRow | null; receipt_count: number }> {
  const { rows } = await db.query<{ existing: SlipReceiptRow | null; receipt_count: number }>(
    `SELECT (SELECT row_to_json(r) FROM (SELECT ${RECEIPT_COLUMNS} FROM slip_receipts
               WHERE white_label_id = $1 AND deposit_id = $2 AND idempotency_key = $3) AS r) AS existing,
            (SELECT count(*)::integer FROM slip_receipts WHERE white_label_id = $1 AND deposit_id = $2) AS receipt_count`,
    [scope.white_label_id, scope.deposit_id, scope.idempotency_key],
  );
  const row = rows[0];
  if (!row) throw new Error('the upload state read returned no row');
  // row_to_json gives timestamps as text: the receipt's own instant is made a Date again.
  const existing = row.existing ? { ...row.existing, received_at: new Date(row.existing.received_at) } : null;
  return { existing, receipt_count: row.receipt_count };
}

export async function insertReceipt(db: Queryable, row: SlipReceiptRow): Promise<void> {
  await db.query(
    `INSERT INTO slip_receipts (${RECEIPT_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`,
    [
      row.white_label_id, row.merchant_id, row.livemode, row.receipt_id, row.deposit_id, row.idempotency_key, row.request_id, row.fingerprint,
      row.shape, row.media_type, row.size_bytes, row.image_sha256, row.blob_store, row.wrapped_key, row.fields_sealed, row.received_at,
      row.status, row.outcome, row.verification === null ? null : JSON.stringify(row.verification), row.transfer_sealed, row.processed_at,
    ],
  );
}

export async function findReceipt(db: Queryable, white_label_id: string, receipt_id: string): Promise<SlipReceiptRow | null> {
  const { rows } = await db.query<SlipReceiptRow>(`SELECT ${RECEIPT_COLUMNS} FROM slip_receipts WHERE white_label_id = $1 AND receipt_id = $2`, [
    white_label_id,
    receipt_id,
  ]);
  return rows[0] ?? null;
}

/** The merchant's image of an order: a named receipt, or the newest receipt with an image. */
export async function findImageReceipt(
  db: Queryable,
  account: { white_label_id: string; merchant_id: string; livemode: boolean },
  deposit_id: string,
  receipt_id: string | null,
): Promise<SlipReceiptRow | null> {
  const { rows } = await db.query<SlipReceiptRow>(
    `SELECT ${RECEIPT_COLUMNS} FROM slip_receipts
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND deposit_id = $4 AND media_type IS NOT NULL
        AND ($5::text IS NULL OR receipt_id = $5::text)
      ORDER BY received_at DESC, receipt_id DESC LIMIT 1`,
    [account.white_label_id, account.merchant_id, account.livemode, deposit_id, receipt_id],
  );
  return rows[0] ?? null;
}

/**
 * The oldest unprocessed receipt of an order, locked: receipts of one order are processed one at a
 * time in arrival order, each starting from a status no other slip is changing.
 */
export async function lockHeadOfQueue(db: Queryable, white_label_id: string, deposit_id: string): Promise<SlipReceiptRow | null> {
  const { rows } = await db.query<SlipReceiptRow>(
    `SELECT ${RECEIPT_COLUMNS} FROM slip_receipts
      WHERE white_label_id = $1 AND deposit_id = $2 AND status <> 'processed'
      ORDER BY received_at, receipt_id LIMIT 1 FOR UPDATE`,
    [white_label_id, deposit_id],
  );
  return rows[0] ?? null;
}

export async function setReceiptStatus(db: Queryable, white_label_id: string, receipt_id: string, from: SlipReceiptStatus, to: SlipReceiptStatus): Promise<boolean> {
  const { rows } = await db.query(
    'UPDATE slip_receipts SET status = $4 WHERE white_label_id = $1 AND receipt_id = $2 AND status = $3 RETURNING receipt_id',
    [white_label_id, receipt_id, from, to],
  );
  return rows.length === 1;
}

export async function completeReceipt(
  db: Queryable,
  input: { white_label_id: string; receipt_id: string; outcome: string; verification: Record<string, unknown> | null; transfer_sealed: string | null; processed_at: Date },
): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE slip_receipts SET status = 'processed', outcome = $3, verification = $4, transfer_sealed = $5, processed_at = $6
      WHERE white_label_id = $1 AND receipt_id = $2 AND status <> 'processed' RETURNING receipt_id`,
    [
      input.white_label_id, input.receipt_id, input.outcome, input.verification === null ? null : JSON.stringify(input.verification),
      input.transfer_sealed, input.processed_at,
    ],
  );
  return rows.length === 1;
}

/** How many receipts an order has, and how many of them are not processed yet. */
export async function receiptCounts(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ total: number; unprocessed: number }> {
  const { rows } = await db.query<{ total: number; unprocessed: number }>(
    `SELECT count(*)::integer AS total, (count(*) FILTER (WHERE status <> 'processed'))::integer AS unprocessed
       FROM slip_receipts WHERE white_label_id = $1 AND deposit_id = $2`,
    [white_label_id, deposit_id],
  );
  return rows[0] ?? { total: 0, unprocessed: 0 };
}
