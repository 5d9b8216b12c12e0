import type { FastifyInstance } from 'fastify';
import { ScopedClock, SystemClock, type Clock } from './platform/clock.ts';
import type { Config } from './platform/config.ts';
import { SecretBox } from './platform/crypto.ts';
import { invariant } from './platform/assert.ts';
import type { Database } from './platform/db.ts';
import { createLogger, type Logger } from './platform/logger.ts';
import { MINUTE_MS } from './platform/time.ts';
import { ConcurrencyGate } from './platform/concurrency-gate.ts';
import { createMetrics, type Metrics } from './ops/metrics.ts';
import { registerOperationsRoutes } from './ops/routes.ts';
import { registerBacklogGauges } from './ops/backlog-metrics.ts';
import { LoadShedder } from './ops/load-shedding.ts';
import { EventsService } from './events/service.ts';
import { eventRoutes } from './events/routes.ts';
import { TenancyService } from './tenancy/service.ts';
import { tenancyRoutes } from './tenancy/routes.ts';
import { registerBankRoutes } from './banks/routes.ts';
import { registerTestVectorRoutes } from './test-vectors/routes.ts';
import { feeRoutes } from './fees/routes.ts';
import { sandboxBankRoutes } from './bank-directory/routes.ts';
import { LedgerService, RELEASE_CLEARING_TASK } from './ledger/service.ts';
import { ledgerRoutes } from './ledger/routes.ts';
import { beneficiaryRoutes } from './beneficiaries/routes.ts';
import { BeneficiaryService, createBeneficiaryVerifyHandler, deriveAccountLookupKey, VERIFY_BENEFICIARY_TASK } from './beneficiaries/service.ts';
import { FeeService } from './fees/service.ts';
import { WithdrawalPolicyService } from './withdrawals/policy.ts';
import { withdrawalRoutes } from './withdrawals/routes.ts';
import { createWithdrawalJobHandlers, WithdrawalService } from './withdrawals/service.ts';
import { createDisputeJobHandlers, DisputeCovers, DisputeService } from './disputes/service.ts';
import { disputeRoutes } from './disputes/routes.ts';
import { DepositPolicyService } from './deposits/policy.ts';
import { depositRoutes } from './deposits/routes.ts';
import { createDepositJobHandlers, DepositService } from './deposits/service.ts';
import { createSettlementJobHandlers, SettlementService } from './settlement/service.ts';
import { RefundService } from './refunds/service.ts';
import { BackofficeRefunds } from './refunds/backoffice.ts';
import { refundRoutes } from './refunds/routes.ts';
import { SandboxLiquidity } from './sandbox/liquidity.ts';
import { MatchingService } from './matching/service.ts';
import { replayOutOfOrderRoutes } from './webhooks/replay-out-of-order.ts';
import { localForwardingRoutes } from './webhooks/local-forwarding.ts';
import { createWebhooks, type WebhookOptions, type Webhooks } from './webhooks/index.ts';
import { SlipTokenSigner } from './slip-capability/capability.ts';
import { EvidenceCipher, FilesystemBlobStore, PostgresBlobStore, type BlobStore } from './slips/evidence-store.ts';
import { S3BlobStore } from './slips/s3-blob-store.ts';
import { EvidenceRetention } from './slips/retention.ts';
import { slipRoutes } from './slips/routes.ts';
import { ReviewService } from './review/service.ts';
import { reviewRoutes } from './review/routes.ts';
import { ClaimRegistry, ClaimService } from './review/claims.ts';
import { claimRoutes } from './review/claim-routes.ts';
import { SlipsService } from './slips/service.ts';
import { VerificationService } from './verification/service.ts';
import { SlipReader } from './verification/slip-reader.ts';
import { createBankVerifierFromConfig } from './verification/http-adapter.ts';
import type { BankVerifier } from './verification/bank-port.ts';
import { ProviderAdapterCache } from './slip-providers/adapters.ts';
import { BrandSlipVerifier } from './slip-providers/live-verifier.ts';
import { SlipProviderService } from './slip-providers/service.ts';
import { slipProviderRoutes } from './slip-providers/routes.ts';
import { SandboxBank } from './sandbox/bank.ts';
import { SandboxScenarios } from './sandbox/scenarios.ts';
import { depositScenariosFor, withdrawalScenariosFor } from './sandbox/hooks.ts';
import { sandboxRoutes } from './sandbox/routes.ts';
import { QrImageLinks } from './deposits/qr-image.ts';
import { CheckoutLinks } from './checkout/links.ts';
import { CheckoutAddresses } from './checkout/addresses.ts';
import { SlipActivity } from './slips/activity.ts';
import { ReviewPace } from './review/pace.ts';
import { CheckoutService } from './checkout/service.ts';
import { checkoutAdminRoutes, registerCheckoutPages } from './checkout/routes.ts';
import { createConsoleServices, type ConsoleOidcSettings, type ConsoleOidcSignIn, type ConsoleSessions } from './backoffice-console/services.ts';
import { registerConsolePages } from './backoffice-console/routes.ts';
import { consolePageDependencies } from './console-composition.ts';
import { consoleApiRoutes } from './backoffice-console/api-routes.ts';
import { consoleOidcApiRoutes } from './backoffice-console/oidc-api-routes.ts';
import { IdempotencyService } from './idempotency/service.ts';
import { apiRoutesOf, buildServer } from './http/server.ts';
import type { RouteModule } from './http/context.ts';
import { openApiRoutes, registerApiReference } from './openapi/routes.ts';
import { Worker, listenForDueJobs, purgeFinishedJobs, readJobBacklog, type JobHandler } from './jobs/index.ts';
import type { NotificationListener } from './platform/notifications.ts';
import { TestClockService, type TestClockLimits } from './test-clocks/service.ts';
import { testClockRoutes } from './test-clocks/routes.ts';

