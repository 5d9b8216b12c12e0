import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ScopedClock, SystemClock, type Clock } from './platform/clock.ts';
import type { Config } from './platform/config.ts';
import { SecretBox } from './platform/crypto.ts';
import { openDatabase, type Database } from './platform/db.ts';
import { createLogger, type Logger } from './platform/logger.ts';
import { migrate } from './platform/migrate.ts';
import { MINUTE_MS } from './platform/time.ts';
import { ConcurrencyGate } from './platform/concurrency-gate.ts';
import { createMetrics } from './ops/metrics.ts';
import { registerOperationsRoutes } from './ops/routes.ts';
import { LoadShedder } from './ops/load-shedding.ts';
import { EventsService } from './events/service.ts';
import { registerEventRoutes } from './events/routes.ts';
import { TenancyService } from './tenancy/service.ts';
import { registerTenancyRoutes } from './tenancy/routes.ts';
import { registerBankRoutes } from './banks/routes.ts';
import { registerTestVectorRoutes } from './test-vectors/routes.ts';
import { registerFeeRoutes } from './fees/routes.ts';
import { registerSandboxBankRoutes } from './bank-directory/routes.ts';
import { LedgerService, RELEASE_CLEARING_TASK } from './ledger/service.ts';
import { registerLedgerRoutes } from './ledger/routes.ts';
import { registerBeneficiaryRoutes } from './beneficiaries/routes.ts';
import { BeneficiaryService, createBeneficiaryVerifyHandler, deriveAccountLookupKey, VERIFY_BENEFICIARY_TASK } from './beneficiaries/service.ts';
import { FeeService } from './fees/service.ts';
import { WithdrawalPolicyService } from './withdrawals/policy.ts';
import { registerWithdrawalRoutes } from './withdrawals/routes.ts';
import { createWithdrawalJobHandlers, WithdrawalService } from './withdrawals/service.ts';
import { createDisputeJobHandlers, DisputeService } from './withdrawals/disputes.ts';
import { registerDisputeRoutes } from './withdrawals/dispute-routes.ts';
import { DepositPolicyService } from './deposits/policy.ts';
import { registerDepositRoutes } from './deposits/routes.ts';
import { createDepositJobHandlers, DepositService } from './deposits/service.ts';
import { SandboxLiquidity } from './sandbox/liquidity.ts';
import { MatchingService } from './matching/service.ts';
import { registerReplayOutOfOrderRoute } from './webhooks/replay-out-of-order.ts';
import { registerLocalForwardingRoutes } from './webhooks/local-forwarding.ts';
import { purgeWebhookDeliveries, registerWebhookRoutes, startWebhookDispatcher, stopWebhookDispatcher, webhooksOf } from './webhooks/index.ts';
import { SlipTokenSigner } from './slips/capability.ts';
import { EvidenceCipher, FilesystemBlobStore, PostgresBlobStore, type BlobStore } from './slips/evidence-store.ts';
import { registerSlipRoutes } from './slips/routes.ts';
import { ReviewService } from './review/service.ts';
import { registerReviewRoutes } from './review/routes.ts';
import { ClaimRegistry, ClaimService } from './review/claims.ts';
import { registerClaimRoutes } from './review/claim-routes.ts';
import { SlipsService } from './slips/service.ts';
import { VerificationService } from './verification/service.ts';
import { SlipReader } from './verification/slip-reader.ts';
import { createBankVerifierFromConfig } from './verification/http-adapter.ts';
import type { BankVerifier } from './verification/bank-port.ts';
import { SandboxBank } from './sandbox/bank.ts';
import { SandboxScenarios } from './sandbox/scenarios.ts';
import { registerSandboxRoutes } from './sandbox/routes.ts';
import { QrImageLinks } from './deposits/qr-image.ts';
import { CheckoutLinks } from './checkout/links.ts';
import { CheckoutService } from './checkout/service.ts';
import { checkoutAdminRoutes, registerCheckoutPages } from './checkout/routes.ts';
import { IdempotencyService } from './http/idempotency.ts';
import { apiRoutesOf, buildServer, type RouteModule } from './http/server.ts';
import { openApiRoutes, registerApiReference } from './openapi/routes.ts';
import type { Services } from './http/context.ts';
import { Worker, purgeFinishedJobs, type JobHandler } from './jobs/index.ts';
import { TestClockService, type TestClockLimits } from './test-clocks/service.ts';
import { registerTestClockRoutes } from './test-clocks/routes.ts';

