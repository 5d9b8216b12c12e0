import type { Queryable } from '../platform/db.ts';
import { backlogOf, type Backlog } from '../platform/backlog.ts';
import type { AttemptRow, AttemptStatus, DeliveryRow, DeliveryStatus, FailureReason } from './types.ts';
import { MAX_ATTEMPTS, RETRY_DELAYS_MS } from './types.ts';

/**
 * The SQL of webhook deliveries and their attempts (`webhook_deliveries`, `webhook_delivery_attempts`):
 * the dispatcher's leases, claims and completions, and the back office's reads, resends and replays.
 * Every instant is a parameter from the injected clock, never now().
 *
 * A claimed delivery reads its stored envelope text from the events module's outbox (`events`), read
 * only, since that text is sent byte for byte; the read belongs behind the events service once it
 * offers it. The fan-out's reads of the outbox are in fanout-repository.ts.
 */

const DELIVERY_COLUMNS = `white_label_id, merchant_id, livemode, delivery_id, endpoint_id, event_id, event_type, event_created_at, status,
  failure_reason, round, round_attempts, attempt_count, resend, resend_requested, next_attempt_at, leased_by, lease_expires_at,
  last_attempt_at, last_http_status, last_error, created_at, updated_at, completed_at`;

const ATTEMPT_COLUMNS = `white_label_id, delivery_id, attempt_sequence, endpoint_id, event_id, round, attempt, resend, kid, status,
  http_status, error, started_at, duration_ms, next_attempt_at, created_at`;

/**
 * The instant a delivery row counts as "now": its sandbox test clock's frozen time when it has one
 * (migration 0017), else the real instant of the parameter. A clock delivery's schedule is kept in its
 * clock's time, so only advancing the clock makes its retries due. Reading `test_clocks` here is the
 * second documented exception to the module boundary (after the outbox): the due check belongs in the
 * one claim statement.
 */
function deliveryNow(alias: string, parameter: string): string {
  return `coalesce((SELECT c.frozen_time FROM test_clocks c WHERE c.white_label_id = ${alias}.white_label_id AND c.test_clock_id = ${alias}.test_clock_id), ${parameter}::timestamptz)`;
}

// ---------------------------------------------------------------------------------------------
// Dispatch: leases, attempts, completion

const RETRY_DELAYS_PARAMETER = [...RETRY_DELAYS_MS];

// Instants inside array parameters are sent as ISO text: both drivers serialise a Date in a plain
// parameter, but an array element is turned into text by each driver in its own way.

/**
 * Recovers attempts whose dispatcher vanished (crash, frozen process): the lease ran out before the
 * answer was recorded. Each becomes a `lost` attempt row (the receiver may or may not have seen it),
 * and the delivery continues on the schedule as after a failure, or ends when that was attempt 11.
 * A resend asked for during the lost attempt starts its round now. Returns how many were recovered.
 */
