import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ApiError, renderError } from '../platform/errors.ts';
import { invariant } from '../platform/assert.ts';
import type { PlannedCommand, ReadPart } from '../platform/read-part.ts';
import { sha256Hex } from '../platform/crypto.ts';
import { newId } from '../platform/ids.ts';
import { runInTestClock, type TestClockScope } from '../platform/clock.ts';
import { isDatabaseUnavailable, type Queryable } from '../platform/db.ts';
import type { ApiKeyScope, BackofficeRole } from '../platform/access.ts';
import {
  accountOfContext,
  type BackofficeContext,
  type BackofficeRouteSpec,
  type CapabilityRouteSpec,
  type MerchantContext,
  type MerchantRouteSpec,
  type PublicRouteSpec,
  type RouteDocumentationFields,
  type RouteOutcome,
  type RouteModule,
  type RouteRegistrar,
} from './context.ts';
import type { ServerDependencies } from './ports.ts';
import { authenticateMerchant, bearerToken, identifyMerchantRequest } from './merchant-auth.ts';
import { BodyRefusal, RequestBodies, requestHasBody, type BodyLimits } from './body-reader.ts';
import { createNodeServer } from './node-server.ts';
import { decodeJson, isJsonMediaType } from './json-body.ts';
import { requestFingerprint } from '../platform/fingerprint.ts';
import {
  applyRateHeaders,
  BUCKETS,
  type BucketPolicy,
  type BucketState,
  decisiveBucket,
  isExceeded,
  rateLimitedError,
  windowStart,
} from './rate-limit.ts';
import { isStorableText, parseOrThrow, unstorableTextPaths } from './validation.ts';
import { createClientErrorHandler } from './client-errors.ts';
import type { LoadClass } from './load-gate.ts';
import type { AttachedClock, CapabilityClaims } from './ports.ts';

/**
 * Assembles the HTTP server. Routes are thin: a module registers specs through the registrar, and the
 * pipelines here do authentication, rate limiting, body parsing and validation, idempotency, the error
 * rendering and the headers every response carries. No framework error shape ever reaches a client.
 */
export const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

type RateAwareRequest = FastifyRequest & { rateState?: BucketState };

/** Routes without a declared body accept none (an empty JSON object is tolerated). */
const noBodySchema = z.object({}).strict();
/** Routes without declared query parameters accept none. */
const noQuerySchema = z.object({}).strict();
/** Idempotency keys: 1 to 255 printable ASCII characters. */
const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;
/** The merchant signature's headers: a capability route refuses a request carrying any of them. */
const MERCHANT_SIGNING_HEADERS = ['pg-timestamp', 'pg-nonce', 'pg-version', 'pg-signature'] as const;

/** The capability from `Authorization: Bearer <token>`; null when absent or not of a token's shape and size. */
function capabilityToken(request: FastifyRequest, max_token_length: number): string | null {
  const authorization = request.headers.authorization;
  if (typeof authorization !== 'string' || authorization.length > max_token_length + 7) return null;
  return /^Bearer ([A-Za-z0-9_.-]+)$/i.exec(authorization)?.[1] ?? null;
}

/**
 * Headers that must come once. Node keeps the first `Authorization` and joins repeated
 * `Idempotency-Key` values with a comma; either would act on something the client did not mean to
 * send as one value, so a repeat is refused before anything else is looked at.
 */
const SINGLE_HEADERS = ['authorization', 'idempotency-key'] as const;

function refuseRepeatedHeaders(request: FastifyRequest): void {
  const raw = request.raw.rawHeaders;
  for (const name of SINGLE_HEADERS) {
    let seen = 0;
    for (let index = 0; index < raw.length; index += 2) if (raw[index]?.toLowerCase() === name) seen += 1;
    if (seen > 1) throw new ApiError('validation_error', { details: { fields: [{ path: name, reason: 'duplicate_header', hint: 'send this header once' }] } });
  }
}

/**
 * Cross-origin access to the routes of the slip capability (docs/drafts/checkout.md, "Uploads from
 * another origin"). The capability is a bearer token the caller sends itself, never a cookie or other
 * ambient credential, so any origin may send it: `*` without credentials lets a page on a brand's
 * checkout host or a merchant's site upload, and gives no site anything it did not already hold.
 */
function allowCapabilityCors(reply: FastifyReply): void {
  reply.header('Access-Control-Allow-Origin', '*');
  reply.header('Access-Control-Expose-Headers', 'Request-Id, Retry-After, Idempotent-Replay, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, X-RateLimit-Scope');
}

/** A registered path, segment by segment (`:name` matches any non-empty segment), with its methods. */
interface RoutePattern {
  url: string;
  segments: string[];
  methods: Set<string>;
}