/**
 * Builds one service instance: services, HTTP server (api role) and job worker (worker role). Tests
 * build instances on their own database and clock; `main.ts` builds the production one.
 */
export const ROUTE_MODULES: readonly RouteModule[] = [
  registerTenancyRoutes,
  registerEventRoutes,
  registerBankRoutes,
  registerTestVectorRoutes,
  registerLedgerRoutes,
  registerFeeRoutes,
  registerSandboxBankRoutes,
  registerBeneficiaryRoutes,
  registerWithdrawalRoutes,
  registerDepositRoutes,
  registerWebhookRoutes,
  registerReplayOutOfOrderRoute,
  registerLocalForwardingRoutes,
  registerSlipRoutes,
  registerSandboxRoutes,
  registerReviewRoutes,
  registerDisputeRoutes,
  registerClaimRoutes,
  registerTestClockRoutes,
];

export interface ServiceInstance {
  services: Services;
  app: FastifyInstance;
  worker: Worker;
  /** Runs one round of housekeeping (expired nonces, counters, idempotency records, finished jobs). */
  housekeep(): Promise<number>;
  listen(): Promise<string>;
  /** Graceful stop: no new requests, in-flight requests and jobs finish, then the database closes. */
  stop(): Promise<void>;
}

export interface CreateInstanceOptions {
  config: Config;
  database: Database;
  clock?: Clock;
  logger?: Logger;
  master_key: Buffer;
  extra_modules?: readonly RouteModule[];
  job_handlers?: Record<string, JobHandler>;
  /** Closes the database on stop (false when a test owns it). */
  owns_database?: boolean;
  /** The live bank verifier, instead of the one SLIP_VERIFIER_URL configures (tests). */
  live_bank_verifier?: BankVerifier;
  /** Smaller bounds of a test clock's advance than production's (tests of the bound). */
  test_clock_limits?: Partial<TestClockLimits>;
}

const HOUSEKEEPING_INTERVAL_MS = MINUTE_MS;
const HOUSEKEEPING_BATCH = 5000;

