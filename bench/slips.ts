import crypto from 'node:crypto';
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import sharp from 'sharp';
import { createServiceInstance, type ServiceInstance } from '../src/app.ts';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase, type Database } from '../src/platform/db.ts';
import { createLogger } from '../src/platform/logger.ts';
import { migrate } from '../src/platform/migrate.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
import { DEFAULT_DEPOSIT_POLICY } from '../src/deposits/policy.ts';
import type { WalletAccount } from '../src/ledger/types.ts';
import type { SlipUpload } from '../src/slip-capability/capability.ts';
import { PROCESS_SLIP_TASK } from '../src/slips/service.ts';
import { renderSlipImage } from '../src/sandbox/slip-image.ts';
import { decodeSlipImage, QUICK_DECODE_LONG_EDGE_PX, readQrTexts, SlipReader } from '../src/verification/slip-reader.ts';
import { parseSlipPayload } from '../src/verification/slip-payload.ts';
import { corpusDetails, makeVariant, VARIANTS } from './qr-corpus.ts';
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
  runPgbench,
  type BenchSettings,
  type RequestFactory,
  type CpuTimes,
  type PgbenchResult,
} from './support.ts';
import { fundWithdrawer } from './setup.ts';
import {
  adminQuery,
  CLOCK_TICKS_PER_SECOND,
  COST_COLUMNS,
  costRow as phaseCostRow,
  CpuSampler,
  type CpuGrouping,
  countingDatabase,
  diffStats,
  newStats,
  peakResidentBytes,
  perOperation,
  startMeter as startPhaseMeter,
  stopMeter as stopPhaseMeter,
  walBytes,
  type Cost as PhaseCost,
  type StatementStats,
} from './meters.ts';
import { limitHeapGrowth } from '../src/platform/heap.ts';

/**
 * `npm run bench:slips`: the slip benchmark of issue 10, in one run on real PostgreSQL.
 *
 * "Durable intake of 1 MiB JPEGs (202 rate, p50/p99), and the time from 202 to `deposit.settled` at half
 * of that rate. Report CPU per intake and per verification, and the QR reading success rate over the test
 * corpus. Goals: intake of 1 MiB slips moves at least 25 % of the MiB/s that plain inserts of the same
 * 1 MiB rows reach on the same PostgreSQL in the same run (the storage limit); 202 → settled p99 under
 * 2 s at half rate; the QR reader reads 100 % of sandbox slips, including the same slips re-encoded as
 * JPEG quality 70, scaled to 50 %, and photographed-looking (rotated 3°, noise)."
 *
 * The parent creates a fresh database (BENCH_DATABASE, default bench_slips), migrates it, fills the
 * pgbench TPC-B tables and builds a service instance of its own on it (worker and HTTP off) for the
 * set-up: in the sandbox brand, BENCH_DEPOSIT_MERCHANTS depositing merchants and BENCH_WITHDRAWING_MERCHANTS
 * withdrawing merchants (funded by an `adjustment` credit, a beneficiary verified against the sandbox
 * bank) whose open withdrawals give every deposit internal liquidity, as in live mode. Deposits are
 * created with `services.deposits.create` in the parent (no merchant key is involved, so no key's
 * 600/min bucket can decide anything), each with its own end user, device and sender account; each
 * answer carries the order's `slip_upload` capability, minted for UPLOAD_BASE_URL http://slips.bench.test,
 * and every upload carries that Host header, as a browser posting to `upload_url` would.
 *
 * The slips are 1 MiB JPEGs (BENCH_SLIP_BYTES ± BENCH_SLIP_TOLERANCE_PERCENT): a sandbox slip as a phone
 * photo of it, the way a payer who photographs the screen and sends the picture through a messenger
 * uploads it: scaled to 1440 pixels wide (1692 × 2752 with the border), turned 3°, blurred 0.8, with
 * Gaussian noise (sigma 40, blended as an overlay), at the JPEG quality that lands nearest the target
 * size (calibrated on the first slip, corrected per slip). A screenshot cannot be 1 MiB: a sandbox slip
 * at 1440 pixels and JPEG quality 100 is 0.52 MiB, because flat colours compress too well. The uploads are
 * multipart `file` parts without the optional `payload` field, so the consumer reads every QR from pixels.
 *
 * Phases, in this order, each after a CHECKPOINT:
 *
 *   pgbench_tpcb  `pgbench -n -b tpcb-like -c <clients> -j 2 -T <seconds>` after a warm-up, for the usual
 *                 ratio line; metered at once by this file's meters and by bench/meters.ts's, whose PostgreSQL
 *                 CPU per transaction is the unit of the settle phase's ratio. Selected as `pgbench`.
 *   storage       the storage limit: plain INSERTs of random 1 MiB `bytea` rows (the size of the intake's
 *                 ciphertext: the image plus AES-GCM's 12-byte iv and 16-byte tag) into `bench_plain_blobs`,
 *                 a table made `LIKE slip_blobs` (same columns, key and storage), with the statement the
 *                 service's blob store runs, from BENCH_STORAGE_CLIENTS connections (default: the service's
 *                 pool, the most inserts the intake can have in flight), each inserting back to back, for
 *                 BENCH_SECONDS after a warm-up: rows/s, MiB/s and the per-row latency.
 *   intake        POST to `slip_upload.upload_url` over HTTP to a forked server process (worker off, so only
 *                 intake is measured; pool BENCH_DB_POOL; LOG_LEVEL silent; the spec's rate limits as they
 *                 are): a fresh Idempotency-Key per request, one upload per order until every order has
 *                 one (then a second and a third, the most an order takes). Every answer must be 202.
 *                 Closed loop (autocannon, BENCH_CONNECTIONS) for the maximum 202 rate, a pause for its
 *                 requests in flight to finish, then an open loop at a constant arrival rate of
 *                 BENCH_RATE_FRACTION of it for p50/p99. Reported: 202/s, MiB/s of evidence (decoded image
 *                 bytes), its ratio to the plain inserts' MiB/s, CPU per intake (server process +
 *                 PostgreSQL), round trips and transactions per intake (countingDatabase in the server),
 *                 WAL per intake and the server's peak RSS. Afterwards every 202 is checked in the
 *                 database: a receipt with its blob and its pending `slips.process` job.
 *   end_to_end    a second set of orders, each with its own sandbox bank transfer (services.sandboxBank in
 *                 the parent) and its slip as a 1 MiB photo, uploaded at BENCH_RATE_FRACTION of the intake
 *                 maximum for BENCH_END_TO_END_SECONDS, to the same server (worker off) while a separate
 *                 worker process (API off, WORKER_CONCURRENCY as configured) consumes the jobs: it reads
 *                 the QR from pixels, asks the sandbox bank, runs the checks and settles. The intake's own
 *                 pending jobs are deleted first, so the worker sees only this phase's slips. 202 →
 *                 settled per order is `deposit_orders.settled_at - slip_receipts.received_at` (both from
 *                 the service's system clock), split at the order's `deposit.slip_received` event (the
 *                 claim): the wait for the worker (its 250 ms idle poll and its free slots) and the
 *                 processing. CPU per verification is the worker process plus its PostgreSQL backends
 *                 (told apart by application_name), per intake the API process plus its backends.
 *                 BENCH_WORKER_IN_SERVER=1 runs the worker inside the server process instead (the
 *                 default deployment, one process with both roles); the CPU can then not be split.
 *   settle        issue 15's "slip settlement (verified slip → settled, credited, filled, events): ≤ 6 round trips,
 *                 CPU ≤ 5× a TPC-B transaction", which the phases above cannot show: there the worker's CPU is
 *                 decoding pixels and reading QR codes. BENCH_SETTLE_WARMUP_SLIPS + BENCH_SETTLE_SLIPS orders,
 *                 each with its own sandbox transfer; each upload (multipart, to a server process with the
 *                 worker off) is the sandbox's slip PNG as the bank app shows it (about 100 KiB, no photo
 *                 treatment) with the slip's mini-QR text as the optional `payload` field, so the worker takes
 *                 the reference from the payload and never decodes the image (it still reads the sealed image
 *                 from the blob store, opens it and checks its hash). The warm-up batch is processed first
 *                 by a worker process started held (API off, its job loop only: no webhook dispatcher, no
 *                 housekeeping), which is then held again; then the whole measured batch is uploaded, the
 *                 database analysed and checkpointed, and the same worker runs until every measured slip's
 *                 job has succeeded. Metered with bench/meters.ts as bench/deposits.ts and bench/foundation.ts
 *                 are: the worker's CPU as the service, PostgreSQL (the bench database's backends, the WAL
 *                 writer, checkpointer and background writer), round trips and transactions (countingDatabase
 *                 in the worker) and WAL per processed slip, printed in their columns with "(service +
 *                 PostgreSQL) ÷ TPC-B", whose unit is PostgreSQL's CPU per transaction of this run's pgbench
 *                 phase under the same meters. This file's cost table shows the same stretch with the worker's
 *                 own PostgreSQL sessions apart from the background processes, which every database of the
 *                 server shares (other work on the server lands there). Afterwards every measured order must be settled, with its
 *                 deposit.settled event and its withdrawal leg filled, and every receipt read from the
 *                 payload. On by default: setting up costs about 60 ms of sandbox transfer and slip rendering
 *                 per order in the parent, so the phase adds about two minutes to a run at the defaults.
 *   qr            SlipReader.read over BENCH_QR_SLIPS sandbox slips in every variant of bench/qr-corpus.ts
 *                 (png, jpeg70, half, photographed, webp, exif_rotated), over the intake's 1 MiB photos,
 *                 and the end-to-end slips as the pipeline read them (receipt `verification.source`).
 *
 * Any non-202 answer, error, failed check, unsettled or unreadable slip makes the run exit 1 after
 * printing the tables.
 *
 * Knobs (environment): DATABASE_URL, BENCH_DATABASE (bench_slips), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS
 * (3), BENCH_CONNECTIONS (10), BENCH_DB_POOL (10), BENCH_PGBENCH_CLIENTS (= pool), BENCH_PGBENCH_SCALE (10),
 * BENCH_RATE_FRACTION (0.5), BENCH_ONLY (subset of pgbench,storage,intake,end_to_end,settle,qr; end_to_end
 * needs intake or BENCH_END_TO_END_RATE; settle's ratio needs pgbench), BENCH_STORAGE_CLIENTS (= pool), BENCH_SLIP_BYTES (1048576),
 * BENCH_SLIP_TOLERANCE_PERCENT (5), BENCH_INTAKE_IMAGES (6 distinct 1 MiB photos, uploaded in turn),
 * BENCH_INTAKE_ORDERS (1500), BENCH_END_TO_END_SECONDS (10), BENCH_END_TO_END_RATE (uploads/s; default the
 * intake maximum × BENCH_RATE_FRACTION), BENCH_DRAIN_TIMEOUT_SECONDS (60, the longest wait for the last
 * slips to be processed), BENCH_WORKER_CONCURRENCY (4, the service's default), BENCH_WORKER_IN_SERVER=1,
 * BENCH_DEPOSIT_MERCHANTS (10), BENCH_WITHDRAWING_MERCHANTS (10), BENCH_DEPOSIT_MINOR (100000),
 * BENCH_WITHDRAWAL_MINOR (1000000), BENCH_QR_SLIPS (30), BENCH_SETTLE_SLIPS (1000, the measured batch),
 * BENCH_SETTLE_WARMUP_SLIPS (600, processed before it by the same worker: with 200, V8 was still optimising the worker's code in the measured batch, 12 % of its CPU), BENCH_EVIDENCE_STORE (postgres | filesystem, a
 * what-if of the intake with the filesystem blob store in a temporary directory), BENCH_DATABASE_SETTINGS
 * (what-if ALTER DATABASE), BENCH_STATEMENT_PROFILE=1 (where the server's and the workers' database time
 * goes, by statement, the settle phase's worker included), BENCH_SERVER_NODE_ARGS and BENCH_WORKER_NODE_ARGS (node flags of the server and of
 * the worker process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`), BENCH_QUICK=1 (small numbers, for
 * trying the script).
 */

const GOAL_STORAGE_RATIO = 0.25;
const GOAL_SETTLED_P99_MS = 2000;
/** Issue 15: slip settlement (verified slip → settled, credited, filled, events), per slip. */
const GOAL_SETTLE_ROUND_TRIPS = 6;
const GOAL_SETTLE_TPCB_RATIO = 5;
const MEBIBYTE_BYTES = 1_048_576;
const PHASES = ['pgbench', 'storage', 'intake', 'end_to_end', 'settle', 'qr'] as const;
/**
 * As many uploads in flight as the service has database connections, and as the plain inserts have
 * clients: the same concurrency on both sides of the ratio. More connections only add load-generator CPU
 * (measured: 8, 16 and 32 connections gave 52, 48 and 45 202/s, the generator spending 1.3, 4.2 and
 * 5.7 ms of CPU per upload copying 1 MiB bodies).
 */
const DEFAULT_CONNECTIONS = 10;
/** The upload address the capabilities name; the requests go to the server's port with this Host header. */
const UPLOAD_HOST = 'slips.bench.test';
const UPLOAD_BASE_URL = `http://${UPLOAD_HOST}`;
/** AES-256-GCM's iv (12 bytes) and tag (16 bytes) around the image (src/slips/evidence-store.ts). */
const EVIDENCE_OVERHEAD_BYTES = 28;
/** src/jobs/worker.ts waits this long between polls when the last one found nothing to claim. */
const WORKER_IDLE_POLL_MS = 250;
const SENDER_BANK = '004';
const SENDER_NAME = 'สมหญิง รักไทย';
const BENCH_ACTOR = { actor_type: 'system' as const, actor_id: 'bench', request_id: null };
/** Pause between the closed loop and the open loop, for the closed loop's requests in flight to finish. */
const SETTLE_MS = 2000;
/** The PostgreSQL sessions of each process are told apart by their application_name. */
const APPLICATION_NAMES = { api: 'bench_slips_api', worker: 'bench_slips_worker', storage: 'bench_slips_storage' } as const;
/** The photo look of the 1 MiB slips: see the header. */
const PHOTO_WIDTH_PX = 1440;
const PHOTO_BORDER_PX = 60;
const PHOTO_ROTATION_DEGREES = 3;
const PHOTO_BLUR_SIGMA = 0.8;
const PHOTO_NOISE_SIGMA = 40;
const PHOTO_BACKGROUND = '#E6E1D8';

