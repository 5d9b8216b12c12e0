import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createTestCertificates } from '../test/support/webhook-receivers.ts';
import { dropDatabase, fixed, log, markdownTable } from './support.ts';
import { BENCH_ACTOR, FIXTURE_REVIEWS, makeTemplates, prepareFixture, startService, type BenchService, type Fixture } from './growth-fixture.ts';
import { generate, generateDeliveryDay, generateRetainedState, tableCounts, type GeneratedCounts } from './growth-generate.ts';
import { BENCH_STATEMENT, capturedStatements, explainAll, flagged, installCapture, SMALL_TABLE_ROWS, type ExplainedStatement } from './growth-explain.ts';
import { measureOperation, measureWebhooks, operations, readGrowthSettings, summarize, type GrowthSettings, type Measured, type Side } from './growth-phases.ts';
import { startReceiver } from './growth-receiver.ts';

/**
 * `npm run bench:growth [-- --scale 0.02] [-- --keep | --reuse]` (issue 33, item 6): the cost of the hot operations
 * on a database holding a month of a large brand's traffic, beside an empty database, in one run.
 *
 * --keep leaves the grown database (and, in a table of its own, bench_growth_fixture, the fixture's ids);
 * --reuse measures again on it within 20 hours (its open withdrawals expire at 24), with a new baseline database,
 * and without generation; with --week, then the retention week that follows the ones it already had.
 *
 * Two fresh databases on the PostgreSQL of DATABASE_URL (bench_growth_empty, bench_growth_grown), each
 * with a service instance in this process (worker and HTTP off; the operations are the service calls
 * the routes and the worker make) and the same fixture made by the services: the sandbox brand, the big
 * merchant with a webhook endpoint (a local HTTPS receiver answering 200), ten funded withdrawers whose
 * open withdrawals give deposits liquidity. The baseline ("empty") database also gets BASELINE_DEPOSITS generated
 * orders, so that each page of the big merchant's feed holds the same kinds of events on both sides. The grown
 * database also gets: 100,000 × scale open
 * withdrawals (through the service), template orders, and the SQL generation of bench/growth-generate.ts
 * (5,000,000 × scale orders, a third the big merchant's, over 1,200 × scale merchants; a fifth settled
 * through a slip, 1 in 500 in review; their legs, slip receipts, transfers and events; the big
 * merchant's deliveries of 31 days; a week of idempotency records, a day of succeeded jobs, the current
 * nonces and rate counters). Both databases are ANALYZEd.
 *
 * Then each operation runs on the empty and on the grown database in turn, sequentially (one at a time,
 * so that p99 is the operation's and not a queue's), after a warm-up, under the meters of bench/meters.ts
 * (this process's CPU and the PostgreSQL backends of that database):
 *
 *   deposit_create   services.deposits.create for the big merchant (matched, with its event and jobs)
 *   slip_settle      a reference slip through the slip service, then the worker's due jobs (verification
 *                    against the sandbox bank, settlement, events); the transfers are made beforehand
 *   feed_first/middle/last  a page of 100 of the big merchant's events (GET /v1/pay/events' service call)
 *   review_queue     the first page of the brand's review queue (GET /v1/bo/reviews' service call)
 *   webhook_dispatch the dispatcher delivering BENCH_GROWTH_WEBHOOKS new events of the big merchant
 *
 * Every statement the operations send on the grown database is EXPLAINed there (generic and custom plan)
 * and a sequential scan is flagged. Last, the retention week on the grown database: seven simulated days
 * (the instance's clock moved a day at a time), each adding a day of idempotency records, jobs, nonces,
 * rate counters and deliveries, then housekeeping until it removes nothing; the sizes of those tables
 * before and after. The grown database is dropped at the end unless --keep.
 */

const GOAL_RATIO = 1.25;
/** Orders the generator adds to the baseline database (see prepareBaseline). */
const BASELINE_DEPOSITS = 6000;
/** The largest batch one purge of a housekeeping round takes (src/app.ts); a round below it has caught up. */
const HOUSEKEEPING_BATCH = 5000;
const DAY_MS = 86_400_000;
const MONTH_MS = 30 * DAY_MS;
/** BENCH_DATABASE (bench_growth): the databases are <name>_empty and <name>_grown. */
const DATABASE_PREFIX = /^[a-z_][a-z0-9_]{0,40}$/.test(process.env.BENCH_DATABASE ?? '') ? (process.env.BENCH_DATABASE as string) : 'bench_growth';
const EMPTY_NAME = `${DATABASE_PREFIX}_empty`;
const GROWN_NAME = `${DATABASE_PREFIX}_grown`;
const RETAINED_TABLES = ['request_nonces', 'rate_limit_counters', 'idempotency_records', 'jobs', 'webhook_deliveries', 'webhook_delivery_attempts'];

