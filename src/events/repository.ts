import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { deferWrite } from '../platform/unit-of-work.ts';
import { appendParts, type ReadPart } from '../platform/read-part.ts';

/** All SQL of the events module: the outbox table and the per-merchant sequence counter. */

export interface EventRow {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  event_id: string;
  sequence: number;
  type: string;
  object_type: string;
  object_id: string | null;
  object_status: string | null;
  created_at: Date;
  envelope: Record<string, unknown>;
}

/**
 * Locks the event feeds of several merchants of one brand and environment, in merchant-id order,
 * creating any that do not exist yet. Taken first, this fixes one lock order for transactions that
 * write events for several merchants (a deposit reserving or filling other merchants' withdrawals).
 * The statement carries reads other modules own (src/platform/read-part.ts), answered in their order;
 * with no feed to lock, they are read alone.
 *
 * The carried reads run once every feed is locked: the feeds' upsert is a CTE that an aggregate in the
 * outer FROM reads whole before the outer select projects its one row, and the carried reads are
 * uncorrelated scalar subqueries, which PostgreSQL runs when the projection first needs them. A carried
 * read may therefore lock rows that follow these merchants' feeds in the lock order (their wallets,
 * `LedgerService.walletsLockPart`).
 */
export async function lockFeeds<Carried>(
  db: Queryable,
  white_label_id: string,
  merchant_ids: readonly string[],
  livemode: boolean,
  carried: readonly ReadPart<Carried>[] = [],
): Promise<{ feeds: { merchant_id: string; last_sequence: number }[]; carried: Carried[] }> {
  const sorted = [...new Set(merchant_ids)].sort();
  if (sorted.length === 0 && carried.length === 0) return { feeds: [], carried: [] };
  const params: unknown[] = sorted.length === 0 ? [] : [white_label_id, sorted, livemode];
  // Each carried read is uncorrelated, so it runs once for the statement, not once per feed.
  const carriedColumns = appendParts(carried, params).map((sql, index) => `${sql} AS carried${index}`);
  if (sorted.length === 0) {
    const { rows } = await db.query<Record<string, unknown>>(`SELECT ${carriedColumns.join(', ')}`, params);
    return { feeds: [], carried: carried.map((part, index) => part.parse(rows[0]?.[`carried${index}`] ?? null)) };
  }
  // One statement; the rows are upserted, and so locked, in the order of the sorted array.
  const upsert = `INSERT INTO event_sequences AS s (white_label_id, merchant_id, livemode, last_sequence)
     SELECT $1, feed.merchant_id, $3, 0 FROM unnest($2::text[]) WITH ORDINALITY AS feed (merchant_id, position) ORDER BY feed.position
     ON CONFLICT (white_label_id, merchant_id, livemode) DO UPDATE SET last_sequence = s.last_sequence
     RETURNING merchant_id, last_sequence`;
  if (carried.length === 0) {
    const { rows } = await db.query<{ merchant_id: string; last_sequence: number }>(upsert, params);
    return { feeds: rows.map((row) => ({ merchant_id: row.merchant_id, last_sequence: row.last_sequence })), carried: [] };
  }
  const { rows } = await db.query<{ feeds: { merchant_id: string; last_sequence: number }[] } & Record<string, unknown>>(
    `WITH locked AS (${upsert})
     SELECT every_feed.feeds${carriedColumns.map((column) => `, ${column}`).join('')}
       FROM (SELECT json_agg(json_build_object('merchant_id', merchant_id, 'last_sequence', last_sequence)) AS feeds FROM locked) AS every_feed`,
    params,
  );
  const answered = rows[0];
  invariant(answered !== undefined && answered.feeds.length === sorted.length, 'every feed named is locked');
  return {
    feeds: answered.feeds.map((feed) => ({ merchant_id: feed.merchant_id, last_sequence: Number(feed.last_sequence) })),
    carried: carried.map((part, index) => part.parse(answered[`carried${index}`] ?? null)),
  };
}

/**
 * Queues an event whose sequence the transaction already knows (it holds the feed's lock), and the
 * feed's new last sequence: sent with the transaction's next statement (src/platform/unit-of-work.ts).
 * Only the last counter write of a feed stays in the queue.
 */
