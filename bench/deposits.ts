import crypto from 'node:crypto';
import os from 'node:os';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createServiceInstance, type ServiceInstance } from '../src/app.ts';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase, PLANNED_PER_CALL, Rollback, type Database, type Queryable, type QueryResult } from '../src/platform/db.ts';
import { createLogger } from '../src/platform/logger.ts';
import { migrate } from '../src/platform/migrate.ts';
import { signedHeaders } from '../src/http/canonical.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
import { MatchingService } from '../src/matching/service.ts';
import { SandboxLiquidity } from '../src/sandbox/liquidity.ts';
import { DEFAULT_DEPOSIT_POLICY } from '../src/deposits/policy.ts';
import type { WalletAccount } from '../src/ledger/types.ts';
import {
  busyShare,
  createFreshDatabase,
  dropDatabase,
  fixed,
  initPgbench,
  intFromEnv,
  log,
  machineCpu,
  markdownTable,
  percentile,
  readSettings,
  runClosedLoop,
  runPaced,
  type BenchRequest,
  type BenchSettings,
  type ClosedLoopResult,
  type Failures,
  type PacedResult,
  type RequestFactory,
} from './support.ts';
import { fundWithdrawer } from './setup.ts';
import {
  adminQuery,
  COST_COLUMNS,
  costRow,
  countingDatabase,
  diffStats,
  peakResidentBytes,
  perOperation,
  runPgbenchTpcbPhase,
  startMeter,
  stopMeter,
  type Cost,
  type PgbenchPhase,
  type StatementStats,
} from './meters.ts';
import { limitHeapGrowth } from '../src/platform/heap.ts';

/**
 * `npm run bench:deposits`: the deposit benchmark of issue 4, in one run on real PostgreSQL.
 *
 * "Benchmark on real PostgreSQL with 10,000 open withdrawals in the brand: deposit creation (201 path,
 * signed, idempotent, matched, event written) at a constant arrival rate, reporting throughput, p50/p99
 * and the ratio to pgbench TPC-B throughput measured in the same run. Goal: at least 40% of TPC-B
 * throughput, p99 under 25 ms at half of the maximum rate; matching cost independent of the number of
 * open withdrawals (show 1,000 vs 100,000)."
 *
 * The parent creates a fresh database (BENCH_DATABASE, default bench_deposits), migrates it, fills the
 * pgbench TPC-B tables (`pgbench -i -s BENCH_PGBENCH_SCALE`) and builds a service instance of its own
 * on it (worker and HTTP off) for the set-up: in the sandbox brand, BENCH_DEPOSIT_MERCHANTS depositing
 * merchants with BENCH_KEYS_PER_MERCHANT test keys each, and BENCH_WITHDRAWING_MERCHANTS withdrawing
 * merchants, each funded by an `adjustment` credit and with a beneficiary verified in-line against the
 * sandbox bank. It then opens BENCH_OPEN_WITHDRAWALS withdrawals of BENCH_WITHDRAWAL_MINOR through
 * `services.withdrawals.create` (the service's own writes: order, ledger reservation, event, expiry
 * job), in batched transactions, BENCH_DB_POOL at a time, the merchants interleaved in queue order.
 *
 * It forks this file with `--serve` for the HTTP server (LOG_LEVEL=silent, worker off, the spec's rate
 * limits unchanged) and measures, in this order:
 *
 *   pgbench_tpcb    `pgbench -n -b tpcb-like -c <pool> -j 2 -T <seconds>` on the same database
 *   deposit_create  POST /v1/pay/deposits over HTTP: signed, a fresh Idempotency-Key, merchant_reference,
 *                   end_user_ref (complete `client`) and sender account per request, keys round-robin
 *                   over all depositing merchants so that no key nears its 600/min `pay_write` bucket
 *                   and no end user its 10/min; every answer must be 201 (matched at once), a 202
 *                   (liquidity wait) counts as a failure. A warm-up, then ANALYZE and a restarted server
 *                   with a second warm-up (so that the measured phases plan on tables with statistics, as
 *                   a running service does), then a closed loop (autocannon) for the maximum, a
 *                   2 s pause for its requests in flight to drain, then an open loop at a constant
 *                   arrival rate of BENCH_RATE_FRACTION of it for p50/p99.
 *   scale           matching cost against the number of open withdrawals in a brand: a second brand,
 *                   filled to each count of BENCH_SCALE_COMPARE in turn (default 1,000 then 100,000),
 *                   and at each count, in this process: `matching.match` in a rolled-back transaction
 *                   (sequential), the split rule (3) the same way, committed service-level
 *                   `deposits.create` at the pool's concurrency, and EXPLAIN ANALYZE of the matching
 *                   queue statement (lockMatchable) as the service's cached prepared statement runs it.
 *
 * Every deposit of the HTTP phase is checked afterwards in the database: awaiting_payment with internal
 * liquidity, legs on seeded withdrawals, one deposit.created event each, and no standing order of the
 * sandbox counterparty (it only adds liquidity when nothing matches). Any non-2xx or 202 answer, error,
 * failed check or refused match makes the run exit 1 after printing the tables.
 *
 * Knobs (environment): DATABASE_URL, BENCH_DATABASE (bench_deposits), BENCH_SECONDS (10),
 * BENCH_WARMUP_SECONDS (3), BENCH_CODE_WARMUP_SECONDS (15, the second warm-up, on the restarted server), BENCH_CONNECTIONS (32), BENCH_DB_POOL (10), BENCH_PGBENCH_CLIENTS (= pool),
 * BENCH_PGBENCH_SCALE (10), BENCH_RATE_FRACTION (0.5), BENCH_ONLY (subset of pgbench,deposit_create,scale),
 * BENCH_OPEN_WITHDRAWALS (10000), BENCH_SCALE_COMPARE ("1000,100000"), BENCH_DEPOSIT_MERCHANTS (20),
 * BENCH_KEYS_PER_MERCHANT (5), BENCH_WITHDRAWING_MERCHANTS (20), BENCH_WITHDRAWAL_MINOR (1000000),
 * BENCH_DEPOSIT_MINOR (100000), BENCH_SEED_BATCH (250 withdrawals per transaction), BENCH_SCALE_DEPOSITS
 * (2000 committed deposits per count), BENCH_MATCH_SAMPLES (500 rolled-back matches per count), BENCH_SPLIT_SAMPLES (30),
 * BENCH_DATABASE_SETTINGS (what-if ALTER DATABASE), BENCH_STATEMENT_PROFILE=1 (where the server's
 * database time goes, by statement), BENCH_MIXED_MERCHANTS=1 (what-if: the depositing merchants are also
 * the withdrawing ones, as merchants of a real brand are), BENCH_SERVER_NODE_ARGS (node flags of the server, e.g. --cpu-prof),
 * BENCH_QUICK=1 (small numbers, for trying the script).
 */

const GOAL_RATIO = 0.4;
const GOAL_P99_MS = 25;
const CREATE_PATH = '/v1/pay/deposits';
const SENDER_BANK = '004';
const SENDER_NAME = 'สมหญิง รักไทย';
const BENCH_ACTOR = { actor_type: 'system' as const, actor_id: 'bench', request_id: null };
/** Pause between the closed loop and the open loop, for the closed loop's requests in flight to finish. */
const SETTLE_MS = 2000;

interface DepositSettings extends BenchSettings {
  quick: boolean;
  pgbench_scale: number;
  open_withdrawals: number;
  scale_compare: number[];
  deposit_merchants: number;
  keys_per_merchant: number;
  withdrawing_merchants: number;
  withdrawal_minor: number;
  deposit_minor: number;
  seed_batch: number;
  scale_deposits: number;
  match_samples: number;
  split_samples: number;
  mixed: boolean;
  statement_profile: boolean;
}