/** Open withdrawals a side needs so that every deposit of the run is matched at once (10 deposits each, with room). */
function withdrawalsNeeded(settings: GrowthSettings): number {
  return Math.ceil(((settings.deposits + 2 * settings.warmup + settings.settles + FIXTURE_REVIEWS) / 10) * 1.5) + 20;
}

/** Template orders on the side's database, then the SQL generation of a month of `deposits` orders over `merchants` merchants. */
async function growDatabase(side: Side, deposits: number, merchants: number): Promise<GeneratedCounts[]> {
  const templates = await makeTemplates(side.service, side.fixture.white_label_id);
  // The expired template's last event is two hours after its creation (its expiry ran with the clock moved):
  // the month ends three hours ago, so that no copied row is dated after now.
  const end = new Date(side.service.clock.now().getTime() - 3 * 60 * 60 * 1000);
  return generate(
    side.service.url,
    { deposits, merchants, settled_every: 5, review_every: 500, start: new Date(end.getTime() - MONTH_MS), end, big_merchant_id: side.fixture.big.merchant_id },
    templates,
    side.fixture.endpoint_id,
  );
}

interface RetainedSize {
  table: string;
  rows: number;
  bytes: number;
}

async function retainedSizes(client: pg.Client): Promise<RetainedSize[]> {
  const sizes: RetainedSize[] = [];
  for (const table of RETAINED_TABLES) {
    const { rows } = await client.query<{ rows: string; bytes: string }>(`SELECT (SELECT count(*) FROM ${table}) AS rows, pg_total_relation_size('${table}') AS bytes`);
    sizes.push({ table, rows: Number(rows[0]?.rows ?? 0), bytes: Number(rows[0]?.bytes ?? 0) });
  }
  return sizes;
}

/**
 * Seven simulated days on the grown database: each day the instance's clock moves a day, a day of the
 * traffic's idempotency records, jobs, nonces, rate counters and deliveries arrives, and housekeeping
 * (the rounds the worker's timer runs) repeats until a round removes less than a batch, then a VACUUM.
 */
async function retentionWeek(settings: GrowthSettings, side: Side): Promise<{ before: RetainedSize[]; after: RetainedSize[]; daily: RetainedSize[][]; removed: number; seconds: number }> {
  const client = new pg.Client({ connectionString: side.service.url });
  await client.connect();
  try {
    await client.query('SET synchronous_commit = off');
    // A kept database's earlier weeks are in its past: this week starts after them (bench_growth_fixture.retention_days).
    const { rows: done } = await client.query<{ days: number }>('SELECT retention_days AS days FROM bench_growth_fixture');
    const earlierDays = done[0]?.days ?? 0;
    const before = await retainedSizes(client);
    const daily: RetainedSize[][] = [];
    const perDay = Math.round((5_000_000 * settings.scale) / 30);
    const deliveriesPerDay = Math.round((before.find((size) => size.table === 'webhook_deliveries')?.rows ?? 0) / 31);
    const started = performance.now();
    let removed = 0;
    side.service.clock.offset_ms = earlierDays * DAY_MS;
    for (let day = earlierDays + 1; day <= earlierDays + 7; day += 1) {
      side.service.clock.offset_ms += DAY_MS;
      const now = side.service.clock.now();
      const from = new Date(now.getTime() - DAY_MS);
      await generateRetainedState(client, side.fixture.white_label_id, side.fixture.big.merchant_id, from, now, perDay, `day${day}`);
      await generateDeliveryDay(client, side.fixture.white_label_id, side.fixture.big.merchant_id, side.fixture.endpoint_id, from, Math.max(1, deliveriesPerDay), `day${day}`);
      // Rounds until one removes less than a batch: the clock is real time plus the offset, so every round finds
      // the few rows that aged past a cut-off while it ran, and "until nothing" would not end.
      for (let rounds = 0; rounds < 10_000; rounds += 1) {
        const round = await side.service.instance.housekeep();
        removed += round;
        if (round < HOUSEKEEPING_BATCH) break;
      }
      // What autovacuum does over a day: the space of the removed rows is reused by the next day's.
      await client.query(`VACUUM ${RETAINED_TABLES.join(', ')}`);
      await client.query('UPDATE bench_growth_fixture SET retention_days = $1', [day]);
      daily.push(await retainedSizes(client));
      log(`retention: day ${day} done (${removed} rows removed so far)`);
    }
    return { before, after: daily.at(-1) ?? before, daily, removed, seconds: (performance.now() - started) / 1000 };
  } finally {
    await client.end();
  }
}

