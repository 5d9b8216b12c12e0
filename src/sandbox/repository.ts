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
