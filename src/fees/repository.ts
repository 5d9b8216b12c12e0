import type { Queryable } from '../platform/db.ts';
import type { ReadPart } from '../platform/read-part.ts';

/** All SQL of fee schedules (`fee_schedules`, migration 0002). Every statement is scoped by brand. */
export type FeeChannel = 'deposit' | 'withdrawal';

export interface FeeScheduleRow {
  white_label_id: string;
  merchant_id: string | null;
  livemode: boolean;
  channel: FeeChannel;
  processing_fee_bps: number;
  fixed_fee_minor: number;
  vat_bps: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'white_label_id, merchant_id, livemode, channel, processing_fee_bps, fixed_fee_minor, vat_bps, created_at, updated_at';

/**
 * The schedule that applies to a merchant: its own row if there is one, else the brand default
 * (merchant_id NULL), else none. One statement; `NULLS LAST` puts the merchant's row first.
 */
export async function findApplicableSchedule(
  db: Queryable,
  scope: { white_label_id: string; merchant_id: string; livemode: boolean; channel: FeeChannel },
): Promise<FeeScheduleRow | null> {
  const { rows } = await db.query<FeeScheduleRow>(
    `SELECT ${COLUMNS} FROM fee_schedules
      WHERE white_label_id = $1 AND COALESCE(merchant_id, '') IN ($2, '') AND livemode = $3 AND channel = $4
      ORDER BY merchant_id NULLS LAST
      LIMIT 1`,
    [scope.white_label_id, scope.merchant_id, scope.livemode, scope.channel],
  );
  return rows[0] ?? null;
}

/** A schedule as written, with the instant of the write. */
export type UpsertScheduleInput = Omit<FeeScheduleRow, 'created_at' | 'updated_at'> & { now: Date };

/**
 * `findApplicableSchedule` as a read another module's statement carries (src/platform/read-part.ts), so
 * that a withdrawal creation reads its fee schedule with its own policy.
 */
export function applicableSchedulePart(scope: { white_label_id: string; merchant_id: string; livemode: boolean; channel: FeeChannel }): ReadPart<FeeScheduleRow | null> {
  return {
    sql: `(SELECT row_to_json(schedule) FROM (
             SELECT ${COLUMNS} FROM fee_schedules
              WHERE white_label_id = $1 AND COALESCE(merchant_id, '') IN ($2, '') AND livemode = $3 AND channel = $4
              ORDER BY merchant_id NULLS LAST
              LIMIT 1) AS schedule)`,
    params: [scope.white_label_id, scope.merchant_id, scope.livemode, scope.channel],
    parse(value) {
      if (value === null) return null;
      const row = value as Omit<FeeScheduleRow, 'created_at' | 'updated_at'> & { created_at: string; updated_at: string };
      return { ...row, created_at: new Date(row.created_at), updated_at: new Date(row.updated_at) };
    },
  };
}

/** Creates or replaces the schedule of one scope; `created_at` is kept on replace. */
export async function upsertSchedule(db: Queryable, input: UpsertScheduleInput): Promise<FeeScheduleRow> {
  const { rows } = await db.query<FeeScheduleRow>(
    `INSERT INTO fee_schedules (white_label_id, merchant_id, livemode, channel, processing_fee_bps, fixed_fee_minor, vat_bps, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
     ON CONFLICT (white_label_id, (COALESCE(merchant_id, '')), livemode, channel) DO UPDATE
       SET processing_fee_bps = EXCLUDED.processing_fee_bps,
           fixed_fee_minor = EXCLUDED.fixed_fee_minor,
           vat_bps = EXCLUDED.vat_bps,
           updated_at = EXCLUDED.updated_at
     RETURNING ${COLUMNS}`,
    [input.white_label_id, input.merchant_id, input.livemode, input.channel, input.processing_fee_bps, input.fixed_fee_minor, input.vat_bps, input.now],
  );
  const row = rows[0];
  if (!row) throw new Error('invariant: upsert of a fee schedule returned no row');
  return row;
}
