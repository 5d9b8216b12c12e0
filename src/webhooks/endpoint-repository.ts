import type { Queryable } from '../platform/db.ts';
import type { EndpointRow } from './types.ts';

/**
 * The SQL of webhook endpoints (`webhook_endpoints`). The webhooks module keeps its SQL in one
 * repository file per kind of row: endpoints here, deliveries and their attempts in
 * delivery-repository.ts, the fan-out from the outbox in fanout-repository.ts, and signing keys in
 * signing-key-repository.ts. Row types are in types.ts, one per table of migrations/0008_webhooks.sql.
 * Every instant is a parameter from the injected clock, never now().
 */

const ENDPOINT_COLUMNS = `white_label_id, merchant_id, livemode, endpoint_id, url, status, disabled_reason, event_types, description,
  version, created_at, updated_at, disabled_at, deleted_at`;

export async function insertEndpoint(tx: Queryable, row: EndpointRow): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_endpoints (${ENDPOINT_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    [
      row.white_label_id, row.merchant_id, row.livemode, row.endpoint_id, row.url, row.status, row.disabled_reason,
      row.event_types, row.description, row.version, row.created_at, row.updated_at, row.disabled_at, row.deleted_at,
    ],
  );
}

/** An endpoint by id inside a brand scope (null: any brand). Deleted endpoints are returned too. */
export async function findEndpoint(db: Queryable, endpoint_id: string, scope_white_label_id: string | null, lock = false): Promise<EndpointRow | null> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
      WHERE endpoint_id = $1 AND ($2::text IS NULL OR white_label_id = $2)
      ${lock ? 'FOR UPDATE' : ''}`,
    [endpoint_id, scope_white_label_id],
  );
  return rows[0] ?? null;
}

export interface EndpointListFilter {
  white_label_id: string;
  merchant_id: string | null;
  livemode: boolean | null;
  /** Exclusive: endpoints with a greater id (ids are ULIDs, so this is creation order). */
  starting_after: string | null;
  limit: number;
}

export async function listEndpoints(db: Queryable, filter: EndpointListFilter): Promise<EndpointRow[]> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
      WHERE white_label_id = $1 AND status <> 'deleted'
        AND ($2::text IS NULL OR merchant_id = $2)
        AND ($3::boolean IS NULL OR livemode = $3)
        AND ($4::text IS NULL OR endpoint_id > $4)
      ORDER BY endpoint_id
      LIMIT $5`,
    [filter.white_label_id, filter.merchant_id, filter.livemode, filter.starting_after, filter.limit],
  );
  return rows;
}

export async function countEndpointsOfFeed(tx: Queryable, white_label_id: string, merchant_id: string, livemode: boolean): Promise<number> {
  const { rows } = await tx.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM webhook_endpoints
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND status <> 'deleted'`,
    [white_label_id, merchant_id, livemode],
  );
  return rows[0]?.count ?? 0;
}

/** Writes every mutable column of an endpoint whose stored version is `expected_version`. */
export async function updateEndpoint(tx: Queryable, row: EndpointRow, expected_version: number): Promise<boolean> {
  const result = await tx.query(
    `UPDATE webhook_endpoints
        SET url = $3, status = $4, disabled_reason = $5, event_types = $6, description = $7, version = $8,
            updated_at = $9, disabled_at = $10, deleted_at = $11
      WHERE white_label_id = $1 AND endpoint_id = $2 AND version = $12`,
    [
      row.white_label_id, row.endpoint_id, row.url, row.status, row.disabled_reason, row.event_types, row.description,
      row.version, row.updated_at, row.disabled_at, row.deleted_at, expected_version,
    ],
  );
  return result.rowCount === 1;
}
