import crypto from 'node:crypto';
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../../src/http/canonical.ts';
import { apiRoutesOf, type ApiRoute } from '../../src/http/server.ts';
import { codeToStatus, ERROR_CODES, type ErrorCode } from '../../src/platform/errors.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { anyText, asHeaderValue, encodeQueryText, encoding, headerValue, pathJunk, pollutedJson, queryJunk, tokenText } from '../support/arbitraries.ts';
import { createDeposit, depositPolicyBody, multipartBody, type CreatedDeposit } from '../support/slips.ts';
import { backofficeRequest, buildTenantWorld, STAFF_NOTE, type TenantWorld } from '../support/tenant-world.ts';
import { installWriteLog, type WriteLog } from '../support/write-log.ts';

/**
 * Generated requests against every route of the catalogue, by family (issue 13, item 3): merchant
 * (signed correctly most of the time, so that requests pass authentication and reach validation and
 * the handlers), slip intake (with real and forged capabilities), back office (with every kind of
 * staff token and junk), and public. Requests carry hostile headers (repeated credentials, spoofed
 * client addresses, odd hosts, huge values, unsupported charsets and encodings) and hostile bodies
 * (mutated valid bodies, prototype keys, invalid UTF-8, truncated JSON, deep nesting, junk bytes).
 *
 * For every answer: never 5xx; an error is exactly a catalogue code with its status and the request's
 * id; a refusal changed nothing (a trigger logs every committed write, see support/write-log.ts), the
 * one documented exception being `beneficiary_not_verified`, which keeps the beneficiary it created.
 * Requests that reach a handler legitimately may change state. Each family runs at least 10,000
 * requests (FUZZ_RUNS raises it; FUZZ_SEED replays a run) and must reach past authentication for a
 * large share of them, so that the count is not spent at the door.
 *
 * test/http/property-requests.test.ts checks the pipeline's own rules in depth on a test route (rate
 * headers, idempotency model, cursors); test/slips/fuzz.test.ts follows hostile files through the
 * consumer. This file covers breadth: every real route, every family, tens of thousands of requests.
 */

/** Requests per family: 10,000 in CI; FUZZ_RUNS changes it for a longer (or a quick local) run. */
const RUNS = Number(process.env.FUZZ_RUNS ?? 10_000);
const SEED = Number(process.env.FUZZ_SEED ?? 20_261_301);
const API_VERSION = '2026-08-01';
const TINY_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
const AUTH_CODES = new Set<string>([
  'api_key_invalid', 'signature_invalid', 'timestamp_out_of_window', 'nonce_replayed', 'api_key_revoked', 'tenant_suspended', 'scope_denied',
  'api_version_unsupported', 'slip_token_invalid', 'slip_token_expired',
]);
/** Refusals that keep writes by design (src/idempotency/service.ts, `commit_writes`): the code and the tables it may write. */
const REFUSALS_THAT_KEEP_WRITES: Record<string, ReadonlySet<string>> = {
  beneficiary_not_verified: new Set(['beneficiaries', 'jobs', 'events', 'event_sequences']),
};

type Family = 'merchant' | 'slip_intake' | 'backoffice' | 'public';

interface FuzzRequest {
  family: Family;
  route: string;
  method: string;
  url: string;
  headers: Record<string, string | string[]>;
  payload?: Buffer;
  remote_address?: string;
}

interface FamilyStats {
  sent: number;
  past_authentication: number;
  successes: number;
  routes_with_success: Set<string>;
  answers: Map<string, number>;
  elapsed_ms: number;
  /** CPU time of this process over the family (user + system): what the run costs a CI machine, whatever else runs. */
  cpu_ms: number;
}

let w: TenantWorld;
let log: WriteLog;
const stats = new Map<Family, FamilyStats>();
/** Keys and tokens beyond the world's: a read-only key, a revoked key, a revoked staff token. */
const extra = {} as { read_only: MerchantCredentials; revoked: MerchantCredentials; revoked_staff: string; other_reviewer: string };
const capabilities: CreatedDeposit[] = [];
let uniqueCounter = 0;
const unique = () => `${process.pid}${(uniqueCounter += 1)}`;

beforeAll(async () => {
  w = await buildTenantWorld();
  const admin = w.staff.admin;
  const bo = (method: string, url: string, body?: unknown) => backofficeRequest(w.app, admin, method, url, body);
  const key = async (scopes?: string[]) => {
    const created = (await bo('POST', `/v1/bo/merchants/${w.victim.merchant_id}/api-keys`, { mode: 'test', ...(scopes ? { scopes } : {}) })).json<{ id: string; api_key: string; signing_secret: string }>();
    return { id: created.id, credentials: { ...w.victim, api_key: created.api_key, signing_secret: created.signing_secret } };
  };
  extra.read_only = (await key(['pay:read'])).credentials;
  const revoked = await key();
  expect((await bo('POST', `/v1/bo/api-keys/${revoked.id}/revoke`)).statusCode).toBe(200);
  extra.revoked = revoked.credentials;
  const staff = (await bo('POST', '/v1/bo/credentials', { white_label_id: w.victim.white_label_id, role: 'operator', name: 'Revoked operator' })).json<{ id: string; token: string }>();
  expect((await bo('POST', `/v1/bo/credentials/${staff.id}/revoke`)).statusCode).toBe(200);
  extra.revoked_staff = staff.token;
  extra.other_reviewer = (await bo('POST', '/v1/bo/credentials', { white_label_id: w.other_brand.white_label_id, role: 'reviewer', name: 'Other reviewer' })).json<{ token: string }>().token;
  // Orders with capabilities for the slip family: the victim's, another merchant's of its brand, another brand's.
  for (const credentials of [w.victim, w.victim, w.victim, w.same_brand, w.same_brand, w.other_brand]) {
    // An hour to pay: the families below move the clock by a minute every 400 requests (fresh rate windows).
    capabilities.push(await createDeposit(w.app, { amount_minor: 10_000 + capabilities.length * 1_000, credentials, expires_in_seconds: 3600 }));
  }
  capabilities.push(w.objects.open_deposit);
  log = await installWriteLog(w.app.testDatabase.database);
}, 120_000);

afterAll(async () => {
  const lines = [...stats].map(([family, item]) => {
    const top = [...item.answers].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([answer, count]) => `${answer}=${count}`).join(' ');
    return `${family}: ${item.sent} requests in ${Math.round(item.elapsed_ms)} ms (${Math.round(item.cpu_ms)} ms CPU), ${item.past_authentication} past authentication, ${item.successes} 2xx on ${item.routes_with_success.size} routes; ${top}`;
  });
  process.stdout.write(`fuzz (seed ${SEED}):\n${lines.join('\n')}\n`);
  await w?.close();
});

// ---------------------------------------------------------------------------------------------------
// Shared arbitraries.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function nested(depth: number): Json {
  let value: Json = 1;
  for (let index = 0; index < depth; index += 1) value = index % 2 === 0 ? [value] : { a: value };
  return value;
}

