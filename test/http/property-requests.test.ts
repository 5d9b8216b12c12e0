import type { CursorFilters } from '../../src/events/routes.ts';
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { z } from 'zod';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { createTestApp, TEST_START, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { codeToStatus, ERROR_CODES, type ErrorCode } from '../../src/platform/errors.ts';
import { canonicalJson } from '../../src/platform/fingerprint.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { JSON_BODY_LIMIT_BYTES } from '../../src/http/server.ts';
import type { RouteModule } from '../../src/http/context.ts';
import { BUCKETS } from '../../src/http/rate-limit.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { Actor, ApiKeyScope } from '../../src/platform/access.ts';
import { hasDuplicateKeyByTokens } from '../support/json-oracle.ts';
import {
  anyText,
  asHeaderValue,
  encodeQueryText,
  encoding,
  headerValue,
  hexText,
  jsonText,
  numberLiteral,
  pathJunk,
  percentEncodeAll,
  pollutedJson,
  queryJunk,
  tokenText,
  type Encoding,
} from '../support/arbitraries.ts';

/**
 * Property tests of the HTTP pipeline: random and malformed input thrown at the routes. For every
 * response: never 5xx; every non-2xx body is exactly the catalogue error shape with the status of its
 * code and the request id of its Request-Id header; every /v1/ response carries the six rate headers;
 * and no business row changes unless the model says it must (request_nonces and rate_limit_counters
 * are expected to change). Each property also checks its own oracle of which code is right.
 *
 * A property stops at its first counterexample, so the bugs the properties found are also pinned one
 * by one in "regressions found by the properties" at the end of the file: each fails until fixed.
 */

const TEST_ROUTE = '/v1/pay/test-writes';
const TEST_ROUTE_ALT = '/v1/pay/test-writes-alt';
const API_VERSION = '2026-08-01';
const MINUTE = 60_000;

const RATE_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-ratelimit-scope', 'retry-after'] as const;
const RATE_SCOPES = new Set<string>(Object.values(BUCKETS).map((bucket) => bucket.scope));
const ERROR_KEYS = ['code', 'details', 'message', 'message_th', 'request_id', 'retry_after_seconds', 'retryable', 'type'];
const ERROR_TYPES = new Set(['invalid_request_error', 'authentication_error', 'permission_error', 'idempotency_error', 'rate_limit_error', 'api_error']);
const AUTH_CODES: readonly ErrorCode[] = [
  'api_key_invalid', 'signature_invalid', 'api_version_unsupported', 'timestamp_out_of_window', 'nonce_replayed', 'api_key_revoked',
  'tenant_suspended', 'scope_denied',
];

// ---------------------------------------------------------------------------------------------------
// The test-only write route.

const testWriteBody = z.object({ amount_minor: z.number().int().positive(), note: z.string().max(50) }).strict();

const testWriteModule: RouteModule = (registrar) => {
  for (const url of [TEST_ROUTE, TEST_ROUTE_ALT]) {
    registrar.merchant({
      method: 'POST',
      url,
      scope: 'pay:write',
      body: testWriteBody,
      handler: async ({ body, context }) => {
        // A fresh id per execution makes a re-execution (instead of a replay) visible.
        const id = crypto.randomUUID();
        return {
          status: 201,
          body: { object: 'test_write', id, request_id: context.request_id, amount_minor: body.amount_minor, note: body.note },
          headers: { Location: `${url}/${id}` },
        };
      },
    });
  }
};

// ---------------------------------------------------------------------------------------------------
// The world: credentials in every state, seeded events and real cursors.

type KeyName = 'sandbox' | 'read_only' | 'revoked' | 'suspended_key' | 'suspended_merchant' | 'suspended_brand' | 'live';
const KEY_NAMES: readonly KeyName[] = ['sandbox', 'read_only', 'revoked', 'suspended_key', 'suspended_merchant', 'suspended_brand', 'live'];
const KEY_SCOPES: Record<KeyName, readonly ApiKeyScope[]> = {
  sandbox: ['pay:read', 'pay:write', 'events:read'],
  read_only: ['pay:read'],
  revoked: ['pay:read', 'pay:write', 'events:read'],
  suspended_key: ['pay:read', 'pay:write', 'events:read'],
  suspended_merchant: ['pay:read', 'pay:write', 'events:read'],
  suspended_brand: ['pay:read', 'pay:write', 'events:read'],
  live: ['pay:read', 'pay:write', 'events:read'],
};
type TokenName = 'admin' | 'operator' | 'reviewer' | 'revoked' | 'suspended_brand_operator';

interface SeededEvent {
  sequence: number;
  type: string;
  status: string;
  created_ms: number;
}


interface RealCursor {
  text: string;
  filters: CursorFilters;
  /** The query (without limit and cursor) that produced it. */
  query: Record<string, string>;
}

let t: TestApp;
const keys = {} as Record<KeyName, MerchantCredentials>;
const keyNameByText = new Map<string, KeyName>();
const tokens = {} as Record<TokenName, string>;
const realIds: string[] = [];
const seeded: SeededEvent[] = [];
const realCursors: RealCursor[] = [];

const CURSOR_QUERIES: Array<Record<string, string>> = [
  {},
  { order: 'desc' },
  { type: 'test.created' },
  { status: 'closed', order: 'desc' },
  { from: new Date(Date.parse(TEST_START) + 2 * MINUTE).toISOString(), to: new Date(Date.parse(TEST_START) + 8 * MINUTE).toISOString() },
  { type: 'test.updated', order: 'desc' },
];

beforeAll(async () => {
  t = await createTestApp({ extra_modules: [() => testWriteModule] });
  const tenancy = t.instance.services.tenancy;
  const actor: Actor = { actor_type: 'system', actor_id: 'property-tests', request_id: null };
  const sandbox = t.sandbox;

  async function keyFor(merchant_id: string, white_label_id: string, options: { livemode?: boolean; scopes?: string[] } = {}) {
    const created = await tenancy.createApiKey(actor, {
      merchant_id,
      scope_white_label_id: white_label_id,
      livemode: options.livemode ?? false,
      scopes: options.scopes,
    });
    return { id: created.id, credentials: { white_label_id, merchant_id, api_key: created.api_key, signing_secret: created.signing_secret } };
  }

  keys.sandbox = sandbox;
  keys.read_only = (await keyFor(sandbox.merchant_id, sandbox.white_label_id, { scopes: ['pay:read'] })).credentials;
  const revoked = await keyFor(sandbox.merchant_id, sandbox.white_label_id);
  await tenancy.setApiKeyStatus(actor, revoked.id, null, 'revoked');
  keys.revoked = revoked.credentials;
  const suspended = await keyFor(sandbox.merchant_id, sandbox.white_label_id);
  await tenancy.setApiKeyStatus(actor, suspended.id, null, 'suspended');
  keys.suspended_key = suspended.credentials;
  const otherMerchant = await tenancy.createMerchant(actor, { white_label_id: sandbox.white_label_id, name: 'Suspended Merchant' });
  keys.suspended_merchant = (await keyFor(otherMerchant.id, sandbox.white_label_id)).credentials;
  await tenancy.setMerchantStatus(actor, otherMerchant.id, null, 'suspended');
  const otherBrand = await tenancy.createBrand(actor, { name: 'Suspended Brand' });
  const otherBrandMerchant = await tenancy.createMerchant(actor, { white_label_id: otherBrand.id, name: 'Merchant of a suspended brand' });
  keys.suspended_brand = (await keyFor(otherBrandMerchant.id, otherBrand.id)).credentials;
  tokens.suspended_brand_operator = (
    await tenancy.createBackofficeCredential(actor, { white_label_id: otherBrand.id, role: 'operator', name: 'Operator of a suspended brand' })
  ).token;
  await tenancy.setBrandStatus(actor, otherBrand.id, 'suspended');
  keys.live = (await keyFor(sandbox.merchant_id, sandbox.white_label_id, { livemode: true })).credentials;
  for (const name of KEY_NAMES) keyNameByText.set(keys[name].api_key, name);

  tokens.admin = t.operator_token;
  tokens.operator = (await tenancy.createBackofficeCredential(actor, { white_label_id: sandbox.white_label_id, role: 'operator', name: 'Sandbox operator' })).token;
  tokens.reviewer = (await tenancy.createBackofficeCredential(actor, { white_label_id: sandbox.white_label_id, role: 'reviewer', name: 'Sandbox reviewer' })).token;
  const revokedCredential = await tenancy.createBackofficeCredential(actor, { white_label_id: sandbox.white_label_id, role: 'operator', name: 'Revoked operator' });
  await tenancy.setBackofficeCredentialStatus(actor, revokedCredential.id, null, 'revoked');
  tokens.revoked = revokedCredential.token;
  realIds.push(sandbox.white_label_id, sandbox.merchant_id, otherMerchant.id, otherBrand.id, otherBrandMerchant.id, revoked.id, suspended.id, revokedCredential.id);

  // Events of the sandbox's test mode (the feed under test), plus events it must never show.
  const { database, events } = t.instance.services;
  for (let index = 0; index < 9; index += 1) {
    t.clock.advance(MINUTE);
    const type = index % 2 === 0 ? 'test.created' : 'test.updated';
    const status = index % 3 === 0 ? 'open' : 'closed';
    const envelope = await database.transaction((tx) =>
      events.emitEvent(tx, {
        white_label_id: sandbox.white_label_id,
        merchant_id: sandbox.merchant_id,
        livemode: false,
        type,
        object: { object: 'test_object', id: `tobj_${index}`, status, version: 1 },
        previous_attributes: type === 'test.created' ? null : { version: 0 },
        cause: SYSTEM_CAUSE,
      }),
    );
    seeded.push({ sequence: envelope.sequence, type, status, created_ms: Date.parse(envelope.created_at) });
  }
  for (const [merchant_id, livemode] of [[sandbox.merchant_id, true], [otherMerchant.id, false]] as const) {
    await database.transaction((tx) =>
      events.emitEvent(tx, {
        white_label_id: sandbox.white_label_id,
        merchant_id,
        livemode,
        type: 'test.created',
        object: { object: 'test_object', id: 'tobj_elsewhere', status: 'open', version: 1 },
        previous_attributes: null,
        cause: SYSTEM_CAUSE,
      }),
    );
  }

  t.clock.advance(MINUTE);
  for (const query of CURSOR_QUERIES) {
    const response = await t.signed({ url: `/v1/pay/events?${new URLSearchParams({ ...query, limit: '1' }).toString()}` });
    expect(response.statusCode, response.body).toBe(200);
    const page = response.json() as { next_cursor: string | null };
    if (!page.next_cursor) throw new Error(`no cursor for ${JSON.stringify(query)}`);
    realCursors.push({
      text: page.next_cursor,
      query,
      filters: {
        type: query.type ?? null,
        status: query.status ?? null,
        from: query.from ?? null,
        to: query.to ?? null,
        order: query.order === 'desc' ? 'desc' : 'asc',
      },
    });
  }
}, 60_000);

afterAll(async () => {
  await t?.close();
});

// ---------------------------------------------------------------------------------------------------
// Business rows.

const BUSINESS_TABLES = ['brands', 'merchants', 'api_keys', 'backoffice_credentials', 'events', 'idempotency_records', 'jobs', 'audit_log'] as const;
type BusinessTable = (typeof BUSINESS_TABLES)[number];
type Snapshot = Record<BusinessTable, { count: number; digest: string }>;
type Deltas = Partial<Record<BusinessTable, number>>;

async function snapshot(): Promise<Snapshot> {
  const result = {} as Snapshot;
  for (const table of BUSINESS_TABLES) {
    const { rows } = await t.instance.services.database.query<{ count: number; digest: string }>(
      `SELECT count(*)::int AS count, md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), '')) AS digest FROM ${table} r`,
    );
    result[table] = { count: Number(rows[0]?.count), digest: String(rows[0]?.digest) };
  }
  return result;
}

/** Runs `work`; afterwards every business table is identical, except the row counts `work` declared. */
async function withBusinessRows(work: (deltas: Deltas) => Promise<void>): Promise<void> {
  const before = await snapshot();
  const deltas: Deltas = {};
  await work(deltas);
  const after = await snapshot();
  for (const table of BUSINESS_TABLES) {
    const delta = deltas[table] ?? 0;
    if (delta === 0) expect(after[table], `no row of ${table} may change`).toEqual(before[table]);
    else expect(after[table].count - before[table].count, `rows added to ${table}`).toBe(delta);
  }
}

function addDelta(deltas: Deltas, table: BusinessTable, count = 1): void {
  deltas[table] = (deltas[table] ?? 0) + count;
}

/** Whether an answer is stored under this key now (its keys are fresh per request in these properties). */
async function keyHoldsAnswer(idempotencyKey: string): Promise<boolean> {
  const { rows } = await t.testDatabase.database.query('SELECT 1 FROM idempotency_records WHERE idempotency_key = $1', [idempotencyKey]);
  return rows.length > 0;
}

/**
 * Whether a refused POST leaves its answer under its key (spec, Common request rules 2: only a 429 leaves the key
 * unused): a refusal of the body or the query after authentication, with a well-formed key, does. Refusals before
 * the key is read (no key, a malformed key, a body over the limit) do not. Null when either may hold: a content type
 * that is not a well-formed media type may be refused by the framework before the route, or by the route.
 */
function refusalKeepsKey(exchange: Exchange, idempotencyKey: string | null, contentType: string | null): boolean | null {
  if (idempotencyKey === null || !/^[\x20-\x7e]{1,255}$/.test(idempotencyKey)) return false;
  const code = (exchange.response.json() as { error?: { code?: string } }).error?.code;
  if (code === 'idempotency_key_required' || code === 'request_too_large' || exchange.response.statusCode === 429) return false;
  if (code === 'unsupported_media_type' && mayBeRefusedEarly(contentType)) return null;
  return exchange.response.statusCode >= 400 && exchange.response.statusCode < 500;
}

// ---------------------------------------------------------------------------------------------------
// Sending requests.

interface Exchange {
  method: string;
  url: string;
  response: LightMyRequestResponse;
}

/** The request target exactly as light-my-request will put it on the wire (WHATWG URL normalisation). */
function normaliseTarget(target: string): string {
  const url = new URL(target, 'http://localhost');
  return `${url.pathname}${url.search}`;
}

async function inject(method: string, url: string, headers: Record<string, string>, payload?: Buffer): Promise<Exchange> {
  const response = await t.instance.app.inject({
    method: method as InjectOptions['method'],
    url,
    headers,
    payload: payload && payload.length > 0 ? payload : undefined,
  });
  return { method, url, response };
}

interface SignedInput {
  method?: string;
  target: string;
  body?: Buffer | string;
  /** undefined: application/json when there is a body; null: no Content-Type. */
  content_type?: string | null;
  /** null or undefined: no Idempotency-Key header. */
  idempotency_key?: string | null;
  credentials?: MerchantCredentials;
  timestamp_seconds?: number;
  nonce?: string;
  api_version?: string;
}

function nowSeconds(): number {
  return Math.floor(t.clock.now().getTime() / 1000);
}

function signedRequestHeaders(input: SignedInput): Record<string, string> {
  const credentials = input.credentials ?? keys.sandbox;
  const body = input.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(input.body) ? input.body : Buffer.from(input.body, 'utf8');
  const headers = signedHeaders({
    api_key: credentials.api_key,
    signing_secret: credentials.signing_secret,
    method: input.method ?? 'GET',
    target: input.target,
    body,
    idempotency_key: input.idempotency_key ?? undefined,
    api_version: input.api_version ?? API_VERSION,
    timestamp_seconds: input.timestamp_seconds ?? nowSeconds(),
    nonce: input.nonce ?? crypto.randomBytes(12).toString('hex'),
  });
  delete headers['content-type'];
  const contentType = input.content_type === undefined ? (body.length > 0 ? 'application/json' : null) : input.content_type;
  if (contentType !== null) headers['content-type'] = contentType;
  return headers;
}

async function sendSigned(input: SignedInput): Promise<Exchange> {
  const target = normaliseTarget(input.target);
  const body = input.body === undefined ? undefined : Buffer.isBuffer(input.body) ? input.body : Buffer.from(input.body, 'utf8');
  return inject(input.method ?? 'GET', target, signedRequestHeaders({ ...input, target }), body);
}

// ---------------------------------------------------------------------------------------------------
// The invariants every response must satisfy.

interface ErrorView {
  code: ErrorCode;
  details: Record<string, unknown>;
  retry_after_seconds: number | null;
  request_id: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describeExchange({ method, url, response }: Exchange): string {
  const shownUrl = url.length > 300 ? `${url.slice(0, 300)}…(${url.length} chars)` : url;
  return `${method} ${shownUrl} → ${response.statusCode} ${JSON.stringify(response.headers)} ${response.body.slice(0, 600)}`;
}

function integerHeader(exchange: Exchange, name: string): number {
  const value = exchange.response.headers[name];
  expect(typeof value === 'string' && /^[0-9]+$/.test(value), `${name} is a non-negative integer: ${describeExchange(exchange)}`).toBe(true);
  return Number(value);
}

function checkRateHeaders(exchange: Exchange): void {
  const where = describeExchange(exchange);
  for (const name of RATE_HEADERS) {
    expect(typeof exchange.response.headers[name], `${name} on every /v1/ response: ${where}`).toBe('string');
  }
  const limit = integerHeader(exchange, 'ratelimit-limit');
  const remaining = integerHeader(exchange, 'ratelimit-remaining');
  const reset = integerHeader(exchange, 'ratelimit-reset');
  const retryAfter = integerHeader(exchange, 'retry-after');
  const policy = /^([0-9]+);w=([0-9]+)$/.exec(String(exchange.response.headers['ratelimit-policy']));
  expect(policy, `RateLimit-Policy shape: ${where}`).not.toBeNull();
  const window = Number(policy?.[2]);
  expect(Number(policy?.[1]), `RateLimit-Policy names RateLimit-Limit: ${where}`).toBe(limit);
  expect(limit, where).toBeGreaterThan(0);
  expect(remaining, where).toBeLessThanOrEqual(limit);
  expect(reset, where).toBeGreaterThanOrEqual(1);
  expect(reset, where).toBeLessThanOrEqual(window);
  expect(RATE_SCOPES.has(String(exchange.response.headers['x-ratelimit-scope'])), `X-RateLimit-Scope: ${where}`).toBe(true);
  // A 503 names the service's own wait (docs/decisions/rate-limits.md); otherwise the wait is the bucket's.
  if (retryAfter > 0 && exchange.response.statusCode !== 503) expect(remaining, `Retry-After > 0 only with nothing remaining: ${where}`).toBe(0);
  if (exchange.response.statusCode === 429) {
    expect(retryAfter, `a 429 carries Retry-After > 0: ${where}`).toBeGreaterThan(0);
    expect(remaining, where).toBe(0);
  }
}

/** Checks the invariants of one exchange; returns the error of a non-2xx answer (null for 2xx). */
function checkResponse(exchange: Exchange): ErrorView | null {
  const { response } = exchange;
  const where = describeExchange(exchange);
  expect(response.statusCode, `never 5xx: ${where}`).toBeLessThan(500);
  expect(response.statusCode, where).toBeGreaterThanOrEqual(200);
  const requestId = response.headers['request-id'];
  expect(typeof requestId === 'string' && requestId.length > 0, `Request-Id header on every response: ${where}`).toBe(true);
  if (exchange.url.startsWith('/v1/')) checkRateHeaders(exchange);
  if (response.statusCode < 300) return null;
  if (exchange.method === 'HEAD') return null; // a HEAD answer has no body to check
  expect(String(response.headers['content-type']), `error bodies are JSON: ${where}`).toMatch(/^application\/json/);
  let body: unknown;
  try {
    body = JSON.parse(response.body);
  } catch {
    throw new Error(`the error body is not JSON: ${where}`);
  }
  expect(isRecord(body) ? Object.keys(body) : body, `the body is exactly {error}: ${where}`).toEqual(['error']);
  const error = (body as { error: unknown }).error;
  expect(isRecord(error) ? Object.keys(error).sort() : error, `the error has exactly the catalogue keys: ${where}`).toEqual(ERROR_KEYS);
  const fields = error as Record<string, unknown>;
  expect(ERROR_CODES as readonly unknown[], `the code is in the catalogue: ${where}`).toContain(fields.code);
  const code = fields.code as ErrorCode;
  expect(response.statusCode, `the status is codeToStatus(code): ${where}`).toBe(codeToStatus(code));
  expect(ERROR_TYPES.has(String(fields.type)), `type: ${where}`).toBe(true);
  expect(typeof fields.message === 'string' && fields.message.length > 0, `message: ${where}`).toBe(true);
  expect(typeof fields.message_th === 'string' && fields.message_th.length > 0, `message_th: ${where}`).toBe(true);
  expect(typeof fields.retryable, `retryable: ${where}`).toBe('boolean');
  expect(fields.request_id, `request_id equals the Request-Id header: ${where}`).toBe(requestId);
  expect(isRecord(fields.details), `details is an object: ${where}`).toBe(true);
  const retry = fields.retry_after_seconds;
  expect(retry === null || (Number.isSafeInteger(retry) && (retry as number) > 0), `retry_after_seconds: ${where}`).toBe(true);
  const details = fields.details as Record<string, unknown>;
  if (code === 'rate_limited') {
    expect(retry, `a 429 names its wait: ${where}`).toBe(Number(response.headers['retry-after']));
    expect(typeof details.bucket === 'string' && typeof details.scope === 'string', `a 429 names its bucket and scope: ${where}`).toBe(true);
  }
  if (code === 'validation_error') {
    const problems = details.fields;
    expect(Array.isArray(problems) && problems.length > 0, `validation_error lists its fields: ${where}`).toBe(true);
    for (const problem of problems as unknown[]) {
      expect(isRecord(problem) && typeof problem.path === 'string' && typeof problem.reason === 'string', `field problem shape: ${where}`).toBe(true);
      const record = problem as Record<string, unknown>;
      expect(record.hint === undefined || typeof record.hint === 'string', `field hint: ${where}`).toBe(true);
      expect(Object.keys(record).every((key) => ['path', 'reason', 'hint'].includes(key)), `field problem keys: ${where}`).toBe(true);
    }
  }
  if (code === 'method_not_allowed') {
    expect(Array.isArray(details.allow), `405 lists the allowed methods: ${where}`).toBe(true);
    expect(response.headers.allow, `405 carries an Allow header: ${where}`).toBe((details.allow as string[]).join(', '));
  }
  return { code, details, retry_after_seconds: retry as number | null, request_id: requestId as string };
}

function expectCode(exchange: Exchange, expected: ErrorCode | readonly ErrorCode[]): ErrorView {
  const error = checkResponse(exchange);
  const allowed = typeof expected === 'string' ? [expected] : expected;
  if (exchange.method === 'HEAD') {
    // No body to read the code from: the status must be one of the expected codes' statuses.
    const code = allowed.find((item) => codeToStatus(item) === exchange.response.statusCode);
    expect(code, `expected ${allowed.join(' or ')}: ${describeExchange(exchange)}`).toBeDefined();
    return { code: code as ErrorCode, details: {}, retry_after_seconds: null, request_id: String(exchange.response.headers['request-id']) };
  }
  expect(error?.code, `expected ${allowed.join(' or ')}: ${describeExchange(exchange)}`).toBeDefined();
  expect(allowed, `expected ${allowed.join(' or ')}: ${describeExchange(exchange)}`).toContain(error?.code);
  return error as ErrorView;
}

function expectStatus(exchange: Exchange, status: number): void {
  expect(checkResponse(exchange), `expected ${status}: ${describeExchange(exchange)}`).toBeNull();
  expect(exchange.response.statusCode, describeExchange(exchange)).toBe(status);
}

/** Every run starts in a fresh rate window, so no property but the exhaustion one meets a 429. */
function property<T>(arbitrary: fc.Arbitrary<T>, check: (value: T) => Promise<void>): fc.IAsyncProperty<[T]> {
  return fc.asyncProperty(arbitrary, async (value) => {
    t.clock.advance(MINUTE);
    await check(value);
  });
}

// ---------------------------------------------------------------------------------------------------
// Oracles shared by several properties.

function bearerTokenOf(authorization: string | undefined): string | null {
  if (authorization === undefined || authorization.length > 512) return null;
  // The scheme is case-insensitive (RFC 9110), as the service reads it.
  return /^Bearer ([^\s]+)$/i.exec(authorization)?.[1] ?? null;
}

function isJsonMediaType(contentType: string | null): boolean {
  return contentType !== null && contentType.split(';')[0]?.trim().toLowerCase() === 'application/json';
}

const MEDIA_TOKEN = "[A-Za-z0-9!#$%&'*+.^_`|~-]+";
const CLEAN_MEDIA_TYPE = new RegExp(`^${MEDIA_TOKEN}/${MEDIA_TOKEN}(; ?${MEDIA_TOKEN}=${MEDIA_TOKEN})*$`);

/**
 * A Content-Type the framework may refuse before any route logic (it is not a well-formed media type):
 * then unsupported_media_type is an acceptable answer at any stage.
 */
function mayBeRefusedEarly(contentType: string | null): boolean {
  return contentType !== null && !CLEAN_MEDIA_TYPE.test(contentType);
}

type Decoded = { ok: true; value: unknown } | { ok: false; code: 'malformed_json' | 'unsupported_media_type' | 'validation_error' };

function hasPollution(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Object.hasOwn(node, '__proto__')) return true;
    const ctor = Object.hasOwn(node, 'constructor') ? (node as Record<string, unknown>).constructor : undefined;
    if (typeof ctor === 'object' && ctor !== null && Object.hasOwn(ctor, 'prototype')) return true;
    for (const key of Object.keys(node)) stack.push((node as Record<string, unknown>)[key]);
  }
  return false;
}

