import { performance } from 'node:perf_hooks';
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

/**
 * How long a process keeps the bank list. The list changes only by migration or by an operator's update
 * of the table (the service has no write path to it), and every deposit reads two banks of it, so each
 * process reads it whole at most this often instead of once per lookup. An update reaches every process
 * within this time. GET /v1/pay/banks reads the table itself.
 */
export const BANK_LIST_TTL_MS = 10_000;

/**
 * The process's copy of the list. Its age is measured in process time (`performance.now`), not with the
 * injected clock: it is a freshness bound of a copy, not a business deadline, and a test clock that
 * never moves must not pin a copy for ever.
 */
let copy: { loaded_at_ms: number; by_code: Map<string, repository.BankRow> } | null = null;

/** One bank of the list, with its availability and sides; null for a code not in the list. */
export async function findBank(db: Queryable, bank_code: string): Promise<repository.BankRow | null> {
  const now_ms = performance.now();
  if (!copy || now_ms - copy.loaded_at_ms > BANK_LIST_TTL_MS) {
    const rows = await repository.listBanks(db);
    // Callers share these rows, so none may change them.
    copy = { loaded_at_ms: now_ms, by_code: new Map(rows.map((row) => [row.bank_code, Object.freeze({ ...row, sides: Object.freeze([...row.sides]) as string[] })])) };
  }
  return copy.by_code.get(bank_code) ?? null;
}

/** Drops the process's copy, so the next lookup reads the table (a test, or after an operator's update). */
export function forgetBankList(): void {
  copy = null;
}