const hostileValue: fc.Arbitrary<Json> = fc.oneof(
  { arbitrary: anyText, weight: 4 },
  { arbitrary: fc.integer(), weight: 2 },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
  {
    arbitrary: fc.constantFrom<Json>(
      null, true, false, [], {}, -1, 0, 1e21, '', ' ', '0', '10000', 'THB', 'USD', '2026-08-01T00:00:00.000Z', '2026-02-30T00:00:00.000Z',
      'https://example.com/x', '../../etc/passwd', '<script>alert(1)</script>', "'; DROP TABLE deposit_orders; --", 'นาย สมชาย ใจดี', '\u0000', '\ud800', '🙂'.repeat(40),
      'sk_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'dep_01K0NOSUCHID000000000000000',
    ),
    weight: 3,
  },
  { arbitrary: fc.integer({ min: 20, max: 200 }).map(nested), weight: 1 },
  { arbitrary: fc.integer({ min: 200, max: 20_000 }).map((length) => 'x'.repeat(length)), weight: 1 },
  { arbitrary: fc.array(fc.oneof(fc.integer(), fc.string({ maxLength: 5 })), { maxLength: 30 }), weight: 1 },
);

type Mutation = { op: 'drop'; index: number } | { op: 'set'; index: number; value: Json } | { op: 'add'; name: string; value: Json } | { op: 'wrap' };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('drop' as const), index: fc.nat() }),
  { arbitrary: fc.record({ op: fc.constant('set' as const), index: fc.nat(), value: hostileValue }), weight: 3 },
  fc.record({
    op: fc.constant('add' as const),
    name: fc.oneof(fc.constantFrom('__proto__', 'constructor', 'extra', 'livemode', 'merchant_id', 'white_label_id', 'status', 'amount_minor ', 'AMOUNT_MINOR', ''), fc.string({ maxLength: 12 })),
    value: hostileValue,
  }),
  fc.constant({ op: 'wrap' as const }),
);

/** Applies mutations to a template object; keys such as `__proto__` become own properties, as JSON sends them. */
function mutate(template: Record<string, Json>, mutations: readonly Mutation[]): Json {
  let value: Json = { ...template };
  for (const change of mutations) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) break;
    const record: Record<string, Json> = value;
    const keys = Object.keys(record);
    if (change.op === 'wrap') value = [record];
    else if (change.op === 'add') Object.defineProperty(record, change.name, { value: change.value, enumerable: true, writable: true, configurable: true });
    else if (keys.length > 0) {
      const key = keys[change.index % keys.length]!;
      if (change.op === 'drop') delete record[key];
      else record[key] = change.value;
    }
  }
  return value;
}

const INVALID_UTF8 = Buffer.from([0x7b, 0x22, 0x6e, 0x6f, 0x74, 0x65, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0xff, 0x22, 0x7d]);

/** A body: the route's valid body (sometimes exactly), mutated, re-encoded, or junk. */
function bodyArbitrary(template: (() => Record<string, Json>) | null): fc.Arbitrary<Buffer | undefined> {
  // Mostly mutated (validation is where hostile input meets the route); the exact body now and then, so
  // that every handler runs, but not so often that the run is spent in the costly successes.
  const fromTemplate = template
    ? fc
        .tuple(fc.oneof({ arbitrary: fc.constant([]), weight: 1 }, { arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }), weight: 7 }), fc.constantFrom<0 | 2>(0, 0, 0, 2), fc.nat(999))
        .map(([mutations, spacing, roll]) => {
          const text = JSON.stringify(mutate(template(), mutations), null, spacing === 0 ? undefined : spacing) ?? 'null';
          if (roll < 30) return Buffer.from(`\uFEFF${text}`);
          if (roll < 60) return Buffer.from(text.slice(0, Math.floor(text.length / 2)));
          // One in a thousand: past the 1 MiB limit of JSON bodies.
          if (roll === 999) return Buffer.concat([Buffer.from(text), Buffer.alloc(1024 * 1024, 0x20)]);
          return Buffer.from(text);
        })
    : fc.constant(undefined);
  return fc.oneof(
    { arbitrary: fromTemplate, weight: 12 },
    { arbitrary: fc.constant(undefined), weight: 2 },
    { arbitrary: pollutedJson.map((text) => Buffer.from(text)), weight: 1 },
    { arbitrary: fc.constantFrom(INVALID_UTF8, Buffer.from('{"a":1}{"b":2}'), Buffer.from('[]'), Buffer.from('null'), Buffer.from('{}'), Buffer.from('{"a":1,}')), weight: 1 },
    { arbitrary: fc.uint8Array({ maxLength: 200 }).map((bytes) => Buffer.from(bytes)), weight: 1 },
    { arbitrary: fc.dictionary(fc.string({ maxLength: 10 }), hostileValue, { maxKeys: 5 }).map((value) => Buffer.from(JSON.stringify(value))), weight: 2 },
  );
}

const contentType: fc.Arbitrary<string | null> = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 14 },
  {
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8', 'application/json; charset=UTF-8', 'application/JSON', 'application/json; charset=latin1', 'application/json; charset=utf-16',
      'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json;', 'application/problem+json', '*/*', '',
    ),
    weight: 3,
  },
  { arbitrary: headerValue, weight: 1 },
  { arbitrary: fc.constant(null), weight: 1 },
);

/** Headers a hostile client adds: spoofed addresses, odd hosts, method overrides, huge values, encodings. */
const hostileHeaders: fc.Arbitrary<Record<string, string | string[]>> = fc
  .array(
    fc.oneof(
      fc.record({ name: fc.constantFrom('x-forwarded-for', 'x-real-ip', 'forwarded', 'true-client-ip'), value: fc.constantFrom('127.0.0.1', '203.0.113.1, 10.0.0.1', 'for=unknown', '::1', '') }),
      fc.record({ name: fc.constant('host'), value: fc.constantFrom('evil.example', 'localhost:0', 'localhost', 'a'.repeat(300), '127.0.0.1:1', '[::1]') }),
      fc.record({ name: fc.constantFrom('x-http-method-override', 'x-method-override'), value: fc.constantFrom('DELETE', 'PUT', 'GET') }),
      fc.record({ name: fc.constantFrom('content-encoding', 'transfer-encoding', 'expect', 'accept', 'accept-charset', 'range'), value: fc.constantFrom('gzip', 'br', '100-continue', '*/*;q=0', 'iso-8859-1', 'bytes=0-1') }),
      fc.record({ name: fc.constantFrom('cookie', 'origin', 'referer', 'user-agent'), value: headerValue }),
      fc.record({ name: fc.constant('x-padding'), value: fc.integer({ min: 1000, max: 8000 }).map((length) => 'p'.repeat(length)) }),
      fc.record({ name: fc.constantFrom('x-pg-livemode', 'x-merchant-id', 'x-white-label-id'), value: fc.constantFrom('true', 'mch_01K0NOSUCHID000000000000000', 'wl_01K0NOSUCHID000000000000000') }),
    ),
    { maxLength: 2 },
  )
  .map((pairs) => Object.fromEntries(pairs.map((pair) => [pair.name, pair.value])));

const junkSegment: fc.Arbitrary<string> = fc.oneof(
  pathJunk,
  tokenText(1, 40),
  fc.string({ maxLength: 30 }).map((text) => encodeURIComponent(text) || 'x'),
  fc.constantFrom('x'.repeat(199), 'x'.repeat(201), 'dep_', 'null', '0', '-1', '%27%20OR%201%3D1', '..%2F..%2Fetc%2Fpasswd', 'dep_01K0NOSUCHID000000000000000'),
);

