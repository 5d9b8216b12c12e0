import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createTestCertificates } from '../test/support/webhook-receivers.ts';
import { dropDatabase, fixed, log, markdownTable, percentile } from './support.ts';
import { BENCH_ACTOR, makeTemplates, prepareFixture, startService, type BenchService } from './growth-fixture.ts';
import { generate, tableCounts, type GeneratedCounts } from './growth-generate.ts';
import { BENCH_STATEMENT, captureAs, capturedStatements, explainAll, flagged, installCapture, SMALL_TABLE_ROWS, type ExplainedStatement } from './growth-explain.ts';
import { startReceiver } from './growth-receiver.ts';

/**
 * `npm run bench:console [-- --orders N] [-- --reviews N] [-- --keep | --reuse]` (issue 30, "Speed"): the back-office
 * console's review queue and review case pages on a brand with 100,000 open reviews among 1,000,000 orders.
 *
 * One fresh database (bench_console) on the PostgreSQL of DATABASE_URL, with a service instance in this process
 * listening on a loopback port (the console's pages over real HTTP, worker off). The sandbox brand gets the
 * fixture of bench/growth.ts (made by the services: a merchant, withdrawers, 25 orders in review), and then the
 * SQL generation of bench/growth-generate.ts, with one order in `orders / reviews` left in review (the copies of
 * an order the 101.00 THB scenario sent to review, each with its slip receipt, verified transfer and events), the
 * rest settled or expired. A reviewer signs in through a one-time link over HTTP, and then each page kind is asked
 * for BENCH_CONSOLE_REQUESTS times, one request at a time (p99 is the page's, not a queue's), after a warm-up:
 *
 *   queue_first         GET /bo/reviews: the first page, its counts per reason and its total
 *   queue_next          the page after it, through the first page's cursor
 *   queue_filtered      a reason filter and "waiting at least 1 hour"
 *   queue_rare_reason   a reason no open review names (the whole queue is read past for an empty page)
 *   queue_state         GET /bo/reviews/state, what an open queue page polls every 5 seconds
 *   case                GET /bo/reviews/{id} of a random order in review
 *
 * Server time is Fastify's own measure of each answer (reply.elapsedTime, from the request's arrival to the
 * answer's end), recorded by an onResponse hook in this process; the time the bench saw over loopback is shown
 * beside it. Every statement the pages send is EXPLAINed (generic and custom plan) and a sequential scan of a
 * large table is flagged. Goal: p99 server time under 100 ms for every page, and no flagged scan.
 *
 * --keep leaves the database; --reuse measures again on a kept one (after the migrations, which the service runs
 * at its start as always) without generating it.
 */

const GOAL_P99_MS = 100;
const DAY_MS = 86_400_000;
const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,40}$/.test(process.env.BENCH_DATABASE ?? '') ? (process.env.BENCH_DATABASE as string) : 'bench_console';
/** The reason the copied review names (the template's payer is not the declared one) and one no review names. */
const COMMON_REASON = 'SENDER_NAME_MISMATCH';
const RARE_REASON = 'DUPLICATE_SLIP';

interface ConsoleBenchSettings {
  server_url: string;
  orders: number;
  reviews: number;
  requests: number;
  warmup: number;
  keep: boolean;
  /** Measure on the database an earlier run kept (--keep), without generating it again. */
  reuse: boolean;
}

function argument(name: string): string | null {
  const index = process.argv.indexOf(name);
  return index === -1 ? null : (process.argv[index + 1] ?? null);
}