interface SlipSettings extends BenchSettings {
  quick: boolean;
  pgbench_scale: number;
  storage_clients: number;
  slip_bytes: number;
  slip_tolerance_percent: number;
  intake_images: number;
  intake_orders: number;
  end_to_end_seconds: number;
  end_to_end_rate: number | null;
  drain_timeout_seconds: number;
  worker_concurrency: number;
  worker_in_server: boolean;
  deposit_merchants: number;
  withdrawing_merchants: number;
  deposit_minor: number;
  withdrawal_minor: number;
  qr_slips: number;
  settle_slips: number;
  settle_warmup_slips: number;
  evidence_store: 'postgres' | 'filesystem';
  statement_profile: boolean;
}

function readSlipSettings(): SlipSettings {
  const quick = process.env.BENCH_QUICK === '1';
  if (quick) {
    // Small numbers for trying the script; any knob given explicitly still wins.
    process.env.BENCH_SECONDS ||= '3';
    process.env.BENCH_WARMUP_SECONDS ||= '1';
  }
  process.env.BENCH_CONNECTIONS ||= String(DEFAULT_CONNECTIONS);
  const base = readSettings({ database_name: 'bench_slips', only: PHASES.join(',') });
  for (const phase of base.only) {
    if (!(PHASES as readonly string[]).includes(phase)) throw new Error(`BENCH_ONLY: unknown phase "${phase}" (known: ${PHASES.join(', ')})`);
  }
  const depositMinor = intFromEnv('BENCH_DEPOSIT_MINOR', 100_000, DEFAULT_DEPOSIT_POLICY.min_amount_minor, DEFAULT_DEPOSIT_POLICY.max_amount_minor);
  if (depositMinor % 100 !== 0) throw new Error('BENCH_DEPOSIT_MINOR must be whole baht');
  const endToEndRateText = process.env.BENCH_END_TO_END_RATE;
  const endToEndRate = endToEndRateText === undefined || endToEndRateText === '' ? null : Number(endToEndRateText);
  if (endToEndRate !== null && !(Number.isFinite(endToEndRate) && endToEndRate > 0)) throw new Error(`BENCH_END_TO_END_RATE must be a positive number, got "${endToEndRateText}"`);
  if (base.only.has('end_to_end') && !base.only.has('intake') && endToEndRate === null) {
    throw new Error('BENCH_ONLY=end_to_end without intake needs BENCH_END_TO_END_RATE (the upload rate)');
  }
  const store = process.env.BENCH_EVIDENCE_STORE || 'postgres';
  if (store !== 'postgres' && store !== 'filesystem') throw new Error(`BENCH_EVIDENCE_STORE must be postgres or filesystem, got "${store}"`);
  return {
    ...base,
    quick,
    pgbench_scale: intFromEnv('BENCH_PGBENCH_SCALE', quick ? 1 : 10, 1),
    storage_clients: intFromEnv('BENCH_STORAGE_CLIENTS', base.db_pool, 1, 200),
    slip_bytes: intFromEnv('BENCH_SLIP_BYTES', MEBIBYTE_BYTES, 200_000, 4_000_000),
    slip_tolerance_percent: intFromEnv('BENCH_SLIP_TOLERANCE_PERCENT', 5, 1, 50),
    intake_images: intFromEnv('BENCH_INTAKE_IMAGES', quick ? 2 : 6, 1, 100),
    intake_orders: intFromEnv('BENCH_INTAKE_ORDERS', quick ? 300 : 1500, 10),
    end_to_end_seconds: intFromEnv('BENCH_END_TO_END_SECONDS', quick ? 5 : 10, 1),
    end_to_end_rate: endToEndRate,
    drain_timeout_seconds: intFromEnv('BENCH_DRAIN_TIMEOUT_SECONDS', 60, 1),
    worker_concurrency: intFromEnv('BENCH_WORKER_CONCURRENCY', 4, 1, 64),
    worker_in_server: process.env.BENCH_WORKER_IN_SERVER === '1',
    deposit_merchants: intFromEnv('BENCH_DEPOSIT_MERCHANTS', 10, 1, 1000),
    withdrawing_merchants: intFromEnv('BENCH_WITHDRAWING_MERCHANTS', 10, 1, 1000),
    deposit_minor: depositMinor,
    withdrawal_minor: intFromEnv('BENCH_WITHDRAWAL_MINOR', 1_000_000, depositMinor, 10_000_000),
    qr_slips: intFromEnv('BENCH_QR_SLIPS', quick ? 5 : 30, 1, 1000),
    settle_slips: intFromEnv('BENCH_SETTLE_SLIPS', quick ? 100 : 1000, 1, 100_000),
    settle_warmup_slips: intFromEnv('BENCH_SETTLE_WARMUP_SLIPS', quick ? 30 : 600, 1, 100_000),
    evidence_store: store,
    statement_profile: process.env.BENCH_STATEMENT_PROFILE === '1',
  };
}

function withApplicationName(databaseUrl: string, name: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('application_name', name);
  return url.toString();
}

// ---------------------------------------------------------------------------------------------------
// The forked service processes: the HTTP server (api role), the worker (worker role), or both in one.

type Role = 'api' | 'worker' | 'api_and_worker';

interface ReadyMessage {
  type: 'ready';
  base_url: string | null;
}

interface UsageMessage {
  type: 'usage';
  id: number;
  cpu_us: number;
  stats: StatementStats;
  max_rss_bytes: number;
  /** Jobs this process ran to their end, by `task:outcome` (the worker's jobs_total counter). */
  jobs: Record<string, number>;
}

type ChildMessage = ReadyMessage | UsageMessage;
type ParentMessage = { type: 'usage'; id: number } | { type: 'start_worker' } | { type: 'hold_worker' } | { type: 'stop' };

async function serve(): Promise<void> {
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  const masterKey = process.env.BENCH_MASTER_KEY;
  const role = process.env.BENCH_ROLE as Role | undefined;
  if (!databaseUrl || !masterKey || !role || !process.send) throw new Error('--serve is started by bench/slips.ts itself');
  const apiEnabled = role !== 'worker';
  // A held worker (the settle phase) is built and warmed up, but claims nothing until the parent says
  // so: its start-up (module loading, the QR decoder) stays outside the phase's meters.
  const held = process.env.BENCH_WORKER_HELD === '1';
  const workerEnabled = role !== 'api' && !held;
  // The rate limits stay the spec's: every order has its own end user, so no slip_upload bucket fills.
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'silent',
    HOST: '127.0.0.1',
    PORT: '0',
    API_ENABLED: String(apiEnabled),
    WORKER_ENABLED: String(workerEnabled),
    DB_POOL_SIZE: process.env.BENCH_DB_POOL ?? '10',
    WORKER_CONCURRENCY: process.env.BENCH_WORKER_CONCURRENCY ?? '4',
    UPLOAD_BASE_URL,
    SLIP_EVIDENCE_STORE: process.env.BENCH_EVIDENCE_STORE ?? 'postgres',
    ...(process.env.BENCH_EVIDENCE_DIR ? { SLIP_EVIDENCE_DIR: process.env.BENCH_EVIDENCE_DIR } : {}),
  });
  const stats = newStats();
  const applicationName = role === 'worker' ? APPLICATION_NAMES.worker : APPLICATION_NAMES.api;
  const opened = await openDatabase({ database_url: withApplicationName(databaseUrl, applicationName), data_dir: null, pool_size: config.db_pool_size });
  const database = countingDatabase(opened, stats, process.env.BENCH_STATEMENT_PROFILE === '1');
  const instance = createServiceInstance({
    config,
    database,
    logger: createLogger('silent'),
    master_key: Buffer.from(masterKey, 'base64'),
    owns_database: true,
  });
  await instance.listen();
  if (held) await instance.services.verification.warmUp();
  const baseUrl = apiEnabled ? `http://127.0.0.1:${(instance.app.server.address() as { port: number }).port}` : null;

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
      void jobsRun(instance).then((jobs) => {
        process.send?.({ type: 'usage', id: message.id, cpu_us: usage.user + usage.system, stats: copy, max_rss_bytes: peakResidentBytes(), jobs } satisfies UsageMessage);
      });
    } else if (message.type === 'start_worker') {
      // Only the job loop: the webhook dispatcher and housekeeping of a worker process are not slip work.
      instance.worker.start();
    } else if (message.type === 'hold_worker') {
      // Claims stop at once; the queue is empty when the parent holds the worker, so nothing waits.
      void instance.worker.stop();
    } else if (message.type === 'stop') {
      void stop();
    }
  });
  process.on('disconnect', () => void stop());
  process.send({ type: 'ready', base_url: baseUrl } satisfies ReadyMessage);
}

/** The worker's jobs_total counter of this process, by `task:outcome`. */
async function jobsRun(instance: ServiceInstance): Promise<Record<string, number>> {
  const jobs: Record<string, number> = {};
  for (const value of (await instance.services.metrics.jobs_total.get()).values) {
    const key = `${String(value.labels.task)}:${String(value.labels.outcome)}`;
    jobs[key] = (jobs[key] ?? 0) + value.value;
  }
  return jobs;
}

class RoleProcess {
  private nextId = 1;
  private readonly waiting = new Map<number, (message: UsageMessage) => void>();

  private constructor(
    private readonly child: ChildProcess,
    readonly role: Role,
    readonly base_url: string | null,
  ) {
    child.on('message', (message: ChildMessage) => {
      if (message.type !== 'usage') return;
      this.waiting.get(message.id)?.(message);
      this.waiting.delete(message.id);
    });
  }

