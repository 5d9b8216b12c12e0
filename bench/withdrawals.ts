import crypto from 'node:crypto';
import os from 'node:os';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createServiceInstance, type ServiceInstance } from '../src/app.ts';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase, type Database, type Queryable } from '../src/platform/db.ts';
import { createLogger } from '../src/platform/logger.ts';
import { migrate } from '../src/platform/migrate.ts';
import { signedHeaders } from '../src/http/canonical.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
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
import {
  newStats,
  countingDatabase,
  diffStats,
  copyStats,
  COST_COLUMNS,
  costRow,
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
 * `npm run bench:withdrawals`: the withdrawal benchmark of issue 3, in one run on real PostgreSQL.
 *
 * "Withdrawal creation and fill recording on real PostgreSQL, with the ledger check on, as a ratio of
 * pgbench TPC-B throughput measured in the same run. Goal: at least 40 %."
 *
 * The parent creates a fresh database (BENCH_DATABASE, default bench_withdrawals), migrates it, fills
 * the pgbench TPC-B tables in it (`pgbench -i -s BENCH_PGBENCH_SCALE`), and builds a service instance
 * of its own on it (worker off) to set up BENCH_MERCHANTS merchants in the sandbox brand, each with
 * BENCH_KEYS_PER_MERCHANT API keys, a large `available` balance and a verified beneficiary. It forks
 * this file with `--serve` for the HTTP server (LOG_LEVEL=silent, worker off, the spec's rate limits
 * unchanged) and then measures, in this order:
 *
 *   pgbench_tpcb      `pgbench -n -b tpcb-like -c <pool> -j 2 -T <seconds>` on the same database
 *   withdrawal_create POST /v1/pay/withdrawals over HTTP: signed, a fresh Idempotency-Key,
 *                     merchant_reference and end_user_ref per request (with a complete `client`, so
 *                     each end user's 10/min bucket sees one request), keys round-robin so that each
 *                     key stays far below its 600/min `pay_write` bucket; a warm-up, ANALYZE, a
 *                     restarted server and a second warm-up (plans on tables with statistics, as a
 *                     running service has them), then a closed loop (autocannon),
 *                     then an open loop at BENCH_RATE_FRACTION of that maximum for p50/p99
 *   fill_record       in this process, no HTTP, as the deposit side will call it: per fill
 *                     `withdrawals.reserveLeg` then `withdrawals.recordFill` (two transactions, or one
 *                     with BENCH_FILL_TRANSACTIONS=1) on open orders of 1,000.00 THB taken 100.00 THB at
 *                     a time, so each order takes max_splits = 10 fills and the last one settles it;
 *                     BENCH_FILL_WORKERS concurrent workers (default: the pool size) on the pool;
 *                     after the warm-up, ANALYZE, and the measured fills run on a new pool of a new
 *                     service instance after a second warm-up
 *
 * The ledger check: after each service phase, `services.ledger.verify` for every merchant wallet
 * (balances re-derived from the movements), plus a cross-check that each wallet's `reserved` bucket
 * equals what its live orders hold. Any inconsistency, non-2xx answer, refused leg function or error
 * makes the run exit 1 after printing the tables. The database constraints are always on.
 *
 * Knobs (environment): DATABASE_URL, BENCH_DATABASE (bench_withdrawals), BENCH_SECONDS (10),
 * BENCH_WARMUP_SECONDS (3), BENCH_CODE_WARMUP_SECONDS (15, the second warm-up, on the restarted server or the new pool), BENCH_CONNECTIONS (32), BENCH_DB_POOL (10), BENCH_PGBENCH_CLIENTS (= pool),
 * BENCH_PGBENCH_SCALE (10), BENCH_RATE_FRACTION (0.5), BENCH_ONLY (subset of
 * pgbench,withdrawal_create,fill_record), BENCH_MERCHANTS (20), BENCH_KEYS_PER_MERCHANT (3),
 * BENCH_FILL_WORKERS (= pool), BENCH_FILL_TRANSACTIONS (2), BENCH_FILL_ORDERS (3000 open orders
 * prepared for the fill phase), BENCH_DATABASE_SETTINGS (what-if ALTER DATABASE, as in foundation.ts),
 * BENCH_STATEMENT_PROFILE=1 (prints where the database time of each service phase goes, by statement).
 */

const GOAL_RATIO = 0.4;
/** Above this share of the CPU used during a phase going to other processes, the run is reported as disturbed. */
const OTHER_CPU_WARNING_SHARE = 0.1;
const ORDER_AMOUNT_MINOR = 100_000;
/** max_splits of the default policy is 10: ten legs of 100.00 THB fill a 1,000.00 THB order. */
const SPLITS_PER_ORDER = 10;
const LEG_AMOUNT_MINOR = ORDER_AMOUNT_MINOR / SPLITS_PER_ORDER;
/** 1 billion baht per wallet: far more than any run can lock. */
const FUNDING_MINOR = 100_000_000_000;
const CREATE_PATH = '/v1/pay/withdrawals';
const SOMCHAI = { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } as const;
const BENCH_ACTOR = { actor_type: 'system' as const, actor_id: 'bench', request_id: null };

interface WithdrawalSettings extends BenchSettings {
  pgbench_scale: number;
  merchants: number;
  keys_per_merchant: number;
  fill_workers: number;
  fill_transactions: 1 | 2;
  fill_orders: number;
  statement_profile: boolean;
}

function readWithdrawalSettings(): WithdrawalSettings {
  const base = readSettings({ database_name: 'bench_withdrawals', only: 'pgbench,withdrawal_create,fill_record' });
  return {
    ...base,
    pgbench_scale: intFromEnv('BENCH_PGBENCH_SCALE', 10, 1),
    merchants: intFromEnv('BENCH_MERCHANTS', 20, 1, 1000),
    keys_per_merchant: intFromEnv('BENCH_KEYS_PER_MERCHANT', 3, 1, 100),
    fill_workers: intFromEnv('BENCH_FILL_WORKERS', base.db_pool, 1, 1000),
    fill_transactions: intFromEnv('BENCH_FILL_TRANSACTIONS', 2, 1, 2) as 1 | 2,
    fill_orders: intFromEnv('BENCH_FILL_ORDERS', 3000, 1),
    statement_profile: process.env.BENCH_STATEMENT_PROFILE === '1',
  };
}

// ---------------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------------
// The server process

interface ReadyMessage {
  type: 'ready';
  base_url: string;
}

interface UsageMessage {
  type: 'usage';
  id: number;
  cpu_us: number;
  stats: StatementStats;
}

type ChildMessage = ReadyMessage | UsageMessage;
type ParentMessage = { type: 'usage'; id: number } | { type: 'stop' };

async function serve(): Promise<void> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  const masterKey = process.env.BENCH_MASTER_KEY;
  if (!databaseUrl || !masterKey || !process.send) throw new Error('--serve is started by bench/withdrawals.ts itself');
  // The rate limits stay the spec's: the parent spreads the load over enough keys and end users.
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    WORKER_ENABLED: 'false',
    DB_POOL_SIZE: process.env.BENCH_DB_POOL ?? '10',
  });
  const stats = newStats();
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
      process.send?.({ type: 'usage', id: message.id, cpu_us: usage.user + usage.system, stats: copyStats(stats) } satisfies UsageMessage);
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

  static start(settings: WithdrawalSettings, databaseUrl: string, masterKey: Buffer): Promise<ServerProcess> {
    const child = fork(fileURLToPath(import.meta.url), ['--serve'], {
      execArgv: process.execArgv,
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
// Set-up: merchants, keys, money and beneficiaries

interface BenchMerchant {
  account: WalletAccount;
  beneficiary_id: string;
  keys: { api_key: string; signing_secret: string }[];
}

async function setUpMerchants(settings: WithdrawalSettings, instance: ServiceInstance, database: Database): Promise<BenchMerchant[]> {
  const { tenancy, ledger, beneficiaries } = instance.services;
  const sandbox = await tenancy.bootstrapSandbox();
  if (!sandbox) throw new Error('the bench database already had a brand');
  const merchants: BenchMerchant[] = [];
  const pendingBeneficiaries: string[] = [];
  for (let index = 0; index < settings.merchants; index += 1) {
    const merchant = await tenancy.createMerchant(BENCH_ACTOR, { white_label_id: sandbox.white_label_id, name: `Bench Merchant ${index + 1}` });
    const account: WalletAccount = { white_label_id: sandbox.white_label_id, merchant_id: merchant.id, livemode: false };
    const keys: BenchMerchant['keys'] = [];
    for (let key = 0; key < settings.keys_per_merchant; key += 1) {
      const created = await tenancy.createApiKey(BENCH_ACTOR, { merchant_id: merchant.id, scope_white_label_id: sandbox.white_label_id, livemode: false });
      keys.push({ api_key: created.api_key, signing_secret: created.signing_secret });
    }
    const beneficiaryId = await database.transaction(async (tx) => {
      const movementKey = `bench_funding:${merchant.id}`;
      const posted = await ledger.post(tx, {
        account,
        type: 'adjustment',
        amount_minor: FUNDING_MINOR,
        bucket_from: null,
        bucket_to: 'available',
        movement_key: movementKey,
        source: { type: 'bench_funding', id: movementKey },
        reason_code: 'bench_funding',
        cause: SYSTEM_CAUSE,
      });
      if (!posted.ok) throw posted.error;
      const { beneficiary } = await beneficiaries.create(tx, account, { ...SOMCHAI }, SYSTEM_CAUSE);
      return beneficiary.id;
    });
    pendingBeneficiaries.push(beneficiaryId);
    merchants.push({ account, beneficiary_id: beneficiaryId, keys });
  }
  // The name verification jobs (sandbox bank directory), run here since the worker is off.
  await instance.worker.runDueJobs();
  for (const merchant of merchants) {
    const found = await beneficiaries.get(database, merchant.account, merchant.beneficiary_id);
    if (found?.status !== 'verified') throw new Error(`beneficiary ${merchant.beneficiary_id} did not verify: ${found?.status ?? 'missing'}`);
  }
  return merchants;
}

// ---------------------------------------------------------------------------------------------------
// The ledger check

interface LedgerCheck {
  phase: string;
  wallets: number;
  consistent: number;
  movements: number;
  /** Wallets whose `reserved` equals what their live orders hold. */
  reserved_matches: number;
  problems: string[];
  ms: number;
}

async function checkLedger(phase: string, instance: ServiceInstance, database: Database, merchants: BenchMerchant[]): Promise<LedgerCheck> {
  const started = performance.now();
  const check: LedgerCheck = { phase, wallets: merchants.length, consistent: 0, movements: 0, reserved_matches: 0, problems: [], ms: 0 };
  for (const merchant of merchants) {
    const verified = await instance.services.ledger.verify(database, merchant.account);
    check.movements += verified.movements;
    if (verified.consistent) check.consistent += 1;
    else check.problems.push(`${phase}: wallet ${merchant.account.merchant_id} is inconsistent: stored ${JSON.stringify(verified.wallet)}, folded ${JSON.stringify(verified.folded)}`);
    // What the orders hold in the reserved bucket: unpaid principal plus unrecognised fee of live orders.
    const { rows } = await database.query<{ held: number }>(
      `SELECT coalesce(sum(remaining_minor + reserved_minor + fee_total_minor - fee_recognized_minor), 0)::bigint AS held
         FROM withdrawal_orders
        WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND status IN ('pending_approval', 'open', 'partially_filled')`,
      [merchant.account.white_label_id, merchant.account.merchant_id, merchant.account.livemode],
    );
    const held = rows[0]?.held ?? 0;
    if (held === verified.wallet.reserved_minor) check.reserved_matches += 1;
    else check.problems.push(`${phase}: wallet ${merchant.account.merchant_id} has reserved ${verified.wallet.reserved_minor} but its live orders hold ${held}`);
  }
  check.ms = performance.now() - started;
  const verdict = check.problems.length === 0 ? 'all consistent' : `${check.problems.length} PROBLEM(S)`;
  log(`ledger check after ${phase}: ${check.consistent}/${check.wallets} wallets consistent, ${check.movements} movements, ${verdict}`);
  for (const problem of check.problems) log(`LEDGER CHECK FAILED: ${problem}`);
  return check;
}

// ---------------------------------------------------------------------------------------------------
// Phase 1: pgbench TPC-B

// bench/meters.ts's `runPgbenchTpcbPhase`, shared with bench/deposits.ts and bench/foundation.ts.

// ---------------------------------------------------------------------------------------------------
// Phase 2: withdrawal creation over HTTP

interface CreatePhase {
  warmup: ClosedLoopResult | null;
  /** The warm-up after the ANALYZE, on a new server. */
  second_warmup: ClosedLoopResult | null;
  max: ClosedLoopResult;
  paced: PacedResult | null;
  cost: Cost;
  /** 2xx answers counted by the generators, and orders found in the database afterwards. */
  answered_2xx: number;
  orders_in_database: number;
}

function createRequests(merchants: BenchMerchant[]): RequestFactory {
  const keys = merchants.flatMap((merchant) => merchant.keys.map((key) => ({ ...key, beneficiary_id: merchant.beneficiary_id })));
  // Interleave the merchants: key i belongs to merchant i mod M, so consecutive requests hit different wallets.
  const ordered = keys.map((_, index) => {
    const perMerchant = merchants[0]?.keys.length ?? 1;
    const merchant = index % merchants.length;
    const key = Math.floor(index / merchants.length) % perMerchant;
    return keys[merchant * perMerchant + key] as (typeof keys)[number];
  });
  const runTag = crypto.randomBytes(4).toString('hex');
  let counter = 0;
  return (): BenchRequest => {
    counter += 1;
    const key = ordered[counter % ordered.length] as (typeof ordered)[number];
    const body = JSON.stringify({
      amount_minor: ORDER_AMOUNT_MINOR,
      currency: 'THB',
      merchant_reference: `bench-${runTag}-${counter}`,
      // One request per end user: the per-user bucket (10 a minute) never decides.
      end_user_ref: `user-${runTag}-${counter}`,
      beneficiary_id: key.beneficiary_id,
      client: { device_fingerprint: `fp-${runTag}-${counter}`, ip: `198.51.100.${counter % 250}`, user_agent: 'bench-withdrawals/1.0' },
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
        idempotency_key: `bench-${runTag}-${counter}`,
      }),
    };
  };
}

function twoHundreds(result: { completed: number; non2xx: number; errors: number }): number {
  return Math.max(0, result.completed - result.non2xx - result.errors);
}

async function runCreatePhase(
  settings: WithdrawalSettings,
  firstServer: ServerProcess,
  database: Database,
  merchants: BenchMerchant[],
  /** Stops the server and starts a new one on the same database (fresh connections and plan caches). */
  restart: () => Promise<ServerProcess>,
): Promise<CreatePhase> {
  let server = firstServer;
  const build = createRequests(merchants);
  let warmup: ClosedLoopResult | null = null;
  let secondWarmup: ClosedLoopResult | null = null;
  if (settings.warmup_seconds > 0) {
    log(`withdrawal_create: warm-up ${settings.warmup_seconds} s`);
    warmup = await runClosedLoop({ base_url: server.base_url, connections: settings.connections, seconds: settings.warmup_seconds, build });
    // As in bench/deposits.ts: a running service plans on tables with statistics. The bench's tables were
    // nearly empty when the warm-up's statements were first planned, and a connection keeps a prepared
    // statement's generic plan until the table is analysed: the wallet's lock statement kept a plan that read
    // 637 to 3,274 buffers a call where a fresh plan reads 11 (2026-11-26). The warm-up's rows analysed, a new
    // server plans on them.
    await database.exec('ANALYZE wallets, balance_transactions, withdrawal_orders, withdrawal_legs, beneficiaries, events, idempotency_records');
    server = await restart();
    // Long enough for V8 to have optimised the hot code as well (BenchSettings.code_warmup_seconds).
    log(`withdrawal_create: server restarted after ANALYZE; second warm-up ${settings.code_warmup_seconds} s`);
    if (settings.code_warmup_seconds > 0) {
      secondWarmup = await runClosedLoop({ base_url: server.base_url, connections: settings.connections, seconds: settings.code_warmup_seconds, build });
    }
  }
  log(`withdrawal_create: closed loop, ${settings.connections} connections, ${settings.seconds} s`);
  const meter = await startMeter(settings);
  const serverBefore = await server.usage();
  const max = await runClosedLoop({ base_url: server.base_url, connections: settings.connections, seconds: settings.seconds, build });
  const serverAfter = await server.usage();
  const cost = await stopMeter(settings, meter, twoHundreds(max), serverAfter.cpu_us - serverBefore.cpu_us, diffStats(serverAfter.stats, serverBefore.stats));
  const rate = max.requests_per_second * settings.rate_fraction;
  log(`withdrawal_create: ${fixed(max.requests_per_second, 0)} req/s; open loop at ${fixed(rate, 0)} req/s for ${settings.seconds} s`);
  const paced = rate >= 1 ? await runPaced({ base_url: server.base_url, rate, seconds: settings.seconds, max_sockets: settings.connections * 4, build }) : null;
  if (paced) log(`withdrawal_create: p50 ${fixed(paced.p50_ms, 2)} ms, p99 ${fixed(paced.p99_ms, 2)} ms at ${fixed(paced.achieved_rate, 0)} req/s`);
  const { rows } = await database.query<{ count: number }>('SELECT count(*)::int AS count FROM withdrawal_orders WHERE merchant_id = ANY($1::text[])', [
    merchants.map((merchant) => merchant.account.merchant_id),
  ]);
  return {
    warmup,
    second_warmup: secondWarmup,
    max,
    paced,
    cost,
    answered_2xx: [warmup, secondWarmup, max, paced].reduce((sum, phase) => sum + (phase ? twoHundreds(phase) : 0), 0),
    orders_in_database: rows[0]?.count ?? 0,
  };
}

// ---------------------------------------------------------------------------------------------------
// Phase 3: fills through the leg functions, in process

interface OpenOrder {
  white_label_id: string;
  merchant_id: string;
  withdrawal_id: string;
}

interface FillRun {
  fills: number;
  settled_orders: number;
  seconds: number;
  latencies: number[];
  refusals: Record<string, number>;
  errors: number;
  first_problem: string | null;
  supply_exhausted: boolean;
}

interface FillPhase {
  warmup: FillRun | null;
  /** The warm-up after the ANALYZE, on new connections. */
  second_warmup: FillRun | null;
  measured: FillRun;
  cost: Cost;
  orders_prepared: number;
  orders_topped_up: number;
}

/** Open orders for the fills: those the HTTP phase created, topped up through the service if too few. */
async function prepareOrders(settings: WithdrawalSettings, instance: ServiceInstance, database: Database, merchants: BenchMerchant[]): Promise<{ orders: OpenOrder[]; topped_up: number }> {
  const { rows } = await database.query<OpenOrder>(
    `SELECT white_label_id, merchant_id, withdrawal_id FROM withdrawal_orders
      WHERE status = 'open' AND remaining_minor = $1 AND max_splits = $2 AND merchant_id = ANY($4::text[])
      ORDER BY created_at, withdrawal_id LIMIT $3`,
    [ORDER_AMOUNT_MINOR, SPLITS_PER_ORDER, settings.fill_orders, merchants.map((merchant) => merchant.account.merchant_id)],
  );
  const orders = [...rows];
  const missing = settings.fill_orders - orders.length;
  if (missing > 0) {
    log(`fill_record: creating ${missing} more open orders through the service (not measured)`);
    const runTag = crypto.randomBytes(4).toString('hex');
    let next = 0;
    await Promise.all(
      Array.from({ length: settings.db_pool }, async () => {
        while (next < missing) {
          const index = next++;
          const merchant = merchants[index % merchants.length] as BenchMerchant;
          const created = await database.transaction((tx) =>
            instance.services.withdrawals.create(
              tx,
              merchant.account,
              {
                amount_minor: ORDER_AMOUNT_MINOR,
                merchant_reference: `fill-${runTag}-${index}`,
                end_user_ref: `fill-user-${index}`,
                beneficiary_id: merchant.beneficiary_id,
              },
              SYSTEM_CAUSE,
            ),
          );
          if (!created.ok) throw created.error;
          if (created.value.status !== 'open' || created.value.max_splits !== SPLITS_PER_ORDER) {
            throw new Error(`a prepared order is ${created.value.status} with max_splits ${created.value.max_splits}; the fill phase needs open orders of ${SPLITS_PER_ORDER} splits`);
          }
          orders.push({ white_label_id: merchant.account.white_label_id, merchant_id: merchant.account.merchant_id, withdrawal_id: created.value.id });
        }
      }),
    );
  }
  return { orders, topped_up: Math.max(0, missing) };
}

async function runFills(settings: WithdrawalSettings, instance: ServiceInstance, database: Database, supply: { orders: OpenOrder[]; next: number }, seconds: number): Promise<FillRun> {
  const withdrawals = instance.services.withdrawals;
  const run: FillRun = { fills: 0, settled_orders: 0, seconds, latencies: [], refusals: {}, errors: 0, first_problem: null, supply_exhausted: false };
  const runTag = crypto.randomBytes(4).toString('hex');
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let lastDone = started;

  const fillOnce = async (order: OpenOrder, split: number): Promise<'partially_filled' | 'settled' | string> => {
    const reserveInput = {
      white_label_id: order.white_label_id,
      livemode: false,
      withdrawal_id: order.withdrawal_id,
      deposit_id: `dep_bench_${runTag}_${order.withdrawal_id}_${split}`,
      deposit_leg_key: `bench:${runTag}:${order.withdrawal_id}:${split}`,
      amount_minor: LEG_AMOUNT_MINOR,
      cause: SYSTEM_CAUSE,
    };
    const fill = async (tx: Queryable, legRef: string) => withdrawals.recordFill(tx, { white_label_id: order.white_label_id, leg_ref: legRef, cause: SYSTEM_CAUSE });
    if (settings.fill_transactions === 1) {
      return database.transaction(async (tx) => {
        const reserved = await withdrawals.reserveLeg(tx, reserveInput);
        if (!reserved.ok) return `reserveLeg: ${reserved.error.code}`;
        const filled = await fill(tx, reserved.value.leg_ref);
        return filled.ok ? filled.value.withdrawal.status : `recordFill: ${filled.error.code}`;
      });
    }
    const reserved = await database.transaction((tx) => withdrawals.reserveLeg(tx, reserveInput));
    if (!reserved.ok) return `reserveLeg: ${reserved.error.code}`;
    const filled = await database.transaction((tx) => fill(tx, reserved.value.leg_ref));
    return filled.ok ? filled.value.withdrawal.status : `recordFill: ${filled.error.code}`;
  };

  const worker = async () => {
    while (performance.now() < deadline) {
      if (supply.next >= supply.orders.length) {
        run.supply_exhausted = true;
        return;
      }
      const order = supply.orders[supply.next++] as OpenOrder;
      for (let split = 0; split < SPLITS_PER_ORDER && performance.now() < deadline; split += 1) {
        const began = performance.now();
        let outcome: string;
        try {
          outcome = await fillOnce(order, split);
        } catch (error) {
          run.errors += 1;
          run.first_problem ??= `${order.withdrawal_id} fill ${split + 1}: ${error instanceof Error ? error.message : String(error)}`;
          break;
        }
        const done = performance.now();
        const expected = split === SPLITS_PER_ORDER - 1 ? 'settled' : 'partially_filled';
        if (outcome !== expected) {
          run.refusals[outcome] = (run.refusals[outcome] ?? 0) + 1;
          run.first_problem ??= `${order.withdrawal_id} fill ${split + 1}: ${outcome} (expected ${expected})`;
          break;
        }
        if (done <= deadline) {
          run.fills += 1;
          run.latencies.push(done - began);
          if (outcome === 'settled') run.settled_orders += 1;
        }
        lastDone = done;
      }
    }
  };
  await Promise.all(Array.from({ length: settings.fill_workers }, worker));
  // A run cut short by running out of orders is rated over the time it actually ran.
  if (run.supply_exhausted) run.seconds = Math.max(0.001, (Math.min(lastDone, deadline) - started) / 1000);
  return run;
}

async function runFillPhase(
  settings: WithdrawalSettings,
  instance: ServiceInstance,
  database: Database,
  stats: StatementStats,
  merchants: BenchMerchant[],
  /** A new service instance on a new pool of the same database, counting into `stats`; the caller's stays open. */
  freshServices: () => Promise<ServiceInstance & { database: Database }>,
): Promise<FillPhase> {
  const prepared = await prepareOrders(settings, instance, database, merchants);
  // Interleave by merchant, so that consecutive orders (and concurrent workers) lock different wallets.
  const byMerchant = new Map<string, OpenOrder[]>();
  for (const order of prepared.orders) byMerchant.set(order.merchant_id, [...(byMerchant.get(order.merchant_id) ?? []), order]);
  const queues = [...byMerchant.values()];
  const interleaved: OpenOrder[] = [];
  for (let round = 0; interleaved.length < prepared.orders.length; round += 1) {
    for (const queue of queues) if (queue[round]) interleaved.push(queue[round] as OpenOrder);
  }
  const supply = { orders: interleaved, next: 0 };
  log(`fill_record: ${interleaved.length} open orders of ${fixed(ORDER_AMOUNT_MINOR / 100, 2)} THB, ${SPLITS_PER_ORDER} fills each`);

  const mode = `${settings.fill_workers} workers, ${settings.fill_transactions === 2 ? 'reserveLeg and recordFill in two transactions' : 'reserveLeg + recordFill in one transaction'}`;
  let warmup: FillRun | null = null;
  let secondWarmup: FillRun | null = null;
  let measuredWith = { instance, database };
  let fresh: (ServiceInstance & { database: Database }) | null = null;
  try {
    if (settings.warmup_seconds > 0) {
      log(`fill_record: warm-up ${settings.warmup_seconds} s`);
      warmup = await runFills(settings, instance, database, supply, settings.warmup_seconds);
      // As for withdrawal_create (runCreatePhase): the legs table was empty when this process's connections
      // first planned the fills, and their cached plans scanned it (the leg reads touched 211 buffers a call).
      // The warm-up's legs analysed, the fills are measured on a new pool, which plans on them.
      await database.exec('ANALYZE wallets, balance_transactions, withdrawal_orders, withdrawal_legs, fee_schedules, events, clearings');
      fresh = await freshServices();
      measuredWith = { instance: fresh, database: fresh.database };
      // Long enough for V8 to have optimised the fills' code in this process (BenchSettings.code_warmup_seconds).
      log(`fill_record: new connections after ANALYZE; second warm-up ${settings.code_warmup_seconds} s`);
      if (settings.code_warmup_seconds > 0) {
        secondWarmup = await runFills(settings, measuredWith.instance, measuredWith.database, supply, settings.code_warmup_seconds);
      }
    }
    log(`fill_record: ${mode}, ${settings.seconds} s`);
    const statsBefore = copyStats(stats);
    const meter = await startMeter(settings);
    const measured = await runFills(settings, measuredWith.instance, measuredWith.database, supply, settings.seconds);
    // This process is the service here (null): its CPU is the fills', and there is no load generator.
    const cost = await stopMeter(settings, meter, measured.fills, null, diffStats(stats, statsBefore));
    log(`fill_record: ${fixed(measured.fills / measured.seconds, 0)} fills/s`);
    return { warmup, second_warmup: secondWarmup, measured, cost, orders_prepared: prepared.orders.length, orders_topped_up: prepared.topped_up };
  } finally {
    await fresh?.stop();
  }
}

// ---------------------------------------------------------------------------------------------------
// Report

function failuresOf(name: string, phase: string, result: Failures): string[] {
  if (result.non2xx === 0 && result.errors === 0 && result.timeouts === 0) return [];
  return [
    `${name} (${phase}): ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts; statuses ${JSON.stringify(result.status_counts)}` +
      (result.sample ? `; first: ${result.sample}` : ''),
  ];
}

function fillFailures(phase: string, run: FillRun | null): string[] {
  if (!run) return [];
  const failures: string[] = [];
  const refused = Object.values(run.refusals).reduce((sum, count) => sum + count, 0);
  if (refused + run.errors > 0) {
    failures.push(`fill_record (${phase}): ${refused} refused (${JSON.stringify(run.refusals)}), ${run.errors} errors; first: ${run.first_problem ?? ''}`);
  }
  if (run.supply_exhausted) failures.push(`fill_record (${phase}): ran out of open orders after ${fixed(run.seconds, 1)} s; raise BENCH_FILL_ORDERS`);
  return failures;
}

function report(
  settings: WithdrawalSettings,
  background: number,
  pgbench: PgbenchPhase | null,
  create: CreatePhase | null,
  fill: FillPhase | null,
  checks: LedgerCheck[],
  pgbenchInit: string | null,
): { text: string; failures: string[] } {
  const tps = pgbench?.result.tps ?? Number.NaN;
  const ratioCells = (rate: number): string[] => {
    const ratio = rate / tps;
    if (!Number.isFinite(ratio)) return ['n/a', `≥ ${GOAL_RATIO * 100} %`, 'not measured'];
    return [`${fixed(ratio * 100, 1)} %`, `≥ ${GOAL_RATIO * 100} %`, ratio >= GOAL_RATIO ? 'met' : '**missed**'];
  };
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
    const failures = [create.warmup, create.max, create.paced].reduce((sum, phase) => sum + (phase ? phase.non2xx + phase.errors + phase.timeouts : 0), 0);
    rows.push([
      `withdrawal_create (HTTP, ${settings.connections} connections)`,
      `${fixed(create.max.requests_per_second, 0)} req/s`,
      ...ratioCells(create.max.requests_per_second),
      fixed(create.max.saturated_p50_ms, 2),
      fixed(create.max.saturated_p99_ms, 2),
      String(failures),
    ]);
  }
  if (fill) {
    const latencies = Float64Array.from(fill.measured.latencies).sort();
    const refused = [fill.warmup, fill.measured].reduce(
      (sum, run) => sum + (run ? run.errors + Object.values(run.refusals).reduce((total, count) => total + count, 0) : 0),
      0,
    );
    const rate = fill.measured.fills / fill.measured.seconds;
    rows.push([
      `fill_record (in process, ${settings.fill_workers} workers, ${settings.fill_transactions} tx/fill)`,
      `${fixed(rate, 0)} fills/s`,
      ...ratioCells(rate),
      fixed(percentile(latencies, 0.5), 2),
      fixed(percentile(latencies, 0.99), 2),
      String(refused),
    ]);
  }
  const lines: string[] = [];
  lines.push(
    markdownTable(
      ['scenario', 'ops/s', 'ratio to pgbench TPC-B', 'goal', 'result', 'p50 ms', 'p99 ms', 'non-2xx / refused / errors'],
      ['l', 'r', 'r', 'r', 'l', 'r', 'r', 'r'],
      rows,
    ),
  );
  lines.push('');
  lines.push('p50/p99 above are closed-loop latencies at the maximum (pgbench from its per-transaction log, autocannon, the fill workers\' own timings).');

  if (create?.paced) {
    lines.push('');
    lines.push(
      markdownTable(
        ['withdrawal_create, open loop', 'target → achieved req/s', 'p50 ms', 'p99 ms', 'generator send lag p99 ms'],
        ['l', 'r', 'r', 'r', 'r'],
        [[
          `${fixed(settings.rate_fraction * 100, 0)} % of the maximum`,
          `${fixed(create.paced.target_rate, 0)} → ${fixed(create.paced.achieved_rate, 0)}`,
          fixed(create.paced.p50_ms, 2),
          fixed(create.paced.p99_ms, 2),
          fixed(create.paced.send_lag_p99_ms, 2),
        ]],
      ),
    );
  }

  const costRows: string[][] = [];
  if (pgbench) costRows.push(costRow('pgbench TPC-B', pgbench.cost, '7', '1'));
  if (create) {
    costRows.push(
      costRow('withdrawal_create', create.cost, perOperation(create.cost, (stats) => stats.round_trips), perOperation(create.cost, (stats) => stats.transactions)),
    );
  }
  if (fill) {
    costRows.push(
      costRow('fill_record', fill.cost, perOperation(fill.cost, (stats) => stats.round_trips), perOperation(fill.cost, (stats) => stats.transactions)),
    );
  }
  lines.push('');
  lines.push(
    markdownTable(
      ['per operation', ...COST_COLUMNS],
      ['l', ...COST_COLUMNS.map(() => 'r' as const)],
      costRows,
    ),
  );
  lines.push('');
  lines.push(
    'CPU per operation during the measured closed loop. Service: the server process (withdrawal_create) or this process (fill_record). ' +
      'Load generator: autocannon in this process, or the pgbench client. PostgreSQL: the backends of the bench database and the ' +
      'WAL writer, checkpointer and background writer, sampled from /proc. Other processes: the rest of the machine (anything ' +
      'else running meanwhile). Round trips count every statement the service sends (for withdrawal_create including the ' +
      'signed-request admission and the per-user rate counter) plus BEGIN and COMMIT. WAL is the whole cluster\'s, so another ' +
      'database being written meanwhile inflates it.',
  );

  const disturbed: string[] = [];
  for (const [name, cost] of [['pgbench', pgbench?.cost], ['withdrawal_create', create?.cost], ['fill_record', fill?.cost]] as const) {
    if (!cost) continue;
    const share = cost.other_cpu_us / (cost.app_cpu_us + cost.loadgen_cpu_us + cost.postgres_cpu_us + cost.other_cpu_us);
    if (share > OTHER_CPU_WARNING_SHARE) disturbed.push(`${name} (${fixed(share * 100, 0)} %)`);
  }
  if (disturbed.length > 0) {
    lines.push('');
    lines.push(
      `**Disturbed run: other processes took a share of the CPU used during ${disturbed.join(', ')}; ` +
        'those throughputs are understated. Re-run on a quiet machine.**',
    );
    log(`WARNING: other processes used the CPU during ${disturbed.join(', ')}`);
  }

  if (checks.length > 0) {
    lines.push('');
    lines.push(
      markdownTable(
        ['ledger check after', 'wallets', 'ledger.verify consistent', 'reserved = live orders hold', 'movements', 'check ms'],
        ['l', 'r', 'r', 'r', 'r', 'r'],
        checks.map((check) => [
          check.phase,
          String(check.wallets),
          `${check.consistent}/${check.wallets}`,
          `${check.reserved_matches}/${check.wallets}`,
          String(check.movements),
          fixed(check.ms, 0),
        ]),
      ),
    );
  }

  if (settings.statement_profile) {
    for (const [name, cost] of [['withdrawal_create (server process)', create?.cost], ['fill_record', fill?.cost]] as const) {
      if (!cost?.stats) continue;
      const entries = Object.entries(cost.stats.profile).sort((a, b) => b[1].ms - a[1].ms);
      const total = entries.reduce((sum, [, entry]) => sum + entry.ms, 0);
      lines.push('');
      lines.push(
        markdownTable(
          [`${name}: statement (first 90 characters)`, 'calls/op', 'ms/op (wall, summed over connections)', 'share'],
          ['l', 'r', 'r', 'r'],
          entries.slice(0, 25).map(([key, entry]) => [
            `\`${key.replace(/\|/g, '\\|')}\``,
            fixed(entry.calls / Math.max(1, cost.ops), 2),
            fixed(entry.ms / Math.max(1, cost.ops), 3),
            `${fixed((entry.ms / total) * 100, 1)} %`,
          ]),
        ),
      );
    }
  }

  lines.push('');
  const details: string[] = [
    `Settings: ${settings.seconds} s per phase, ${settings.warmup_seconds} s warm-up then ${settings.code_warmup_seconds} s on the measured process, service pool ${settings.db_pool}`,
    `${settings.merchants} merchants in the sandbox brand with ${settings.keys_per_merchant} keys each`,
    `HTTP ${settings.connections} connections, open loop at ${fixed(settings.rate_fraction * 100, 0)} %`,
    `fills: ${settings.fill_workers} workers, ${settings.fill_transactions} transaction(s) per fill`,
    `pgbench scale ${settings.pgbench_scale}, -c ${settings.pgbench_clients} -j 2`,
    new Date().toISOString().slice(0, 10),
    `node ${process.version}`,
    `${os.cpus().length} cores`,
    `machine ${fixed(background * 100, 0)} % busy before the run (other processes)`,
  ];
  lines.push(
    details.join(', ') +
      (settings.database_settings.length > 0
        ? `, **what-if database settings: ${settings.database_settings.map(([name, value]) => `${name}=${value}`).join(', ')}**.`
        : '.'),
  );
  if (pgbench) lines.push(`pgbench: \`${pgbenchInit ?? 'pgbench -i'}\`, then \`${pgbench.result.command.replace(/postgres(ql)?:\/\/\S+/, '<db>')}\``);
  if (create) {
    lines.push(
      `withdrawal_create: ${create.answered_2xx} orders answered 201 over the warm-ups, closed and open loop; ${create.orders_in_database} orders in the database ` +
        '(a few more than answered is expected: autocannon stops with requests in flight).',
    );
  }
  if (fill) {
    lines.push(
      `fill_record: ${fill.orders_prepared} open orders prepared (${fill.orders_topped_up} created through the service for this phase, the rest by withdrawal_create); ` +
        `${fill.measured.fills} fills measured, ${fill.measured.settled_orders} orders settled by their 10th fill.`,
    );
  }

  const failures: string[] = [];
  if (create) {
    if (create.warmup) failures.push(...failuresOf('withdrawal_create', 'warm-up', create.warmup));
    if (create.second_warmup) failures.push(...failuresOf('withdrawal_create', 'second warm-up', create.second_warmup));
    failures.push(...failuresOf('withdrawal_create', 'closed loop', create.max));
    if (create.paced) {
      failures.push(...failuresOf('withdrawal_create', 'open loop', create.paced));
      if (create.paced.achieved_rate < create.paced.target_rate * 0.95) {
        failures.push(`withdrawal_create: the open loop achieved ${fixed(create.paced.achieved_rate, 0)} of ${fixed(create.paced.target_rate, 0)} req/s`);
      }
    }
    if (create.orders_in_database < create.answered_2xx) {
      failures.push(`withdrawal_create: ${create.answered_2xx} answers 201 but only ${create.orders_in_database} orders in the database`);
    }
  }
  if (fill) failures.push(...fillFailures('warm-up', fill.warmup), ...fillFailures('second warm-up', fill.second_warmup), ...fillFailures('measured', fill.measured));
  if (pgbench && pgbench.result.failed > 0) failures.push(`pgbench: ${pgbench.result.failed} failed transactions`);
  for (const check of checks) failures.push(...check.problems.map((problem) => `LEDGER CHECK: ${problem}`));
  return { text: lines.join('\n'), failures };
}

// ---------------------------------------------------------------------------------------------------
// Main

async function checkpoint(serverUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query('CHECKPOINT');
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const settings = readWithdrawalSettings();
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
    const stats = newStats();
    const database = countingDatabase(await openDatabase({ database_url: databaseUrl, data_dir: null, pool_size: settings.db_pool }), stats, settings.statement_profile);
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
    log(`setting up ${settings.merchants} merchants with ${settings.keys_per_merchant} keys, money and a verified beneficiary each`);
    const merchants = await setUpMerchants(settings, instance, database);
    // Start every phase from the same state: no checkpoint owed for the set-up's writes.
    await checkpoint(databaseUrl);

    const checks: LedgerCheck[] = [];
    const pgbench = settings.only.has('pgbench') ? await runPgbenchTpcbPhase(settings, databaseUrl) : null;

    let create: CreatePhase | null = null;
    if (settings.only.has('withdrawal_create')) {
      server = await ServerProcess.start(settings, databaseUrl, masterKey);
      log(`server process ready at ${server.base_url}`);
      create = await runCreatePhase(settings, server, database, merchants, async () => {
        await server?.stop();
        server = await ServerProcess.start(settings, databaseUrl, masterKey);
        return server;
      });
      await server.stop();
      server = null;
      checks.push(await checkLedger('withdrawal_create', instance, database, merchants));
    }

    let fill: FillPhase | null = null;
    if (settings.only.has('fill_record')) {
      fill = await runFillPhase(settings, instance, database, stats, merchants, async () => {
        const freshDatabase = countingDatabase(await openDatabase({ database_url: databaseUrl, data_dir: null, pool_size: settings.db_pool }), stats, settings.statement_profile);
        const fresh = createServiceInstance({
          config: loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', WORKER_ENABLED: 'false', API_ENABLED: 'false', DB_POOL_SIZE: String(settings.db_pool) }),
          database: freshDatabase,
          logger: createLogger('silent'),
          master_key: masterKey,
          owns_database: true,
        });
        return Object.assign(fresh, { database: freshDatabase });
      });
      checks.push(await checkLedger('fill_record', instance, database, merchants));
    }

    const { text, failures } = report(settings, background, pgbench, create, fill, checks, pgbenchInit);
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