function ratioRows(results: Measured[]): { rows: string[][]; met: boolean } {
  let met = true;
  const rows: string[][] = [];
  for (const empty of results.filter((result) => result.database === EMPTY_NAME)) {
    const grown = results.find((result) => result.database === GROWN_NAME && result.operation === empty.operation);
    if (!grown) continue;
    const emptyCpu = empty.service_cpu_us + empty.postgres_cpu_us;
    const grownCpu = grown.service_cpu_us + grown.postgres_cpu_us;
    const cpuRatio = grownCpu / emptyCpu;
    const p99Ratio = grown.p99_ms / empty.p99_ms;
    const ok = cpuRatio <= GOAL_RATIO && p99Ratio <= GOAL_RATIO;
    met &&= ok;
    rows.push([
      empty.operation,
      String(grown.ops),
      `${fixed(empty.service_cpu_us, 0)} + ${fixed(empty.postgres_cpu_us, 0)}`,
      `${fixed(grown.service_cpu_us, 0)} + ${fixed(grown.postgres_cpu_us, 0)}`,
      `${fixed(cpuRatio, 2)}×`,
      `${fixed(empty.p50_ms, 2)} / ${fixed(empty.p99_ms, 2)}`,
      `${fixed(grown.p50_ms, 2)} / ${fixed(grown.p99_ms, 2)}`,
      `${fixed(p99Ratio, 2)}×`,
      ok ? 'met' : '**missed**',
    ]);
  }
  return { rows, met };
}

function explainReport(explained: ExplainedStatement[]): string {
  const lines: string[] = [];
  for (const statement of explained) {
    const large = flagged(statement);
    const small = statement.sequential
      .filter((table) => !large.includes(table))
      .map((table) => `${table} (${statement.table_rows[table]} rows${statement.without_index.includes(table) ? ', not growing, read whole' : ', an index with seqscan off'})`);
    const flag = statement.error
      ? `ERROR ${statement.error}`
      : large.length > 0
        ? `**Seq Scan on ${large.map((table) => `${table} (${statement.table_rows[table]} rows${statement.without_index.includes(table) ? ', no index serves it' : ''})`).join(', ')}**`
        : small.length > 0
          ? `seq scan of small tables only: ${small.join(', ')}`
          : 'no sequential scan';
    lines.push(`### ${statement.operation}: ${flag}`, '', '```sql', statement.statement.slice(0, 600), '```', '');
    if (!statement.error) lines.push('Generic plan:', '', '```', statement.generic_plan, '```', '');
    if (!statement.error && statement.custom_plan !== statement.generic_plan) lines.push('Custom plan:', '', '```', statement.custom_plan, '```', '');
  }
  return lines.join('\n');
}

function reportMeasurements(settings: GrowthSettings, counts: GeneratedCounts[], results: Measured[], explained: ExplainedStatement[], generationSeconds: number): boolean {
  const ratios = ratioRows(results);
  const scans = explained.filter((statement) => flagged(statement).length > 0);
  const smallScans = explained.filter((statement) => statement.sequential.length > 0 && flagged(statement).length === 0);
  const out = [
    '',
    `## Growth bench, scale ${settings.scale} (${new Date().toISOString()})`,
    '',
    `Generation and ANALYZE: ${fixed(generationSeconds, 0)} s.`,
    '',
    markdownTable(['table (grown database)', 'rows'], ['l', 'r'], counts.map((count) => [count.table, count.rows.toLocaleString('en-US')])),
    '',
    markdownTable(
      ['operation', 'ops per side', 'baseline CPU µs/op (service + PostgreSQL)', 'grown CPU µs/op', 'CPU ratio', 'baseline p50 / p99 ms', 'grown p50 / p99 ms', 'p99 ratio', `goal ≤ ${GOAL_RATIO}×`],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
      ratios.rows,
    ),
    '',
    `Statements EXPLAINed on the grown database: ${explained.length}; with a sequential scan of a table over ${SMALL_TABLE_ROWS.toLocaleString('en-US')} rows, or of a growing table no index serves: ${scans.length}${scans.length > 0 ? ` (${scans.map((scan) => `${scan.operation}: ${flagged(scan).join(', ')}`).join('; ')})` : ''}; with a sequential scan of small tables only (each served by an index when seqscan is off, or a reference table that does not grow): ${smallScans.length}; errors: ${explained.filter((statement) => statement.error).length}.`,
    '',
    `Goal (every ratio ≤ ${GOAL_RATIO}×): ${ratios.met ? 'met' : '**missed**'}; no sequential scan in a hot statement: ${scans.length === 0 ? 'met' : '**missed**'}.`,
    '',
    '## EXPLAIN of the hot statements (grown database)',
    '',
    explainReport(explained),
  ];
  process.stdout.write(out.join('\n'));
  return ratios.met && scans.length === 0 && explained.every((statement) => !statement.error);
}