  /** `held`: a worker that claims nothing until `startWorker()` (see serve()). */
  static start(role: Role, settings: SlipSettings, databaseUrl: string, masterKey: Buffer, evidenceDirectory: string | null, options: { held?: boolean } = {}): Promise<RoleProcess> {
    // BENCH_SERVER_NODE_ARGS and BENCH_WORKER_NODE_ARGS add node flags to one process only, e.g. `--cpu-prof`.
    const flags = role === 'worker' ? process.env.BENCH_WORKER_NODE_ARGS : process.env.BENCH_SERVER_NODE_ARGS;
    const extraArgs = (flags ?? '').split(/\s+/).filter((arg) => arg.length > 0);
    const child = fork(fileURLToPath(import.meta.url), ['--serve'], {
      execArgv: [...process.execArgv, ...extraArgs],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: {
        ...process.env,
        BENCH_ROLE: role,
        BENCH_DATABASE_URL: databaseUrl,
        BENCH_DB_POOL: String(settings.db_pool),
        BENCH_WORKER_CONCURRENCY: String(settings.worker_concurrency),
        BENCH_MASTER_KEY: masterKey.toString('base64'),
        BENCH_STATEMENT_PROFILE: settings.statement_profile ? '1' : '0',
        BENCH_EVIDENCE_STORE: settings.evidence_store,
        BENCH_EVIDENCE_DIR: evidenceDirectory ?? '',
        BENCH_WORKER_HELD: options.held ? '1' : '0',
        LOG_LEVEL: 'silent',
      },
    });
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the ${role} process exited with ${code} before it was ready`));
      child.once('exit', onExit);
      child.once('error', reject);
      child.on('message', (message: ChildMessage) => {
        if (message.type !== 'ready') return;
        child.off('exit', onExit);
        resolve(new RoleProcess(child, role, message.base_url));
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Lets a held worker start claiming jobs. */
  startWorker(): void {
    this.child.send({ type: 'start_worker' } satisfies ParentMessage);
  }

  /** Stops a worker's claims until the next `startWorker()`. */
  holdWorker(): void {
    this.child.send({ type: 'hold_worker' } satisfies ParentMessage);
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
// Meters: the machine (/proc/stat), this process (the load generator), and PostgreSQL's processes
// sampled from /proc, grouped by whom they work for: each service process's sessions (application_name),
// the plain-insert clients, pgbench's sessions, and the shared background processes (WAL writer,
// checkpointer, background writer, autovacuum), which write out everybody's WAL and pages.

type PostgresGroup = 'api' | 'worker' | 'storage' | 'pgbench' | 'background' | 'other';
const POSTGRES_GROUPS: readonly PostgresGroup[] = ['api', 'worker', 'storage', 'pgbench', 'background', 'other'];
const BACKGROUND_TYPES = ['walwriter', 'checkpointer', 'background writer', 'autovacuum worker', 'autovacuum launcher'];

/** The slips bench's grouping of PostgreSQL's processes, and pgbench's client threads apart. */
const SLIPS_GROUPING: CpuGrouping<PostgresGroup | 'pgbench_client'> = {
  background_types: BACKGROUND_TYPES,
  group_of: groupOf,
  pgbench_group: 'pgbench_client',
};

function groupOf(row: { application_name: string; backend_type: string }): PostgresGroup {
  if (BACKGROUND_TYPES.includes(row.backend_type)) return 'background';
  if (row.application_name === APPLICATION_NAMES.api) return 'api';
  if (row.application_name === APPLICATION_NAMES.worker) return 'worker';
  if (row.application_name === APPLICATION_NAMES.storage) return 'storage';
  if (row.application_name === 'pgbench') return 'pgbench';
  return 'other';
}

interface Meter {
  started_ms: number;
  machine: CpuTimes | null;
  self_us: number;
  wal_bytes: number;
  sampler: CpuSampler<PostgresGroup | 'pgbench_client'>;
}

/** What a measured stretch cost in total (not per operation). */
interface MeterReading {
  seconds: number;
  self_cpu_us: number;
  machine_cpu_us: number;
  machine_busy: number;
  wal_bytes: number;
  postgres_us: Record<PostgresGroup | 'pgbench_client', number>;
}

async function startMeter(settings: SlipSettings): Promise<Meter> {
  const sampler = await CpuSampler.start(settings.database_url, settings.database_name, SLIPS_GROUPING);
  const usage = process.cpuUsage();
  return { started_ms: performance.now(), machine: machineCpu(), self_us: usage.user + usage.system, wal_bytes: await walBytes(settings.database_url), sampler };
}

async function stopMeter(settings: SlipSettings, meter: Meter): Promise<MeterReading> {
  const usage = process.cpuUsage();
  const machine = machineCpu();
  const seconds = (performance.now() - meter.started_ms) / 1000;
  const wal = await walBytes(settings.database_url);
  const sampled = await meter.sampler.stop();
  const postgres = { pgbench_client: sampled('pgbench_client') } as Record<PostgresGroup | 'pgbench_client', number>;
  for (const group of POSTGRES_GROUPS) postgres[group] = sampled(group);
  return {
    seconds,
    self_cpu_us: usage.user + usage.system - meter.self_us,
    machine_cpu_us: meter.machine && machine ? ((machine.busy - meter.machine.busy) * 1e6) / CLOCK_TICKS_PER_SECOND : Number.NaN,
    machine_busy: busyShare(meter.machine, machine),
    wal_bytes: wal - meter.wal_bytes,
    postgres_us: postgres,
  };
}

/** One row of the cost table: CPU per operation by process group, and the database work. */
interface Cost {
  label: string;
  operations: number;
  service_cpu_us: number;
  load_generator_cpu_us: number;
  postgres_cpu_us: number;
  postgres_background_cpu_us: number;
  other_cpu_us: number;
  machine_busy: number;
  wal_bytes: number;
  round_trips: number | null;
  transactions: number | null;
  peak_rss_bytes: number | null;
  stats: StatementStats | null;
}

function costOf(input: {
  label: string;
  reading: MeterReading;
  operations: number;
  service_us: number;
  load_generator_us: number;
  postgres_groups: readonly PostgresGroup[];
  stats: StatementStats | null;
  peak_rss_bytes: number | null;
  /** The part of the machine's CPU that is this row's; the rest of the machine is "other". */
  accounted_us?: number;
}): Cost {
  const count = Math.max(1, input.operations);
  const postgres = input.postgres_groups.reduce((sum, group) => sum + input.reading.postgres_us[group], 0);
  const background = input.reading.postgres_us.background;
  const accounted = input.accounted_us ?? input.service_us + input.load_generator_us + postgres + background;
  return {
    label: input.label,
    operations: input.operations,
    service_cpu_us: input.service_us / count,
    load_generator_cpu_us: input.load_generator_us / count,
    postgres_cpu_us: postgres / count,
    postgres_background_cpu_us: background / count,
    other_cpu_us: (input.reading.machine_cpu_us - accounted) / count,
    machine_busy: input.reading.machine_busy,
    wal_bytes: input.reading.wal_bytes / count,
    round_trips: input.stats ? input.stats.round_trips / count : null,
    transactions: input.stats ? input.stats.transactions / count : null,
    peak_rss_bytes: input.peak_rss_bytes,
    stats: input.stats,
  };
}

// ---------------------------------------------------------------------------------------------------
// Load generators: support.ts's, with bytes for bodies (a multipart slip) and only a 202 counted as done.
// An upload goes to the server's port with the upload address's Host header.

interface UploadRequest {
  path: string;
  headers: Record<string, string>;
  body: Buffer;
}

type UploadFactory = () => UploadRequest;

interface Answers {
  status_counts: Record<string, number>;
  errors: number;
  timeouts: number;
  /** The first answer that was not a 202, to make a failure explain itself. */
  sample: string | null;
}

interface ClosedLoop extends Answers {
  accepted_per_second: number;
  accepted: number;
  duration_seconds: number;
  saturated_p50_ms: number;
  saturated_p99_ms: number;
}

interface Paced extends Answers {
  target_rate: number;
  achieved_rate: number;
  accepted: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  send_lag_p99_ms: number;
}

const accepted202 = (status: number) => status === 202;

function notAccepted(answers: Answers): number {
  return answers.errors + answers.timeouts + Object.entries(answers.status_counts).reduce((sum, [status, count]) => sum + (status === '202' ? 0 : count), 0);
}

function asBenchRequests(build: UploadFactory): RequestFactory {
  return () => ({ method: 'POST', ...build() });
}

async function closedLoop(options: { base_url: string; connections: number; seconds: number; build: UploadFactory }): Promise<ClosedLoop> {
  const result = await runClosedLoop({ ...options, build: asBenchRequests(options.build), success: accepted202 });
  return { ...result, accepted_per_second: result.requests_per_second, accepted: result.succeeded };
}

/** Open loop at a constant arrival rate, `count` requests in all (see runPaced: no coordinated omission). */
async function paced(options: { base_url: string; rate: number; count: number; max_sockets: number; build: UploadFactory; timeout_ms?: number }): Promise<Paced> {
  const result = await runPaced({ ...options, build: asBenchRequests(options.build), success: accepted202 });
  return { ...result, accepted: result.succeeded };
}

function multipartBody(image: Buffer): { body: Buffer; content_type: string } {
  const boundary = `----benchslip${crypto.randomBytes(8).toString('hex')}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slip.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return { body: Buffer.concat([head, image, tail]), content_type: `multipart/form-data; boundary=${boundary}` };
}

// ---------------------------------------------------------------------------------------------------
// The 1 MiB slips: a sandbox slip photographed (see the header), at the JPEG quality nearest the size.

interface PhotoMaker {
  make(png: Buffer): Promise<Buffer>;
  quality: number;
}

async function photoMaker(settings: SlipSettings, firstPng: Buffer): Promise<PhotoMaker> {
  const geometry = (input: Buffer) =>
    sharp(input)
      .resize({ width: PHOTO_WIDTH_PX })
      .rotate(PHOTO_ROTATION_DEGREES, { background: PHOTO_BACKGROUND })
      .extend({ top: PHOTO_BORDER_PX, bottom: PHOTO_BORDER_PX, left: PHOTO_BORDER_PX, right: PHOTO_BORDER_PX, background: PHOTO_BACKGROUND })
      .blur(PHOTO_BLUR_SIGMA);
  const { info } = await geometry(firstPng).raw().toBuffer({ resolveWithObject: true });
  // One noise field for every slip: the sensor noise is the texture that makes a photo weigh 1 MiB.
  const noise = await sharp({
    create: { width: info.width, height: info.height, channels: 3, background: { r: 128, g: 128, b: 128 }, noise: { type: 'gaussian', mean: 128, sigma: PHOTO_NOISE_SIGMA } },
  })
    .raw()
    .toBuffer();
  const encode = (png: Buffer, quality: number) =>
    geometry(png)
      .composite([{ input: noise, raw: { width: info.width, height: info.height, channels: 3 }, blend: 'overlay' }])
      .jpeg({ quality })
      .toBuffer();
  const low = settings.slip_bytes * (1 - settings.slip_tolerance_percent / 100);
  const high = settings.slip_bytes * (1 + settings.slip_tolerance_percent / 100);
  // Calibrate once on the first slip: the quality whose size is nearest the target.
  let best = { quality: 90, distance: Number.POSITIVE_INFINITY };
  let lowQuality = 50;
  let highQuality = 100;
  while (lowQuality <= highQuality) {
    const quality = Math.floor((lowQuality + highQuality) / 2);
    const size = (await encode(firstPng, quality)).length;
    if (Math.abs(size - settings.slip_bytes) < best.distance) best = { quality, distance: Math.abs(size - settings.slip_bytes) };
    if (size < settings.slip_bytes) lowQuality = quality + 1;
    else highQuality = quality - 1;
  }
  const maker: PhotoMaker = {
    quality: best.quality,
    async make(png: Buffer): Promise<Buffer> {
      // Slips differ a little in how much they compress; a step of quality corrects the odd one.
      let quality = best.quality;
      for (let step = 0; step < 6; step += 1) {
        const jpeg = await encode(png, quality);
        if (jpeg.length >= low && jpeg.length <= high) return jpeg;
        quality += jpeg.length < low ? 1 : -1;
        if (quality < 30 || quality > 100) break;
      }
      throw new Error(`no JPEG quality puts this slip within ${settings.slip_tolerance_percent} % of ${settings.slip_bytes} bytes`);
    },
  };
  return maker;
}

async function mapConcurrent<Item, Result>(items: readonly Item[], concurrency: number, work: (item: Item, index: number) => Promise<Result>): Promise<Result[]> {
  const results = new Array<Result>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const index = next;
        next += 1;
        results[index] = await work(items[index] as Item, index);
      }
    }),
  );
  return results;
}

// ---------------------------------------------------------------------------------------------------
// Set-up: merchants, money, open withdrawals and deposits with their capabilities

interface WithdrawingMerchant {
  account: WalletAccount;
  beneficiary_id: string;
}

interface SlipOrder {
  account: WalletAccount;
  deposit_id: string;
  upload: SlipUpload;
  /** The path of `upload_url`; the Host header names UPLOAD_HOST. */
  path: string;
}

async function createMerchants(instance: ServiceInstance, white_label_id: string, count: number, label: string): Promise<WalletAccount[]> {
  const accounts: WalletAccount[] = [];
  for (let index = 0; index < count; index += 1) {
    const merchant = await instance.services.tenancy.createMerchant(BENCH_ACTOR, { white_label_id, name: `${label} ${index + 1}` });
    accounts.push({ white_label_id, merchant_id: merchant.id, livemode: false });
  }
  return accounts;
}

async function createWithdrawingMerchants(instance: ServiceInstance, database: Database, white_label_id: string, count: number, funding_minor: number): Promise<WithdrawingMerchant[]> {
  const merchants: WithdrawingMerchant[] = [];
  for (const account of await createMerchants(instance, white_label_id, count, 'Bench withdrawer')) {
    merchants.push({ account, beneficiary_id: await fundWithdrawer(instance, database, account, funding_minor) });
  }
  return merchants;
}

let referenceCounter = 0;
const RUN_TAG = crypto.randomBytes(3).toString('hex');

/** Opens `count` withdrawals, 100 per transaction, one lane per merchant group so that lanes never wait on each other's rows. */
async function seedWithdrawals(settings: SlipSettings, instance: ServiceInstance, database: Database, merchants: WithdrawingMerchant[], count: number): Promise<void> {
  const lanes = Math.min(settings.db_pool, merchants.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const mine = merchants.filter((_merchant, index) => index % lanes === lane);
      let turn = 0;
      while (next < count) {
        const size = Math.min(100, count - next);
        next += size;
        await database.transaction(async (tx) => {
          for (let index = 0; index < size; index += 1) {
            const merchant = mine[turn++ % mine.length] as WithdrawingMerchant;
            referenceCounter += 1;
            const created = await instance.services.withdrawals.create(
              tx,
              merchant.account,
              {
                amount_minor: settings.withdrawal_minor,
                merchant_reference: `seed-${RUN_TAG}-${referenceCounter}`,
                end_user_ref: `payee-${referenceCounter}`,
                beneficiary_id: merchant.beneficiary_id,
              },
              SYSTEM_CAUSE,
            );
            if (!created.ok) throw created.error;
            if (created.value.status !== 'open') throw new Error(`a seeded withdrawal is ${created.value.status}, not open`);
          }
        });
      }
    }),
  );
}

/**
 * Creates `count` deposits matched at once, each with its own end user, device and sender account, so
 * that the per-user checks (open orders per device, duplicates, the slip_upload bucket) never decide.
 * One lane per depositing merchant group, the pool's size at a time.
 */
async function createOrders(settings: SlipSettings, instance: ServiceInstance, database: Database, depositors: WalletAccount[], count: number): Promise<SlipOrder[]> {
  const lanes = Math.min(settings.db_pool, depositors.length);
  const orders: SlipOrder[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const mine = depositors.filter((_account, index) => index % lanes === lane);
      let turn = 0;
      while (next < count) {
        next += 1;
        referenceCounter += 1;
        const number = referenceCounter;
        const account = mine[turn++ % mine.length] as WalletAccount;
        const created = await database.transaction((tx) =>
          instance.services.deposits.create(
            tx,
            account,
            {
              amount_minor: settings.deposit_minor,
              merchant_reference: `slip-${RUN_TAG}-${number}`,
              end_user_ref: `payer-${RUN_TAG}-${number}`,
              sender: { bank_code: SENDER_BANK, account_number: String(3_000_000_000 + number), account_name_th: SENDER_NAME },
              client: { device_fingerprint: `fp-${RUN_TAG}-${number}`, ip: '198.51.100.7', user_agent: 'bench-slips/1.0' },
            },
            SYSTEM_CAUSE,
          ),
        );
        if (!created.matched || !created.slip_upload) throw new Error(`a deposit was not matched at once (${created.deposit.status})`);
        orders.push({ account, deposit_id: created.deposit.id, upload: created.slip_upload, path: new URL(created.slip_upload.upload_url).pathname });
      }
    }),
  );
  return orders;
}

async function countOpenWithdrawals(database: Database, white_label_id: string, amount_minor: number): Promise<number> {
  const { rows } = await database.query<{ slots: number }>(
    `SELECT coalesce(sum(floor(remaining_minor / $2::bigint)), 0)::int AS slots FROM withdrawal_orders
      WHERE white_label_id = $1 AND livemode = false AND status IN ('open', 'partially_filled')`,
    [white_label_id, amount_minor],
  );
  return rows[0]?.slots ?? 0;
}

/** Tops the brand's open withdrawals up so that `deposits` more deposits each find one that takes them whole. */
async function ensureLiquidity(settings: SlipSettings, instance: ServiceInstance, database: Database, merchants: WithdrawingMerchant[], white_label_id: string, deposits: number): Promise<void> {
  const perWithdrawal = Math.floor(settings.withdrawal_minor / settings.deposit_minor);
  const missing = deposits - (await countOpenWithdrawals(database, white_label_id, settings.deposit_minor));
  if (missing <= 0) return;
  const withdrawals = Math.ceil((missing * 1.1) / perWithdrawal) + merchants.length;
  log(`seeding ${withdrawals} open withdrawals of ${fixed(settings.withdrawal_minor / 100, 0)} THB`);
  await seedWithdrawals(settings, instance, database, merchants, withdrawals);
}