/** Decodes a non-empty JSON body as the spec defines it (UTF-8, an optional BOM, no prototype keys). */
/** True when a JSON body names a `staff_id` (a credential issued to a person who exists already). */
function namesStaff(body: string | null): boolean {
  try {
    const value: unknown = body === null ? null : JSON.parse(body);
    return isRecord(value) && value.staff_id !== undefined;
  } catch {
    return false;
  }
}

function decodeJsonBody(bytes: Buffer, contentType: string | null): Decoded {
  if (!isJsonMediaType(contentType)) return { ok: false, code: 'unsupported_media_type' };
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, code: 'malformed_json' };
  }
  if (hasPollution(value)) return { ok: false, code: 'malformed_json' };
  // A key named twice in one object is refused (issue 28).
  if (hasDuplicateKeyByTokens(text)) return { ok: false, code: 'validation_error' };
  return { ok: true, value };
}

interface TestWrite {
  amount_minor: number;
  note: string;
}

function validTestWrite(value: unknown): TestWrite | null {
  if (!isRecord(value)) return null;
  if (!Object.keys(value).every((key) => key === 'amount_minor' || key === 'note')) return null;
  const { amount_minor, note } = value;
  if (typeof amount_minor !== 'number' || !Number.isSafeInteger(amount_minor) || amount_minor <= 0) return null;
  if (typeof note !== 'string' || note.length > 50 || !isStorable(note)) return null;
  return { amount_minor, note };
}

