import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { testWriteRoutes } from '../support/test-routes.ts';
import { signCanonical, canonicalString, signedHeaders } from '../../src/http/canonical.ts';

const system = { actor_type: 'system' as const, actor_id: 'test', request_id: null };
const EVENTS = '/v1/pay/events?limit=5&since_sequence=0';

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp({ extra_modules: [testWriteRoutes()] });
});
afterAll(async () => {
  await app.close();
});

describe('merchant authentication: happy', () => {
  it('accepts a correctly signed GET and answers with the rate headers', async () => {
    const response = await app.signed({ url: EVENTS });
    expect(response.statusCode).toBe(200);
    expect(response.headers['request-id']).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
    for (const header of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-ratelimit-scope', 'retry-after']) {
      expect(response.headers[header], header).toBeDefined();
    }
    expect(response.headers['ratelimit-policy']).toBe('1200;w=60');
  });

  it('verifies a query signed in sorted order whatever order it is sent in', async () => {
    const response = await app.signed({ url: '/v1/pay/events?since_sequence=0&limit=5' });
    expect(response.statusCode).toBe(200);
  });

  it('accepts a signed POST with Idempotency-Key in the canonical string', async () => {
    const response = await app.signed({ method: 'POST', url: '/v1/pay/test-writes', body: { amount_minor: 100 }, idempotency_key: 'auth-happy-1' });
    expect(response.statusCode).toBe(201);
  });
});