/** Matches decoded path segments against a route, as the router does (a `%2F` stays in its segment). */
function matchesSegments(route: RoutePattern, decoded: readonly string[]): boolean {
  return (
    route.segments.length === decoded.length &&
    route.segments.every((segment, index) => (segment.startsWith(':') ? (decoded[index] ?? '') !== '' : segment === decoded[index]))
  );
}

/** Decodes a JSON request body; an empty body is `undefined`. */
function parseJsonBody(request: FastifyRequest, rawBody: Buffer): unknown {
  if (rawBody.length === 0) return undefined;
  if (!isJsonMediaType(request.headers['content-type'])) throw new ApiError('unsupported_media_type');
  const decoded = decodeJson(rawBody);
  const problems = unstorableTextPaths(decoded);
  if (problems.length > 0) throw new ApiError('validation_error', { details: { fields: problems } });
  return decoded;
}

/** A GET carries no body (the signature covers none): one that does is refused before anything else. */
function refuseGetBody(request: FastifyRequest): void {
  if (request.method !== 'GET' && request.method !== 'HEAD') return;
  if (requestHasBody(request)) {
    throw new ApiError('validation_error', { details: { fields: [{ path: '$', reason: 'body_not_allowed' }] } });
  }
}

/**
 * A body that was not read whole (refused from the headers, cut at a limit or a deadline) leaves bytes on
 * the connection that belong to no request: the answer closes the connection instead of reading them.
 */
function bodyLeftOnConnection(request: FastifyRequest): boolean {
  return requestHasBody(request) && (request.raw as { complete?: boolean }).complete === false;
}

/**
 * Path parameters name ids: an empty one (a trailing slash) or one that is not storable text can
 * name nothing, so it is not found, like any other unknown id.
 */
function checkedParams(request: FastifyRequest): Record<string, string> {
  const params = request.params as Record<string, string>;
  for (const value of Object.values(params)) {
    if (value.length === 0 || !isStorableText(value)) throw new ApiError('resource_not_found');
  }
  return params;
}

/** Parses the query string; a repeated name is refused rather than silently picking one value. */
function parseQuery(rawUrl: string): Record<string, string> {
  const index = rawUrl.indexOf('?');
  // A null prototype keeps `__proto__` an ordinary (and therefore unknown, refused) name.
  const result: Record<string, string> = Object.create(null) as Record<string, string>;
  if (index === -1) return result;
  const params = new URLSearchParams(rawUrl.slice(index + 1));
  let count = 0;
  for (const [name, value] of params) {
    count += 1;
    if (count > 50) throw new ApiError('validation_error', { details: { fields: [{ path: 'query', reason: 'too_many_parameters' }] } });
    if (!isStorableText(name) || !isStorableText(value)) {
      throw new ApiError('validation_error', { details: { fields: [{ path: isStorableText(name) ? name : 'query', reason: 'invalid_characters' }] } });
    }
    if (Object.hasOwn(result, name)) {
      throw new ApiError('validation_error', { details: { fields: [{ path: name, reason: 'repeated_parameter' }] } });
    }
    result[name] = value;
  }
  return result;
}

/** Runs `work` inside a sandbox test clock's scope when there is one, else as it is. */
function inTestClock<T>(scope: TestClockScope | null, work: () => T): T {
  return scope ? runInTestClock(scope, work) : work();
}

/**
 * How a merchant POST runs inside its idempotent execution: its planned command (whose first reads the key's
 * statement carries), or its handler as a command that plans no reads.
 */
function commandOf<B extends z.ZodType | undefined, Q extends z.ZodType | undefined>(spec: MerchantRouteSpec<B, Q>, input: MerchantInput<B, Q>): PlannedCommand<RouteOutcome> {
  if (spec.command) return spec.command({ context: input.context, body: input.body, params: input.params });
  const handler = spec.handler;
  invariant(handler, 'a POST route has a handler or a command');
  return { reads: [], run: (tx) => handler({ ...input, db: tx }) };
}

/** What a merchant route's handler is given, but its database. */
type MerchantInput<B extends z.ZodType | undefined, Q extends z.ZodType | undefined> = Omit<Parameters<NonNullable<MerchantRouteSpec<B, Q>['handler']>>[0], 'db'>;

function sendJson(reply: FastifyReply, status: number, bodyText: string): FastifyReply {
  return reply.code(status).header('content-type', 'application/json; charset=utf-8').send(bodyText);
}

/**
 * What the OpenAPI generator (src/openapi/) reads of a route: its request schemas as the pipeline
 * validates them (or as documented, for a route that parses its body itself) and its documentation fields.
 */
export interface RouteDocumentation extends RouteDocumentationFields {
  body?: z.ZodType;
  query?: z.ZodType;
  /** Request bodies by media type, for a route that reads raw bytes (slip intake). */
  content?: Readonly<Record<string, z.ZodType>>;
  /** Merchant routes that a sandbox test clock never holds back (no `test_clock_advancing`). */
  outside_test_clock?: boolean;
}