/**
 * The composition root: the one place that sees every module. It builds one service instance (the
 * services, the HTTP server of the api role and the job worker of the worker role) and gives each
 * module's routes the services they declare. Tests build instances on their own database and clock;
 * `main.ts` builds the production one.
 */

/** Every service of one instance: what the routes, the worker and the tests are given parts of. */
export interface Services {
  config: Config;
  database: Database;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  secretBox: SecretBox;
  tenancy: TenancyService;
  events: EventsService;
  idempotency: IdempotencyService;
  /** The wallet ledger: the only way money moves. */
  ledger: LedgerService;
  fees: FeeService;
  beneficiaries: BeneficiaryService;
  /** Withdrawal orders and the leg functions the deposit side calls to pay them. */
  withdrawals: WithdrawalService;
  withdrawalPolicies: WithdrawalPolicyService;
  /** Deposit orders: creation, matching, the liquidity wait, expiry and cancel. */
  deposits: DepositService;
  /** Settlement: a verified transfer's credit, fills and claims; reversals; fund holds of disputed fills. */
  settlement: SettlementService;
  /** Refunds to the payer: withdrawals to the account the bank verified as a settled deposit's sender. */
  refunds: RefundService;
  /** Refunds an operator opens for a merchant, with their audit rows. */
  backofficeRefunds: BackofficeRefunds;
  depositPolicies: DepositPolicyService;
  /** Signs and verifies the per-order slip upload capability. */
  slipTokens: SlipTokenSigner;
  /** Slip intake: durable receipts of uploaded evidence. */
  slips: SlipsService;
  /** Where slip images are kept (SLIP_EVIDENCE_STORE). */
  evidenceStore: BlobStore;
  /** The durable job that purges slip images past EVIDENCE_RETENTION_DAYS. */
  evidenceRetention: EvidenceRetention;
  /** Reading, bank verification and the outcome of each slip. */
  verification: VerificationService;
  /** Each brand's live slip providers and their sealed credentials (back office and CLI). */
  slipProviders: SlipProviderService;
  /** The review desk: queue, decisions, merchant evidence and force-complete, reversals. */
  review: ReviewService;
  /** Withdrawal disputes: opened by the withdrawer or by an allocation conflict, resolved by operators. */
  disputes: DisputeService;
  /** Claims: the back office's claim desk and a merchant's read of its own claims. */
  claims: ClaimService;
  /** The sandbox bank's transfers and slips (test mode only). */
  sandboxBank: SandboxBank;
  /** Sandbox test clocks: a merchant's frozen time for its test-mode requests, advanced on demand. */
  testClocks: TestClockService;
  /** Webhook endpoints, signing keys and delivery. */
  webhooks: Webhooks;
  /** What slip intake holds of an order (the deposit service's cancel and expiry ask it). */
  slipActivity: SlipActivity;
  /** The review desk's pace, for a new review's estimated wait. */
  reviewPace: ReviewPace;
  /** Each brand's checkout origin and each order's `checkout_url`. */
  checkoutAddresses: CheckoutAddresses;
  checkoutLinks: CheckoutLinks;
  /** Which late legs a resolved dispute's adjustment paid. */
  disputeCovers: DisputeCovers;
  /** The back-office console's sign-in links and sessions. */
  consoleSessions: ConsoleSessions;
  /** A brand's OpenID Connect provider for the console, its staff list, and signing in through it. */
  consoleOidcSettings: ConsoleOidcSettings;
  consoleOidcSignIn: ConsoleOidcSignIn;
  /** Load shedding of this process: refuses the least protected requests when it is overloaded. */
  loadShedder: LoadShedder;
  /** The base URL the service advertises (PUBLIC_BASE_URL, or the listening address). */
  publicBaseUrl(): string;
  /** The base of slip upload addresses (UPLOAD_BASE_URL, else the public base). */
  uploadBaseUrl(): string;
}