/** `codes`: the acceptable error codes; `valid`: set when 201 with this body is the right answer. */
interface TestWriteVerdict {
  valid: TestWrite | null;
  codes: ErrorCode[];
}

/** The documented order of the merchant write pipeline, for the test route's body. */
function testWriteVerdict(bytes: Buffer, contentType: string | null, idempotencyKey: string | null): TestWriteVerdict {
  const early: ErrorCode[] = mayBeRefusedEarly(contentType) ? ['unsupported_media_type'] : [];
  const refuse = (code: ErrorCode): TestWriteVerdict => ({ valid: null, codes: [code, ...early] });
  if (bytes.length > JSON_BODY_LIMIT_BYTES) return refuse('request_too_large');
  if (!idempotencyKey) return refuse('idempotency_key_required');
  // A key outside 1-255 printable ASCII is refused after authentication, before the body is read.
  if (!/^[\x20-\x7e]{1,255}$/.test(idempotencyKey)) return refuse('validation_error');
  if (bytes.length === 0) return refuse('validation_error');
  const decoded = decodeJsonBody(bytes, contentType);
  if (!decoded.ok) return refuse(decoded.code);
  const valid = validTestWrite(decoded.value);
  if (!valid) return refuse('validation_error');
  return { valid, codes: early };
}

// ===================================================================================================