function readDepositSettings(): DepositSettings {
  const quick = process.env.BENCH_QUICK === '1';
  if (quick) {
    // Small numbers for trying the script; any knob given explicitly still wins.
    process.env.BENCH_SECONDS ||= '3';
    process.env.BENCH_WARMUP_SECONDS ||= '1';
    process.env.BENCH_CODE_WARMUP_SECONDS ||= '1';
  }
  const base = readSettings({ database_name: 'bench_deposits', only: 'pgbench,deposit_create,scale' });
  const scaleText = process.env.BENCH_SCALE_COMPARE || (quick ? '200,2000' : '1000,100000');
  const scaleCompare = scaleText.split(',').map((part) => Number(part.trim()));
  if (scaleCompare.some((value) => !Number.isInteger(value) || value < 1) || scaleCompare.length === 0) {
    throw new Error(`BENCH_SCALE_COMPARE must be a comma-separated list of positive integers, got "${scaleText}"`);
  }
  const depositMinor = intFromEnv('BENCH_DEPOSIT_MINOR', 100_000, DEFAULT_DEPOSIT_POLICY.min_amount_minor, DEFAULT_DEPOSIT_POLICY.max_amount_minor);
  if (depositMinor % 100 !== 0) throw new Error('BENCH_DEPOSIT_MINOR must be whole baht');
  const withdrawalMinor = intFromEnv('BENCH_WITHDRAWAL_MINOR', 1_000_000, depositMinor, 10_000_000);
  return {
    ...base,
    quick,
    pgbench_scale: intFromEnv('BENCH_PGBENCH_SCALE', quick ? 1 : 10, 1),
    open_withdrawals: intFromEnv('BENCH_OPEN_WITHDRAWALS', quick ? 500 : 10_000, 1),
    scale_compare: [...scaleCompare].sort((a, b) => a - b),
    deposit_merchants: intFromEnv('BENCH_DEPOSIT_MERCHANTS', 20, 1, 1000),
    keys_per_merchant: intFromEnv('BENCH_KEYS_PER_MERCHANT', 5, 1, 100),
    withdrawing_merchants: intFromEnv('BENCH_WITHDRAWING_MERCHANTS', 20, 1, 1000),
    withdrawal_minor: withdrawalMinor,
    deposit_minor: depositMinor,
    seed_batch: intFromEnv('BENCH_SEED_BATCH', 250, 1, 10_000),
    scale_deposits: intFromEnv('BENCH_SCALE_DEPOSITS', quick ? 200 : 2000, 1),
    match_samples: intFromEnv('BENCH_MATCH_SAMPLES', quick ? 100 : 500, 10),
    split_samples: intFromEnv('BENCH_SPLIT_SAMPLES', quick ? 10 : 30, 10),
    mixed: process.env.BENCH_MIXED_MERCHANTS === '1',
    statement_profile: process.env.BENCH_STATEMENT_PROFILE === '1',
  };
}

// ---------------------------------------------------------------------------------------------------
// Counting the server's database work: round trips, transactions, and optionally the wall time of each statement.

interface ReadyMessage {
  type: 'ready';
  base_url: string;
}

interface UsageMessage {
  type: 'usage';
  id: number;
  cpu_us: number;
  stats: StatementStats;
  /** The server's peak resident set so far (bench/meters.ts). */
  peak_rss_bytes: number;
}

type ChildMessage = ReadyMessage | UsageMessage;
type ParentMessage = { type: 'usage'; id: number } | { type: 'stop' };

async function serve(): Promise<void> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  const masterKey = process.env.BENCH_MASTER_KEY;
  if (!databaseUrl || !masterKey || !process.send) throw new Error('--serve is started by bench/deposits.ts itself');
  // The rate limits stay the spec's: the parent spreads the load over enough keys and end users.
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    WORKER_ENABLED: 'false',
    DB_POOL_SIZE: process.env.BENCH_DB_POOL ?? '10',
  });
  const stats: StatementStats = { round_trips: 0, transactions: 0, profile: {} };
  const opened = await openDatabase({ database_url: databaseUrl, data_dir: null, pool_size: config.db_pool_size });
  const database = countingDatabase(opened, stats, process.env.BENCH_STATEMENT_PROFILE === '1');
  const instance = createServiceInstance({
    config,
    database,
    logger: createLogger('silent'),
    master_key: Buffer.from(masterKey, 'base64'),
    owns_database: true,
  });
  await instance.listen();
  const port = (instance.app.server.address() as { port: number }).port;

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await instance.stop();
    process.exit(0);
  };
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'usage') {
      const usage = process.cpuUsage();
      const copy: StatementStats = { round_trips: stats.round_trips, transactions: stats.transactions, profile: structuredClone(stats.profile) };
      process.send?.({ type: 'usage', id: message.id, cpu_us: usage.user + usage.system, stats: copy, peak_rss_bytes: peakResidentBytes() } satisfies UsageMessage);
    } else if (message.type === 'stop') {
      void stop();
    }
  });
  process.on('disconnect', () => void stop());
  process.send({ type: 'ready', base_url: `http://127.0.0.1:${port}` } satisfies ReadyMessage);
}

class ServerProcess {
  private nextId = 1;
  private readonly waiting = new Map<number, (message: UsageMessage) => void>();

  private constructor(
    private readonly child: ChildProcess,
    readonly base_url: string,
  ) {
    child.on('message', (message: ChildMessage) => {
      if (message.type !== 'usage') return;
      this.waiting.get(message.id)?.(message);
      this.waiting.delete(message.id);
    });
  }