export async function recoverExpiredLeases(db: Queryable, now: Date, limit: number): Promise<number> {
  const { rows } = await db.query<{ delivery_id: string }>(
    `WITH expired AS (
       SELECT white_label_id, delivery_id, endpoint_id, event_id, status, round, round_attempts, attempt_count, resend,
              resend_requested, last_attempt_at, test_clock_id
         FROM webhook_deliveries
        WHERE leased_by IS NOT NULL AND lease_expires_at <= $1
        ORDER BY lease_expires_at
        LIMIT $2
          FOR UPDATE SKIP LOCKED
     ),
     recovered AS (
       UPDATE webhook_deliveries d
          SET leased_by = NULL, lease_expires_at = NULL, updated_at = $1, last_http_status = NULL, last_error = 'lost',
              status = CASE WHEN e.status <> 'pending' THEN e.status
                            WHEN e.resend_requested OR e.round_attempts < $4 THEN 'pending' ELSE 'failed' END,
              failure_reason = CASE WHEN e.status = 'pending' AND NOT e.resend_requested AND e.round_attempts >= $4
                                    THEN 'attempts_exhausted' ELSE d.failure_reason END,
              completed_at = CASE WHEN e.status = 'pending' AND NOT e.resend_requested AND e.round_attempts >= $4
                                  THEN $1 ELSE d.completed_at END,
              next_attempt_at = CASE WHEN e.status <> 'pending' THEN NULL
                                     WHEN e.resend_requested THEN ${deliveryNow('e', '$1')}
                                     WHEN e.round_attempts >= $4 THEN NULL
                                     -- A test clock's schedule stays in its clock's time (last_attempt_at is clock time).
                                     WHEN e.test_clock_id IS NOT NULL
                                     THEN e.last_attempt_at + ($3::double precision[])[e.round_attempts] * interval '1 millisecond'
                                     ELSE greatest($1, e.last_attempt_at
                                                       + ($3::double precision[])[e.round_attempts] * interval '1 millisecond') END,
              round = CASE WHEN e.status = 'pending' AND e.resend_requested THEN e.round + 1 ELSE e.round END,
              round_attempts = CASE WHEN e.status = 'pending' AND e.resend_requested THEN 0 ELSE e.round_attempts END,
              resend = CASE WHEN e.status = 'pending' AND e.resend_requested THEN true ELSE e.resend END,
              resend_requested = false
         FROM expired e
        WHERE d.white_label_id = e.white_label_id AND d.delivery_id = e.delivery_id
       RETURNING d.white_label_id, d.delivery_id, d.next_attempt_at
     )
     INSERT INTO webhook_delivery_attempts (${ATTEMPT_COLUMNS})
     SELECT e.white_label_id, e.delivery_id, e.attempt_count, e.endpoint_id, e.event_id, e.round, greatest(e.round_attempts, 1), e.resend,
            NULL, 'lost', NULL, 'lost', e.last_attempt_at, NULL,
            CASE WHEN e.resend_requested THEN NULL ELSE r.next_attempt_at END, $1
       FROM expired e JOIN recovered r ON r.white_label_id = e.white_label_id AND r.delivery_id = e.delivery_id
     ON CONFLICT (white_label_id, delivery_id, attempt_sequence) DO NOTHING
     RETURNING delivery_id`,
    [now, limit, RETRY_DELAYS_PARAMETER, MAX_ATTEMPTS],
  );
  return rows.length;
}

/** A delivery claimed for one attempt, with what the attempt sends. */
export interface ClaimedDelivery {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  round: number;
  /** X-PG-Attempt of this attempt (already counted). */
  round_attempts: number;
  /** The fence of this claim. */
  attempt_count: number;
  resend: boolean;
  url: string;
  /** The stored envelope text: the exact body of every attempt. */
  body: string;
  api_version: string;
  /**
   * The claim instant (the attempt's start on the service clock); for a test clock's delivery, the
   * instant it fell due on that clock, which the next attempt's wait counts from.
   */
  last_attempt_at: Date;
}

export interface ClaimInput {
  now: Date;
  /** Most attempts this claim may start. */
  limit: number;
  /** How many of the oldest due deliveries are considered for a fair pick across endpoints. */
  scan: number;
  /** Most attempts in flight to one endpoint, counted over every dispatcher's unexpired leases. */
  per_endpoint: number;
  /** Endpoints that answered nothing lately: one attempt at a time each, so a dead one holds one slot. */
  degraded_endpoint_ids: readonly string[];
  /** Endpoints that answered quickly lately: they may have `fast_per_endpoint` leases. */
  fast_endpoint_ids: readonly string[];
  fast_per_endpoint: number;
  worker_id: string;
  lease_ms: number;
}

/**
 * Claims due deliveries for one attempt each, in one statement. Endpoints already at their limit of
 * attempts in flight are left out before the scan, and among the oldest due deliveries at most the
 * free slots of each endpoint are taken (round robin: every endpoint's first before anyone's
 * second), so a slow endpoint's backlog cannot crowd out the others.
 * SKIP LOCKED plus the re-checked conditions make concurrent dispatchers claim disjoint rows, and a
 * leased row is never claimed again until its lease is cleared or recovered.
 *
 * A delivery of a sandbox test clock's event is due when its next_attempt_at is at or before its
 * clock's frozen_time, not the real instant; its attempt counts as made at that due time (clock time),
 * so that its retry schedule runs in the clock's time and an advance makes every retry due that would
 * have happened by then. The lease is real time like every other. The two kinds are read by two
 * ordered scans, each on its own partial index.
 */
