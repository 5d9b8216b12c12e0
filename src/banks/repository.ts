import type { Queryable } from '../platform/db.ts';

/** All SQL of the bank list. The `banks` table is reference data shared by every brand. */
export interface BankRow {
  bank_code: string;
  short_name: string;
  name_th: string;
  name_en: string;
  available: boolean;
  sides: string[];
  message_th: string | null;
  display_order: number;
}

export async function listBanks(db: Queryable): Promise<BankRow[]> {
  const { rows } = await db.query<BankRow>('SELECT * FROM banks ORDER BY display_order, bank_code');
  return rows;
}
