import type { Queryable } from '../platform/db.ts';
import type { EndpointRow } from './types.ts';
import { UNSUBSCRIBABLE_EVENT_TYPES } from './types.ts';

/**
 * The SQL of the fan-out, from the outbox to deliveries: each feed's cursor (`webhook_feed_cursors`),
 * the (event, endpoint) pairs of a feed's new events, and the pending deliveries made of them. Every
 * instant is a parameter from the injected clock, never now(); instants inside array parameters are
 * sent as ISO text, for the reason given in delivery-repository.ts.
 *
 * The reads here touch the events module's outbox (`events`, `event_sequences`), read only: the
 * fan-out reads a feed's head and its new events, and a full replay reads the events that have no
 * delivery yet. They belong behind the events service once it offers them.
 */

export interface FeedKey {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

/**
 * Creates a feed's cursor at the feed's current head, so that a new endpoint receives the events
 * written from now on. An existing cursor is left where it is.
 */
export async function ensureFeedCursor(tx: Queryable, feed: FeedKey, now: Date): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_feed_cursors (white_label_id, merchant_id, livemode, last_sequence, updated_at)
     SELECT $1, $2, $3, coalesce((SELECT last_sequence FROM event_sequences
                                   WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3), 0), $4
     ON CONFLICT (white_label_id, merchant_id, livemode) DO NOTHING`,
    [feed.white_label_id, feed.merchant_id, feed.livemode, now],
  );
}

/** Feeds whose head is past their cursor: they have events without deliveries yet. */
export async function feedsBehind(db: Queryable, limit: number): Promise<FeedKey[]> {
  const { rows } = await db.query<FeedKey>(
    `SELECT c.white_label_id, c.merchant_id, c.livemode
       FROM webhook_feed_cursors c
       JOIN event_sequences s ON s.white_label_id = c.white_label_id AND s.merchant_id = c.merchant_id AND s.livemode = c.livemode
      WHERE s.last_sequence > c.last_sequence
      LIMIT $1`,
    [limit],
  );
  return rows;
}

/**
 * Locks a feed's cursor for this fan-out and reads it with the feed's committed head; null when
 * another process is fanning the feed out right now. The head is read after the lock: the writer of
 * sequence n holds the sequence row until it commits, so every event up to a committed head exists.
 */
export async function lockFeed(tx: Queryable, feed: FeedKey): Promise<{ last_sequence: number; head: number } | null> {
  const { rows } = await tx.query<{ last_sequence: number; head: number }>(
    `SELECT c.last_sequence,
            coalesce((SELECT s.last_sequence FROM event_sequences s
                       WHERE s.white_label_id = c.white_label_id AND s.merchant_id = c.merchant_id AND s.livemode = c.livemode), 0) AS head
       FROM webhook_feed_cursors c
      WHERE c.white_label_id = $1 AND c.merchant_id = $2 AND c.livemode = $3
        FOR UPDATE SKIP LOCKED`,
    [feed.white_label_id, feed.merchant_id, feed.livemode],
  );
  return rows[0] ?? null;
}

export interface FanoutPair {
  event_id: string;
  event_type: string;
  event_created_at: Date;
  endpoint_id: string;
  /** The test clock the event was written under; its delivery is due by that clock's time. */
  test_clock_id: string | null;
}

/**
 * The (event, endpoint) pairs of a feed's events in (after, upto]: enabled endpoints of the same
 * merchant and environment subscribed to the type, plus every enabled endpoint for the five types
 * that cannot be turned off.
 */
export async function fanoutPairs(tx: Queryable, feed: FeedKey, after: number, upto: number): Promise<FanoutPair[]> {
  const { rows } = await tx.query<FanoutPair>(
    `SELECT e.event_id, e.type AS event_type, e.created_at AS event_created_at, w.endpoint_id, e.test_clock_id
       FROM events e
       JOIN webhook_endpoints w
         ON w.white_label_id = e.white_label_id AND w.merchant_id = e.merchant_id AND w.livemode = e.livemode
        AND w.status = 'enabled'
        AND (w.event_types IS NULL OR e.type = ANY (w.event_types) OR e.type = ANY ($6::text[]))
      WHERE e.white_label_id = $1 AND e.merchant_id = $2 AND e.livemode = $3 AND e.sequence > $4 AND e.sequence <= $5
      ORDER BY e.sequence, w.endpoint_id`,
    [feed.white_label_id, feed.merchant_id, feed.livemode, after, upto, [...UNSUBSCRIBABLE_EVENT_TYPES]],
  );
  return rows;
}

export interface NewDelivery extends FanoutPair {
  delivery_id: string;
}

/**
 * Inserts pending deliveries due at `now`; a pair that already has its delivery is skipped, which
 * makes a repeated fan-out harmless. Returns how many were inserted. A test clock's event is due in
 * its clock's time: at the event's own instant when fanned out, and at the clock's frozen time when a
 * replay made after the clock moved on sends it again (a resend happens at the clock's now).
 */
export async function insertDeliveries(tx: Queryable, feed: FeedKey, deliveries: readonly NewDelivery[], resend: boolean, now: Date): Promise<number> {
  if (deliveries.length === 0) return 0;
  const result = await tx.query(
    `INSERT INTO webhook_deliveries (white_label_id, merchant_id, livemode, delivery_id, endpoint_id, event_id, event_type, event_created_at,
       status, failure_reason, round, round_attempts, attempt_count, resend, resend_requested, next_attempt_at, leased_by, lease_expires_at,
       last_attempt_at, last_http_status, last_error, created_at, updated_at, completed_at, test_clock_id)
     SELECT $1, $2, $3, d.delivery_id, d.endpoint_id, d.event_id, d.event_type, d.event_created_at,
            'pending', NULL, 1, 0, 0, $8,
            false,
            CASE WHEN d.test_clock_id IS NULL THEN $9::timestamptz
                 WHEN NOT $8::boolean THEN d.event_created_at
                 ELSE greatest(d.event_created_at, coalesce((SELECT c.frozen_time FROM test_clocks c
                                                              WHERE c.white_label_id = $1 AND c.test_clock_id = d.test_clock_id), d.event_created_at)) END,
            NULL, NULL, NULL, NULL, NULL, $9, $9, NULL, d.test_clock_id
       FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $10::timestamptz[], $11::text[])
            AS d(delivery_id, endpoint_id, event_id, event_type, event_created_at, test_clock_id)
     ON CONFLICT (white_label_id, endpoint_id, event_id) DO NOTHING`,
    [
      feed.white_label_id, feed.merchant_id, feed.livemode,
      deliveries.map((item) => item.delivery_id),
      deliveries.map((item) => item.endpoint_id),
      deliveries.map((item) => item.event_id),
      deliveries.map((item) => item.event_type),
      resend,
      now,
      deliveries.map((item) => item.event_created_at.toISOString()),
      deliveries.map((item) => item.test_clock_id),
    ],
  );
  return result.rowCount;
}

export async function advanceFeedCursor(tx: Queryable, feed: FeedKey, last_sequence: number, now: Date): Promise<void> {
  await tx.query(
    `UPDATE webhook_feed_cursors SET last_sequence = $4, updated_at = $5
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND last_sequence < $4`,
    [feed.white_label_id, feed.merchant_id, feed.livemode, last_sequence, now],
  );
}

/**
 * Events of the endpoint's feed in the window that have no delivery to this endpoint yet (written
 * before the endpoint existed, or of a type it was not subscribed to then), for a full replay. Each keeps its
 * test clock, so that its delivery is due by that clock's time, as the fan-out's would have been.
 */
export async function eventsWithoutDelivery(
  tx: Queryable,
  endpoint: EndpointRow,
  event_types: string[] | null,
  created_after: Date,
  created_before: Date,
  limit: number,
): Promise<Omit<FanoutPair, 'endpoint_id'>[]> {
  const { rows } = await tx.query<Omit<FanoutPair, 'endpoint_id'>>(
    `SELECT e.event_id, e.type AS event_type, e.created_at AS event_created_at, e.test_clock_id
       FROM events e
      WHERE e.white_label_id = $1 AND e.merchant_id = $2 AND e.livemode = $3
        AND e.created_at >= $4 AND e.created_at < $5
        AND ($6::text[] IS NULL OR e.type = ANY ($6::text[]))
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d
                         WHERE d.white_label_id = e.white_label_id AND d.endpoint_id = $7 AND d.event_id = e.event_id)
      ORDER BY e.sequence
      LIMIT $8`,
    [endpoint.white_label_id, endpoint.merchant_id, endpoint.livemode, created_after, created_before, event_types, endpoint.endpoint_id, limit],
  );
  return rows;
}
