import crypto from 'node:crypto';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createServiceInstance, type ServiceInstance } from '../src/app.ts';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase, type Database } from '../src/platform/db.ts';
import { createLogger } from '../src/platform/logger.ts';
import { migrate } from '../src/platform/migrate.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
import { LISTENER_APPLICATION_NAME } from '../src/platform/notifications.ts';
import type { WalletAccount } from '../src/ledger/types.ts';
import type { SlipUpload } from '../src/slip-capability/capability.ts';
import { createFreshDatabase, dropDatabase, fixed, intFromEnv, log, markdownTable, percentile } from './support.ts';

/**
 * `npm run bench:wake`: 202 → settled with the api and the worker in separate processes, against both roles in
 * one process, on PostgreSQL, in one run (issue 33, item 4: "as fast at p50 as in one process").
 *
 * Three topologies, each started with `npm start`'s command (`node --import tsx src/main.ts`) on one fresh
 * database, one after the other:
 *
 *   one_process       API_ENABLED and WORKER_ENABLED: the slip's intake wakes the worker inside the process.
 *   separate          an api process (WORKER_ENABLED=false) and a worker process (API_ENABLED=false): the job's
 *                     insert notifies `jobs_due` on commit, and the worker's LISTEN session wakes it.
 *   separate_polling  the same two processes with WORKER_LISTEN=false: the worker finds the job at its next
 *                     poll. The baseline of what the notification removes.
 *
 * Every process polls every BENCH_WAKE_POLL_MS (250, the service's default). The parent makes the orders
 * in-process before each topology (the sandbox brand's merchant, each order with its own payer, device and
 * sender account, and its sandbox bank transfer), so that no rate limit of the merchant's key is spent. Each
 * slip is the bank app's PNG with its mini-QR text as the `payload` field, so the worker decodes no pixels
 * and the time is the hand-over plus the settlement. Slips are posted to `slip_upload.upload_url` over HTTP at
 * BENCH_WAKE_RATE a second (an open loop: a slip is not held back by the previous one's answer), first
 * BENCH_WAKE_WARMUP_SLIPS unmeasured, then BENCH_WAKE_SLIPS measured. 202 → settled per order is
 * `deposit_orders.settled_at - slip_receipts.received_at`, both from the service's clock.
 *
 * Knobs: DATABASE_URL (any database of the server; default postgres://postgres@127.0.0.1:5432/test),
 * BENCH_DATABASE (bench_wake), BENCH_WAKE_SLIPS (200), BENCH_WAKE_WARMUP_SLIPS (30), BENCH_WAKE_RATE (4: well below what one worker settles a second
 * on this machine, so that the time is the hand-over and the settlement, not a queue),
 * BENCH_WAKE_POLL_MS (250), BENCH_WAKE_TOPOLOGIES (one_process,separate,separate_polling).
 * Exits 1 when an upload is not answered 202 or a slip does not settle.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const UPLOAD_HOST = 'slips.bench.test';
const UPLOAD_BASE_URL = `http://${UPLOAD_HOST}`;
const TOPOLOGIES = ['one_process', 'separate', 'separate_polling'] as const;
type Topology = (typeof TOPOLOGIES)[number];
const DRAIN_TIMEOUT_MS = 120_000;
const RUN_TAG = crypto.randomBytes(3).toString('hex');

interface WakeSettings {
  server_url: string;
  database_name: string;
  slips: number;
  warmup_slips: number;
  rate: number;
  poll_ms: number;
  topologies: Topology[];
}

function readWakeSettings(): WakeSettings {
  const databaseName = process.env.BENCH_DATABASE || 'bench_wake';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseName)) throw new Error('BENCH_DATABASE must be a plain lower-case identifier');
  const topologies = (process.env.BENCH_WAKE_TOPOLOGIES || TOPOLOGIES.join(',')).split(',').map((name) => name.trim());
  for (const name of topologies) {
    if (!(TOPOLOGIES as readonly string[]).includes(name)) throw new Error(`BENCH_WAKE_TOPOLOGIES: unknown "${name}" (known: ${TOPOLOGIES.join(', ')})`);
  }
  return {
    server_url: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    database_name: databaseName,
    slips: intFromEnv('BENCH_WAKE_SLIPS', 200, 1, 100_000),
    warmup_slips: intFromEnv('BENCH_WAKE_WARMUP_SLIPS', 30, 0, 100_000),
    rate: intFromEnv('BENCH_WAKE_RATE', 4, 1, 1000),
    poll_ms: intFromEnv('BENCH_WAKE_POLL_MS', 250, 10, 60_000),
    topologies: topologies as Topology[],
  };
}

// ---------------------------------------------------------------------------------------------------
// The service's processes, started as `npm start` starts it.

interface ServiceProcess {
  child: ChildProcessWithoutNullStreams;
  port: number | null;
  stop(): Promise<void>;
}

async function startProcess(environment: Record<string, string>, serves_api: boolean): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env: { ...process.env, ...environment } });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const deadline = Date.now() + 90_000;
  let port: number | null = null;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`a service process exited before it listened:\n${output}`);
    const match = /listening at http:\/\/localhost:(\d+)/.exec(output);
    if (match) {
      port = serves_api ? Number(match[1]) : null;
      break;
    }
    if (Date.now() > deadline) throw new Error(`a service process did not start in 90 s:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    child,
    port,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

function environmentOf(settings: WakeSettings, databaseUrl: string, masterKey: string, role: { api: boolean; worker: boolean; listen: boolean }): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    MASTER_KEY: masterKey,
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'warn',
    UPLOAD_BASE_URL,
    API_ENABLED: String(role.api),
    WORKER_ENABLED: String(role.worker),
    WORKER_LISTEN: String(role.listen),
    WORKER_POLL_INTERVAL_MS: String(settings.poll_ms),
  };
}

/** Starts the topology's processes; resolves once the api listens and every listening worker has its LISTEN session. */
async function startTopology(settings: WakeSettings, topology: Topology, databaseUrl: string, masterKey: string, database: Database): Promise<{ port: number; processes: ServiceProcess[] }> {
  const processes: ServiceProcess[] = [];
  if (topology === 'one_process') {
    processes.push(await startProcess(environmentOf(settings, databaseUrl, masterKey, { api: true, worker: true, listen: true }), true));
  } else {
    processes.push(await startProcess(environmentOf(settings, databaseUrl, masterKey, { api: true, worker: false, listen: true }), true));
    processes.push(await startProcess(environmentOf(settings, databaseUrl, masterKey, { api: false, worker: true, listen: topology === 'separate' }), false));
  }
  const listeners = topology === 'separate_polling' ? 0 : 1;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { rows } = await database.query<{ sessions: number }>(
      `SELECT count(*)::int AS sessions FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 AND query = 'LISTEN jobs_due'`,
      [LISTENER_APPLICATION_NAME],
    );
    if ((rows[0]?.sessions ?? 0) === listeners) break;
    if (Date.now() > deadline) throw new Error(`${topology}: ${rows[0]?.sessions ?? 0} listening sessions, expected ${listeners}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port: processes[0]!.port!, processes };
}

// ---------------------------------------------------------------------------------------------------
// Orders and uploads

interface BenchOrder {
  deposit_id: string;
  path: string;
  token: string;
  multipart: { body: Buffer; content_type: string };
}

let orderCounter = 0;

function multipartWithPayload(image: Buffer, payload: string): { body: Buffer; content_type: string } {
  const boundary = `----benchwake${crypto.randomBytes(8).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slip.png"\r\nContent-Type: image/png\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="payload"\r\n\r\n${payload}\r\n--${boundary}--\r\n`),
  ]);
  return { body, content_type: `multipart/form-data; boundary=${boundary}` };
}