  static start(settings: DepositSettings, databaseUrl: string, masterKey: Buffer): Promise<ServerProcess> {
    // BENCH_SERVER_NODE_ARGS adds node flags to the server process only, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`.
    const extraArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter((arg) => arg.length > 0);
    const child = fork(fileURLToPath(import.meta.url), ['--serve'], {
      execArgv: [...process.execArgv, ...extraArgs],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        BENCH_DATABASE_URL: databaseUrl,
        BENCH_DB_POOL: String(settings.db_pool),
        BENCH_MASTER_KEY: masterKey.toString('base64'),
        BENCH_STATEMENT_PROFILE: settings.statement_profile ? '1' : '0',
        LOG_LEVEL: 'silent',
      },
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the server process exited with ${code} before it was ready`));
      child.once('exit', onExit);
      child.once('error', reject);
      child.on('message', (message: ChildMessage) => {
        if (message.type !== 'ready') return;
        child.off('exit', onExit);
        resolve(new ServerProcess(child, message.base_url));
      });
    });
  }

  usage(): Promise<UsageMessage> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.send({ type: 'usage', id } satisfies ParentMessage);
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.send({ type: 'stop' } satisfies ParentMessage);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------------
// What PostgreSQL waits on (the CPU and WAL meters are bench/meters.ts's).

/**
 * What the bench database's active backends are doing, sampled every 20 ms during the closed loop:
 * wait event (or "running" when none) and the statement, to show where deposits queue.
 */
class WaitSampler {
  private readonly counts = new Map<string, number>();
  private samples = 0;
  private running = true;
  private loop: Promise<void> = Promise.resolve();

  private constructor(private readonly client: pg.Client) {}

  static async start(serverUrl: string, databaseName: string): Promise<WaitSampler> {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    const sampler = new WaitSampler(client);
    sampler.loop = (async () => {
      while (sampler.running) {
        const { rows } = await client.query<{ wait: string; query: string }>(
          `SELECT coalesce(wait_event_type || ':' || wait_event, 'running') AS wait, left(regexp_replace(query, '\\s+', ' ', 'g'), 80) AS query
             FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()`,
          [databaseName],
        );
        sampler.samples += 1;
        for (const row of rows) {
          const key = `${row.wait} | ${row.query}`;
          sampler.counts.set(key, (sampler.counts.get(key) ?? 0) + 1);
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    return sampler;
  }

  /** Average number of active backends per (wait, statement), largest first. */
  async stop(): Promise<{ samples: number; rows: { wait: string; query: string; backends: number }[] }> {
    this.running = false;
    await this.loop;
    await this.client.end();
    const rows = [...this.counts.entries()]
      .map(([key, count]) => {
        const [wait, query] = key.split(' | ', 2) as [string, string];
        return { wait, query, backends: count / Math.max(1, this.samples) };
      })
      .sort((a, b) => b.backends - a.backends);
    return { samples: this.samples, rows };
  }
}

// ---------------------------------------------------------------------------------------------------
// Set-up: merchants, keys, money, beneficiaries and open withdrawals

interface DepositMerchant {
  account: WalletAccount;
  keys: { api_key: string; signing_secret: string }[];
}

interface WithdrawingMerchant {
  account: WalletAccount;
  beneficiary_id: string;
}

async function createDepositMerchants(instance: ServiceInstance, white_label_id: string, count: number, keysEach: number, label: string): Promise<DepositMerchant[]> {
  const { tenancy } = instance.services;
  const merchants: DepositMerchant[] = [];
  for (let index = 0; index < count; index += 1) {
    const merchant = await tenancy.createMerchant(BENCH_ACTOR, { white_label_id, name: `${label} depositor ${index + 1}` });
    const keys: DepositMerchant['keys'] = [];
    for (let key = 0; key < keysEach; key += 1) {
      const created = await tenancy.createApiKey(BENCH_ACTOR, { merchant_id: merchant.id, scope_white_label_id: white_label_id, livemode: false });
      keys.push({ api_key: created.api_key, signing_secret: created.signing_secret });
    }
    merchants.push({ account: { white_label_id, merchant_id: merchant.id, livemode: false }, keys });
  }
  return merchants;
}

async function createWithdrawingMerchants(
  instance: ServiceInstance,
  database: Database,
  white_label_id: string,
  count: number,
  funding_minor: number,
  label: string,
  existing: WalletAccount[] = [],
): Promise<WithdrawingMerchant[]> {
  const { tenancy } = instance.services;
  const merchants: WithdrawingMerchant[] = [];
  for (let index = 0; index < count; index += 1) {
    const account: WalletAccount =
      existing[index] ?? { white_label_id, merchant_id: (await tenancy.createMerchant(BENCH_ACTOR, { white_label_id, name: `${label} withdrawer ${index + 1}` })).id, livemode: false };
    merchants.push({ account, beneficiary_id: await fundWithdrawer(instance, database, account, funding_minor) });
  }
  return merchants;
}

let seedCounter = 0;

/**
 * Opens `count` withdrawals through `services.withdrawals.create`, `batch` per transaction, `pool`
 * transactions at a time. Each worker owns a disjoint set of merchants (a transaction holds the wallet
 * and event-sequence rows of its merchants until it commits) and rotates through them row by row, so
 * that the queue's oldest-first order interleaves all withdrawing merchants, as independent merchants'
 * payouts arriving over time would.
 */
async function seedWithdrawals(
  settings: DepositSettings,
  instance: ServiceInstance,
  database: Database,
  merchants: WithdrawingMerchant[],
  count: number,
): Promise<number> {
  const started = performance.now();
  const workers = Math.min(settings.db_pool, merchants.length);
  let next = 0;
  const runTag = crypto.randomBytes(3).toString('hex');
  let lastReport = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      const mine = merchants.filter((_merchant, index) => index % workers === worker);
      let turn = 0;
      while (next < count) {
        const size = Math.min(settings.seed_batch, count - next);
        next += size;
        await database.transaction(async (tx) => {
          for (let index = 0; index < size; index += 1) {
            const merchant = mine[turn++ % mine.length] as WithdrawingMerchant;
            seedCounter += 1;
            const created = await instance.services.withdrawals.create(
              tx,
              merchant.account,
              {
                amount_minor: settings.withdrawal_minor,
                merchant_reference: `seed-${runTag}-${seedCounter}`,
                end_user_ref: `payee-${seedCounter}`,
                beneficiary_id: merchant.beneficiary_id,
              },
              SYSTEM_CAUSE,
            );
            if (!created.ok) throw created.error;
            if (created.value.status !== 'open') throw new Error(`a seeded withdrawal is ${created.value.status}, not open`);
          }
        });
        if (performance.now() - lastReport > 10_000) {
          lastReport = performance.now();
          log(`  seeded ${Math.min(next, count)} of ${count}`);
        }
      }
    }),
  );
  return (performance.now() - started) / 1000;
}

async function countMatchable(database: Queryable, white_label_id: string, amount_minor: number): Promise<number> {
  const { rows } = await database.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM withdrawal_orders
      WHERE white_label_id = $1 AND livemode = false AND status IN ('open', 'partially_filled') AND remaining_minor >= $2`,
    [white_label_id, amount_minor],
  );
  return rows[0]?.count ?? 0;
}

async function analyze(database: Database): Promise<void> {
  await database.exec('ANALYZE withdrawal_orders; ANALYZE withdrawal_legs; ANALYZE deposit_orders; ANALYZE deposit_legs');
}

// ---------------------------------------------------------------------------------------------------
// Phase 1: pgbench TPC-B, measured by runPgbenchTpcbPhase of bench/meters.ts (shared with bench/foundation.ts)

// ---------------------------------------------------------------------------------------------------
// Phase 2: deposit creation over HTTP

interface CreatePhase {
  warmup: ClosedLoopResult | null;
  /** The warm-up after the ANALYZE, for the plan caches to settle. */
  second_warmup: ClosedLoopResult | null;
  max: ClosedLoopResult;
  paced: PacedResult | null;
  cost: Cost;
  answered: number;
  checks: DepositChecks;
  open_before: number;
  open_after: number;
  keys: number;
  waits: Awaited<ReturnType<WaitSampler['stop']>>;
  /** The server's peak resident set after the closed loop at the maximum rate. */
  server_peak_rss_bytes: number;
}

interface DepositChecks {
  deposits: number;
  awaiting_payment_internal: number;
  with_one_leg: number;
  legs_on_seeded_withdrawals: number;
  created_events: number;
  counterparty_withdrawals: number;
}

function depositRequests(settings: DepositSettings, merchants: DepositMerchant[]): RequestFactory {
  // Key k of merchant m at position k * M + m: consecutive requests go to different merchants.
  const keys: DepositMerchant['keys'] = [];
  for (let key = 0; key < settings.keys_per_merchant; key += 1) for (const merchant of merchants) keys.push(merchant.keys[key] as DepositMerchant['keys'][number]);
  const runTag = crypto.randomBytes(4).toString('hex');
  let counter = 0;
  return (): BenchRequest => {
    counter += 1;
    const key = keys[counter % keys.length] as DepositMerchant['keys'][number];
    const body = JSON.stringify({
      amount_minor: settings.deposit_minor,
      currency: 'THB',
      merchant_reference: `dep-${runTag}-${counter}`,
      // One request per end user, device and sender account: the per-user bucket (10 a minute), the
      // open-order cap (2 per device) and the duplicate check (same amount and sender) never decide.
      end_user_ref: `user-${runTag}-${counter}`,
      sender: { bank_code: SENDER_BANK, account_number: String(1_000_000_000 + counter), account_name_th: SENDER_NAME },
      client: { device_fingerprint: `fp-${runTag}-${counter}`, ip: `198.51.100.${counter % 250}`, user_agent: 'bench-deposits/1.0' },
    });
    return {
      method: 'POST',
      path: CREATE_PATH,
      body,
      headers: signedHeaders({
        api_key: key.api_key,
        signing_secret: key.signing_secret,
        method: 'POST',
        target: CREATE_PATH,
        body,
        idempotency_key: `dep-${runTag}-${counter}`,
      }),
    };
  };
}

function count201(result: { status_counts: Record<string, number> }): number {
  return result.status_counts['201'] ?? 0;
}

async function checkDeposits(database: Database, merchants: DepositMerchant[], white_label_id: string): Promise<DepositChecks> {
  const ids = merchants.map((merchant) => merchant.account.merchant_id);
  // The run filled these tables faster than autovacuum analyses them; planned on the empty tables' statistics,
  // the join below became nested loops that ran for minutes (twice on 2026-11-25). Fresh statistics first.
  await database.exec('ANALYZE deposit_orders, deposit_legs, withdrawal_legs, withdrawal_orders, events');
  const { rows } = await database.query<Omit<DepositChecks, 'counterparty_withdrawals'>>(
    `SELECT
       (SELECT count(*)::int FROM deposit_orders WHERE merchant_id = ANY($1::text[])) AS deposits,
       (SELECT count(*)::int FROM deposit_orders WHERE merchant_id = ANY($1::text[])
          AND status = 'awaiting_payment' AND liquidity_source = 'internal') AS awaiting_payment_internal,
       (SELECT count(*)::int FROM deposit_orders d WHERE merchant_id = ANY($1::text[])
          AND (SELECT count(*) FROM deposit_legs l WHERE l.white_label_id = d.white_label_id AND l.deposit_id = d.deposit_id) = 1) AS with_one_leg,
       (SELECT count(*)::int FROM deposit_legs l
          JOIN deposit_orders d ON d.white_label_id = l.white_label_id AND d.deposit_id = l.deposit_id
          JOIN withdrawal_legs w ON w.white_label_id = l.white_label_id AND w.leg_ref = l.withdrawal_leg_ref AND w.status = 'reserved'
          JOIN withdrawal_orders o ON o.white_label_id = w.white_label_id AND o.withdrawal_id = w.withdrawal_id
         WHERE d.merchant_id = ANY($1::text[]) AND o.merchant_reference LIKE 'seed-%') AS legs_on_seeded_withdrawals,
       (SELECT count(*)::int FROM events WHERE merchant_id = ANY($1::text[]) AND type = 'deposit.created') AS created_events`,
    [ids],
  );
  const counterparty = await database.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM withdrawal_orders o JOIN sandbox_counterparties c ON c.white_label_id = o.white_label_id AND c.merchant_id = o.merchant_id
      WHERE o.white_label_id = $1`,
    [white_label_id],
  );
  const row = rows[0];
  if (!row) throw new Error('the deposit check returned nothing');
  return { ...row, counterparty_withdrawals: counterparty.rows[0]?.count ?? 0 };
}

async function runCreatePhase(
  settings: DepositSettings,
  firstServer: ServerProcess,
  database: Database,
  merchants: DepositMerchant[],
  white_label_id: string,
  /** Stops the server and starts a new one on the same database (fresh connections and plan caches). */
  restart: () => Promise<ServerProcess>,
): Promise<CreatePhase> {
  let server = firstServer;
  const build = depositRequests(settings, merchants);
  const openBefore = await countMatchable(database, white_label_id, settings.deposit_minor);
  let warmup: ClosedLoopResult | null = null;
  if (settings.warmup_seconds > 0) {
    log(`deposit_create: warm-up ${settings.warmup_seconds} s`);
    warmup = await runClosedLoop({ base_url: server.base_url, connections: settings.connections, seconds: settings.warmup_seconds, build });
  }
  // A running service's tables have statistics (autovacuum analyses them); the bench's fresh ones have none
  // until its first minute is over, and the creation's statements were planned on empty-table estimates: the
  // conflict read scanned every order of the merchant through the listing index instead of the index that
  // answers it (seen with auto_explain on 2026-11-26). So the warm-up's orders are analysed, and the server
  // is started again: a prepared statement's plan cache weighs its generic plan against the average of every
  // custom plan it made, and the warm-up's, costed on empty tables, kept the matching queue's statement
  // planned anew on a quarter of the measured calls long after the ANALYZE (pg_stat_statements, 2026-11-26).
  // A second warm-up on the new server fills its connections' plan caches as a running service has them.
  await analyze(database);
  let secondWarmup: ClosedLoopResult | null = null;
  // It is also long enough for V8 to have optimised the hot code (BenchSettings.code_warmup_seconds).
  if (settings.warmup_seconds > 0) {
    server = await restart();
    log(`deposit_create: server restarted after ANALYZE; second warm-up ${settings.code_warmup_seconds} s`);
    if (settings.code_warmup_seconds > 0) {
      secondWarmup = await runClosedLoop({ base_url: server.base_url, connections: settings.connections, seconds: settings.code_warmup_seconds, build });
    }
  }
  log(`deposit_create: closed loop, ${settings.connections} connections, ${settings.seconds} s`);
  const meter = await startMeter(settings);
  const waitSampler = await WaitSampler.start(settings.database_url, settings.database_name);
  const serverBefore = await server.usage();
  const max = await runClosedLoop({ base_url: server.base_url, connections: settings.connections, seconds: settings.seconds, build });
  const serverAfter = await server.usage();
  const waits = await waitSampler.stop();
  const cost = await stopMeter(settings, meter, count201(max), serverAfter.cpu_us - serverBefore.cpu_us, diffStats(serverAfter.stats, serverBefore.stats));
  const rate = (count201(max) / max.duration_seconds) * settings.rate_fraction;
  const keys = merchants.length * settings.keys_per_merchant;
  const perKeyPerMinute = (count201(max) / max.duration_seconds) * 60 / keys;
  log(`deposit_create: ${fixed(count201(max) / max.duration_seconds, 0)} req/s (${fixed(perKeyPerMinute, 0)} per key per minute at that rate); open loop at ${fixed(rate, 0)} req/s for ${settings.seconds} s`);
  // autocannon stops with up to `connections` requests still in the server; at ~6 ms of server CPU each
  // they take a few hundred ms to drain, and the first open-loop requests would queue behind them
  // (measured: the first 250 ms of the open loop held every request above 60 ms). Let them finish.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const paced = rate >= 1 ? await runPaced({ base_url: server.base_url, rate, seconds: settings.seconds, max_sockets: settings.connections * 4, build }) : null;
  if (paced) log(`deposit_create: p50 ${fixed(paced.p50_ms, 2)} ms, p99 ${fixed(paced.p99_ms, 2)} ms at ${fixed(paced.achieved_rate, 0)} req/s`);
  // The open loop's last requests may still be committing: give them a moment before counting.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const checks = await checkDeposits(database, merchants, white_label_id);
  const openAfter = await countMatchable(database, white_label_id, settings.deposit_minor);
  return {
    warmup,
    second_warmup: secondWarmup,
    max,
    paced,
    cost,
    answered: [warmup, secondWarmup, max, paced].reduce((sum, phase) => sum + (phase ? count201(phase) : 0), 0),
    checks,
    open_before: openBefore,
    open_after: openAfter,
    keys,
    waits,
    server_peak_rss_bytes: serverAfter.peak_rss_bytes,
  };
}

// ---------------------------------------------------------------------------------------------------
// Phase 3: matching cost against the number of open withdrawals

interface Timing {
  samples: number;
  mean_ms: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
}

function timingOf(values: number[]): Timing {
  const sorted = Float64Array.from(values).sort();
  const sum = values.reduce((total, value) => total + value, 0);
  return { samples: values.length, mean_ms: sum / Math.max(1, values.length), p50_ms: percentile(sorted, 0.5), p99_ms: percentile(sorted, 0.99), max_ms: percentile(sorted, 1) };
}

interface PlanSummary {
  variant: string;
  generic: boolean;
  scan: string;
  rows_removed_by_filter: number;
  buffers: number;
  execution_ms: number;
  planning_ms: number;
  /** The first execution (always a custom plan): its scan and time. */
  first_scan?: string;
  first_execution_ms?: number;
}

interface ScalePoint {
  open: number;
  seed_seconds: number;
  seeded: number;
  match: Timing;
  split: Timing;
  standing: Timing;
  create: Timing & { per_second: number; matched: number; refused: number; first_problem: string | null };
  plans: PlanSummary[];
}

/** Runs `work` in a transaction and rolls it back; returns what `work` returned. */
async function rolledBack<T>(database: Database, work: (tx: Queryable) => Promise<T>): Promise<T> {
  try {
    await database.transaction(async (tx) => {
      throw new Rollback(await work(tx));
    });
  } catch (error) {
    if (error instanceof Rollback) return error.value as T;
    throw error;
  }
  throw new Error('unreachable: the transaction always rolls back');
}

/**
 * A Queryable that hands the matching-queue statements (lockMatchable) to `capture` instead of running them.
 * Each answers no row; the caller keeps the first, the statement a creation sends first (for oldest first,
 * the prepared head of the queue; the whole-queue statement follows only when the head has no candidate).
 */
function capturing(tx: Queryable, capture: (sql: string, params: readonly unknown[]) => void): Queryable {
  return {
    async query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
      if (sql.includes('FOR UPDATE SKIP LOCKED') && sql.includes('withdrawal_orders')) {
        capture(sql, params);
        return { rows: [], rowCount: 0 };
      }
      return tx.query<Row>(sql, params);
    },
    exec: (sql: string) => tx.exec(sql),
  };
}

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Rows Removed by Filter'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  'Index Cond'?: string;
  Filter?: string;
  Plans?: PlanNode[];
}

function summarisePlan(variant: string, explained: { Plan: PlanNode; 'Execution Time': number; 'Planning Time': number }): PlanSummary {
  const scans: string[] = [];
  let removed = 0;
  let generic = false;
  const walk = (node: PlanNode, depth: number) => {
    if (/Scan/.test(node['Node Type']) && depth <= 3) scans.push(node['Index Name'] ? `${node['Node Type']} on ${node['Index Name']}` : node['Node Type']);
    // Only the outer scan's filter: the per-row subquery (legs count) has its own.
    if (depth <= 3 && /Scan/.test(node['Node Type'])) removed += node['Rows Removed by Filter'] ?? 0;
    if (`${node['Index Cond'] ?? ''} ${node.Filter ?? ''}`.includes('$')) generic = true;
    for (const child of node.Plans ?? []) walk(child, depth + 1);
  };
  walk(explained.Plan, 0);
  const top = explained.Plan;
  return {
    variant,
    generic,
    scan: [...new Set(scans)].join(', '),
    rows_removed_by_filter: removed,
    buffers: (top['Shared Hit Blocks'] ?? 0) + (top['Shared Read Blocks'] ?? 0),
    execution_ms: explained['Execution Time'],
    planning_ms: explained['Planning Time'],
  };
}

/**
 * The plan of the matching-queue statement as the service runs it: the exact SQL and parameters of
 * `findMatchable` (captured), PREPAREd and EXECUTEd seven times on one connection, so that the plan
 * cache has made its choice between custom and generic plans (after five executions) as it does for
 * the service's named prepared statements (a statement the service plans per call is forced to a custom
 * plan, as the service's unnamed statement gets); the last EXPLAIN ANALYZE is reported.
 */
async function explainMatchable(
  databaseUrl: string,
  instance: ServiceInstance,
  database: Database,
  variant: string,
  input: { white_label_id: string; amount_minor: number; exclude_merchant_id: string; limit: number; largest_first: boolean },
): Promise<PlanSummary> {
  let captured: { sql: string; params: readonly unknown[] } | null = null;
  await rolledBack(database, (tx) =>
    instance.services.withdrawals.findMatchable(
      capturing(tx, (sql, params) => (captured ??= { sql, params })),
      { ...input, livemode: false },
    ),
  );
  const statement = captured as { sql: string; params: readonly unknown[] } | null;
  if (!statement) throw new Error('findMatchable sent no matching-queue statement');
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('BEGIN');
    // The service sends a statement marked PLANNED_PER_CALL unnamed, so it gets a custom plan every time.
    if (statement.sql.startsWith(PLANNED_PER_CALL)) await client.query('SET LOCAL plan_cache_mode = force_custom_plan');
    await client.query(`PREPARE bench_matchable AS ${statement.sql}`);
    const literal = (value: unknown) => {
      if (value === null) return 'NULL';
      if (value instanceof Date) return `${client.escapeLiteral(value.toISOString())}::timestamptz`;
      if (typeof value === 'boolean' || typeof value === 'number') return String(value);
      return client.escapeLiteral(String(value));
    };
    const execute = `EXECUTE bench_matchable(${statement.params.map(literal).join(', ')})`;
    type Explained = { Plan: PlanNode; 'Execution Time': number; 'Planning Time': number };
    let first: Explained | null = null;
    let last: Explained | null = null;
    for (let round = 0; round < 7; round += 1) {
      const { rows } = await client.query<{ 'QUERY PLAN': Explained[] }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${execute}`);
      last = rows[0]?.['QUERY PLAN'][0] ?? null;
      first ??= last;
    }
    await client.query('ROLLBACK');
    if (!first || !last) throw new Error('EXPLAIN returned no plan');
    const summary = summarisePlan(variant, last);
    const custom = summarisePlan(variant, first);
    return { ...summary, first_scan: custom.scan, first_execution_ms: custom.execution_ms };
  } finally {
    await client.end();
  }
}

