import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { fixed, log } from './support.ts';
import type { Templates } from './growth-fixture.ts';

/**
 * The SQL generator of bench/growth.ts: a month of a large brand's traffic, copied from template rows
 * the services wrote (bench/growth-fixture.ts makeTemplates), set-based (INSERT ... SELECT over
 * generate_series), in one session with synchronous_commit off.
 *
 * Every generated order is a copy of one template order (settled through its slip, in review, or
 * expired) with its own ids, merchant, references and times (every timestamptz column shifted by the
 * same interval), and with the template's legs, slip receipt, verified transfer and events. One order in
 * three is the big merchant's; the rest spread over the generated merchants. Each order also has the
 * withdrawal side of its fill on the same merchant's feed (a brand's merchants take deposits and pay
 * out): its leg reserved, then filled or released, copied from the fixture's own withdrawal events, so a
 * month holds about four events per order. Events get their merchant's next sequence numbers (a window
 * sum over the plan, so each feed has no gap), event_sequences holds each feed's last, and the big
 * merchant's events of the last 31 days have their succeeded webhook deliveries (the deliveries'
 * retention), its endpoint's feed cursor at the head.
 *
 * While the bulk loads, the loaded tables' keys, unique constraints, foreign keys and indexes are
 * dropped and then rebuilt from their own catalog definitions (pg_get_constraintdef, pg_get_indexdef),
 * which is how a bulk load builds the indexes the migrations define, by one sort each instead of
 * millions of random inserts. Nothing else about the schema changes.
 *
 * Not generated (documented in docs/benchmarks.md): the ledger history of the generated orders
 * (balance transactions and clearings; the copies name the template's balance transaction), the
 * withdrawal orders and legs behind the withdrawal events, the slip images (slip_blobs; the copies name
 * the template's blob), and the attempts of the generated deliveries.
 */

export interface GrowthPlan {
  deposits: number;
  merchants: number;
  /** One order in `settled_every` is settled through a slip (a fifth: 1,000,000 slips at scale 1). */
  settled_every: number;
  /** One order in `review_every` is in review, with its slip (10,000 at scale 1). */
  review_every: number;
  /** The month: orders spread evenly over [start, end). */
  start: Date;
  end: Date;
  big_merchant_id: string;
}

const LOADED_TABLES = ['deposit_orders', 'deposit_legs', 'slip_receipts', 'slip_transfers', 'events', 'webhook_deliveries', 'idempotency_records', 'jobs'];

interface Column {
  name: string;
  type: string;
}

async function columnsOf(client: pg.Client, table: string): Promise<Column[]> {
  const { rows } = await client.query<{ name: string; type: string }>(
    `SELECT column_name AS name, data_type AS type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
    [table],
  );
  return rows;
}

/**
 * `INSERT INTO table (every column) SELECT <expression per column> FROM <from>`: a column's override, or
 * for a timestamptz column the template's value moved by `shift`, or the template's value (alias t).
 */
async function copyRows(client: pg.Client, table: string, from: string, overrides: Record<string, string>, shift: string, params: unknown[] = []): Promise<number> {
  const columns = await columnsOf(client, table);
  const expressions = columns.map((column) => {
    const override = overrides[column.name];
    if (override !== undefined) return override;
    if (column.type === 'timestamp with time zone') return `t.${column.name} + ${shift}`;
    return `t.${column.name}`;
  });
  const started = performance.now();
  const result = await client.query(`INSERT INTO ${table} (${columns.map((column) => column.name).join(', ')}) SELECT ${expressions.join(', ')} FROM ${from}`, params);
  log(`generate: ${table} +${result.rowCount ?? 0} rows in ${fixed((performance.now() - started) / 1000, 1)} s`);
  return result.rowCount ?? 0;
}

/** The definitions of the loaded tables' constraints and indexes, to drop for the load and rebuild after. */
interface Definitions {
  foreign_keys: { table: string; name: string; definition: string }[];
  keys: { table: string; name: string; definition: string }[];
  indexes: { name: string; definition: string }[];
}

async function definitionsOf(client: pg.Client): Promise<Definitions> {
  const constraints = await client.query<{ table: string; name: string; definition: string; type: string }>(
    `SELECT c.conrelid::regclass::text AS table, c.conname AS name, pg_get_constraintdef(c.oid) AS definition, c.contype AS type
       FROM pg_constraint c
      WHERE c.contype IN ('p', 'u', 'f')
        AND (c.conrelid::regclass::text = ANY($1) OR (c.contype = 'f' AND c.confrelid::regclass::text = ANY($1)))
      ORDER BY c.conname`,
    [LOADED_TABLES],
  );
  const indexes = await client.query<{ name: string; definition: string }>(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition
       FROM pg_index i
      WHERE i.indrelid::regclass::text = ANY($1)
        AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u'))
      ORDER BY 1`,
    [LOADED_TABLES],
  );
  return {
    foreign_keys: constraints.rows.filter((row) => row.type === 'f'),
    keys: constraints.rows.filter((row) => row.type !== 'f'),
    indexes: indexes.rows,
  };
}