// ---------------------------------------------------------------------------------------------------
// Phase 1: pgbench TPC-B

interface PgbenchPhase {
  result: PgbenchResult;
  cost: Cost;
  /**
   * The same transactions under bench/meters.ts's meters (PostgreSQL = the bench database's backends plus
   * the WAL writer, checkpointer and background writer), the unit of the settle phase's ratio, measured
   * the way bench/deposits.ts and bench/foundation.ts measure theirs.
   */
  phase_cost: PhaseCost;
}

async function runPgbenchPhase(settings: SlipSettings, databaseUrl: string): Promise<PgbenchPhase> {
  const args = { pgbench_path: settings.pgbench_path, database_url: databaseUrl, clients: settings.pgbench_clients, builtin: 'tpcb-like' };
  if (settings.warmup_seconds > 0) {
    log(`pgbench TPC-B: warm-up ${settings.warmup_seconds} s`);
    await runPgbench({ ...args, seconds: settings.warmup_seconds });
  }
  await adminQuery(databaseUrl, 'CHECKPOINT');
  log(`pgbench TPC-B: ${settings.pgbench_clients} clients, ${settings.seconds} s`);
  const meter = await startMeter(settings);
  const phaseMeter = await startPhaseMeter(settings);
  const result = await runPgbench({ ...args, seconds: settings.seconds, log: true });
  const operations = Math.round(result.tps * settings.seconds);
  // No service: the pgbench client processes are the load generator (bench/meters.ts's runPgbenchTpcbPhase).
  const phaseCost = await stopPhaseMeter(settings, phaseMeter, operations, 0, null);
  const reading = await stopMeter(settings, meter);
  const cost = costOf({
    label: 'pgbench TPC-B',
    reading,
    operations,
    service_us: 0,
    load_generator_us: reading.self_cpu_us + reading.postgres_us.pgbench_client,
    postgres_groups: ['pgbench', 'other'],
    // Its 5 statements, BEGIN and END, each a round trip.
    stats: { round_trips: 7 * operations, transactions: operations, profile: {} },
    peak_rss_bytes: null,
  });
  log(`pgbench TPC-B: ${fixed(result.tps, 0)} tps, p50 ${fixed(result.p50_ms, 2)} ms, p99 ${fixed(result.p99_ms, 2)} ms`);
  return { result, cost, phase_cost: phaseCost };
}

// ---------------------------------------------------------------------------------------------------
// Phase 2: the storage limit, plain 1 MiB inserts

interface StoragePhase {
  clients: number;
  row_bytes: number;
  rows: number;
  seconds: number;
  rows_per_second: number;
  mebibytes_per_second: number;
  p50_ms: number;
  p99_ms: number;
  cost: Cost;
}

async function runStoragePhase(settings: SlipSettings, databaseUrl: string, rowBytes: number): Promise<StoragePhase> {
  const pool = new pg.Pool({ connectionString: withApplicationName(databaseUrl, APPLICATION_NAMES.storage), max: settings.storage_clients, options: '-c TimeZone=UTC' });
  try {
    // The same columns, key and storage as the service's blob table, and its own INSERT statement.
    await pool.query('CREATE TABLE IF NOT EXISTS bench_plain_blobs (LIKE slip_blobs INCLUDING ALL)');
    // Random bytes do not compress, like the ciphertext; eight rows in turn are as good as fresh ones.
    const payloads = Array.from({ length: 8 }, () => crypto.randomBytes(rowBytes));
    let counter = 0;
    const insertFor = async (seconds: number): Promise<{ rows: number; seconds: number; latencies: number[] }> => {
      const latencies: number[] = [];
      const started = performance.now();
      const end = started + seconds * 1000;
      await Promise.all(
        Array.from({ length: settings.storage_clients }, async () => {
          while (performance.now() < end) {
            counter += 1;
            const began = performance.now();
            await pool.query('INSERT INTO bench_plain_blobs (white_label_id, blob_key, ciphertext, created_at) VALUES ($1, $2, $3, now())', [
              'wl_bench',
              `blob_${RUN_TAG}_${counter}`,
              payloads[counter % payloads.length],
            ]);
            latencies.push(performance.now() - began);
          }
        }),
      );
      return { rows: latencies.length, seconds: (performance.now() - started) / 1000, latencies };
    };
    if (settings.warmup_seconds > 0) {
      log(`storage: warm-up ${settings.warmup_seconds} s`);
      await insertFor(settings.warmup_seconds);
    }
    await adminQuery(databaseUrl, 'CHECKPOINT');
    log(`storage: plain INSERTs of ${rowBytes} bytes, ${settings.storage_clients} clients, ${settings.seconds} s`);
    const meter = await startMeter(settings);
    const measured = await insertFor(settings.seconds);
    const reading = await stopMeter(settings, meter);
    const sorted = Float64Array.from(measured.latencies).sort();
    const rowsPerSecond = measured.rows / measured.seconds;
    const phase: StoragePhase = {
      clients: settings.storage_clients,
      row_bytes: rowBytes,
      rows: measured.rows,
      seconds: measured.seconds,
      rows_per_second: rowsPerSecond,
      mebibytes_per_second: (rowsPerSecond * rowBytes) / MEBIBYTE_BYTES,
      p50_ms: percentile(sorted, 0.5),
      p99_ms: percentile(sorted, 0.99),
      cost: costOf({
        label: 'plain INSERT of a 1 MiB row',
        reading,
        operations: measured.rows,
        service_us: 0,
        load_generator_us: reading.self_cpu_us,
        postgres_groups: ['storage', 'other'],
        stats: { round_trips: measured.rows, transactions: 0, profile: {} },
        peak_rss_bytes: null,
      }),
    };
    log(`storage: ${fixed(phase.rows_per_second, 1)} rows/s, ${fixed(phase.mebibytes_per_second, 1)} MiB/s, p50 ${fixed(phase.p50_ms, 1)} ms, p99 ${fixed(phase.p99_ms, 1)} ms`);
    return phase;
  } finally {
    await pool.end();
  }
}

// ---------------------------------------------------------------------------------------------------
// Phase 3: durable intake over HTTP, worker off

interface IntakeImage {
  jpeg: Buffer;
  trans_ref: string;
  multipart: { body: Buffer; content_type: string };
}

interface IntakeChecks {
  receipts: number;
  receipts_in_size_band: number;
  multipart_receipts: number;
  blobs: number;
  pending_jobs: number;
  repeat_uploads: number;
}

interface IntakePhase {
  warmup: ClosedLoop | null;
  max: ClosedLoop;
  paced: Paced | null;
  mean_image_bytes: number;
  cost: Cost;
  checks: IntakeChecks;
  accepted: number;
}

function intakeRequests(orders: SlipOrder[], images: IntakeImage[], counter: { next: number; repeats: number }): UploadFactory {
  return (): UploadRequest => {
    const number = counter.next;
    counter.next += 1;
    // One upload per order first; then each order's second and third (the most an order takes).
    const order = orders[number % orders.length] as SlipOrder;
    if (number >= orders.length) counter.repeats += 1;
    const image = images[number % images.length] as IntakeImage;
    return {
      path: order.path,
      headers: {
        host: UPLOAD_HOST,
        'content-type': image.multipart.content_type,
        'idempotency-key': `slip-${RUN_TAG}-${number}`,
        authorization: `Bearer ${order.upload.token}`,
      },
      body: image.multipart.body,
    };
  };
}

async function checkIntake(database: Database, orders: SlipOrder[], settings: SlipSettings, repeats: number): Promise<IntakeChecks> {
  const ids = orders.map((order) => order.deposit_id);
  const low = Math.floor(settings.slip_bytes * (1 - settings.slip_tolerance_percent / 100));
  const high = Math.ceil(settings.slip_bytes * (1 + settings.slip_tolerance_percent / 100));
  const { rows } = await database.query<Omit<IntakeChecks, 'repeat_uploads'>>(
    `SELECT
       (SELECT count(*)::int FROM slip_receipts WHERE deposit_id = ANY($1::text[])) AS receipts,
       (SELECT count(*)::int FROM slip_receipts WHERE deposit_id = ANY($1::text[]) AND size_bytes BETWEEN $2 AND $3 AND media_type = 'image/jpeg') AS receipts_in_size_band,
       (SELECT count(*)::int FROM slip_receipts WHERE deposit_id = ANY($1::text[]) AND shape = 'multipart') AS multipart_receipts,
       (SELECT count(*)::int FROM slip_blobs b JOIN slip_receipts r ON r.white_label_id = b.white_label_id AND r.receipt_id = b.blob_key
         WHERE r.deposit_id = ANY($1::text[])) AS blobs,
       (SELECT count(*)::int FROM jobs WHERE task = $4 AND status = 'pending' AND payload->>'deposit_id' = ANY($1::text[])) AS pending_jobs`,
    [ids, low, high, PROCESS_SLIP_TASK],
  );
  const row = rows[0];
  if (!row) throw new Error('the intake check returned nothing');
  return { ...row, repeat_uploads: repeats };
}