async function runScalePhase(settings: DepositSettings, databaseUrl: string, instance: ServiceInstance, database: Database): Promise<ScalePoint[]> {
  const { tenancy, withdrawals, deposits, clock, ledger, fees, beneficiaries, events } = instance.services;
  const brand = await tenancy.createBrand(BENCH_ACTOR, { name: 'Bench Scale Brand' });
  const white_label_id = brand.id;
  const largest = settings.scale_compare.at(-1) ?? 0;
  const fundingMinor = Math.max(1e9, Math.ceil(largest / settings.withdrawing_merchants) * settings.withdrawal_minor * 2);
  log(`scale: brand ${white_label_id}, ${settings.withdrawing_merchants} withdrawing merchants, ${settings.db_pool} depositing merchants`);
  const withdrawers = await createWithdrawingMerchants(instance, database, white_label_id, settings.withdrawing_merchants, fundingMinor, 'Scale');
  const depositors = await createDepositMerchants(instance, white_label_id, settings.db_pool, 0, 'Scale');
  // The matcher exactly as src/app.ts wires it (with the sandbox counterparty), and one without it, as
  // live mode runs, for the split rule (3): a deposit no single withdrawal can take.
  const matching = new MatchingService({ withdrawals, events, liquidity: new SandboxLiquidity({ clock, tenancy, beneficiaries, ledger, fees, withdrawals, events }) });
  const liveMatching = new MatchingService({ withdrawals, events, liquidity: null });
  const policy = { max_legs: DEFAULT_DEPOSIT_POLICY.max_legs, gateway: null };
  const splitAmount = settings.withdrawal_minor + settings.deposit_minor;
  const runTag = crypto.randomBytes(3).toString('hex');
  let depositCounter = 0;
  const points: ScalePoint[] = [];

  for (const target of settings.scale_compare) {
    const open = await countMatchable(database, white_label_id, settings.deposit_minor);
    const missing = Math.max(0, target - open);
    log(`scale ${target}: seeding ${missing} withdrawals (${open} open)`);
    const seedSeconds = missing > 0 ? await seedWithdrawals(settings, instance, database, withdrawers, missing) : 0;
    await analyze(database);
    await adminQuery(databaseUrl, 'CHECKPOINT');
    const openNow = await countMatchable(database, white_label_id, settings.deposit_minor);
    log(`scale ${openNow}: seeded in ${fixed(seedSeconds, 1)} s; timing ${settings.match_samples} rolled-back matches`);

    const depositor = depositors[0] as DepositMerchant;
    const request = (amount_minor: number) => ({
      white_label_id,
      livemode: false,
      merchant_id: depositor.account.merchant_id,
      deposit_id: `dep_bench_${runTag}_${(depositCounter += 1)}`,
      amount_minor,
      fill_preference: 'internal_only' as const,
      order_created_at: clock.now(),
    });
    const timeMatches = async (samples: number, amount: number, matcher: MatchingService, legs: number): Promise<Timing> => {
      const values: number[] = [];
      for (let index = 0; index < samples + Math.ceil(samples / 10); index += 1) {
        const started = performance.now();
        const match = await rolledBack(database, (tx) => matcher.match(tx, request(amount), policy, SYSTEM_CAUSE));
        const elapsed = performance.now() - started;
        if (!('legs' in match) || match.source !== 'internal' || match.legs.length !== legs) {
          throw new Error(`a match of ${amount} at ${openNow} open withdrawals gave ${'legs' in match ? `${match.legs.length} ${match.source} leg(s)` : 'nothing'}, expected ${legs} internal`);
        }
        // The first tenth warms the connections' prepared statements and is not counted.
        if (index >= Math.ceil(samples / 10)) values.push(elapsed);
      }
      return timingOf(values);
    };
    const match = await timeMatches(settings.match_samples, settings.deposit_minor, matching, 1);
    log(`scale ${openNow}: match mean ${fixed(match.mean_ms, 3)} ms, p99 ${fixed(match.p99_ms, 3)} ms; split (rule 3)`);
    const split = await timeMatches(settings.split_samples, splitAmount, liveMatching, 2);
    log(`scale ${openNow}: split mean ${fixed(split.mean_ms, 3)} ms, p99 ${fixed(split.p99_ms, 3)} ms; sandbox, larger than any withdrawal`);
    // The same amount in the sandbox: the counterparty opens a standing order that takes it whole.
    const standing = await timeMatches(settings.split_samples, splitAmount, matching, 1);
    log(`scale ${openNow}: standing mean ${fixed(standing.mean_ms, 3)} ms, p99 ${fixed(standing.p99_ms, 3)} ms; ${settings.scale_deposits} committed deposits`);

    // Committed service-level creations, one depositing merchant per worker.
    const latencies: number[] = [];
    let next = 0;
    let refused = 0;
    let firstProblem: string | null = null;
    const createdStart = performance.now();
    await Promise.all(
      depositors.map(async (merchant) => {
        while (next < settings.scale_deposits) {
          next += 1;
          depositCounter += 1;
          const n = depositCounter;
          const started = performance.now();
          try {
            const created = await database.transaction((tx) =>
              deposits.create(
                tx,
                merchant.account,
                {
                  amount_minor: settings.deposit_minor,
                  merchant_reference: `scale-${runTag}-${n}`,
                  end_user_ref: `scale-user-${runTag}-${n}`,
                  sender: { bank_code: SENDER_BANK, account_number: String(2_000_000_000 + n), account_name_th: SENDER_NAME },
                  client: { device_fingerprint: `fp-${runTag}-${n}`, ip: '198.51.100.7', user_agent: 'bench-deposits/1.0' },
                },
                SYSTEM_CAUSE,
              ),
            );
            if (!created.matched || created.deposit.liquidity_source !== 'internal') {
              refused += 1;
              firstProblem ??= `not matched internally: ${created.deposit.status} ${created.deposit.liquidity_source ?? ''}`;
            } else {
              latencies.push(performance.now() - started);
            }
          } catch (error) {
            refused += 1;
            firstProblem ??= error instanceof Error ? error.message : String(error);
          }
        }
      }),
    );
    const createdSeconds = (performance.now() - createdStart) / 1000;
    const create = { ...timingOf(latencies), per_second: latencies.length / createdSeconds, matched: latencies.length, refused, first_problem: firstProblem };
    log(`scale ${openNow}: deposits.create ${fixed(create.per_second, 0)}/s, mean ${fixed(create.mean_ms, 2)} ms, p99 ${fixed(create.p99_ms, 2)} ms; EXPLAIN ANALYZE`);

    const exclude = depositor.account.merchant_id;
    const plans = [
      await explainMatchable(databaseUrl, instance, database, 'rule 2: oldest that takes the deposit whole (LIMIT 1)', {
        white_label_id, amount_minor: settings.deposit_minor, exclude_merchant_id: exclude, limit: 1, largest_first: false,
      }),
      await explainMatchable(databaseUrl, instance, database, 'rule 2, nothing takes it whole (split deposit)', {
        white_label_id, amount_minor: splitAmount, exclude_merchant_id: exclude, limit: 1, largest_first: false,
      }),
      await explainMatchable(databaseUrl, instance, database, `rule 3: largest remaining first (LIMIT ${DEFAULT_DEPOSIT_POLICY.max_legs})`, {
        white_label_id, amount_minor: 100, exclude_merchant_id: exclude, limit: DEFAULT_DEPOSIT_POLICY.max_legs, largest_first: true,
      }),
    ];
    points.push({ open: openNow, seed_seconds: seedSeconds, seeded: missing, match, split, standing, create, plans });
  }
  return points;
}