/** The retention week's table; true when every retained table holds no more rows after the week than 1.1 times before. */
function reportRetention(retention: Awaited<ReturnType<typeof retentionWeek>>): boolean {
  const flat = retention.before.every((before, index) => (retention.after[index]?.rows ?? 0) <= Math.max(100, before.rows * 1.1));
  const out = [
    '',
    `Retention week (7 simulated days, housekeeping removed ${retention.removed.toLocaleString('en-US')} rows in ${fixed(retention.seconds, 0)} s):`,
    '',
    markdownTable(
      ['table', 'rows before', 'rows after', 'MiB before', 'MiB after', 'MiB after each day'],
      ['l', 'r', 'r', 'r', 'r', 'l'],
      retention.before.map((before, index) => {
        const after = retention.after[index]!;
        const days = retention.daily.map((sizes) => fixed((sizes[index]?.bytes ?? 0) / 2 ** 20, 0)).join(', ');
        return [before.table, before.rows.toLocaleString('en-US'), after.rows.toLocaleString('en-US'), fixed(before.bytes / 2 ** 20, 1), fixed(after.bytes / 2 ** 20, 1), days];
      }),
    ),
    '',
    `Retention keeps the tables flat (rows after ≤ 1.1 × before): ${flat ? 'met' : '**missed**'}.`,
    '',
  ];
  process.stdout.write(out.join('\n'));
  return flat;
}

async function measureAll(settings: GrowthSettings, sides: Side[]): Promise<Measured[]> {
  const samples = [];
  for (const operation of operations(settings)) {
    log(`measuring ${operation.name}: ${settings.rounds} blocks per database`);
    samples.push(...(await measureOperation(settings, sides, operation)));
  }
  log('measuring webhook_dispatch');
  samples.push(...(await measureWebhooks(settings, sides)));
  return summarize(samples);
}

/** A key of the bench's own, the same in every run, so that a kept database's sealed values open again under --reuse. */
function masterKeyOf(name: string): Buffer {
  return crypto.createHash('sha256').update(`bench-growth:${name}`).digest();
}

/**
 * What --reuse needs from a kept grown database: its fixture, and when its open withdrawals were made (they expire
 * after the withdrawal policy's 24 hours; after that the worker's due jobs in slip_settle would expire them all).
 */
async function rememberFixture(side: Side, generationSeconds: number): Promise<void> {
  await side.service.database.query(
    'CREATE TABLE bench_growth_fixture (fixture jsonb NOT NULL, made_at timestamptz NOT NULL, generation_seconds numeric NOT NULL, retention_days integer NOT NULL DEFAULT 0)',
  );
  await side.service.database.query('INSERT INTO bench_growth_fixture VALUES ($1, now(), $2)', [JSON.stringify(side.fixture), generationSeconds]);
}

const REUSE_HOURS = 20;

async function recallFixture(service: BenchService): Promise<{ fixture: Fixture; counts: GeneratedCounts[]; generation_seconds: number }> {
  const { rows } = await service.database.query<{ fixture: Fixture; hours: number; generation_seconds: string }>(
    `${BENCH_STATEMENT} SELECT fixture, extract(epoch FROM now() - made_at) / 3600 AS hours, generation_seconds FROM bench_growth_fixture`,
  );
  const row = rows[0];
  if (!row) throw new Error(`${GROWN_NAME} holds no fixture: run with --keep first`);
  if (Number(row.hours) > REUSE_HOURS) throw new Error(`${GROWN_NAME} was made ${fixed(Number(row.hours), 1)} hours ago; its open withdrawals expire at 24 hours: generate again`);
  const client = new pg.Client({ connectionString: service.url });
  await client.connect();
  try {
    log(`reusing ${GROWN_NAME} (made ${fixed(Number(row.hours), 1)} hours ago)`);
    return { fixture: row.fixture, counts: await tableCounts(client), generation_seconds: Number(row.generation_seconds) };
  } finally {
    await client.end();
  }
}

