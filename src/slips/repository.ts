import type { Queryable } from '../platform/db.ts';
import { deferWrite, holdsLock, rememberLocked } from '../platform/unit-of-work.ts';
import { appendParts, type ReadPart } from '../platform/read-part.ts';
import type { BlobAddress } from './evidence-store.ts';
import type { SlipReceiptRow, SlipReceiptStatus } from './types.ts';

/** All SQL of the slips module: evidence blobs and receipts, each query scoped by brand. */

const RECEIPT_COLUMNS = `white_label_id, merchant_id, livemode, receipt_id, deposit_id, idempotency_key, request_id, fingerprint, shape,
  media_type, size_bytes, image_sha256, blob_store, wrapped_key, fields_sealed, received_at, status, outcome, verification,
  transfer_sealed, processed_at, evidence_purged_at`;

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
  return asBuffer(found.ciphertext);
}

/** pg returns a bytea as a Buffer, PGlite as a Uint8Array: one type for callers. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Whether the stored blob has this length and SHA-256 (hex), compared in the database. */
export async function blobMatches(db: Queryable, address: BlobAddress, length: number, sha256_hex: string): Promise<boolean> {
  const { rows } = await db.query<{ matches: boolean }>(
    `SELECT octet_length(ciphertext) = $3 AND encode(sha256(ciphertext), 'hex') = $4 AS matches
       FROM slip_blobs WHERE white_label_id = $1 AND blob_key = $2`,
    [address.white_label_id, address.blob_key, length, sha256_hex],
  );
  return rows[0]?.matches === true;
}