// ---------------------------------------------------------------------------------------------------
// Report

function failuresOf(name: string, phase: string, result: Failures): string[] {
  const non201 = Object.entries(result.status_counts).filter(([status]) => status !== '201');
  if (result.non2xx === 0 && result.errors === 0 && result.timeouts === 0 && non201.length === 0) return [];
  return [
    `${name} (${phase}): ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts; statuses ${JSON.stringify(result.status_counts)}` +
      (result.sample ? `; first: ${result.sample}` : ''),
  ];
}

interface SeedReport {
  label: string;
  withdrawals: number;
  seconds: number;
}

function report(
  settings: DepositSettings,
  background: number,
  pgbench: PgbenchPhase | null,
  create: CreatePhase | null,
  scale: ScalePoint[],
  seeds: SeedReport[],
  pgbenchInit: string | null,
): { text: string; failures: string[] } {
  const tps = pgbench?.result.tps ?? Number.NaN;
  const lines: string[] = [];
  const failures: string[] = [];
  const maxRate = create ? count201(create.max) / create.max.duration_seconds : Number.NaN;

  const rows: string[][] = [];
  if (pgbench) {
    rows.push([
      `pgbench TPC-B (scale ${settings.pgbench_scale}, -c ${settings.pgbench_clients} -j 2)`,
      `${fixed(tps, 0)} tx/s`,
      '100 %',
      '(reference)',
      '',
      fixed(pgbench.result.p50_ms, 2),
      fixed(pgbench.result.p99_ms, 2),
      String(pgbench.result.failed),
    ]);
  }
  if (create) {
    const ratio = maxRate / tps;
    const bad = [create.warmup, create.second_warmup, create.max, create.paced].reduce(
      (sum, phase) => sum + (phase ? phase.errors + phase.timeouts + Object.entries(phase.status_counts).reduce((total, [status, count]) => total + (status === '201' ? 0 : count), 0) : 0),
      0,
    );
    rows.push([
      `deposit_create (HTTP, ${settings.connections} connections, closed loop)`,
      `${fixed(maxRate, 0)} req/s`,
      Number.isFinite(ratio) ? `${fixed(ratio * 100, 1)} %` : 'n/a',
      `≥ ${GOAL_RATIO * 100} %`,
      Number.isFinite(ratio) ? (ratio >= GOAL_RATIO ? 'met' : '**missed**') : 'not measured',
      fixed(create.max.saturated_p50_ms, 2),
      fixed(create.max.saturated_p99_ms, 2),
      String(bad),
    ]);
  }
  if (rows.length > 0) {
    lines.push(
      markdownTable(
        ['scenario', 'throughput', 'ratio to pgbench TPC-B', 'goal', 'result', 'p50 ms', 'p99 ms', 'non-201 / errors'],
        ['l', 'r', 'r', 'r', 'l', 'r', 'r', 'r'],
        rows,
      ),
    );
    lines.push('');
    lines.push('p50/p99 above are closed-loop latencies at the maximum (pgbench from its per-transaction log, autocannon for HTTP).');
  }

  if (create?.paced) {
    const paced = create.paced;
    lines.push('');
    lines.push(
      markdownTable(
        ['deposit_create, constant arrival rate', 'target → achieved req/s', 'p50 ms', 'p99 ms', 'max ms', 'goal', 'result', 'generator send lag p99 ms', 'non-201 / errors'],
        ['l', 'r', 'r', 'r', 'r', 'r', 'l', 'r', 'r'],
        [[
          `${fixed(settings.rate_fraction * 100, 0)} % of the maximum`,
          `${fixed(paced.target_rate, 0)} → ${fixed(paced.achieved_rate, 0)}`,
          fixed(paced.p50_ms, 2),
          fixed(paced.p99_ms, 2),
          fixed(paced.max_ms, 2),
          `p99 < ${GOAL_P99_MS} ms`,
          Number.isFinite(paced.p99_ms) && paced.p99_ms < GOAL_P99_MS ? 'met' : '**missed**',
          fixed(paced.send_lag_p99_ms, 2),
          String(paced.errors + paced.timeouts + Object.entries(paced.status_counts).reduce((total, [status, count]) => total + (status === '201' ? 0 : count), 0)),
        ]],
      ),
    );
  }

  const costRows: string[][] = [];
  if (pgbench) costRows.push(costRow('pgbench TPC-B', pgbench.cost, '7', '1'));
  if (create) {
    costRows.push(
      costRow('deposit_create', create.cost, perOperation(create.cost, (stats) => stats.round_trips), perOperation(create.cost, (stats) => stats.transactions)),
    );
  }
  if (costRows.length > 0) {
    lines.push('');
    lines.push(markdownTable(['per operation (closed loop)', ...COST_COLUMNS], ['l', ...COST_COLUMNS.map(() => 'r' as const)], costRows));
  }
  if (create) {
    lines.push('');
    lines.push(`Server peak resident memory (VmHWM) after the closed loop at the maximum rate: ${fixed(create.server_peak_rss_bytes / 1024 / 1024, 0)} MiB.`);
  }

  if (create && create.waits.rows.length > 0) {
    const total = create.waits.rows.reduce((sum, row) => sum + row.backends, 0);
    lines.push('');
    lines.push(
      markdownTable(
        ['deposit_create closed loop: backend state (pg_stat_activity every 20 ms)', 'statement (first 80 characters)', 'active backends (mean)', 'share'],
        ['l', 'l', 'r', 'r'],
        create.waits.rows.slice(0, 10).map((row) => [row.wait, `\`${row.query.replace(/\|/g, '\\|')}\``, fixed(row.backends, 2), `${fixed((row.backends / total) * 100, 0)} %`]),
      ),
    );
    lines.push('');
    lines.push(`${create.waits.samples} samples; on average ${fixed(total, 2)} of the service's ${settings.db_pool} connections were running a statement.`);
  }

  if (create) {
    const c = create.checks;
    lines.push('');
    lines.push(
      markdownTable(
        ['deposit_create check', 'value'],
        ['l', 'r'],
        [
          ['answered 201 (warm-ups + closed loop + open loop)', String(create.answered)],
          ['deposits in the database', String(c.deposits)],
          ['… awaiting_payment with internal liquidity', String(c.awaiting_payment_internal)],
          ['… with exactly one leg', String(c.with_one_leg)],
          ['legs reserved on seeded withdrawals', String(c.legs_on_seeded_withdrawals)],
          ['deposit.created events', String(c.created_events)],
          ['withdrawals opened by the sandbox counterparty', String(c.counterparty_withdrawals)],
          [`open withdrawals that can take ${fixed(settings.deposit_minor / 100, 2)} THB, before → after`, `${create.open_before} → ${create.open_after}`],
          ['API keys (600/min each), depositing merchants', `${create.keys}, ${settings.deposit_merchants}`],
        ],
      ),
    );
    if (c.deposits < create.answered) failures.push(`deposit_create: ${create.answered} answers 201 but ${c.deposits} deposits in the database`);
    if (c.awaiting_payment_internal !== c.deposits) failures.push(`deposit_create: ${c.deposits - c.awaiting_payment_internal} deposits not awaiting_payment with internal liquidity`);
    if (c.with_one_leg !== c.deposits || c.legs_on_seeded_withdrawals !== c.deposits) failures.push(`deposit_create: legs: ${c.with_one_leg} with one leg, ${c.legs_on_seeded_withdrawals} on seeded withdrawals, of ${c.deposits}`);
    if (c.created_events !== c.deposits) failures.push(`deposit_create: ${c.created_events} deposit.created events for ${c.deposits} deposits`);
    if (c.counterparty_withdrawals > 0) failures.push(`deposit_create: the sandbox counterparty opened ${c.counterparty_withdrawals} withdrawals (seeded liquidity ran short)`);
  }

  if (seeds.length > 0) {
    lines.push('');
    lines.push(
      markdownTable(
        ['seeding (services.withdrawals.create, not measured above)', 'withdrawals', 'seconds', 'per second'],
        ['l', 'r', 'r', 'r'],
        seeds.map((seed) => [seed.label, String(seed.withdrawals), fixed(seed.seconds, 1), fixed(seed.withdrawals / Math.max(seed.seconds, 0.001), 0)]),
      ),
    );
  }

  if (scale.length > 0) {
    const first = scale[0] as ScalePoint;
    const last = scale.at(-1) as ScalePoint;
    const ratio = (pick: (point: ScalePoint) => number) => `${fixed(pick(last) / pick(first), 2)}×`;
    const header = ['matching cost', ...scale.map((point) => `${point.open.toLocaleString('en-US')} open`), `${last.open.toLocaleString('en-US')} ÷ ${first.open.toLocaleString('en-US')}`];
    const row = (label: string, pick: (point: ScalePoint) => number, digits: number) => [label, ...scale.map((point) => fixed(pick(point), digits)), ratio(pick)];
    lines.push('');
    lines.push(
      markdownTable(header, ['l', ...scale.map(() => 'r' as const), 'r'], [
        row('match, 1 leg (rule 2): mean ms', (point) => point.match.mean_ms, 3),
        row('match, 1 leg (rule 2): p99 ms', (point) => point.match.p99_ms, 3),
        row('split match, 2 legs (rule 3, live-like): mean ms', (point) => point.split.mean_ms, 2),
        row('split match, 2 legs (rule 3, live-like): p99 ms', (point) => point.split.p99_ms, 2),
        row('same amount in the sandbox (counterparty opens an order): mean ms', (point) => point.standing.mean_ms, 2),
        row('same amount in the sandbox (counterparty opens an order): p99 ms', (point) => point.standing.p99_ms, 2),
        row(`deposits.create committed, ${settings.db_pool} concurrent: per second`, (point) => point.create.per_second, 0),
        row('deposits.create committed: mean ms', (point) => point.create.mean_ms, 2),
        row('deposits.create committed: p99 ms', (point) => point.create.p99_ms, 2),
      ]),
    );
    lines.push('');
    lines.push(
      `Matches: ${first.match.samples} sequential \`matching.match\` calls per count (the matcher as src/app.ts wires it, sandbox counterparty included), ` +
        `each in its own transaction, rolled back, so the queue is the same for every sample; split: ${first.split.samples} calls for ` +
        `${fixed((settings.withdrawal_minor + settings.deposit_minor) / 100, 2)} THB, more than any one withdrawal holds, with no liquidity provider (as live mode), and the same ${first.standing.samples} times with the sandbox counterparty ` +
        `(rule 2 finds nothing, the counterparty opens a standing order under the brand's liquidity lock). ` +
        `deposits.create: ${settings.scale_deposits} committed creations per count, each its own transaction, ${settings.db_pool} at a time, one depositing merchant per worker.`,
    );
    const planRows: string[][] = [];
    for (const point of scale) {
      for (const plan of point.plans) {
        planRows.push([
          point.open.toLocaleString('en-US'),
          plan.variant,
          plan.generic ? 'generic' : 'custom',
          plan.scan,
          String(plan.rows_removed_by_filter),
          String(plan.buffers),
          fixed(plan.planning_ms, 3),
          fixed(plan.execution_ms, 3),
          plan.first_scan === plan.scan ? fixed(plan.first_execution_ms ?? Number.NaN, 3) : `${fixed(plan.first_execution_ms ?? Number.NaN, 3)} (${plan.first_scan ?? ''})`,
        ]);
      }
    }
    lines.push('');
    lines.push(
      markdownTable(
        ['open', 'lockMatchable (EXPLAIN ANALYZE, 7th execution of the prepared statement)', 'plan', 'scan', 'rows removed by filter', 'buffers', 'planning ms', 'execution ms', '1st execution (custom plan) ms'],
        ['r', 'l', 'l', 'l', 'r', 'r', 'r', 'r', 'r'],
        planRows,
      ),
    );
    for (const point of scale) {
      if (point.create.refused > 0) failures.push(`scale ${point.open}: ${point.create.refused} deposits.create not matched; first: ${point.create.first_problem ?? ''}`);
    }
  }

  lines.push('');
  const details: string[] = [
    `Settings: ${settings.seconds} s per phase, ${settings.warmup_seconds} s warm-up then ${settings.code_warmup_seconds} s on the measured process, service pool ${settings.db_pool}`,
    `HTTP ${settings.connections} connections, open loop at ${fixed(settings.rate_fraction * 100, 0)} %`,
    `${settings.open_withdrawals} open withdrawals of ${fixed(settings.withdrawal_minor / 100, 2)} THB in the sandbox brand from ${settings.mixed ? `the ${settings.deposit_merchants} depositing` : settings.withdrawing_merchants} merchants`,
    `deposits of ${fixed(settings.deposit_minor / 100, 2)} THB from ${settings.deposit_merchants} merchants × ${settings.keys_per_merchant} keys`,
    `pgbench scale ${settings.pgbench_scale}, -c ${settings.pgbench_clients} -j 2`,
    new Date().toISOString().slice(0, 10),
    `node ${process.version}`,
    `${os.cpus().length} cores`,
    `machine ${fixed(background * 100, 0)} % busy before the run (other processes)`,
  ];
  lines.push(
    details.join(', ') +
      (settings.database_settings.length > 0 ? `, **what-if database settings: ${settings.database_settings.map(([name, value]) => `${name}=${value}`).join(', ')}**.` : '.'),
  );
  if (pgbench) lines.push(`pgbench: \`${pgbenchInit ?? 'pgbench -i'}\`, then \`${pgbench.result.command.replace(/postgres(ql)?:\/\/\S+/, '<db>')}\``);

  if (settings.statement_profile && create?.cost.stats) {
    const entries = Object.entries(create.cost.stats.profile).sort((a, b) => b[1].ms - a[1].ms);
    const total = entries.reduce((sum, [, entry]) => sum + entry.ms, 0);
    lines.push('');
    lines.push(
      markdownTable(
        ['deposit_create (server process): statement (first 90 characters)', 'calls/op', 'ms/op (wall, summed over connections)', 'share'],
        ['l', 'r', 'r', 'r'],
        entries.slice(0, 30).map(([key, entry]) => [
          `\`${key.replace(/\|/g, '\\|')}\``,
          fixed(entry.calls / Math.max(1, create.cost.ops), 2),
          fixed(entry.ms / Math.max(1, create.cost.ops), 3),
          `${fixed((entry.ms / total) * 100, 1)} %`,
        ]),
      ),
    );
  }

  if (create) {
    if (create.warmup) failures.push(...failuresOf('deposit_create', 'warm-up', create.warmup));
    if (create.second_warmup) failures.push(...failuresOf('deposit_create', 'second warm-up', create.second_warmup));
    failures.push(...failuresOf('deposit_create', 'closed loop', create.max));
    if (create.paced) {
      failures.push(...failuresOf('deposit_create', 'open loop', create.paced));
      if (create.paced.achieved_rate < create.paced.target_rate * 0.95) {
        failures.push(`deposit_create: the open loop achieved ${fixed(create.paced.achieved_rate, 0)} of ${fixed(create.paced.target_rate, 0)} req/s`);
      }
    }
  }
  if (pgbench && pgbench.result.failed > 0) failures.push(`pgbench: ${pgbench.result.failed} failed transactions`);
  return { text: lines.join('\n'), failures };
}

