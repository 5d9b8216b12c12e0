import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { Browser } from 'playwright-core';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { ContractValidator } from '../support/contract.ts';
import { ensureChromium, launchChromium } from '../support/browser.ts';
import { apiRoutesOf } from '../../src/http/server.ts';
import type { RouteModule } from '../../src/http/context.ts';
import { ApiError, codeToStatus, ERROR_CODES } from '../../src/platform/errors.ts';
import { buildOpenApiDocument, errorCodesOf, openApiPath, type OpenApiDocument } from '../../src/openapi/document.ts';
import { DOCS_CONTENT_SECURITY_POLICY } from '../../src/openapi/routes.ts';

/**
 * The OpenAPI contract (issue 14, item 1). The document is generated from the route catalogue, so this
 * file proves: it is valid OpenAPI 3.1; every route is in it and every documented operation is a route;
 * every route declares its answers; and the contract check of the test harness (support/contract.ts),
 * which validates every answer of every test file against the document, really refuses an answer that
 * disagrees with it. The rendered reference at /docs is loaded in Chromium under its own strict policy.
 */

/** A route that answers what it does not declare: the check must catch it. */
const liarRoutes: RouteModule = (registrar) => {
  registrar.merchant({
    method: 'GET',
    url: '/v1/pay/contract-liar',
    scope: 'pay:read',
    query: z.object({ mode: z.enum(['wrong_body', 'undeclared_error', 'declared']) }).strict(),
    responses: { 200: { description: 'Declared as a number.', schema: z.object({ object: z.literal('liar'), count: z.number().int() }) } },
    async handler({ query }) {
      if (query.mode === 'undeclared_error') throw new ApiError('insufficient_balance');
      return { status: 200, body: { object: 'liar', count: query.mode === 'wrong_body' ? 'three' : 3 } };
    },
  });
};

let app: TestApp;
let document: OpenApiDocument;

beforeAll(async () => {
  app = await createTestApp({ extra_modules: [() => liarRoutes] });
  const answer = await app.instance.app.inject({ method: 'GET', url: '/openapi.json' });
  expect(answer.statusCode).toBe(200);
  document = answer.json() as OpenApiDocument;
});
afterAll(async () => {
  await app.close();
});

