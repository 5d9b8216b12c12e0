import crypto from 'node:crypto';
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { createServiceInstance, type ServiceInstance } from '../src/app.ts';
import { SystemClock } from '../src/platform/clock.ts';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase, type Database } from '../src/platform/db.ts';
import { createLogger } from '../src/platform/logger.ts';
import { migrate } from '../src/platform/migrate.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
import type { Webhooks } from '../src/webhooks/index.ts';
import { DEFAULT_WEBHOOK_SETTINGS, type WebhookSettings } from '../src/webhooks/settings.ts';
import { createTestCertificates } from '../test/support/webhook-receivers.ts';
import { busyShare, createFreshDatabase, dropDatabase, fixed, log, machineCpu, markdownTable, percentile } from './support.ts';

/**
 * `npm run bench:webhooks` (issue 5): webhook deliveries per second to a local HTTPS receiver that
 * answers 200, alone and while another endpoint hangs. Goal: at least 1,000 deliveries per second on
 * two cores, and the healthy rate drops less than 10 % with the hanging endpoint.
 *
 * The run creates a fresh PostgreSQL database (BENCH_DATABASE, default bench_webhooks; the server of
 * DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test), migrates it, and builds one service
 * instance in this process with the real settings (15-second timeout, 8 attempts in flight per
 * endpoint, 64 per process) and a test CA that the delivery client is given explicitly. The receivers
 * run in a child process (two HTTPS servers with certificates of that CA: one answers 200 at once,
 * one never answers), so that the dispatcher and the receiver do not share one event loop.
 *
 * Each phase writes BENCH_EVENTS events (default 10,000) for a merchant with one endpoint, then starts
 * the dispatcher and waits until every delivery succeeded. The time counts everything after the
 * outbox write: fan-out into deliveries, claims, signing, HTTPS, and the recorded answers.
 *
 *   healthy        one endpoint answering 200
 *   with_hang      the same, while another merchant's endpoint that never answers has BENCH_HANG_EVENTS
 *                  (default 1,000) deliveries due, written first so that they are the oldest
 */

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000);
const HANG_EVENTS = Number(process.env.BENCH_HANG_EVENTS ?? 1_000);
const DATABASE_NAME = process.env.BENCH_DATABASE ?? 'bench_webhooks';
const SERVER_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const POOL = Number(process.env.BENCH_DB_POOL ?? 10);
const WRITE_BATCH = 500;

interface ReceiverPorts {
  ok: number;
  hang: number;
}