async function dropForLoad(client: pg.Client, definitions: Definitions): Promise<void> {
  for (const key of definitions.foreign_keys) await client.query(`ALTER TABLE ${key.table} DROP CONSTRAINT ${key.name}`);
  for (const key of definitions.keys) await client.query(`ALTER TABLE ${key.table} DROP CONSTRAINT ${key.name}`);
  for (const index of definitions.indexes) await client.query(`DROP INDEX ${index.name}`);
}

async function rebuildAfterLoad(client: pg.Client, definitions: Definitions): Promise<void> {
  const started = performance.now();
  for (const key of definitions.keys) await client.query(`ALTER TABLE ${key.table} ADD CONSTRAINT ${key.name} ${key.definition}`);
  for (const index of definitions.indexes) await client.query(index.definition);
  log(`generate: keys and ${definitions.indexes.length} indexes rebuilt in ${fixed((performance.now() - started) / 1000, 1)} s`);
  const checked = performance.now();
  for (const key of definitions.foreign_keys) await client.query(`ALTER TABLE ${key.table} ADD CONSTRAINT ${key.name} ${key.definition}`);
  log(`generate: ${definitions.foreign_keys.length} foreign keys added back (and checked) in ${fixed((performance.now() - checked) / 1000, 1)} s`);
}

/** The generated merchants (ids mch_g00001, ...), their wallets and feeds, copied from the template merchant. */
async function generateMerchants(client: pg.Client, plan: GrowthPlan, templates: Templates): Promise<void> {
  const from = `merchants t CROSS JOIN generate_series(1, $2::int) AS g(i) WHERE t.white_label_id = $1 AND t.merchant_id = $3`;
  await copyRows(client, 'merchants', from, { merchant_id: `'mch_g' || lpad(g.i::text, 5, '0')`, name: `'Generated merchant ' || g.i` }, `interval '0'`, [
    templates.merchant.white_label_id,
    plan.merchants,
    templates.merchant.merchant_id,
  ]);
  await client.query(
    `INSERT INTO wallets (white_label_id, merchant_id, livemode, available_minor, pending_clearing_minor, reserved_minor, last_sequence, created_at, updated_at)
     SELECT $1, 'mch_g' || lpad(g.i::text, 5, '0'), false, 0, 0, 0, 0, $3, $3 FROM generate_series(1, $2::int) AS g(i)`,
    [templates.merchant.white_label_id, plan.merchants, plan.start],
  );
}

/**
 * The plan: one row per generated order with its kind, merchant, time, the template it copies and the
 * sequence its first event follows in its merchant's feed.
 */