function operations(doc: OpenApiDocument): string[] {
  return Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`));
}

describe('GET /openapi.json', () => {
  it('serves a valid OpenAPI 3.1 document, public and cacheable, naming this service', async () => {
    const answer = await app.instance.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(answer.headers['cache-control']).toBe('public, max-age=300');
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers).toEqual([{ url: app.instance.services.publicBaseUrl() }]);
    const result = await new Validator().validate(structuredClone(document) as unknown as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('has every route of the catalogue, every documented operation is a route, and every route declares its answers', () => {
    const routes = apiRoutesOf(app.instance.app).filter((route) => route.url !== '/v1/pay/contract-liar');
    expect(routes.length).toBeGreaterThan(80);
    const undeclared = routes.filter((route) => !route.documentation.responses || Object.keys(route.documentation.responses).length === 0);
    expect(undeclared.map((route) => `${route.method} ${route.url}`)).toEqual([]);
    const catalogue = routes.map((route) => `${route.method} ${openApiPath(route.url)}`).sort();
    const documented = operations(document).filter((operation) => operation !== 'GET /v1/pay/contract-liar').sort();
    expect(documented).toEqual(catalogue);
    for (const route of routes) {
      const operation = document.paths[openApiPath(route.url)]?.[route.method.toLowerCase()];
      expect(operation, `${route.method} ${route.url}`).toBeDefined();
      // Each success answer has a body schema or a binary media type, and the security of its kind.
      for (const [status, response] of Object.entries(route.documentation.responses ?? {})) {
        expect(response?.schema ?? response?.binary, `${route.method} ${route.url} ${status}`).toBeDefined();
        expect(Object.keys(operation?.responses[status]?.content ?? {}).length).toBeGreaterThan(0);
      }
      expect(operation?.security).toEqual(
        route.kind === 'merchant'
          ? [{ merchant_key: [], merchant_signature: [] }]
          : route.kind === 'backoffice'
            ? [{ backoffice_token: [] }]
            : route.kind === 'capability'
              ? [{ slip_capability: [] }]
              : [],
      );
    }
  });

  it('documents each route\'s error codes under their HTTP status, from the closed catalogue', () => {
    const errorSchema = document.components.schemas.error as { properties: { error: { properties: { code: { enum: string[] } } } } };
    expect(errorSchema.properties.error.properties.code.enum).toEqual(ERROR_CODES);
    for (const route of apiRoutesOf(app.instance.app)) {
      const operation = document.paths[openApiPath(route.url)]?.[route.method.toLowerCase()];
      if (!operation) continue;
      for (const code of errorCodesOf(route)) {
        const response = operation.responses[String(codeToStatus(code))] as unknown as { content: { 'application/json': { schema: { allOf: { properties?: { error: { properties: { code: { enum: string[] } } } } }[] } } } };
        expect(response.content['application/json'].schema.allOf[1]?.properties?.error.properties.code.enum, `${route.method} ${route.url} ${code}`).toContain(code);
      }
    }
  });

  it('names the spec\'s security schemes and request headers', () => {
    expect(Object.keys(document.components.securitySchemes).sort()).toEqual(['backoffice_token', 'merchant_key', 'merchant_signature', 'slip_capability']);
    expect(document.components.securitySchemes.merchant_signature).toMatchObject({ type: 'apiKey', in: 'header', name: 'PG-Signature' });
    const create = document.paths['/v1/pay/deposits']?.post;
    expect(create?.parameters).toEqual(
      expect.arrayContaining([{ $ref: '#/components/parameters/pg_timestamp' }, { $ref: '#/components/parameters/pg_nonce' }, { $ref: '#/components/parameters/pg_version' }, { $ref: '#/components/parameters/idempotency_key' }]),
    );
    expect(Object.keys(create?.responses ?? {})).toEqual(expect.arrayContaining(['201', '202', '400', '401', '403', '409', '422', '429']));
    expect(create?.requestBody).toMatchObject({ required: true, content: { 'application/json': { schema: { type: 'object' } } } });
    const slip = document.paths['/v1/pay/deposits/{id}/slip']?.post;
    expect(Object.keys((slip?.requestBody as { content: object }).content).sort()).toEqual(['application/json', 'multipart/form-data']);
  });
});

describe('the refund routes (issue 32)', () => {
  type Schema = { $ref?: string; type?: string; enum?: string[]; properties?: Record<string, Schema>; required?: string[]; additionalProperties?: unknown; description?: string; items?: Schema };
  const schemaOf = (name: string) => document.components.schemas[name] as Schema;
  const codesUnder = (operation: { responses: Record<string, unknown> } | undefined, status: string) =>
    (operation?.responses[status] as { content: { 'application/json': { schema: { allOf: { properties?: { error: { properties: { code: { enum: string[] } } } } }[] } } } } | undefined)?.content[
      'application/json'
    ].schema.allOf[1]?.properties?.error.properties.code.enum ?? [];

  it('POST /v1/pay/deposits/{id}/refunds: its strict body, the withdrawal order it answers 201, and every refusal under its status', () => {
    const create = document.paths['/v1/pay/deposits/{id}/refunds']?.post;
    expect(create?.security).toEqual([{ merchant_key: [], merchant_signature: [] }]);
    expect(create?.parameters).toEqual(expect.arrayContaining([{ $ref: '#/components/parameters/idempotency_key' }]));
    const body = (create?.requestBody as { required: boolean; content: { 'application/json': { schema: Schema } } }).content['application/json'].schema;
    expect(body).toMatchObject({ type: 'object', required: ['amount_minor', 'reason_code'], additionalProperties: false });
    expect(Object.keys(body.properties ?? {}).sort()).toEqual(['amount_minor', 'metadata', 'note', 'reason_code']);
    expect(body.properties?.reason_code?.enum).toEqual(['customer_request', 'canceled_purchase', 'duplicate_payment', 'overpayment', 'dispute_lost', 'claim_resolution', 'other']);
    expect(body.properties?.note).toMatchObject({ type: 'string', minLength: 1, maxLength: 500 });
    expect(body.properties?.amount_minor?.description).toContain('amount_refundable_minor');
    expect(create?.responses['201']?.content?.['application/json']?.schema).toEqual({ $ref: '#/components/schemas/withdrawal_order' });
    expect(codesUnder(create, '404')).toContain('resource_not_found');
    expect(codesUnder(create, '402')).toContain('insufficient_balance');
    expect(codesUnder(create, '409')).toEqual(expect.arrayContaining(['deposit_not_refundable', 'refund_limit_reached', 'refund_payee_unverified', 'beneficiary_not_verified']));
    expect(codesUnder(create, '422')).toEqual(expect.arrayContaining(['refund_exceeds_refundable', 'amount_not_supported', 'validation_error']));
  });

  it("GET /v1/pay/deposits/{id}/refunds lists withdrawal orders; the withdrawal order's refund fields, the deposit's summary and the withdrawals' filter", () => {
    const list = document.paths['/v1/pay/deposits/{id}/refunds']?.get;
    expect(list?.responses['200']?.content?.['application/json']?.schema).toEqual({ $ref: '#/components/schemas/refund_list' });
    expect(schemaOf('refund_list').properties?.data?.items).toEqual({ $ref: '#/components/schemas/withdrawal_order' });
    expect(codesUnder(list, '404')).toContain('resource_not_found');
    const withdrawal = schemaOf('withdrawal_order');
    expect(withdrawal.properties?.refund_of_deposit_id).toMatchObject({ type: 'string' });
    expect(withdrawal.properties?.refund_of_deposit_id?.description).toBeDefined();
    expect(withdrawal.properties?.refund_reason_code?.enum).toContain('claim_resolution');
    expect(withdrawal.properties?.refund_note).toMatchObject({ type: 'string' });
    expect(withdrawal.required ?? []).not.toEqual(expect.arrayContaining(['refund_of_deposit_id']));
    const refunds = schemaOf('deposit_order').properties?.refunds;
    expect(refunds).toMatchObject({ type: 'object', required: ['amount_refundable_minor', 'amount_refunded_minor', 'refund_ids'], additionalProperties: false });
    expect(schemaOf('deposit_order').required ?? []).not.toContain('refunds');
    const filter = (document.paths['/v1/pay/withdrawals']?.get?.parameters as { name?: string; in?: string }[]).find((parameter) => parameter.name === 'refund_of_deposit_id');
    expect(filter).toMatchObject({ in: 'query', required: false });
  });
});

describe('the contract check of the test harness', () => {
  it('refuses a body that does not match its schema and an error status the route does not declare, and passes a true answer', async () => {
    const before = app.contract.violations.length;
    expect((await app.signed({ url: '/v1/pay/contract-liar?mode=declared' })).statusCode).toBe(200);
    expect(app.contract.violations.length).toBe(before);
    expect((await app.signed({ url: '/v1/pay/contract-liar?mode=wrong_body' })).statusCode).toBe(200);
    expect((await app.signed({ url: '/v1/pay/contract-liar?mode=undeclared_error' })).statusCode).toBe(402);
    const caught = app.contract.violations.splice(before);
    expect(caught.map((violation) => violation.problem)).toEqual([
      expect.stringContaining('/count must be integer'),
      expect.stringContaining('status 402 is not documented for this operation (error code insufficient_balance)'),
    ]);
  });

  it('refuses a missing required field, a field the schema does not name, a null where none is allowed, a wrong header and a code of another status', () => {
    const validator = new ContractValidator(buildOpenApiDocument(apiRoutesOf(app.instance.app)));
    const balance = { object: 'balance', available_minor: 0, pending_clearing_minor: 0, reserved_minor: 0, currency: 'THB', livemode: false, as_of: '2026-08-01T00:00:00.000Z' };
    const rate = { 'request-id': 'req_1', 'ratelimit-limit': '1', 'ratelimit-remaining': '1', 'ratelimit-reset': '1', 'ratelimit-policy': '1;w=60', 'x-ratelimit-scope': 'api_key', 'retry-after': '0' };
    const json = { 'content-type': 'application/json; charset=utf-8', ...rate };
    const check = (route: string, status: number, body: unknown, headers: Record<string, string> = json) =>
      validator.check({ method: 'GET', route, status, headers, body: JSON.stringify(body) });
    expect(check('/v1/pay/balance', 200, balance)).toEqual([]);
    const { as_of: _asOf, ...withoutAsOf } = balance;
    expect(check('/v1/pay/balance', 200, withoutAsOf)?.join()).toContain("must have required property 'as_of'");
    expect(check('/v1/pay/balance', 200, { ...balance, surprise: 1 })?.join()).toContain('(surprise)');
    expect(check('/v1/pay/balance', 200, { ...balance, as_of: '2026-08-01T07:00:00+07:00' })?.join()).toContain('/as_of');
    expect(check('/v1/pay/balance', 200, { ...balance, available_minor: null })?.join()).toContain('/available_minor must be integer');
    const { 'request-id': _requestId, ...withoutRequestId } = json;
    expect(check('/v1/pay/balance', 200, balance, withoutRequestId)?.join()).toContain('header Request-Id is missing');
    expect(validator.check({ method: 'GET', route: '/v1/pay/deposits/:id', status: 200, headers: { ...json, 'cache-control': 'public' }, body: '{}' })?.join()).toContain('header Cache-Control is "public"');
    const error = (code: string) => ({ error: { code, type: 'invalid_request_error', message: 'm', message_th: 'm', retryable: false, retry_after_seconds: null, request_id: 'req_1', details: {} } });
    expect(check('/v1/pay/balance', 404, error('resource_not_found'))).toEqual(['status 404 is not documented for this operation (error code resource_not_found)']);
    expect(check('/v1/pay/deposits/:id', 404, error('resource_not_found'))).toEqual([]);
    expect(check('/v1/pay/deposits/:id', 401, error('scope_denied'))?.join()).toContain('/error/code must be equal to one of the allowed values');
    // Outside the document only error bodies are judged, against the shared error schema.
    expect(check('/checkout/:white_label_id/:deposit_id/status', 404, error('resource_not_found'))).toEqual([]);
    expect(check('/checkout/:white_label_id/:deposit_id/status', 404, error('no_such_code'))?.join()).toContain('/error/code');
    expect(validator.check({ method: 'GET', route: '/docs', status: 200, headers: { 'content-type': 'text/html' }, body: '<!doctype html>' })).toBeNull();
  });

  it('passes the answers of a deposit\'s life and its refusals (its refunds among them)', async () => {
    const before = app.contract.violations.length;
    const created = await app.signed({
      method: 'POST',
      url: '/v1/pay/deposits',
      idempotency_key: 'contract-deposit',
      body: { amount_minor: 10000, currency: 'THB', merchant_reference: 'contract-1', end_user_ref: 'user-1', sender: { bank_code: '004', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } },
    });
    expect([201, 202]).toContain(created.statusCode);
    const id = (created.json() as { id: string }).id;
    expect((await app.signed({ url: `/v1/pay/deposits/${id}` })).statusCode).toBe(200);
    expect((await app.signed({ url: '/v1/pay/deposits?limit=5' })).statusCode).toBe(200);
    expect((await app.signed({ url: '/v1/pay/events?limit=5' })).statusCode).toBe(200);
    expect((await app.signed({ method: 'POST', url: `/v1/pay/deposits/${id}/cancel`, idempotency_key: 'contract-cancel' })).statusCode).toBe(200);
    const refusals = [
      await app.instance.app.inject({ method: 'GET', url: '/v1/pay/balance' }),
      await app.signed({ url: '/v1/pay/deposits/dep_01K0NOSUCHDEPOSIT00000000' }),
      await app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: 'contract-bad', body: { amount_minor: 'ten' } }),
      await app.signed({ method: 'POST', url: `/v1/pay/deposits/${id}/cancel`, idempotency_key: 'contract-cancel-again' }),
      await app.signed({ method: 'POST', url: '/v1/pay/deposits', body: {} }),
      await app.backoffice({ url: '/v1/bo/brands', token: app.sandbox.api_key }),
      await app.signed({ method: 'POST', url: `/v1/pay/deposits/${id}/refunds`, idempotency_key: 'contract-refund', body: { amount_minor: 10000, reason_code: 'customer_request' } }),
      await app.signed({ url: '/v1/pay/deposits/dep_01K0NOSUCHDEPOSIT00000000/refunds' }),
    ];
    expect((await app.signed({ url: `/v1/pay/deposits/${id}/refunds` })).json()).toEqual({ object: 'list', data: [] });
    expect(refusals.map((answer) => errorOf(answer).code)).toEqual([
      'api_key_invalid',
      'resource_not_found',
      'validation_error',
      'deposit_not_cancelable',
      'idempotency_key_required',
      'scope_denied',
      'deposit_not_refundable',
      'resource_not_found',
    ]);
    expect(app.contract.violations.slice(before)).toEqual([]);
  });
});

describe('GET /docs', () => {
  it('serves the reference page and its files from this service, under a strict policy', async () => {
    const page = await app.instance.app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toBe(DOCS_CONTENT_SECURITY_POLICY);
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.body).not.toMatch(/https?:\/\//);
    expect(page.body).not.toMatch(/<script>/);
    for (const [name, type] of [['swagger-ui-bundle.js', 'text/javascript'], ['swagger-ui.css', 'text/css'], ['docs.js', 'text/javascript']] as const) {
      const asset = await app.instance.app.inject({ method: 'GET', url: `/docs/assets/${name}` });
      expect(asset.statusCode, name).toBe(200);
      expect(asset.headers['content-type']).toContain(type);
      expect(asset.headers['content-security-policy']).toBe(DOCS_CONTENT_SECURITY_POLICY);
    }
    const missing = await app.instance.app.inject({ method: 'GET', url: '/docs/assets/../../package.json' });
    expect(missing.statusCode).toBe(404);
  });
});

const chromiumPath = ensureChromium();

describe.skipIf(chromiumPath === null)('the reference in a browser', () => {
  let browser: Browser;
  let origin: string;
  beforeAll(async () => {
    await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
    origin = `http://127.0.0.1:${(app.instance.app.server.address() as { port: number }).port}`;
    browser = await launchChromium(chromiumPath!);
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('renders every operation with no policy violation and no request to another origin', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    const origins = new Set<string>();
    page.on('request', (request) => origins.add(new URL(request.url()).origin));
    await page.goto(`${origin}/docs`);
    await page.waitForSelector('.opblock', { timeout: 20_000 });
    expect(await page.locator('.opblock').count()).toBe(operations(document).length);
    await page.locator('.opblock-summary', { hasText: '/v1/pay/deposits/{id}/slip-token' }).first().click();
    await page.getByText('A slip upload capability.').first().waitFor();
    expect(await page.locator('.try-out__btn').count()).toBe(0);
    expect(problems).toEqual([]);
    expect([...origins]).toEqual([origin]);
    await page.close();
  });
});