// ---------------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const settings = readDepositSettings();
  const startedAt = performance.now();
  const idleBefore = machineCpu();
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const background = busyShare(idleBefore, machineCpu());
  log(`machine ${fixed(background * 100, 0)} % busy before the run`);
  if (background > 0.25) log('WARNING: other processes are using the CPU; the numbers of this run will be low and noisy');
  log(`fresh database ${settings.database_name} on ${new URL(settings.database_url).host}`);
  const databaseUrl = await createFreshDatabase(settings.database_url, settings.database_name, settings.database_settings);
  let server: ServerProcess | null = null;
  let instance: ServiceInstance | null = null;
  try {
    const masterKey = crypto.randomBytes(32);
    const database = await openDatabase({ database_url: databaseUrl, data_dir: null, pool_size: settings.db_pool });
    await migrate(database);
    instance = createServiceInstance({
      config: loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', WORKER_ENABLED: 'false', API_ENABLED: 'false', DB_POOL_SIZE: String(settings.db_pool) }),
      database,
      logger: createLogger('silent'),
      master_key: masterKey,
      owns_database: true,
    });
    await instance.listen();

    let pgbenchInit: string | null = null;
    if (settings.only.has('pgbench')) {
      log(`pgbench -i -s ${settings.pgbench_scale}`);
      pgbenchInit = await initPgbench({ pgbench_path: settings.pgbench_path, database_url: databaseUrl, scale: settings.pgbench_scale });
    }

    const seeds: SeedReport[] = [];
    let depositMerchants: DepositMerchant[] = [];
    let sandboxBrand = '';
    if (settings.only.has('deposit_create')) {
      const sandbox = await instance.services.tenancy.bootstrapSandbox();
      if (!sandbox) throw new Error('the bench database already had a brand');
      sandboxBrand = sandbox.white_label_id;
      log(`setting up ${settings.deposit_merchants} depositing merchants × ${settings.keys_per_merchant} keys and ${settings.withdrawing_merchants} withdrawing merchants`);
      depositMerchants = await createDepositMerchants(instance, sandboxBrand, settings.deposit_merchants, settings.keys_per_merchant, 'Bench');
      const withdrawerCount = settings.mixed ? settings.deposit_merchants : settings.withdrawing_merchants;
      const funding = Math.max(1e9, Math.ceil(settings.open_withdrawals / withdrawerCount) * settings.withdrawal_minor * 2);
      // BENCH_MIXED_MERCHANTS=1: the depositing merchants are the withdrawing ones (each pays the others' withdrawals).
      const withdrawers = await createWithdrawingMerchants(
        instance,
        database,
        sandboxBrand,
        withdrawerCount,
        funding,
        'Bench',
        settings.mixed ? depositMerchants.map((merchant) => merchant.account) : [],
      );
      log(`seeding ${settings.open_withdrawals} open withdrawals in the sandbox brand`);
      const seconds = await seedWithdrawals(settings, instance, database, withdrawers, settings.open_withdrawals);
      seeds.push({ label: 'sandbox brand, for deposit_create', withdrawals: settings.open_withdrawals, seconds });
      log(`seeded in ${fixed(seconds, 1)} s`);
      await analyze(database);
    }
    // Start every phase from the same state: no checkpoint owed for the set-up's writes.
    await adminQuery(databaseUrl, 'CHECKPOINT');

    const pgbench = settings.only.has('pgbench') ? await runPgbenchTpcbPhase(settings, databaseUrl) : null;

    let create: CreatePhase | null = null;
    if (settings.only.has('deposit_create')) {
      server = await ServerProcess.start(settings, databaseUrl, masterKey);
      log(`server process ready at ${server.base_url}`);
      create = await runCreatePhase(settings, server, database, depositMerchants, sandboxBrand, async () => {
        await server?.stop();
        server = await ServerProcess.start(settings, databaseUrl, masterKey);
        return server;
      });
      await server.stop();
      server = null;
    }

    let scale: ScalePoint[] = [];
    if (settings.only.has('scale')) {
      scale = await runScalePhase(settings, databaseUrl, instance, database);
      for (const point of scale) if (point.seeded > 0) seeds.push({ label: `scale brand, up to ${point.open.toLocaleString('en-US')} open`, withdrawals: point.seeded, seconds: point.seed_seconds });
    }

    const { text, failures } = report(settings, background, pgbench, create, scale, seeds, pgbenchInit);
    process.stdout.write(`\n${text}\n\n`);
    log(`done in ${fixed((performance.now() - startedAt) / 1000, 0)} s`);
    if (failures.length > 0) {
      process.stderr.write(`\nBENCHMARK FAILED:\n${failures.map((line) => `  - ${line}`).join('\n')}\n`);
      process.exitCode = 1;
    }
  } finally {
    if (server) await server.stop();
    if (instance) await instance.stop();
    await dropDatabase(settings.database_url, settings.database_name);
  }
}

// Every process of the bench runs with the service's heap setting, as `npm start` does (src/platform/heap.ts).
limitHeapGrowth();
if (process.argv.includes('--serve')) {
  serve().catch((error: unknown) => {
    process.stderr.write(`bench server failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