describe('merchant authentication: error codes', () => {
  it('a timestamp in milliseconds, correctly signed, is timestamp_out_of_window (not signature_invalid)', async () => {
    const response = await app.signed({ url: EVENTS, timestamp_seconds: app.clock.now().getTime() });
    expect(response.statusCode).toBe(401);
    expect(errorOf(response).code).toBe('timestamp_out_of_window');
  });

  it('JSON bodies: invalid UTF-8 is malformed_json (never replaced), a charset other than UTF-8 is unsupported_media_type', async () => {
    const invalid = Buffer.concat([Buffer.from('{"amount_minor":100,"note":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const headers = signedHeaders({
      api_key: app.sandbox.api_key,
      signing_secret: app.sandbox.signing_secret,
      method: 'POST',
      target: '/v1/pay/test-writes',
      body: invalid,
      idempotency_key: 'utf8-invalid',
      timestamp_seconds: Math.floor(app.clock.now().getTime() / 1000),
    });
    const answer = await app.instance.app.inject({ method: 'POST', url: '/v1/pay/test-writes', headers, payload: invalid });
    expect(answer.statusCode, answer.body).toBe(400);
    expect(errorOf(answer)).toMatchObject({ code: 'malformed_json', details: { reason: 'invalid_utf8' } });
    for (const contentType of ['application/json; charset=iso-8859-11', 'application/json; charset="windows-874"']) {
      const latin = await app.signed({ method: 'POST', url: '/v1/pay/test-writes', body: { amount_minor: 100 }, idempotency_key: `charset-${contentType}`, headers: { 'content-type': contentType } });
      expect(errorOf(latin).code, contentType).toBe('unsupported_media_type');
    }
    const utf8 = await app.signed({ method: 'POST', url: '/v1/pay/test-writes', body: { amount_minor: 100 }, idempotency_key: 'charset-utf8', headers: { 'content-type': 'application/json; charset="UTF-8"' } });
    expect(utf8.statusCode, utf8.body).toBe(201);
  });

  it('the Bearer scheme is case-insensitive (RFC 9110)', async () => {
    const lower = await app.signed({ url: EVENTS, headers: { authorization: `bearer ${app.sandbox.api_key}` } });
    expect(lower.statusCode, lower.body).toBe(200);
    const operator = await app.instance.app.inject({ method: 'GET', url: '/v1/bo/brands', headers: { authorization: `BEARER ${app.operator_token}` } });
    expect(operator.statusCode, operator.body).toBe(200);
  });

  it('a repeated Authorization or Idempotency-Key header is refused, never joined or first-wins; nothing is written', async () => {
    const before = await app.testDatabase.database.query<{ count: string }>('SELECT count(*) AS count FROM idempotency_records');
    const twoKeys = await app.instance.app.inject({
      method: 'POST',
      url: '/v1/pay/test-writes',
      headers: { authorization: `Bearer ${app.sandbox.api_key}`, 'idempotency-key': ['first-key', 'second-key'], 'content-type': 'application/json' },
      payload: JSON.stringify({ amount_minor: 100 }),
    });
    expect(twoKeys.statusCode, twoKeys.body).toBe(422);
    expect(errorOf(twoKeys)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'idempotency-key', reason: 'duplicate_header' }] } });
    // Node's header types allow one Authorization value; a client can still send two on the wire.
    const repeated = (values: string[]) => ({ authorization: values }) as unknown as Record<string, string>;
    const twoCredentials = await app.instance.app.inject({ method: 'GET', url: EVENTS, headers: repeated([`Bearer ${app.sandbox.api_key}`, 'Bearer sk_test_other']) });
    expect(twoCredentials.statusCode, twoCredentials.body).toBe(422);
    expect(errorOf(twoCredentials).details).toMatchObject({ fields: [{ path: 'authorization', reason: 'duplicate_header' }] });
    const operatorTwice = await app.instance.app.inject({ method: 'GET', url: '/v1/bo/brands', headers: repeated([`Bearer ${app.operator_token}`, `Bearer ${app.operator_token}`]) });
    expect(operatorTwice.statusCode).toBe(422);
    const after = await app.testDatabase.database.query<{ count: string }>('SELECT count(*) AS count FROM idempotency_records');
    expect(after.rows[0]?.count).toBe(before.rows[0]?.count);
  });

  it('signature_invalid for a wrong secret, with no details', async () => {
    const response = await app.signed({ url: EVENTS, credentials: { ...app.sandbox, signing_secret: 'sig_test_wrongwrongwrongwrong' } });
    expect(response.statusCode).toBe(401);
    expect(errorOf(response).code).toBe('signature_invalid');
    expect(errorOf(response).details).toEqual({});
  });

  it('signature_invalid when the body changes after signing', async () => {
    const response = await app.signed({
      method: 'POST',
      url: '/v1/pay/test-writes',
      body: { amount_minor: 100 },
      idempotency_key: 'auth-tamper',
      headers: {},
    });
    expect(response.statusCode).toBe(201);
    const now = Math.floor(app.clock.now().getTime() / 1000);
    const canonical = canonicalString({
      timestamp: String(now), nonce: 'tamper-nonce-1', method: 'POST', path: '/v1/pay/test-writes', query: '',
      body: JSON.stringify({ amount_minor: 100 }), idempotency_key: 'auth-tamper-2', api_version: '2026-08-01',
    });
    const tampered = await app.instance.app.inject({
      method: 'POST',
      url: '/v1/pay/test-writes',
      headers: {
        authorization: `Bearer ${app.sandbox.api_key}`, 'pg-timestamp': String(now), 'pg-nonce': 'tamper-nonce-1',
        'pg-version': '2026-08-01', 'pg-signature': signCanonical(app.sandbox.signing_secret, canonical),
        'idempotency-key': 'auth-tamper-2', 'content-type': 'application/json',
      },
      payload: JSON.stringify({ amount_minor: 999 }),
    });
    expect(errorOf(tampered).code).toBe('signature_invalid');
  });

  it('signature_invalid when Idempotency-Key is left out of the canonical string', async () => {
    const response = await app.signed({
      method: 'POST',
      url: '/v1/pay/test-writes',
      body: { amount_minor: 100 },
      headers: { 'idempotency-key': 'sent-but-not-signed' },
    });
    expect(response.statusCode).toBe(401);
    expect(errorOf(response).code).toBe('signature_invalid');
  });

  it('signature_invalid when PG-Version differs from the signed one', async () => {
    const response = await app.signed({ url: EVENTS, headers: { 'pg-version': '2026-08-02' } });
    expect(errorOf(response).code).toBe('signature_invalid');
  });

  it('signature_invalid for a missing or malformed signature header', async () => {
    expect(errorOf(await app.signed({ url: EVENTS, headers: { 'pg-signature': null } })).code).toBe('signature_invalid');
    expect(errorOf(await app.signed({ url: EVENTS, headers: { 'pg-signature': 'v1=ABC' } })).code).toBe('signature_invalid');
    expect(errorOf(await app.signed({ url: EVENTS, headers: { 'pg-version': null } })).code).toBe('signature_invalid');
    expect(errorOf(await app.signed({ url: EVENTS, headers: { 'pg-nonce': null } })).code).toBe('signature_invalid');
  });

  it('timestamp_out_of_window beyond 300 seconds either way, retryable', async () => {
    const now = Math.floor(app.clock.now().getTime() / 1000);
    const late = await app.signed({ url: EVENTS, timestamp_seconds: now - 301 });
    expect(late.statusCode).toBe(401);
    expect(errorOf(late).code).toBe('timestamp_out_of_window');
    expect(errorOf(late).retryable).toBe(true);
    expect(errorOf(await app.signed({ url: EVENTS, timestamp_seconds: now + 301 })).code).toBe('timestamp_out_of_window');
    expect((await app.signed({ url: EVENTS, timestamp_seconds: now - 300 })).statusCode).toBe(200);
  });

  it('nonce_replayed within 10 minutes; the nonce is usable again after', async () => {
    expect((await app.signed({ url: EVENTS, nonce: 'fixed-nonce-1' })).statusCode).toBe(200);
    const replay = await app.signed({ url: EVENTS, nonce: 'fixed-nonce-1' });
    expect(replay.statusCode).toBe(401);
    expect(errorOf(replay).code).toBe('nonce_replayed');
    app.clock.advance(10 * 60 * 1000 + 1000);
    expect((await app.signed({ url: EVENTS, nonce: 'fixed-nonce-1' })).statusCode).toBe(200);
  });

  it('api_key_invalid for an unknown key, a missing header, or a key with its prefix switched', async () => {
    const unknown = await app.signed({ url: EVENTS, credentials: { ...app.sandbox, api_key: 'sk_test_doesnotexistdoesnotexist' } });
    expect(unknown.statusCode).toBe(401);
    expect(errorOf(unknown).code).toBe('api_key_invalid');
    expect(errorOf(await app.signed({ url: EVENTS, headers: { authorization: null } })).code).toBe('api_key_invalid');
    const switched = app.sandbox.api_key.replace('sk_test_', 'sk_live_');
    expect(errorOf(await app.signed({ url: EVENTS, credentials: { ...app.sandbox, api_key: switched } })).code).toBe('api_key_invalid');
  });

  it('api_key_invalid for a key of the environment this deployment does not accept', async () => {
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    expect((await app.signed({ url: EVENTS, credentials: live })).statusCode).toBe(200);
    const testOnly = await createTestApp({ config: { ACCEPTED_MODES: 'test' } });
    try {
      const liveThere = await testOnly.createMerchant({ livemode: true });
      const response = await testOnly.signed({ url: EVENTS, credentials: liveThere });
      expect(errorOf(response).code).toBe('api_key_invalid');
      expect((await testOnly.signed({ url: EVENTS })).statusCode).toBe(200);
    } finally {
      await testOnly.close();
    }
  });

  it('api_version_unsupported for a correctly signed unknown PG-Version', async () => {
    const response = await app.signed({ url: EVENTS, api_version: '2025-01-01' });
    expect(response.statusCode).toBe(400);
    expect(errorOf(response).code).toBe('api_version_unsupported');
    expect(errorOf(response).details).toEqual({ supported_versions: ['2026-08-01'] });
  });

  it('api_key_revoked on the very next request after revocation', async () => {
    const other = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    expect((await app.signed({ url: EVENTS, credentials: other })).statusCode).toBe(200);
    const keys = await app.instance.services.tenancy.listApiKeys(other.merchant_id, null);
    await app.instance.services.tenancy.setApiKeyStatus(system, keys[0]!.id, null, 'revoked');
    const response = await app.signed({ url: EVENTS, credentials: other });
    expect(response.statusCode).toBe(401);
    expect(errorOf(response).code).toBe('api_key_revoked');
    // Revocation is final: resuming or suspending a revoked key is refused (409), revoking again answers it.
    const resume = await app.backoffice({ method: 'POST', url: `/v1/bo/api-keys/${keys[0]!.id}/resume` });
    expect(resume.statusCode, resume.body).toBe(409);
    expect(errorOf(resume)).toMatchObject({ code: 'api_key_already_revoked', details: { api_key_id: keys[0]!.id } });
    expect(errorOf(await app.backoffice({ method: 'POST', url: `/v1/bo/api-keys/${keys[0]!.id}/suspend` })).code).toBe('api_key_already_revoked');
    const again = await app.backoffice({ method: 'POST', url: `/v1/bo/api-keys/${keys[0]!.id}/revoke` });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toMatchObject({ status: 'revoked' });
    expect(errorOf(await app.signed({ url: EVENTS, credentials: other })).code).toBe('api_key_revoked');
  });

  it('tenant_suspended for a suspension anywhere in brand, merchant, key; resume restores access', async () => {
    const tenancy = app.instance.services.tenancy;
    const other = await app.createMerchant();
    const keys = await tenancy.listApiKeys(other.merchant_id, null);
    const steps: Array<[() => Promise<unknown>, () => Promise<unknown>]> = [
      [() => tenancy.setBrandStatus(system, other.white_label_id, 'suspended'), () => tenancy.setBrandStatus(system, other.white_label_id, 'active')],
      [() => tenancy.setMerchantStatus(system, other.merchant_id, null, 'suspended'), () => tenancy.setMerchantStatus(system, other.merchant_id, null, 'active')],
      [() => tenancy.setApiKeyStatus(system, keys[0]!.id, null, 'suspended'), () => tenancy.setApiKeyStatus(system, keys[0]!.id, null, 'active')],
    ];
    for (const [suspend, resume] of steps) {
      await suspend();
      const response = await app.signed({ url: EVENTS, credentials: other });
      expect(response.statusCode).toBe(403);
      expect(errorOf(response).code).toBe('tenant_suspended');
      await resume();
      expect((await app.signed({ url: EVENTS, credentials: other })).statusCode).toBe(200);
    }
  });

  it('scope_denied for a key without the route scope', async () => {
    const readOnly = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, scopes: ['pay:read'] });
    expect((await app.signed({ url: '/v1/pay/banks', credentials: readOnly })).statusCode).toBe(200);
    const events = await app.signed({ url: EVENTS, credentials: readOnly });
    expect(events.statusCode).toBe(403);
    expect(errorOf(events).code).toBe('scope_denied');
    const write = await app.signed({ method: 'POST', url: '/v1/pay/test-writes', body: { amount_minor: 1 }, idempotency_key: 'k', credentials: readOnly });
    expect(errorOf(write).code).toBe('scope_denied');
  });

  it('idempotency_key_required for a signed POST without the header', async () => {
    const response = await app.signed({ method: 'POST', url: '/v1/pay/test-writes', body: { amount_minor: 100 } });
    expect(response.statusCode).toBe(400);
    expect(errorOf(response).code).toBe('idempotency_key_required');
  });
});