export async function claimDeliveries(db: Queryable, input: ClaimInput): Promise<ClaimedDelivery[]> {
  const eligible = `d.leased_by IS NULL AND d.round_attempts < $7
          AND NOT EXISTS (SELECT 1 FROM busy b WHERE b.endpoint_id = d.endpoint_id
                             AND b.in_flight >= CASE WHEN d.endpoint_id = ANY ($8::text[]) THEN 1
                                                     WHEN d.endpoint_id = ANY ($9::text[]) THEN $10 ELSE $4 END)`;
  const { rows } = await db.query<ClaimedDelivery>(
    `WITH busy AS (
       SELECT endpoint_id, count(*)::int AS in_flight
         FROM webhook_deliveries
        WHERE leased_by IS NOT NULL AND lease_expires_at > $1
        GROUP BY endpoint_id
     ),
     due AS (
       (SELECT d.white_label_id, d.delivery_id, d.endpoint_id, d.next_attempt_at
          FROM webhook_deliveries d
          JOIN webhook_endpoints w ON w.white_label_id = d.white_label_id AND w.endpoint_id = d.endpoint_id AND w.status = 'enabled'
         WHERE d.status = 'pending' AND d.test_clock_id IS NULL AND d.next_attempt_at <= $1 AND ${eligible}
         ORDER BY d.next_attempt_at
         LIMIT $3)
       UNION ALL
       (SELECT d.white_label_id, d.delivery_id, d.endpoint_id, d.next_attempt_at
          FROM webhook_deliveries d
          JOIN test_clocks c ON c.white_label_id = d.white_label_id AND c.test_clock_id = d.test_clock_id
          JOIN webhook_endpoints w ON w.white_label_id = d.white_label_id AND w.endpoint_id = d.endpoint_id AND w.status = 'enabled'
         WHERE d.status = 'pending' AND d.test_clock_id IS NOT NULL AND d.next_attempt_at <= c.frozen_time AND ${eligible}
         ORDER BY d.next_attempt_at
         LIMIT $3)
     ),
     ranked AS (
       SELECT due.*, row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt_at, due.delivery_id) AS rank
         FROM due
     ),
     chosen AS (
       SELECT r.white_label_id, r.delivery_id
         FROM ranked r LEFT JOIN busy b ON b.endpoint_id = r.endpoint_id
        WHERE r.rank + coalesce(b.in_flight, 0) <= CASE WHEN r.endpoint_id = ANY ($8::text[]) THEN 1
                                                         WHEN r.endpoint_id = ANY ($9::text[]) THEN $10 ELSE $4 END
        ORDER BY r.rank, r.next_attempt_at
        LIMIT $2
     ),
     locked AS (
       SELECT d.white_label_id, d.delivery_id
         FROM webhook_deliveries d
        WHERE (d.white_label_id, d.delivery_id) IN (SELECT white_label_id, delivery_id FROM chosen)
          AND d.status = 'pending' AND d.next_attempt_at <= ${deliveryNow('d', '$1')} AND d.leased_by IS NULL AND d.round_attempts < $7
          FOR UPDATE SKIP LOCKED
     ),
     claimed AS (
       UPDATE webhook_deliveries d
          SET leased_by = $5, lease_expires_at = $1::timestamptz + $6::double precision * interval '1 millisecond',
              attempt_count = d.attempt_count + 1, round_attempts = d.round_attempts + 1,
              last_attempt_at = CASE WHEN d.test_clock_id IS NULL THEN $1::timestamptz ELSE d.next_attempt_at END,
              updated_at = $1
         FROM locked l
        WHERE d.white_label_id = l.white_label_id AND d.delivery_id = l.delivery_id
       RETURNING d.white_label_id, d.merchant_id, d.livemode, d.delivery_id, d.endpoint_id, d.event_id, d.event_type, d.round,
                 d.round_attempts, d.attempt_count, d.resend, d.last_attempt_at
     )
     SELECT c.white_label_id, c.merchant_id, c.livemode, c.delivery_id, c.endpoint_id, c.event_id, c.event_type, c.round,
            c.round_attempts, c.attempt_count, c.resend, c.last_attempt_at, w.url, e.envelope::text AS body,
            e.envelope->>'api_version' AS api_version
       FROM claimed c
       JOIN webhook_endpoints w ON w.white_label_id = c.white_label_id AND w.endpoint_id = c.endpoint_id
       JOIN events e ON e.white_label_id = c.white_label_id AND e.event_id = c.event_id`,
    [
      input.now, input.limit, input.scan, input.per_endpoint, input.worker_id, input.lease_ms, MAX_ATTEMPTS,
      [...input.degraded_endpoint_ids], [...input.fast_endpoint_ids], input.fast_per_endpoint,
    ],
  );
  return rows;
}