export function createServiceInstance(options: CreateInstanceOptions): ServiceInstance {
  // Every service gets the scoped clock: the process's clock, or a sandbox test clock's frozen time when
  // the work runs inside that clock's scope (src/test-clocks/). `realClock` is the process's clock itself.
  const realClock = options.clock ?? new SystemClock();
  const clock = new ScopedClock(realClock);
  const logger = options.logger ?? createLogger(options.config.log_level);
  const metrics = createMetrics();
  const secretBox = new SecretBox(options.master_key);
  const database = options.database;
  const events = new EventsService(clock);
  events.observe((envelope) => metrics.events_written_total.inc({ type: envelope.type }));
  let boundAddress: string | null = null;
  const ledger = new LedgerService(events, clock);
  const fees = new FeeService(clock);
  // Beneficiary account numbers are looked up by an HMAC under a key derived from the master key.
  const accountLookupKey = deriveAccountLookupKey(options.master_key);
  const beneficiaries = new BeneficiaryService({ events, clock, secretBox, account_lookup_key: accountLookupKey });
  const withdrawalPolicies = new WithdrawalPolicyService(clock);
  const tenancy = new TenancyService(database, clock, secretBox);
  const withdrawals = new WithdrawalService({
    events,
    clock,
    ledger,
    fees,
    beneficiaries,
    policies: withdrawalPolicies,
    service_owned_merchants: (db, white_label_id) => tenancy.serviceOwnedMerchantIds(db, white_label_id),
  });
  const depositPolicies = new DepositPolicyService(clock);
  // Test-mode deposits find liquidity from the brand's simulated counterparty, as live ones do from real withdrawals.
  const sandboxLiquidity = new SandboxLiquidity({ clock, tenancy, beneficiaries, ledger, fees, withdrawals, events });
  const slipTokens = new SlipTokenSigner(options.master_key);
  // Claims belong to the review module; the deposit service opens them through this port in its own
  // transactions, and the claim desk (below) calls the deposit service: no import cycle either way.
  const claimRegistry = new ClaimRegistry({ clock, events });
  const deposits = new DepositService({
    events,
    clock,
    secretBox,
    withdrawals,
    policies: depositPolicies,
    account_lookup_key: accountLookupKey,
    matching: new MatchingService({ withdrawals, events, liquidity: sandboxLiquidity }),
    ledger,
    fees,
    slip_tokens: slipTokens,
    qr_links: new QrImageLinks(options.master_key),
    public_base_url: () => services.publicBaseUrl(),
    upload_base_url: () => services.uploadBaseUrl(),
    claims: claimRegistry,
  });
  // Idempotency records keep the spec's 7 days of real time, also for requests made under a test clock:
  // retention is an operational promise about retries, not a deadline of the clock's objects.
  const idempotency = new IdempotencyService(database, realClock, secretBox);
  // Slip evidence: in PostgreSQL with its receipt by default, or in a directory (SLIP_EVIDENCE_STORE).
  const blobs: BlobStore = options.config.slip_evidence_store === 'filesystem' ? new FilesystemBlobStore(options.config.slip_evidence_dir) : new PostgresBlobStore();
  const slips = new SlipsService({
    database,
    clock,
    logger,
    secretBox,
    cipher: new EvidenceCipher(options.master_key),
    blobs,
    deposits,
    idempotency,
    // The worker is built below; it is only called once a request has committed, long after.
    on_accepted: () => worker.wake(),
    intake_gate: new ConcurrencyGate(
      { slots: options.config.slip_intake.concurrency, max_waiting: options.config.slip_intake.max_waiting, max_wait_ms: options.config.slip_intake.max_wait_ms },
      (held, waiting) => {
        metrics.slip_uploads_in_progress.set(held);
        metrics.slip_uploads_waiting.set(waiting);
      },
    ),
    on_intake_refused: (refusal) => metrics.slip_uploads_refused_total.inc({ reason: refusal }),
  });
  // Cancel and expiry ask the intake whether an order has slips; slips itself calls the deposit service.
  deposits.useSlipActivity((db, white_label_id, deposit_id) => slips.activity(db, white_label_id, deposit_id));
  const sandboxBank = new SandboxBank({ clock, deposits, database });
  // Test-mode slips are verified by the sandbox bank, live ones by the configured provider; never the other.
  const liveVerifier = options.live_bank_verifier ?? createBankVerifierFromConfig(options.config.slip_verifier);
  const verification = new VerificationService({
    database,
    clock,
    logger,
    metrics,
    slips,
    deposits,
    reader: new SlipReader(),
    verifierFor: (livemode) => (livemode ? liveVerifier : sandboxBank),
  });
  const review = new ReviewService({ database, clock, deposits, slips, verification, tenancy });
  const claims = new ClaimService({ database, clock, deposits, tenancy, events, registry: claimRegistry });
  // A new review's estimated wait comes from the desk's queue and pace; the desk calls the deposit service.
  deposits.useReviewEstimate((db, input) => review.estimate(db, input));
  // Disputes call the deposit and withdrawal services; those learn of disputes only through these two ports.
  const disputes = new DisputeService({ database, clock, withdrawals, deposits, ledger, tenancy, public_base_url: () => services.publicBaseUrl() });
  deposits.useLegCover(disputes.legCover());
  verification.useAllocationConflict((tx, input) => disputes.openForAllocationConflict(tx, input));
  // Load shedding reads the event loop's delay and this database's connection waits (src/ops/load-shedding.ts).
  const loadShedder = new LoadShedder(options.config.load_shedding, () => database.acquire_wait?.takeLongestMs() ?? 0, (reading, previous) => {
    metrics.load_shedding_level.set(reading.level);
    logger.warn({ level: reading.level, previous_level: previous, event_loop_delay_ms: Math.round(reading.event_loop_delay_ms), database_wait_ms: Math.round(reading.database_wait_ms) }, 'load shedding level changed');
  });
  const services: Services = {
    config: options.config,
    loadShedder,
    database,
    clock,
    logger,
    metrics,
    secretBox,
    tenancy,
    events,
    idempotency,
    ledger,
    fees,
    beneficiaries,
    withdrawals,
    withdrawalPolicies,
    deposits,
    depositPolicies,
    slipTokens,
    slips,
    verification,
    review,
    disputes,
    claims,
    sandboxBank,
    testClocks: new TestClockService({
      database,
      clock,
      events,
      tenancy,
      // The worker is built below; these are only called by requests and jobs, long after.
      runNextJob: (input) => worker.runNextTestClockJob(input),
      workerStopping: () => worker.isStopping(),
      onAdvanceRequested: () => worker.wake(),
      limits: options.test_clock_limits,
    }),
    publicBaseUrl: () => options.config.public_base_url ?? boundAddress ?? `http://localhost:${options.config.port}`,
    uploadBaseUrl: () => options.config.upload_base_url ?? services.publicBaseUrl(),
  };
  // The sandbox scenarios act through the same services as the end user, the bank and the desk would.
  const sandboxScenarios = new SandboxScenarios({
    database,
    clock,
    logger,
    deposits,
    withdrawals,
    slips,
    slipTokens,
    review,
    sandboxBank,
    liquidity: sandboxLiquidity,
    // 114.00 THB: the webhooks module is built on first use (webhooksOf), long after this wiring.
    rotateSandboxSigningKey: async (input) => {
      await webhooksOf(services).signingKeys.rotateForSandboxScenario(input);
    },
  });
  // The hosted checkout page (src/checkout/): orders get their `checkout_url` from it, and it reads and
  // pays orders through the deposit, slip and sandbox services.
  const checkout = new CheckoutService({
    clock,
    config: options.config,
    tenancy,
    deposits,
    slips,
    sandboxBank,
    idempotency,
    links: new CheckoutLinks(options.master_key),
    public_base_url: () => services.publicBaseUrl(),
    upload_base_url: () => services.uploadBaseUrl(),
  });
  deposits.useCheckoutLinks((db, order) => checkout.checkoutUrl(db, order));
  const state = { ready: false, stopping: false };
  // The OpenAPI document reads the catalogue of this very server on its first request, once every route is registered.
  const app: FastifyInstance = buildServer(services, [...ROUTE_MODULES, checkoutAdminRoutes(checkout), openApiRoutes(() => apiRoutesOf(app)), ...(options.extra_modules ?? [])]);
  registerOperationsRoutes(app, services, () => state.ready && !state.stopping);
  registerCheckoutPages(app, services, checkout);
  registerApiReference(app);
  const worker = new Worker({
    database,
    clock,
    // Claims, leases and outcome records are real time, also for a test clock's job run by an advance.
    real_clock: realClock,
    handlers: {
      // Clearing: a settled deposit's credit moves to available 72 hours on (a no-op when held).
      [RELEASE_CLEARING_TASK]: async (job) => {
        const payload = job.payload as { white_label_id: string; merchant_id: string; livemode: boolean; credit_balance_transaction_id: string };
        await database.transaction((tx) =>
          services.ledger.releaseClearing(
            tx,
            { white_label_id: payload.white_label_id, merchant_id: payload.merchant_id, livemode: payload.livemode },
            payload.credit_balance_transaction_id,
          ),
        );
      },
      // Beneficiary name verification: directory lookup outside any transaction, then one transition.
      [VERIFY_BENEFICIARY_TASK]: createBeneficiaryVerifyHandler({ events, secretBox }),
      // Withdrawal deadlines: expiry, approval time-to-live, fill auto-confirm.
      ...createWithdrawalJobHandlers(database, services.withdrawals),
      // Deposit deadlines: the matching retry of a waiting order and the transfer deadline.
      ...createDepositJobHandlers(database, services.deposits),
      // Dispute deadlines: at respond_by, closed for the depositor without evidence, else left to an operator.
      ...createDisputeJobHandlers(disputes),
      // Slips: read, verified with the bank and settled or sent to review, one receipt at a time per order.
      ...verification.jobHandlers(),
      // Sandbox scenarios: the automatic steps of test-mode orders of the spec's scenario amounts.
      ...sandboxScenarios.jobHandlers(),
      // Test clocks: an advance runs the clock's due jobs in order, each at its own time, then sets the clock.
      ...services.testClocks.jobHandlers(),
      ...(options.job_handlers ?? {}),
    },
    logger,
    metrics,
    concurrency: options.config.worker_concurrency,
  });

  async function housekeep(): Promise<number> {
    const now = clock.now();
    let removed = 0;
    removed += await services.tenancy.purgeExpiredAccessState(now, new Date(now.getTime() - 10 * MINUTE_MS), HOUSEKEEPING_BATCH);
    removed += await services.idempotency.purgeExpired(HOUSEKEEPING_BATCH);
    removed += await purgeFinishedJobs(database, clock);
    removed += await purgeWebhookDeliveries(services);
    return removed;
  }

  // Housekeeping is maintenance, not a business deadline: every worker process runs it on a timer,
  // and since each round only deletes rows already expired, running it in several processes is safe.
  let housekeepingTimer: NodeJS.Timeout | null = null;

  return {
    services,
    app,
    worker,
    housekeep,
    async listen() {
      if (options.config.api_enabled) {
        loadShedder.start();
        boundAddress = await app.listen({ port: options.config.port, host: options.config.host });
        const port = (app.server.address() as { port: number }).port;
        boundAddress = `http://localhost:${port}`;
      } else {
        await app.ready();
      }
      if (options.config.worker_enabled) {
        await services.verification.warmUp();
        worker.start();
        // Webhook delivery reads the outbox on its own loop, with per-endpoint limits (src/webhooks).
        startWebhookDispatcher(services);
        housekeepingTimer = setInterval(() => {
          housekeep().catch((error: unknown) => logger.warn({ err: error }, 'housekeeping round failed'));
        }, HOUSEKEEPING_INTERVAL_MS);
        housekeepingTimer.unref();
      }
      state.ready = true;
      return services.publicBaseUrl();
    },
    async stop() {
      if (state.stopping) return;
      state.stopping = true;
      (app as FastifyInstance & { markShuttingDown?: () => void }).markShuttingDown?.();
      if (housekeepingTimer) clearInterval(housekeepingTimer);
      loadShedder.stop();
      await app.close();
      await worker.stop();
      await stopWebhookDispatcher(services);
      if (options.owns_database !== false) await database.close();
    },
  };
}

