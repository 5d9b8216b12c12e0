import type { Writable } from 'node:stream';
import type { z } from 'zod';
import type { Queryable } from '../platform/db.ts';
import type { PlannedCommand } from '../platform/read-part.ts';
import type { ApiKeyScope, BackofficeRole } from '../platform/access.ts';
import type { EventCause } from '../platform/cause.ts';
import type { ErrorCode } from '../platform/errors.ts';
import type { LoadClass } from './load-gate.ts';
import type { CapabilityClaims } from './ports.ts';
import type { BucketPolicy } from './rate-limit.ts';

/**
 * What a route module declares and what its handler is given: the four kinds of route (merchant, back
 * office, slip capability, public), the context of each caller, and the shape of an answer. A module's
 * routes are a factory (`RouteModule`) that takes the services it calls, named in its own dependency type,
 * and registers its specs; only the composition root (src/app.ts) sees every service.
 */

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
   * A POST that plans its first reads before its transaction (src/platform/read-part.ts `PlannedCommand`): the
   * plan comes from its service, the idempotency statement carries the reads, and `run` gets their answers. A
   * route has this or `handler`, never both.
   */
  command?: (input: {
    context: MerchantContext;
    body: BodySchema extends z.ZodType ? z.infer<BodySchema> : undefined;
    params: Record<string, string>;
  }) => PlannedCommand<RouteOutcome>;
  handler?: (input: {
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
export interface CapabilityContext<Claims extends CapabilityClaims = CapabilityClaims> {
  request_id: string;
  /** What the capability says, as the verifier the composition root gave the server read it. */
  claims: Claims;
  idempotency_key: string;
  /** The request's path, as it came. */
  path: string;
}

export interface CapabilityRouteSpec<Claims extends CapabilityClaims = CapabilityClaims> extends RouteDocumentationFields {
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
  handler: (input: { context: CapabilityContext<Claims>; body: CapabilityBody; content_type: string | undefined; params: Record<string, string> }) => Promise<RouteOutcome>;
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
  /**
   * A route authenticated by an order's slip capability only (never by a merchant key). `Claims` is what
   * the server's capability verifier returns: the routes and the verifier are the same module's.
   */
  capability<Claims extends CapabilityClaims = CapabilityClaims>(spec: CapabilityRouteSpec<Claims>): void;
  merchant<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(spec: MerchantRouteSpec<B, Q>): void;
  backoffice<B extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(spec: BackofficeRouteSpec<B, Q>): void;
  public<Q extends z.ZodType | undefined = undefined>(spec: PublicRouteSpec<Q>): void;
}

/** A module's routes: registered once, on the server the composition root builds. */
export type RouteModule = (registrar: RouteRegistrar) => void;