function pathArbitrary(url: string, pool: (param: string) => readonly string[]): fc.Arbitrary<string> {
  const parts = url.split('/');
  return fc
    .tuple(
      ...parts.map((part) => {
        if (!part.startsWith(':')) return fc.constant(part);
        const ids = pool(part.slice(1));
        return ids.length === 0 ? junkSegment : fc.oneof({ arbitrary: fc.constantFrom(...ids), weight: 6 }, { arbitrary: junkSegment, weight: 1 });
      }),
    )
    .map((segments) => segments.join('/'));
}

/** A query: the route's valid one (sometimes exactly), with values changed, names added, junk appended. */
function queryArbitrary(template: Record<string, string> | null): fc.Arbitrary<string> {
  const base = template ?? {};
  const entries = fc
    .tuple(
      fc.array(fc.oneof(fc.record({ drop: fc.nat() }), fc.record({ set: fc.nat(), value: anyText }), fc.record({ add: fc.oneof(fc.constantFrom('__proto__', 'limit', 'cursor', 'white_label_id', 'merchant_id', 'x'), fc.string({ maxLength: 8 })), value: anyText })), { minLength: 1, maxLength: 2 }),
      encoding,
    )
    .map(([changes, how]) => {
      const pairs: [string, string][] = Object.entries(base);
      for (const change of changes) {
        if ('drop' in change && pairs.length > 0) pairs.splice(change.drop % pairs.length, 1);
        else if ('set' in change && pairs.length > 0) pairs[change.set % pairs.length]![1] = change.value;
        else if ('add' in change) pairs.push([change.add, change.value]);
      }
      return pairs.map(([name, value]) => `${encodeQueryText(name, how)}=${encodeQueryText(value, how)}`).join('&');
    });
  return fc.oneof(
    { arbitrary: entries, weight: 8 },
    { arbitrary: fc.constant(new URLSearchParams(base).toString()), weight: 1 },
    { arbitrary: queryJunk, weight: 1 },
    { arbitrary: fc.constant(''), weight: 1 },
  );
}

const OTHER_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

function methodArbitrary(method: string): fc.Arbitrary<string> {
  return fc.oneof({ arbitrary: fc.constant(method), weight: 19 }, { arbitrary: fc.constantFrom(...OTHER_METHODS), weight: 1 });
}

/** TEST-NET addresses as the client's (request.ip): each request its own rate bucket where the bucket is by address. */
const clientAddress: fc.Arbitrary<string> = fc.tuple(fc.constantFrom('192.0.2', '198.51.100', '203.0.113'), fc.integer({ min: 1, max: 254 })).map(([net, host]) => `${net}.${host}`);

function withQuery(path: string, query: string): string {
  return query === '' ? path : `${path}?${query}`;
}

// ---------------------------------------------------------------------------------------------------
// Sending and checking.

function statsOf(family: Family): FamilyStats {
  let item = stats.get(family);
  if (!item) {
    item = { sent: 0, past_authentication: 0, successes: 0, routes_with_success: new Set(), answers: new Map(), elapsed_ms: 0, cpu_ms: 0 };
    stats.set(family, item);
  }
  return item;
}

function describeRequest(request: FuzzRequest, response: LightMyRequestResponse): string {
  const headers = JSON.stringify(request.headers).slice(0, 600);
  const payload = request.payload ? request.payload.subarray(0, 300).toString('utf8') : '';
  return `${request.family} ${request.method} ${request.url.slice(0, 300)} headers=${headers} body=${payload} → ${response.statusCode} ${response.body.slice(0, 400)}`;
}

async function send(request: FuzzRequest): Promise<LightMyRequestResponse> {
  const options: InjectOptions = {
    method: request.method as InjectOptions['method'],
    url: request.url,
    headers: request.headers as InjectOptions['headers'],
    ...(request.payload ? { payload: request.payload } : {}),
    ...(request.remote_address ? { remoteAddress: request.remote_address } : {}),
  };
  return w.app.instance.app.inject(options);
}

/** Fails with the request and its answer in the message; built only on failure (this runs 40,000 times). */
function fail(problem: string, request: FuzzRequest, response: LightMyRequestResponse): never {
  const earlier = recent.map((item) => `  ${describeRequest(item.request, item.response).slice(0, 700)}`).join('\n');
  throw new Error(`${problem}: ${describeRequest(request, response)}\nthe requests before it:\n${earlier}`);
}

/** The last few requests, for the message of a failure that an earlier request may have caused. */
const recent: { request: FuzzRequest; response: LightMyRequestResponse }[] = [];

/** Checks one answer against the invariants; returns its error code (null for a success). */
async function check(request: FuzzRequest, response: LightMyRequestResponse): Promise<string | null> {
  const status = response.statusCode;
  if (status >= 500) fail('a 5xx answer', request, response);
  if (typeof response.headers['request-id'] !== 'string') fail('no Request-Id header', request, response);
  let code: string | null = null;
  let retryable: boolean | undefined;
  if (status >= 300 && status < 400) fail('a redirect', request, response);
  if (status >= 400) {
    if (request.method === 'HEAD') {
      code = `HEAD ${status}`;
    } else {
      let body: { error?: { code?: string; request_id?: string; retryable?: boolean } } = {};
      try {
        body = JSON.parse(response.body) as typeof body;
      } catch {
        fail('an error body that is not JSON', request, response);
      }
      code = String(body.error?.code);
      retryable = body.error?.retryable;
      if (!(ERROR_CODES as readonly string[]).includes(code)) fail('a code outside the catalogue', request, response);
      if (codeToStatus(code as ErrorCode) !== status) fail(`a status other than ${code}'s`, request, response);
      // A replayed refusal is the original answer, with the request id of the request that was refused.
      const replayed = response.headers['idempotent-replay'] === 'true';
      if (!replayed && body.error?.request_id !== response.headers['request-id']) fail('an error without its request id', request, response);
    }
  } else if (status !== 200 && status !== 201 && status !== 202 && status !== 204) {
    fail('an undocumented success status', request, response);
  }
  const writes = await log.since();
  if (status >= 400 && writes.length > 0) {
    const kept = code ? REFUSALS_THAT_KEEP_WRITES[code] : undefined;
    // A refusal no retry can turn is kept by the request's Idempotency-Key (spec, Common request rules 2).
    const keyKeepsRefusal = retryable === false && status !== 429 && status < 500 && Object.keys(request.headers).some((name) => name.toLowerCase() === 'idempotency-key');
    const unexpected = writes.filter((write) => !kept?.has(write.table) && !(keyKeepsRefusal && write.table === 'idempotency_records'));
    if (unexpected.length > 0) fail(`a refusal wrote ${JSON.stringify(unexpected.slice(0, 5))}`, request, response);
  }
  return code;
}

async function runFamily(family: Family, arbitrary: fc.Arbitrary<FuzzRequest>, before?: (sent: number) => void): Promise<FamilyStats> {
  const item = statsOf(family);
  const started = performance.now();
  const cpu = process.cpuUsage();
  await fc.assert(
    fc.asyncProperty(arbitrary, async (request) => {
      before?.(item.sent);
      item.sent += 1;
      const response = await send(request);
      const code = await check(request, response);
      recent.push({ request, response });
      if (recent.length > 3) recent.shift();
      const answer = code ?? String(response.statusCode);
      item.answers.set(answer, (item.answers.get(answer) ?? 0) + 1);
      if (code === null || !AUTH_CODES.has(code)) item.past_authentication += 1;
      if (code === null) {
        item.successes += 1;
        item.routes_with_success.add(request.route);
      }
    }),
    { numRuns: RUNS, seed: SEED, endOnFailure: true },
  );
  item.elapsed_ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  item.cpu_ms = (used.user + used.system) / 1000;
  return item;
}