describe('back-office separation', () => {
  it('the sandbox counterparty (a merchant the service runs) is not addressable: no read, list, suspend, keys or wallet', async () => {
    // A sandbox deposit makes the brand's counterparty exist.
    const deposit = await app.signed({
      method: 'POST',
      url: '/v1/pay/deposits',
      idempotency_key: `counterparty-${Date.now()}`,
      body: { amount_minor: 10_000, currency: 'THB', merchant_reference: `cp-${Date.now()}`, end_user_ref: 'cp-user', sender: { bank_code: '002', account_number: '5566778899', account_name_th: 'สมชาย ใจดี' } },
    });
    expect(deposit.statusCode, deposit.body).toBe(201);
    const { rows } = await app.testDatabase.database.query<{ merchant_id: string }>('SELECT merchant_id FROM sandbox_counterparties WHERE white_label_id = $1', [app.sandbox.white_label_id]);
    const counterparty = rows[0]!.merchant_id;
    const tenancy = app.instance.services.tenancy;
    const operator = await tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'Counterparty probe' });
    for (const token of [operator.token, app.operator_token]) {
      expect(errorOf(await app.backoffice({ url: `/v1/bo/merchants/${counterparty}`, token })).code).toBe('resource_not_found');
      expect(errorOf(await app.backoffice({ method: 'POST', url: `/v1/bo/merchants/${counterparty}/api-keys`, body: { mode: 'test' }, token })).code).toBe('resource_not_found');
      expect(errorOf(await app.backoffice({ method: 'POST', url: `/v1/bo/merchants/${counterparty}/suspend`, token })).code).toBe('resource_not_found');
      expect(errorOf(await app.backoffice({ url: `/v1/bo/wallet?merchant_id=${counterparty}&mode=test`, token })).code).toBe('resource_not_found');
    }
    const listed = await app.backoffice({ url: `/v1/bo/merchants?white_label_id=${app.sandbox.white_label_id}`, token: operator.token });
    expect(listed.statusCode, listed.body).toBe(200);
    expect(JSON.stringify(listed.json())).not.toContain(counterparty);
    const { rows: keys } = await app.testDatabase.database.query('SELECT api_key_id FROM api_keys WHERE merchant_id = $1', [counterparty]);
    expect(keys).toEqual([]);
  });

  it('answers scope_denied to a valid integration key on /v1/bo/*', async () => {
    const response = await app.backoffice({ url: '/v1/bo/brands', token: app.sandbox.api_key });
    expect(response.statusCode).toBe(403);
    expect(errorOf(response).code).toBe('scope_denied');
  });

  it('answers api_key_invalid to an unknown token and scope_denied to a reviewer on operator routes', async () => {
    expect(errorOf(await app.backoffice({ url: '/v1/bo/brands', token: 'bo_unknownunknownunknownunknown' })).code).toBe('api_key_invalid');
    const tenancy = app.instance.services.tenancy;
    const reviewer = await tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'reviewer', name: 'R' });
    const denied = await app.backoffice({ method: 'POST', url: '/v1/bo/merchants', body: { name: 'x' }, token: reviewer.token });
    expect(denied.statusCode).toBe(403);
    expect(errorOf(denied).code).toBe('scope_denied');
    const own = await app.backoffice({ url: `/v1/bo/merchants/${app.sandbox.merchant_id}`, token: reviewer.token });
    expect(own.statusCode).toBe(200);
  });

  it('scopes an operator to its own brand: another brand answers 404', async () => {
    const tenancy = app.instance.services.tenancy;
    const other = await app.createMerchant();
    const operator = await tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'O' });
    const foreign = await app.backoffice({ url: `/v1/bo/merchants/${other.merchant_id}`, token: operator.token });
    expect(foreign.statusCode).toBe(404);
    expect(errorOf(foreign).code).toBe('resource_not_found');
    const suspend = await app.backoffice({ method: 'POST', url: `/v1/bo/merchants/${other.merchant_id}/suspend`, token: operator.token });
    expect(suspend.statusCode).toBe(404);
    expect((await app.signed({ url: EVENTS, credentials: other })).statusCode).toBe(200);
  });

  it('revoked and suspended back-office credentials are refused', async () => {
    const tenancy = app.instance.services.tenancy;
    const operator = await tenancy.createBackofficeCredential(system, { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'O2' });
    await tenancy.setBackofficeCredentialStatus(system, operator.id, null, 'revoked');
    expect(errorOf(await app.backoffice({ url: `/v1/bo/merchants/${app.sandbox.merchant_id}`, token: operator.token })).code).toBe('api_key_revoked');
  });
});

describe('secrets at rest', () => {
  it('stores API keys hashed and signing secrets sealed, never in clear', async () => {
    const { rows } = await app.testDatabase.database.query<Record<string, unknown>>('SELECT * FROM api_keys');
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(app.sandbox.api_key);
    expect(dump).not.toContain(app.sandbox.signing_secret);
    expect(dump).not.toContain(app.sandbox.signing_secret.slice(9));
  });
});