async function runIntakePhase(
  settings: SlipSettings,
  databaseUrl: string,
  database: Database,
  masterKey: Buffer,
  evidenceDirectory: string | null,
  orders: SlipOrder[],
  images: IntakeImage[],
): Promise<IntakePhase> {
  const server = await RoleProcess.start('api', settings, databaseUrl, masterKey, evidenceDirectory);
  try {
    const baseUrl = server.base_url as string;
    log(`intake: server process ready at ${baseUrl} (worker off)`);
    const counter = { next: 0, repeats: 0 };
    const build = intakeRequests(orders, images, counter);
    let warmup: ClosedLoop | null = null;
    if (settings.warmup_seconds > 0) {
      log(`intake: warm-up ${settings.warmup_seconds} s`);
      warmup = await closedLoop({ base_url: baseUrl, connections: settings.connections, seconds: settings.warmup_seconds, build });
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    }
    await adminQuery(databaseUrl, 'CHECKPOINT');
    log(`intake: closed loop, ${settings.connections} connections, ${settings.seconds} s`);
    const meter = await startMeter(settings);
    const before = await server.usage();
    const max = await closedLoop({ base_url: baseUrl, connections: settings.connections, seconds: settings.seconds, build });
    const after = await server.usage();
    const reading = await stopMeter(settings, meter);
    const rate = max.accepted_per_second * settings.rate_fraction;
    log(`intake: ${fixed(max.accepted_per_second, 1)} 202/s; open loop at ${fixed(rate, 1)}/s for ${settings.seconds} s`);
    // autocannon stops with up to `connections` uploads still in the server: let them finish first.
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const openLoop = rate > 0 ? await paced({ base_url: baseUrl, rate, count: Math.round(rate * settings.seconds), max_sockets: settings.connections * 4, build }) : null;
    if (openLoop) log(`intake: p50 ${fixed(openLoop.p50_ms, 1)} ms, p99 ${fixed(openLoop.p99_ms, 1)} ms at ${fixed(openLoop.achieved_rate, 1)}/s`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const last = await server.usage();
    const checks = await checkIntake(database, orders, settings, counter.repeats);
    const meanImageBytes = images.reduce((sum, image) => sum + image.jpeg.length, 0) / images.length;
    const cost = costOf({
      label: 'intake (closed loop)',
      reading,
      operations: max.accepted,
      service_us: after.cpu_us - before.cpu_us,
      load_generator_us: reading.self_cpu_us,
      postgres_groups: ['api', 'other'],
      stats: diffStats(after.stats, before.stats),
      peak_rss_bytes: last.max_rss_bytes,
    });
    return {
      warmup,
      max,
      paced: openLoop,
      mean_image_bytes: meanImageBytes,
      cost,
      checks,
      accepted: [warmup, max, openLoop].reduce((sum, phase) => sum + (phase ? phase.accepted : 0), 0),
    };
  } finally {
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------------
// Phase 4: 202 → settled, with the worker consuming the slips

interface Timing {
  count: number;
  p50_ms: number;
  p95_ms: number;
  p99_ms: number;
  max_ms: number;
  mean_ms: number;
}

function timingOf(values: number[]): Timing {
  const sorted = Float64Array.from(values).sort();
  return {
    count: values.length,
    p50_ms: percentile(sorted, 0.5),
    p95_ms: percentile(sorted, 0.95),
    p99_ms: percentile(sorted, 0.99),
    max_ms: percentile(sorted, 1),
    mean_ms: values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length),
  };
}

interface EndToEndPhase {
  orders: number;
  rate: number;
  uploads: Paced;
  drained: boolean;
  drain_seconds: number;
  settled: number;
  statuses: Record<string, number>;
  outcomes: Record<string, number>;
  read_from_pixels: number;
  total: Timing;
  waiting: Timing;
  processing: Timing;
  mean_image_bytes: number;
  worker_in_server: boolean;
  intake_cost: Cost | null;
  verification_cost: Cost | null;
  combined_cost: Cost;
  preparation_seconds: number;
}

async function prepareEndToEnd(
  settings: SlipSettings,
  instance: ServiceInstance,
  database: Database,
  depositors: WalletAccount[],
  count: number,
  photos: PhotoMaker,
): Promise<{ orders: SlipOrder[]; jpegs: Buffer[] }> {
  const orders = await createOrders(settings, instance, database, depositors, count);
  // Each order gets its own transfer at the sandbox bank and its own slip, as a payer's phone would show it.
  const jpegs = await mapConcurrent(orders, 2, async (order) => {
    const made = await database.transaction((tx) => instance.services.sandboxBank.transfer(tx, order.account, { deposit_id: order.deposit_id }));
    if (!made || !made.ok) throw new Error(`the sandbox bank made no transfer for ${order.deposit_id}: ${made ? made.error.code : 'not found'}`);
    return photos.make(Buffer.from(made.value.slip.image_base64, 'base64'));
  });
  return { orders, jpegs };
}

async function runEndToEndPhase(
  settings: SlipSettings,
  databaseUrl: string,
  database: Database,
  masterKey: Buffer,
  evidenceDirectory: string | null,
  prepared: { orders: SlipOrder[]; jpegs: Buffer[] },
  rate: number,
  preparationSeconds: number,
): Promise<EndToEndPhase> {
  // The intake phase's slips have no transfer behind them: their jobs would only send orders to review
  // and compete with this phase's slips for the worker. They are removed, not run.
  const removed = await database.query<{ count: number }>(`WITH gone AS (DELETE FROM jobs WHERE task = $1 AND status = 'pending' RETURNING 1) SELECT count(*)::int AS count FROM gone`, [PROCESS_SLIP_TASK]);
  log(`end_to_end: removed ${removed.rows[0]?.count ?? 0} pending slip jobs of the intake phase`);
  await adminQuery(databaseUrl, 'ANALYZE');
  await adminQuery(databaseUrl, 'CHECKPOINT');
  const { orders, jpegs } = prepared;
  const bodies = jpegs.map((jpeg) => multipartBody(jpeg));
  const server = await RoleProcess.start(settings.worker_in_server ? 'api_and_worker' : 'api', settings, databaseUrl, masterKey, evidenceDirectory);
  const worker = settings.worker_in_server ? null : await RoleProcess.start('worker', settings, databaseUrl, masterKey, evidenceDirectory);
  try {
    const baseUrl = server.base_url as string;
    log(`end_to_end: ${orders.length} slips at ${fixed(rate, 1)}/s; worker ${settings.worker_in_server ? 'in the server process' : 'in its own process'}, concurrency ${settings.worker_concurrency}`);
    let next = 0;
    const build: UploadFactory = () => {
      const index = next;
      next += 1;
      const order = orders[index] as SlipOrder;
      const body = bodies[index] as { body: Buffer; content_type: string };
      return {
        path: order.path,
        headers: { host: UPLOAD_HOST, 'content-type': body.content_type, 'idempotency-key': `e2e-${RUN_TAG}-${index}`, authorization: `Bearer ${order.upload.token}` },
        body: body.body,
      };
    };
    const meter = await startMeter(settings);
    const serverBefore = await server.usage();
    const workerBefore = worker ? await worker.usage() : null;
    const uploads = await paced({ base_url: baseUrl, rate, count: orders.length, max_sockets: settings.connections * 4, build });
    log(`end_to_end: uploads done, ${uploads.accepted} × 202 at ${fixed(uploads.achieved_rate, 1)}/s, p50 ${fixed(uploads.p50_ms, 1)} ms, p99 ${fixed(uploads.p99_ms, 1)} ms; waiting for the worker`);
    const ids = orders.map((order) => order.deposit_id);
    const drainStarted = performance.now();
    let drained = false;
    while ((performance.now() - drainStarted) / 1000 < settings.drain_timeout_seconds) {
      const { rows } = await database.query<{ unprocessed: number }>(
        `SELECT count(*)::int AS unprocessed FROM slip_receipts WHERE deposit_id = ANY($1::text[]) AND status <> 'processed'`,
        [ids],
      );
      if ((rows[0]?.unprocessed ?? 1) === 0) {
        drained = true;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    const serverAfter = await server.usage();
    const workerAfter = worker ? await worker.usage() : null;
    const reading = await stopMeter(settings, meter);

    const { rows } = await database.query<{ status: string; outcome: string | null; source: string | null; total_ms: number | null; waiting_ms: number | null }>(
      `SELECT d.status, r.outcome, r.verification->>'source' AS source,
              (extract(epoch FROM (d.settled_at - r.received_at)) * 1000)::float8 AS total_ms,
              (extract(epoch FROM (claimed.at - r.received_at)) * 1000)::float8 AS waiting_ms
         FROM deposit_orders d
         JOIN slip_receipts r ON r.white_label_id = d.white_label_id AND r.deposit_id = d.deposit_id
         LEFT JOIN LATERAL (SELECT min(e.created_at) AS at FROM events e
                             WHERE e.white_label_id = d.white_label_id AND e.object_id = d.deposit_id AND e.type = 'deposit.slip_received') claimed ON true
        WHERE d.deposit_id = ANY($1::text[])`,
      [ids],
    );
    const statuses: Record<string, number> = {};
    const outcomes: Record<string, number> = {};
    const totals: number[] = [];
    const waits: number[] = [];
    const processing: number[] = [];
    let fromPixels = 0;
    for (const row of rows) {
      statuses[row.status] = (statuses[row.status] ?? 0) + 1;
      outcomes[row.outcome ?? 'unprocessed'] = (outcomes[row.outcome ?? 'unprocessed'] ?? 0) + 1;
      if (row.source === 'pixels') fromPixels += 1;
      if (row.total_ms !== null) totals.push(row.total_ms);
      if (row.waiting_ms !== null) waits.push(row.waiting_ms);
      if (row.total_ms !== null && row.waiting_ms !== null) processing.push(row.total_ms - row.waiting_ms);
    }
    const processed = rows.filter((row) => row.outcome !== null).length;
    const serverUs = serverAfter.cpu_us - serverBefore.cpu_us;
    const workerUs = workerAfter && workerBefore ? workerAfter.cpu_us - workerBefore.cpu_us : 0;
    const serverStats = diffStats(serverAfter.stats, serverBefore.stats);
    const workerStats = workerAfter && workerBefore ? diffStats(workerAfter.stats, workerBefore.stats) : null;
    const everything = serverUs + workerUs + reading.self_cpu_us + POSTGRES_GROUPS.reduce((sum, group) => sum + reading.postgres_us[group], 0);
    const intakeCost = worker
      ? costOf({
          label: 'end_to_end: intake (API process)',
          reading,
          operations: uploads.accepted,
          service_us: serverUs,
          load_generator_us: reading.self_cpu_us,
          postgres_groups: ['api'],
          stats: serverStats,
          peak_rss_bytes: serverAfter.max_rss_bytes,
          accounted_us: everything,
        })
      : null;
    const verificationCost = worker
      ? costOf({
          label: 'end_to_end: verification (worker process)',
          reading,
          operations: processed,
          service_us: workerUs,
          load_generator_us: 0,
          postgres_groups: ['worker'],
          stats: workerStats,
          peak_rss_bytes: workerAfter?.max_rss_bytes ?? null,
          accounted_us: everything,
        })
      : null;
    const combinedCost = costOf({
      label: 'end_to_end: intake + verification, per slip',
      reading,
      operations: processed,
      service_us: serverUs + workerUs,
      load_generator_us: reading.self_cpu_us,
      postgres_groups: ['api', 'worker', 'other'],
      stats: workerStats ? { round_trips: serverStats.round_trips + workerStats.round_trips, transactions: serverStats.transactions + workerStats.transactions, profile: {} } : serverStats,
      peak_rss_bytes: Math.max(serverAfter.max_rss_bytes, workerAfter?.max_rss_bytes ?? 0),
    });
    return {
      orders: orders.length,
      rate,
      uploads,
      drained,
      drain_seconds: drainSeconds,
      settled: statuses.settled ?? 0,
      statuses,
      outcomes,
      read_from_pixels: fromPixels,
      total: timingOf(totals),
      waiting: timingOf(waits),
      processing: timingOf(processing),
      mean_image_bytes: jpegs.reduce((sum, jpeg) => sum + jpeg.length, 0) / Math.max(1, jpegs.length),
      worker_in_server: settings.worker_in_server,
      intake_cost: intakeCost,
      verification_cost: verificationCost,
      combined_cost: combinedCost,
      preparation_seconds: preparationSeconds,
    };
  } finally {
    if (worker) await worker.stop();
    await server.stop();
  }
}

// ---------------------------------------------------------------------------------------------------
// Phase 5: slip settlement by the worker, the QR payload given, for issue 15's ratio

interface SettleSlip {
  order: SlipOrder;
  multipart: { body: Buffer; content_type: string };
  image_bytes: number;
}

interface SettleChecks {
  settled: number;
  statuses: Record<string, number>;
  outcomes: Record<string, number>;
  /** Receipts whose reference came from the upload's payload (no pixels read). */
  from_payload: number;
  /** Settled orders with their deposit.settled event. */
  settled_events: number;
  /** Withdrawal legs of these orders that are filled. */
  filled_legs: number;
  legs: number;
}

interface SettlePhase {
  /** The measured batch; the warm-up batch is processed before it, by the same worker, unmeasured. */
  slips: number;
  warmup_slips: number;
  uploads_accepted: number;
  warmup_uploads_accepted: number;
  upload_failures: string[];
  mean_image_bytes: number;
  drained: boolean;
  seconds: number;
  processed: number;
  /** Jobs the worker ran during the phase, by `task:outcome`, slips.process included. */
  jobs: Record<string, number>;
  cost: PhaseCost;
  /**
   * The same stretch under this file's meters, which tell the worker's own PostgreSQL sessions
   * (application_name) from the background processes that every database of the server shares.
   */
  split_cost: Cost;
  checks: SettleChecks;
  preparation_seconds: number;
}

/** A multipart upload with the `file` part and the optional `payload` field (the mini-QR text the client read). */
function multipartWithPayload(image: Buffer, payload: string): { body: Buffer; content_type: string } {
  const boundary = `----benchslip${crypto.randomBytes(8).toString('hex')}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slip.png"\r\nContent-Type: image/png\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="payload"\r\n\r\n${payload}\r\n--${boundary}--\r\n`),
  ]);
  return { body, content_type: `multipart/form-data; boundary=${boundary}` };
}

/**
 * Orders, each with its own sandbox transfer, and its upload: the sandbox's slip PNG as the bank app
 * shows it (no photo treatment) with the slip's mini-QR text as `payload`, so that the worker takes the
 * reference from the payload and never decodes the image.
 */
async function prepareSettle(settings: SlipSettings, instance: ServiceInstance, database: Database, depositors: WalletAccount[], count: number): Promise<SettleSlip[]> {
  const orders = await createOrders(settings, instance, database, depositors, count);
  return mapConcurrent(orders, 2, async (order) => {
    const made = await database.transaction((tx) => instance.services.sandboxBank.transfer(tx, order.account, { deposit_id: order.deposit_id }));
    if (!made || !made.ok) throw new Error(`the sandbox bank made no transfer for ${order.deposit_id}: ${made ? made.error.code : 'not found'}`);
    const image = Buffer.from(made.value.slip.image_base64, 'base64');
    return { order, multipart: multipartWithPayload(image, made.value.slip.payload), image_bytes: image.length };
  });
}

/** POSTs one upload to the server's port with the upload address's Host header; the status and, unless 202, the body. */
function postUpload(agent: http.Agent, baseUrl: string, request: UploadRequest): Promise<{ status: number; body: string }> {
  const url = new URL(request.path, baseUrl);
  return new Promise((resolve, reject) => {
    const outgoing = http.request(url, { method: 'POST', agent, headers: { ...request.headers, 'content-length': String(request.body.length) } }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}

async function checkSettle(database: Database, ids: string[]): Promise<SettleChecks> {
  const { rows } = await database.query<{ status: string; outcome: string | null; source: string | null; settled_events: number }>(
    `SELECT d.status, r.outcome, r.verification->>'source' AS source,
            (SELECT count(*)::int FROM events e WHERE e.white_label_id = d.white_label_id AND e.object_id = d.deposit_id AND e.type = 'deposit.settled') AS settled_events
       FROM deposit_orders d
       LEFT JOIN slip_receipts r ON r.white_label_id = d.white_label_id AND r.deposit_id = d.deposit_id
      WHERE d.deposit_id = ANY($1::text[])`,
    [ids],
  );
  const legs = await database.query<{ legs: number; filled: number }>(
    `SELECT count(*)::int AS legs, count(*) FILTER (WHERE l.status = 'filled')::int AS filled
       FROM deposit_legs d JOIN withdrawal_legs l ON l.white_label_id = d.white_label_id AND l.leg_ref = d.withdrawal_leg_ref
      WHERE d.deposit_id = ANY($1::text[])`,
    [ids],
  );
  const checks: SettleChecks = { settled: 0, statuses: {}, outcomes: {}, from_payload: 0, settled_events: 0, filled_legs: legs.rows[0]?.filled ?? 0, legs: legs.rows[0]?.legs ?? 0 };
  for (const row of rows) {
    checks.statuses[row.status] = (checks.statuses[row.status] ?? 0) + 1;
    checks.outcomes[row.outcome ?? 'unprocessed'] = (checks.outcomes[row.outcome ?? 'unprocessed'] ?? 0) + 1;
    if (row.status === 'settled') checks.settled += 1;
    if (row.source === 'client_payload') checks.from_payload += 1;
    if (row.status === 'settled' && row.settled_events > 0) checks.settled_events += 1;
  }
  return checks;
}

function jobsSince(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const jobs: Record<string, number> = {};
  for (const [key, value] of Object.entries(after)) {
    if (value > (before[key] ?? 0)) jobs[key] = value - (before[key] ?? 0);
  }
  return jobs;
}

/** Uploads the slips to the server, `connections` at a time; counts the 202s and keeps the first refusals. */
async function uploadSlips(settings: SlipSettings, server: RoleProcess, slips: SettleSlip[], tag: string, tally: { accepted: number; failures: string[] }): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: settings.connections });
  try {
    await mapConcurrent(slips, settings.connections, async (slip, index) => {
      const answer = await postUpload(agent, server.base_url as string, {
        path: slip.order.path,
        headers: { host: UPLOAD_HOST, 'content-type': slip.multipart.content_type, 'idempotency-key': `${tag}-${RUN_TAG}-${index}`, authorization: `Bearer ${slip.order.upload.token}` },
        body: slip.multipart.body,
      });
      if (answer.status === 202) tally.accepted += 1;
      else if (tally.failures.length < 3) tally.failures.push(`${answer.status} ${answer.body.slice(0, 200)}`);
    });
  } finally {
    agent.destroy();
  }
}

const SETTLE_SUCCEEDED_KEY = `${PROCESS_SLIP_TASK}:succeeded`;

/** Waits until the worker has succeeded `count` more slip jobs than in `before`; its last usage, and whether it got there. */
async function drainSlipJobs(settings: SlipSettings, worker: RoleProcess, before: UsageMessage, count: number): Promise<{ after: UsageMessage; drained: boolean }> {
  const started = performance.now();
  let after = before;
  // Progress comes from the worker over IPC, so that watching it costs PostgreSQL nothing.
  while ((performance.now() - started) / 1000 < settings.drain_timeout_seconds) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    after = await worker.usage();
    if ((after.jobs[SETTLE_SUCCEEDED_KEY] ?? 0) - (before.jobs[SETTLE_SUCCEEDED_KEY] ?? 0) >= count) return { after, drained: true };
  }
  return { after, drained: false };
}