/** The child: two HTTPS servers, one answering 200 with an empty body, one never answering. */
async function serveReceivers(): Promise<void> {
  // The certificate comes as files (a message sent before this module finished loading would be lost).
  const directory = process.env.BENCH_TLS_DIRECTORY ?? '';
  const tls = { key: fs.readFileSync(path.join(directory, 'leaf.key'), 'utf8'), cert: fs.readFileSync(path.join(directory, 'leaf.pem'), 'utf8') };
  const ok = https.createServer(tls, (request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-length': '0' }).end());
  });
  ok.keepAliveTimeout = 60_000;
  const hang = https.createServer(tls, (request) => request.resume());
  await new Promise<void>((resolve) => ok.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
  process.send?.({ ok: (ok.address() as { port: number }).port, hang: (hang.address() as { port: number }).port });
  process.on('disconnect', () => process.exit(0));
}

async function startReceivers(certificate_directory: string): Promise<{ child: ChildProcess; ports: ReceiverPorts }> {
  const child = fork(fileURLToPath(import.meta.url), ['--receivers'], {
    execArgv: process.execArgv,
    stdio: 'inherit',
    env: { ...process.env, BENCH_TLS_DIRECTORY: certificate_directory },
  });
  const ports = await new Promise<ReceiverPorts>((resolve, reject) => {
    child.once('message', (message) => resolve(message as ReceiverPorts));
    child.once('exit', (code) => reject(new Error(`the receiver process exited (${code})`)));
  });
  return { child, ports };
}

async function writeEvents(instance: ServiceInstance, account: { white_label_id: string; merchant_id: string }, count: number): Promise<void> {
  const services = instance.services;
  for (let written = 0; written < count; written += WRITE_BATCH) {
    await services.database.transaction(async (tx) => {
      for (let index = written; index < Math.min(count, written + WRITE_BATCH); index += 1) {
        await services.events.emitEvent(tx, {
          ...account,
          livemode: false,
          type: 'deposit.settled',
          object: { object: 'deposit', id: `dep_BENCH${index}`, version: 2, status: 'settled', amount_minor: 100_000, note: 'โอนเงินสำเร็จ' },
          previous_attributes: { version: 1, status: 'slip_processing' },
          cause: SYSTEM_CAUSE,
        });
      }
    });
  }
}

async function succeeded(database: Database, white_label_id: string, endpoint_id: string): Promise<number> {
  const { rows } = await database.query<{ count: number }>(
    "SELECT count(*)::int AS count FROM webhook_deliveries WHERE white_label_id = $1 AND endpoint_id = $2 AND status = 'succeeded'",
    [white_label_id, endpoint_id],
  );
  return rows[0]?.count ?? 0;
}

interface PhaseResult {
  name: string;
  seconds: number;
  rate: number;
  steady_rate: number;
  busy: number;
  /** CPU of this process (the dispatcher) per delivery: independent of what else runs on the machine. */
  service_cpu_us: number;
  attempt_p50_ms: number;
  attempt_p99_ms: number;
  hang_attempts_started: number;
}

async function phase(
  name: string,
  webhooks: Webhooks,
  instance: ServiceInstance,
  account: { white_label_id: string; merchant_id: string },
  url: string,
  hang: { account: { white_label_id: string; merchant_id: string }; url: string } | null,
): Promise<PhaseResult> {
  const actor = { actor_type: 'system' as const, actor_id: 'bench', request_id: null };
  const database = instance.services.database;
  let hangEndpointId: string | null = null;
  if (hang) {
    hangEndpointId = (await webhooks.service.createEndpoint(actor, null, { ...hang.account, livemode: false, url: hang.url })).id;
    await writeEvents(instance, hang.account, HANG_EVENTS);
  }
  const endpoint = await webhooks.service.createEndpoint(actor, null, { ...account, livemode: false, url });
  log(`${name}: writing ${EVENTS} events`);
  await writeEvents(instance, account, EVENTS);

  const cpuBefore = machineCpu();
  const processBefore = process.cpuUsage();
  const started = performance.now();
  const marks: { at: number; count: number }[] = [];
  webhooks.dispatcher.start();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const count = await succeeded(database, account.white_label_id, endpoint.id);
    marks.push({ at: performance.now(), count });
    if (count >= EVENTS) break;
    if (performance.now() - started > 300_000) throw new Error(`${name}: only ${count} of ${EVENTS} delivered after 5 minutes`);
  }
  const elapsed = (performance.now() - started) / 1000;
  const busy = busyShare(cpuBefore, machineCpu());
  const processCpu = process.cpuUsage(processBefore);
  const hangStarted = hangEndpointId
    ? ((await database.query<{ count: number }>('SELECT count(*)::int AS count FROM webhook_deliveries WHERE endpoint_id = $1 AND attempt_count > 0', [hangEndpointId])).rows[0]?.count ?? 0)
    : 0;
  log(`${name}: stopping (attempts to a hanging endpoint run into their 15-second timeout first)`);
  await webhooks.dispatcher.stop();

  // The steady rate leaves out the start (fan-out of the first batch) and the tail.
  const from = marks.find((mark) => mark.count >= EVENTS * 0.1) ?? marks[0]!;
  const to = marks.find((mark) => mark.count >= EVENTS * 0.9) ?? marks.at(-1)!;
  const steady = to.at > from.at ? (to.count - from.count) / ((to.at - from.at) / 1000) : Number.NaN;
  const { rows } = await database.query<{ duration_ms: number }>(
    `SELECT a.duration_ms FROM webhook_delivery_attempts a WHERE a.endpoint_id = $1 AND a.status = 'succeeded' ORDER BY a.duration_ms`,
    [endpoint.id],
  );
  const durations = rows.map((row) => row.duration_ms);
  return {
    name,
    seconds: elapsed,
    rate: EVENTS / elapsed,
    steady_rate: steady,
    busy,
    service_cpu_us: (processCpu.user + processCpu.system) / EVENTS,
    attempt_p50_ms: percentile(durations, 0.5),
    attempt_p99_ms: percentile(durations, 0.99),
    hang_attempts_started: hangStarted,
  };
}