export interface ServiceInstance {
  services: Services;
  app: FastifyInstance;
  worker: Worker;
  /** The worker's LISTEN session for jobs that fall due, while the worker role runs on PostgreSQL; else null. */
  dueJobListener(): NotificationListener | null;
  /** Runs one round of housekeeping (expired nonces, counters, idempotency records, finished jobs). */
  housekeep(): Promise<number>;
  listen(): Promise<string>;
  /** Graceful stop: no new requests, in-flight requests and jobs finish, then the database closes. */
  stop(): Promise<void>;
}

/** A route module that needs services of the instance (tests, benches): given them when the server is built. */
export type ExtraRouteModule = (services: Services) => RouteModule;

export interface CreateInstanceOptions {
  config: Config;
  database: Database;
  clock?: Clock;
  logger?: Logger;
  /** The current master key: it seals every new value. */
  master_key: Buffer;
  /** Earlier master keys (MASTER_KEY_PREVIOUS), only to open values sealed before a rotation. */
  master_key_previous?: readonly Buffer[];
  /**
   * The root of the derived keys (src/platform/derivation-key.ts), pinned in the database; the master key
   * itself when not given (tests, whose databases never rotated).
   */
  derivation_key?: Buffer;
  extra_modules?: readonly ExtraRouteModule[];
  job_handlers?: Record<string, JobHandler>;
  /** Closes the database on stop (false when a test owns it). */
  owns_database?: boolean;
  /** The generic live bank verifier for brands without a provider, instead of the one SLIP_VERIFIER_URL configures (tests). */
  live_bank_verifier?: BankVerifier;
  /** Smaller bounds of a test clock's advance than production's (tests of the bound). */
  test_clock_limits?: Partial<TestClockLimits>;
  /** A smaller scan window of the events feed than production's (tests of the window). */
  events_scan_window?: number;
  /** The webhooks module's options (settings, address policy, resolver); the environment's by default. */
  webhooks?: WebhookOptions;
}

const HOUSEKEEPING_INTERVAL_MS = MINUTE_MS;
const HOUSEKEEPING_BATCH = 5000;

/**
 * The job worker, as services built before it reach it: a slip accepted wakes it, a test clock's advance
 * runs its next job. It is built right after them, before the server listens and before any job runs, so
 * a call that finds it missing is a wiring fault and fails at once rather than doing nothing.
 */
class WorkerLink {
  worker: Worker | null = null;

  private required(): Worker {
    invariant(this.worker !== null, 'the worker is built before any request or job can reach it');
    return this.worker;
  }

  wake(): void {
    this.required().wake();
  }

  isStopping(): boolean {
    return this.required().isStopping();
  }

  runNextTestClockJob(input: Parameters<Worker['runNextTestClockJob']>[0]): ReturnType<Worker['runNextTestClockJob']> {
    return this.required().runNextTestClockJob(input);
  }
}

/** The addresses the service advertises: the configured ones, or the one it listens at. */
class Addresses {
  bound: string | null = null;

  constructor(private readonly config: Config) {}

  publicBaseUrl(): string {
    return this.config.public_base_url ?? this.bound ?? `http://localhost:${this.config.port}`;
  }

  uploadBaseUrl(): string {
    return this.config.upload_base_url ?? this.publicBaseUrl();
  }
}

/** The instance's clocks, logger, metrics and sealing: what every service below is built on. */
interface Foundation {
  config: Config;
  database: Database;
  /** The process's clock itself: claims, leases and retention stay in real time. */
  realClock: Clock;
  /** The scoped clock every service reads: a sandbox test clock's frozen time inside its scope. */
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  secretBox: SecretBox;
  /** Sealing and unwrapping of slip evidence, under the same master keys as `secretBox`. */
  evidenceCipher: EvidenceCipher;
  /** The root every HMAC-derived key comes from (account lookups, links, capability tokens). */
  derivation_key: Buffer;
  addresses: Addresses;
  workerLink: WorkerLink;
}

function foundationOf(options: CreateInstanceOptions): Foundation {
  const realClock = options.clock ?? new SystemClock();
  return {
    config: options.config,
    database: options.database,
    realClock,
    clock: new ScopedClock(realClock),
    logger: options.logger ?? createLogger(options.config.log_level),
    metrics: createMetrics(),
    secretBox: new SecretBox(options.master_key, options.master_key_previous),
    evidenceCipher: new EvidenceCipher(options.master_key, options.master_key_previous),
    derivation_key: options.derivation_key ?? options.master_key,
    addresses: new Addresses(options.config),
    workerLink: new WorkerLink(),
  };
}