function readSettings(): ConsoleBenchSettings {
  const positive = (text: string | undefined | null, fallback: number, name: string) => {
    const value = Number(text ?? fallback);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
    return value;
  };
  const orders = positive(argument('--orders'), 1_000_000, '--orders');
  const reviews = positive(argument('--reviews'), 100_000, '--reviews');
  // The generator sends order n to review when n % every = 7, so every is at least 8.
  if (orders / reviews < 8) throw new Error('--reviews may be at most an eighth of --orders');
  return {
    server_url: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    orders,
    reviews,
    requests: positive(process.env.BENCH_CONSOLE_REQUESTS, 400, 'BENCH_CONSOLE_REQUESTS'),
    warmup: positive(process.env.BENCH_CONSOLE_WARMUP, 40, 'BENCH_CONSOLE_WARMUP'),
    keep: process.argv.includes('--keep') || process.argv.includes('--reuse'),
    reuse: process.argv.includes('--reuse'),
  };
}

interface Sample {
  server_ms: number;
  client_ms: number;
}

/** The console over HTTP as a signed-in reviewer, with each answer's server time. */
class ConsoleClient {
  private readonly serverTimes: number[] = [];
  cookie = '';
  base = '';

  /** Registers the hook, which Fastify allows only before the server listens. */
  constructor(service: BenchService) {
    service.instance.app.addHook('onResponse', async (_request, reply) => {
      this.serverTimes.push(reply.elapsedTime);
    });
  }

  async get(path: string): Promise<{ sample: Sample; body: string }> {
    this.serverTimes.length = 0;
    const started = performance.now();
    const response = await fetch(`${this.base}${path}`, { headers: { cookie: `pg_bo_session=${this.cookie}` }, redirect: 'manual' });
    const body = await response.text();
    const client_ms = performance.now() - started;
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}: ${body.slice(0, 300)}`);
    // The hook runs after the answer's last byte is written, which can be just after the client has read it.
    for (let wait = 0; this.serverTimes.length === 0 && wait < 100; wait += 1) await new Promise((resolve) => setImmediate(resolve));
    const server_ms = this.serverTimes[0];
    if (server_ms === undefined) throw new Error(`no server time for GET ${path}`);
    return { sample: { server_ms, client_ms }, body };
  }
}

/** A reviewer of the brand, signed in through a one-time link over HTTP, as `bo login` and the link's page do. */
async function signInReviewer(service: BenchService, client: ConsoleClient, white_label_id: string): Promise<void> {
  const { tenancy, consoleSessions } = service.instance.services;
  const credential = await tenancy.createBackofficeCredential(BENCH_ACTOR, { white_label_id, role: 'reviewer', name: 'Bench reviewer' });
  const link = await consoleSessions.issueSignInLink(BENCH_ACTOR, { white_label_id, credential_id: credential.id });
  const token = new URL(link.url).pathname.split('/').at(-1) ?? '';
  const response = await fetch(`${client.base}/bo/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token }).toString(),
    redirect: 'manual',
  });
  const cookie = /pg_bo_session=([^;]+)/.exec(response.headers.get('set-cookie') ?? '')?.[1];
  if (response.status !== 303 || !cookie) throw new Error(`the sign-in answered ${response.status}`);
  client.cookie = cookie;
}

async function seed(settings: ConsoleBenchSettings, service: BenchService, receiver_url: string): Promise<{ white_label_id: string; counts: GeneratedCounts[]; seconds: number }> {
  log('fixture: the sandbox brand, its merchants and 25 orders in review, through the services');
  const fixture = await prepareFixture(service, receiver_url, 40);
  const templates = await makeTemplates(service, fixture.white_label_id);
  const started = performance.now();
  // The template in review has its last event an instant after its creation; the month ends an hour ago.
  const end = new Date(service.clock.now().getTime() - 60 * 60 * 1000);
  const counts = await generate(
    service.url,
    {
      deposits: settings.orders,
      merchants: Math.max(3, Math.round(settings.orders / 4000)),
      settled_every: 5,
      review_every: Math.floor(settings.orders / settings.reviews),
      start: new Date(end.getTime() - 30 * DAY_MS),
      end,
      big_merchant_id: fixture.big.merchant_id,
    },
    templates,
    fixture.endpoint_id,
  );
  return { white_label_id: fixture.white_label_id, counts, seconds: (performance.now() - started) / 1000 };
}