/**
 * Slip settlement by the worker, measured apart from intake and from reading pixels. Due jobs of the
 * set-up (beneficiary checks) are run first, in this process. A warm-up batch is uploaded (a server
 * process, worker off) and processed by a held worker process, which is then held again: its code is
 * compiled and its connections have their caches, as in a running service. The measured batch is then
 * uploaded in full, the tables analysed and checkpointed, and the worker is metered from its first claim
 * until every slip's job has succeeded: its CPU, PostgreSQL's (bench/meters.ts: the bench database's
 * backends, the WAL writer, checkpointer and background writer), round trips and transactions
 * (countingDatabase in the worker) and WAL, per processed slip.
 */
async function runSettlePhase(
  settings: SlipSettings,
  instance: ServiceInstance,
  databaseUrl: string,
  database: Database,
  masterKey: Buffer,
  evidenceDirectory: string | null,
  slips: SettleSlip[],
  preparationSeconds: number,
): Promise<SettlePhase> {
  // Pending slip jobs of the intake phase have no transfer behind them: they would send orders to
  // review inside the measurement. They are removed, not run.
  const removed = await database.query<{ count: number }>(`WITH gone AS (DELETE FROM jobs WHERE task = $1 AND status = 'pending' RETURNING 1) SELECT count(*)::int AS count FROM gone`, [PROCESS_SLIP_TASK]);
  if ((removed.rows[0]?.count ?? 0) > 0) log(`settle: removed ${removed.rows[0]?.count ?? 0} pending slip jobs of earlier phases`);
  // Other due jobs (the withdrawing merchants' beneficiary checks) are run now, not in the phase.
  const ranBefore = await instance.worker.runDueJobs();
  if (ranBefore > 0) log(`settle: ran ${ranBefore} due jobs of the set-up before the phase`);
  const warmupSlips = slips.slice(0, settings.settle_warmup_slips);
  const measuredSlips = slips.slice(settings.settle_warmup_slips);
  const warmupTally = { accepted: 0, failures: [] as string[] };
  const tally = { accepted: 0, failures: [] as string[] };
  const server = await RoleProcess.start('api', settings, databaseUrl, masterKey, evidenceDirectory);
  let worker: RoleProcess | null = null;
  try {
    log(`settle: warm-up, ${warmupSlips.length} slips`);
    await uploadSlips(settings, server, warmupSlips, 'settle-warmup', warmupTally);
    await adminQuery(databaseUrl, 'ANALYZE');
    worker = await RoleProcess.start('worker', settings, databaseUrl, masterKey, evidenceDirectory, { held: true });
    const warmupBefore = await worker.usage();
    worker.startWorker();
    const warmup = await drainSlipJobs(settings, worker, warmupBefore, warmupTally.accepted);
    if (!warmup.drained) throw new Error(`settle: the warm-up's slips were still unprocessed after ${settings.drain_timeout_seconds} s`);
    worker.holdWorker();
    log(`settle: uploading ${measuredSlips.length} slips with their payload (${settings.connections} connections, not measured)`);
    await uploadSlips(settings, server, measuredSlips, 'settle', tally);
  } catch (error) {
    await worker?.stop();
    throw error;
  } finally {
    await server.stop();
  }
  try {
    await adminQuery(databaseUrl, 'ANALYZE');
    await adminQuery(databaseUrl, 'CHECKPOINT');
    log(`settle: processing ${tally.accepted} slips, worker concurrency ${settings.worker_concurrency}`);
    const meter = await startPhaseMeter(settings);
    const splitMeter = await startMeter(settings);
    const before = await worker.usage();
    const started = performance.now();
    worker.startWorker();
    const { after, drained } = await drainSlipJobs(settings, worker, before, tally.accepted);
    const seconds = (performance.now() - started) / 1000;
    const processed = (after.jobs[SETTLE_SUCCEEDED_KEY] ?? 0) - (before.jobs[SETTLE_SUCCEEDED_KEY] ?? 0);
    const stats = diffStats(after.stats, before.stats);
    const reading = await stopMeter(settings, splitMeter);
    const cost = await stopPhaseMeter(settings, meter, processed, after.cpu_us - before.cpu_us, stats);
    const splitCost = costOf({
      label: 'settle: slip settlement (worker process, payload given)',
      reading,
      operations: processed,
      service_us: after.cpu_us - before.cpu_us,
      load_generator_us: reading.self_cpu_us,
      postgres_groups: ['worker', 'other'],
      stats,
      peak_rss_bytes: after.max_rss_bytes,
    });
    log(`settle: ${processed} slips in ${fixed(seconds, 1)} s (${fixed(processed / seconds, 0)}/s)`);
    const checks = await checkSettle(database, measuredSlips.map((slip) => slip.order.deposit_id));
    return {
      slips: measuredSlips.length,
      warmup_slips: warmupSlips.length,
      uploads_accepted: tally.accepted,
      upload_failures: [...warmupTally.failures, ...tally.failures],
      warmup_uploads_accepted: warmupTally.accepted,
      mean_image_bytes: measuredSlips.reduce((sum, slip) => sum + slip.image_bytes, 0) / Math.max(1, measuredSlips.length),
      drained,
      seconds,
      processed,
      jobs: jobsSince(after.jobs, before.jobs),
      cost,
      split_cost: splitCost,
      checks,
      preparation_seconds: preparationSeconds,
    };
  } finally {
    await worker.stop();
  }
}

// ---------------------------------------------------------------------------------------------------
// Phase 6: the QR reader over the corpus and the 1 MiB photos

interface ReadTally {
  label: string;
  read: number;
  total: number;
  times_ms: number[];
}

async function runQrPhase(settings: SlipSettings, reader: SlipReader, intakeTally: ReadTally | null): Promise<ReadTally[]> {
  const tallies = new Map<string, ReadTally>(VARIANTS.map((variant) => [variant, { label: variant, read: 0, total: 0, times_ms: [] }]));
  log(`qr: ${settings.qr_slips} sandbox slips × ${VARIANTS.length} variants`);
  for (let index = 0; index < settings.qr_slips; index += 1) {
    const details = corpusDetails(index);
    const rendered = await renderSlipImage(details);
    for (const variant of VARIANTS) {
      const bytes = await makeVariant(rendered.bytes, variant, 7000 + index);
      const tally = tallies.get(variant) as ReadTally;
      const started = performance.now();
      const read = await reader.read(bytes);
      tally.times_ms.push(performance.now() - started);
      tally.total += 1;
      if (read.outcome === 'read' && read.reference.trans_ref === details.trans_ref) tally.read += 1;
    }
  }
  return [...tallies.values(), ...(intakeTally ? [intakeTally] : [])];
}

interface StageTiming {
  label: string;
  read: number | null;
  total: number;
  cpu_ms: number[];
  wall_ms: number[];
}

/** CPU (this process, libvips's threads included) and wall time of one step, recorded unless `stage` is null. */
async function timed<T>(stage: StageTiming | null, work: () => Promise<T>): Promise<T> {
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const result = await work();
  if (stage) {
    stage.wall_ms.push(performance.now() - started);
    const cpu = process.cpuUsage(cpuBefore);
    stage.cpu_ms.push((cpu.user + cpu.system) / 1000);
    stage.total += 1;
  }
  return result;
}

function holdsReference(texts: string[], trans_ref: string): boolean {
  return texts.some((text) => {
    const parsed = parseSlipPayload(text);
    return parsed.ok && parsed.reference.trans_ref === trans_ref;
  });
}

/**
 * Where SlipReader's time goes on the 1 MiB photos, step by step: its first pass (decoding to 1,000
 * pixels, which lets sharp shrink the JPEG while decoding it, then zxing on the whole image) and its
 * second pass, run only when the first reads nothing (decoding to 2,000 pixels, then the attempt list,
 * of which the whole image is the first).
 */
async function runReaderStages(photos: { jpeg: Buffer; trans_ref: string }[]): Promise<StageTiming[]> {
  const decode: StageTiming = { label: 'second pass: decode to 2,000 px (only when the first reads nothing)', read: null, total: 0, cpu_ms: [], wall_ms: [] };
  const whole: StageTiming = { label: 'second pass: zxing on the whole 2,000 px image', read: 0, total: 0, cpu_ms: [], wall_ms: [] };
  const smallDecode: StageTiming = { label: 'first pass: decode to 1,000 px (JPEG shrink-on-load)', read: null, total: 0, cpu_ms: [], wall_ms: [] };
  const smallWhole: StageTiming = { label: 'first pass: zxing on the whole 1,000 px image', read: 0, total: 0, cpu_ms: [], wall_ms: [] };
  for (let round = 0; round < 3; round += 1) {
    // The first round warms sharp's and zxing's caches and is not counted.
    const counted = round > 0;
    for (const photo of photos) {
      const decoded = await timed(counted ? decode : null, () => decodeSlipImage(photo.jpeg));
      if (!decoded.ok) throw new Error(`a 1 MiB photo did not decode: ${decoded.reason}`);
      const texts = await timed(counted ? whole : null, () => readQrTexts(decoded.image));
      if (counted && holdsReference(texts, photo.trans_ref)) whole.read = (whole.read ?? 0) + 1;
      const small = await timed(counted ? smallDecode : null, () => decodeSlipImage(photo.jpeg, QUICK_DECODE_LONG_EDGE_PX));
      if (!small.ok) throw new Error(`a 1 MiB photo did not decode to 1,000 px: ${small.reason}`);
      const smallTexts = await timed(counted ? smallWhole : null, () => readQrTexts(small.image));
      if (counted && holdsReference(smallTexts, photo.trans_ref)) smallWhole.read = (smallWhole.read ?? 0) + 1;
    }
  }
  return [decode, whole, smallDecode, smallWhole];
}

// ---------------------------------------------------------------------------------------------------
// Report

function answersFailure(name: string, answers: Answers): string[] {
  if (notAccepted(answers) === 0) return [];
  return [`${name}: ${notAccepted(answers)} answers not 202 (statuses ${JSON.stringify(answers.status_counts)}, ${answers.errors} errors, ${answers.timeouts} timeouts)` + (answers.sample ? `; first: ${answers.sample}` : '')];
}

function mebibytes(bytes: number): string {
  return fixed(bytes / MEBIBYTE_BYTES, 3);
}

function commitOf(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: path.dirname(fileURLToPath(import.meta.url)), encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: path.dirname(fileURLToPath(import.meta.url)), encoding: 'utf8' }).trim();
    return dirty.length > 0 ? `${commit} (with uncommitted changes)` : commit;
  } catch {
    return 'unknown';
  }
}