async function makePlan(client: pg.Client, plan: GrowthPlan, templates: Templates): Promise<void> {
  const started = performance.now();
  // The withdrawal side of each order, on the same merchant's feed (a brand's merchants take deposits and
  // pay out): its leg reserved, then filled (settled) or released (expired); one event of each type is copied.
  await client.query(
    `CREATE TEMP TABLE growth_side_events AS
     SELECT k.kind, k.position, e.*
       FROM (VALUES ('settled', 1, 'withdrawal.leg_reserved'), ('settled', 2, 'withdrawal.filled'),
                    ('expired', 1, 'withdrawal.leg_reserved'), ('expired', 2, 'withdrawal.leg_released'),
                    ('review', 1, 'withdrawal.leg_reserved')) AS k(kind, position, event_type)
       JOIN LATERAL (SELECT * FROM events x WHERE x.white_label_id = $1 AND x.type = k.event_type AND x.livemode = false ORDER BY x.sequence LIMIT 1) e ON true`,
    [templates.merchant.white_label_id],
  );
  const sides = await client.query<{ count: number }>('SELECT count(*)::int AS count FROM growth_side_events');
  if (sides.rows[0]?.count !== 5) throw new Error('the fixture has no withdrawal.leg_reserved, withdrawal.filled or withdrawal.leg_released event to copy');
  await client.query(
    `CREATE TEMP TABLE growth_templates AS
     SELECT kind, deposit_id,
            (SELECT count(*) FROM events e WHERE e.white_label_id = $1 AND e.merchant_id = $2 AND e.object_id = k.deposit_id)::int AS deposit_events,
            (SELECT count(*) FROM events e WHERE e.white_label_id = $1 AND e.merchant_id = $2 AND e.object_id = k.deposit_id)::int
              + (SELECT count(*) FROM growth_side_events s WHERE s.kind = k.kind)::int AS events
       FROM (VALUES ('settled', $3), ('review', $4), ('expired', $5)) AS k(kind, deposit_id)`,
    [templates.merchant.white_label_id, templates.merchant.merchant_id, templates.settled, templates.review, templates.expired],
  );
  const kinds = await client.query<{ kind: string; events: number }>('SELECT kind, events FROM growth_templates ORDER BY kind');
  log(`generate: events per template order: ${kinds.rows.map((row) => `${row.kind} ${row.events}`).join(', ')}`);
  await client.query(
    `CREATE TEMP TABLE growth_plan AS
     WITH orders AS (
       SELECT g.n,
              CASE WHEN g.n % $3 = 7 THEN 'review' WHEN g.n % $4 = 2 THEN 'settled' ELSE 'expired' END AS kind,
              CASE WHEN g.n % 3 = 0 THEN $5 ELSE 'mch_g' || lpad((1 + g.n % $6)::text, 5, '0') END AS merchant_id,
              $7::timestamptz + (g.n - 1) * (($8::timestamptz - $7::timestamptz) / $2) AS created_at
         FROM generate_series(1, $2::bigint) AS g(n)
     )
     SELECT o.n, o.kind, o.merchant_id, o.created_at, k.deposit_id AS template_id, k.events, k.deposit_events,
            o.created_at - d.created_at AS shift,
            coalesce(s.last_sequence, 0) + coalesce(sum(k.events) OVER (PARTITION BY o.merchant_id ORDER BY o.n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS event_base
       FROM orders o
       JOIN growth_templates k ON k.kind = o.kind
       JOIN deposit_orders d ON d.white_label_id = $1 AND d.deposit_id = k.deposit_id
       LEFT JOIN event_sequences s ON s.white_label_id = $1 AND s.merchant_id = o.merchant_id AND s.livemode = false`,
    [templates.merchant.white_label_id, plan.deposits, plan.review_every, plan.settled_every, plan.big_merchant_id, plan.merchants, plan.start, plan.end],
  );
  await client.query('CREATE INDEX ON growth_plan (template_id)');
  await client.query('ANALYZE growth_plan');
  log(`generate: plan of ${plan.deposits} orders in ${fixed((performance.now() - started) / 1000, 1)} s`);
}

const NEW_DEPOSIT_ID = `'dep_g' || p.n`;

