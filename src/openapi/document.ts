import { z } from 'zod';
import { codeToStatus, errorBodySchema, type ErrorCode } from '../platform/errors.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import type { ApiRoute, RouteDocumentation } from '../http/server.ts';
import type { ResponseDocumentation } from '../http/context.ts';

/**
 * The OpenAPI 3.1 document, generated from the route catalogue (`apiRoutesOf`): every route's request
 * schemas are the zod schemas its pipeline validates with, and its answers are the zod schemas it
 * declares beside its handler (`responses`, `errors`). Nothing here is written by hand but the prose
 * and the security schemes. Schemas that carry a zod `id` (`.meta({ id })`, one per resource) become
 * `components.schemas` entries and are referenced everywhere else.
 *
 * The document describes exactly what this version sends: response objects allow no other properties,
 * and the test harness validates every answer of the test suite against it (test/support/contract.ts).
 */

export type JsonSchema = Record<string, unknown>;

export interface OpenApiOperation {
  operationId: string;
  summary?: string;
  description?: string;
  tags: string[];
  security: Record<string, string[]>[];
  parameters?: JsonSchema[];
  requestBody?: JsonSchema;
  responses: Record<string, { description: string; headers?: Record<string, JsonSchema>; content?: Record<string, { schema: JsonSchema }> }>;
  [extension: `x-${string}`]: unknown;
}

export interface OpenApiDocument {
  openapi: '3.1.0';
  info: { title: string; version: string; description: string };
  servers?: { url: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, OpenApiOperation>>;
  components: {
    schemas: Record<string, JsonSchema>;
    securitySchemes: Record<string, JsonSchema>;
    parameters: Record<string, JsonSchema>;
    headers: Record<string, JsonSchema & { required?: boolean }>;
  };
}

/** The OpenAPI path of a route pattern: `/v1/pay/deposits/:id` is `/v1/pay/deposits/{id}`. */
export function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

const RATE_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy', 'X-RateLimit-Scope', 'Retry-After'] as const;

const HEADERS: OpenApiDocument['components']['headers'] = {
  'Request-Id': { description: 'The request id (`req_…`); equals `error.request_id` of an error body. Log it always.', required: true, schema: { type: 'string' } },
  'RateLimit-Limit': { description: "The limit of the request's decisive rate bucket.", required: true, schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the current window.', required: true, schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', required: true, schema: { type: 'integer' } },
  'RateLimit-Policy': { description: 'The bucket as `limit;w=window_seconds`, for example `600;w=60`.', required: true, schema: { type: 'string' } },
  'X-RateLimit-Scope': { description: 'What one counter of the bucket stands for.', required: true, schema: { type: 'string', enum: ['api_key', 'user', 'merchant', 'ip', 'credential'] } },
  'Retry-After': { description: 'Seconds to wait before retrying: 0 unless the bucket is exceeded. Honour it with about 20 % jitter.', required: true, schema: { type: 'integer' } },
  'Idempotent-Replay': { description: 'Present (`true`) when this is the stored answer of an earlier request with the same `Idempotency-Key`.', schema: { type: 'string', const: 'true' } },
};

const SECURITY_SCHEMES: OpenApiDocument['components']['securitySchemes'] = {
  merchant_key: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'sk_test_… (sandbox) or sk_live_… (live)',
    description: 'The merchant API key, `Authorization: Bearer <API_KEY>`. Always together with `merchant_signature` and the PG-Timestamp, PG-Nonce and PG-Version headers.',
  },
  merchant_signature: {
    type: 'apiKey',
    in: 'header',
    name: 'PG-Signature',
    description: [
      '`v1=` followed by the lowercase hex HMAC-SHA256, keyed with the signing secret, of the canonical string: nine lines, each ending in `\\n`:',
      '`v1`, PG-Timestamp, PG-Nonce, the method in upper case, the path, the query string sorted (empty if none),',
      'the lowercase hex SHA-256 of the body bytes (of the empty string without a body), the Idempotency-Key (empty line when none), the PG-Version value.',
      'Every retry signs again with a new nonce and timestamp and the same Idempotency-Key. Test vectors: GET /v1/webhooks/test-vectors (`api_request_vectors`).',
    ].join(' '),
  },
  backoffice_token: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'bo_…',
    description: 'A back-office credential of the platform administrator, a brand operator or a reviewer. Integration keys never reach `/v1/bo/*`.',
  },
  slip_capability: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'Ed25519 capability (slip_upload.token)',
    description: 'The per-order slip upload capability from `slip_upload.token`. The request must not carry the merchant API key or any PG-* signing header.',
  },
};