/** The ledger, fees, payees, withdrawals and tenancy: the money side every order builds on. */
function createMoneyServices(base: Foundation, events_scan_window: number | undefined) {
  const { clock, secretBox, database } = base;
  const events = new EventsService(clock, secretBox, { scan_window: events_scan_window });
  events.observe((envelope) => base.metrics.events_written_total.inc({ type: envelope.type }));
  const ledger = new LedgerService(events, clock);
  const fees = new FeeService(clock);
  // Beneficiary account numbers are looked up by an HMAC under a key derived from the master key.
  const accountLookupKey = deriveAccountLookupKey(base.derivation_key);
  const beneficiaries = new BeneficiaryService({ events, clock, secretBox, account_lookup_key: accountLookupKey });
  const tenancy = new TenancyService(database, clock, secretBox);
  const withdrawalPolicies = new WithdrawalPolicyService({ clock, database, audit: tenancy });
  const withdrawals = new WithdrawalService({
    events,
    clock,
    ledger,
    fees,
    beneficiaries,
    policies: withdrawalPolicies,
    service_owned_merchants: (db, white_label_id) => tenancy.serviceOwnedMerchantIds(db, white_label_id),
    database,
    audit: tenancy,
    // The sandbox's scenarios act on test-mode orders only; a live order's hooks do nothing.
    scenarios: withdrawalScenariosFor,
  });
  // Test-mode deposits find liquidity from the brand's simulated counterparty, as live ones do from real withdrawals.
  const sandboxLiquidity = new SandboxLiquidity({ clock, tenancy, beneficiaries, ledger, fees, withdrawals, events });
  return { events, ledger, fees, accountLookupKey, beneficiaries, withdrawalPolicies, tenancy, withdrawals, sandboxLiquidity };
}

type MoneyServices = ReturnType<typeof createMoneyServices>;

/**
 * What the deposit service is given of the modules that call it: each reads only its own rows, so it is
 * built before the deposit service, and the module's workflow that calls the deposit service after it.
 */
function createDepositCollaborators(base: Foundation, money: MoneyServices) {
  const checkoutLinks = new CheckoutLinks(base.derivation_key);
  return {
    // Claims belong to the review module; the deposit service opens them in its own transactions.
    claimRegistry: new ClaimRegistry({ clock: base.clock, events: money.events }),
    slipActivity: new SlipActivity(),
    reviewPace: new ReviewPace(base.clock),
    checkoutAddresses: new CheckoutAddresses({
      config: base.config,
      tenancy: money.tenancy,
      links: checkoutLinks,
      public_base_url: () => base.addresses.publicBaseUrl(),
    }),
    checkoutLinks,
    disputeCovers: new DisputeCovers({ clock: base.clock, ledger: money.ledger }),
  };
}

type DepositCollaborators = ReturnType<typeof createDepositCollaborators>;

/** Deposits, idempotency and slip intake. */
function createOrderServices(base: Foundation, money: MoneyServices, collaborators: DepositCollaborators) {
  const { clock, secretBox, database, config, metrics } = base;
  const slipTokens = new SlipTokenSigner(base.derivation_key);
  const claimRegistry = collaborators.claimRegistry;
  const depositPolicies = new DepositPolicyService({ clock, database, audit: money.tenancy, secretBox });
  const deposits = new DepositService({
    events: money.events,
    clock,
    secretBox,
    withdrawals: money.withdrawals,
    policies: depositPolicies,
    account_lookup_key: money.accountLookupKey,
    matching: new MatchingService({ withdrawals: money.withdrawals, events: money.events, liquidity: money.sandboxLiquidity }),
    ledger: money.ledger,
    fees: money.fees,
    slip_tokens: slipTokens,
    qr_links: new QrImageLinks(base.derivation_key),
    public_base_url: () => base.addresses.publicBaseUrl(),
    upload_base_url: () => base.addresses.uploadBaseUrl(),
    claims: claimRegistry,
    scenarios: depositScenariosFor,
    slip_activity: (db, white_label_id, deposit_id) => collaborators.slipActivity.activity(db, white_label_id, deposit_id),
    review_estimate: collaborators.reviewPace.estimate,
    checkout_links: (db, order) => collaborators.checkoutAddresses.checkoutUrl(db, order),
  });
  const settlement = new SettlementService({
    clock,
    deposits,
    withdrawals: money.withdrawals,
    ledger: money.ledger,
    fees: money.fees,
    claims: claimRegistry,
    leg_covers: collaborators.disputeCovers,
  });
  // Idempotency records keep the spec's 7 days of real time, also for requests made under a test clock:
  // retention is an operational promise about retries, not a deadline of the clock's objects.
  const idempotency = new IdempotencyService(database, base.realClock, secretBox);
  const blobs = evidenceStoreOf(config);
  const slips = new SlipsService({
    database,
    clock,
    logger: base.logger,
    secretBox,
    cipher: base.evidenceCipher,
    blobs,
    deposits,
    idempotency,
    on_accepted: () => base.workerLink.wake(),
    intake_gate: new ConcurrencyGate({ slots: config.slip_intake.concurrency, max_waiting: config.slip_intake.max_waiting, max_wait_ms: config.slip_intake.max_wait_ms }, (held, waiting) => {
      metrics.slip_uploads_in_progress.set(held);
      metrics.slip_uploads_waiting.set(waiting);
    }),
    on_intake_refused: (refusal) => metrics.slip_uploads_refused_total.inc({ reason: refusal }),
  });
  return { slipTokens, claimRegistry, depositPolicies, deposits, settlement, idempotency, slips, evidenceStore: blobs };
}