export async function deferEventWithSequence(db: Queryable, row: NewEventRow, sequence: number): Promise<void> {
  await deferWrite(db, {
    sql: `INSERT INTO events (white_label_id, merchant_id, livemode, event_id, sequence, type, object_type, object_id, object_status,
            created_at, envelope, test_clock_id)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::json, $12)`,
    params: [
      row.white_label_id, row.merchant_id, row.livemode, row.event_id, sequence, row.type, row.object_type, row.object_id,
      row.object_status, row.created_at, `${row.envelope_before_sequence}${sequence}${row.envelope_after_sequence}`, row.test_clock_id,
    ],
    expected_rows: 1,
  });
  await deferWrite(db, {
    sql: 'UPDATE event_sequences SET last_sequence = $4 WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3',
    params: [row.white_label_id, row.merchant_id, row.livemode, sequence],
    expected_rows: 1,
    replaces: `event_sequences:${row.white_label_id}:${row.merchant_id}:${row.livemode}`,
  });
}

/**
 * The envelope text of a new event, split around its sequence number, which only the database knows:
 * the stored text is `before_sequence` + the number + `after_sequence`.
 */
export interface NewEventRow extends Omit<EventRow, 'sequence' | 'envelope'> {
  /** The sandbox test clock the event was written under (its merchant's own clock); null in real time. */
  test_clock_id: string | null;
  envelope_before_sequence: string;
  envelope_after_sequence: string;
}

/**
 * Writes an event with the next sequence number of its (merchant, livemode) feed, in one round trip,
 * and returns that number. The row lock taken by the sequence upsert serialises event writers of one
 * merchant until their transaction ends, which is what makes the sequence strictly increasing in
 * commit order as well as in number.
 */
export async function insertEventWithNextSequence(db: Queryable, row: NewEventRow): Promise<number> {
  const { rows } = await db.query<{ sequence: number }>(
    `WITH next AS (
       INSERT INTO event_sequences AS s (white_label_id, merchant_id, livemode, last_sequence) VALUES ($1, $2, $3, 1)
       ON CONFLICT (white_label_id, merchant_id, livemode) DO UPDATE SET last_sequence = s.last_sequence + 1
       RETURNING last_sequence
     )
     INSERT INTO events (white_label_id, merchant_id, livemode, event_id, sequence, type, object_type, object_id, object_status,
       created_at, envelope, test_clock_id)
     SELECT $1, $2, $3, $4, next.last_sequence, $5, $6, $7, $8, $9, ($10::text || next.last_sequence::text || $11::text)::json, $12
       FROM next
     RETURNING sequence`,
    [
      row.white_label_id, row.merchant_id, row.livemode, row.event_id, row.type, row.object_type, row.object_id, row.object_status,
      row.created_at, row.envelope_before_sequence, row.envelope_after_sequence, row.test_clock_id,
    ],
  );
  const written = rows[0];
  if (!written) throw new Error('event insert returned no row');
  return written.sequence;
}

export interface EventListFilter {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  /** Exclusive lower bound of sequence. */
  after_sequence: number;
  /** Exclusive upper bound of sequence, used when paging in descending order. */
  before_sequence: number | null;
  type: string | null;
  object_status: string | null;
  created_from: Date | null;
  created_to: Date | null;
  descending: boolean;
  limit: number;
}

/** The statement's sequence range, both bounds exclusive: the service's scan window within the filter's bounds. */
export interface EventRange {
  after_sequence: number;
  before_sequence: number;
}

/**
 * The window is read by a subquery with its own ORDER BY and LIMIT, which the planner cannot merge into the
 * filters: it reads the window's rows from `events_pkey` in key order and stops when the page is full. Written as
 * one WHERE clause, the planner estimated the big merchant's first window at millions of rows (the small feeds'
 * sequence numbers are the same low numbers), judged a rare `status` unable to fill the page early, and read all
 * 21 million events in parallel for 63 s on the grown month. Two texts, one per direction, rather than
 * `ORDER BY CASE WHEN ...`, whose generic plan (what a named statement may switch to) sorted every row it read.
 */
function listEventsStatement(direction: 'ASC' | 'DESC'): string {
  return `SELECT * FROM (
      SELECT * FROM events
       WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND sequence > $4 AND sequence < $5
       ORDER BY sequence ${direction}
       LIMIT $11) AS scan_window
      WHERE ($6::text IS NULL OR type = $6)
        AND ($7::text IS NULL OR object_status = $7)
        AND ($8::timestamptz IS NULL OR created_at >= $8)
        AND ($9::timestamptz IS NULL OR created_at < $9)
      ORDER BY sequence ${direction}
      LIMIT $10`;
}
const LIST_EVENTS_ASCENDING = listEventsStatement('ASC');
const LIST_EVENTS_DESCENDING = listEventsStatement('DESC');