async function generateOrders(client: pg.Client, templates: Templates): Promise<void> {
  const wl = templates.merchant.white_label_id;
  const from = `growth_plan p JOIN deposit_orders t ON t.white_label_id = $1 AND t.deposit_id = p.template_id`;
  await copyRows(
    client,
    'deposit_orders',
    from,
    {
      deposit_id: NEW_DEPOSIT_ID,
      merchant_id: 'p.merchant_id',
      merchant_reference: `'g-' || p.n`,
      end_user_ref: `'payer-g-' || (p.n % 400000)`,
      sender_account_hmac: `md5('sender' || (p.n % 400000))`,
      // The review queue orders by the text of review.opened_at: each copy opens its review at its own time.
      review: `CASE WHEN t.review IS NULL THEN NULL ELSE jsonb_set(t.review::jsonb, '{opened_at}', to_jsonb(to_char(((t.review->>'opened_at')::timestamptz + p.shift) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))::json END`,
    },
    'p.shift',
    [wl],
  );
  await copyRows(
    client,
    'deposit_legs',
    `growth_plan p JOIN deposit_legs t ON t.white_label_id = $1 AND t.deposit_id = p.template_id`,
    { deposit_id: NEW_DEPOSIT_ID, leg_ref: `'dleg_g' || p.n || '_' || t.sequence` },
    'p.shift',
    [wl],
  );
  await copyRows(
    client,
    'slip_receipts',
    `growth_plan p JOIN slip_receipts t ON t.white_label_id = $1 AND t.deposit_id = p.template_id`,
    {
      deposit_id: NEW_DEPOSIT_ID,
      merchant_id: 'p.merchant_id',
      receipt_id: `'rcpt_g' || p.n`,
      idempotency_key: `'g-' || p.n`,
      request_id: `'req_g' || p.n`,
      fingerprint: `md5('a' || p.n) || md5('b' || p.n)`,
    },
    'p.shift',
    [wl],
  );
  await copyRows(
    client,
    'slip_transfers',
    `growth_plan p JOIN slip_transfers t ON t.white_label_id = $1 AND t.deposit_id = p.template_id`,
    { deposit_id: NEW_DEPOSIT_ID, receipt_id: `'rcpt_g' || p.n`, trans_ref: `'GROWTH' || p.n` },
    'p.shift',
    [wl],
  );
}

/** A copied envelope: the event's id, its object's id, its merchant and its sequence replaced in the stored text. */
function envelopeCopy(event_id: string, object_id: string, sequence: string): string {
  return `replace(replace(replace(replace(t.envelope::text, t.event_id, ${event_id}), t.object_id, ${object_id}), t.merchant_id, p.merchant_id), '"sequence":' || t.sequence || ',', '"sequence":' || (${sequence}) || ',')::json`;
}

/** The events of each copied order, numbered in its merchant's feed, and each feed's last sequence. */
async function generateEvents(client: pg.Client, templates: Templates): Promise<void> {
  const wl = templates.merchant.white_label_id;
  await client.query(
    `CREATE TEMP TABLE growth_template_events AS
     SELECT e.*, row_number() OVER (PARTITION BY e.object_id ORDER BY e.sequence) AS position
       FROM events e WHERE e.white_label_id = $1 AND e.merchant_id = $2 AND e.object_id IN (SELECT deposit_id FROM growth_templates)`,
    [wl, templates.merchant.merchant_id],
  );
  await copyRows(
    client,
    'events',
    `growth_plan p JOIN growth_template_events t ON t.object_id = p.template_id`,
    {
      merchant_id: 'p.merchant_id',
      event_id: `'evt_g' || p.n || '_' || t.position`,
      sequence: 'p.event_base + t.position',
      object_id: NEW_DEPOSIT_ID,
      envelope: envelopeCopy(`'evt_g' || p.n || '_' || t.position`, NEW_DEPOSIT_ID, 'p.event_base + t.position'),
    },
    'p.shift',
  );
  await copyRows(
    client,
    'events',
    `growth_plan p JOIN growth_side_events t ON t.kind = p.kind`,
    {
      merchant_id: 'p.merchant_id',
      event_id: `'evt_g' || p.n || '_w' || t.position`,
      sequence: 'p.event_base + p.deposit_events + t.position',
      object_id: `'wdr_g' || p.n`,
      envelope: envelopeCopy(`'evt_g' || p.n || '_w' || t.position`, `'wdr_g' || p.n`, 'p.event_base + p.deposit_events + t.position'),
    },
    'p.shift',
  );
  await client.query(
    `INSERT INTO event_sequences (white_label_id, merchant_id, livemode, last_sequence)
     SELECT $1, merchant_id, false, max(event_base + events) FROM growth_plan GROUP BY merchant_id
     ON CONFLICT (white_label_id, merchant_id, livemode) DO UPDATE SET last_sequence = excluded.last_sequence`,
    [wl],
  );
}