/** What one finished attempt did to its delivery, decided by the dispatcher. */
export interface AttemptCompletion {
  white_label_id: string;
  delivery_id: string;
  /** The claim's fence. */
  attempt_count: number;
  endpoint_id: string;
  event_id: string;
  round: number;
  attempt: number;
  resend: boolean;
  kid: string | null;
  attempt_status: Exclude<AttemptStatus, 'lost'>;
  http_status: number | null;
  error: string | null;
  started_at: Date;
  duration_ms: number;
  /** The delivery's state after this attempt. */
  delivery_status: DeliveryStatus;
  failure_reason: FailureReason | null;
  next_attempt_at: Date | null;
}

/**
 * Records finished attempts in one statement: each delivery still leased by this dispatcher for this
 * very claim gets its new state and its attempt row; a claim that was recovered meanwhile (its lease
 * ran out) changes nothing, since its attempt is already recorded as lost. A delivery that left
 * pending meanwhile (its endpoint was disabled) keeps that state unless this attempt succeeded. A
 * resend asked for during the attempt starts a new round now. Returns the deliveries updated.
 */
export async function completeAttempts(db: Queryable, worker_id: string, now: Date, items: readonly AttemptCompletion[]): Promise<string[]> {
  if (items.length === 0) return [];
  const { rows } = await db.query<{ delivery_id: string }>(
    `WITH r AS (
       SELECT * FROM unnest($3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::int[], $9::int[], $10::boolean[], $11::text[],
                            $12::text[], $13::int[], $14::text[], $15::timestamptz[], $16::int[], $17::text[], $18::text[], $19::timestamptz[])
         AS r(white_label_id, delivery_id, attempt_count, endpoint_id, event_id, round, attempt, resend, kid,
              attempt_status, http_status, error, started_at, duration_ms, delivery_status, failure_reason, next_attempt_at)
     ),
     updated AS (
       UPDATE webhook_deliveries d
          SET status = CASE WHEN d.status = 'pending' AND d.resend_requested THEN 'pending'
                            WHEN d.status = 'pending' OR r.delivery_status = 'succeeded' THEN r.delivery_status
                            ELSE d.status END,
              failure_reason = CASE WHEN d.status = 'pending' AND d.resend_requested THEN NULL
                                    WHEN d.status = 'pending' OR r.delivery_status = 'succeeded' THEN r.failure_reason
                                    ELSE d.failure_reason END,
              next_attempt_at = CASE WHEN d.status = 'pending' AND d.resend_requested THEN ${deliveryNow('d', '$2')}
                                     WHEN d.status = 'pending' OR r.delivery_status = 'succeeded' THEN r.next_attempt_at
                                     ELSE d.next_attempt_at END,
              completed_at = CASE WHEN d.status = 'pending' AND d.resend_requested THEN NULL
                                  WHEN d.status = 'pending' OR r.delivery_status = 'succeeded'
                                  THEN (CASE WHEN r.delivery_status = 'pending' THEN NULL ELSE $2 END)
                                  ELSE d.completed_at END,
              round = CASE WHEN d.status = 'pending' AND d.resend_requested THEN d.round + 1 ELSE d.round END,
              round_attempts = CASE WHEN d.status = 'pending' AND d.resend_requested THEN 0 ELSE d.round_attempts END,
              resend = CASE WHEN d.status = 'pending' AND d.resend_requested THEN true ELSE d.resend END,
              resend_requested = false,
              leased_by = NULL, lease_expires_at = NULL,
              last_http_status = r.http_status, last_error = r.error, updated_at = $2
         FROM r
        WHERE d.white_label_id = r.white_label_id AND d.delivery_id = r.delivery_id
          AND d.leased_by = $1 AND d.attempt_count = r.attempt_count
       RETURNING d.white_label_id, d.delivery_id, d.status, d.round, d.next_attempt_at
     )
     INSERT INTO webhook_delivery_attempts (${ATTEMPT_COLUMNS})
     SELECT r.white_label_id, r.delivery_id, r.attempt_count, r.endpoint_id, r.event_id, r.round, r.attempt, r.resend, r.kid,
            r.attempt_status, r.http_status, r.error, r.started_at, r.duration_ms,
            CASE WHEN u.round = r.round THEN u.next_attempt_at ELSE NULL END, $2
       FROM r JOIN updated u ON u.white_label_id = r.white_label_id AND u.delivery_id = r.delivery_id
     RETURNING delivery_id`,
    [
      worker_id,
      now,
      items.map((item) => item.white_label_id),
      items.map((item) => item.delivery_id),
      items.map((item) => item.attempt_count),
      items.map((item) => item.endpoint_id),
      items.map((item) => item.event_id),
      items.map((item) => item.round),
      items.map((item) => item.attempt),
      items.map((item) => item.resend),
      items.map((item) => item.kid),
      items.map((item) => item.attempt_status),
      items.map((item) => item.http_status),
      items.map((item) => item.error),
      items.map((item) => item.started_at.toISOString()),
      items.map((item) => item.duration_ms),
      items.map((item) => item.delivery_status),
      items.map((item) => item.failure_reason),
      items.map((item) => item.next_attempt_at?.toISOString() ?? null),
    ],
  );
  return rows.map((row) => row.delivery_id);
}