function report(input: {
  settings: SlipSettings;
  background: number;
  pgbench: PgbenchPhase | null;
  storage: StoragePhase | null;
  intake: IntakePhase | null;
  endToEnd: EndToEndPhase | null;
  settle: SettlePhase | null;
  qr: ReadTally[];
  stages: StageTiming[];
  photoQuality: number | null;
  pgbenchInit: string | null;
  seconds: number;
}): { text: string; failures: string[] } {
  const { settings, pgbench, storage, intake, endToEnd, settle } = input;
  const lines: string[] = [];
  const failures: string[] = [];
  lines.push(`Commit ${commitOf()}, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} cores, machine ${fixed(input.background * 100, 0)} % busy before the run, whole run ${fixed(input.seconds, 0)} s.`);

  const rows: string[][] = [];
  if (pgbench) {
    rows.push([`pgbench TPC-B (scale ${settings.pgbench_scale}, -c ${settings.pgbench_clients} -j 2)`, `${fixed(pgbench.result.tps, 0)} tx/s`, '', '', '', '', fixed(pgbench.result.p50_ms, 2), fixed(pgbench.result.p99_ms, 2), String(pgbench.result.failed)]);
  }
  if (storage) {
    rows.push([
      `plain INSERT of ${storage.row_bytes}-byte rows (${storage.clients} clients)`,
      `${fixed(storage.rows_per_second, 1)} rows/s`,
      fixed(storage.mebibytes_per_second, 1),
      '100 %',
      '(storage limit)',
      '',
      fixed(storage.p50_ms, 1),
      fixed(storage.p99_ms, 1),
      '0',
    ]);
  }
  if (intake) {
    const mebibytesPerSecond = (intake.max.accepted_per_second * intake.mean_image_bytes) / MEBIBYTE_BYTES;
    const ratio = storage ? mebibytesPerSecond / storage.mebibytes_per_second : Number.NaN;
    rows.push([
      `intake, 1 MiB JPEG multipart (HTTP, ${settings.connections} connections, closed loop)`,
      `${fixed(intake.max.accepted_per_second, 1)} 202/s`,
      fixed(mebibytesPerSecond, 1),
      Number.isFinite(ratio) ? `${fixed(ratio * 100, 1)} %` : 'n/a',
      `≥ ${GOAL_STORAGE_RATIO * 100} %`,
      Number.isFinite(ratio) ? (ratio >= GOAL_STORAGE_RATIO ? 'met' : '**missed**') : 'not measured',
      fixed(intake.max.saturated_p50_ms, 1),
      fixed(intake.max.saturated_p99_ms, 1),
      String([intake.warmup, intake.max, intake.paced].reduce((sum, phase) => sum + (phase ? notAccepted(phase) : 0), 0)),
    ]);
  }
  if (rows.length > 0) {
    lines.push('');
    lines.push(markdownTable(['scenario', 'throughput', 'MiB/s', 'ratio to plain INSERT MiB/s', 'goal', 'result', 'p50 ms', 'p99 ms', 'failures'], ['l', 'r', 'r', 'r', 'r', 'l', 'r', 'r', 'r'], rows));
    lines.push('');
    lines.push('p50/p99 above are closed-loop latencies at the maximum (pgbench from its per-transaction log, the plain inserts per statement, autocannon for HTTP).');
  }

  if (intake?.paced) {
    const openLoop = intake.paced;
    lines.push('');
    lines.push(
      markdownTable(
        ['intake, constant arrival rate', 'target → achieved 202/s', 'p50 ms', 'p99 ms', 'max ms', 'generator send lag p99 ms', 'failures'],
        ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
        [[`${fixed(settings.rate_fraction * 100, 0)} % of the maximum`, `${fixed(openLoop.target_rate, 1)} → ${fixed(openLoop.achieved_rate, 1)}`, fixed(openLoop.p50_ms, 1), fixed(openLoop.p99_ms, 1), fixed(openLoop.max_ms, 1), fixed(openLoop.send_lag_p99_ms, 2), String(notAccepted(openLoop))]],
      ),
    );
  }

  if (endToEnd) {
    const total = endToEnd.total;
    const met = endToEnd.drained && endToEnd.settled === endToEnd.orders && Number.isFinite(total.p99_ms) && total.p99_ms < GOAL_SETTLED_P99_MS;
    lines.push('');
    lines.push(
      markdownTable(
        ['202 → deposit.settled', 'slips', 'uploads target → achieved /s', 'settled', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'goal', 'result'],
        ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
        [
          [
            `whole (settled_at − received_at), worker ${endToEnd.worker_in_server ? 'in the server process' : 'in its own process'}`,
            String(endToEnd.orders),
            `${fixed(endToEnd.rate, 1)} → ${fixed(endToEnd.uploads.achieved_rate, 1)}`,
            `${endToEnd.settled} (${fixed((endToEnd.settled / Math.max(1, endToEnd.orders)) * 100, 1)} %)`,
            fixed(total.p50_ms, 0),
            fixed(total.p95_ms, 0),
            fixed(total.p99_ms, 0),
            fixed(total.max_ms, 0),
            `p99 < ${GOAL_SETTLED_P99_MS} ms`,
            met ? 'met' : '**missed**',
          ],
          ['… waiting for the worker (202 → claimed)', String(endToEnd.waiting.count), '', '', fixed(endToEnd.waiting.p50_ms, 0), fixed(endToEnd.waiting.p95_ms, 0), fixed(endToEnd.waiting.p99_ms, 0), fixed(endToEnd.waiting.max_ms, 0), '', ''],
          ['… processing (claimed → settled)', String(endToEnd.processing.count), '', '', fixed(endToEnd.processing.p50_ms, 0), fixed(endToEnd.processing.p95_ms, 0), fixed(endToEnd.processing.p99_ms, 0), fixed(endToEnd.processing.max_ms, 0), '', ''],
          ['the uploads\' own 202 latency', String(endToEnd.uploads.accepted), '', '', fixed(endToEnd.uploads.p50_ms, 0), '', fixed(endToEnd.uploads.p99_ms, 0), fixed(endToEnd.uploads.max_ms, 0), '', ''],
        ],
      ),
    );
    lines.push('');
    lines.push(
      `Waiting includes the worker's idle poll (every ${WORKER_IDLE_POLL_MS} ms, so ${WORKER_IDLE_POLL_MS / 2} ms on average when it is idle) and any wait for a free slot ` +
        `(concurrency ${settings.worker_concurrency}); mean wait ${fixed(endToEnd.waiting.mean_ms, 0)} ms of a mean total ${fixed(endToEnd.total.mean_ms, 0)} ms ` +
        `(${fixed((endToEnd.waiting.mean_ms / Math.max(1, endToEnd.total.mean_ms)) * 100, 0)} %). ` +
        `Statuses: ${JSON.stringify(endToEnd.statuses)}; outcomes: ${JSON.stringify(endToEnd.outcomes)}; read from pixels: ${endToEnd.read_from_pixels}. ` +
        `The last slip was processed ${fixed(endToEnd.drain_seconds, 1)} s after the last upload${endToEnd.drained ? '' : ' (**not all were processed before the timeout**)'}; ` +
        `mean slip ${mebibytes(endToEnd.mean_image_bytes)} MiB; preparing the slips (transfers and photos, not measured) took ${fixed(endToEnd.preparation_seconds, 0)} s.`,
    );
  }

  const costRows: string[][] = [];
  const costRow = (cost: Cost): string[] => [
    cost.label,
    String(cost.operations),
    fixed(cost.service_cpu_us, 0),
    fixed(cost.load_generator_cpu_us, 0),
    fixed(cost.postgres_cpu_us, 0),
    fixed(cost.postgres_background_cpu_us, 0),
    fixed(cost.service_cpu_us + cost.load_generator_cpu_us + cost.postgres_cpu_us + cost.postgres_background_cpu_us, 0),
    fixed(cost.other_cpu_us, 0),
    `${fixed(cost.machine_busy * 100, 0)} %`,
    cost.round_trips === null ? 'n/a' : fixed(cost.round_trips, 1),
    cost.transactions === null ? 'n/a' : fixed(cost.transactions, 1),
    fixed(cost.wal_bytes / 1024, 0),
    cost.peak_rss_bytes === null ? '' : fixed(cost.peak_rss_bytes / MEBIBYTE_BYTES, 0),
  ];
  if (pgbench) costRows.push(costRow(pgbench.cost));
  if (storage) costRows.push(costRow(storage.cost));
  if (intake) costRows.push(costRow(intake.cost));
  if (endToEnd?.intake_cost) costRows.push(costRow(endToEnd.intake_cost));
  if (endToEnd?.verification_cost) costRows.push(costRow(endToEnd.verification_cost));
  if (endToEnd) costRows.push(costRow(endToEnd.combined_cost));
  if (settle) costRows.push(costRow(settle.split_cost));
  if (costRows.length > 0) {
    lines.push('');
    lines.push(
      markdownTable(
        ['per operation', 'operations', 'service CPU µs', 'load generator CPU µs', 'PostgreSQL backends CPU µs', 'PostgreSQL background CPU µs', 'sum µs', 'other processes µs', 'machine busy', 'DB round trips', 'transactions', 'WAL KiB', 'peak RSS MiB'],
        ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
        costRows,
      ),
    );
    lines.push('');
    lines.push(
      'PostgreSQL backends: the sessions of the row\'s own process (application_name); background: the WAL writer, checkpointer, background writer and autovacuum, ' +
        'shared by everything in the phase. In the end-to-end rows, "other processes" is the machine minus everything measured in the phase; the worker\'s CPU ' +
        'includes its idle polls and the webhook dispatcher of that process. DB round trips count statements sent together (BEGIN with the first statement, the last writes with COMMIT) once; pgbench\'s are its 5 statements, BEGIN and END.',
    );
  }

  if (settle) {
    const referenceCpuMicros = pgbench?.phase_cost.postgres_cpu_us ?? Number.NaN;
    const ratioOf = (cost: PhaseCost) => (cost.app_cpu_us + cost.postgres_cpu_us) / referenceCpuMicros;
    const shown = (value: number) => (Number.isFinite(value) ? `${fixed(value, 2)}×` : 'n/a');
    const rows: string[][] = [];
    if (pgbench) rows.push([...phaseCostRow(`pgbench TPC-B (scale ${settings.pgbench_scale})`, pgbench.phase_cost, '7', '1'), shown(ratioOf(pgbench.phase_cost))]);
    rows.push([
      ...phaseCostRow('slip settlement (worker, payload given)', settle.cost, perOperation(settle.cost, (stats) => stats.round_trips), perOperation(settle.cost, (stats) => stats.transactions)),
      shown(ratioOf(settle.cost)),
    ]);
    lines.push('');
    lines.push(markdownTable(['per operation', ...COST_COLUMNS, '(service + PostgreSQL) ÷ TPC-B'], ['l', ...COST_COLUMNS.map(() => 'r' as const), 'r'], rows));
    const ratio = ratioOf(settle.cost);
    const roundTrips = settle.cost.stats ? settle.cost.stats.round_trips / Math.max(1, settle.cost.ops) : Number.NaN;
    const verdict = (met: boolean, measured: boolean) => (measured ? (met ? 'met' : '**missed**') : 'not measured');
    lines.push('');
    lines.push(
      markdownTable(
        ['slip settlement, issue 15', 'measured', 'goal', 'result'],
        ['l', 'r', 'r', 'l'],
        [
          // Judged at the precision shown: the count includes the worker's idle polls once the queue is empty
          // (a few in a thousand slips), which are not part of any slip's settlement.
          ['DB round trips per slip', fixed(roundTrips, 1), `≤ ${GOAL_SETTLE_ROUND_TRIPS}`, verdict(Number(fixed(roundTrips, 1)) <= GOAL_SETTLE_ROUND_TRIPS, Number.isFinite(roundTrips))],
          ['(service + PostgreSQL) CPU ÷ TPC-B', shown(ratio), `≤ ${GOAL_SETTLE_TPCB_RATIO}×`, verdict(ratio <= GOAL_SETTLE_TPCB_RATIO, Number.isFinite(ratio))],
        ],
      ),
    );
    lines.push('');
    lines.push(
      (pgbench
        ? `TPC-B: ${fixed(pgbench.result.tps, 0)} tx/s, PostgreSQL ${fixed(referenceCpuMicros, 0)} µs per transaction under bench/meters.ts's meters, the unit of the last column. `
        : 'TPC-B not measured (BENCH_ONLY without pgbench): no ratio. ') +
        `Per processed slip: the worker process (its job loop only: no webhook dispatcher, no housekeeping; its idle polls once the queue is empty included) and PostgreSQL ` +
        `(the bench database's backends, the WAL writer, checkpointer and background writer), from the worker's first claim until every slip's job had succeeded ` +
        `(${settle.processed} slips in ${fixed(settle.seconds, 1)} s, ${fixed(settle.processed / Math.max(1e-9, settle.seconds), 0)}/s, concurrency ${settings.worker_concurrency}). ` +
        `The uploads carry the slip's mini-QR text as \`payload\`, so the reference is not read from pixels; the worker still reads the stored image ` +
        `(the sandbox's PNG, mean ${fixed(settle.mean_image_bytes / 1024, 1)} KiB) from the blob store, opens and hashes it. ` +
        `Jobs the worker ran in the phase: ${JSON.stringify(settle.jobs)}. Preparing the orders, transfers and uploads (not measured) took ${fixed(settle.preparation_seconds, 0)} s.`,
    );
    const checks = settle.checks;
    lines.push('');
    lines.push(
      markdownTable(
        ['settle check', 'value'],
        ['l', 'r'],
        [
          ['orders (measured; warm-up orders before them)', `${settle.slips} (${settle.warmup_slips})`],
          ['uploads answered 202 (warm-up)', `${settle.uploads_accepted} (${settle.warmup_uploads_accepted})`],
          ['slip jobs succeeded in the phase', String(settle.processed)],
          ['orders settled', String(checks.settled)],
          ['… with their deposit.settled event', String(checks.settled_events)],
          ['withdrawal legs filled / legs', `${checks.filled_legs} / ${checks.legs}`],
          ['receipts read from the payload (not pixels)', String(checks.from_payload)],
          ['statuses', JSON.stringify(checks.statuses)],
          ['receipt outcomes', JSON.stringify(checks.outcomes)],
        ],
      ),
    );
    if (settle.uploads_accepted !== settle.slips || settle.warmup_uploads_accepted !== settle.warmup_slips) {
      failures.push(`settle: ${settle.slips + settle.warmup_slips - settle.uploads_accepted - settle.warmup_uploads_accepted} uploads not 202 (first: ${settle.upload_failures.join(' | ')})`);
    }
    if (!settle.drained) failures.push(`settle: slips still unprocessed ${settings.drain_timeout_seconds} s after the worker started`);
    if (checks.settled !== settle.slips) failures.push(`settle: ${settle.slips - checks.settled} of ${settle.slips} orders did not settle (${JSON.stringify(checks.statuses)})`);
    if (checks.settled_events !== checks.settled) failures.push(`settle: ${checks.settled - checks.settled_events} settled orders without their deposit.settled event`);
    if (checks.filled_legs !== checks.legs) failures.push(`settle: ${checks.legs - checks.filled_legs} of ${checks.legs} withdrawal legs not filled`);
    if (checks.from_payload !== settle.slips) failures.push(`settle: ${settle.slips - checks.from_payload} receipts not read from the payload, so the phase measured image work`);
  }

  if (input.qr.length > 0) {
    lines.push('');
    lines.push(
      markdownTable(
        ['QR reader (SlipReader.read)', 'read', 'share', 'goal', 'result', 'mean ms', 'p95 ms'],
        ['l', 'r', 'r', 'r', 'l', 'r', 'r'],
        [
          ...input.qr.map((tally) => {
            const sorted = [...tally.times_ms].sort((a, b) => a - b);
            const share = tally.read / Math.max(1, tally.total);
            return [tally.label, `${tally.read}/${tally.total}`, `${fixed(share * 100, 1)} %`, '100 %', tally.read === tally.total ? 'met' : '**missed**', fixed(tally.times_ms.reduce((sum, value) => sum + value, 0) / Math.max(1, tally.times_ms.length), 1), fixed(percentile(sorted, 0.95), 1)];
          }),
          ...(endToEnd
            ? [[`1 MiB photo, end to end (the pipeline, from pixels)`, `${endToEnd.read_from_pixels}/${endToEnd.orders}`, `${fixed((endToEnd.read_from_pixels / Math.max(1, endToEnd.orders)) * 100, 1)} %`, '100 %', endToEnd.read_from_pixels === endToEnd.orders ? 'met' : '**missed**', '', '']]
            : []),
        ],
      ),
    );
    lines.push('');
    lines.push(`Corpus: bench/qr-corpus.ts's slips 0–${settings.qr_slips - 1} and its variants; read means the slip's own reference was decoded. Times run on an idle machine, in the bench process.`);
  }

  if (input.stages.length > 0) {
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);
    lines.push('');
    lines.push(
      markdownTable(
        ['reader step on the 1 MiB photos (idle machine, in the bench process)', 'read', 'CPU ms (mean)', 'wall ms (mean)'],
        ['l', 'r', 'r', 'r'],
        input.stages.map((stage) => [stage.label, stage.read === null ? '' : `${stage.read}/${stage.total}`, fixed(mean(stage.cpu_ms), 1), fixed(mean(stage.wall_ms), 1)]),
      ),
    );
    lines.push('');
    lines.push('CPU includes sharp\'s (libvips) threads. The what-if rows are not what the service runs: they measure a cheaper first attempt for the reader.');
  }

  if (intake) {
    const checks = intake.checks;
    lines.push('');
    lines.push(
      markdownTable(
        ['intake check', 'value'],
        ['l', 'r'],
        [
          ['answered 202 (warm-up + closed loop + open loop)', String(intake.accepted)],
          ['receipts in the database', String(checks.receipts)],
          [`… image/jpeg within ${settings.slip_tolerance_percent} % of ${settings.slip_bytes} bytes, multipart`, `${checks.receipts_in_size_band}, ${checks.multipart_receipts}`],
          ['… with their blob', String(checks.blobs)],
          ['… with their pending slips.process job', String(checks.pending_jobs)],
          ['uploads that were an order\'s second or third', String(checks.repeat_uploads)],
          ['mean slip (MiB), JPEG quality', `${mebibytes(intake.mean_image_bytes)}, ${input.photoQuality ?? 'n/a'}`],
          ['server peak RSS (MiB)', fixed((intake.cost.peak_rss_bytes ?? 0) / MEBIBYTE_BYTES, 0)],
        ],
      ),
    );
    if (checks.receipts < intake.accepted) failures.push(`intake: ${intake.accepted} answers 202 but ${checks.receipts} receipts in the database`);
    if (checks.blobs !== checks.receipts && settings.evidence_store === 'postgres') failures.push(`intake: ${checks.receipts} receipts but ${checks.blobs} blobs`);
    if (checks.pending_jobs !== checks.receipts) failures.push(`intake: ${checks.receipts} receipts but ${checks.pending_jobs} pending slip jobs`);
    if (checks.receipts_in_size_band !== checks.receipts || checks.multipart_receipts !== checks.receipts) failures.push('intake: receipts outside the size band or not multipart');
    if (intake.warmup) failures.push(...answersFailure('intake (warm-up)', intake.warmup));
    failures.push(...answersFailure('intake (closed loop)', intake.max));
    if (intake.paced) {
      failures.push(...answersFailure('intake (open loop)', intake.paced));
      if (intake.paced.achieved_rate < intake.paced.target_rate * 0.95) failures.push(`intake: the open loop achieved ${fixed(intake.paced.achieved_rate, 1)} of ${fixed(intake.paced.target_rate, 1)} 202/s`);
    }
  }
  if (endToEnd) {
    failures.push(...answersFailure('end_to_end uploads', endToEnd.uploads));
    if (!endToEnd.drained) failures.push(`end_to_end: slips still unprocessed ${settings.drain_timeout_seconds} s after the last upload`);
    if (endToEnd.settled !== endToEnd.orders) failures.push(`end_to_end: ${endToEnd.orders - endToEnd.settled} of ${endToEnd.orders} orders did not settle (${JSON.stringify(endToEnd.statuses)})`);
  }
  for (const tally of input.qr) if (tally.read !== tally.total) failures.push(`qr: ${tally.label}: ${tally.read} of ${tally.total} read`);
  if (pgbench && pgbench.result.failed > 0) failures.push(`pgbench: ${pgbench.result.failed} failed transactions`);

  lines.push('');
  const details = [
    `Settings: ${settings.seconds} s per phase, ${settings.warmup_seconds} s warm-up, service pool ${settings.db_pool}`,
    `HTTP ${settings.connections} connections, open loop at ${fixed(settings.rate_fraction * 100, 0)} %`,
    `${settings.intake_orders} intake orders, ${settings.intake_images} distinct intake photos`,
    `end to end ${settings.end_to_end_seconds} s of uploads, worker concurrency ${settings.worker_concurrency}`,
    `${settings.settle_slips} settle slips after ${settings.settle_warmup_slips} of warm-up`,
    `deposits of ${fixed(settings.deposit_minor / 100, 2)} THB from ${settings.deposit_merchants} merchants into withdrawals of ${fixed(settings.withdrawal_minor / 100, 2)} THB of ${settings.withdrawing_merchants} merchants`,
    `evidence store ${settings.evidence_store}`,
    `pgbench scale ${settings.pgbench_scale}, -c ${settings.pgbench_clients} -j 2`,
  ];
  lines.push(
    details.join(', ') +
      (settings.database_settings.length > 0 ? `, **what-if database settings: ${settings.database_settings.map(([name, value]) => `${name}=${value}`).join(', ')}**.` : '.'),
  );
  if (pgbench) lines.push(`pgbench: \`${input.pgbenchInit ?? 'pgbench -i'}\`, then \`${pgbench.result.command.replace(/postgres(ql)?:\/\/\S+/, '<db>')}\``);

  if (settings.statement_profile) {
    // The settle phase's cost is bench/meters.ts's (operations are `ops` there); the others are this file's.
    const profiles: [string, { stats: StatementStats | null; operations: number } | null][] = [
      ['intake (server process, closed loop)', intake ? intake.cost : null],
      ['verification (worker process)', endToEnd?.verification_cost ?? null],
      ['settle (worker process)', settle ? { stats: settle.cost.stats, operations: settle.cost.ops } : null],
    ];
    for (const [label, cost] of profiles) {
      if (!cost?.stats) continue;
      const entries = Object.entries(cost.stats.profile).sort((a, b) => b[1].ms - a[1].ms);
      const totalMs = entries.reduce((sum, [, entry]) => sum + entry.ms, 0);
      lines.push('');
      lines.push(
        markdownTable(
          [`${label}: statement (first 90 characters)`, 'calls/op', 'ms/op (wall, summed over connections)', 'share'],
          ['l', 'r', 'r', 'r'],
          entries.slice(0, 40).map(([key, entry]) => [`\`${key.replace(/\|/g, '\\|')}\``, fixed(entry.calls / Math.max(1, cost.operations), 2), fixed(entry.ms / Math.max(1, cost.operations), 3), `${fixed((entry.ms / Math.max(1e-9, totalMs)) * 100, 1)} %`]),
        ),
      );
    }
  }
  return { text: lines.join('\n'), failures };
}