describe('property: random and malformed requests', () => {
  // -------------------------------------------------------------------------------------------------
  it('1a. garbage authentication headers answer api_key_invalid or signature_invalid, never more', async () => {
    const targets = ['/v1/pay/events', '/v1/pay/banks', '/v1/pay/events?limit=5', '/v1/pay/events?order=desc&limit=2'];
    const authorization = fc.oneof(
      fc.constant(null),
      headerValue,
      headerValue.map((value) => `Bearer ${value}`),
      fc
        .tuple(fc.constantFrom('sk_test_', 'sk_live_', 'pk_test_', 'sk_prod_', 'sk_test', 'SK_TEST_', 'sk__', 'bo_', 'sk-test-', 'sk_test_-'), tokenText(0, 140))
        .map(([prefix, rest]) => `Bearer ${prefix}${rest}`),
      fc.constantFrom(...KEY_NAMES).map((name) => `Bearer ${keys[name].api_key}`),
      fc.constantFrom('bearer ', 'BEARER ', 'Bearer  ', 'Bearer\t', 'Basic ', 'Token ', '', 'Bearer sk_test_ ').map((prefix) => `${prefix}${keys.sandbox.api_key}`),
      fc.constantFrom('x', '=', '\u00e9', ' extra').map((suffix) => `Bearer ${keys.sandbox.api_key}${suffix}`),
      fc.constant(null).map(() => `Bearer ${keys.sandbox.api_key.slice(0, -1)}`),
      fc.constant(null).map(() => `Bearer ${keys.sandbox.api_key.toUpperCase()}`),
      fc.constant(`Bearer sk_test_${'a'.repeat(600)}`),
    );
    const timestamp = fc.oneof(
      fc.constant(null),
      headerValue,
      fc.stringMatching(/^[0-9]{1,20}$/),
      fc.constantFrom('-1', '1e9', '0x10', '١٢٣', '1.5', '+1790000000'),
    );
    const nonce = fc.oneof(fc.constant(null), headerValue, tokenText(1, 200), fc.constantFrom('a b', 'x'.repeat(129), 'é'));
    const version = fc.oneof(fc.constant(null), headerValue, fc.constantFrom('2026-08-02', '2025-01-01', '2026-8-1', 'v1', '2026-08-01T00:00:00Z', '9999-99-99'));
    const signature = fc.oneof(
      fc.constant(null),
      headerValue,
      hexText(64).map((hex) => `v1=${hex}`),
      fc.constantFrom('v1=', `v1=${'0'.repeat(64)}`, `v1=${'g'.repeat(64)}`),
    );
    const wrongCanonical = fc.constantFrom('method', 'path', 'query', 'body', 'idempotency_key', 'version', 'secret', 'timestamp', 'nonce', 'uppercase_hex', 'v2');
    const mutations = fc.record(
      {
        authorization: authorization.map((value) => (value === null ? null : asHeaderValue(value))),
        'pg-timestamp': timestamp,
        'pg-nonce': nonce,
        'pg-version': version,
        'pg-signature': signature,
        wrong_canonical: wrongCanonical,
      },
      { requiredKeys: [] },
    );
    const scenario = fc.record({ target: fc.constantFrom(...targets), mutations });

    await withBusinessRows(async () => {
      await fc.assert(
        property(scenario, async ({ target, mutations: change }) => {
          const nonceText = crypto.randomBytes(8).toString('hex');
          const timestampSeconds = nowSeconds();
          const base = signedRequestHeaders({ target, nonce: nonceText, timestamp_seconds: timestampSeconds });
          const headers: Record<string, string> = { ...base };
          for (const name of ['authorization', 'pg-timestamp', 'pg-nonce', 'pg-version', 'pg-signature'] as const) {
            const value = change[name];
            if (value === undefined) continue;
            if (value === null) delete headers[name];
            else headers[name] = value;
          }
          if (change.wrong_canonical !== undefined) {
            headers['pg-signature'] = wrongSignature(change.wrong_canonical, target, nonceText, timestampSeconds, base['pg-signature'] ?? '');
          }
          const token = bearerTokenOf(headers.authorization);
          // The signature does not cover the Authorization header: what counts is the key it names.
          const changed = token !== bearerTokenOf(base.authorization) || ['pg-timestamp', 'pg-nonce', 'pg-version', 'pg-signature'].some((name) => headers[name] !== base[name]);
          const keyName = token === null ? undefined : keyNameByText.get(token);
          const exchange = await inject('GET', target, headers);
          if (keyName === undefined) expectCode(exchange, 'api_key_invalid');
          else if (keyName !== 'sandbox' || changed) expectCode(exchange, 'signature_invalid');
          else expectStatus(exchange, 200);
        }),
        { numRuns: 200 },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('1b. correctly signed requests answer the documented authentication code in the documented order', async () => {
    const scenario = fc.record({
      key: fc.constantFrom(...KEY_NAMES),
      route: fc.constantFrom('/v1/pay/events', '/v1/pay/banks'),
      version: fc.oneof({ arbitrary: fc.constant(API_VERSION), weight: 3 }, { arbitrary: fc.constantFrom('2025-01-01', '2026-08-02', '9999-12-31', '0000-00-00'), weight: 1 }),
      skew: fc.oneof({ arbitrary: fc.integer({ min: -300, max: 300 }), weight: 3 }, { arbitrary: fc.integer({ min: -100_000, max: 100_000 }), weight: 2 }),
      replay: fc.boolean(),
    });
    const scopeOf: Record<string, ApiKeyScope> = { '/v1/pay/events': 'events:read', '/v1/pay/banks': 'pay:read' };

    function expected(key: KeyName, route: string, version: string, timestamp: number, replayed: boolean): ErrorCode | 200 {
      if (version !== API_VERSION) return 'api_version_unsupported';
      if (Math.abs(t.clock.now().getTime() / 1000 - timestamp) > 300) return 'timestamp_out_of_window';
      if (key === 'revoked') return 'api_key_revoked';
      if (key === 'suspended_key' || key === 'suspended_merchant' || key === 'suspended_brand') return 'tenant_suspended';
      if (replayed) return 'nonce_replayed';
      if (!KEY_SCOPES[key].includes(scopeOf[route] as ApiKeyScope)) return 'scope_denied';
      return 200;
    }

    await withBusinessRows(async () => {
      await fc.assert(
        property(scenario, async ({ key, route, version, skew, replay }) => {
          const input: SignedInput = {
            target: route,
            credentials: keys[key],
            api_version: version,
            timestamp_seconds: nowSeconds() + skew,
            nonce: crypto.randomBytes(10).toString('hex'),
          };
          const sends = replay ? [false, true] : [false];
          for (const replayed of sends) {
            const exchange = await sendSigned(input);
            const outcome = expected(key, route, version, input.timestamp_seconds as number, replayed);
            if (outcome === 200) {
              expectStatus(exchange, 200);
            } else {
              expect(AUTH_CODES).toContain(outcome);
              expectCode(exchange, outcome);
            }
          }
        }),
        { numRuns: 150 },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('2. signed GET /v1/pay/events with random query strings answers 200 (exactly the right page), 422 or 400', async () => {
    await withBusinessRows(async () => {
      await fc.assert(
        property(eventsQuery(), async (query) => {
          const target = normaliseTarget(`/v1/pay/events${query.length > 0 ? `?${query}` : ''}`);
          const exchange = await sendSigned({ target });
          const rawQuery = target.includes('?') ? target.slice(target.indexOf('?') + 1) : '';
          const verdict = eventsVerdict(rawQuery);
          if (verdict.kind === 'ok') {
            if (verdict.lenient && exchange.response.statusCode === 422) {
              expectCode(exchange, 'validation_error');
              return;
            }
            expectStatus(exchange, 200);
            checkEventsPage(exchange, verdict);
          } else if (verdict.kind === 'invalid') {
            expectCode(exchange, 'validation_error');
          } else {
            expectCode(exchange, 'cursor_filter_mismatch');
          }
        }),
        {
          numRuns: 200,
          examples: [['type=%00'], ['from=0000-01-01T00:00:00.000Z'], ['__proto__=1'], ['from=2026-02-30T00:00:00.000Z'], ['status=a%00b&order=desc']],
        },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('3. random bodies and content types on a POST answer only the body codes, and a valid body 201', async () => {
    await withBusinessRows(async (deltas) => {
      await fc.assert(
        property(writeRequest(), async (request) => {
          const bytes = materialise(request.body);
          const idempotencyKey = request.key === null ? null : request.key === '' ? '' : `${crypto.randomUUID()}:${request.key}`.slice(0, 255);
          const target = normaliseTarget(request.query === '' ? TEST_ROUTE : `${TEST_ROUTE}?${request.query}`);
          const exchange = await sendSigned({
            method: 'POST',
            target,
            body: bytes,
            content_type: request.content_type,
            idempotency_key: idempotencyKey,
          });
          const verdict = testWriteVerdict(bytes, request.content_type, idempotencyKey);
          if (verdict.valid && [...new URLSearchParams(target.split('?')[1] ?? '')].length > 0) {
            verdict.valid = null;
            verdict.codes.unshift('validation_error');
          }
          if (verdict.valid && exchange.response.statusCode < 300) {
            expectStatus(exchange, 201);
            expect(exchange.response.headers['idempotent-replay'], describeExchange(exchange)).toBeUndefined();
            expect(exchange.response.json(), describeExchange(exchange)).toEqual({
              object: 'test_write',
              id: expect.any(String),
              request_id: exchange.response.headers['request-id'],
              ...verdict.valid,
            });
            addDelta(deltas, 'idempotency_records');
          } else {
            expectCode(exchange, verdict.codes);
            const keeps = refusalKeepsKey(exchange, idempotencyKey, request.content_type);
            const holds = idempotencyKey !== null && (await keyHoldsAnswer(idempotencyKey));
            if (keeps !== null) expect(holds, `the key keeps the refusal: ${describeExchange(exchange)}`).toBe(keeps);
            if (holds) addDelta(deltas, 'idempotency_records');
          }
        }),
        { numRuns: 150 },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('3b. validation_error says `required` only for a field that is absent', async () => {
    await withBusinessRows(async (deltas) => {
      await fc.assert(
        property(nearValidTestWrite, async (text) => {
          const bytes = Buffer.from(text, 'utf8');
          const decoded = decodeJsonBody(bytes, 'application/json');
          fc.pre(decoded.ok && validTestWrite(decoded.value) === null);
          const exchange = await sendSigned({ method: 'POST', target: TEST_ROUTE, body: bytes, idempotency_key: crypto.randomUUID() });
          const error = expectCode(exchange, 'validation_error');
          // The refusal is the key's answer (spec, Common request rules 2).
          addDelta(deltas, 'idempotency_records');
          const value = (decoded as { value: unknown }).value;
          for (const problem of error.details.fields as Array<{ path: string; reason: string }>) {
            if (problem.reason !== 'required') continue;
            const present = problem.path === '$' ? value !== undefined : isRecord(value) && Object.hasOwn(value, problem.path);
            expect(present, `"${problem.path}" is present but reported as required: ${describeExchange(exchange)}`).toBe(false);
          }
        }),
        { numRuns: 100, examples: [['{"amount_minor":"5","note":"a"}']] },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('4. unknown paths answer 404 and known paths with another method 405 with an Allow header', async () => {
    const scenario = fc.record({
      method: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'),
      path: fc.oneof({ arbitrary: knownRoutePath(), weight: 2 }, { arbitrary: randomV1Path(), weight: 3 }),
      query: fc.option(fc.oneof(queryJunk, fc.constant('x=1')), { nil: undefined }),
    });
    await withBusinessRows(async () => {
      await fc.assert(
        property(scenario, async ({ method, path, query }) => {
          const target = normaliseTarget(`${path}${query === undefined ? '' : `?${query}`}`);
          const exchange = await inject(method, target, {});
          const rawPath = target.split('?')[0] ?? '';
          if (!rawPath.startsWith('/v1/')) {
            // Normalisation (dot segments) took the path out of /v1/: only the generic invariants apply.
            checkResponse(exchange);
            return;
          }
          const routes = matchRoutes(rawPath);
          if (routes === 'malformed') {
            const error = expectCode(exchange, ERROR_CODES);
            expect([400, 404], describeExchange(exchange)).toContain(codeToStatus(error.code));
            return;
          }
          const allowed = [...new Set(routes.flatMap((route) => (route.method === 'GET' ? ['GET', 'HEAD'] : [route.method])))].sort();
          if (allowed.length === 0) {
            expectCode(exchange, 'resource_not_found');
          } else if (!allowed.includes(method)) {
            const error = expectCode(exchange, 'method_not_allowed');
            expect(exchange.response.headers.allow, describeExchange(exchange)).toBe(allowed.join(', '));
            if (method !== 'HEAD') expect(error.details.allow, describeExchange(exchange)).toEqual(allowed);
          } else if (
            routes
              .filter((route) => route.method === method || (method === 'HEAD' && route.method === 'GET'))
              .some((route) => hasUnnameableParam(rawPath, route.segments))
          ) {
            expectCode(exchange, 'resource_not_found');
          } else if (routes.some((route) => (route.method === method || (method === 'HEAD' && route.method === 'GET')) && route.kind === 'public')) {
            // The public route declares no query parameters, so any named one is refused.
            const names = [...new URLSearchParams(target.split('?')[1] ?? '')];
            const publicRoute = routes.find((route) => route.kind === 'public');
            if (names.length === 0 && !publicRoute?.query_required) expectStatus(exchange, 200);
            else expectCode(exchange, 'validation_error');
          } else {
            // The route exists and the method is right: unauthenticated, so the pipeline's first check answers.
            expectCode(exchange, 'api_key_invalid');
          }
        }),
        {
          numRuns: 200,
          examples: [
            [{ method: 'PUT', path: '/v1/pay/%65vents', query: undefined }],
            [{ method: 'GET', path: `/v1/bo/brands/${'a'.repeat(201)}`, query: undefined }],
            [{ method: 'GET', path: '/v1/pay/%zz', query: undefined }],
            [{ method: 'GET', path: '/v1/bo/merchants/', query: undefined }],
          ],
        },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('5. back office: random tokens, paths and bodies answer documented codes; only successful creations add rows', async () => {
    await withBusinessRows(async (deltas) => {
      await fc.assert(
        property(backofficeRequest(), async (request) => {
          const headers: Record<string, string> = {};
          const authorization = authorizationFor(request.token);
          if (authorization !== null) headers.authorization = authorization;
          const bytes = request.body === null ? Buffer.alloc(0) : Buffer.from(request.body, 'utf8');
          if (request.content_type !== null) headers['content-type'] = request.content_type;
          const target = normaliseTarget(request.target);
          const exchange = await inject(request.route.method, target, headers, request.route.method === 'POST' ? bytes : undefined);
          const expected = backofficeVerdict(request, bytes);
          const error = checkResponse(exchange);
          if (expected.codes.length > 0) {
            expect(expected.codes, `expected ${expected.codes.join(' or ')}: ${describeExchange(exchange)}`).toContain(error?.code);
          } else if (error) {
            expect(expected.handler, `a code the handler may answer: ${describeExchange(exchange)}`).toContain(error.code);
          } else if (exchange.response.statusCode === 201 && request.route.creates) {
            addDelta(deltas, request.route.creates);
            addDelta(deltas, 'audit_log');
            // A credential issued without a staff_id goes to a new person, who has an audit row of their own (issue 28).
            if (request.route.creates === 'backoffice_credentials' && !namesStaff(request.body)) addDelta(deltas, 'audit_log');
          }
        }),
        { numRuns: 200 },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('6. idempotency follows the model: store the first answer, replay byte for byte, 409 on a changed request', async () => {
    const step = fc.record({
      key: fc.nat({ max: 2 }),
      body: fc.nat({ max: IDEMPOTENCY_BODIES.length - 1 }),
      alt_path: fc.oneof({ arbitrary: fc.constant(false), weight: 4 }, { arbitrary: fc.constant(true), weight: 1 }),
      live: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
    });
    interface Stored {
      path: string;
      canonical: string;
      status: number;
      body_text: string;
      request_id: string;
    }
    await withBusinessRows(async (deltas) => {
      await fc.assert(
        property(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
          const run = crypto.randomUUID();
          const model = new Map<string, Stored>();
          for (const item of steps) {
            const key = `${run}:k${item.key}`;
            const path = item.alt_path ? TEST_ROUTE_ALT : TEST_ROUTE;
            const text = IDEMPOTENCY_BODIES[item.body] as string;
            const exchange = await sendSigned({
              method: 'POST',
              target: path,
              body: text,
              idempotency_key: key,
              credentials: item.live ? keys.live : keys.sandbox,
            });
            const verdict = testWriteVerdict(Buffer.from(text, 'utf8'), 'application/json', key);
            const where = describeExchange(exchange);
            const slot = `${item.live ? 'live' : 'test'}|${key}`;
            // The request as its key compares it: a valid body by its fields, a refused one by its JSON value, or
            // by its bytes when they are not JSON (a refusal is the key's answer too, spec Common request rules 2).
            const decoded = decodeJsonBody(Buffer.from(text, 'utf8'), 'application/json');
            const canonical = verdict.valid
              ? JSON.stringify({ amount_minor: verdict.valid.amount_minor, note: verdict.valid.note })
              : decoded.ok
                ? `refused:${canonicalJson(decoded.value)}`
                : `refused-bytes:${text}`;
            const stored = model.get(slot);
            if (!stored) {
              if (verdict.valid) expectStatus(exchange, 201);
              else expectCode(exchange, verdict.codes);
              expect(exchange.response.headers['idempotent-replay'], where).toBeUndefined();
              model.set(slot, {
                path,
                canonical,
                status: exchange.response.statusCode,
                body_text: exchange.response.body,
                request_id: String(exchange.response.headers['request-id']),
              });
              addDelta(deltas, 'idempotency_records');
            } else if (stored.path === path && stored.canonical === canonical) {
              // The original answer, its request_id included (a replayed refusal names the request that was refused).
              expect(exchange.response.statusCode, where).toBe(stored.status);
              expect(exchange.response.body, `a replay is byte for byte the first answer: ${where}`).toBe(stored.body_text);
              expect(exchange.response.headers['idempotent-replay'], where).toBe('true');
              expect(exchange.response.headers['request-id'], where).not.toBe(stored.request_id);
            } else {
              const error = expectCode(exchange, 'idempotency_key_reused');
              expect(error.details.original_request_id, where).toBe(stored.request_id);
            }
          }
        }),
        { numRuns: 100 },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('6b. concurrent requests with one key execute once; the others replay, wait (in flight) or are refused', async () => {
    const scenario = fc.record({
      bodies: fc.array(fc.constantFrom(0, 1, 4, 5), { minLength: 2, maxLength: 4 }),
    });
    await withBusinessRows(async (deltas) => {
      await fc.assert(
        property(scenario, async ({ bodies }) => {
          const key = crypto.randomUUID();
          const texts = bodies.map((index) => IDEMPOTENCY_BODIES[index] as string);
          const exchanges = await Promise.all(texts.map((body) => sendSigned({ method: 'POST', target: TEST_ROUTE, body, idempotency_key: key })));
          const canonical = (text: string) => {
            const valid = testWriteVerdict(Buffer.from(text, 'utf8'), 'application/json', key).valid as TestWrite;
            return JSON.stringify({ amount_minor: valid.amount_minor, note: valid.note });
          };
          const executed = exchanges.filter((exchange) => exchange.response.statusCode === 201 && exchange.response.headers['idempotent-replay'] === undefined);
          expect(executed.length, `exactly one execution: ${exchanges.map(describeExchange).join('\n')}`).toBe(1);
          const winner = executed[0] as Exchange;
          const winnerText = texts[exchanges.indexOf(winner)] as string;
          exchanges.forEach((exchange, index) => {
            if (exchange === winner) return expectStatus(exchange, 201);
            const same = canonical(texts[index] as string) === canonical(winnerText);
            if (exchange.response.statusCode === 201) {
              expect(same, describeExchange(exchange)).toBe(true);
              expectStatus(exchange, 201);
              expect(exchange.response.headers['idempotent-replay'], describeExchange(exchange)).toBe('true');
              expect(exchange.response.body, describeExchange(exchange)).toBe(winner.response.body);
              return;
            }
            const error = expectCode(exchange, same ? ['idempotency_in_flight'] : ['idempotency_in_flight', 'idempotency_key_reused']);
            if (error.code === 'idempotency_in_flight') expect(error.retry_after_seconds, describeExchange(exchange)).toBeGreaterThan(0);
            else expect(error.details.original_request_id, describeExchange(exchange)).toBe(winner.response.headers['request-id']);
          });
          addDelta(deltas, 'idempotency_records');
        }),
        { numRuns: 60 },
      );
    });
  }, 120_000);

  // -------------------------------------------------------------------------------------------------
  it('7. exhausting a bucket answers 429 with its bucket and scope and Retry-After > 0, and consumes nothing', async () => {
    await withBusinessRows(async (deltas) => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom('pay_write', 'public'), fc.integer({ min: 0, max: 59_999 }), async (bucket, offset) => {
          // A fresh window, `offset` milliseconds in.
          const now = t.clock.now().getTime();
          t.clock.advance(MINUTE - (now % MINUTE) + offset);
          const windowEnd = Math.floor(t.clock.now().getTime() / MINUTE) * MINUTE + MINUTE;
          const expectedWait = Math.max(1, Math.ceil((windowEnd - t.clock.now().getTime()) / 1000));
          const policy = BUCKETS[bucket];
          const valid = '{"amount_minor":100,"note":"rate"}';
          for (let index = 1; index <= policy.limit; index += 1) {
            const exchange =
              bucket === 'pay_write'
                ? await sendSigned({ method: 'POST', target: TEST_ROUTE, body: valid }) // no key: refused, but counted
                : await inject('GET', '/v1/webhooks/test-vectors', {});
            if (bucket === 'pay_write') expectCode(exchange, 'idempotency_key_required');
            else expectStatus(exchange, 200);
            expect(Number(exchange.response.headers['ratelimit-remaining']), describeExchange(exchange)).toBe(policy.limit - index);
          }
          const key = crypto.randomUUID();
          const over = () =>
            bucket === 'pay_write'
              ? sendSigned({ method: 'POST', target: TEST_ROUTE, body: valid, idempotency_key: key })
              : inject('GET', '/v1/webhooks/test-vectors', {});
          const refused = await over();
          const error = expectCode(refused, 'rate_limited');
          expect(error.details, describeExchange(refused)).toEqual({ bucket: policy.name, scope: policy.scope });
          expect(error.retry_after_seconds, describeExchange(refused)).toBe(expectedWait);
          expect(Number(refused.response.headers['retry-after']), describeExchange(refused)).toBeGreaterThan(0);
          expect(refused.response.headers['x-ratelimit-scope'], describeExchange(refused)).toBe(policy.scope);
          expect(refused.response.headers['ratelimit-limit'], describeExchange(refused)).toBe(String(policy.limit));
          if (bucket === 'pay_write') {
            // Another bucket of the same key is untouched.
            expectStatus(await sendSigned({ target: '/v1/pay/banks' }), 200);
          }
          // The refused request consumed nothing: in the next window the same request succeeds anew.
          t.clock.advance(windowEnd - t.clock.now().getTime());
          const retried = await over();
          if (bucket === 'pay_write') {
            expectStatus(retried, 201);
            expect(retried.response.headers['idempotent-replay'], describeExchange(retried)).toBeUndefined();
            addDelta(deltas, 'idempotency_records');
          } else {
            expectStatus(retried, 200);
          }
        }),
        // Each run sends a whole bucket (600 or 300 requests): the two examples plus one random run.
        { numRuns: 1, examples: [['pay_write', 0], ['public', 59_999]] },
      );
    });
  }, 120_000);
});

// ===================================================================================================
// Single requests the properties found; each one a separate failure to fix.

describe('regressions found by the properties', () => {
  const admin = () => ({ authorization: `Bearer ${tokens.admin}` });

  it.each([
    ['a NUL in a text filter (type)', '/v1/pay/events?type=%00'],
    ['a NUL in a text filter (status)', '/v1/pay/events?status=a%00'],
    ['year 0000 in from', '/v1/pay/events?from=0000-01-01T00:00:00.000Z'],
  ])('GET /v1/pay/events with %s is not a 5xx', async (_label, url) => {
    t.clock.advance(MINUTE);
    const exchange = await sendSigned({ target: url });
    const error = checkResponse(exchange);
    if (error) expect(error.code).toBe('validation_error');
  });

  it('an impossible calendar date in from (2026-02-30) is refused, not read as 2026-03-02', async () => {
    t.clock.advance(MINUTE);
    expectCode(await sendSigned({ target: '/v1/pay/events?from=2026-02-30T00:00:00.000Z' }), 'validation_error');
  });

  it('an undeclared query parameter named __proto__ is refused like any other', async () => {
    t.clock.advance(MINUTE);
    const other = expectCode(await sendSigned({ target: '/v1/pay/banks?foo=1' }), 'validation_error');
    expect(other.details.fields).toEqual([{ path: 'foo', reason: 'unknown_field' }]);
    expectCode(await sendSigned({ target: '/v1/pay/banks?__proto__=1' }), 'validation_error');
  });

  it('a path parameter longer than 200 characters answers in the catalogue shape', async () => {
    t.clock.advance(MINUTE);
    checkResponse(await inject('GET', `/v1/bo/brands/${'a'.repeat(201)}`, admin()));
  });

  it('a malformed percent-encoding in the path answers in the catalogue shape', async () => {
    t.clock.advance(MINUTE);
    checkResponse(await inject('GET', '/v1/pay/%zz', {}));
    checkResponse(await inject('GET', '/v1/bo/brands/%E0%A4%A', admin()));
  });

  it('a percent-encoded known path answers 405 to a wrong method, as its GET is routed', async () => {
    t.clock.advance(MINUTE);
    expectStatus(await sendSigned({ target: '/v1/pay/%65vents' }), 200);
    expectCode(await inject('PUT', '/v1/pay/%65vents', {}), 'method_not_allowed');
  });

  it.each([
    ['GET', '/v1/bo/brands/%00', null],
    ['GET', '/v1/bo/merchants/%00', null],
    ['GET', '/v1/bo/merchants?white_label_id=%00', null],
    ['POST', '/v1/bo/brands', '{"name":"a\\u0000b"}'],
    ['POST', '/v1/bo/brands', '{"name":"\\ud800"}'],
  ] as const)('back office %s %s %s (NUL or lone surrogate) is not a 5xx', async (method, url, body) => {
    t.clock.advance(MINUTE);
    const headers: Record<string, string> = { ...admin(), ...(body ? { 'content-type': 'application/json' } : {}) };
    checkResponse(await inject(method, url, headers, body ? Buffer.from(body) : undefined));
  });

  it('a trailing slash is not an empty path parameter: GET /v1/bo/merchants/ is 404 like PUT', async () => {
    t.clock.advance(MINUTE);
    expectCode(await inject('PUT', '/v1/bo/merchants/', {}), 'resource_not_found');
    expectCode(await inject('GET', '/v1/bo/merchants/', {}), 'resource_not_found');
  });

  it('a replay carries the headers of the first answer (Location)', async () => {
    t.clock.advance(MINUTE);
    const key = crypto.randomUUID();
    const body = '{"amount_minor":5,"note":"headers"}';
    await withBusinessRows(async (deltas) => {
      const first = await sendSigned({ method: 'POST', target: TEST_ROUTE, body, idempotency_key: key });
      expectStatus(first, 201);
      addDelta(deltas, 'idempotency_records');
      const replay = await sendSigned({ method: 'POST', target: TEST_ROUTE, body, idempotency_key: key });
      expectStatus(replay, 201);
      expect(replay.response.headers['idempotent-replay']).toBe('true');
      expect(replay.response.body).toBe(first.response.body);
      expect(replay.response.headers.location, describeExchange(replay)).toBe(first.response.headers.location);
    });
  });

  it('a signed GET with a body is refused as body_not_allowed (the bytes were signed correctly)', async () => {
    t.clock.advance(MINUTE);
    const error = expectCode(await sendSigned({ target: '/v1/pay/banks', body: '{"a":1}' }), 'validation_error');
    expect(error.details.fields).toEqual([{ path: '$', reason: 'body_not_allowed' }]);
  });

  it('a wrong-typed field is not reported as `required`', async () => {
    t.clock.advance(MINUTE);
    const exchange = await sendSigned({ method: 'POST', target: TEST_ROUTE, body: '{"amount_minor":"5","note":"a"}', idempotency_key: crypto.randomUUID() });
    const error = expectCode(exchange, 'validation_error');
    expect(error.details.fields).not.toContainEqual(expect.objectContaining({ path: 'amount_minor', reason: 'required' }));
  });
});

// ===================================================================================================
// Property 2: the events query model.

const EVENT_PARAMS = ['since_sequence', 'limit', 'cursor', 'type', 'status', 'from', 'to', 'order'] as const;
type EventParam = (typeof EVENT_PARAMS)[number];

function isWireTimestamp(text: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(text)) return false;
  // The API accepts instants from 1970 on (docs/decisions/errors.md).
  if (Number(text.slice(0, 4)) < 1970) return false;
  const instant = new Date(text);
  // Round-tripping refuses impossible dates (02-30, 24:00) that Date would silently roll over.
  return !Number.isNaN(instant.getTime()) && instant.toISOString() === text;
}

/** Text PostgreSQL can store: no U+0000 and no lone surrogate (refused as invalid_characters). */
function isStorable(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

type EventsVerdict =
  | { kind: 'invalid' }
  | { kind: 'mismatch' }
  | {
      kind: 'ok';
      /** A 422 is acceptable too (year 0000 is a valid RFC 3339 year the API may refuse). */
      lenient: boolean;
      since: number;
      limit: number;
      filters: CursorFilters;
      position: number | null;
    };

function decodeCursorText(text: string): { position: number; filters: CursorFilters } | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (!isRecord(parsed) || parsed.v !== 1) return null;
  const { position, filters } = parsed;
  if (typeof position !== 'number' || !Number.isSafeInteger(position) || position < 0) return null;
  if (!isRecord(filters)) return null;
  const nullableText = (value: unknown) => value === null || typeof value === 'string';
  if (!nullableText(filters.type) || !nullableText(filters.status) || !nullableText(filters.from) || !nullableText(filters.to)) return null;
  if (filters.order !== 'asc' && filters.order !== 'desc') return null;
  return { position, filters: filters as unknown as CursorFilters };
}

/** What GET /v1/pay/events must answer for a raw query string, from the rules documented on the route. */
function eventsVerdict(rawQuery: string): EventsVerdict {
  const pairs = [...new URLSearchParams(rawQuery)];
  if (pairs.length > 50) return { kind: 'invalid' };
  const values = new Map<string, string>();
  for (const [name, value] of pairs) {
    if (!isStorable(name) || !isStorable(value)) return { kind: 'invalid' };
    if (values.has(name)) return { kind: 'invalid' };
    values.set(name, value);
  }
  for (const name of values.keys()) if (!(EVENT_PARAMS as readonly string[]).includes(name)) return { kind: 'invalid' };
  const get = (name: EventParam) => values.get(name);
  const since = get('since_sequence');
  const limit = get('limit');
  const cursor = get('cursor');
  const type = get('type');
  const status = get('status');
  const from = get('from');
  const to = get('to');
  const order = get('order');
  if (since !== undefined && !/^[0-9]{1,15}$/.test(since)) return { kind: 'invalid' };
  if (limit !== undefined && !/^[0-9]{1,4}$/.test(limit)) return { kind: 'invalid' };
  if (cursor !== undefined && (cursor.length < 1 || cursor.length > 1000)) return { kind: 'invalid' };
  for (const text of [type, status]) if (text !== undefined && (text.length < 1 || text.length > 100)) return { kind: 'invalid' };
  for (const text of [from, to]) if (text !== undefined && !isWireTimestamp(text)) return { kind: 'invalid' };
  if (order !== undefined && order !== 'asc' && order !== 'desc') return { kind: 'invalid' };
  const limitNumber = limit === undefined ? 100 : Number(limit);
  if (limitNumber < 1 || limitNumber > 500) return { kind: 'invalid' };
  const filters: CursorFilters = { type: type ?? null, status: status ?? null, from: from ?? null, to: to ?? null, order: order === 'desc' ? 'desc' : 'asc' };
  let position: number | null = null;
  if (cursor !== undefined) {
    const decoded = decodeCursorText(cursor);
    if (!decoded) return { kind: 'invalid' };
    const same = (['type', 'status', 'from', 'to', 'order'] as const).every((name) => decoded.filters[name] === filters[name]);
    if (!same) return { kind: 'mismatch' };
    position = decoded.position;
  }
  const lenient = false;
  return { kind: 'ok', lenient, since: since === undefined ? 0 : Number(since), limit: limitNumber, filters, position };
}

function checkEventsPage(exchange: Exchange, verdict: Extract<EventsVerdict, { kind: 'ok' }>): void {
  const where = describeExchange(exchange);
  const page = exchange.response.json() as { object: unknown; data: Array<{ sequence: number }>; has_more: unknown; next_cursor: unknown };
  expect(Object.keys(page).sort(), where).toEqual(['data', 'has_more', 'next_cursor', 'object']);
  expect(page.object, where).toBe('list');
  const { filters } = verdict;
  const fromMs = filters.from === null ? null : Date.parse(filters.from);
  const toMs = filters.to === null ? null : Date.parse(filters.to);
  const matching = seeded
    .filter(
      (event) =>
        event.sequence > verdict.since &&
        (filters.type === null || event.type === filters.type) &&
        (filters.status === null || event.status === filters.status) &&
        (fromMs === null || event.created_ms >= fromMs) &&
        (toMs === null || event.created_ms < toMs) &&
        (verdict.position === null || (filters.order === 'asc' ? event.sequence > verdict.position : event.sequence < verdict.position)),
    )
    .map((event) => event.sequence)
    .sort((left, right) => (filters.order === 'asc' ? left - right : right - left));
  expect(page.data.map((event) => event.sequence), `exactly the matching events in order: ${where}`).toEqual(matching.slice(0, verdict.limit));
  expect(page.has_more, where).toBe(matching.length > verdict.limit);
  if (page.has_more) expect(typeof page.next_cursor === 'string' && page.next_cursor.length > 0, where).toBe(true);
  else expect(page.next_cursor, where).toBeNull();
}

interface QueryPart {
  name: string;
  value: string | null;
  how: Encoding;
}

function encodePart(part: QueryPart): string {
  const name = encodeQueryText(part.name, part.how);
  return part.value === null ? name : `${name}=${encodeQueryText(part.value, part.how)}`;
}

const seededStart = Date.parse(TEST_START);
const timestampValue = fc.oneof(
  { arbitrary: fc.integer({ min: -5, max: 15 }).map((minutes) => new Date(seededStart + minutes * MINUTE).toISOString()), weight: 4 },
  { arbitrary: fc.date({ min: new Date('0000-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }).map((date) => date.toISOString()), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      '2026-08-01T00:00:00Z', '2026-08-01T00:00:00.000+07:00', '2026-08-01', '2026-13-01T00:00:00.000Z', '2026-08-01t00:00:00.000z',
      '+012026-08-01T00:00:00.000Z', '2026-08-01T00:00:00.0000Z', ' 2026-08-01T00:00:00.000Z',
    ),
    weight: 1,
  },
  { arbitrary: anyText, weight: 1 },
);

function cursorText(): fc.Arbitrary<string> {
  const filters = fc.record({
    type: fc.option(fc.constantFrom('test.created', 'test.updated', 'x')),
    status: fc.option(fc.constantFrom('open', 'closed')),
    from: fc.option(timestampValue),
    to: fc.option(timestampValue),
    order: fc.constantFrom('asc', 'desc'),
  });
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
  return fc.oneof(
    anyText,
    fc.jsonValue({ maxDepth: 3 }).map(encode),
    fc.record({ v: fc.constantFrom(1, 2, '1'), position: fc.oneof(fc.nat({ max: 20 }), fc.constantFrom(-1, 1.5, Number.MAX_SAFE_INTEGER, 2 ** 60)), filters }).map(encode),
    fc.tuple(fc.nat(), fc.constantFrom('drop', 'append', 'upper', 'pad')).map(([index, how]) => {
      const text = realCursors[index % realCursors.length]?.text ?? '';
      if (how === 'drop') return text.slice(0, -3);
      if (how === 'append') return `${text}A`;
      if (how === 'upper') return text.toUpperCase();
      return `${text}==`;
    }),
    fc.constant('A'.repeat(1001)),
  );
}

function eventParamValue(name: EventParam): fc.Arbitrary<string> {
  switch (name) {
    case 'since_sequence':
      return fc.oneof(
        { arbitrary: fc.nat({ max: 12 }).map(String), weight: 4 },
        { arbitrary: fc.constantFrom('0', '000', '999999999999999', '9999999999999999', '-1', '1.5', '1e3', ' 1', '١', '0x1', ''), weight: 2 },
        { arbitrary: anyText, weight: 1 },
      );
    case 'limit':
      return fc.oneof(
        { arbitrary: fc.integer({ min: 1, max: 12 }).map(String), weight: 4 },
        { arbitrary: fc.constantFrom('0', '500', '501', '9999', '10000', '99999999', '-1', '', '01', '1.0', '+5'), weight: 2 },
        { arbitrary: anyText, weight: 1 },
      );
    case 'cursor':
      return cursorText();
    case 'type':
      return fc.oneof({ arbitrary: fc.constantFrom('test.created', 'test.updated', 'nope'), weight: 3 }, { arbitrary: anyText, weight: 1 });
    case 'status':
      return fc.oneof({ arbitrary: fc.constantFrom('open', 'closed'), weight: 3 }, { arbitrary: anyText, weight: 1 });
    case 'from':
    case 'to':
      return timestampValue;
    case 'order':
      return fc.oneof({ arbitrary: fc.constantFrom('asc', 'desc'), weight: 3 }, { arbitrary: fc.constantFrom('ASC', 'Desc', '', 'random'), weight: 1 });
  }
}

const randomParamName = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'LIMIT', 'Limit', 'limit ', 'limit[]', 'filter', 'page', 'offset', 'since', ''),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
);

/** A raw query string for GET /v1/pay/events (without the `?`). */
function eventsQuery(): fc.Arbitrary<string> {
  const structured = fc
    .record({
      present: fc.subarray([...EVENT_PARAMS]),
      real_cursor: fc.option(fc.record({ index: fc.nat(), keep_filters: fc.boolean(), explicit_order: fc.boolean() }), { nil: undefined, freq: 3 }),
      extra: fc.array(
        fc.oneof(
          fc.record({ name: randomParamName, value: fc.option(anyText), how: encoding }).map(encodePart),
          queryJunk,
          fc.constantFrom(...EVENT_PARAMS).map((name) => `${name}=1`),
        ),
        { maxLength: 2 },
      ),
      extra_weight: fc.nat({ max: 3 }),
      how: encoding,
    })
    .chain(({ present, real_cursor, extra, extra_weight, how }) => {
      const valueArbs: Partial<Record<EventParam, fc.Arbitrary<string>>> = {};
      for (const name of present) valueArbs[name] = eventParamValue(name);
      return fc.record(valueArbs as Record<EventParam, fc.Arbitrary<string>>).chain((values) => {
        const params = new Map<string, string>(Object.entries(values));
        if (real_cursor) {
          const cursor = realCursors[real_cursor.index % realCursors.length] as RealCursor;
          params.set('cursor', cursor.text);
          if (real_cursor.keep_filters) {
            for (const name of ['type', 'status', 'from', 'to', 'order'] as const) params.delete(name);
            for (const [name, value] of Object.entries(cursor.query)) params.set(name, value);
            if (real_cursor.explicit_order && !params.has('order')) params.set('order', 'asc');
          }
        }
        const parts = [...params].map(([name, value]) => encodePart({ name, value, how }));
        const withExtra = extra_weight === 0 ? [...parts, ...extra] : parts;
        return fc.shuffledSubarray(withExtra, { minLength: withExtra.length, maxLength: withExtra.length }).map((shuffled) => shuffled.join('&'));
      });
    });
  const random = fc
    .array(fc.record({ name: fc.oneof(fc.constantFrom(...EVENT_PARAMS), randomParamName), value: fc.option(anyText), how: encoding }), { maxLength: 8 })
    .map((parts) => parts.map(encodePart).join('&'));
  const many = fc.integer({ min: 45, max: 60 }).map((count) => Array.from({ length: count }, (_, index) => `p${index}=1`).join('&'));
  return fc.oneof({ arbitrary: structured, weight: 8 }, { arbitrary: random, weight: 2 }, { arbitrary: many, weight: 1 });
}

// ===================================================================================================
// Property 3: bodies of the write route.

type BodySpec = { kind: 'text'; text: string } | { kind: 'bytes'; bytes: Uint8Array } | { kind: 'huge'; json: boolean };

function materialise(spec: BodySpec): Buffer {
  switch (spec.kind) {
    case 'text':
      return Buffer.from(spec.text, 'utf8');
    case 'bytes':
      return Buffer.from(spec.bytes);
    case 'huge':
      return spec.json
        ? Buffer.from(`{"amount_minor":1,"note":"${'n'.repeat(JSON_BODY_LIMIT_BYTES)}"}`, 'utf8')
        : Buffer.alloc(JSON_BODY_LIMIT_BYTES + 1, 0x61);
  }
}

const noteText = fc.oneof(
  fc.string({ maxLength: 50 }),
  fc.string({ unit: 'binary', maxLength: 25 }),
  fc.constantFrom('x'.repeat(50), 'ไทย'.repeat(16), '', '\u0000', '\ud800', '"\\'),
);

const validWrite = fc.record({
  amount_minor: fc.oneof(fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), fc.constant(Number.MAX_SAFE_INTEGER)),
  note: noteText,
});

/** JSON texts close to a valid write: odd number literals, wrong types, extra, duplicate or missing keys. */
const nearValidTestWrite: fc.Arbitrary<string> = fc
  .record({
    amount: numberLiteral,
    note: fc.oneof(noteText.map((note) => JSON.stringify(note)), fc.constantFrom(`"${'x'.repeat(51)}"`, '5', 'null', '["a"]', '{}', 'true')),
    swap: fc.boolean(),
    extra: fc.constantFrom('', '', ',"extra":1', ',"Amount_minor":1', ',"note":"dup"', ',"amount_minor":"dup"', ',"":0'),
    drop: fc.constantFrom('none', 'none', 'amount', 'note'),
  })
  .map(({ amount, note, swap, extra, drop }) => {
    const members = [drop === 'amount' ? null : `"amount_minor":${amount}`, drop === 'note' ? null : `"note":${note}`].filter((item) => item !== null);
    if (swap) members.reverse();
    return `{${members.join(',')}${members.length === 0 ? extra.slice(1) : extra}}`;
  });

function writeRequest() {
  const text = (value: string): BodySpec => ({ kind: 'text', text: value });
  const body: fc.Arbitrary<BodySpec> = fc.oneof(
    { arbitrary: fc.tuple(validWrite, fc.constantFrom<0 | 1 | 2>(0, 1, 2), fc.boolean()).map(([value, spacing, bom]) => text(jsonText(value, spacing, bom))), weight: 5 },
    { arbitrary: nearValidTestWrite.map(text), weight: 4 },
    { arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value) => text(JSON.stringify(value))), weight: 2 },
    { arbitrary: fc.tuple(validWrite, fc.nat()).map(([value, cut]) => { const whole = JSON.stringify(value); return text(whole.slice(0, cut % whole.length)); }), weight: 2 },
    { arbitrary: pollutedJson.map(text), weight: 1 },
    { arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes): BodySpec => ({ kind: 'bytes', bytes })), weight: 1 },
    { arbitrary: fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.boolean()).map(([depth, arrays]) => text(arrays ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`)), weight: 1 },
    { arbitrary: fc.boolean().map((json): BodySpec => ({ kind: 'huge', json })), weight: 1 },
    { arbitrary: fc.constant(text('')), weight: 1 },
  );
  const contentType = fc.oneof(
    { arbitrary: fc.constant('application/json'), weight: 8 },
    { arbitrary: fc.constantFrom('application/json; charset=utf-8', 'Application/JSON', 'APPLICATION/JSON;charset=UTF-8', 'application/json ; charset=utf-8'), weight: 2 },
    {
      arbitrary: fc.constantFrom(
        'text/plain', 'multipart/form-data; boundary=xyz', 'application/x-www-form-urlencoded', 'application/jsonx', 'application/json-patch+json',
        'application/vnd.api+json', 'text/json', 'application/*', '*/*', 'json',
      ),
      weight: 2,
    },
    { arbitrary: fc.constant(null), weight: 1 },
    { arbitrary: headerValue, weight: 1 },
  );
  const key = fc.oneof({ arbitrary: headerValue.map((value) => value.slice(0, 150)), weight: 10 }, { arbitrary: fc.constantFrom(null, ''), weight: 1 });
  // The route declares no query parameters, so any one is refused.
  const query = fc.oneof(
    { arbitrary: fc.constant(''), weight: 8 },
    { arbitrary: fc.record({ name: randomParamName, value: fc.option(anyText), how: encoding }).map(encodePart), weight: 1 },
    { arbitrary: queryJunk, weight: 1 },
  );
  return fc.record({ body, content_type: contentType, key, query });
}

// ===================================================================================================
// Property 4: routes.

type RouteKind = 'merchant' | 'backoffice' | 'public';
type Role = 'platform_admin' | 'operator' | 'reviewer';
type BodyKind = 'brand' | 'merchant' | 'api_key' | 'credential';

interface BackofficeRoute {
  method: 'GET' | 'POST';
  segments: string[];
  roles: readonly Role[];
  body?: BodyKind;
  query?: 'merchants';
  creates?: BusinessTable;
  /** Changes the named target: only ever sent with ids that do not exist. */
  targets?: true;
}

const ALL_ROLES: readonly Role[] = ['platform_admin', 'operator', 'reviewer'];
const ADMIN: readonly Role[] = ['platform_admin'];
const MANAGERS: readonly Role[] = ['platform_admin', 'operator'];

const BACKOFFICE_ROUTES: readonly BackofficeRoute[] = [
  { method: 'POST', segments: ['brands'], roles: ADMIN, body: 'brand', creates: 'brands' },
  { method: 'GET', segments: ['brands'], roles: ADMIN },
  { method: 'GET', segments: ['brands', ':id'], roles: MANAGERS },
  { method: 'POST', segments: ['brands', ':id', 'suspend'], roles: ADMIN, targets: true },
  { method: 'POST', segments: ['brands', ':id', 'resume'], roles: ADMIN, targets: true },
  { method: 'POST', segments: ['merchants', ':id', 'suspend'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['merchants', ':id', 'resume'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['api-keys', ':id', 'suspend'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['api-keys', ':id', 'resume'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['api-keys', ':id', 'revoke'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['merchants'], roles: MANAGERS, body: 'merchant', creates: 'merchants' },
  { method: 'GET', segments: ['merchants'], roles: MANAGERS, query: 'merchants' },
  { method: 'GET', segments: ['merchants', ':id'], roles: ALL_ROLES },
  { method: 'POST', segments: ['merchants', ':id', 'api-keys'], roles: MANAGERS, body: 'api_key', creates: 'api_keys', targets: true },
  { method: 'GET', segments: ['merchants', ':id', 'api-keys'], roles: MANAGERS },
  { method: 'POST', segments: ['credentials'], roles: MANAGERS, body: 'credential', creates: 'backoffice_credentials' },
  { method: 'POST', segments: ['credentials', ':id', 'revoke'], roles: MANAGERS, targets: true },
  // A brand's slip providers (issue 34). The one parameter fills both the brand and the slot, so a change never
  // names a real slot: the handler answers 404 (or 422 for its body) and writes nothing.
  { method: 'GET', segments: ['brands', ':id', 'slip-providers'], roles: MANAGERS },
  { method: 'POST', segments: ['brands', ':id', 'slip-providers', ':slot'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['brands', ':id', 'slip-providers', ':slot', 'test'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['brands', ':id', 'slip-providers', ':slot', 'remove'], roles: MANAGERS, targets: true },
  // A brand's OpenID Connect provider for the console and its staff list (issue 30).
  { method: 'GET', segments: ['brands', ':id', 'console-oidc'], roles: MANAGERS },
  { method: 'POST', segments: ['brands', ':id', 'console-oidc'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['brands', ':id', 'console-oidc', 'remove'], roles: MANAGERS, targets: true },
  { method: 'GET', segments: ['brands', ':id', 'console-oidc', 'staff'], roles: MANAGERS },
  { method: 'POST', segments: ['brands', ':id', 'console-oidc', 'staff'], roles: MANAGERS, targets: true },
  { method: 'POST', segments: ['brands', ':id', 'console-oidc', 'staff', 'remove'], roles: MANAGERS, targets: true },
];

interface RouteEntry {
  method: string;
  segments: string[];
  kind: RouteKind;
  /** A public route whose query is required (a signed link): without it the answer is validation_error. */
  query_required?: true;
}

const ROUTE_TABLE: readonly RouteEntry[] = [
  { method: 'GET', segments: ['', 'v1', 'pay', 'events'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'banks'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'webhooks', 'test-vectors'], kind: 'public' },
  { method: 'GET', segments: ['', 'v1', 'webhooks', 'signing-keys'], kind: 'public' },
  { method: 'POST', segments: ['', 'v1', 'test', 'webhooks', 'replay-out-of-order'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'webhooks'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'webhooks'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id'], kind: 'backoffice' },
  { method: 'PATCH', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id'], kind: 'backoffice' },
  { method: 'DELETE', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id', 'deliveries'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id', 'deliveries', ':delivery_id'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id', 'deliveries', ':delivery_id', 'resend'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'webhooks', ':endpoint_id', 'replay'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'webhook-signing-keys', 'rotate'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'balance'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'quote'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'test', 'bank', 'accounts'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'test', 'bank', 'accounts', 'lookup'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'wallet'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'beneficiaries'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'beneficiaries', ':id'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'withdrawals'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'withdrawals'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'withdrawals', ':id'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'withdrawals', ':id', 'cancel'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'deposits'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'deposits'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'senders'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'deposits', ':id', 'legs', ':leg_ref', 'qr.png'], kind: 'public', query_required: true },
  { method: 'GET', segments: ['', 'v1', 'pay', 'deposits', ':id'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'deposits', ':id', 'cancel'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'deposits', ':id', 'slip-token'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'pay', 'deposits', ':id', 'refunds'], kind: 'merchant' },
  { method: 'GET', segments: ['', 'v1', 'pay', 'deposits', ':id', 'refunds'], kind: 'merchant' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'deposits', ':id', 'refunds'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'deposits', ':id', 'refunds'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'withdrawal-approvals'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'withdrawals', ':id'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'withdrawals', ':id', 'approve'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'withdrawals', ':id', 'reject'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'withdrawal-policy'], kind: 'backoffice' },
  { method: 'GET', segments: ['', 'v1', 'bo', 'deposit-policy'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'deposit-policy'], kind: 'backoffice' },
  { method: 'POST', segments: ['', 'v1', 'bo', 'withdrawal-policy'], kind: 'backoffice' },
  // The back-office console's one-time sign-in links (issue 30); the console's pages are under /bo, not /v1.
  { method: 'POST', segments: ['', 'v1', 'bo', 'console', 'sign-in-links'], kind: 'backoffice' },
  { method: 'POST', segments: TEST_ROUTE.split('/'), kind: 'merchant' },
  { method: 'POST', segments: TEST_ROUTE_ALT.split('/'), kind: 'merchant' },
  ...BACKOFFICE_ROUTES.map((route): RouteEntry => ({ method: route.method, segments: ['', 'v1', 'bo', ...route.segments], kind: 'backoffice' })),
];

/** The routes a raw path names, segment by segment after percent-decoding; 'malformed' if it cannot be decoded. */
function matchRoutes(rawPath: string): RouteEntry[] | 'malformed' {
  let decoded: string[];
  try {
    decoded = rawPath.split('/').map((segment) => decodeURIComponent(segment));
  } catch {
    return 'malformed';
  }
  return ROUTE_TABLE.filter(
    (route) =>
      route.segments.length === decoded.length &&
      route.segments.every((segment, index) => (segment.startsWith(':') ? (decoded[index] ?? '') !== '' : segment === decoded[index])),
  );
}

/**
 * True when a path parameter of the route can name no id: longer than the router's 200 characters,
 * or not storable text (NUL, lone surrogate). The service answers those 404 before authentication.
 */
function hasUnnameableParam(rawPath: string, segments: readonly string[]): boolean {
  const raw = rawPath.split('/');
  return segments.some((segment, index) => {
    if (!segment.startsWith(':')) return false;
    const text = raw[index] ?? '';
    if (text.length > 200) return true;
    try {
      return !isStorable(decodeURIComponent(text));
    } catch {
      return true;
    }
  });
}

const LITERAL_SEGMENTS = [
  'pay', 'events', 'banks', 'bo', 'brands', 'merchants', 'api-keys', 'credentials', 'suspend', 'resume', 'revoke', 'webhooks', 'test-vectors',
  'test-writes', 'test-writes-alt', 'v1', 'Events', 'PAY', 'balance', 'quote', 'wallet', 'test', 'bank', 'accounts', 'lookup', 'beneficiaries',
  'withdrawals', 'cancel', 'withdrawal-approvals', 'approve', 'reject', 'withdrawal-policy', 'deposits', 'slip-token', 'senders', 'deposit-policy', 'legs', 'qr.png', 'signing-keys', 'replay-out-of-order', 'deliveries', 'resend', 'replay', 'webhook-signing-keys', 'rotate',
  'slip-providers', 'primary', 'fallback', 'remove', 'console', 'sign-in-links', 'console-oidc', 'staff',
];

const pathSegment = fc.oneof(
  { arbitrary: fc.constantFrom(...LITERAL_SEGMENTS), weight: 6 },
  { arbitrary: fc.webSegment(), weight: 2 },
  { arbitrary: anyText.filter((text) => text.length < 100).map((text) => encodeURIComponent(text)), weight: 1 },
  { arbitrary: pathJunk, weight: 1 },
  { arbitrary: fc.constantFrom(...LITERAL_SEGMENTS).map((segment) => percentEncodeAll(segment)), weight: 1 },
  { arbitrary: fc.integer({ min: 150, max: 400 }).map((length) => 'a'.repeat(length)), weight: 1 },
  { arbitrary: fc.constant(''), weight: 1 },
);

function randomV1Path(): fc.Arbitrary<string> {
  return fc
    .tuple(fc.array(pathSegment, { minLength: 1, maxLength: 5 }), fc.boolean())
    .map(([segments, trailing]) => `/v1/${segments.join('/')}${trailing ? '/' : ''}`);
}

const paramText = fc.oneof(
  { arbitrary: fc.constantFrom('wl_00000000000000000000000000', 'mch_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'key_x', 'boc_x'), weight: 2 },
  { arbitrary: tokenText(1, 40), weight: 3 },
  { arbitrary: anyText.filter((text) => text.length > 0 && text.length < 60), weight: 2 },
  { arbitrary: fc.constantFrom('\u0000', 'a\u0000', '..', '.', ' ', '%'), weight: 1 },
);

function knownRoutePath(): fc.Arbitrary<string> {
  return fc
    .tuple(fc.constantFrom(...ROUTE_TABLE), paramText, fc.boolean())
    .map(([route, param, encodeAll]) =>
      route.segments.map((segment) => (segment.startsWith(':') ? (encodeAll ? percentEncodeAll(param) : encodeURIComponent(param)) : segment)).join('/'),
    );
}

// ===================================================================================================
// Property 5: the back office.

type TokenKind =
  | 'none' | 'garbage' | 'bearer_garbage' | 'bo_unknown' | 'bo_malformed' | 'sk_unknown' | 'sk_sandbox'
  | 'admin' | 'operator' | 'reviewer' | 'revoked' | 'suspended_brand_operator';

interface BackofficeRequest {
  route: BackofficeRoute;
  target: string;
  token: { kind: TokenKind; text: string };
  body: string | null;
  content_type: string | null;
}

function authorizationFor(token: { kind: TokenKind; text: string }): string | null {
  switch (token.kind) {
    case 'none':
      return null;
    case 'garbage':
      return token.text;
    case 'bearer_garbage':
      return asHeaderValue(`Bearer ${token.text}`);
    case 'bo_unknown':
      return `Bearer bo_${token.text}`;
    case 'bo_malformed':
      return asHeaderValue(`Bearer bo_${token.text}`);
    case 'sk_unknown':
      return `Bearer sk_test_${token.text}`;
    case 'sk_sandbox':
      return `Bearer ${keys.sandbox.api_key}`;
    default:
      return `Bearer ${tokens[token.kind]}`;
  }
}

const ROLE_OF: Partial<Record<TokenKind, Role>> = { admin: 'platform_admin', operator: 'operator', reviewer: 'reviewer' };

function validName(value: unknown): boolean {
  return typeof value === 'string' && value.trim().length >= 1 && value.trim().length <= 200;
}

function validId(value: unknown): boolean {
  return value === undefined || (typeof value === 'string' && value.length >= 1 && value.length <= 100);
}

function validBackofficeBody(kind: BodyKind, value: unknown): boolean {
  if (!isRecord(value)) return false;
  const only = (...allowed: string[]) => Object.keys(value).every((key) => allowed.includes(key));
  switch (kind) {
    case 'brand':
      return only('name') && validName(value.name);
    case 'merchant':
      return only('name', 'white_label_id') && validName(value.name) && validId(value.white_label_id);
    case 'credential':
      return only('name', 'role', 'white_label_id') && validName(value.name) && (value.role === 'operator' || value.role === 'reviewer') && validId(value.white_label_id);
    case 'api_key': {
      if (!only('mode', 'scopes') || (value.mode !== 'test' && value.mode !== 'live')) return false;
      const scopes = value.scopes;
      if (scopes === undefined) return true;
      return Array.isArray(scopes) && scopes.length >= 1 && scopes.length <= 3 && scopes.every((scope) => ['pay:read', 'pay:write', 'events:read'].includes(scope));
    }
  }
}

/**
 * Exact codes for the stages before the handler (`codes`, empty when every stage passes) and the codes
 * the handler itself may answer (`handler`). Undeclared query parameters and bodies of body-less routes
 * are not judged here.
 */
function backofficeVerdict(request: BackofficeRequest, bytes: Buffer): { codes: ErrorCode[]; handler: ErrorCode[] } {
  const { route, token } = request;
  const early: ErrorCode[] = route.method === 'POST' && mayBeRefusedEarly(request.content_type) ? ['unsupported_media_type'] : [];
  const handler: ErrorCode[] = ['resource_not_found', 'validation_error'];
  const refuse = (code: ErrorCode) => ({ codes: [code, ...early], handler: [] });
  const rawPath = normaliseTarget(request.target).split('?')[0] ?? '';
  if (hasUnnameableParam(rawPath, ['', 'v1', 'bo', ...route.segments])) return refuse('resource_not_found');
  switch (token.kind) {
    case 'none':
    case 'garbage':
    case 'bearer_garbage':
    case 'bo_unknown':
    case 'bo_malformed':
    case 'sk_unknown':
      return refuse('api_key_invalid');
    case 'sk_sandbox':
      return refuse('scope_denied');
    case 'revoked':
      return refuse('api_key_revoked');
    case 'suspended_brand_operator':
      return refuse('tenant_suspended');
    default:
      break;
  }
  if (!route.roles.includes(ROLE_OF[token.kind] as Role)) return refuse('scope_denied');
  if (route.method === 'POST') {
    if (early.length > 0) return { codes: early, handler: [] };
    let decoded: unknown;
    if (bytes.length > 0) {
      const result = decodeJsonBody(bytes, request.content_type);
      if (!result.ok) return refuse(result.code);
      decoded = result.value;
    }
    if (route.body && !validBackofficeBody(route.body, decoded ?? {})) return refuse('validation_error');
  }
  if (route.query === 'merchants') {
    const pairs = [...new URLSearchParams(request.target.split('?')[1] ?? '')];
    const names = pairs.map(([name]) => name);
    const repeated = new Set(names).size !== names.length;
    const wl = pairs.find(([name]) => name === 'white_label_id')?.[1];
    if (repeated || names.some((name) => name !== 'white_label_id') || (wl !== undefined && !validId(wl))) return refuse('validation_error');
  }
  return { codes: [], handler };
}

function backofficeBody(kind: BodyKind | undefined): fc.Arbitrary<string | null> {
  const name = fc.oneof(
    { arbitrary: fc.string({ minLength: 1, maxLength: 40 }), weight: 4 },
    { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }), weight: 2 },
    { arbitrary: fc.constantFrom('', '   ', 'x'.repeat(201), ' padded ', 'a\u0000b', '\ud800'), weight: 1 },
  );
  const id = fc.option(fc.oneof(tokenText(1, 30), fc.constantFrom('', 'x'.repeat(101))), { nil: undefined, freq: 2 });
  const valid: Record<BodyKind, fc.Arbitrary<Record<string, unknown>>> = {
    brand: fc.record({ name }),
    merchant: fc.record({ name, white_label_id: id }, { requiredKeys: ['name'] }),
    credential: fc.record(
      { name, role: fc.oneof({ arbitrary: fc.constantFrom('operator', 'reviewer'), weight: 4 }, { arbitrary: fc.constantFrom('platform_admin', 'admin'), weight: 1 }), white_label_id: id },
      { requiredKeys: ['name', 'role'] },
    ),
    api_key: fc.record(
      {
        mode: fc.oneof({ arbitrary: fc.constantFrom('test', 'live'), weight: 4 }, { arbitrary: fc.constant('prod'), weight: 1 }),
        scopes: fc.array(fc.oneof({ arbitrary: fc.constantFrom('pay:read', 'pay:write', 'events:read'), weight: 6 }, { arbitrary: fc.constant('admin'), weight: 1 }), { maxLength: 4 }),
      },
      { requiredKeys: ['mode'] },
    ),
  };
  const shaped = kind ? valid[kind] : fc.constant({});
  return fc.oneof(
    { arbitrary: fc.constant(null), weight: 2 },
    { arbitrary: shaped.map((value) => JSON.stringify(value)), weight: 8 },
    { arbitrary: fc.tuple(shaped, fc.constantFrom(',"extra":1', ',"name":5', ',"__proto__":{}')).map(([value, extra]) => `${JSON.stringify(value).slice(0, -1)}${Object.keys(value).length > 0 ? extra : extra.slice(1)}}`), weight: 1 },
    { arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)), weight: 1 },
    { arbitrary: fc.oneof(pollutedJson, anyText, fc.constantFrom('{', '{"name":', 'null', '[]')), weight: 1 },
  );
}

function backofficeRequest(): fc.Arbitrary<BackofficeRequest> {
  const token = fc.oneof(
    { arbitrary: fc.constantFrom<TokenKind>('admin', 'operator'), weight: 8 },
    { arbitrary: fc.constant<TokenKind>('reviewer'), weight: 1 },
    { arbitrary: fc.constantFrom<TokenKind>('none', 'sk_sandbox', 'revoked', 'suspended_brand_operator'), weight: 2 },
    { arbitrary: fc.constantFrom<TokenKind>('garbage', 'bearer_garbage', 'bo_malformed'), weight: 1 },
    { arbitrary: fc.constantFrom<TokenKind>('bo_unknown', 'sk_unknown'), weight: 1 },
  );
  return fc
    .record({
      route: fc.oneof(
        { arbitrary: fc.constantFrom(...BACKOFFICE_ROUTES), weight: 3 },
        { arbitrary: fc.constantFrom(...BACKOFFICE_ROUTES.filter((route) => route.creates || route.method === 'GET')), weight: 2 },
      ),
      kind: token,
      garbage: headerValue,
      token_text: tokenText(16, 60),
      malformed_text: fc.oneof(tokenText(0, 15), anyText),
      // Dot segments would be resolved away by URL normalisation and name another route.
      param: fc.oneof({ arbitrary: fc.nat(), weight: 1 }, { arbitrary: paramText.filter((text) => text !== '.' && text !== '..'), weight: 3 }),
      content_type: fc.oneof(
        { arbitrary: fc.constant('application/json'), weight: 8 },
        { arbitrary: fc.constantFrom('text/plain', 'application/json; charset=utf-8', null), weight: 2 },
        { arbitrary: headerValue, weight: 1 },
      ),
      query: fc.oneof(
        { arbitrary: fc.constant([] as Array<[string, string]>), weight: 2 },
        {
          arbitrary: fc.array<[string, string]>(
            fc.oneof(
              { arbitrary: fc.tuple(fc.constant<string>('white_label_id'), fc.oneof(fc.nat().map(String), paramText, fc.constant(''), fc.constant('x'.repeat(101)))), weight: 3 },
              { arbitrary: fc.tuple(randomParamName, anyText), weight: 1 },
            ),
            { minLength: 1, maxLength: 2 },
          ),
          weight: 1,
        },
      ),
      seed: fc.nat(),
    })
    .chain((base) => backofficeBody(base.route.body).map((body) => ({ ...base, body })))
    .map((base): BackofficeRequest => {
      const { route } = base;
      // Targets of state changes are never real (see `targets`); GETs also read real ids.
      const param =
        typeof base.param === 'number'
          ? route.targets
            ? `missing_${base.param}`
            : (realIds[base.param % realIds.length] as string)
          : base.param;
      const path = ['', 'v1', 'bo', ...route.segments.map((segment) => (segment.startsWith(':') ? encodeURIComponent(param) : segment))].join('/');
      const queryText = base.query
        .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(/^[0-9]+$/.test(value) ? (realIds[Number(value) % realIds.length] as string) : value)}`)
        .join('&');
      const text = base.kind === 'garbage' ? base.garbage : base.kind === 'bo_malformed' || base.kind === 'bearer_garbage' ? base.malformed_text : base.token_text;
      return {
        route,
        target: queryText.length > 0 ? `${path}?${queryText}` : path,
        token: { kind: base.kind, text },
        body: route.method === 'POST' ? base.body : null,
        content_type: route.method === 'POST' && base.body !== null ? base.content_type : null,
      };
    });
}

// ===================================================================================================
// Property 6: idempotency.

const IDEMPOTENCY_BODIES: readonly string[] = [
  '{"amount_minor":100,"note":"a"}',
  '{"note":"a","amount_minor":100}',
  '{ "amount_minor" : 100 ,\n "note" : "a" }',
  '{"amount_minor":1e2,"note":"a"}',
  '{"amount_minor":200,"note":"a"}',
  '{"amount_minor":100,"note":"b"}',
  '{"amount_minor":100,"note":"a","extra":true}',
  '{"amount_minor":-100,"note":"a"}',
  '{"amount_minor":100,"note":"a"',
  '',
];

// ===================================================================================================
// Property 1a: a signature over another canonical string.

function wrongSignature(kind: string, target: string, nonce: string, timestampSeconds: number, correct: string): string {
  const sign = (overrides: Partial<SignedInput> & { secret?: string }) => {
    const credentials = overrides.secret ? { ...keys.sandbox, signing_secret: overrides.secret } : keys.sandbox;
    return signedRequestHeaders({ target, nonce, timestamp_seconds: timestampSeconds, credentials, ...overrides })['pg-signature'] as string;
  };
  switch (kind) {
    case 'method':
      return sign({ method: 'POST' });
    case 'path':
      return sign({ target: target.replace('/v1/pay/', '/v1/pay/x') });
    case 'query':
      return sign({ target: target.includes('?') ? `${target}&x=1` : `${target}?x=1` });
    case 'body':
      return sign({ body: '{}' });
    case 'idempotency_key':
      return sign({ idempotency_key: 'k' });
    case 'version':
      // Not a YYYY-MM-DD value, so that a PG-Version mutation can never coincide with it: a signature
      // over a well-formed unsupported version that the header also names is valid, and answers
      // api_version_unsupported (property 1b covers that case).
      return sign({ api_version: 'v2026-08-02' });
    case 'secret':
      return sign({ secret: keys.live.signing_secret });
    case 'timestamp':
      return sign({ timestamp_seconds: timestampSeconds + 1 });
    case 'nonce':
      return sign({ nonce: `${nonce}x` });
    case 'uppercase_hex':
      return `v1=${correct.slice(3).toUpperCase()}`;
    default:
      return `v2=${correct.slice(3)}`;
  }
}
