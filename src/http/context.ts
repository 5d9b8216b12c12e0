import type { LoadClass, LoadShedder } from '../ops/load-shedding.ts';
import type { Writable } from 'node:stream';
import type { z } from 'zod';
import type { Clock } from '../platform/clock.ts';
import type { Config } from '../platform/config.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { CarriedRead } from '../platform/read-part.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Logger } from '../platform/logger.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { EventCause, EventsService } from '../events/service.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { LedgerService } from '../ledger/service.ts';
import type { FeeService } from '../fees/service.ts';
import type { BeneficiaryService } from '../beneficiaries/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { WithdrawalPolicyService } from '../withdrawals/policy.ts';
import type { DepositService } from '../deposits/service.ts';
import type { DepositPolicyService } from '../deposits/policy.ts';
import type { ApiKeyScope, BackofficeRole } from '../tenancy/types.ts';
import type { IdempotencyService } from './idempotency.ts';
import type { SlipTokenClaims, SlipTokenSigner } from '../slips/capability.ts';
import type { SlipsService } from '../slips/service.ts';
import type { VerificationService } from '../verification/service.ts';
import type { ReviewService } from '../review/service.ts';
import type { DisputeService } from '../withdrawals/disputes.ts';
import type { ClaimService } from '../review/claims.ts';
import type { SandboxBank } from '../sandbox/bank.ts';
import type { TestClockService } from '../test-clocks/service.ts';
import type { BucketPolicy } from './rate-limit.ts';
import type { ErrorCode } from '../platform/errors.ts';

/** Everything a route can reach. Built once per service instance by `createServices`. */
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
  depositPolicies: DepositPolicyService;
  /** Signs and verifies the per-order slip upload capability. */
  slipTokens: SlipTokenSigner;
  /** Slip intake: durable receipts of uploaded evidence. */
  slips: SlipsService;
  /** Reading, bank verification and the outcome of each slip. */
  verification: VerificationService;
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
  /** Load shedding of this process: refuses the least protected requests when it is overloaded. */
  loadShedder: LoadShedder;
  /** The base URL the service advertises (PUBLIC_BASE_URL, or the listening address). */
  publicBaseUrl(): string;
  /** The base of slip upload addresses (UPLOAD_BASE_URL, else the public base). */
  uploadBaseUrl(): string;
}

/** The authenticated merchant a request acts for; every query is scoped by these three keys. */
export interface MerchantContext {
  request_id: string;
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  api_key_id: string;
  api_version: string;
  idempotency_key: string | null;
  /** What events emitted by this request record as their cause. */
  cause: EventCause;
}

/** The (brand, merchant, environment) a merchant request acts in: the scope of every query it makes. */
export function accountOfContext(context: MerchantContext): { white_label_id: string; merchant_id: string; livemode: boolean } {
  return { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode };
}

export interface BackofficeContext {
  request_id: string;
  credential_id: string;
  role: BackofficeRole;
  /** The brand the credential belongs to; null for the platform administrator. */
  white_label_id: string | null;
  /**
   * The request's Idempotency-Key, when it sent one. Back-office routes do not require it; decisions
   * use it to tell a retried request from a second decision.
   */
  idempotency_key: string | null;
}

export type SuccessStatus = 200 | 201 | 202;

export interface RouteOutcome {
  status: SuccessStatus;
  body: unknown;
  headers?: Record<string, string>;
  /** Bytes sent instead of the JSON body (public routes only: merchant answers are JSON and stored for replay). */
  binary?: { content_type: string; bytes: Buffer };
}

/**
 * A success answer as the OpenAPI document describes it (src/openapi/). Documentation only: the pipeline
 * never reads it, and the contract check of the test harness validates every answer against it.
 */
export interface ResponseDocumentation {
  description: string;
  /** The JSON body: the resource's zod schema, declared in the module that owns the resource. */
  schema?: z.ZodType;
  /** A binary body's possible media types (images), instead of `schema`. */
  binary?: readonly string[];
  /** The Cache-Control value the route always sends with this answer. */
  cache_control?: string;
}

/** Every success status a route answers with, and what it carries. */
export type RouteResponses = Partial<Record<SuccessStatus, ResponseDocumentation>>;

/**
 * What the OpenAPI document says about a route beyond its request schemas. `errors` lists the catalogue
 * codes the route's own handler (and the services it calls) can answer with; the codes of the shared
 * pipeline (authentication, rate limits, body parsing, idempotency) are added by the generator.
 */
export interface RouteDocumentationFields {
  summary?: string;
  responses?: RouteResponses;
  errors?: readonly ErrorCode[];
}

export interface ExtraBucket {
  policy: BucketPolicy;
  subject: string;
}