/** A deposit matched at once for a payer of its own, and the sandbox bank's transfer with its slip. */
async function makeOrder(instance: ServiceInstance, database: Database, account: WalletAccount): Promise<BenchOrder> {
  orderCounter += 1;
  const number = orderCounter;
  const created = await database.transaction((tx) =>
    instance.services.deposits.create(
      tx,
      account,
      {
        amount_minor: 100_000,
        merchant_reference: `wake-${RUN_TAG}-${number}`,
        end_user_ref: `payer-${RUN_TAG}-${number}`,
        sender: { bank_code: '004', account_number: String(4_000_000_000 + number), account_name_th: 'สมหญิง รักไทย' },
        client: { device_fingerprint: `fp-${RUN_TAG}-${number}`, ip: '198.51.100.8', user_agent: 'bench-wake/1.0' },
      },
      SYSTEM_CAUSE,
    ),
  );
  if (!created.matched || !created.slip_upload) throw new Error(`a deposit was not matched at once (${created.deposit.status})`);
  const upload: SlipUpload = created.slip_upload;
  const made = await database.transaction((tx) => instance.services.sandboxBank.transfer(tx, account, { deposit_id: created.deposit.id }));
  if (!made || !made.ok) throw new Error(`the sandbox bank made no transfer for ${created.deposit.id}`);
  return {
    deposit_id: created.deposit.id,
    path: new URL(upload.upload_url).pathname,
    token: upload.token,
    multipart: multipartWithPayload(Buffer.from(made.value.slip.image_base64, 'base64'), made.value.slip.payload),
  };
}