/** Slip evidence: in PostgreSQL with its receipt by default, in a directory, or in an S3 bucket (SLIP_EVIDENCE_STORE). */
function evidenceStoreOf(config: Config): BlobStore {
  if (config.slip_evidence_store === 'filesystem') return new FilesystemBlobStore(config.slip_evidence_dir);
  if (config.slip_evidence_store === 's3' && config.slip_evidence_s3 !== null) return new S3BlobStore(config.slip_evidence_s3);
  return new PostgresBlobStore();
}

/**
 * The evidence retention (EVIDENCE_RETENTION_DAYS): an order's slips are kept while it has an open review, a
 * claim still to decide or a dispute not resolved, each asked of the module that owns it.
 */
function createEvidenceRetention(base: Foundation, orders: OrderServices, decisions: DecisionServices): EvidenceRetention {
  return new EvidenceRetention({
    database: base.database,
    clock: base.clock,
    logger: base.logger,
    blobs: orders.evidenceStore,
    retention_days: base.config.evidence_retention_days,
    holds: async (db, candidates) => [
      ...(await orders.deposits.ordersUnderReview(db, candidates)),
      ...(await decisions.claims.ordersWithOpenClaims(db, candidates)),
      ...(await decisions.disputes.ordersWithOpenDisputes(db, candidates)),
    ],
  });
}

type OrderServices = ReturnType<typeof createOrderServices>;

/** Verification, the review desk, claims and disputes: what decides an order after its slip. */
function createDecisionServices(base: Foundation, money: MoneyServices, orders: OrderServices, options: CreateInstanceOptions) {
  const { clock, database, logger, metrics } = base;
  const { deposits, settlement, slips } = orders;
  const sandboxBank = new SandboxBank({ clock, deposits, database });
  // Test-mode slips are verified by the sandbox bank, live ones by the brand's provider (or the deployment's
  // generic one); never the other.
  const slipProviders = createSlipProviders(base, money, options);
  // Disputes call the deposit and withdrawal services; verification opens the dispute of an allocation conflict.
  const disputes = new DisputeService({
    database,
    clock,
    withdrawals: money.withdrawals,
    deposits,
    settlement,
    ledger: money.ledger,
    tenancy: money.tenancy,
    public_base_url: () => base.addresses.publicBaseUrl(),
  });
  const verification = new VerificationService({
    database,
    clock,
    logger,
    metrics,
    slips,
    deposits,
    settlement,
    reader: new SlipReader(),
    verifierFor: (scope) => (scope.livemode ? slipProviders.liveVerifier : sandboxBank),
    allocation_conflicts: (tx, input) => disputes.openForAllocationConflict(tx, input),
  });
  const review = new ReviewService({ database, clock, deposits, settlement, slips, verification, tenancy: money.tenancy });
  // Refunds are built here, before the claim desk, which makes a claim's refund in its decision's transaction.
  const refunds = new RefundService({ deposits, withdrawals: money.withdrawals, beneficiaries: money.beneficiaries, slips });
  const backofficeRefunds = new BackofficeRefunds({ database, deposits, refunds, audit: money.tenancy });
  const claims = new ClaimService({ database, clock, deposits, tenancy: money.tenancy, events: money.events, registry: orders.claimRegistry, refunds });
  return { sandboxBank, verification, review, claims, disputes, refunds, backofficeRefunds, slipProviders: slipProviders.service };
}

type DecisionServices = ReturnType<typeof createDecisionServices>;

/**
 * Each brand's live slip providers (src/slip-providers/): the settings service of the back office, and the live
 * verifier that asks the brand's providers, or the deployment's generic verifier for a brand without any.
 */
function createSlipProviders(base: Foundation, money: MoneyServices, options: CreateInstanceOptions): { service: SlipProviderService; liveVerifier: BankVerifier } {
  const { database, clock, logger, metrics, secretBox, config } = base;
  const adapters = new ProviderAdapterCache({ secretBox, logger, metrics, providers: config.slip_providers });
  const generic = options.live_bank_verifier ?? createBankVerifierFromConfig(config.slip_verifier);
  const service = new SlipProviderService({
    database,
    clock,
    secretBox,
    metrics,
    audit: money.tenancy,
    adapters,
    brandExists: async (db, white_label_id) => (await money.tenancy.brandCheckoutBaseUrl(db, white_label_id)) !== null,
  });
  return { service, liveVerifier: new BrandSlipVerifier({ database, metrics, adapters, generic }) };
}