// ---------------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const settings = readSlipSettings();
  const startedAt = performance.now();
  const idleBefore = machineCpu();
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const background = busyShare(idleBefore, machineCpu());
  log(`machine ${fixed(background * 100, 0)} % busy before the run`);
  if (background > 0.25) log('WARNING: other processes are using the CPU; the numbers of this run will be low and noisy');
  log(`fresh database ${settings.database_name} on ${new URL(settings.database_url).host}`);
  const databaseUrl = await createFreshDatabase(settings.database_url, settings.database_name, settings.database_settings);
  const evidenceDirectory = settings.evidence_store === 'filesystem' ? fs.mkdtempSync(path.join(os.tmpdir(), 'bench-slips-evidence-')) : null;
  let instance: ServiceInstance | null = null;
  try {
    const masterKey = crypto.randomBytes(32);
    const database = await openDatabase({ database_url: databaseUrl, data_dir: null, pool_size: settings.db_pool });
    await migrate(database);
    instance = createServiceInstance({
      config: loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', WORKER_ENABLED: 'false', API_ENABLED: 'false', DB_POOL_SIZE: String(settings.db_pool), UPLOAD_BASE_URL }),
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

    const reader = new SlipReader();
    await reader.warmUp();
    // The settle phase uploads the sandbox's own slips: it needs no 1 MiB photos.
    const needsSlips = PHASES.some((phase) => phase !== 'pgbench' && phase !== 'settle' && settings.only.has(phase));
    let photos: PhotoMaker | null = null;
    const intakeImages: IntakeImage[] = [];
    let intakeTally: ReadTally | null = null;
    if (needsSlips) {
      log(`making ${settings.intake_images} intake photos of ${settings.slip_bytes} bytes ± ${settings.slip_tolerance_percent} %`);
      const first = await renderSlipImage(corpusDetails(0));
      photos = await photoMaker(settings, first.bytes);
      intakeTally = { label: `1 MiB photo (JPEG quality ${photos.quality}), the intake set`, read: 0, total: 0, times_ms: [] };
      for (let index = 0; index < settings.intake_images; index += 1) {
        const details = corpusDetails(100 + index);
        const jpeg = await photos.make((await renderSlipImage(details)).bytes);
        // The reader must still read what the intake stores, or the photos would not be slips.
        const started = performance.now();
        const read = await reader.read(jpeg);
        intakeTally.times_ms.push(performance.now() - started);
        intakeTally.total += 1;
        if (read.outcome === 'read' && read.reference.trans_ref === details.trans_ref) intakeTally.read += 1;
        intakeImages.push({ jpeg, trans_ref: details.trans_ref, multipart: multipartBody(jpeg) });
      }
      log(`intake photos: JPEG quality ${photos.quality}, ${intakeImages.map((image) => mebibytes(image.jpeg.length)).join(', ')} MiB; ${intakeTally.read}/${intakeTally.total} read`);
    }

    let depositors: WalletAccount[] = [];
    let withdrawers: WithdrawingMerchant[] = [];
    let sandboxBrand = '';
    let intakeOrders: SlipOrder[] = [];
    if (settings.only.has('intake') || settings.only.has('end_to_end') || settings.only.has('settle')) {
      const sandbox = await instance.services.tenancy.bootstrapSandbox();
      if (!sandbox) throw new Error('the bench database already had a brand');
      sandboxBrand = sandbox.white_label_id;
      log(`setting up ${settings.deposit_merchants} depositing and ${settings.withdrawing_merchants} withdrawing merchants`);
      depositors = await createMerchants(instance, sandboxBrand, settings.deposit_merchants, 'Bench depositor');
      withdrawers = await createWithdrawingMerchants(instance, database, sandboxBrand, settings.withdrawing_merchants, 1e11);
      if (settings.only.has('intake')) {
        await ensureLiquidity(settings, instance, database, withdrawers, sandboxBrand, settings.intake_orders);
        log(`creating ${settings.intake_orders} intake orders`);
        const started = performance.now();
        intakeOrders = await createOrders(settings, instance, database, depositors, settings.intake_orders);
        log(`created in ${fixed((performance.now() - started) / 1000, 1)} s`);
      }
      await database.exec('ANALYZE');
    }
    await adminQuery(databaseUrl, 'CHECKPOINT');

    const pgbench = settings.only.has('pgbench') ? await runPgbenchPhase(settings, databaseUrl) : null;
    const rowBytes = (intakeImages.length > 0 ? Math.round(intakeImages.reduce((sum, image) => sum + image.jpeg.length, 0) / intakeImages.length) : settings.slip_bytes) + EVIDENCE_OVERHEAD_BYTES;
    const storage = settings.only.has('storage') ? await runStoragePhase(settings, databaseUrl, rowBytes) : null;
    const intake = settings.only.has('intake') ? await runIntakePhase(settings, databaseUrl, database, masterKey, evidenceDirectory, intakeOrders, intakeImages) : null;

    let endToEnd: EndToEndPhase | null = null;
    if (settings.only.has('end_to_end') && photos) {
      const rate = settings.end_to_end_rate ?? (intake ? intake.max.accepted_per_second * settings.rate_fraction : 0);
      if (!(rate > 0)) throw new Error('end_to_end: no upload rate (the intake measured no 202s)');
      const count = Math.max(1, Math.round(rate * settings.end_to_end_seconds));
      log(`end_to_end: preparing ${count} orders with a sandbox transfer and a 1 MiB photo each`);
      const started = performance.now();
      await ensureLiquidity(settings, instance, database, withdrawers, sandboxBrand, count);
      const prepared = await prepareEndToEnd(settings, instance, database, depositors, count, photos);
      const preparationSeconds = (performance.now() - started) / 1000;
      log(`end_to_end: prepared in ${fixed(preparationSeconds, 0)} s`);
      endToEnd = await runEndToEndPhase(settings, databaseUrl, database, masterKey, evidenceDirectory, prepared, rate, preparationSeconds);
    }

    let settle: SettlePhase | null = null;
    if (settings.only.has('settle')) {
      const count = settings.settle_warmup_slips + settings.settle_slips;
      log(`settle: preparing ${count} orders with a sandbox transfer each (${settings.settle_warmup_slips} for the warm-up)`);
      const started = performance.now();
      await ensureLiquidity(settings, instance, database, withdrawers, sandboxBrand, count);
      const slips = await prepareSettle(settings, instance, database, depositors, count);
      const preparationSeconds = (performance.now() - started) / 1000;
      log(`settle: prepared in ${fixed(preparationSeconds, 0)} s`);
      settle = await runSettlePhase(settings, instance, databaseUrl, database, masterKey, evidenceDirectory, slips, preparationSeconds);
    }

    const qr = settings.only.has('qr') ? await runQrPhase(settings, reader, intakeTally) : [];
    const stages = settings.only.has('qr') && intakeImages.length > 0 ? await runReaderStages(intakeImages) : [];
    const { text, failures } = report({
      settings,
      background,
      pgbench,
      storage,
      intake,
      endToEnd,
      settle,
      qr,
      stages,
      photoQuality: photos?.quality ?? null,
      pgbenchInit,
      seconds: (performance.now() - startedAt) / 1000,
    });
    process.stdout.write(`\n${text}\n\n`);
    log(`done in ${fixed((performance.now() - startedAt) / 1000, 0)} s`);
    if (failures.length > 0) {
      process.stderr.write(`\nBENCHMARK FAILED:\n${failures.map((line) => `  - ${line}`).join('\n')}\n`);
      process.exitCode = 1;
    }
  } finally {
    if (instance) await instance.stop();
    await dropDatabase(settings.database_url, settings.database_name);
    if (evidenceDirectory) fs.rmSync(evidenceDirectory, { recursive: true, force: true });
  }
}

// Every process of the bench runs with the service's heap setting, as `npm start` does (src/platform/heap.ts).
limitHeapGrowth();
if (process.argv.includes('--serve')) {
  serve().catch((error: unknown) => {
    process.stderr.write(`bench process failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