const PARAMETERS: OpenApiDocument['components']['parameters'] = {
  pg_timestamp: { name: 'PG-Timestamp', in: 'header', required: true, description: 'Unix seconds; at most 300 seconds from true time.', schema: { type: 'string', pattern: '^[0-9]{1,12}$' } },
  pg_nonce: { name: 'PG-Nonce', in: 'header', required: true, description: 'New on every attempt; never repeated within 10 minutes.', schema: { type: 'string', minLength: 1 } },
  pg_version: { name: 'PG-Version', in: 'header', required: true, description: 'The pinned API version; part of the signed canonical string.', schema: { type: 'string', example: CURRENT_API_VERSION } },
  idempotency_key: {
    name: 'Idempotency-Key',
    in: 'header',
    required: true,
    description: 'Required on every POST: the same key with the same body answers the original response (`Idempotent-Replay: true`); with another body, 409 `idempotency_key_reused`. Kept 7 days.',
    schema: { type: 'string', pattern: '^[\\x20-\\x7e]{1,255}$' },
  },
  idempotency_key_optional: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description: 'Optional on back-office writes: decisions use it to tell a retried request from a second decision.',
    schema: { type: 'string', pattern: '^[\\x20-\\x7e]{1,255}$' },
  },
};

const TAGS: OpenApiDocument['tags'] = [
  { name: 'Merchant API', description: 'Signed merchant requests (`/v1/pay/*`): HMAC-SHA256 with the API key and its signing secret.' },
  { name: 'Slip capability', description: "Routes authenticated by an order's slip upload capability only: the slip itself, and the late-slip claim at `claim_url`." },
  { name: 'Sandbox', description: 'Test-mode helpers (`/v1/test/*`): a live key gets 404 `resource_not_found`, as for an unknown path.' },
  { name: 'Public', description: 'No credentials: webhook signing keys, test vectors, QR images behind a signed link, and this document.' },
  { name: 'Back office', description: 'Brand administration and the review desk (`/v1/bo/*`), with a back-office bearer credential. Not part of a normal merchant integration.' },
];

const DESCRIPTION = [
  'Bank-transfer payments for Thai merchants: deposits, withdrawals, wallet and webhooks. Amounts are integers in satang (`*_minor`); timestamps are RFC 3339 UTC with 3 millisecond digits.',
  '',
  '**Authentication.** Merchant requests carry `Authorization: Bearer <API_KEY>`, `PG-Timestamp`, `PG-Nonce`, `PG-Version` and `PG-Signature` (see the `merchant_signature` scheme), and `Idempotency-Key` on every POST. Slip intake authenticates with the order\'s capability only. Back-office routes take a back-office bearer credential.',
  '',
  '**Errors.** Every non-2xx answer has the `error` body; branch on `error.code` only, and honour `retryable` and `retry_after_seconds`. Each operation lists the codes it can answer with, by HTTP status; keep a default branch, since a later version may add codes.',
  '',
  '**Headers.** Every answer carries `Request-Id`; every answer under `/v1/`, errors included, carries the six rate headers (`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, `RateLimit-Policy`, `X-RateLimit-Scope`, `Retry-After`).',
  '',
  'Webhooks are signed with Ed25519 (`X-PG-Signature: v1,kid=…,t=…,s=…` over `v1.<t>.<event_id>.` and the raw body); keys at GET /v1/webhooks/signing-keys. Their body is the `event` schema.',
].join('\n');

/** The codes the shared pipeline of a route can answer with, before its handler runs or around it. */
export function pipelineErrorCodes(route: ApiRoute): ErrorCode[] {
  // Slip intake and the back office are never shed; merchant and public routes are (503 service_unavailable).
  // Every route: a repeated single header and a GET with a body are validation errors; any request can be rate limited or fail.
  const codes: ErrorCode[] = ['validation_error', 'rate_limited', 'internal_error'];
  // A path id that names nothing (or is not storable text) is not found.
  if (route.url.includes(':')) codes.push('resource_not_found');
  const writes = route.method !== 'GET';
  // A body is read under a deadline and a pace (408), and one cut off before its length is a framing fault (400).
  if (writes) codes.push('request_timeout', 'malformed_request');
  switch (route.kind) {
    case 'merchant':
      // Load shedding (src/ops/load-shedding.ts) refuses merchant requests before anything else when overloaded.
      codes.push('service_unavailable');
      codes.push('api_key_invalid', 'signature_invalid', 'timestamp_out_of_window', 'nonce_replayed', 'api_key_revoked', 'tenant_suspended', 'scope_denied', 'api_version_unsupported');
      if (writes) {
        codes.push('idempotency_key_required', 'idempotency_key_reused', 'idempotency_in_flight', 'malformed_json', 'unsupported_media_type', 'request_too_large');
        if (!route.documentation.outside_test_clock) codes.push('test_clock_advancing');
      }
      break;
    case 'backoffice':
      codes.push('api_key_invalid', 'api_key_revoked', 'tenant_suspended', 'scope_denied');
      // A body that does not fit the process's budget for buffered bodies is a retryable 503.
      if (writes) codes.push('malformed_json', 'unsupported_media_type', 'request_too_large', 'service_unavailable');
      break;
    case 'capability':
      codes.push('scope_denied', 'slip_token_invalid', 'slip_token_expired', 'idempotency_key_required');
      break;
    case 'public':
      // Public routes are shed last, as reads.
      codes.push('service_unavailable');
      break;
  }
  return codes;
}

