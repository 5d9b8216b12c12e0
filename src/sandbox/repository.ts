import type { Queryable } from '../platform/db.ts';

/** All SQL of the sandbox module. */

export interface CounterpartyRow {
  white_label_id: string;
  merchant_id: string;
  beneficiary_ids: string[];
  created_at: Date;
}

export async function findCounterparty(db: Queryable, white_label_id: string): Promise<CounterpartyRow | null> {
  const { rows } = await db.query<CounterpartyRow>('SELECT white_label_id, merchant_id, beneficiary_ids, created_at FROM sandbox_counterparties WHERE white_label_id = $1', [
    white_label_id,
  ]);
  return rows[0] ?? null;
}

export async function insertCounterparty(db: Queryable, row: CounterpartyRow): Promise<void> {
  await db.query('INSERT INTO sandbox_counterparties (white_label_id, merchant_id, beneficiary_ids, created_at) VALUES ($1, $2, $3, $4)', [
    row.white_label_id,
    row.merchant_id,
    row.beneficiary_ids,
    row.created_at,
  ]);
}

/** Serialises the creation of a brand's counterparty and its standing withdrawals for one transaction. */
export async function lockBrandLiquidity(db: Queryable, white_label_id: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`sandbox:liquidity:${white_label_id}`]);
}

/** One transfer of the sandbox bank (migrations/0011_slips.sql, `sandbox_bank_transfers`). */
export interface SandboxTransferRow {
  white_label_id: string;
  sending_bank_code: string;
  trans_ref: string;
  amount_minor: number;
  occurred_at: Date;
  sender_account_number: string;
  sender_name_th: string;
  sender_name_en: string | null;
  receiver_bank_code: string;
  receiver_account_number: string;
  receiver_name_th: string;
  merchant_id: string;
  deposit_id: string | null;
  leg_ref: string | null;
  created_at: Date;
  /** 106.00 THB: the bank says slip checking is off for this transfer (migrations/0019). */
  bank_checking_off: boolean;
  /** 110.00 THB: made by a scenario's payer, its slip uploaded by a later step. */
  kept_for_scenario: boolean;
}

const TRANSFER_COLUMNS = `white_label_id, sending_bank_code, trans_ref, amount_minor, occurred_at, sender_account_number, sender_name_th, sender_name_en,
  receiver_bank_code, receiver_account_number, receiver_name_th, merchant_id, deposit_id, leg_ref, created_at, bank_checking_off, kept_for_scenario`;

export async function insertTransfer(db: Queryable, row: SandboxTransferRow): Promise<void> {
  await db.query(`INSERT INTO sandbox_bank_transfers (${TRANSFER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, [
    row.white_label_id, row.sending_bank_code, row.trans_ref, row.amount_minor, row.occurred_at, row.sender_account_number, row.sender_name_th,
    row.sender_name_en, row.receiver_bank_code, row.receiver_account_number, row.receiver_name_th, row.merchant_id, row.deposit_id, row.leg_ref,
    row.created_at, row.bank_checking_off, row.kept_for_scenario,
  ]);
}

export async function findTransfer(db: Queryable, key: { white_label_id: string; sending_bank_code: string; trans_ref: string }): Promise<SandboxTransferRow | null> {
  const { rows } = await db.query<SandboxTransferRow>(
    `SELECT ${TRANSFER_COLUMNS} FROM sandbox_bank_transfers WHERE white_label_id = $1 AND sending_bank_code = $2 AND trans_ref = $3`,
    [key.white_label_id, key.sending_bank_code, key.trans_ref],
  );
  return rows[0] ?? null;
}

/** The latest transfer a scenario's payer kept for a later step of this deposit's scenario. */
export async function findKeptTransfer(db: Queryable, white_label_id: string, deposit_id: string): Promise<SandboxTransferRow | null> {
  const { rows } = await db.query<SandboxTransferRow>(
    `SELECT ${TRANSFER_COLUMNS} FROM sandbox_bank_transfers
      WHERE white_label_id = $1 AND deposit_id = $2 AND kept_for_scenario ORDER BY created_at DESC, trans_ref DESC LIMIT 1`,
    [white_label_id, deposit_id],
  );
  return rows[0] ?? null;
}
