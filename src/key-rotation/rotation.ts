import type { Database, Queryable } from '../platform/db.ts';
import { scrubText } from '../platform/logger.ts';
import { SEALED_COLUMNS, type Rekeying, type SealedColumn, type StoredRow } from './sealed-columns.ts';

/**
 * Rotation of the master key over stored values (docs/operations.md, "Rotating MASTER_KEY"): every sealed value
 * and every wrapped evidence data key not yet under the current master key is opened with the key ring and
 * sealed again under the current key, a bounded batch per transaction, walking each table by its primary key.
 * A value is "stale" when it does not start with `v2.<current key id>.`, so a pass that stops (a crash, a
 * deploy) is resumed by running it again, and a second pass over a finished rotation changes nothing.
 */

export const DEFAULT_BATCH_SIZE = 500;
export const MAX_BATCH_SIZE = 10_000;

export interface ColumnStatus {
  column: string;
  /** Values sealed under an earlier master key, or in the v1 format that names no key. */
  stale: number;
}

export interface ColumnRotation {
  column: string;
  resealed: number;
  /** Values no key of the ring opens (an unknown key, or damaged): left as they are and reported. */
  failed: number;
  /** The first failure's message, naming the row by its key (ids, never a secret). */
  first_failure: string | null;
}

export function columnName(column: SealedColumn): string {
  return `${column.table}.${column.column}`;
}

/** The SQL condition "not under the current key" of one column, with its parameters from `$first`. */
function staleCondition(column: SealedColumn, current_key_id: string, first: number): { sql: string; params: unknown[] } {
  const prefix = `v2.${current_key_id}.`;
  const name = column.column;
  switch (column.kind) {
    case 'sealed':
    case 'wrapped_evidence_key':
      return { sql: `${name} IS NOT NULL AND left(${name}, ${prefix.length}) <> $${first}`, params: [prefix] };
    case 'sealed_or_clear':
      return { sql: `left(${name}, 3) IN ('v1.', 'v2.') AND left(${name}, ${prefix.length}) <> $${first}`, params: [prefix] };
    case 'event_fields':
      // A key id is base64url, which has no character special in a regular expression outside brackets.
      return { sql: `${name}::text ~ $${first}`, params: [`"qr_payload":"sealed:v(1\\.|2\\.(?!${current_key_id}\\.))`] };
  }
}

export async function countStale(database: Queryable, current_key_id: string): Promise<ColumnStatus[]> {
  const statuses: ColumnStatus[] = [];
  for (const column of SEALED_COLUMNS) {
    const condition = staleCondition(column, current_key_id, 1);
    const { rows } = await database.query<{ stale: string | number }>(`SELECT count(*) AS stale FROM ${column.table} WHERE ${condition.sql}`, condition.params);
    statuses.push({ column: columnName(column), stale: Number(rows[0]?.stale ?? 0) });
  }
  return statuses;
}

interface BatchResult {
  resealed: number;
  failures: string[];
  /** The key of the batch's last row, from which the next batch continues; null when the table is done. */
  cursor: unknown[] | null;
}

function describeRow(column: SealedColumn, row: StoredRow): string {
  return column.key_columns.map((name) => `${name}=${String(row[name])}`).join(', ');
}

/** One batch in one transaction: the next stale rows after `cursor`, locked, sealed again and written. */
async function rotateBatch(database: Database, column: SealedColumn, keys: Rekeying, cursor: unknown[] | null, batch_size: number): Promise<BatchResult> {
  const keyList = column.key_columns.join(', ');
  const condition = staleCondition(column, keys.box.current_key_id, 1);
  const params: unknown[] = [...condition.params];
  let after = '';
  if (cursor !== null) {
    after = ` AND (${keyList}) > (${cursor.map((_value, index) => `$${params.length + index + 1}`).join(', ')})`;
    params.push(...cursor);
  }
  const valueExpression = column.kind === 'event_fields' ? `${column.column}::text` : column.column;
  const selected = [...column.key_columns, ...(column.context_columns ?? []), `${valueExpression} AS stored_value`].join(', ');
  return database.transaction(async (tx) => {
    const { rows } = await tx.query<StoredRow>(
      `SELECT ${selected} FROM ${column.table} WHERE ${condition.sql}${after} ORDER BY ${keyList} LIMIT ${batch_size} FOR UPDATE`,
      params,
    );
    const failures: string[] = [];
    let resealed = 0;
    const cast = column.kind === 'event_fields' ? '::json' : '';
    const where = column.key_columns.map((name, index) => `${name} = $${index + 2}`).join(' AND ');
    for (const row of rows) {
      let value: string;
      try {
        value = column.reseal(String(row.stored_value), row, keys);
      } catch (error) {
        failures.push(`${columnName(column)} (${describeRow(column, row)}): ${scrubText(error instanceof Error ? error.message : String(error))}`);
        continue;
      }
      await tx.query(`UPDATE ${column.table} SET ${column.column} = $1${cast} WHERE ${where}`, [value, ...column.key_columns.map((name) => row[name])]);
      resealed += 1;
    }
    const last = rows.at(-1);
    return { resealed, failures, cursor: rows.length < batch_size || last === undefined ? null : column.key_columns.map((name) => last[name]) };
  });
}

/** PostgreSQL's deadlock and serialization failures: the batch's transaction was rolled back, and may simply run again. */
const RETRIED_CODES = new Set(['40P01', '40001']);
const BATCH_ATTEMPTS = 3;

/**
 * A batch, run again when it lost a deadlock to the service's own transactions (its row locks meet the
 * service's in another order on a live database); any other failure ends the rotation, which resumes when run again.
 */
async function rotateBatchWithRetry(database: Database, column: SealedColumn, keys: Rekeying, cursor: unknown[] | null, batch_size: number): Promise<BatchResult> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await rotateBatch(database, column, keys, cursor, batch_size);
    } catch (error) {
      if (attempt >= BATCH_ATTEMPTS || !RETRIED_CODES.has(String((error as { code?: unknown }).code))) throw error;
    }
  }
}

/** Rotates one column to the end of its table; `on_batch` hears each batch's count (progress for the operator). */
export async function rotateColumn(
  database: Database,
  column: SealedColumn,
  keys: Rekeying,
  batch_size: number,
  on_batch: (column: string, resealed: number) => void = () => {},
): Promise<ColumnRotation> {
  const result: ColumnRotation = { column: columnName(column), resealed: 0, failed: 0, first_failure: null };
  let cursor: unknown[] | null = null;
  do {
    const batch = await rotateBatchWithRetry(database, column, keys, cursor, batch_size);
    result.resealed += batch.resealed;
    result.failed += batch.failures.length;
    result.first_failure ??= batch.failures[0] ?? null;
    if (batch.resealed > 0) on_batch(result.column, batch.resealed);
    cursor = batch.cursor;
  } while (cursor !== null);
  return result;
}

export async function rotateAll(
  database: Database,
  keys: Rekeying,
  batch_size: number,
  on_batch?: (column: string, resealed: number) => void,
): Promise<ColumnRotation[]> {
  const results: ColumnRotation[] = [];
  for (const column of SEALED_COLUMNS) results.push(await rotateColumn(database, column, keys, batch_size, on_batch));
  return results;
}