/** Every code a route can answer with: its pipeline's and its own, in catalogue order per status. */
export function errorCodesOf(route: ApiRoute): ErrorCode[] {
  return [...new Set([...pipelineErrorCodes(route), ...(route.documentation.errors ?? [])])];
}

/** Collects the named schemas (`.meta({ id })`) of every conversion into one components section. */
class SchemaCollector {
  readonly components: Record<string, JsonSchema> = {};
  private readonly texts = new Map<string, string>();

  convert(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
    const converted = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema;
    const { $schema: _dialect, $defs, ...rest } = converted;
    for (const [id, definition] of Object.entries(($defs ?? {}) as Record<string, JsonSchema>)) {
      const rewritten = rewriteRefs(definition) as JsonSchema;
      const text = JSON.stringify(rewritten);
      const known = this.texts.get(id);
      // One id is one schema: two different schemas under one id would make every reference ambiguous.
      if (known !== undefined && known !== text) throw new Error(`the schema id "${id}" names two different schemas (is it used in a request and a response?)`);
      this.texts.set(id, text);
      this.components[id] = rewritten;
    }
    return rewriteRefs(rest) as JsonSchema;
  }
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== 'object') return value;
  const result: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    result[key] = key === '$ref' && typeof item === 'string' ? item.replace(/^#\/\$defs\//, '#/components/schemas/') : rewriteRefs(item);
  }
  return result;
}

function tagOf(route: ApiRoute): string {
  if (route.kind === 'capability') return 'Slip capability';
  if (route.kind === 'public') return 'Public';
  if (route.url.startsWith('/v1/bo/')) return 'Back office';
  if (route.url.startsWith('/v1/test/')) return 'Sandbox';
  return 'Merchant API';
}

function operationIdOf(route: ApiRoute): string {
  return `${route.method.toLowerCase()}_${route.url.replace(/^\//, '').replace(/:/g, '').replace(/[^A-Za-z0-9]+/g, '_')}`;
}

function securityOf(route: ApiRoute): Record<string, string[]>[] {
  switch (route.kind) {
    case 'merchant':
      return [{ merchant_key: [], merchant_signature: [] }];
    case 'backoffice':
      return [{ backoffice_token: [] }];
    case 'capability':
      return [{ slip_capability: [] }];
    case 'public':
      return [];
  }
}

function guardOf(route: ApiRoute): string {
  switch (route.kind) {
    case 'merchant':
      return `Merchant key with scope \`${route.scope}\`.`;
    case 'backoffice':
      return `Back-office roles: ${route.roles.map((role) => `\`${role}\``).join(', ')}.`;
    case 'capability':
      return "The order's slip upload capability.";
    case 'public':
      return 'No credentials.';
  }
}

/** Query parameters from a query schema: one parameter per property of its object. */
function queryParameters(collector: SchemaCollector, query: z.ZodType | undefined): JsonSchema[] {
  if (!query) return [];
  const converted = collector.convert(query, 'input');
  const properties = (converted.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((converted.required ?? []) as string[]);
  return Object.entries(properties).map(([name, schema]) => {
    const { description, ...rest } = schema;
    return { name, in: 'query', required: required.has(name), ...(description ? { description } : {}), schema: rest };
  });
}

function successResponse(collector: SchemaCollector, route: ApiRoute, documented: ResponseDocumentation) {
  const headers: Record<string, JsonSchema> = { 'Request-Id': { $ref: '#/components/headers/Request-Id' } };
  if (route.url.startsWith('/v1/')) for (const name of RATE_HEADERS) headers[name] = { $ref: `#/components/headers/${name}` };
  if (route.method !== 'GET') headers['Idempotent-Replay'] = { $ref: '#/components/headers/Idempotent-Replay' };
  if (documented.cache_control !== undefined) headers['Cache-Control'] = { required: true, schema: { type: 'string', const: documented.cache_control } };
  let content: Record<string, { schema: JsonSchema }> | undefined;
  if (documented.schema) content = { 'application/json': { schema: collector.convert(documented.schema, 'output') } };
  else if (documented.binary) content = Object.fromEntries(documented.binary.map((type) => [type, { schema: { type: 'string', contentMediaType: type } }]));
  return { description: documented.description, headers, ...(content ? { content } : {}) };
}