async function main(): Promise<void> {
  const certs = createTestCertificates();
  const receivers = await startReceivers(certs.directory);
  let database: Database | null = null;
  let instance: ServiceInstance | null = null;
  try {
    const settings: WebhookSettings = {
      ...DEFAULT_WEBHOOK_SETTINGS,
      ...(process.env.BENCH_ENDPOINT_CONCURRENCY ? { endpoint_concurrency: Number(process.env.BENCH_ENDPOINT_CONCURRENCY) } : {}),
      ...(process.env.BENCH_MAX_IN_FLIGHT ? { max_in_flight: Number(process.env.BENCH_MAX_IN_FLIGHT) } : {}),
      sandbox_loopback: true,
      extra_ca_pem: [certs.ca_pem],
    };
    const results: PhaseResult[] = [];
    for (const name of ['healthy', 'with_hang'] as const) {
      // A fresh database and instance per phase, so that the second phase does not inherit the first
      // one's rows and dead tuples, nor its dispatcher's connections and degraded-endpoint memory.
      const url = await createFreshDatabase(SERVER_URL, DATABASE_NAME);
      database = await openDatabase({ database_url: url, data_dir: null, pool_size: POOL });
      await migrate(database);
      instance = createServiceInstance({
        config: loadConfig({ LOG_LEVEL: 'silent', DB_POOL_SIZE: String(POOL) }),
        database,
        clock: new SystemClock(),
        // Errors only, on stderr: a failing dispatch round must show up in a benchmark.
        logger: createLogger(process.env.BENCH_LOG_LEVEL ?? 'error', process.stderr),
        master_key: crypto.randomBytes(32),
        owns_database: false,
        webhooks: { settings, environment: {} },
      });
      const webhooks = instance.services.webhooks;
      const tenancy = instance.services.tenancy;
      const actor = { actor_type: 'system' as const, actor_id: 'bench', request_id: null };
      const brand = await tenancy.createBrand(actor, { name: `Bench ${name}` });
      const healthyMerchant = await tenancy.createMerchant(actor, { white_label_id: brand.id, name: 'Healthy' });
      const hangingMerchant = await tenancy.createMerchant(actor, { white_label_id: brand.id, name: 'Hanging' });
      results.push(
        await phase(
          name,
          webhooks,
          instance,
          { white_label_id: brand.id, merchant_id: healthyMerchant.id },
          `https://127.0.0.1:${receivers.ports.ok}/hooks`,
          name === 'with_hang' ? { account: { white_label_id: brand.id, merchant_id: hangingMerchant.id }, url: `https://127.0.0.1:${receivers.ports.hang}/hooks` } : null,
        ),
      );
      await instance.stop();
      instance = null;
      await database.close();
      database = null;
    }
    const [healthy, withHang] = results as [PhaseResult, PhaseResult];
    const drop = 1 - withHang.steady_rate / healthy.steady_rate;
    process.stdout.write(
      [
        '',
        markdownTable(
          ['phase', 'events', 'seconds', 'deliveries/s (whole run)', 'deliveries/s (10 %–90 %)', 'attempt p50 ms', 'attempt p99 ms', 'machine busy', 'dispatcher CPU µs/delivery', 'hanging attempts started'],
          ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
          results.map((result) => [
            result.name,
            String(EVENTS),
            fixed(result.seconds, 1),
            fixed(result.rate, 0),
            fixed(result.steady_rate, 0),
            fixed(result.attempt_p50_ms, 1),
            fixed(result.attempt_p99_ms, 1),
            `${fixed(result.busy * 100, 0)} %`,
            fixed(result.service_cpu_us, 0),
            result.name === 'with_hang' ? String(result.hang_attempts_started) : '-',
          ]),
        ),
        '',
        markdownTable(
          ['goal', 'value', 'result'],
          ['l', 'r', 'l'],
          [
            ['≥ 1,000 deliveries/s (healthy, steady)', fixed(healthy.steady_rate, 0), healthy.steady_rate >= 1000 ? 'met' : '**missed**'],
            ['healthy rate drops < 10 % while an endpoint hangs', `${fixed(drop * 100, 1)} %`, drop < 0.1 ? 'met' : '**missed**'],
          ],
        ),
        '',
      ].join('\n'),
    );
  } finally {
    if (instance) await instance.stop();
    if (database) await database.close();
    await dropDatabase(SERVER_URL, DATABASE_NAME);
    receivers.child.disconnect();
    certs.remove();
  }
}

if (process.argv.includes('--receivers')) {
  void serveReceivers();
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