/** One registered API route, its guard (the merchant scope or the back-office roles) and its documentation. */
export type ApiRoute =
  | { kind: 'merchant'; method: string; url: string; scope: ApiKeyScope; documentation: RouteDocumentation }
  | { kind: 'capability'; method: string; url: string; documentation: RouteDocumentation }
  | { kind: 'backoffice'; method: string; url: string; roles: readonly BackofficeRole[]; documentation: RouteDocumentation }
  | { kind: 'public'; method: string; url: string; documentation: RouteDocumentation };

function documentationFields(spec: RouteDocumentationFields): RouteDocumentationFields {
  return { summary: spec.summary, responses: spec.responses, errors: spec.errors };
}

/** The API routes `buildServer` registered, in registration order. */
export function apiRoutesOf(app: FastifyInstance): readonly ApiRoute[] {
  return (app as FastifyInstance & { apiRoutes: ApiRoute[] }).apiRoutes;
}

/** The server's body reader, for routes registered outside the pipelines here (the checkout pages). */
export function requestBodiesOf(app: FastifyInstance): RequestBodies {
  return (app as FastifyInstance & { requestBodies: RequestBodies }).requestBodies;
}

/** Maps a body that was not read whole to the catalogue; `capability_limit` for the slip routes' own shape. */
function bodyRefusalError(refusal: BodyRefusal, capability_limit: number | undefined): ApiError {
  switch (refusal.reason) {
    case 'too_large':
      // The slip routes list their refusals as validation errors with fields (spec, slip intake rule 8).
      return capability_limit !== undefined
        ? new ApiError('validation_error', { details: { fields: [{ path: '$', reason: 'too_large', hint: `at most ${capability_limit} bytes of request body` }] } })
        : new ApiError('request_too_large', { details: { max_bytes: refusal.max_bytes } });
    case 'deadline':
    case 'too_slow':
      return new ApiError('request_timeout', { details: { reason: refusal.reason === 'deadline' ? 'body_deadline' : 'body_too_slow' } });
    case 'budget_exhausted':
      return new ApiError('service_unavailable', { retry_after_seconds: 1, details: { reason: 'request_bodies_buffered' } });
    case 'aborted':
      return new ApiError('malformed_request', { details: { reason: 'body_incomplete' } });
  }
}