/**
 * The baseline side: the fixture, then the same generator at BASELINE_DEPOSITS orders (a thousandth of the month),
 * so that every page of the big merchant's feed holds the same kinds of events on both sides. Without it, the
 * middle page of the empty feed held the fixture's settlements and the grown one the month's mix (16 % more bytes
 * an event), and feed_middle compared two different pages.
 */
async function prepareBaseline(settings: GrowthSettings, service: BenchService, receiver_url: string): Promise<Side> {
  const needed = withdrawalsNeeded(settings);
  log(`fixture: baseline database (${needed} open withdrawals, ${BASELINE_DEPOSITS} generated orders)`);
  const side: Side = { service, fixture: await prepareFixture(service, receiver_url, needed), grown: false, made: [], paid: [], settled: 0 };
  await growDatabase(side, BASELINE_DEPOSITS, 3);
  return side;
}

async function prepareGrown(settings: GrowthSettings, service: BenchService, receiver_url: string): Promise<{ side: Side; counts: GeneratedCounts[]; generation_seconds: number }> {
  if (settings.reuse) {
    const recalled = await recallFixture(service);
    // The receiver listens on a new port in every run.
    await service.instance.services.webhooks.service.updateEndpoint(BENCH_ACTOR, null, recalled.fixture.endpoint_id, { url: receiver_url });
    return { side: { service, fixture: recalled.fixture, grown: true, made: [], paid: [], settled: 0 }, counts: recalled.counts, generation_seconds: recalled.generation_seconds };
  }
  const openWithdrawals = Math.max(withdrawalsNeeded(settings), Math.round(100_000 * settings.scale));
  log(`fixture: grown database (${openWithdrawals} open withdrawals)`);
  const side: Side = { service, fixture: await prepareFixture(service, receiver_url, openWithdrawals), grown: true, made: [], paid: [], settled: 0 };
  const started = performance.now();
  const counts = await growDatabase(side, Math.round(5_000_000 * settings.scale), Math.max(3, Math.round(1200 * settings.scale)));
  const generation_seconds = (performance.now() - started) / 1000;
  await rememberFixture(side, generation_seconds);
  return { side, counts, generation_seconds };
}

async function main(): Promise<void> {
  const settings = readGrowthSettings();
  installCapture();
  const certs = createTestCertificates();
  const receiver = await startReceiver(certs.directory);
  const services: BenchService[] = [];
  let keep = settings.reuse;
  try {
    const empty = await startService(settings.server_url, EMPTY_NAME, settings.pool, certs.ca_pem, { master_key: masterKeyOf(EMPTY_NAME) });
    services.push(empty);
    const grown = await startService(settings.server_url, GROWN_NAME, settings.pool, certs.ca_pem, { reuse: settings.reuse, master_key: masterKeyOf(GROWN_NAME) });
    services.push(grown);
    const baselineSide = await prepareBaseline(settings, empty, receiver.url);
    const prepared = await prepareGrown(settings, grown, receiver.url);
    const results = await measureAll(settings, [baselineSide, prepared.side]);
    log('EXPLAIN of the captured statements on the grown database');
    const explained = await explainAll(grown.url, empty.url, capturedStatements());
    // The measurements are printed before the retention week, which takes long at full scale.
    const measuredMet = reportMeasurements(settings, prepared.counts, results, explained, prepared.generation_seconds);
    keep = settings.keep || settings.reuse;
    // A reused database runs a week only when asked (--week): the next one after the weeks it already had.
    if (settings.reuse && !settings.week) {
      if (!measuredMet) process.exitCode = 1;
      return;
    }
    log('retention week');
    const retention = await retentionWeek(settings, prepared.side);
    if (!reportRetention(retention) || !measuredMet) process.exitCode = 1;
  } finally {
    for (const service of services) {
      await service.instance.stop();
      await service.database.close();
    }
    await dropDatabase(settings.server_url, EMPTY_NAME);
    if (!keep) await dropDatabase(settings.server_url, GROWN_NAME);
    else log(`kept ${GROWN_NAME}`);
    receiver.child.disconnect();
    certs.remove();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