function routesOf(kind: ApiRoute['kind']): ApiRoute[] {
  return apiRoutesOf(w.app.instance.app).filter((route) => route.kind === kind);
}

function routeKey(route: ApiRoute): string {
  return `${route.method} ${route.url}`;
}

// ---------------------------------------------------------------------------------------------------
// Identifier pools: real ids of the right kind (the caller's own and other tenants'), for each path parameter.

function depositIds(): string[] {
  const o = w.objects;
  return [o.open_deposit.id, o.overpaid_deposit_id, o.settled_deposit_id, ...o.review_deposit_ids, o.canceled_deposit_id, ...capabilities.map((item) => item.id)];
}

function withdrawalIds(): string[] {
  const o = w.objects;
  return [o.filled_withdrawal_id, o.open_withdrawal_id, ...o.approval_withdrawal_ids];
}

/** Ids for a merchant route's parameter (the victim is the caller): by the path it sits in. */
function merchantPool(url: string): (param: string) => readonly string[] {
  const o = w.objects;
  return (param) => {
    if (param === 'event_id') return [o.event_id];
    if (url.startsWith('/v1/pay/deposits/')) return depositIds();
    if (url.startsWith('/v1/pay/withdrawals/')) return withdrawalIds();
    if (url.startsWith('/v1/pay/beneficiaries/')) return [o.beneficiary_id];
    if (url.startsWith('/v1/pay/disputes/')) return [...o.dispute_ids];
    if (url.startsWith('/v1/pay/claims/')) return [o.claim_id];
    // The victim's own clock is left out: an attached clock whose advance never runs (no worker here)
    // would turn every later write into test_clock_advancing.
    if (url.startsWith('/v1/test/clocks/')) return ['tclk_01K0NOSUCHID000000000000000'];
    return [];
  };
}

// ---------------------------------------------------------------------------------------------------
// The merchant family.