export interface MerchantRouteSpec<BodySchema extends z.ZodType | undefined, QuerySchema extends z.ZodType | undefined> extends RouteDocumentationFields {
  method: 'GET' | 'POST';
  url: string;
  scope: ApiKeyScope;
  /** What load shedding counts the route as; by default a GET is a `read`, a POST a `write` (src/ops/load-shedding.ts). */
  load_class?: LoadClass;
  body?: BodySchema;
  query?: QuerySchema;
  /** The body and query as documented, for a route that takes them unparsed and validates them after a check that must come first. */
  documented_body?: z.ZodType;
  documented_query?: z.ZodType;
  /**
   * Runs in real time even when the merchant's sandbox has a test clock attached, and is not refused while
   * that clock advances: the test clock routes themselves, which manage the clock rather than live in it.
   */
  outside_test_clock?: boolean;
  /** Buckets that depend on the validated body (e.g. per end user); counted before the handler. */
  extraBuckets?: (body: BodySchema extends z.ZodType ? z.infer<BodySchema> : undefined, context: MerchantContext) => ExtraBucket[];
  /**
   * A POST's first reads, which the idempotency statement carries (src/platform/read-part.ts), so that
   * the handler's service finds them kept in the transaction instead of sending them itself.
   */
  carried_reads?: (body: BodySchema extends z.ZodType ? z.infer<BodySchema> : undefined, context: MerchantContext) => readonly CarriedRead[];
  handler: (input: {
    context: MerchantContext;
    /** The transaction of the idempotent write (POST) or the database (GET). */
    db: Queryable;
    body: BodySchema extends z.ZodType ? z.infer<BodySchema> : undefined;
    query: QuerySchema extends z.ZodType ? z.infer<QuerySchema> : Record<string, never>;
    params: Record<string, string>;
  }) => Promise<RouteOutcome>;
}

export interface BackofficeRouteSpec<BodySchema extends z.ZodType | undefined, QuerySchema extends z.ZodType | undefined> extends RouteDocumentationFields {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  url: string;
  roles: readonly BackofficeRole[];
  body?: BodySchema;
  query?: QuerySchema;
  handler: (input: {
    context: BackofficeContext;
    body: BodySchema extends z.ZodType ? z.infer<BodySchema> : undefined;
    query: QuerySchema extends z.ZodType ? z.infer<QuerySchema> : Record<string, never>;
    params: Record<string, string>;
  }) => Promise<RouteOutcome>;
}

export interface PublicRouteSpec<QuerySchema extends z.ZodType | undefined> extends RouteDocumentationFields {
  method: 'GET';
  url: string;
  query?: QuerySchema;
  /**
   * For a signed link: the link's own rate subject when its signature verifies (a cheap check, no I/O),
   * else null. A verified link counts in the `public_link` bucket of that subject, anything else in the
   * caller's address's `public` bucket.
   */
  link_subject?: (input: { query: QuerySchema extends z.ZodType ? z.infer<QuerySchema> : Record<string, never>; params: Record<string, string> }) => { white_label_id: string; subject: string } | null;
  handler: (input: {
    request_id: string;
    query: QuerySchema extends z.ZodType ? z.infer<QuerySchema> : Record<string, never>;
    params: Record<string, string>;
  }) => Promise<RouteOutcome>;
}

/** A request authenticated by an order's slip capability (slip intake and its claim). */
export interface CapabilityContext {
  request_id: string;
  claims: SlipTokenClaims;
  idempotency_key: string;
  /** The request's path, as it came. */
  path: string;
}

export interface CapabilityRouteSpec extends RouteDocumentationFields {
  method: 'POST';
  url: string;
  /** The request bodies as documented, by media type: the route parses its raw bytes itself. */
  documented_content?: Readonly<Record<string, z.ZodType>>;
  /** The largest body the route takes, in bytes, instead of the service-wide 1 MiB. */
  body_limit_bytes: number;
  /** The whole body must arrive within this time of reading's start (docs/reliability.md). */
  body_deadline_ms: number;
  /**
   * The upload address the capability must name (`htu`), given the address this request came to: the
   * address itself for the upload route, the order's upload address for its sibling routes.
   */
  capability_address: (request_address: string) => string;
  handler: (input: { context: CapabilityContext; body: CapabilityBody; content_type: string | undefined; params: Record<string, string> }) => Promise<RouteOutcome>;
}

/**
 * The unread body of an authenticated capability request, read under the route's limit and deadline
 * (src/http/body-reader.ts). Either method throws a `BodyRefusal` for a body that is too large, too
 * slow or cut off, which the pipeline answers from the catalogue.
 */
export interface CapabilityBody {
  /** The whole body in memory, within the process's budget for buffered bodies. */
  buffer(): Promise<Buffer>;
  /**
   * The body streamed into `sink` (ended when the body ends), outside that budget: for a route that
   * bounds how many bodies it reads at once itself (slip intake). Resolves with the byte count.
   */
  stream(sink: Writable): Promise<number>;
}

export interface RouteRegistrar {
  /** A route authenticated by an order's slip capability only (never by a merchant key). */
  capability(spec: CapabilityRouteSpec): void;
  merchant<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(spec: MerchantRouteSpec<B, Q>): void;
  backoffice<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(spec: BackofficeRouteSpec<B, Q>): void;
  public<Q extends z.ZodType | undefined = undefined>(spec: PublicRouteSpec<Q>): void;
}