/**
 * The master key seals secrets at rest. Production passes MASTER_KEY; the embedded default keeps a
 * generated key beside its data (mode 0600) so that a fresh machine starts with no set-up.
 */
export function resolveMasterKey(config: Config, logger: Logger): Buffer {
  if (config.master_key_base64) {
    const key = Buffer.from(config.master_key_base64, 'base64');
    if (key.length !== 32) throw new Error('MASTER_KEY must be 32 bytes in standard base64');
    return key;
  }
  if (config.production) throw new Error('MASTER_KEY is required when NODE_ENV=production');
  const keyPath = path.join(path.resolve(config.data_dir), 'master.key');
  fs.mkdirSync(path.dirname(keyPath), { recursive: true });
  if (!fs.existsSync(keyPath)) {
    fs.writeFileSync(keyPath, crypto.randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
    logger.warn({ path: keyPath }, 'generated a master key for development; set MASTER_KEY in production');
  }
  const key = Buffer.from(fs.readFileSync(keyPath, 'utf8').trim(), 'base64');
  if (key.length !== 32) throw new Error(`the master key in ${keyPath} is not 32 bytes`);
  return key;
}

export async function openConfiguredDatabase(config: Config, logger: Logger): Promise<Database> {
  const database = await openDatabase({
    database_url: config.database_url,
    data_dir: config.database_url ? null : config.data_dir,
    pool_size: config.db_pool_size,
  });
  if (database.engine === 'pglite') {
    logger.warn(
      { data_dir: path.resolve(config.data_dir) },
      'running on embedded PGlite (one process, fsync off): for trying and development only; production runs on PostgreSQL (DATABASE_URL)',
    );
  }
  const applied = await migrate(database);
  if (applied.length > 0) logger.info({ applied }, 'migrations applied');
  return database;
}