function postUpload(agent: http.Agent, port: number, order: BenchOrder): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        path: order.path,
        method: 'POST',
        agent,
        headers: {
          host: UPLOAD_HOST,
          'content-type': order.multipart.content_type,
          'content-length': String(order.multipart.body.length),
          'idempotency-key': `wake-${RUN_TAG}-${order.deposit_id}`,
          authorization: `Bearer ${order.token}`,
        },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(order.multipart.body);
  });
}

/** Posts the slips at `rate` a second, each at its own instant whatever the answers before it; the statuses. */
async function uploadPaced(port: number, orders: BenchOrder[], rate: number): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const started = performance.now();
  try {
    return await Promise.all(
      orders.map(async (order, index) => {
        const wait = started + (index * 1000) / rate - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        return postUpload(agent, port, order);
      }),
    );
  } finally {
    agent.destroy();
  }
}

/** Waits until every order is settled, or another final status; false on the timeout. */
async function drain(database: Database, ids: string[]): Promise<boolean> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const { rows } = await database.query<{ waiting: number }>(
      `SELECT count(*)::int AS waiting FROM slip_receipts WHERE deposit_id = ANY($1::text[]) AND status <> 'processed'`,
      [ids],
    );
    if ((rows[0]?.waiting ?? 1) === 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------
// One topology, and the report

interface Timing {
  count: number;
  settled: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  max_ms: number;
}

function sortedTimes(values: (number | null)[]): Float64Array {
  return Float64Array.from(values.filter((value): value is number => value !== null)).sort();
}

async function settlementTimes(database: Database, ids: string[]): Promise<Timing> {
  const { rows } = await database.query<{ status: string; total_ms: number | null }>(
    `SELECT d.status, (extract(epoch FROM (d.settled_at - r.received_at)) * 1000)::float8 AS total_ms
       FROM deposit_orders d
       JOIN LATERAL (SELECT min(received_at) AS received_at FROM slip_receipts
                      WHERE white_label_id = d.white_label_id AND deposit_id = d.deposit_id) r ON true
      WHERE d.deposit_id = ANY($1::text[])`,
    [ids],
  );
  const times = sortedTimes(rows.map((row) => row.total_ms));
  return {
    count: ids.length,
    settled: rows.filter((row) => row.status === 'settled').length,
    p50_ms: percentile(times, 0.5),
    p95_ms: percentile(times, 0.95),
    p99_ms: percentile(times, 0.99),
    max_ms: percentile(times, 1),
  };
}

async function runTopology(settings: WakeSettings, topology: Topology, context: { instance: ServiceInstance; database: Database; databaseUrl: string; masterKey: string; account: WalletAccount }): Promise<{ timing: Timing; failures: string[] }> {
  const { instance, database, databaseUrl, masterKey, account } = context;
  log(`${topology}: making ${settings.warmup_slips} + ${settings.slips} orders with their sandbox transfers`);
  const orders: BenchOrder[] = [];
  for (let index = 0; index < settings.warmup_slips + settings.slips; index += 1) orders.push(await makeOrder(instance, database, account));
  await database.exec('ANALYZE');
  const { port, processes } = await startTopology(settings, topology, databaseUrl, masterKey, database);
  const failures: string[] = [];
  try {
    for (const [phase, batch] of [['warm-up', orders.slice(0, settings.warmup_slips)], ['measured', orders.slice(settings.warmup_slips)]] as const) {
      if (batch.length === 0) continue;
      log(`${topology}: ${phase}, ${batch.length} slips at ${settings.rate}/s`);
      const statuses = await uploadPaced(port, batch, settings.rate);
      const refused = statuses.filter((status) => status !== 202);
      if (refused.length > 0) failures.push(`${topology} ${phase}: ${refused.length} uploads not answered 202 (${[...new Set(refused)].join(', ')})`);
      if (!(await drain(database, batch.map((order) => order.deposit_id)))) failures.push(`${topology} ${phase}: slips still unprocessed after ${DRAIN_TIMEOUT_MS / 1000} s`);
    }
  } finally {
    for (const child of processes.reverse()) await child.stop();
  }
  const timing = await settlementTimes(database, orders.slice(settings.warmup_slips).map((order) => order.deposit_id));
  if (timing.settled !== timing.count) failures.push(`${topology}: ${timing.count - timing.settled} of ${timing.count} measured orders not settled`);
  log(`${topology}: p50 ${fixed(timing.p50_ms, 1)} ms, p99 ${fixed(timing.p99_ms, 1)} ms`);
  return { timing, failures };
}

function report(settings: WakeSettings, results: Map<Topology, Timing>): string {
  const baseline = results.get('one_process');
  const rows = [...results].map(([topology, timing]) => [
    topology,
    String(timing.count),
    String(timing.settled),
    fixed(timing.p50_ms, 1),
    fixed(timing.p95_ms, 1),
    fixed(timing.p99_ms, 1),
    fixed(timing.max_ms, 1),
    baseline ? `${fixed(timing.p50_ms / baseline.p50_ms, 2)}×` : '–',
    baseline ? `${fixed(timing.p99_ms / baseline.p99_ms, 2)}×` : '–',
  ]);
  return [
    `202 → settled, ${settings.slips} slips per topology at ${settings.rate}/s after ${settings.warmup_slips} unmeasured; every worker polls every ${settings.poll_ms} ms`,
    '',
    markdownTable(
      ['topology', 'slips', 'settled', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'p50 ÷ one process', 'p99 ÷ one process'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
      rows,
    ),
  ].join('\n');
}

async function main(): Promise<void> {
  const settings = readWakeSettings();
  const databaseUrl = await createFreshDatabase(settings.server_url, settings.database_name);
  const masterKey = crypto.randomBytes(32).toString('base64');
  const database = await openDatabase({ database_url: databaseUrl, data_dir: null, pool_size: 4 });
  let instance: ServiceInstance | null = null;
  try {
    await migrate(database);
    const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', API_ENABLED: 'false', WORKER_ENABLED: 'false', UPLOAD_BASE_URL });
    instance = createServiceInstance({ config, database, logger: createLogger('silent'), master_key: Buffer.from(masterKey, 'base64'), owns_database: false });
    const sandbox = await instance.services.tenancy.bootstrapSandbox();
    if (!sandbox) throw new Error('the bench database already had a brand');
    const account: WalletAccount = { white_label_id: sandbox.white_label_id, merchant_id: sandbox.merchant_id, livemode: false };
    const results = new Map<Topology, Timing>();
    const failures: string[] = [];
    for (const topology of settings.topologies) {
      const outcome = await runTopology(settings, topology, { instance, database, databaseUrl, masterKey, account });
      results.set(topology, outcome.timing);
      failures.push(...outcome.failures);
    }
    process.stdout.write(`\n${report(settings, results)}\n\n`);
    if (failures.length > 0) {
      process.stderr.write(`BENCHMARK FAILED:\n${failures.map((line) => `  - ${line}`).join('\n')}\n`);
      process.exitCode = 1;
    }
  } finally {
    if (instance) await instance.stop();
    await database.close();
    await dropDatabase(settings.server_url, settings.database_name);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