/** The two texts, for the test that reads their generic plans. */
export const LIST_EVENTS_STATEMENTS = { ascending: LIST_EVENTS_ASCENDING, descending: LIST_EVENTS_DESCENDING };

export async function listEvents(db: Queryable, filter: EventListFilter, range: EventRange): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(filter.descending ? LIST_EVENTS_DESCENDING : LIST_EVENTS_ASCENDING, [
    filter.white_label_id, filter.merchant_id, filter.livemode, range.after_sequence, range.before_sequence,
    filter.type, filter.object_status, filter.created_from, filter.created_to, filter.limit,
    // An empty range (since_sequence at or past the cursor, descending) reads nothing: LIMIT must not be negative.
    Math.max(0, range.before_sequence - range.after_sequence - 1),
  ]);
  return rows;
}

/** The last sequence number a feed has handed out (0 for a feed without events). */
export async function feedHead(db: Queryable, white_label_id: string, merchant_id: string, livemode: boolean): Promise<number> {
  const { rows } = await db.query<{ last_sequence: string | number }>(
    'SELECT last_sequence FROM event_sequences WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3',
    [white_label_id, merchant_id, livemode],
  );
  return Number(rows[0]?.last_sequence ?? 0);
}

/**
 * One key of an object as its event of `version` showed it (`data.object`), by the `events_object` index;
 * `found` false when no event of that version is stored, and `value` null when the event had no such key.
 */
export async function objectKeyAtVersion(
  db: Queryable,
  white_label_id: string,
  object_id: string,
  version: number,
  key: string,
): Promise<{ found: boolean; value: unknown }> {
  const { rows } = await db.query<{ value: unknown }>(
    `SELECT envelope -> 'data' -> 'object' -> $4::text AS value
       FROM events
      WHERE white_label_id = $1 AND object_id = $2 AND envelope -> 'data' -> 'object' ->> 'version' = $3::text
      LIMIT 1`,
    [white_label_id, object_id, String(version), key],
  );
  const row = rows[0];
  return row ? { found: true, value: row.value ?? null } : { found: false, value: null };
}

/** One stored event of a feed, with its envelope exactly as stored (the bytes every delivery sends). */
export interface StoredEventText {
  event_id: string;
  sequence: number;
  type: string;
  livemode: boolean;
  api_version: string;
  text: string;
}

/** An event of one feed by id, its envelope as text; null when the feed has no such event. */
export async function findEventText(db: Queryable, feed: { white_label_id: string; merchant_id: string; livemode: boolean }, event_id: string): Promise<StoredEventText | null> {
  const { rows } = await db.query<StoredEventText>(
    `SELECT event_id, sequence, type, livemode, envelope->>'api_version' AS api_version, envelope::text AS text
       FROM events
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND event_id = $4`,
    [feed.white_label_id, feed.merchant_id, feed.livemode, event_id],
  );
  return rows[0] ?? null;
}

/**
 * The test clock an object was created under: the clock of its `*.created` event (else of its first
 * event in feed order), or null when that event was written in real time or the object has none in this
 * brand. Not by created_at: an object's later events may be written in real time, before its clock's time.
 */
export async function testClockOfObject(db: Queryable, white_label_id: string, object_id: string): Promise<string | null> {
  const { rows } = await db.query<{ test_clock_id: string | null }>(
    `SELECT test_clock_id FROM events
      WHERE white_label_id = $1 AND object_id = $2
      ORDER BY (type LIKE '%.created') DESC, sequence
      LIMIT 1`,
    [white_label_id, object_id],
  );
  return rows[0]?.test_clock_id ?? null;
}

/** One event of an object's timeline: what the back office's order page lists, without the envelope. */
export interface TimelineEventRow {
  event_id: string;
  type: string;
  object_status: string | null;
  livemode: boolean;
  created_at: Date;
}

/** An object's events in the order they were written, at most `limit`, by the `events_object` index. */
export async function timelineOfObject(db: Queryable, white_label_id: string, object_id: string, limit: number): Promise<TimelineEventRow[]> {
  const { rows } = await db.query<TimelineEventRow>(
    `SELECT event_id, type, object_status, livemode, created_at FROM events
      WHERE white_label_id = $1 AND object_id = $2 ORDER BY created_at, sequence LIMIT $3`,
    [white_label_id, object_id, limit],
  );
  return rows;
}