// ---------------------------------------------------------------------------------------------
// Back office: deliveries, attempts, resend and replay

export interface DeliveryListFilter {
  white_label_id: string;
  endpoint_id: string;
  status: DeliveryStatus | null;
  event_id: string | null;
  /** Exclusive: deliveries with a smaller id (newest first). */
  starting_after: string | null;
  limit: number;
}

export async function listDeliveries(db: Queryable, filter: DeliveryListFilter): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
      WHERE white_label_id = $1 AND endpoint_id = $2
        AND ($3::text IS NULL OR status = $3)
        AND ($4::text IS NULL OR event_id = $4)
        AND ($5::text IS NULL OR delivery_id < $5)
      ORDER BY delivery_id DESC
      LIMIT $6`,
    [filter.white_label_id, filter.endpoint_id, filter.status, filter.event_id, filter.starting_after, filter.limit],
  );
  return rows;
}

export async function findDelivery(db: Queryable, white_label_id: string, endpoint_id: string, delivery_id: string): Promise<DeliveryRow | null> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
      WHERE white_label_id = $1 AND endpoint_id = $2 AND delivery_id = $3`,
    [white_label_id, endpoint_id, delivery_id],
  );
  return rows[0] ?? null;
}

export async function listAttempts(db: Queryable, white_label_id: string, delivery_id: string): Promise<AttemptRow[]> {
  const { rows } = await db.query<AttemptRow>(
    `SELECT ${ATTEMPT_COLUMNS} FROM webhook_delivery_attempts
      WHERE white_label_id = $1 AND delivery_id = $2
      ORDER BY attempt_sequence`,
    [white_label_id, delivery_id],
  );
  return rows;
}

/**
 * Starts a new round of one delivery now (a resend). A delivery with an attempt in flight only gets
 * `resend_requested`, and its round starts when that attempt ends, so that two attempts of one
 * delivery never overlap.
 */
export async function rearmDelivery(tx: Queryable, white_label_id: string, delivery_id: string, now: Date): Promise<DeliveryRow | null> {
  const { rows } = await tx.query<DeliveryRow>(
    `UPDATE webhook_deliveries d
        SET resend_requested = (leased_by IS NOT NULL),
            status = CASE WHEN leased_by IS NULL THEN 'pending' ELSE status END,
            failure_reason = CASE WHEN leased_by IS NULL THEN NULL ELSE failure_reason END,
            next_attempt_at = CASE WHEN leased_by IS NULL THEN ${deliveryNow('d', '$3')} ELSE next_attempt_at END,
            completed_at = CASE WHEN leased_by IS NULL THEN NULL ELSE completed_at END,
            round = CASE WHEN leased_by IS NULL THEN round + 1 ELSE round END,
            round_attempts = CASE WHEN leased_by IS NULL THEN 0 ELSE round_attempts END,
            resend = CASE WHEN leased_by IS NULL THEN true ELSE resend END,
            updated_at = $3
      WHERE white_label_id = $1 AND delivery_id = $2
     RETURNING ${DELIVERY_COLUMNS}`,
    [white_label_id, delivery_id, now],
  );
  return rows[0] ?? null;
}

export interface ReplayFilter {
  white_label_id: string;
  endpoint_id: string;
  /** Null: every type. */
  event_types: string[] | null;
  created_after: Date;
  created_before: Date;
  only_failed: boolean;
  limit: number;
}