export async function insertReceipt(db: Queryable, row: SlipReceiptRow): Promise<void> {
  await db.query(
    `INSERT INTO slip_receipts (${RECEIPT_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`,
    [
      row.white_label_id, row.merchant_id, row.livemode, row.receipt_id, row.deposit_id, row.idempotency_key, row.request_id, row.fingerprint,
      row.shape, row.media_type, row.size_bytes, row.image_sha256, row.blob_store, row.wrapped_key, row.fields_sealed, row.received_at,
      row.status, row.outcome, row.verification === null ? null : JSON.stringify(row.verification), row.transfer_sealed, row.processed_at,
      row.evidence_purged_at,
    ],
  );
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

/** The row key under which a transaction remembers that it holds a receipt's lock (src/platform/unit-of-work.ts). */
function receiptRowKey(white_label_id: string, receipt_id: string): string {
  return `slip_receipts:${white_label_id}:${receipt_id}`;
}

/**
 * The oldest unprocessed receipt of an order, locked: receipts of one order are processed one at a
 * time in arrival order, each starting from a status no other slip is changing.
 *
 * `carried` reads of other modules (src/platform/read-part.ts) are answered in the same statement, in order,
 * each parsed by its part (a planned read records its answer so), when there is a head: each is a scalar subquery of the outer select, run after the receipt's row lock, so a
 * read that locks (the order's, `lockOrderInBrandPart` in src/deposits/repository.ts) takes its lock after
 * the receipt's, as the lock order says. No head, no carried answers, and nothing of theirs locked.
 */
export async function lockHeadOfQueue(
  db: Queryable,
  white_label_id: string,
  deposit_id: string,
  carried: readonly ReadPart<unknown>[],
): Promise<{ receipt: SlipReceiptRow; carried: unknown[]; uploads: number } | null> {
  const head = await selectHeadOfQueue(db, white_label_id, deposit_id, { blob: false, lock: true, carried });
  if (head) rememberLocked(db, receiptRowKey(white_label_id, head.receipt.receipt_id));
  return head;
}

/**
 * The head receipt as the statement's snapshot has it, without a lock, for the slip consumer, which reads the
 * slip and asks the bank before it opens the transaction that locks the receipt and checks it is still the head.
 *
 * With `blob`, the head's sealed image is read in the same statement (null when it has none, or none is stored
 * in `slip_blobs`). A blob is written in its receipt's transaction and never changed, so a snapshot that sees
 * the receipt sees its blob.
 */
export async function findHeadOfQueue(db: Queryable, white_label_id: string, deposit_id: string, options: { blob: boolean }): Promise<{ receipt: SlipReceiptRow; ciphertext: Buffer | null } | null> {
  return selectHeadOfQueue(db, white_label_id, deposit_id, { ...options, lock: false, carried: [] });
}

async function selectHeadOfQueue(
  db: Queryable,
  white_label_id: string,
  deposit_id: string,
  options: { blob: boolean; lock: boolean; carried: readonly ReadPart<unknown>[] },
): Promise<{ receipt: SlipReceiptRow; ciphertext: Buffer | null; carried: unknown[]; uploads: number } | null> {
  const params: unknown[] = [white_label_id, deposit_id];
  const blobColumn = options.blob
    ? `CASE WHEN h.wrapped_key IS NOT NULL THEN
         (SELECT b.ciphertext FROM slip_blobs b WHERE b.white_label_id = h.white_label_id AND b.blob_key = h.receipt_id) END`
    : 'NULL::bytea';
  const carriedColumns = appendParts(options.carried, params).map((sql, index) => `, ${sql} AS carried_${index}`);
  // Every upload the order has had (its receipts, whatever their status) rides along: the slip limit counts uploads.
  const { rows } = await db.query<SlipReceiptRow & { stored_ciphertext: Uint8Array | null; order_uploads: number } & Record<string, unknown>>(
    `SELECT h.*, ${blobColumn} AS stored_ciphertext${carriedColumns.join('')},
            (SELECT count(*)::integer FROM slip_receipts u WHERE u.white_label_id = h.white_label_id AND u.deposit_id = h.deposit_id) AS order_uploads
       FROM (SELECT ${RECEIPT_COLUMNS} FROM slip_receipts
              WHERE white_label_id = $1 AND deposit_id = $2 AND status <> 'processed'
              ORDER BY received_at, receipt_id LIMIT 1${options.lock ? ' FOR UPDATE' : ''}) AS h`,
    params,
  );
  const found = rows[0];
  if (!found) return null;
  const { stored_ciphertext, order_uploads, ...receipt } = found;
  const carried = options.carried.map((part, index) => {
    const answer = receipt[`carried_${index}`] ?? null;
    delete receipt[`carried_${index}`];
    return part.parse(answer);
  });
  return { receipt, ciphertext: stored_ciphertext === null ? null : asBuffer(stored_ciphertext), carried, uploads: Number(order_uploads) };
}

/**
 * Sends a guarded write of one receipt, or queues it when the transaction holds the receipt's lock: the
 * guard can then only fail through a bug, and the flush throws `unexpected()` as this would have.
 */
async function writeReceipt(db: Queryable, white_label_id: string, receipt_id: string, sql: string, params: unknown[], unexpected: () => Error): Promise<void> {
  const key = receiptRowKey(white_label_id, receipt_id);
  if (!holdsLock(db, key)) {
    if ((await db.query(sql, params)).rowCount !== 1) throw unexpected();
    return;
  }
  await deferWrite(db, { sql, params, expected_rows: 1, on_unexpected_rows: unexpected, rows_written: [key] });
}

/** Moves a receipt from one status to another; `unexpected()` is thrown when it was not in `from`. */
export async function setReceiptStatus(
  db: Queryable,
  input: { white_label_id: string; receipt_id: string; from: SlipReceiptStatus; to: SlipReceiptStatus },
  unexpected: () => Error,
): Promise<void> {
  await writeReceipt(
    db,
    input.white_label_id,
    input.receipt_id,
    'UPDATE slip_receipts SET status = $4 WHERE white_label_id = $1 AND receipt_id = $2 AND status = $3',
    [input.white_label_id, input.receipt_id, input.from, input.to],
    unexpected,
  );
}

/** Records a receipt's outcome; `unexpected()` is thrown when it was processed already. */
export async function completeReceipt(
  db: Queryable,
  input: { white_label_id: string; receipt_id: string; outcome: string; verification: Record<string, unknown> | null; transfer_sealed: string | null; processed_at: Date },
  unexpected: () => Error,
): Promise<void> {
  await writeReceipt(
    db,
    input.white_label_id,
    input.receipt_id,
    `UPDATE slip_receipts SET status = 'processed', outcome = $3, verification = $4, transfer_sealed = $5, processed_at = $6
      WHERE white_label_id = $1 AND receipt_id = $2 AND status <> 'processed'`,
    [
      input.white_label_id, input.receipt_id, input.outcome, input.verification === null ? null : JSON.stringify(input.verification),
      input.transfer_sealed, input.processed_at,
    ],
    unexpected,
  );
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

/** Every receipt of an order, oldest first: what the review desk shows a reviewer. */
export async function listReceiptsOfDeposit(db: Queryable, white_label_id: string, deposit_id: string): Promise<SlipReceiptRow[]> {
  const { rows } = await db.query<SlipReceiptRow>(
    `SELECT ${RECEIPT_COLUMNS} FROM slip_receipts WHERE white_label_id = $1 AND deposit_id = $2 ORDER BY received_at, receipt_id LIMIT 10`,
    [white_label_id, deposit_id],
  );
  return rows;
}

/** One receipt of an order within a brand (the back office reads any merchant of its brand). */
export async function findReceiptInBrand(db: Queryable, white_label_id: string, deposit_id: string, receipt_id: string): Promise<SlipReceiptRow | null> {
  const { rows } = await db.query<SlipReceiptRow>(`SELECT ${RECEIPT_COLUMNS} FROM slip_receipts WHERE white_label_id = $1 AND deposit_id = $2 AND receipt_id = $3`, [
    white_label_id,
    deposit_id,
    receipt_id,
  ]);
  return rows[0] ?? null;
}

/** A receipt the evidence retention works on: which order it belongs to, and which store holds its image. */
export interface RetainedEvidence {
  white_label_id: string;
  deposit_id: string;
  receipt_id: string;
  received_at: Date;
}

/**
 * Processed receipts with an image not yet purged, received before `before`, oldest first, after `after` (the
 * last receipt of the previous batch, so that a batch held back by open cases does not come round again).
 */
export async function listEvidenceToPurge(
  db: Queryable,
  input: { before: Date; after: { received_at: Date; white_label_id: string; receipt_id: string } | null; limit: number },
): Promise<RetainedEvidence[]> {
  const after = input.after;
  const { rows } = await db.query<RetainedEvidence>(
    `SELECT white_label_id, deposit_id, receipt_id, received_at FROM slip_receipts
      WHERE media_type IS NOT NULL AND evidence_purged_at IS NULL AND status = 'processed' AND received_at < $1
        AND ($2::timestamptz IS NULL OR (received_at, white_label_id, receipt_id) > ($2::timestamptz, $3::text, $4::text))
      ORDER BY received_at, white_label_id, receipt_id LIMIT $5`,
    [input.before, after?.received_at ?? null, after?.white_label_id ?? null, after?.receipt_id ?? null, input.limit],
  );
  return rows;
}

/**
 * Marks receipts' evidence purged and erases their wrapped data keys, in the caller's transaction, and deletes
 * the blobs the PostgreSQL store holds for them in the same transaction. Returns the receipts marked (one
 * purged already, or not processed, is left as it is).
 */
export async function markEvidencePurged(tx: Queryable, receipts: readonly { white_label_id: string; receipt_id: string }[], at: Date): Promise<number> {
  if (receipts.length === 0) return 0;
  const brands = receipts.map((receipt) => receipt.white_label_id);
  const ids = receipts.map((receipt) => receipt.receipt_id);
  const { rows } = await tx.query<{ white_label_id: string; receipt_id: string; in_postgres: boolean }>(
    `UPDATE slip_receipts r
        SET evidence_purged_at = $3, wrapped_key = NULL, blob_store = CASE WHEN r.blob_store = 'postgres' THEN NULL ELSE r.blob_store END
       FROM unnest($1::text[], $2::text[]) AS k(white_label_id, receipt_id)
      WHERE r.white_label_id = k.white_label_id AND r.receipt_id = k.receipt_id
        AND r.media_type IS NOT NULL AND r.evidence_purged_at IS NULL AND r.status = 'processed'
      RETURNING r.white_label_id, r.receipt_id, r.blob_store IS NULL AS in_postgres`,
    [brands, ids, at],
  );
  const inPostgres = rows.filter((row) => row.in_postgres);
  if (inPostgres.length > 0) {
    await tx.query(
      `DELETE FROM slip_blobs b USING unnest($1::text[], $2::text[]) AS k(white_label_id, blob_key)
        WHERE b.white_label_id = k.white_label_id AND b.blob_key = k.blob_key`,
      [inPostgres.map((row) => row.white_label_id), inPostgres.map((row) => row.receipt_id)],
    );
  }
  return rows.length;
}

/** Purged receipts whose bytes `blob_store` (a file or an object store) still holds, oldest purge first. */
export async function listPurgedBlobsInStore(db: Queryable, blob_store: string, limit: number): Promise<{ white_label_id: string; receipt_id: string }[]> {
  const { rows } = await db.query<{ white_label_id: string; receipt_id: string }>(
    `SELECT white_label_id, receipt_id FROM slip_receipts
      WHERE evidence_purged_at IS NOT NULL AND blob_store = $1 ORDER BY evidence_purged_at, white_label_id, receipt_id LIMIT $2`,
    [blob_store, limit],
  );
  return rows;
}

/** Records that a purged receipt's bytes are deleted from their store. */
export async function clearPurgedBlobStore(db: Queryable, receipts: readonly { white_label_id: string; receipt_id: string }[]): Promise<void> {
  if (receipts.length === 0) return;
  await db.query(
    `UPDATE slip_receipts r SET blob_store = NULL FROM unnest($1::text[], $2::text[]) AS k(white_label_id, receipt_id)
      WHERE r.white_label_id = k.white_label_id AND r.receipt_id = k.receipt_id AND r.evidence_purged_at IS NOT NULL`,
    [receipts.map((receipt) => receipt.white_label_id), receipts.map((receipt) => receipt.receipt_id)],
  );
}