/** Load shedding reads the event loop's delay and this database's connection waits (src/ops/load-shedding.ts). */
function createLoadShedder(base: Foundation): LoadShedder {
  return new LoadShedder(base.config.load_shedding, () => base.database.acquire_wait?.takeLongestMs() ?? 0, (reading, previous) => {
    base.metrics.load_shedding_level.set(reading.level);
    base.logger.warn(
      { level: reading.level, previous_level: previous, event_loop_delay_ms: Math.round(reading.event_loop_delay_ms), database_wait_ms: Math.round(reading.database_wait_ms) },
      'load shedding level changed',
    );
  });
}

/** Every service, built in the order their constructors need. */
function createServices(base: Foundation, options: CreateInstanceOptions): { services: Services; sandboxLiquidity: SandboxLiquidity } {
  const money = createMoneyServices(base, options.events_scan_window);
  const collaborators = createDepositCollaborators(base, money);
  const orders = createOrderServices(base, money, collaborators);
  const decisions = createDecisionServices(base, money, orders, options);
  const { database, clock, logger, metrics, secretBox, config } = base;
  const testClocks = new TestClockService({
    database,
    clock,
    events: money.events,
    tenancy: money.tenancy,
    runNextJob: (input) => base.workerLink.runNextTestClockJob(input),
    workerStopping: () => base.workerLink.isStopping(),
    onAdvanceRequested: () => base.workerLink.wake(),
    limits: options.test_clock_limits,
  });
  const webhooks = createWebhooks({ database, clock, logger, secretBox, events: money.events, tenancy: money.tenancy, metrics }, options.webhooks);
  const services: Services = {
    config,
    database,
    clock,
    logger,
    metrics,
    secretBox,
    tenancy: money.tenancy,
    events: money.events,
    idempotency: orders.idempotency,
    ledger: money.ledger,
    fees: money.fees,
    beneficiaries: money.beneficiaries,
    withdrawals: money.withdrawals,
    withdrawalPolicies: money.withdrawalPolicies,
    deposits: orders.deposits,
    settlement: orders.settlement,
    depositPolicies: orders.depositPolicies,
    slipTokens: orders.slipTokens,
    slips: orders.slips,
    slipActivity: collaborators.slipActivity,
    reviewPace: collaborators.reviewPace,
    checkoutAddresses: collaborators.checkoutAddresses,
    checkoutLinks: collaborators.checkoutLinks,
    disputeCovers: collaborators.disputeCovers,
    ...createConsoleServices({ database, clock, logger, secretBox, tenancy: money.tenancy, derivation_key: base.derivation_key, origin: () => config.backoffice_base_url ?? new URL(base.addresses.publicBaseUrl()).origin }),
    ...decisions,
    evidenceStore: orders.evidenceStore,
    evidenceRetention: createEvidenceRetention(base, orders, decisions),
    testClocks,
    webhooks,
    loadShedder: createLoadShedder(base),
    publicBaseUrl: () => base.addresses.publicBaseUrl(),
    uploadBaseUrl: () => base.addresses.uploadBaseUrl(),
  };
  return { services, sandboxLiquidity: money.sandboxLiquidity };
}

/** The sandbox scenarios act through the same services as the end user, the bank and the desk would. */
function createSandboxScenarios(services: Services, liquidity: SandboxLiquidity): SandboxScenarios {
  return new SandboxScenarios({
    database: services.database,
    clock: services.clock,
    logger: services.logger,
    deposits: services.deposits,
    withdrawals: services.withdrawals,
    slips: services.slips,
    slipTokens: services.slipTokens,
    review: services.review,
    sandboxBank: services.sandboxBank,
    liquidity,
    events: services.events,
    // 114.00 THB: the scenario rotates the brand's sandbox signing key.
    rotateSandboxSigningKey: async (input) => {
      await services.webhooks.signingKeys.rotateForSandboxScenario(input);
    },
  });
}

/**
 * The hosted checkout page (src/checkout/): orders get their `checkout_url` from it, and it reads and pays
 * orders through the deposit, slip and sandbox services.
 */
function createCheckout(services: Services): CheckoutService {
  return new CheckoutService({
    clock: services.clock,
    config: services.config,
    tenancy: services.tenancy,
    deposits: services.deposits,
    slip_activity: services.slipActivity,
    sandboxBank: services.sandboxBank,
    idempotency: services.idempotency,
    links: services.checkoutLinks,
    addresses: services.checkoutAddresses,
    public_base_url: () => services.publicBaseUrl(),
    upload_base_url: () => services.uploadBaseUrl(),
  });
}

