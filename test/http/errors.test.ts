import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { testWriteRoutes } from '../support/test-routes.ts';
import { ERROR_CODES, codeToStatus, renderError, ApiError } from '../../src/platform/errors.ts';

const URL = '/v1/pay/test-writes';
let app: TestApp;

beforeAll(async () => {
  app = await createTestApp({ extra_modules: [testWriteRoutes()] });
});
afterAll(async () => {
  await app.close();
});

function expectErrorShape(response: { statusCode: number; headers: Record<string, unknown>; json: () => unknown }, code: string): void {
  const body = response.json() as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(
    ['code', 'details', 'message', 'message_th', 'request_id', 'retry_after_seconds', 'retryable', 'type'].sort(),
  );
  expect(body.error.code).toBe(code);
  expect(response.statusCode).toBe(codeToStatus(code as never));
  expect(body.error.request_id).toBe(response.headers['request-id']);
  expect(typeof body.error.message_th).toBe('string');
  expect(String(body.error.message_th)).toMatch(/[\u0E00-\u0E7F]/);
}

describe('the catalogue', () => {
  it('has one status, type and Thai message for every code', () => {
    for (const code of ERROR_CODES) {
      const rendered = renderError(new ApiError(code), 'req_x');
      expect(rendered.error.message.length).toBeGreaterThan(0);
      expect(rendered.error.message_th).toMatch(/[\u0E00-\u0E7F]/);
      expect(codeToStatus(code)).toBeGreaterThanOrEqual(400);
    }
  });

  it('keeps the spec statuses', () => {
    const expected: Record<string, number> = {
      signature_invalid: 401, timestamp_out_of_window: 401, nonce_replayed: 401, api_key_invalid: 401, api_key_revoked: 401,
      tenant_suspended: 403, scope_denied: 403, idempotency_key_required: 400, malformed_json: 400, unsupported_media_type: 400,
      cursor_filter_mismatch: 400, validation_error: 422, insufficient_balance: 402, resource_not_found: 404,
      idempotency_key_reused: 409, idempotency_in_flight: 409, late_slip_window_closed: 410, rate_limited: 429,
      internal_error: 500, service_unavailable: 503, slip_intake_unavailable: 503,
    };
    for (const [code, status] of Object.entries(expected)) expect(codeToStatus(code as never)).toBe(status);
  });
});

describe('framework failures answer in the error shape', () => {
  it('malformed_json', async () => {
    const response = await app.signed({ method: 'POST', url: URL, body: '{"amount_minor": 1', idempotency_key: 'mj' });
    expectErrorShape(response, 'malformed_json');
  });

  it('unsupported_media_type for a non-JSON content type', async () => {
    const response = await app.signed({ method: 'POST', url: URL, body: 'amount_minor=1', idempotency_key: 'um', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expectErrorShape(response, 'unsupported_media_type');
  });

  it('request_too_large over 1 MiB', async () => {
    const body = JSON.stringify({ amount_minor: 1, padding: 'x'.repeat(1024 * 1024) });
    const response = await app.signed({ method: 'POST', url: URL, body, idempotency_key: 'big' });
    expectErrorShape(response, 'request_too_large');
  });

  it('resource_not_found for an unknown route', async () => {
    expectErrorShape(await app.signed({ url: '/v1/pay/unknown' }), 'resource_not_found');
    expectErrorShape(await app.instance.app.inject({ method: 'GET', url: '/nothing' }), 'resource_not_found');
  });

  it('method_not_allowed with an Allow header', async () => {
    const response = await app.instance.app.inject({ method: 'PUT', url: '/v1/pay/events' });
    expectErrorShape(response, 'method_not_allowed');
    expect(response.headers.allow).toBe('GET, HEAD');
  });

  it('internal_error without a stack or the thrown message', async () => {
    const response = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 1, fail_with: 'plain_error' }, idempotency_key: 'ie' });
    expectErrorShape(response, 'internal_error');
    expect(response.body).not.toMatch(/boom|at |\.ts:/);
  });
});

describe('validation_error', () => {
  it('lists fields with path, reason and the minor-units hint', async () => {
    const response = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 10.5, surprise: true }, idempotency_key: 'v1' });
    expectErrorShape(response, 'validation_error');
    const fields = errorOf(response).details.fields as Array<{ path: string; reason: string; hint?: string }>;
    expect(fields).toContainEqual({ path: 'amount_minor', reason: 'must_be_integer', hint: 'must_be_integer_minor_units' });
    expect(fields).toContainEqual({ path: 'surprise', reason: 'unknown_field' });
  });

  it('reports a missing field as required', async () => {
    const response = await app.signed({ method: 'POST', url: URL, body: {}, idempotency_key: 'v2' });
    expect(errorOf(response).details.fields).toContainEqual({ path: 'amount_minor', reason: 'required' });
  });

  it('refuses a body on a GET and a repeated query parameter', async () => {
    const withBody = await app.signed({ url: '/v1/pay/banks', body: { a: 1 } });
    expectErrorShape(withBody, 'validation_error');
    expect(errorOf(withBody).details.fields).toEqual([{ path: '$', reason: 'body_not_allowed' }]);
    const repeated = await app.signed({ url: '/v1/pay/events?limit=1&limit=2' });
    expect(errorOf(repeated).details.fields).toEqual([{ path: 'limit', reason: 'repeated_parameter' }]);
  });
});