/** The big merchant's deliveries of the deliveries' retention (31 days): all of its generated events, succeeded. */
async function generateDeliveries(client: pg.Client, plan: GrowthPlan, wl: string, endpoint_id: string): Promise<void> {
  const started = performance.now();
  const result = await client.query(
    `INSERT INTO webhook_deliveries (white_label_id, merchant_id, livemode, delivery_id, endpoint_id, event_id, event_type, event_created_at, status,
                                     failure_reason, round, round_attempts, attempt_count, resend, resend_requested, next_attempt_at, leased_by,
                                     lease_expires_at, last_attempt_at, last_http_status, last_error, created_at, updated_at, completed_at, test_clock_id)
     SELECT e.white_label_id, e.merchant_id, false, 'whd_g' || substr(e.event_id, 6), $3, e.event_id, e.type, e.created_at, 'succeeded',
            NULL, 1, 1, 1, false, false, NULL, NULL, NULL, e.created_at + interval '40 milliseconds', 200, NULL,
            e.created_at, e.created_at + interval '40 milliseconds', e.created_at + interval '40 milliseconds', NULL
       FROM events e
      WHERE e.white_label_id = $1 AND e.merchant_id = $2 AND e.livemode = false AND e.event_id LIKE 'evt\\_g%'`,
    [wl, plan.big_merchant_id, endpoint_id],
  );
  log(`generate: webhook_deliveries +${result.rowCount ?? 0} rows in ${fixed((performance.now() - started) / 1000, 1)} s`);
}

/**
 * The tables that retention keeps small, filled as a steady state of the generated traffic would hold
 * them between `from` and `to`: idempotency records (7 days), succeeded jobs (1 day), request nonces
 * (10 minutes) and rate counters (their current windows), at `per_day` requests a day. Also used by
 * the retention week to add each day's arrivals.
 */
export async function generateRetainedState(client: pg.Client, wl: string, merchant_id: string, from: Date, to: Date, per_day: number, tag: string): Promise<void> {
  const span_ms = to.getTime() - from.getTime();
  const count = Math.max(1, Math.round((per_day * span_ms) / 86_400_000));
  const template = await client.query<{ idempotency_key: string }>(`SELECT idempotency_key FROM idempotency_records WHERE white_label_id = $1 ORDER BY created_at LIMIT 1`, [wl]);
  const key = template.rows[0]?.idempotency_key;
  if (key === undefined) throw new Error('no idempotency record to copy (the template slip upload writes one)');
  const at = `$3::timestamptz + (g.n * ($4::bigint / $5::bigint)) * interval '1 millisecond'`;
  await copyRows(
    client,
    'idempotency_records',
    `idempotency_records t CROSS JOIN generate_series(1, $5::bigint) AS g(n) WHERE t.white_label_id = $1 AND t.idempotency_key = $2`,
    { merchant_id: '$6', idempotency_key: `'${tag}-' || g.n`, created_at: at, expires_at: `${at} + interval '7 days'` },
    `interval '0'`,
    [wl, key, from, span_ms, count, merchant_id],
  );
  // Succeeded jobs are kept a day: three per order (its expiry, its slip, its webhook fan-out) of the last day of the span.
  const jobsFrom = Math.max(from.getTime(), to.getTime() - 86_400_000);
  const jobSpan = to.getTime() - jobsFrom;
  const jobs = Math.max(3, Math.round((3 * per_day * jobSpan) / 86_400_000));
  await copyRows(
    client,
    'jobs',
    `(SELECT * FROM jobs WHERE status = 'succeeded' ORDER BY created_at LIMIT 3) t CROSS JOIN generate_series(1, $3::bigint / 3) AS g(n)`,
    {
      job_id: `'job_${tag}_' || g.n || '_' || substr(t.job_id, 5)`,
      job_key: 'NULL',
      created_at: `$1::timestamptz + (g.n * ($2::bigint * 3 / $3::bigint)) * interval '1 millisecond'`,
      updated_at: `$1::timestamptz + (g.n * ($2::bigint * 3 / $3::bigint)) * interval '1 millisecond'`,
      run_at: `$1::timestamptz + (g.n * ($2::bigint * 3 / $3::bigint)) * interval '1 millisecond'`,
    },
    `interval '0'`,
    [new Date(jobsFrom), jobSpan, jobs],
  );
  const recent = Math.max(1, Math.round(per_day / 144));
  await client.query(
    `INSERT INTO request_nonces (white_label_id, api_key_id, nonce, expires_at)
     SELECT $1, 'key_growth' || (g.n % 50), '${tag}' || lpad(g.n::text, 24, '0'), $2::timestamptz - (g.n % 600) * interval '1 second' + interval '10 minutes'
       FROM generate_series(1, $3::int) AS g(n)`,
    [wl, to, recent],
  );
  await client.query(
    `INSERT INTO rate_limit_counters (white_label_id, bucket, subject, window_started_at, request_count)
     SELECT $1, 'pay_write', '${tag}-' || g.n, $2::timestamptz - (g.n % 60) * interval '1 second', 1 FROM generate_series(1, $3::int) AS g(n)`,
    [wl, to, recent],
  );
}

