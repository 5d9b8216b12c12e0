import type { Queryable } from '../platform/db.ts';
import type { AccountStatus } from './port.ts';

/**
 * All SQL of the sandbox bank's directory. Every query is scoped by the brand (white_label_id) and the
 * merchant: a merchant reads its own accounts and the brand's seeded baseline (`merchant_id` ''), and
 * writes only its own (migration 0021).
 */

/** The `merchant_id` of the brand's seeded baseline, which every merchant of the brand reads. */
export const BASELINE_MERCHANT_ID = '';

export type AccountType = 'personal' | 'business';

export interface SandboxAccountRow {
  white_label_id: string;
  /** The merchant that wrote the account, or '' for the brand's seeded baseline. */
  merchant_id: string;
  bank_code: string;
  account_number: string;
  holder_name_th: string;
  holder_name_en: string | null;
  account_type: AccountType;
  status: AccountStatus;
  created_at: Date;
  updated_at: Date;
}

/** An account as written: its timestamps come from the clock at write time. */
export type NewSandboxAccount = Omit<SandboxAccountRow, 'created_at' | 'updated_at'>;

const COLUMNS = 'white_label_id, merchant_id, bank_code, account_number, holder_name_th, holder_name_en, account_type, status, created_at, updated_at';

/** The account as this merchant sees it: its own row for the number, else the brand's baseline row. */
export async function findAccount(
  db: Queryable,
  key: { white_label_id: string; merchant_id: string; bank_code: string; account_number: string },
): Promise<SandboxAccountRow | null> {
  const { rows } = await db.query<SandboxAccountRow>(
    `SELECT ${COLUMNS} FROM sandbox_bank_accounts
      WHERE white_label_id = $1 AND merchant_id IN ($2, '') AND bank_code = $3 AND account_number = $4
      ORDER BY merchant_id = '' LIMIT 1`,
    [key.white_label_id, key.merchant_id, key.bank_code, key.account_number],
  );
  return rows[0] ?? null;
}

/** Whether the brand's directory has any account yet (the seed runs before any other write). */
export async function directoryExists(db: Queryable, white_label_id: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM sandbox_bank_accounts WHERE white_label_id = $1 AND merchant_id = '' LIMIT 1`, [white_label_id]);
  return rows.length > 0;
}

export async function countAccounts(db: Queryable, white_label_id: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*)::integer AS count FROM sandbox_bank_accounts WHERE white_label_id = $1 AND merchant_id = ''`,
    [white_label_id],
  );
  return rows[0]?.count ?? 0;
}

/** An account's values in the order of the first eight of COLUMNS (the timestamps follow). */
function accountParameters(account: NewSandboxAccount): unknown[] {
  return [
    account.white_label_id,
    account.merchant_id,
    account.bank_code,
    account.account_number,
    account.holder_name_th,
    account.holder_name_en,
    account.account_type,
    account.status,
  ];
}

/** Inserts the accounts that are not there yet, in one statement; returns how many were inserted. */
export async function insertMissingAccounts(db: Queryable, accounts: readonly NewSandboxAccount[], now: Date): Promise<number> {
  if (accounts.length === 0) return 0;
  // $1 is the instant shared by every row; each row then takes eight parameters.
  const values: unknown[] = [now];
  const tuples = accounts.map((account) => {
    const base = values.length;
    values.push(...accountParameters(account));
    const placeholders = Array.from({ length: 8 }, (_, offset) => `$${base + offset + 1}`);
    return `(${placeholders.join(', ')}, $1, $1)`;
  });
  const result = await db.query(
    `INSERT INTO sandbox_bank_accounts (${COLUMNS}) VALUES ${tuples.join(', ')}
     ON CONFLICT (white_label_id, merchant_id, bank_code, account_number) DO NOTHING`,
    values,
  );
  return result.rowCount;
}

/**
 * Creates the merchant's own account, or replaces its holder, type and status; `created` tells which
 * happened as the merchant sees it. A number of the baseline gets the merchant's own row, which it sees
 * from then on instead of the baseline's (an update, since the merchant could read the account before).
 */
export async function upsertAccount(db: Queryable, account: NewSandboxAccount, now: Date): Promise<{ row: SandboxAccountRow; created: boolean }> {
  const { rows } = await db.query<SandboxAccountRow & { created: boolean }>(
    `INSERT INTO sandbox_bank_accounts (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
     ON CONFLICT (white_label_id, merchant_id, bank_code, account_number) DO UPDATE SET
       holder_name_th = EXCLUDED.holder_name_th,
       holder_name_en = EXCLUDED.holder_name_en,
       account_type = EXCLUDED.account_type,
       status = EXCLUDED.status,
       updated_at = EXCLUDED.updated_at
     RETURNING ${COLUMNS},
       -- Created for the merchant: neither its own row nor the baseline had the number before.
       (xmax = 0 AND NOT EXISTS (SELECT 1 FROM sandbox_bank_accounts b
                                  WHERE b.white_label_id = $1 AND b.merchant_id = '' AND b.bank_code = $3 AND b.account_number = $4)) AS created`,
    [...accountParameters(account), now],
  );
  const row = rows[0];
  if (!row) throw new Error('upsert returned no row');
  const { created, ...rest } = row;
  return { row: rest, created };
}