/**
 * Starts a new round now for the endpoint's finished deliveries whose event matches the filter
 * (failed ones only, or failed and succeeded). Pending deliveries are already on their way and are
 * left alone. Returns the ids, oldest event first.
 */
export async function rearmDeliveries(tx: Queryable, filter: ReplayFilter, now: Date): Promise<string[]> {
  const { rows } = await tx.query<{ delivery_id: string }>(
    `WITH chosen AS (
       SELECT white_label_id, delivery_id FROM webhook_deliveries
        WHERE white_label_id = $1 AND endpoint_id = $2
          AND event_created_at >= $3 AND event_created_at < $4
          AND ($5::text[] IS NULL OR event_type = ANY ($5::text[]))
          AND (status = 'failed' OR (NOT $6::boolean AND status = 'succeeded'))
          AND leased_by IS NULL
        ORDER BY event_created_at, delivery_id
        LIMIT $7
          FOR UPDATE
     )
     UPDATE webhook_deliveries d
        SET status = 'pending', failure_reason = NULL, next_attempt_at = ${deliveryNow('d', '$8')}, completed_at = NULL, round = d.round + 1,
            round_attempts = 0, resend = true, resend_requested = false, updated_at = $8
       FROM chosen c
      WHERE d.white_label_id = c.white_label_id AND d.delivery_id = c.delivery_id
     RETURNING d.delivery_id`,
    [filter.white_label_id, filter.endpoint_id, filter.created_after, filter.created_before, filter.event_types, filter.only_failed, filter.limit, now],
  );
  return rows.map((row) => row.delivery_id);
}

/**
 * Ends every pending delivery of an endpoint that stopped receiving (disabled or deleted). An attempt
 * in flight keeps its lease and records its answer when it ends; a resend asked for meanwhile is
 * dropped with it.
 */
export async function failPendingDeliveries(
  tx: Queryable,
  white_label_id: string,
  endpoint_id: string,
  reason: FailureReason,
  now: Date,
): Promise<number> {
  const result = await tx.query(
    `UPDATE webhook_deliveries
        SET status = 'failed', failure_reason = $3, next_attempt_at = NULL, resend_requested = false,
            completed_at = $4, updated_at = $4
      WHERE white_label_id = $1 AND endpoint_id = $2 AND status = 'pending'`,
    [white_label_id, endpoint_id, reason, now],
  );
  return result.rowCount;
}

/**
 * Housekeeping: deletes finished deliveries (with their attempts) completed before `before`, oldest first, at most
 * `limit`: a range of webhook_deliveries_finished (migration 0048), so a round reads what it deletes and no more.
 */
export async function deleteFinishedDeliveriesBefore(db: Queryable, before: Date, limit: number): Promise<number> {
  const { rows } = await db.query<{ delivery_id: string }>(
    `WITH old AS (
       SELECT white_label_id, delivery_id FROM webhook_deliveries
        WHERE status <> 'pending' AND leased_by IS NULL AND completed_at < $1
        ORDER BY completed_at LIMIT $2
     ),
     attempts AS (
       DELETE FROM webhook_delivery_attempts a USING old
        WHERE a.white_label_id = old.white_label_id AND a.delivery_id = old.delivery_id
     )
     DELETE FROM webhook_deliveries d USING old
      WHERE d.white_label_id = old.white_label_id AND d.delivery_id = old.delivery_id
     RETURNING d.delivery_id`,
    [before, limit],
  );
  return rows.length;
}

/**
 * Deliveries whose next attempt is due and that no dispatcher has taken yet, oldest first, counted up to `limit`:
 * the dispatcher's backlog for the operations gauges. A delivery waiting out its retry delay is not due, so an
 * endpoint that is down does not raise it; a dispatcher that falls behind does. Test clocks' deliveries wait
 * for their clock and are left out.
 */
export async function readDueDeliveryBacklog(db: Queryable, now: Date, limit: number): Promise<Backlog> {
  const { rows } = await db.query<{ count: number; oldest_at: Date | null }>(
    `SELECT count(*)::int AS count, min(next_attempt_at) AS oldest_at
       FROM (SELECT next_attempt_at FROM webhook_deliveries
              WHERE status = 'pending' AND test_clock_id IS NULL AND next_attempt_at <= $1::timestamptz
              ORDER BY next_attempt_at LIMIT $2) due`,
    [now, limit],
  );
  return backlogOf(rows[0]);
}