const MERCHANT_BODIES: Record<string, () => Record<string, Json>> = {
  'POST /v1/pay/deposits': () => {
    const u = unique();
    return {
      amount_minor: 10_000 + (Number(u.slice(-2)) % 20) * 100,
      currency: 'THB',
      merchant_reference: `fz-${u}`,
      end_user_ref: `fz-user-${u}`,
      sender: { bank_code: '004', account_number: `66${u.slice(-8).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี' },
      client: { device_fingerprint: `device-${u}`, ip: '203.0.113.5', user_agent: 'fuzz' },
    };
  },
  'POST /v1/pay/withdrawals': () => ({ amount_minor: 10_000, currency: 'THB', merchant_reference: `fz-${unique()}`, end_user_ref: 'payee-fuzz', beneficiary_id: w.objects.beneficiary_id }),
  'POST /v1/pay/beneficiaries': () => ({ bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }),
  'POST /v1/pay/deposits/:id/evidence': () => ({ kind: 'bank_statement_line', reference: `STMT-${unique()}`, note: 'The statement line of the transfer' }),
  'POST /v1/pay/deposits/:id/force-complete': () => ({ verified_amount_minor: 10_000, note: STAFF_NOTE }),
  'POST /v1/pay/withdrawals/:id/disputes': () => ({ leg_ref: w.objects.filled_leg_ref, reason_code: 'AMOUNT_DIFFERS' }),
  'POST /v1/pay/deposits/:id/refunds': () => ({ amount_minor: 10_000, reason_code: 'customer_request', note: 'fuzz refund' }),
  'POST /v1/pay/disputes/:id/evidence': () => ({ kind: 'other', reference: `REF-${unique()}`, note: 'The payee statement' }),
  'POST /v1/test/bank/accounts': () => ({ bank_code: '004', account_number: `88${unique().slice(-8).padStart(8, '0')}`, holder_name_th: 'บัญชี ทดสอบ' }),
  'POST /v1/test/bank/accounts/lookup': () => ({ ...w.objects.second_bank_account }),
  'POST /v1/test/bank/transfers': () => ({ deposit_id: w.objects.open_deposit.id }),
  'POST /v1/test/clocks': () => ({ name: `clock ${unique()}` }),
  'POST /v1/test/clocks/:id/attach': () => ({}),
  'POST /v1/test/clocks/:id/detach': () => ({}),
  'POST /v1/test/clocks/:id/advance': () => ({ frozen_time: '2026-08-02T00:00:00.000Z' }),
};

function merchantQueries(): Record<string, Record<string, string>> {
  return {
    'GET /v1/pay/events': { since_sequence: '0', limit: '5' },
    'GET /v1/pay/quote': { channel: 'deposit', amount_minor: '10000' },
    'GET /v1/pay/deposits': { limit: '5', order: 'desc' },
    'GET /v1/pay/withdrawals': { limit: '5', order: 'asc', status: 'open' },
    'GET /v1/pay/senders': { end_user_ref: w.objects.sender_end_user_ref },
    'GET /v1/pay/deposits/:id/slip': { receipt_id: w.objects.overpaid_receipt_id },
    'GET /v1/test/clocks': { limit: '5' },
  };
}

type AuthMode = 'signed' | 'tampered' | 'none' | 'garbage' | 'other_key' | 'stale' | 'duplicate_authorization' | 'duplicate_idempotency' | 'lowercase_scheme';

const authMode: fc.Arbitrary<AuthMode> = fc.oneof(
  { arbitrary: fc.constant('signed' as const), weight: 40 },
  { arbitrary: fc.constantFrom<AuthMode>('tampered', 'none', 'garbage', 'other_key', 'stale', 'duplicate_authorization', 'duplicate_idempotency', 'lowercase_scheme'), weight: 8 },
);

const idempotencyKey: fc.Arbitrary<string | null> = fc.oneof(
  { arbitrary: fc.constant(null).map(() => crypto.randomUUID()), weight: 16 },
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: fc.constantFrom('fuzz-shared-1', 'fuzz-shared-2'), weight: 1 },
  { arbitrary: fc.oneof(headerValue, fc.constant('k'.repeat(256)), fc.constant('ключ')), weight: 1 },
);

function merchantArbitrary(): fc.Arbitrary<FuzzRequest> {
  const queries = merchantQueries();
  const perRoute = routesOf('merchant').map((route) => {
    const key = routeKey(route);
    const body = route.method === 'POST' ? bodyArbitrary(MERCHANT_BODIES[key] ?? (() => ({}))) : fc.oneof({ arbitrary: fc.constant(undefined), weight: 20 }, { arbitrary: bodyArbitrary(null), weight: 1 });
    return fc.record({
      route: fc.constant(key),
      method: methodArbitrary(route.method),
      path: pathArbitrary(route.url, merchantPool(route.url)),
      query: route.method === 'GET' ? queryArbitrary(queries[key] ?? null) : fc.oneof({ arbitrary: fc.constant(''), weight: 12 }, { arbitrary: queryArbitrary(null), weight: 1 }),
      body,
      content_type: contentType,
      idempotency_key: idempotencyKey,
      auth: authMode,
      other_key: fc.constantFrom('read_only', 'revoked', 'live', 'same_brand', 'other_brand'),
      api_version: fc.oneof({ arbitrary: fc.constant(API_VERSION), weight: 30 }, { arbitrary: fc.constantFrom('1999-01-01', '2026-8-1', 'latest', ''), weight: 1 }),
      skew_seconds: fc.constantFrom(301, -301, 10_000_000, -1_785_000_000),
      tamper: fc.constantFrom('signature', 'timestamp', 'nonce', 'path', 'body', 'version'),
      garbage: fc.oneof(headerValue, tokenText(0, 80).map((text) => `Bearer sk_test_${text}`), fc.constantFrom('Bearer', 'Basic dXNlcjpwYXNz', 'Bearer  sk_test_x', 'Token sk_test_x')),
      extra_headers: hostileHeaders,
    });
  });
  return fc.oneof(...perRoute).map((input): FuzzRequest => {
    const target = withQuery(input.path, input.query);
    const credentials =
      input.auth === 'other_key'
        ? { read_only: extra.read_only, revoked: extra.revoked, live: w.victim_live, same_brand: w.same_brand, other_brand: w.other_brand }[input.other_key]
        : w.victim;
    const nowSeconds = Math.floor(w.app.clock.now().getTime() / 1000);
    const payload = input.body;
    const signed = signedHeaders({
      api_key: credentials.api_key,
      signing_secret: credentials.signing_secret,
      method: input.method,
      target,
      body: payload ?? '',
      idempotency_key: input.idempotency_key ?? undefined,
      api_version: input.api_version,
      timestamp_seconds: input.auth === 'stale' ? nowSeconds + input.skew_seconds : nowSeconds,
      nonce: crypto.randomBytes(12).toString('hex'),
    });
    const headers: Record<string, string | string[]> = { ...signed };
    delete headers['content-type'];
    if (input.content_type !== null && payload) headers['content-type'] = input.content_type;
    let url = target;
    let body = payload;
    switch (input.auth) {
      case 'none':
        for (const name of ['authorization', 'pg-timestamp', 'pg-nonce', 'pg-version', 'pg-signature']) delete headers[name];
        break;
      case 'garbage':
        headers.authorization = asHeaderValue(input.garbage);
        break;
      case 'stale':
        if (input.skew_seconds === 10_000_000) headers['pg-timestamp'] = String(nowSeconds * 1000);
        break;
      case 'duplicate_authorization':
        headers.authorization = [String(signed.authorization), `Bearer ${w.same_brand.api_key}`];
        break;
      case 'duplicate_idempotency':
        headers['idempotency-key'] = [String(signed['idempotency-key'] ?? 'one'), 'two'];
        break;
      case 'lowercase_scheme':
        headers.authorization = String(signed.authorization).replace('Bearer', 'bearer');
        break;
      case 'tampered':
        if (input.tamper === 'signature') headers['pg-signature'] = String(signed['pg-signature']).replace(/.$/, (last) => (last === '0' ? '1' : '0'));
        else if (input.tamper === 'timestamp') headers['pg-timestamp'] = String(nowSeconds - 1);
        else if (input.tamper === 'nonce') headers['pg-nonce'] = 'replayed-nonce-fuzz';
        else if (input.tamper === 'path') url = `${target.split('?')[0]}x${target.includes('?') ? `?${target.split('?')[1]}` : ''}`;
        else if (input.tamper === 'body') body = Buffer.concat([payload ?? Buffer.alloc(0), Buffer.from(' ')]);
        else headers['pg-version'] = '2026-08-02';
        break;
      default:
        break;
    }
    Object.assign(headers, input.extra_headers);
    return { family: 'merchant', route: input.route, method: input.method, url, headers, ...(body && body.length > 0 ? { payload: body } : {}) };
  });
}

// ---------------------------------------------------------------------------------------------------
// The slip intake family.

function forged(token: string, how: number): string {
  const [header = '', claims = '', signature = ''] = token.split('.');
  switch (how % 6) {
    case 0:
      return `${header}.${claims}.${signature.slice(0, -1)}${signature.endsWith('A') ? 'B' : 'A'}`;
    case 1: {
      const decoded = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as Record<string, unknown>;
      return `${header}.${Buffer.from(JSON.stringify({ ...decoded, dep: w.objects.overpaid_deposit_id, exp: 9_999_999_999 })).toString('base64url')}.${signature}`;
    }
    case 2:
      return `${header}.${claims}.${signature}==`;
    case 3:
      return `${Buffer.from('{"alg":"none","kid":"slip_0"}').toString('base64url')}.${claims}.`;
    case 4:
      return token.slice(0, Math.floor(token.length / 2));
    default:
      return `${header}.${claims}`;
  }
}

function slipBodyArbitrary(): fc.Arbitrary<{ body: Buffer; content_type: string }> {
  const bytes = fc.oneof(
    fc.uint8Array({ maxLength: 1024 }).map((array) => Buffer.from(array)),
    fc.uint8Array({ maxLength: 512 }).map((array) => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.from(array)])),
    fc.constant(TINY_PNG),
    fc.uint8Array({ maxLength: 512 }).map((array) => Buffer.concat([Buffer.from('ffd8ffe000104a464946', 'hex'), Buffer.from(array)])),
  );
  const text = fc.oneof(anyText, fc.constantFrom('', '004', 'ABC123', '2026-08-01T00:00:00.000Z', '2026-13-01T00:00:00.000Z', 'ไทย', '{}', 'x'.repeat(600)));
  const jsonValue = fc.oneof(text, fc.integer(), fc.constant(null), fc.boolean(), bytes.map((buffer) => buffer.toString('base64')), fc.constant('!!!notbase64'));
  const reference = fc
    .record({ trans_ref: fc.oneof(tokenText(1, 20), text), sending_bank_code: fc.constantFrom('004', '002', '999', '4', 'abc'), occurred_at: fc.constantFrom('2026-08-01T00:00:00.000Z', '2026-02-30T00:00:00.000Z', 'yesterday') })
    .map((record) => ({ body: Buffer.from(JSON.stringify(record)), content_type: 'application/json' }));
  const json = fc
    .tuple(
      fc.dictionary(fc.constantFrom('image_base64', 'payload', 'trans_ref', 'sending_bank_code', 'occurred_at', 'note', 'amount_minor', 'file', '__proto__', 'extra'), jsonValue, { maxKeys: 4 }),
      fc.constantFrom('application/json', 'application/json; charset=utf-8'),
    )
    .map(([object, type]) => ({ body: Buffer.from(JSON.stringify(object)), content_type: type }));
  const multipart = fc
    .tuple(
      fc.array(
        fc.record({
          name: fc.constantFrom('file', 'file', 'payload', 'other', ''),
          data: bytes,
          filename: fc.option(fc.constantFrom('slip.png', 'x.jpg', '../../etc/passwd', 'a"b.png', 'สลิป.png'), { nil: undefined }),
          content_type: fc.option(fc.constantFrom('image/png', 'image/jpeg', 'text/html', 'application/octet-stream'), { nil: undefined }),
        }),
        { maxLength: 3 },
      ),
      fc.boolean(),
    )
    .map(([parts, breakBoundary]) => {
      const built = multipartBody(parts.map((part) => ({ name: part.name, data: part.data, ...(part.filename ? { filename: part.filename } : {}), ...(part.content_type ? { content_type: part.content_type } : {}) })));
      return breakBoundary ? { body: built.body, content_type: 'multipart/form-data; boundary=not-the-boundary' } : built;
    });
  const raw = fc.record({
    body: fc.oneof(bytes, fc.constant(INVALID_UTF8), pollutedJson.map((item) => Buffer.from(item))),
    content_type: fc.constantFrom('application/json', 'multipart/form-data', 'image/png', 'text/plain', 'application/x-www-form-urlencoded', '', 'application/json; charset=latin1'),
  });
  return fc.oneof({ arbitrary: reference, weight: 3 }, { arbitrary: json, weight: 4 }, { arbitrary: multipart, weight: 4 }, { arbitrary: raw, weight: 2 });
}

function slipArbitrary(): fc.Arbitrary<FuzzRequest> {
  const routes = routesOf('capability');
  return fc
    .record({
      route: fc.constantFrom(...routes),
      method: fc.oneof({ arbitrary: fc.constant('POST'), weight: 30 }, { arbitrary: fc.constantFrom('OPTIONS', 'GET', 'PUT'), weight: 1 }),
      holder: fc.nat(capabilities.length - 1),
      target: fc.oneof({ arbitrary: fc.constant('own' as const), weight: 10 }, { arbitrary: fc.constantFrom('other' as const, 'junk' as const), weight: 1 }),
      other: fc.nat(capabilities.length - 1),
      junk: junkSegment,
      token: fc.oneof(
        { arbitrary: fc.constant('valid' as const), weight: 12 },
        { arbitrary: fc.constantFrom('forged' as const, 'garbage' as const, 'none' as const, 'merchant_key' as const, 'signing_headers' as const, 'lowercase' as const, 'twice' as const), weight: 6 },
      ),
      forge: fc.nat(),
      garbage: fc.oneof(headerValue, tokenText(10, 200).map((text) => `Bearer ${text}`), fc.constant(`Bearer eyJ${'A'.repeat(2000)}`)),
      host: fc.oneof({ arbitrary: fc.constant(null), weight: 12 }, { arbitrary: fc.constantFrom('evil.example', 'localhost', 'localhost:1', ''), weight: 1 }),
      idempotency_key: idempotencyKey,
      body: slipBodyArbitrary(),
      extra_headers: hostileHeaders,
      remote_address: clientAddress,
    })
    .map((input): FuzzRequest => {
      const order = capabilities[input.holder]!;
      const upload = new URL(order.slip_upload.upload_url);
      const suffix = input.route.url.endsWith('/claims') ? 'claims' : 'slip';
      const depositId = input.target === 'own' ? order.id : input.target === 'other' ? capabilities[input.other]!.id : input.junk;
      const headers: Record<string, string | string[]> = { host: input.host ?? upload.host, 'content-type': input.body.content_type };
      const token = order.slip_upload.token;
      switch (input.token) {
        case 'valid':
          headers.authorization = `Bearer ${token}`;
          break;
        case 'forged':
          headers.authorization = `Bearer ${forged(token, input.forge)}`;
          break;
        case 'garbage':
          headers.authorization = asHeaderValue(input.garbage);
          break;
        case 'merchant_key':
          headers.authorization = `Bearer ${w.victim.api_key}`;
          break;
        case 'signing_headers':
          headers.authorization = `Bearer ${token}`;
          headers['pg-signature'] = `v1=${'0'.repeat(64)}`;
          break;
        case 'lowercase':
          headers.authorization = `bearer ${token}`;
          break;
        case 'twice':
          headers.authorization = [`Bearer ${token}`, `Bearer ${capabilities[input.other]!.slip_upload.token}`];
          break;
        default:
          break;
      }
      if (input.idempotency_key !== null) headers['idempotency-key'] = input.idempotency_key;
      Object.assign(headers, input.extra_headers);
      return {
        family: 'slip_intake',
        route: routeKey(input.route),
        method: input.method,
        url: `/v1/pay/deposits/${depositId}/${suffix}`,
        headers,
        payload: input.body.body,
        remote_address: input.remote_address,
      };
    });
}

// ---------------------------------------------------------------------------------------------------
// The back-office family.

type StaffToken = 'admin' | 'operator' | 'reviewer' | 'other_operator' | 'other_reviewer' | 'revoked' | 'integration_key' | 'garbage' | 'none';

function staffToken(name: StaffToken, garbage: string): string | null {
  switch (name) {
    case 'admin':
      return w.staff.admin;
    case 'operator':
      return w.staff.operator;
    case 'reviewer':
      return w.staff.reviewer;
    case 'other_operator':
      return w.staff.other_operator;
    case 'other_reviewer':
      return extra.other_reviewer;
    case 'revoked':
      return extra.revoked_staff;
    case 'integration_key':
      return w.victim.api_key;
    case 'garbage':
      return garbage;
    case 'none':
      return null;
  }
}

/** Ids for a back-office route's parameter; actions that would cut off the staff under test take spare objects only. */
function backofficePool(url: string): (param: string) => readonly string[] {
  const o = w.objects;
  const b = w.brand;
  const destructive = /\/(suspend|revoke)$/.test(url);
  return (param) => {
    switch (param) {
      case 'brand_id':
        return destructive ? [b.spare_brand_id] : [w.victim.white_label_id, w.other_brand.white_label_id, b.spare_brand_id];
      case 'merchant_id':
        return destructive ? [b.spare_merchant_id] : [w.victim.merchant_id, w.same_brand.merchant_id, w.other_brand.merchant_id, b.spare_merchant_id];
      case 'api_key_id':
        return [...b.spare_api_key_ids];
      case 'credential_id':
        return [...b.spare_credential_ids];
      case 'endpoint_id':
        return [o.endpoint_id, ...o.spare_endpoint_ids];
      case 'delivery_id':
        return [o.delivery_id];
      case 'deposit_id':
        return depositIds();
      case 'receipt_id':
        return [o.review_receipt_id, o.overpaid_receipt_id];
      case 'slot':
        // A brand's slip-provider slots, and one that is none.
        return ['primary', 'fallback', 'secondary'];
      case 'id':
        if (url.startsWith('/v1/bo/withdrawals/')) return withdrawalIds();
        if (url.startsWith('/v1/bo/deposits/')) return depositIds();
        if (url.startsWith('/v1/bo/disputes/')) return [...o.dispute_ids];
        if (url.startsWith('/v1/bo/claims/')) return [o.claim_id, ...b.claim_ids];
        if (url.startsWith('/v1/bo/test-clocks/')) return [o.test_clock_id];
        return [];
      default:
        return [];
    }
  };
}

function backofficeBodies(): Record<string, () => Record<string, Json>> {
  const V = w.victim.white_label_id;
  return {
    'POST /v1/bo/brands': () => ({ name: `Fuzz Brand ${unique()}` }),
    'POST /v1/bo/merchants': () => ({ name: `Fuzz Merchant ${unique()}`, white_label_id: V }),
    'POST /v1/bo/merchants/:merchant_id/api-keys': () => ({ mode: 'test' }),
    'POST /v1/bo/credentials': () => ({ name: `Fuzz reviewer ${unique()}`, role: 'reviewer', white_label_id: V }),
    'POST /v1/bo/console/sign-in-links': () => ({ white_label_id: V, role: 'reviewer', name: `Fuzz console reviewer ${unique()}` }),
    'POST /v1/bo/withdrawals/:id/approve': () => ({}),
    'POST /v1/bo/withdrawals/:id/reject': () => ({ note: STAFF_NOTE }),
    'POST /v1/bo/withdrawal-policy': () => ({
      white_label_id: V, mode: 'test', approval_threshold_minor: 100_000, approval_ttl_seconds: 3600, expires_in_seconds: 7200, max_splits: 5, min_amount_minor: 100, max_amount_minor: 10_000_000,
    }),
    'POST /v1/bo/deposit-policy': () => depositPolicyBody({ white_label_id: V }) as Record<string, Json>,
    'POST /v1/bo/webhooks': () => ({ merchant_id: w.victim.merchant_id, mode: 'test', url: w.receiver.url, description: 'fuzz' }),
    'PATCH /v1/bo/webhooks/:endpoint_id': () => ({ description: `fuzz ${unique()}` }),
    'POST /v1/bo/webhooks/:endpoint_id/replay': () => ({ only_failed: true, event_types: ['deposit.canceled'] }),
    'POST /v1/bo/webhook-signing-keys/rotate': () => ({}),
    'POST /v1/bo/reviews/:deposit_id/approve': () => ({ note: STAFF_NOTE }),
    'POST /v1/bo/reviews/:deposit_id/reject': () => ({ rejection_code: 'TRANSFER_NOT_RECEIVED', note: STAFF_NOTE }),
    'POST /v1/bo/reviews/:deposit_id/escalate': () => ({ note: STAFF_NOTE }),
    'POST /v1/bo/deposits/:id/reverse': () => ({ white_label_id: V, reason_code: 'OPS_ERROR', note: STAFF_NOTE }),
    'POST /v1/bo/deposits/:id/refunds': () => ({ white_label_id: V, amount_minor: 1_000, reason_code: 'customer_request', note: STAFF_NOTE }),
    'POST /v1/bo/disputes/:id/resolve': () => ({ white_label_id: V, outcome: 'withdrawer', note: STAFF_NOTE }),
    'POST /v1/bo/claims': () => ({
      white_label_id: V,
      deposit_id: w.brand.claimable_deposit_id,
      cause: 'additional_transfer',
      amount_minor: 1_000,
      evidence: { trans_ref: `FUZZ${unique()}` },
    }),
    'POST /v1/bo/claims/:id/investigate': () => ({ white_label_id: V }),
    'POST /v1/bo/claims/:id/resolve': () => ({ white_label_id: V, resolution_code: 'no_transfer_found', note: STAFF_NOTE }),
    'POST /v1/bo/claims/:id/reject': () => ({ white_label_id: V, note: STAFF_NOTE }),
    'POST /v1/bo/test-clocks/:id/advance': () => ({ white_label_id: V, frozen_time: '2026-08-01T04:00:00.000Z' }),
    'POST /v1/bo/brands/:brand_id/checkout-base-url': () => ({ checkout_base_url: null }),
    'POST /v1/bo/brands/:brand_id/slip-providers/:slot': () => ({ provider: 'easyslip', credentials: { key: `fuzz-easyslip-key-${unique()}` } }),
    'POST /v1/bo/brands/:brand_id/console-oidc': () => ({ issuer: 'https://idp.brand.test', client_id: `fuzz-client-${unique()}`, client_secret: `fuzz-secret-${unique()}` }),
    'POST /v1/bo/brands/:brand_id/console-oidc/staff': () => ({ subject: `fuzz-subject-${unique()}`, role: 'reviewer', name: `Fuzz OpenID reviewer ${unique()}` }),
    'POST /v1/bo/brands/:brand_id/console-oidc/staff/remove': () => ({ subject: `fuzz-subject-${unique()}` }),
  };
}

function backofficeQueries(): Record<string, Record<string, string>> {
  const V = w.victim.white_label_id;
  return {
    'GET /v1/bo/merchants': { white_label_id: V },
    'GET /v1/bo/wallet': { merchant_id: w.victim.merchant_id, mode: 'test' },
    'GET /v1/bo/withdrawal-approvals': { mode: 'test', limit: '5' },
    'GET /v1/bo/withdrawal-policy': { mode: 'test', white_label_id: V },
    'GET /v1/bo/deposit-policy': { mode: 'test', white_label_id: V },
    'GET /v1/bo/webhooks': { white_label_id: V, mode: 'test', limit: '5' },
    'GET /v1/bo/webhooks/:endpoint_id/deliveries': { status: 'succeeded', limit: '5' },
    'GET /v1/bo/reviews': { white_label_id: V, mode: 'test', limit: '5' },
    'GET /v1/bo/reviews/:deposit_id': { white_label_id: V },
    'GET /v1/bo/reviews/:deposit_id/slips/:receipt_id/image': { white_label_id: V },
    'GET /v1/bo/disputes': { white_label_id: V, status: 'open', limit: '5' },
    'GET /v1/bo/disputes/:id': { white_label_id: V },
    'GET /v1/bo/claims': { white_label_id: V, mode: 'test', limit: '5' },
    'GET /v1/bo/claims/:id': { white_label_id: V },
    'GET /v1/bo/deposits/:id/refunds': { white_label_id: V },
    'GET /v1/bo/test-clocks': { white_label_id: V, limit: '5' },
    'GET /v1/bo/test-clocks/:id': { white_label_id: V },
  };
}

function backofficeArbitrary(): fc.Arbitrary<FuzzRequest> {
  const bodies = backofficeBodies();
  const queries = backofficeQueries();
  const perRoute = routesOf('backoffice').map((route) => {
    const key = routeKey(route);
    const hasBody = route.method !== 'GET' && route.method !== 'DELETE';
    return fc.record({
      route: fc.constant(key),
      method: methodArbitrary(route.method),
      path: pathArbitrary(route.url, backofficePool(route.url)),
      query: route.method === 'GET' ? queryArbitrary(queries[key] ?? null) : fc.oneof({ arbitrary: fc.constant(''), weight: 12 }, { arbitrary: queryArbitrary(null), weight: 1 }),
      body: hasBody ? bodyArbitrary(bodies[key] ?? (() => ({}))) : fc.oneof({ arbitrary: fc.constant(undefined), weight: 20 }, { arbitrary: bodyArbitrary(null), weight: 1 }),
      content_type: contentType,
      token: fc.oneof(
        { arbitrary: fc.constantFrom<StaffToken>('admin', 'operator', 'reviewer'), weight: 16 },
        { arbitrary: fc.constantFrom<StaffToken>('other_operator', 'other_reviewer', 'revoked', 'integration_key', 'garbage', 'none'), weight: 4 },
      ),
      garbage: fc.oneof(tokenText(0, 140).map((text) => `bo_${text}`), headerValue, fc.constantFrom('bo_', 'sk_test_', 'bo_AAAAAAAAAAAAAAAA'.toLowerCase())),
      scheme: fc.oneof({ arbitrary: fc.constant('Bearer'), weight: 20 }, { arbitrary: fc.constantFrom('bearer', 'BEARER', 'Basic', ''), weight: 1 }),
      twice: fc.nat(30),
      idempotency_key: fc.option(fc.oneof(fc.uuid(), headerValue), { nil: undefined, freq: 3 }),
      extra_headers: hostileHeaders,
      remote_address: clientAddress,
    });
  });
  return fc.oneof(...perRoute).map((input): FuzzRequest => {
    const token = staffToken(input.token, input.garbage);
    const headers: Record<string, string | string[]> = {};
    if (token !== null) headers.authorization = asHeaderValue(`${input.scheme} ${token}`);
    if (input.twice === 0 && token !== null) headers.authorization = [`Bearer ${token}`, `Bearer ${w.staff.other_operator}`];
    if (input.body && input.content_type !== null) headers['content-type'] = input.content_type;
    if (input.idempotency_key !== undefined) headers['idempotency-key'] = asHeaderValue(input.idempotency_key);
    Object.assign(headers, input.extra_headers);
    return {
      family: 'backoffice',
      route: input.route,
      method: input.method,
      url: withQuery(input.path, input.query),
      headers,
      ...(input.body ? { payload: input.body } : {}),
      remote_address: input.remote_address,
    };
  });
}

// ---------------------------------------------------------------------------------------------------
// The public family.

function publicArbitrary(): fc.Arbitrary<FuzzRequest> {
  // Real signed links of several orders (each link has its own rate bucket of 60 a minute), used as
  // they are, with their query changed, or with another order's path.
  const links = [w.objects.qr_image_path, ...capabilities.map((order) => order.legs![0]!.qr_image_url!)].map((link) => new URL(link, 'http://x'));
  const qrRequest = fc
    .tuple(fc.nat(links.length - 1), fc.nat(links.length - 1))
    .chain(([own, other]) =>
      fc.record({
        path: fc.oneof({ arbitrary: fc.constant(links[own]!.pathname), weight: 6 }, { arbitrary: fc.constant(links[other]!.pathname), weight: 1 }, { arbitrary: pathArbitrary('/v1/pay/deposits/:id/legs/:leg_ref/qr.png', () => []), weight: 1 }),
        query: queryArbitrary(Object.fromEntries(links[own]!.searchParams)),
      }),
    );
  // The QR image is the one public route that shows a tenant's data: it gets most of the traffic. The
  // documents (signing keys, test vectors, the OpenAPI document) are the same for everyone.
  const perRoute = routesOf('public').map((route) => {
    const key = routeKey(route);
    const isQr = route.url.endsWith('/qr.png');
    const target = isQr ? qrRequest : fc.record({ path: fc.constant(route.url), query: fc.oneof({ arbitrary: fc.constant(''), weight: 10 }, { arbitrary: queryArbitrary(null), weight: 1 }) });
    const record = fc.record({
      route: fc.constant(key),
      method: methodArbitrary('GET'),
      target,
      body: fc.oneof({ arbitrary: fc.constant(undefined), weight: 30 }, { arbitrary: bodyArbitrary(null), weight: 1 }),
      authorization: fc.oneof({ arbitrary: fc.constant(null), weight: 8 }, { arbitrary: fc.oneof(headerValue, fc.constant(`Bearer ${w.victim.api_key}`), fc.constant(`Bearer ${w.staff.admin}`)), weight: 1 }),
      extra_headers: hostileHeaders,
      remote_address: clientAddress,
    });
    return { arbitrary: record, weight: isQr ? 12 : 1 };
  });
  // Paths that name no route at all, under /v1/ and outside it.
  const unknown = fc.record({
    route: fc.constant('unrouted'),
    method: fc.constantFrom(...OTHER_METHODS),
    path: fc.oneof(
      fc.tuple(fc.constantFrom('/v1/', '/v1/pay/', '/v1/bo/', '/v1/test/', '/', '/v2/'), junkSegment).map(([prefix, segment]) => `${prefix}${segment}`),
      fc.constantFrom('/v1/pay/deposits/', '/v1/webhooks/signing-keys/', '/V1/webhooks/signing-keys', '/v1//pay/balance', '/v1/pay/balance/..', '/%2e%2e/etc/passwd'),
    ),
    query: fc.oneof(fc.constant(''), queryJunk),
    body: fc.constant(undefined),
    authorization: fc.constant(null),
    extra_headers: hostileHeaders,
    remote_address: clientAddress,
  });
  const routed = fc.oneof(...perRoute).map(({ target, ...rest }) => ({ ...rest, ...target }));
  return fc.oneof({ arbitrary: routed, weight: 4 }, { arbitrary: unknown, weight: 1 }).map((input): FuzzRequest => {
    const headers: Record<string, string | string[]> = {};
    if (input.authorization !== null) headers.authorization = input.authorization;
    if (input.body) headers['content-type'] = 'application/json';
    Object.assign(headers, input.extra_headers);
    return {
      family: 'public',
      route: input.route,
      method: input.method,
      url: withQuery(input.path, input.query),
      headers,
      ...(input.body ? { payload: input.body } : {}),
      remote_address: input.remote_address,
    };
  });
}

// ===================================================================================================

describe('fuzzing every route family', () => {
  it(`public: ${RUNS} requests`, async () => {
    // A new rate window every 400 requests: each signed link may be fetched 60 times a minute.
    const result = await runFamily('public', publicArbitrary(), (sent) => {
      if (sent % 400 === 399) w.app.clock.advance(61_000);
    });
    expect(result.sent).toBeGreaterThanOrEqual(RUNS);
    expect(result.successes, 'a share of the requests gets the documents and images').toBeGreaterThan(RUNS * 0.05);
  }, 600_000);

  it(`slip intake: ${RUNS} requests`, async () => {
    const result = await runFamily('slip_intake', slipArbitrary());
    expect(result.sent).toBeGreaterThanOrEqual(RUNS);
    expect(result.past_authentication, 'most requests get past the capability check').toBeGreaterThan(RUNS * 0.4);
    expect(result.successes, 'some uploads are accepted (202)').toBeGreaterThan(0);
  }, 600_000);

  it(`merchant: ${RUNS} requests`, async () => {
    // A new rate window every 400 requests keeps the key's buckets (600 writes, 1200 reads a minute) open.
    const result = await runFamily('merchant', merchantArbitrary(), (sent) => {
      if (sent % 400 === 399) w.app.clock.advance(61_000);
    });
    expect(result.sent).toBeGreaterThanOrEqual(RUNS);
    expect(result.past_authentication, 'most requests are signed correctly and reach validation').toBeGreaterThan(RUNS * 0.5);
    expect(result.routes_with_success.size, 'handlers of most routes ran').toBeGreaterThan(routesOf('merchant').length * 0.6);
  }, 600_000);

  it(`back office: ${RUNS} requests`, async () => {
    const result = await runFamily('backoffice', backofficeArbitrary(), (sent) => {
      if (sent % 400 === 399) w.app.clock.advance(61_000);
    });
    expect(result.sent).toBeGreaterThanOrEqual(RUNS);
    expect(result.past_authentication, 'most requests carry a valid staff token').toBeGreaterThan(RUNS * 0.5);
    expect(result.routes_with_success.size, 'handlers of most routes ran').toBeGreaterThan(routesOf('backoffice').length * 0.6);
  }, 600_000);

  it('the world is still consistent: every wallet folds', async () => {
    const db = w.app.testDatabase.database;
    const wallets = await db.query<{ white_label_id: string; merchant_id: string; livemode: boolean }>('SELECT white_label_id, merchant_id, livemode FROM wallets');
    for (const wallet of wallets.rows) {
      const verified = await w.app.instance.services.ledger.verify(db, wallet);
      expect(verified.consistent, `wallet of ${wallet.merchant_id}`).toBe(true);
    }
  });
});