/** The brand and table counts of a database an earlier run kept. */
async function reused(service: BenchService): Promise<{ white_label_id: string; counts: GeneratedCounts[]; seconds: number }> {
  const client = new pg.Client({ connectionString: service.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ white_label_id: string }>(`${BENCH_STATEMENT} SELECT white_label_id FROM brands ORDER BY created_at LIMIT 1`);
    if (!rows[0]) throw new Error(`${DATABASE_NAME} holds no brand: run without --reuse first (with --keep)`);
    log(`reusing ${DATABASE_NAME}`);
    return { white_label_id: rows[0].white_label_id, counts: await tableCounts(client), seconds: 0 };
  } finally {
    await client.end();
  }
}

/**
 * What autovacuum does after a bulk insert (its insert threshold): the queue's projection gets its visibility map,
 * so that its counts are index-only scans, as in a running service. The orders' table is left as generated.
 */
async function vacuumQueue(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`${BENCH_STATEMENT} VACUUM (ANALYZE) deposit_review_reasons`);
  } finally {
    await client.end();
  }
}

interface PageKind {
  name: string;
  path: () => string;
}

async function casePicker(url: string, white_label_id: string, count: number): Promise<() => string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ deposit_id: string }>(
      `${BENCH_STATEMENT} SELECT deposit_id FROM deposit_orders WHERE white_label_id = $1 AND status = 'under_review' ORDER BY random() LIMIT $2`,
      [white_label_id, count],
    );
    if (rows.length === 0) throw new Error('no order in review');
    let next = 0;
    return () => `/bo/reviews/${rows[next++ % rows.length]!.deposit_id}`;
  } finally {
    await client.end();
  }
}

async function pageKinds(client: ConsoleClient, url: string, white_label_id: string, settings: ConsoleBenchSettings): Promise<PageKind[]> {
  const first = await client.get('/bo/reviews');
  const cursor = /href="\/bo\/reviews\?([^"]*cursor=[^"]*)"/.exec(first.body)?.[1]?.replaceAll('&amp;', '&');
  if (!cursor) throw new Error('the first page of the queue has no link to the next');
  const nextCase = await casePicker(url, white_label_id, settings.requests + settings.warmup);
  return [
    { name: 'queue_first', path: () => '/bo/reviews' },
    { name: 'queue_next', path: () => `/bo/reviews?${cursor}` },
    { name: 'queue_filtered', path: () => `/bo/reviews?reason=${COMMON_REASON}&age=1h` },
    { name: 'queue_rare_reason', path: () => `/bo/reviews?reason=${RARE_REASON}` },
    { name: 'queue_state', path: () => '/bo/reviews/state' },
    { name: 'case', path: nextCase },
  ];
}

interface Measured {
  name: string;
  requests: number;
  server: { p50: number; p99: number; max: number };
  client: { p50: number; p99: number };
}

async function measure(client: ConsoleClient, kind: PageKind, settings: ConsoleBenchSettings): Promise<Measured> {
  for (let index = 0; index < settings.warmup; index += 1) await client.get(kind.path());
  captureAs(kind.name);
  const samples: Sample[] = [];
  for (let index = 0; index < settings.requests; index += 1) samples.push((await client.get(kind.path())).sample);
  captureAs(null);
  const server = samples.map((sample) => sample.server_ms).sort((a, b) => a - b);
  const seen = samples.map((sample) => sample.client_ms).sort((a, b) => a - b);
  return {
    name: kind.name,
    requests: samples.length,
    server: { p50: percentile(server, 0.5), p99: percentile(server, 0.99), max: server.at(-1) ?? Number.NaN },
    client: { p50: percentile(seen, 0.5), p99: percentile(seen, 0.99) },
  };
}