function errorResponses(route: ApiRoute): OpenApiOperation['responses'] {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(route)) {
    const status = codeToStatus(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  // The rate headers of error answers are stated once, in the document's description, to keep the document small.
  const headers: Record<string, JsonSchema> = { 'Request-Id': { $ref: '#/components/headers/Request-Id' } };
  const responses: OpenApiOperation['responses'] = {};
  for (const status of [...byStatus.keys()].sort((left, right) => left - right)) {
    const codes = byStatus.get(status) ?? [];
    responses[String(status)] = {
      description: `Error: ${codes.map((code) => `\`${code}\``).join(', ')}.`,
      headers,
      content: {
        'application/json': {
          schema: {
            allOf: [
              { $ref: '#/components/schemas/error' },
              { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: codes } } } } },
            ],
          },
        },
      },
    };
  }
  return responses;
}

function requestBodyOf(collector: SchemaCollector, route: ApiRoute, documentation: RouteDocumentation): JsonSchema | undefined {
  if (documentation.content) {
    const content = Object.fromEntries(Object.entries(documentation.content).map(([type, schema]) => [type, { schema: collector.convert(schema, 'input') }]));
    return { required: true, content };
  }
  if (!documentation.body) return undefined;
  const schema = collector.convert(documentation.body, 'input');
  // A body-less request is read as `{}` by back-office routes, so a body whose fields are all optional may be left out.
  const required = route.kind !== 'backoffice' || ((schema.required ?? []) as string[]).length > 0;
  return { required, content: { 'application/json': { schema } } };
}

function operationOf(collector: SchemaCollector, route: ApiRoute): OpenApiOperation {
  const documentation = route.documentation;
  const parameters: JsonSchema[] = [...route.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => ({ name: match[1], in: 'path', required: true, schema: { type: 'string' } }));
  parameters.push(...queryParameters(collector, documentation.query));
  if (route.kind === 'merchant') {
    parameters.push({ $ref: '#/components/parameters/pg_timestamp' }, { $ref: '#/components/parameters/pg_nonce' }, { $ref: '#/components/parameters/pg_version' });
  }
  if (route.method === 'POST' && (route.kind === 'merchant' || route.kind === 'capability')) parameters.push({ $ref: '#/components/parameters/idempotency_key' });
  if (route.method !== 'GET' && route.kind === 'backoffice') parameters.push({ $ref: '#/components/parameters/idempotency_key_optional' });
  const responses: OpenApiOperation['responses'] = {};
  for (const [status, documented] of Object.entries(documentation.responses ?? {})) {
    if (documented) responses[status] = successResponse(collector, route, documented);
  }
  Object.assign(responses, errorResponses(route));
  const requestBody = requestBodyOf(collector, route, documentation);
  return {
    operationId: operationIdOf(route),
    ...(documentation.summary ? { summary: documentation.summary } : {}),
    description: guardOf(route),
    tags: [tagOf(route)],
    security: securityOf(route),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses,
    ...(route.kind === 'merchant' ? { 'x-scope': route.scope } : {}),
    ...(route.kind === 'backoffice' ? { 'x-roles': [...route.roles] } : {}),
  };
}

/**
 * The document of a route catalogue. Routes without declared `responses` (test-only routes) are left
 * out; the contract test proves that every route of the service declares them.
 */
export function buildOpenApiDocument(routes: readonly ApiRoute[]): OpenApiDocument {
  const collector = new SchemaCollector();
  // The error body first, so that its component exists whatever the routes are.
  collector.convert(errorBodySchema, 'output');
  const paths: OpenApiDocument['paths'] = {};
  for (const route of routes) {
    if (!route.documentation.responses) continue;
    const path = openApiPath(route.url);
    paths[path] = { ...(paths[path] ?? {}), [route.method.toLowerCase()]: operationOf(collector, route) };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Payment Transfer Service API', version: CURRENT_API_VERSION, description: DESCRIPTION },
    tags: TAGS,
    paths,
    components: { schemas: collector.components, securitySchemes: SECURITY_SCHEMES, parameters: PARAMETERS, headers: HEADERS },
  };
}

/** The answer of GET /openapi.json, loosely: the document's own rules are OpenAPI 3.1's. */
export const openApiDocumentSchema = z
  .looseObject({
    openapi: z.literal('3.1.0'),
    info: z.looseObject({ title: z.string(), version: z.string() }),
    paths: z.record(z.string(), z.unknown()),
    components: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'openapi_document' });