/** Every API route module, each given the services it declares. */
function routeModules(services: Services): RouteModule[] {
  const { database, clock, config, tenancy, events } = services;
  return [
    tenancyRoutes({ tenancy }),
    eventRoutes({ events }),
    registerBankRoutes,
    registerTestVectorRoutes,
    ledgerRoutes({ database, ledger: services.ledger, tenancy }),
    feeRoutes({ clock, depositAmountRange: (db, white_label_id, livemode) => services.depositPolicies.policyFor(db, white_label_id, livemode) }),
    sandboxBankRoutes({ clock }),
    beneficiaryRoutes({ beneficiaries: services.beneficiaries }),
    withdrawalRoutes({ database, tenancy, withdrawals: services.withdrawals, withdrawalPolicies: services.withdrawalPolicies }),
    depositRoutes({ database, deposits: services.deposits, depositPolicies: services.depositPolicies, tenancy }),
    refundRoutes({ database, refunds: services.refunds, backoffice: services.backofficeRefunds }),
    services.webhooks.registerRoutes,
    replayOutOfOrderRoutes({ clock, events }),
    localForwardingRoutes({ clock, events, signingKeys: services.webhooks.signingKeys }),
    slipRoutes({ config, database, slips: services.slips }),
    sandboxRoutes({ sandboxBank: services.sandboxBank }),
    reviewRoutes({ database, review: services.review, publicBaseUrl: () => services.publicBaseUrl() }),
    disputeRoutes({ database, disputes: services.disputes }),
    claimRoutes({ database, claims: services.claims }),
    testClockRoutes({ database, testClocks: services.testClocks }),
    checkoutAdminRoutes({ checkoutAddresses: services.checkoutAddresses, tenancy }),
    slipProviderRoutes({ slipProviders: services.slipProviders }),
    consoleApiRoutes({ database, sessions: services.consoleSessions, tenancy }),
    consoleOidcApiRoutes({ oidcSettings: services.consoleOidcSettings }),
  ];
}

/** The job handlers of the worker role, by task. */
function jobHandlers(services: Services, scenarios: SandboxScenarios, extra: Record<string, JobHandler>): Record<string, JobHandler> {
  const { database } = services;
  return {
    // Clearing: a settled deposit's credit moves to available 72 hours on (a no-op when held).
    [RELEASE_CLEARING_TASK]: async (job) => {
      const payload = job.payload as { white_label_id: string; merchant_id: string; livemode: boolean; credit_balance_transaction_id: string };
      const account = { white_label_id: payload.white_label_id, merchant_id: payload.merchant_id, livemode: payload.livemode };
      await database.transaction((tx) => services.ledger.releaseClearing(tx, account, payload.credit_balance_transaction_id));
    },
    // Beneficiary name verification: directory lookup outside any transaction, then one transition.
    [VERIFY_BENEFICIARY_TASK]: createBeneficiaryVerifyHandler({ events: services.events, secretBox: services.secretBox }),
    // Withdrawal deadlines: expiry, approval time-to-live, fill auto-confirm.
    ...createWithdrawalJobHandlers(database, services.withdrawals),
    // Deposit deadlines: the matching retry of a waiting order, and the transfer deadline (settlement's: a partly paid order settles short).
    ...createDepositJobHandlers(database, services.deposits),
    ...createSettlementJobHandlers(database, services.settlement),
    // Dispute deadlines: at respond_by, closed for the depositor without evidence, else left to an operator.
    ...createDisputeJobHandlers(services.disputes),
    // Slips: read, verified with the bank and settled or sent to review, one receipt at a time per order.
    ...services.verification.jobHandlers(),
    // Slip images past the evidence retention, purged every hour (none while the retention is off).
    ...services.evidenceRetention.jobHandlers(),
    // Sandbox scenarios: the automatic steps of test-mode orders of the spec's scenario amounts.
    ...scenarios.jobHandlers(),
    // Test clocks: an advance runs the clock's due jobs in order, each at its own time, then sets the clock.
    ...services.testClocks.jobHandlers(),
    ...extra,
  };
}

/** The HTTP server of the api role, with every route and the pages served beside the API. */
function createServer(services: Services, checkout: CheckoutService, extra: readonly ExtraRouteModule[], isReady: () => boolean): FastifyInstance {
  const modules = [...routeModules(services), ...extra.map((module) => module(services))];
  // The OpenAPI document reads the catalogue of this very server on its first request, once every route is registered.
  const app: FastifyInstance = buildServer(
    {
      config: services.config,
      logger: services.logger,
      metrics: services.metrics,
      clock: services.clock,
      database: services.database,
      callers: services.tenancy,
      idempotency: services.idempotency,
      loadGate: services.loadShedder,
      testClocks: services.testClocks,
      capabilities: services.slipTokens,
      uploadBaseUrl: () => services.uploadBaseUrl(),
    },
    [...modules, openApiRoutes(() => apiRoutesOf(app), { publicBaseUrl: () => services.publicBaseUrl() })],
  );
  registerOperationsRoutes(app, services, isReady);
  registerCheckoutPages(app, { checkout, tenancy: services.tenancy, database: services.database, clock: services.clock, config: services.config });
  registerConsolePages(app, consolePageDependencies(services));
  registerApiReference(app);
  return app;
}