function report(settings: ConsoleBenchSettings, seeded: { counts: GeneratedCounts[]; seconds: number }, results: Measured[], explained: ExplainedStatement[]): boolean {
  const scans = explained.filter((statement) => flagged(statement).length > 0);
  const errors = explained.filter((statement) => statement.error);
  const met = results.every((result) => result.server.p99 < GOAL_P99_MS);
  const lines = [
    '',
    `## Console bench: ${settings.orders.toLocaleString('en-US')} orders, one in ${Math.floor(settings.orders / settings.reviews)} in review (${new Date().toISOString()})`,
    '',
    `Generation and ANALYZE: ${fixed(seeded.seconds, 0)} s.`,
    '',
    markdownTable(['table', 'rows'], ['l', 'r'], seeded.counts.map((count) => [count.table, count.rows.toLocaleString('en-US')])),
    '',
    markdownTable(
      ['page', 'requests', 'server p50 ms', 'server p99 ms', 'server max ms', 'seen p50 / p99 ms', `goal p99 < ${GOAL_P99_MS} ms`],
      ['l', 'r', 'r', 'r', 'r', 'r', 'l'],
      results.map((result) => [
        result.name,
        String(result.requests),
        fixed(result.server.p50, 2),
        fixed(result.server.p99, 2),
        fixed(result.server.max, 2),
        `${fixed(result.client.p50, 2)} / ${fixed(result.client.p99, 2)}`,
        result.server.p99 < GOAL_P99_MS ? 'met' : '**missed**',
      ]),
    ),
    '',
    `Statements EXPLAINed: ${explained.length}; with a sequential scan of a table over ${SMALL_TABLE_ROWS.toLocaleString('en-US')} rows: ${scans.length}${scans.length > 0 ? ` (${scans.map((scan) => `${scan.operation}: ${flagged(scan).join(', ')}`).join('; ')})` : ''}; errors: ${errors.length}.`,
    '',
    ...explained.flatMap((statement) => [
      `### ${statement.operation}${statement.sequential.length > 0 ? `: seq scan of ${statement.sequential.join(', ')}` : ''}`,
      '',
      '```sql',
      statement.statement.slice(0, 500),
      '```',
      '',
      '```',
      statement.error ?? statement.generic_plan,
      '```',
      '',
    ]),
  ];
  process.stdout.write(lines.join('\n'));
  return met && scans.length === 0 && errors.length === 0;
}

async function main(): Promise<void> {
  const settings = readSettings();
  installCapture();
  const certs = createTestCertificates();
  const receiver = await startReceiver(certs.directory);
  let service: BenchService | null = null;
  try {
    // A key of the bench's own, the same in every run, so that a reused database's sealed values open again.
    const master_key = crypto.createHash('sha256').update(`bench-console:${DATABASE_NAME}`).digest();
    service = await startService(settings.server_url, DATABASE_NAME, 10, certs.ca_pem, { reuse: settings.reuse, master_key });
    const client = new ConsoleClient(service);
    await service.instance.app.listen({ port: 0, host: '127.0.0.1' });
    client.base = `http://127.0.0.1:${(service.instance.app.server.address() as { port: number }).port}`;
    const seeded = settings.reuse ? await reused(service) : await seed(settings, service, receiver.url);
    await vacuumQueue(service.url);
    await signInReviewer(service, client, seeded.white_label_id);
    const results: Measured[] = [];
    for (const kind of await pageKinds(client, service.url, seeded.white_label_id, settings)) {
      log(`measuring ${kind.name}: ${settings.requests} requests after ${settings.warmup} to warm up`);
      results.push(await measure(client, kind, settings));
    }
    log('EXPLAIN of the pages\' statements');
    const explained = await explainAll(service.url, service.url, capturedStatements());
    if (!report(settings, seeded, results, explained)) process.exitCode = 1;
  } finally {
    if (service) {
      await service.instance.stop();
      await service.database.close();
    }
    if (!settings.keep) await dropDatabase(settings.server_url, DATABASE_NAME);
    receiver.child.disconnect();
    certs.remove();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
