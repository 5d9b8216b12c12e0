import type { Queryable } from '../platform/db.ts';
import * as repository from './repository.ts';

export type { BankRow } from './repository.ts';

/** The bank record of the spec (Resources, "Bank record"). `message_th` is present only when unavailable. */
export interface BankView {
  bank_code: string;
  name_th: string;
  name_en: string;
  available: boolean;
  message_th?: string;
  side: string[];
}

export function bankView(row: repository.BankRow): BankView {
  const view: BankView = { bank_code: row.bank_code, name_th: row.name_th, name_en: row.name_en, available: row.available, side: [...row.sides] };
  if (!row.available && row.message_th) view.message_th = row.message_th;
  return view;
}

export async function listBanks(db: Queryable): Promise<BankView[]> {
  return (await repository.listBanks(db)).map(bankView);
}

/** One bank of the list, with its availability and sides; null for a code not in the list. */
export function findBank(db: Queryable, bank_code: string): Promise<repository.BankRow | null> {
  return repository.findBank(db, bank_code);
}
