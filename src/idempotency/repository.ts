import type { Queryable } from '../platform/db.ts';
import { deferWrite } from '../platform/unit-of-work.ts';
import { appendParts, type ReadPart } from '../platform/read-part.ts';

/** All SQL of idempotency records. */

export interface IdempotencyScope {
  white_label_id: string;
  /** The merchant, or the back-office credential id for back-office calls. */
  merchant_id: string;
  livemode: boolean;
  idempotency_key: string;
}

export interface IdempotencyRecordRow extends IdempotencyScope {
  request_fingerprint: string;
  request_id: string;
  response_status: number;
  /** The answer's exact JSON text, sealed (`IdempotencyService`): answers can carry tokens and QR payloads. */
  response_body: string;
  response_headers: Record<string, string>;
  created_at: Date;
  expires_at: Date;
}

/** What a replay needs of a stored record (read back as JSON, so only plain values). */
export interface StoredIdempotentResponse {
  request_fingerprint: string;
  request_id: string;
  response_status: number;
  response_body: string;
  response_headers: Record<string, string>;
}

/**
 * Takes a transaction-scoped advisory lock on the key and reads the live record, in one round trip.
 * A second transaction for the same key while the first still runs gets `locked: false` at once
 * instead of waiting: that is the `idempotency_in_flight` answer. The record is read in the same
 * statement, whose snapshot may predate a first transaction that commits in between; such a request
 * runs its handler, then fails to store its record against the primary key and rolls back (see
 * `insertRecord`), so the work is still never done twice.
 *
 * The statement also answers the command's first reads (src/platform/read-part.ts), in order, parsed by
 * their parts, but only when the key is locked and has no record: a request answered in flight or replayed
 * reads nothing more and takes no lock a carried read would take. The lock and the record are computed in a subquery
 * that PostgreSQL does not flatten (it calls a volatile function), and each carried read is a scalar
 * subquery evaluated only when its CASE branch is.
 */
export async function lockAndFindRecord(
  db: Queryable,
  lock_text: string,
  scope: IdempotencyScope,
  now: Date,
  reads: readonly ReadPart<unknown>[] = [],
): Promise<{ locked: boolean; record: StoredIdempotentResponse | null; answers: unknown[] }> {
  const params: unknown[] = [lock_text, scope.white_label_id, scope.merchant_id, scope.livemode, scope.idempotency_key, now];
  const carriedColumns = appendParts(reads, params).map((sql, index) => `, CASE WHEN k.locked AND k.record IS NULL THEN ${sql} END AS carried_${index}`);
  const { rows } = await db.query<{ locked: boolean; record: StoredIdempotentResponse | null } & Record<string, unknown>>(
    `SELECT k.locked, k.record${carriedColumns.join('')}
       FROM (SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked,
                    (SELECT json_build_object('request_fingerprint', r.request_fingerprint, 'request_id', r.request_id,
                              'response_status', r.response_status, 'response_body', r.response_body,
                              'response_headers', r.response_headers)
                       FROM idempotency_records r
                      WHERE white_label_id = $2 AND merchant_id = $3 AND livemode = $4 AND idempotency_key = $5 AND expires_at > $6) AS record) AS k`,
    params,
  );
  const row = rows[0];
  const locked = row?.locked === true;
  const record = row?.record ?? null;
  return { locked, record, answers: locked && record === null ? reads.map((read, index) => read.parse(row?.[`carried_${index}`] ?? null)) : [] };
}

/**
 * Stores a response; an expired record under the same key is replaced, a live one never is. In a
 * transaction the write is queued and sent with its COMMIT (src/platform/unit-of-work.ts); when a live
 * record already holds the key, `taken` is thrown then and the transaction rolls back.
 */
export async function insertRecord(db: Queryable, row: IdempotencyRecordRow, taken: () => Error): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO idempotency_records AS r (white_label_id, merchant_id, livemode, idempotency_key, request_fingerprint, request_id,
       response_status, response_body, response_headers, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (white_label_id, merchant_id, livemode, idempotency_key) DO UPDATE SET
       request_fingerprint = EXCLUDED.request_fingerprint, request_id = EXCLUDED.request_id,
       response_status = EXCLUDED.response_status, response_body = EXCLUDED.response_body,
       response_headers = EXCLUDED.response_headers,
       created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
     WHERE r.expires_at <= EXCLUDED.created_at`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.idempotency_key, row.request_fingerprint, row.request_id,
      row.response_status, row.response_body, JSON.stringify(row.response_headers), row.created_at, row.expires_at,
    ],
    expected_rows: 1,
    on_unexpected_rows: taken,
  });
}

export async function purgeExpiredRecords(db: Queryable, now: Date, limit: number): Promise<number> {
  const result = await db.query(
    `DELETE FROM idempotency_records WHERE ctid IN (SELECT ctid FROM idempotency_records WHERE expires_at <= $1 LIMIT $2)`,
    [now, limit],
  );
  return result.rowCount;
}
