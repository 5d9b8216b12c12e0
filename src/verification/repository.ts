import type { Queryable } from '../platform/db.ts';
import type { ReadPart } from '../platform/read-part.ts';
import { deferWrite } from '../platform/unit-of-work.ts';

/** All SQL of the verification module: the bank transfers slips have claimed (the duplicate check). */

export interface SlipTransferRow {
  white_label_id: string;
  livemode: boolean;
  sending_bank_code: string;
  trans_ref: string;
  deposit_id: string;
  receipt_id: string;
  amount_minor: number;
  created_at: Date;
}

/** Who holds a transfer: the order it was claimed for and the receipt that claimed it. */
export interface TransferHolder {
  deposit_id: string;
  receipt_id: string;
}

/**
 * Claims a transfer for an order, once per brand and environment (the primary key): returns the row
 * that holds it, this one or the one that claimed it first, so a second order naming the same transfer
 * is told who was first and gets no second credit, whatever the timing.
 */
export async function claimTransfer(db: Queryable, row: SlipTransferRow): Promise<TransferHolder> {
  const inserted = await db.query<TransferHolder>(
    `INSERT INTO slip_transfers (white_label_id, livemode, sending_bank_code, trans_ref, deposit_id, receipt_id, amount_minor, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (white_label_id, livemode, sending_bank_code, trans_ref) DO NOTHING
     RETURNING deposit_id, receipt_id`,
    [row.white_label_id, row.livemode, row.sending_bank_code, row.trans_ref, row.deposit_id, row.receipt_id, row.amount_minor, row.created_at],
  );
  const mine = inserted.rows[0];
  if (mine) return mine;
  // The conflicting row committed before this statement ran (or the insert would have waited for it).
  const first = await findTransfer(db, row);
  if (!first) throw new Error('a conflicting slip transfer vanished');
  return first;
}

type TransferKey = { white_label_id: string; livemode: boolean; sending_bank_code: string; trans_ref: string };

/**
 * `findTransfer` as a read another module's statement carries (src/platform/read-part.ts): the decide
 * transaction's feed-lock statement, so that the duplicate check costs no round trip of its own.
 */
export function transferHolderPart(key: TransferKey): ReadPart<TransferHolder | null> {
  return {
    sql: `(SELECT json_build_object('deposit_id', deposit_id, 'receipt_id', receipt_id) FROM slip_transfers
            WHERE white_label_id = $1 AND livemode = $2 AND sending_bank_code = $3 AND trans_ref = $4)`,
    params: [key.white_label_id, key.livemode, key.sending_bank_code, key.trans_ref],
    parse: (value) => (value === null || value === undefined ? null : (value as TransferHolder)),
  };
}

/**
 * `claimTransfer` for a transaction that read the transfer unclaimed (`transferHolderPart`): the insert is
 * queued and sent with the transaction's last writes (src/platform/unit-of-work.ts). A claim committed by
 * another order since that read (the insert waits for it, then inserts nothing) makes the flush throw
 * `claimed_meanwhile()`, which rolls the transaction back, so that it can be decided again with the holder
 * known: the primary key still lets one order alone hold the transfer.
 */
export async function deferTransferClaim(db: Queryable, row: SlipTransferRow, claimed_meanwhile: () => Error): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO slip_transfers (white_label_id, livemode, sending_bank_code, trans_ref, deposit_id, receipt_id, amount_minor, created_at)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
          ON CONFLICT (white_label_id, livemode, sending_bank_code, trans_ref) DO NOTHING`,
    params: [row.white_label_id, row.livemode, row.sending_bank_code, row.trans_ref, row.deposit_id, row.receipt_id, row.amount_minor, row.created_at],
    expected_rows: 1,
    on_unexpected_rows: claimed_meanwhile,
    rows_written: [`slip_transfers:${row.white_label_id}:${row.livemode}:${row.sending_bank_code}:${row.trans_ref}`],
  });
}

/** Who holds a transfer already, if anyone. */
export async function findTransfer(db: Queryable, key: TransferKey): Promise<TransferHolder | null> {
  const { rows } = await db.query<TransferHolder>(
    'SELECT deposit_id, receipt_id FROM slip_transfers WHERE white_label_id = $1 AND livemode = $2 AND sending_bank_code = $3 AND trans_ref = $4',
    [key.white_label_id, key.livemode, key.sending_bank_code, key.trans_ref],
  );
  return rows[0] ?? null;
}

/** The bank-verified transfers slips claimed for one order: what a reviewer's approval settles with. */
export async function transfersOfDeposit(db: Queryable, white_label_id: string, deposit_id: string): Promise<SlipTransferRow[]> {
  const { rows } = await db.query<SlipTransferRow>(
    `SELECT white_label_id, livemode, sending_bank_code, trans_ref, deposit_id, receipt_id, amount_minor, created_at
       FROM slip_transfers WHERE white_label_id = $1 AND deposit_id = $2 ORDER BY created_at, trans_ref`,
    [white_label_id, deposit_id],
  );
  return rows.map((row) => ({ ...row, amount_minor: Number(row.amount_minor) }));
}

/**
 * The orders whose slips claimed a transfer with this bank transaction reference, in either mode and from any
 * sending bank (a reference alone may repeat across banks), by slip_transfers_by_reference (migration 0042).
 */
export async function depositIdsOfTransferReference(db: Queryable, white_label_id: string, trans_ref: string, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ deposit_id: string }>(
    'SELECT DISTINCT deposit_id FROM slip_transfers WHERE white_label_id = $1 AND trans_ref = $2 ORDER BY deposit_id LIMIT $3',
    [white_label_id, trans_ref, limit],
  );
  return rows.map((row) => row.deposit_id);
}