/** A day's deliveries of the big merchant's endpoint (the retention week's arrivals), succeeded. */
export async function generateDeliveryDay(client: pg.Client, wl: string, merchant_id: string, endpoint_id: string, from: Date, count: number, tag: string): Promise<void> {
  await client.query(
    `INSERT INTO webhook_deliveries (white_label_id, merchant_id, livemode, delivery_id, endpoint_id, event_id, event_type, event_created_at, status,
                                     round, round_attempts, attempt_count, resend, resend_requested, last_attempt_at, last_http_status,
                                     created_at, updated_at, completed_at)
     SELECT $1, $2, false, 'whd_${tag}_' || g.n, $3, 'evt_${tag}_' || g.n, 'deposit.settled', t.at, 'succeeded', 1, 1, 1, false, false, t.at, 200, t.at, t.at, t.at
       FROM generate_series(1, $5::int) AS g(n)
      CROSS JOIN LATERAL (SELECT $4::timestamptz + g.n * (interval '1 day' / $5::int) AS at) t`,
    [wl, merchant_id, endpoint_id, from, count],
  );
}

export interface GeneratedCounts {
  table: string;
  rows: number;
}

/** Fills the database: merchants, orders with their rows, events, deliveries and the retained state; then ANALYZE. */
export async function generate(databaseUrl: string, plan: GrowthPlan, templates: Templates, endpoint_id: string): Promise<GeneratedCounts[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const started = performance.now();
  try {
    await client.query('SET synchronous_commit = off');
    await client.query(`SET maintenance_work_mem = '512MB'`);
    await client.query(`SET work_mem = '256MB'`);
    await generateMerchants(client, plan, templates);
    await makePlan(client, plan, templates);
    const definitions = await definitionsOf(client);
    await dropForLoad(client, definitions);
    await generateOrders(client, templates);
    await generateEvents(client, templates);
    await generateDeliveries(client, plan, templates.merchant.white_label_id, endpoint_id);
    const perDay = (plan.deposits * 86_400_000) / (plan.end.getTime() - plan.start.getTime());
    await generateRetainedState(client, templates.merchant.white_label_id, plan.big_merchant_id, new Date(plan.end.getTime() - 7 * 86_400_000), plan.end, perDay, 'seed');
    await rebuildAfterLoad(client, definitions);
    // The endpoint has delivered everything generated: its feed's cursor is at the head, as the fan-out leaves it.
    await client.query(
      `UPDATE webhook_feed_cursors c SET last_sequence = s.last_sequence FROM event_sequences s
        WHERE s.white_label_id = c.white_label_id AND s.merchant_id = c.merchant_id AND s.livemode = c.livemode AND c.white_label_id = $1 AND c.merchant_id = $2`,
      [templates.merchant.white_label_id, plan.big_merchant_id],
    );
    const analysed = performance.now();
    await client.query('ANALYZE');
    log(`generate: ANALYZE in ${fixed((performance.now() - analysed) / 1000, 1)} s; generation took ${fixed((performance.now() - started) / 1000, 0)} s`);
    return await tableCounts(client);
  } finally {
    await client.end();
  }
}

export const COUNTED_TABLES = ['merchants', 'deposit_orders', 'deposit_legs', 'events', 'slip_receipts', 'withdrawal_orders', 'webhook_deliveries', 'idempotency_records', 'jobs', 'request_nonces', 'rate_limit_counters', 'balance_transactions'];

export async function tableCounts(client: pg.Client): Promise<GeneratedCounts[]> {
  const counts: GeneratedCounts[] = [];
  for (const table of COUNTED_TABLES) {
    const { rows } = await client.query<{ count: string }>(`SELECT count(*) AS count FROM ${table}`);
    counts.push({ table, rows: Number(rows[0]?.count ?? 0) });
  }
  return counts;
}
