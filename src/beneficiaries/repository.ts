import type { Queryable } from '../platform/db.ts';
import { rowFromJson, type ReadPart } from '../platform/read-part.ts';

/**
 * All SQL of beneficiaries. Every query is scoped by (white_label_id, merchant_id, livemode); the
 * full account number never appears here in clear, only sealed, as an HMAC and as its last four digits.
 */

export type BeneficiaryStatus = 'pending_verification' | 'verified' | 'rejected';
export type VerificationFailureCode = 'account_not_found' | 'account_closed' | 'account_frozen' | 'name_mismatch' | 'bank_unavailable';

export interface BeneficiaryAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

export interface BeneficiaryRow extends BeneficiaryAccount {
  beneficiary_id: string;
  version: number;
  status: BeneficiaryStatus;
  bank_code: string;
  bank_name_th: string;
  account_number_sealed: string;
  account_number_hmac: string;
  account_number_last4: string;
  account_name_th: string;
  account_name_en: string | null;
  promptpay_id_sealed: string | null;
  promptpay_id_last4: string | null;
  end_user_ref: string | null;
  verification_checked_at: Date | null;
  verification_name_match: boolean | null;
  verification_failure_code: VerificationFailureCode | null;
  created_at: Date;
  updated_at: Date;
  verified_at: Date | null;
}

const COLUMNS = `white_label_id, merchant_id, livemode, beneficiary_id, version, status, bank_code, bank_name_th,
  account_number_sealed, account_number_hmac, account_number_last4, account_name_th, account_name_en,
  promptpay_id_sealed, promptpay_id_last4, end_user_ref, verification_checked_at, verification_name_match,
  verification_failure_code, created_at, updated_at, verified_at`;

function normalise(row: BeneficiaryRow): BeneficiaryRow {
  return { ...row, version: Number(row.version) };
}

export async function findById(db: Queryable, account: BeneficiaryAccount, beneficiary_id: string): Promise<BeneficiaryRow | null> {
  const { rows } = await db.query<BeneficiaryRow>(
    `SELECT ${COLUMNS} FROM beneficiaries
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND beneficiary_id = $4`,
    [account.white_label_id, account.merchant_id, account.livemode, beneficiary_id],
  );
  return rows[0] ? normalise(rows[0]) : null;
}

/** `findById` as a read another statement carries (src/platform/read-part.ts). */
export function findByIdPart(account: BeneficiaryAccount, beneficiary_id: string): ReadPart<BeneficiaryRow | null> {
  return {
    sql: `(SELECT row_to_json(b) FROM (SELECT ${COLUMNS} FROM beneficiaries
             WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND beneficiary_id = $4) AS b)`,
    params: [account.white_label_id, account.merchant_id, account.livemode, beneficiary_id],
    parse: (value) => {
      const row = rowFromJson<BeneficiaryRow>(value, ['verification_checked_at', 'created_at', 'updated_at', 'verified_at']);
      return row ? normalise(row) : null;
    },
  };
}

/** The columns of a beneficiary a payout needs, its account number still sealed. */
export type PayeeRow = Pick<BeneficiaryRow, 'bank_code' | 'account_number_sealed' | 'account_name_th'>;

/**
 * `findById`, cut to the columns of a payee, as a read another module's statement carries
 * (src/platform/read-part.ts): matching reads the payees of its legs with the event feeds it locks.
 */
export function payeeRowPart(account: BeneficiaryAccount, beneficiary_id: string): ReadPart<PayeeRow | null> {
  return {
    sql: `(SELECT json_build_object('bank_code', bank_code, 'account_number_sealed', account_number_sealed, 'account_name_th', account_name_th)
             FROM beneficiaries
            WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND beneficiary_id = $4)`,
    params: [account.white_label_id, account.merchant_id, account.livemode, beneficiary_id],
    parse: (value) => (value === null ? null : (value as PayeeRow)),
  };
}

export async function findByAccountHmac(db: Queryable, account: BeneficiaryAccount, account_number_hmac: string): Promise<BeneficiaryRow | null> {
  const { rows } = await db.query<BeneficiaryRow>(
    `SELECT ${COLUMNS} FROM beneficiaries
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND account_number_hmac = $4`,
    [account.white_label_id, account.merchant_id, account.livemode, account_number_hmac],
  );
  return rows[0] ? normalise(rows[0]) : null;
}

/** Inserts a new beneficiary; false (and nothing written) when the account already has one. */
export async function insertBeneficiary(db: Queryable, row: BeneficiaryRow): Promise<boolean> {
  const { rows } = await db.query(
    `INSERT INTO beneficiaries (${COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)
     ON CONFLICT (white_label_id, merchant_id, livemode, account_number_hmac) DO NOTHING
     RETURNING beneficiary_id`,
    [
      row.white_label_id,
      row.merchant_id,
      row.livemode,
      row.beneficiary_id,
      row.version,
      row.status,
      row.bank_code,
      row.bank_name_th,
      row.account_number_sealed,
      row.account_number_hmac,
      row.account_number_last4,
      row.account_name_th,
      row.account_name_en,
      row.promptpay_id_sealed,
      row.promptpay_id_last4,
      row.end_user_ref,
      row.verification_checked_at,
      row.verification_name_match,
      row.verification_failure_code,
      row.created_at,
      row.updated_at,
      row.verified_at,
    ],
  );
  return rows.length === 1;
}

export interface VerificationUpdate {
  status: BeneficiaryStatus;
  version: number;
  verification_checked_at: Date;
  verification_name_match: boolean;
  verification_failure_code: VerificationFailureCode | null;
  verified_at: Date | null;
  updated_at: Date;
}

/** Records a verification outcome where the stored version is still `expected_version`. */
export async function updateVerification(
  db: Queryable,
  account: BeneficiaryAccount,
  beneficiary_id: string,
  expected_version: number,
  update: VerificationUpdate,
): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE beneficiaries
        SET status = $6, version = $7, verification_checked_at = $8, verification_name_match = $9,
            verification_failure_code = $10, verified_at = $11, updated_at = $12
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND beneficiary_id = $4 AND version = $5
      RETURNING beneficiary_id`,
    [
      account.white_label_id,
      account.merchant_id,
      account.livemode,
      beneficiary_id,
      expected_version,
      update.status,
      update.version,
      update.verification_checked_at,
      update.verification_name_match,
      update.verification_failure_code,
      update.verified_at,
      update.updated_at,
    ],
  );
  return rows.length === 1;
}