export function createServiceInstance(options: CreateInstanceOptions): ServiceInstance {
  const base = foundationOf(options);
  const { services, sandboxLiquidity } = createServices(base, options);
  registerBacklogGauges(services.metrics.registry, base.realClock, {
    jobs_due: () => readJobBacklog(services.database, base.realClock),
    webhook_deliveries_due: () => services.webhooks.deliveryBacklog(),
    reviews_open: () => services.deposits.openReviewBacklog(services.database),
  });
  const scenarios = createSandboxScenarios(services, sandboxLiquidity);
  const checkout = createCheckout(services);
  const state = { ready: false, stopping: false };
  const app = createServer(services, checkout, options.extra_modules ?? [], () => state.ready && !state.stopping);
  const worker = new Worker({
    database: services.database,
    clock: services.clock,
    // Claims, leases and outcome records are real time, also for a test clock's job run by an advance.
    real_clock: base.realClock,
    handlers: jobHandlers(services, scenarios, options.job_handlers ?? {}),
    logger: services.logger,
    metrics: services.metrics,
    concurrency: options.config.worker_concurrency,
    poll_interval_ms: options.config.worker_poll_interval_ms,
  });
  base.workerLink.worker = worker;
  return instanceOf(services, app, worker, { addresses: base.addresses, state, owns_database: options.owns_database !== false });
}

async function housekeep(services: Services): Promise<number> {
  const now = services.clock.now();
  let removed = 0;
  removed += await services.tenancy.purgeExpiredAccessState(now, new Date(now.getTime() - 10 * MINUTE_MS), HOUSEKEEPING_BATCH);
  removed += await services.idempotency.purgeExpired(HOUSEKEEPING_BATCH);
  removed += await purgeFinishedJobs(services.database, services.clock);
  removed += await services.webhooks.purgeFinished();
  removed += await services.consoleSessions.purgeExpired(HOUSEKEEPING_BATCH);
  // The retention's hourly job, scheduled again should its chain have stopped (a no-op while it is scheduled).
  await services.evidenceRetention.ensureScheduled();
  return removed;
}

/** The instance's roles: listen (api) and run (worker) as configured, and stop gracefully. */
function instanceOf(
  services: Services,
  app: FastifyInstance,
  worker: Worker,
  runtime: { addresses: Addresses; state: { ready: boolean; stopping: boolean }; owns_database: boolean },
): ServiceInstance {
  const { config, logger } = services;
  const { state } = runtime;
  // Housekeeping is maintenance, not a business deadline: every worker process runs it on a timer,
  // and since each round only deletes rows already expired, running it in several processes is safe.
  let housekeepingTimer: NodeJS.Timeout | null = null;
  // Another process's committed job reaches this worker through LISTEN (src/jobs/wake.ts); PGlite is one
  // process, where the services wake the worker directly.
  const listenUrl = services.database.engine === 'postgres' ? config.database_listen_url : null;
  const dueJobListener = listenUrl === null ? null : listenForDueJobs(worker, { connection_string: listenUrl, logger });
  return {
    services,
    app,
    worker,
    dueJobListener: () => (config.worker_enabled ? dueJobListener : null),
    housekeep: () => housekeep(services),
    async listen() {
      if (config.api_enabled) {
        services.loadShedder.start();
        await app.listen({ port: config.port, host: config.host });
        runtime.addresses.bound = `http://localhost:${(app.server.address() as { port: number }).port}`;
      } else {
        await app.ready();
      }
      if (config.worker_enabled) {
        await services.verification.warmUp();
        worker.start();
        dueJobListener?.start();
        // Webhook delivery reads the outbox on its own loop, with per-endpoint limits (src/webhooks).
        services.webhooks.dispatcher.start();
        housekeepingTimer = setInterval(() => {
          housekeep(services).catch((error: unknown) => logger.warn({ err: error }, 'housekeeping round failed'));
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
      services.loadShedder.stop();
      await app.close();
      await dueJobListener?.stop();
      await worker.stop();
      await services.webhooks.dispatcher.stop();
      services.evidenceStore.close?.();
      if (runtime.owns_database) await services.database.close();
    },
  };
}

// What a process does before it builds an instance, kept apart so that this file stays the wiring.
export { openConfiguredDatabase, resolveMasterKey, resolveMasterKeyring } from './start-up.ts';