export function buildServer(deps: ServerDependencies, modules: readonly RouteModule[]): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    // One line per request is written by the onResponse hook below, with the fields we choose.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => newId('request'),
    // request.ip is the socket's address, or behind a configured proxy the client it names (TRUSTED_PROXIES).
    ...(deps.config.trusted_proxies.length > 0 ? { trustProxy: deps.config.trusted_proxies } : {}),
    bodyLimit: JSON_BODY_LIMIT_BYTES,
    // Timeouts, the connection cap and the deferred 100 Continue (node-server.ts).
    serverFactory: (handler) =>
      createNodeServer(deps.config.http, deps.logger, {
        connectionRefused: () => deps.metrics.http_connections_refused_total.inc(),
        connectionsOpen: (count) => deps.metrics.http_connections_open.set(count),
      }, handler),
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 200 },
    // Requests the HTTP parser refuses get the catalogue's error body too (src/http/client-errors.ts).
    clientErrorHandler: createClientErrorHandler(deps.logger),
    // A path that cannot be decoded, or an id longer than any id, names no resource.
    frameworkErrors: (_error, request, reply) => {
      void sendError(request, reply, new ApiError('resource_not_found'));
    },
  });
  const patterns: RoutePattern[] = [];
  let shuttingDown = false;

  const bodies = new RequestBodies(
    {
      min_bytes_per_window: deps.config.http.body_min_bytes_per_window,
      window_ms: deps.config.http.body_rate_window_ms,
      buffer_budget_bytes: deps.config.http.body_buffer_budget_bytes,
    },
    {
      refused: (reason) => deps.metrics.http_request_bodies_refused_total.inc({ reason }),
      buffered: (bytes) => deps.metrics.http_request_body_buffer_bytes.set(bytes),
    },
  );
  app.decorate('requestBodies', bodies);
  /** The body limits of the JSON routes (merchant and back office). */
  const jsonLimits: BodyLimits = { max_bytes: JSON_BODY_LIMIT_BYTES, deadline_ms: deps.config.http.body_deadline_ms };

  app.removeAllContentTypeParsers();
  // Bodies are handed over unread: each pipeline reads one only once the caller is known from the
  // headers (body-reader.ts), so that a request that will be refused is refused before its body arrives.
  // The bytes then stay raw until authentication: the signature covers them exactly.
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

  app.addHook('onRequest', async (request, reply) => {
    reply.header('Request-Id', request.id);
  });

  // A response finished while stopping closes its connection, so that a keep-alive client does not
  // hold the graceful stop open until its idle timeout; so does one whose body was not read whole.
  app.addHook('onSend', async (request, reply, payload) => {
    if (shuttingDown || bodyLeftOnConnection(request)) reply.header('Connection', 'close');
    return payload;
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = String(reply.statusCode);
    deps.metrics.http_requests_total.inc({ method: request.method, route, status });
    deps.metrics.http_request_duration_seconds.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    const level = reply.statusCode >= 500 ? 'error' : 'info';
    request.log[level](
      { request_id: request.id, method: request.method, route, status: reply.statusCode, duration_ms: Math.round(reply.elapsedTime * 10) / 10 },
      'request completed',
    );
  });

  /** Rate headers for a response that no bucket has counted yet: the caller's IP bucket. */
  async function ensureRateHeaders(request: RateAwareRequest, reply: FastifyReply): Promise<void> {
    if (!request.rateState) {
      if (!request.url.startsWith('/v1/')) return;
      try {
        request.rateState = await countPublic(request);
      } catch {
        return;
      }
    }
    applyRateHeaders(reply, request.rateState);
  }

  /** Counts one request in a bucket's current window (shared by every process through PostgreSQL). */
  async function countBucket(policy: BucketPolicy, white_label_id: string, subject: string): Promise<BucketState> {
    const now = deps.clock.now();
    const counted = await deps.callers.countInBucket({
      white_label_id,
      bucket: policy.name,
      subject,
      window_started_at: windowStart(now, policy),
    });
    return { policy, count: counted.request_count, window_started_at: counted.window_started_at, now };
  }

  /** Load shedding (src/ops/load-shedding.ts): a 503 for a request of a class the current load sheds. */
  function shedIfOverloaded(load_class: LoadClass): void {
    const refusal = deps.loadGate.refusal(load_class);
    if (!refusal) return;
    deps.metrics.http_requests_shed_total.inc({ load_class });
    throw refusal;
  }

  function countPublic(request: FastifyRequest): Promise<BucketState> {
    return countBucket(BUCKETS.public, '', request.ip);
  }

  async function sendError(request: RateAwareRequest, reply: FastifyReply, failure: ApiError): Promise<FastifyReply> {
    let error = failure;
    // Set here too because answers to undecodable URLs bypass the onRequest hook.
    reply.header('Request-Id', request.id);
    const counted = request.rateState !== undefined;
    await ensureRateHeaders(request, reply);
    // Answers given before a caller is identified count in the client IP's bucket; past its limit
    // they become 429, so that guessing keys or probing paths is throttled too.
    if (!counted && request.rateState && isExceeded(request.rateState) && error.code !== 'rate_limited') {
      error = rateLimitedError(request.rateState);
    }
    if (error.code === 'method_not_allowed' && Array.isArray(error.details.allow)) {
      reply.header('Allow', (error.details.allow as string[]).join(', '));
    }
    // A 503 is told to wait in Retry-After too (Errors rule 1: the service sheds load), unless the
    // bucket's own wait is longer; other answers keep the bucket's (docs/decisions/rate-limits.md).
    if (error.status === 503 && error.retry_after_seconds !== null && error.retry_after_seconds > Number(reply.getHeader('Retry-After') ?? 0)) {
      reply.header('Retry-After', String(error.retry_after_seconds));
    }
    return sendJson(reply, error.status, JSON.stringify(renderError(error, request.id)));
  }

  /**
   * Maps a framework failure to a catalogue code. Bodies are read by body-reader.ts, so Fastify's own
   * body errors should not occur; they are mapped all the same rather than answered as 500s.
   */
  function frameworkError(error: { code?: string; statusCode?: number }): ApiError | null {
    switch (error.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return new ApiError('request_too_large', { details: { max_bytes: JSON_BODY_LIMIT_BYTES } });
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      case 'FST_ERR_CTP_INVALID_TYPE':
        return new ApiError('unsupported_media_type');
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return new ApiError('malformed_json');
      default:
        break;
    }
    if (error.statusCode === 413) return new ApiError('request_too_large', { details: { max_bytes: JSON_BODY_LIMIT_BYTES } });
    if (error.statusCode === 415) return new ApiError('unsupported_media_type');
    if (error.statusCode === 400) return new ApiError('malformed_json');
    return null;
  }

  app.setErrorHandler(async (error, request, reply) => {
    if (error instanceof ApiError) return sendError(request, reply, error);
    if (error instanceof BodyRefusal) {
      const capabilityLimit = (request.routeOptions.config as { capability_body_limit_bytes?: number } | undefined)?.capability_body_limit_bytes;
      return sendError(request, reply, bodyRefusalError(error, capabilityLimit));
    }
    const mapped = frameworkError(error as { code?: string; statusCode?: number });
    if (mapped) return sendError(request, reply, mapped);
    if (isDatabaseUnavailable(error)) {
      // A restart or failover of PostgreSQL: the service cannot serve for a moment, which is a 503 the
      // client retries (with the same Idempotency-Key), not a fault of the service's own (500).
      request.log.warn({ err: error, request_id: request.id }, 'database unavailable');
      return sendError(request, reply, new ApiError('service_unavailable', { retry_after_seconds: 1, details: { reason: 'database_unavailable' } }));
    }
    request.log.error({ err: error, request_id: request.id }, 'unhandled error');
    return sendError(request, reply, new ApiError('internal_error'));
  });

  app.setNotFoundHandler(async (request, reply) => {
    const rawPath = (request.raw.url ?? request.url).split('?')[0] ?? '';
    let decoded: string[];
    try {
      // Routing matched decoded segments, so the method check must look at them too.
      decoded = rawPath.split('/').map((segment) => decodeURIComponent(segment));
    } catch {
      return sendError(request, reply, new ApiError('resource_not_found'));
    }
    const allowed = patterns.filter((route) => matchesSegments(route, decoded)).flatMap((route) => [...route.methods]);
    if (allowed.length > 0) {
      const allow = [...new Set(allowed)].sort();
      return sendError(request, reply, new ApiError('method_not_allowed', { details: { allow } }));
    }
    return sendError(request, reply, new ApiError('resource_not_found'));
  });

  function remember(method: string, url: string): void {
    const existing = patterns.find((route) => route.url === url);
    const methods = method === 'GET' ? [method, 'HEAD'] : [method];
    if (existing) methods.forEach((item) => existing.methods.add(item));
    else patterns.push({ url, segments: url.split('/'), methods: new Set(methods) });
  }

  // Every API route with what guards it, so that one shared test can prove the guard on each.
  const catalogue: ApiRoute[] = [];
  app.decorate('apiRoutes', catalogue);

  const registrar: RouteRegistrar = {
    merchant(spec) {
      // A GET reads with its handler; a POST writes with its handler or its planned command, one of the two.
      invariant(spec.method === 'GET' ? spec.handler !== undefined && spec.command === undefined : (spec.handler === undefined) !== (spec.command === undefined), `${spec.method} ${spec.url} has one way to run`);
      catalogue.push({
        kind: 'merchant',
        method: spec.method,
        url: spec.url,
        scope: spec.scope,
        documentation: {
          ...documentationFields(spec),
          body: spec.documented_body ?? spec.body,
          query: spec.documented_query ?? spec.query,
          outside_test_clock: spec.outside_test_clock === true,
        },
      });
      remember(spec.method, spec.url);
      app.route({ method: spec.method, url: spec.url, handler: (request, reply) => runMerchant(spec, request, reply) });
    },
    backoffice(spec) {
      catalogue.push({ kind: 'backoffice', method: spec.method, url: spec.url, roles: spec.roles, documentation: { ...documentationFields(spec), body: spec.body, query: spec.query } });
      remember(spec.method, spec.url);
      app.route({ method: spec.method, url: spec.url, handler: (request, reply) => runBackoffice(spec, request, reply) });
    },
    capability(spec) {
      catalogue.push({ kind: 'capability', method: spec.method, url: spec.url, documentation: { ...documentationFields(spec), content: spec.documented_content } });
      remember(spec.method, spec.url);
      app.route({
        method: spec.method,
        url: spec.url,
        config: { capability_body_limit_bytes: spec.body_limit_bytes },
        // Before the body is read, so that a refusal of the body (413, 422) is readable by the page too.
        onRequest: async (_request, reply) => {
          allowCapabilityCors(reply);
        },
        handler: (request, reply) => runCapability(spec, request, reply),
      });
      // A browser asks before it sends a capability from another origin (a brand's checkout page, a
      // merchant's own page): the answer allows exactly what an upload needs.
      app.route({
        method: 'OPTIONS',
        url: spec.url,
        handler: async (_request, reply) => {
          allowCapabilityCors(reply);
          return reply
            .code(204)
            .header('Access-Control-Allow-Methods', 'POST')
            .header('Access-Control-Allow-Headers', 'Authorization, Idempotency-Key, Content-Type')
            .header('Access-Control-Max-Age', '600')
            .send();
        },
      });
    },
    public(spec) {
      catalogue.push({ kind: 'public', method: spec.method, url: spec.url, documentation: { ...documentationFields(spec), query: spec.query } });
      remember(spec.method, spec.url);
      app.route({ method: spec.method, url: spec.url, handler: (request, reply) => runPublic(spec, request, reply) });
    },
  };

  async function runMerchant<B extends z.ZodType | undefined, Q extends z.ZodType | undefined>(
    spec: MerchantRouteSpec<B, Q>,
    request: RateAwareRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply> {
    // Shed before anything else is spent on the request, authentication included.
    shedIfOverloaded(spec.load_class ?? (spec.method === 'GET' ? 'read' : 'write'));
    refuseGetBody(request);
    refuseRepeatedHeaders(request);
    const params = checkedParams(request);
    const identified = await identifyMerchantRequest(deps, request);
    const rawBody = await bodies.buffer(request, reply, jsonLimits);
    const bucket = spec.method === 'POST' ? BUCKETS.pay_write : BUCKETS.pay_read;
    // What needs no database is decided before the admission statement, so that one round trip counts
    // every bucket of the request and reads its test clock. A refusal found here is thrown only after
    // the admission, in the order the checks had when each was its own step: authentication, the key's
    // bucket, the Idempotency-Key, the body, the further buckets, the test clock.
    let body: never = undefined as never;
    let query: never = undefined as never;
    let decoded: unknown;
    let refusal: unknown = null;
    const { context, bucket: keyBucket, extra_buckets, attachments } = await authenticateMerchant(deps, request, identified, rawBody, spec.scope, bucket, (context) => {
      const attached = spec.outside_test_clock ? null : deps.testClocks.attachedScopePart(accountOfContext(context));
      try {
        if (spec.method === 'POST' && !context.idempotency_key) throw new ApiError('idempotency_key_required');
        if (context.idempotency_key !== null && !IDEMPOTENCY_KEY_PATTERN.test(context.idempotency_key)) {
          throw new ApiError('validation_error', {
            details: { fields: [{ path: 'Idempotency-Key', reason: 'invalid_format', hint: '1 to 255 printable ASCII characters' }] },
          });
        }
        decoded = parseJsonBody(request, rawBody);
        body = (spec.body ? parseOrThrow(spec.body, decoded) : decoded === undefined ? undefined : parseOrThrow(noBodySchema, decoded)) as never;
        query = (spec.query ? parseOrThrow(spec.query, parseQuery(request.raw.url ?? '')) : parseOrThrow(noQuerySchema, parseQuery(request.raw.url ?? ''))) as never;
      } catch (error) {
        refusal = error;
        return { buckets: [], attachments: attached ? [attached] : [] };
      }
      return { buckets: spec.extraBuckets?.(body, context) ?? [], attachments: attached ? [attached] : [] };
    });
    if (isExceeded(keyBucket)) throw rateLimitedError(keyBucket);
    if (refusal !== null) return refuseUnderKey(request, reply, context, refusal, decoded === undefined && rawBody.length > 0 ? { unparsed_body_sha256: sha256Hex(rawBody) } : decoded);

    const decisive = decisiveBucket([keyBucket, ...extra_buckets]) ?? keyBucket;
    request.rateState = decisive;
    if (isExceeded(decisive)) throw rateLimitedError(decisive);

    // A sandbox with a test clock attached works in the clock's time. Authentication (PG-Timestamp), rate
    // windows and the idempotency record above and around stay in real time; the handler, and every
    // service it calls, runs in the clock's scope. Writes wait while the clock advances, so that nothing
    // is created at a time the advance has already passed. Live requests never look (attachedScopePart).
    const attached = (attachments[0] ?? null) as AttachedClock | null;
    if (attached?.advancing && spec.method === 'POST') {
      throw new ApiError('test_clock_advancing', { retry_after_seconds: 1, details: { test_clock_id: attached.scope.test_clock_id } });
    }
    const clockScope = attached?.scope ?? null;

    if (spec.method === 'GET') {
      const handler = spec.handler;
      invariant(handler, 'a GET route has a handler');
      const outcome = await inTestClock(clockScope, () => handler({ context, db: deps.database, body, query, params }));
      return sendOutcome(request, reply, outcome);
    }
    const command = commandOf(spec, { context, body, query, params });
    return runUnderKey(request, reply, context, decoded, { reads: command.reads, run: (tx, answers) => inTestClock(clockScope, () => command.run(tx, answers)) });
  }

  /** A merchant write run once per `Idempotency-Key` (spec, Common request rules 2), its answer stored or replayed. */
  async function runUnderKey(
    request: RateAwareRequest,
    reply: FastifyReply,
    context: MerchantContext,
    decoded: unknown,
    command: { reads: readonly ReadPart<unknown>[]; run: (tx: Queryable, answers: readonly unknown[]) => Promise<{ status: number; body: unknown; headers?: Record<string, string> }> },
  ): Promise<FastifyReply> {
    const path = (request.raw.url ?? '').split('?')[0] ?? '';
    const stored = await deps.idempotency.execute(
      { white_label_id: context.white_label_id, merchant_id: context.merchant_id, livemode: context.livemode, idempotency_key: context.idempotency_key as string },
      { fingerprint: requestFingerprint(request.method, path, decoded), request_id: request.id },
      command.run,
      command.reads,
    );
    await ensureRateHeaders(request, reply);
    for (const [name, value] of Object.entries(stored.headers)) reply.header(name, value);
    if (stored.replayed) reply.header('Idempotent-Replay', 'true');
    return sendJson(reply, stored.status, stored.body_text);
  }

  /**
   * A merchant POST refused before its command ran (its body or query did not parse): with a valid
   * `Idempotency-Key`, the refusal goes through the key like a command's own, so that the key keeps it (spec,
   * Common request rules 2: only a 429 leaves the key unused), and a key that holds an answer already replays
   * it, or answers 409 `idempotency_key_reused` for another body. `fingerprinted` is the body as parsed, or the
   * digest of bytes that did not parse.
   */
  async function refuseUnderKey(request: RateAwareRequest, reply: FastifyReply, context: MerchantContext, refusal: unknown, fingerprinted: unknown): Promise<FastifyReply> {
    const key = context.idempotency_key;
    if (request.method !== 'POST' || !(refusal instanceof ApiError) || key === null || !IDEMPOTENCY_KEY_PATTERN.test(key)) throw refusal;
    return runUnderKey(request, reply, context, fingerprinted, { reads: [], run: () => Promise.reject(refusal) });
  }

  async function authenticateBackoffice(request: FastifyRequest, roles: readonly string[]): Promise<BackofficeContext> {
    const token = bearerToken(request);
    if (!token) throw new ApiError('api_key_invalid');
    if (token.startsWith('sk_')) {
      // An integration key never reaches the back office, however valid it is.
      const key = await deps.callers.resolveApiKey(token);
      throw new ApiError(key ? 'scope_denied' : 'api_key_invalid');
    }
    if (!/^bo_[A-Za-z0-9_-]{16,128}$/.test(token)) throw new ApiError('api_key_invalid');
    const credential = await deps.callers.resolveBackofficeToken(token);
    if (!credential) throw new ApiError('api_key_invalid');
    if (credential.status === 'revoked') throw new ApiError('api_key_revoked');
    if (credential.status !== 'active' || (credential.brand_status !== null && credential.brand_status !== 'active')) {
      throw new ApiError('tenant_suspended');
    }
    if (!roles.includes(credential.role)) throw new ApiError('scope_denied');
    const idempotencyKey = request.headers['idempotency-key'];
    if (idempotencyKey !== undefined && (typeof idempotencyKey !== 'string' || !IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey))) {
      throw new ApiError('validation_error', {
        details: { fields: [{ path: 'Idempotency-Key', reason: 'invalid_format', hint: '1 to 255 printable ASCII characters' }] },
      });
    }
    return {
      request_id: request.id,
      credential_id: credential.credential_id,
      role: credential.role,
      white_label_id: credential.white_label_id,
      idempotency_key: idempotencyKey ?? null,
    };
  }

  async function runBackoffice<B extends z.ZodType | undefined, Q extends z.ZodType | undefined>(
    spec: BackofficeRouteSpec<B, Q>,
    request: RateAwareRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply> {
    refuseGetBody(request);
    refuseRepeatedHeaders(request);
    const params = checkedParams(request);
    const context = await authenticateBackoffice(request, spec.roles);
    request.rateState = await countBucket(BUCKETS.backoffice, context.white_label_id ?? '', context.credential_id);
    if (isExceeded(request.rateState)) throw rateLimitedError(request.rateState);
    const decoded = parseJsonBody(request, await bodies.buffer(request, reply, jsonLimits));
    const body = (spec.body ? parseOrThrow(spec.body, decoded ?? {}) : decoded === undefined ? undefined : parseOrThrow(noBodySchema, decoded)) as never;
    const query = parseOrThrow(spec.query ?? noQuerySchema, parseQuery(request.raw.url ?? '')) as never;
    const outcome = await spec.handler({ context, body, query, params });
    return sendOutcome(request, reply, outcome);
  }

  /**
   * A route authenticated by an order's slip capability (spec, Slip upload capability): merchant
   * credentials are refused before the token is looked at; the token is verified against the exact
   * address the request came to; the rate bucket is the token's `rate_subject` plus the client IP;
   * then the Idempotency-Key. The body stays raw bytes for the route to parse.
   */
  async function runCapability<Claims extends CapabilityClaims>(spec: CapabilityRouteSpec<Claims>, request: RateAwareRequest, reply: FastifyReply): Promise<FastifyReply> {
    refuseRepeatedHeaders(request);
    const params = checkedParams(request);
    const carriesMerchantCredentials =
      MERCHANT_SIGNING_HEADERS.some((name) => request.headers[name] !== undefined) || /^Bearer sk_/i.test(String(request.headers.authorization ?? ''));
    if (carriesMerchantCredentials) {
      throw new ApiError('scope_denied', {
        message: 'Slip upload authenticates with the slip_upload token only; a merchant API key or PG-* signing header is refused here.',
        details: { reason: 'merchant_credentials_not_accepted' },
      });
    }
    const token = capabilityToken(request, deps.capabilities.max_token_length);
    if (token === null) throw new ApiError('slip_token_invalid');
    const address = requestAddress(request);
    const verifyAt = (scope: TestClockScope | null, url: string) =>
      inTestClock(scope, () => deps.capabilities.verify(token, { url, deposit_id: params.id ?? '', now: deps.clock.now() }));
    let verified = address === null ? null : verifyAt(null, spec.capability_address(address));
    // An order created under a sandbox test clock stays on it: once the signature holds (the token passed,
    // or failed only on its times, which are checked after it), the capability is judged again at the
    // order's clock time, and its slip or claim is taken at that time. The rate bucket stays in real time.
    let clockScope: TestClockScope | null = null;
    if (address !== null && verified && (verified.ok || verified.reason === 'expired' || verified.reason === 'not_yet_valid')) {
      clockScope = await deps.testClocks.scopeOfCapability(deps.database, token, params.id ?? '');
      if (clockScope) verified = verifyAt(clockScope, spec.capability_address(address));
    }
    if (!verified || !verified.ok) throw new ApiError(verified?.ok === false && verified.reason === 'expired' ? 'slip_token_expired' : 'slip_token_invalid');
    const claims = verified.claims;
    request.rateState = await countBucket(BUCKETS.slip_upload, claims.wl, `${claims.rate_subject}:${request.ip}`);
    if (isExceeded(request.rateState)) throw rateLimitedError(request.rateState);
    const idempotencyKey = request.headers['idempotency-key'];
    if (typeof idempotencyKey !== 'string' || idempotencyKey === '') throw new ApiError('idempotency_key_required');
    if (!IDEMPOTENCY_KEY_PATTERN.test(idempotencyKey)) {
      throw new ApiError('validation_error', {
        details: { fields: [{ path: 'Idempotency-Key', reason: 'invalid_format', hint: '1 to 255 printable ASCII characters' }] },
      });
    }
    const limits: BodyLimits = { max_bytes: spec.body_limit_bytes, deadline_ms: spec.body_deadline_ms };
    const outcome = await inTestClock(clockScope, () =>
      spec.handler({
        // The verifier and the capability routes are the same module's (slips), so its claims are the routes' `Claims`.
        context: { request_id: request.id, claims: claims as Claims, idempotency_key: idempotencyKey, path: (request.raw.url ?? '').split('?')[0] ?? '' },
        body: { buffer: () => bodies.buffer(request, reply, limits), stream: (sink) => bodies.stream(request, reply, limits, sink) },
        content_type: request.headers['content-type'],
        params,
      }),
    );
    return sendOutcome(request, reply, outcome);
  }

  /**
   * The address the request came to, byte for byte as a capability names it: the scheme of the
   * advertised upload address (TLS ends before the service in a real deployment), the Host header as the
   * client sent it, and the raw path and query. Null without a Host header.
   */
  function requestAddress(request: FastifyRequest): string | null {
    const host = request.headers.host;
    if (typeof host !== 'string' || host === '' || /[\s/@]/.test(host)) return null;
    const scheme = new URL(deps.uploadBaseUrl()).protocol;
    return `${scheme}//${host}${request.raw.url ?? ''}`;
  }

  async function runPublic<Q extends z.ZodType | undefined>(spec: PublicRouteSpec<Q>, request: RateAwareRequest, reply: FastifyReply) {
    // Public routes are reads (a QR image of an order being paid, signing keys): shed last.
    shedIfOverloaded('read');
    refuseGetBody(request);
    refuseRepeatedHeaders(request);
    const params = checkedParams(request);
    // A query that does not parse is no valid link: it counts in the caller's address's bucket.
    let query: never;
    try {
      query = parseOrThrow(spec.query ?? noQuerySchema, parseQuery(request.raw.url ?? '')) as never;
    } catch (error) {
      request.rateState = await countPublic(request);
      throw error;
    }
    const link = spec.link_subject?.({ query, params }) ?? null;
    request.rateState = link ? await countBucket(BUCKETS.public_link, link.white_label_id, link.subject) : await countPublic(request);
    if (isExceeded(request.rateState)) throw rateLimitedError(request.rateState);
    const outcome = await spec.handler({ request_id: request.id, query, params });
    return sendOutcome(request, reply, outcome);
  }

  async function sendOutcome(request: RateAwareRequest, reply: FastifyReply, outcome: RouteOutcome) {
    await ensureRateHeaders(request, reply);
    if (outcome.headers) for (const [name, value] of Object.entries(outcome.headers)) reply.header(name, value);
    // A binary answer (an image) goes out as it is, with the media type its route named.
    if (outcome.binary) return reply.code(outcome.status).header('content-type', outcome.binary.content_type).send(outcome.binary.bytes);
    return sendJson(reply, outcome.status, JSON.stringify(outcome.body));
  }

  for (const register of modules) register(registrar);

  app.decorate('markShuttingDown', () => {
    shuttingDown = true;
  });
  return app;
}
