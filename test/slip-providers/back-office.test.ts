import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import {
  EASYSLIP_CREDENTIALS,
  RDCW_CREDENTIALS,
  SLIPOK_CREDENTIALS,
  credentialOf,
  expectNoSecret,
  logCapture,
  startFakeProviders,
  type FakeProviders,
} from './support.ts';
import { watchTransactionsAtFetch } from './support-transactions.ts';

/**
 * A brand's slip providers through the back office (issue 34): set, read (masked), test the connection against
 * the fake providers, rotate, remove; the roles, another brand, bad input; and the credentials in no answer, no
 * log line, no audit row and no event.
 */

let app: TestApp;
let fakes: FakeProviders;
const logs = logCapture();
const answers: string[] = [];
let brand: string;
let otherBrand: string;
let operator: string;
let reviewer: string;
let otherOperator: string;

async function bo(request: { method?: 'GET' | 'POST'; url: string; body?: unknown; token?: string }) {
  const response = await app.backoffice(request);
  answers.push(response.body);
  return response;
}

function providersUrl(white_label_id: string, rest = ''): string {
  return `/v1/bo/brands/${white_label_id}/slip-providers${rest}`;
}

beforeAll(async () => {
  fakes = await startFakeProviders();
  app = await createTestApp({ config: fakes.config, logger: createLogger('debug', logs.stream) });
  brand = (await app.createMerchant({ livemode: true })).white_label_id;
  otherBrand = (await app.createMerchant({ livemode: true })).white_label_id;
  operator = await credentialOf(app, brand, 'operator');
  reviewer = await credentialOf(app, brand, 'reviewer');
  otherOperator = await credentialOf(app, otherBrand, 'operator');
});
afterAll(async () => {
  await app.close();
  await fakes.close();
});

describe('a brand operator sets, reads, tests, rotates and removes its providers', () => {
  it('reads nothing configured at first', async () => {
    const response = await bo({ url: providersUrl(brand), token: operator });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({ object: 'slip_provider_settings', white_label_id: brand, livemode: true, primary: null, fallback: null });
  });

  it('sets SlipOK as the primary: the answer shows the provider and a hint, never the key', async () => {
    const response = await bo({ method: 'POST', url: providersUrl(brand, '/primary'), token: operator, body: { provider: 'slipok', credentials: SLIPOK_CREDENTIALS } });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({ primary: { provider: 'slipok', credential_hint: '••••AbCd', credentials_set_at: app.clock.now().toISOString() }, fallback: null });
    const read = await bo({ url: providersUrl(brand), token: operator });
    expect(read.json()).toMatchObject({ primary: { provider: 'slipok', credential_hint: '••••AbCd' } });
  });

  it('stores the credentials sealed', async () => {
    const { rows } = await app.instance.services.database.query<{ credentials_sealed: string }>('SELECT credentials_sealed FROM slip_provider_settings WHERE white_label_id = $1', [brand]);
    expect(rows).toHaveLength(1);
    expect(rows[0]?.credentials_sealed.startsWith('v2.')).toBe(true);
    expectNoSecret(rows[0]?.credentials_sealed ?? '', 'the sealed column');
  });

  it('tests the connection: the remaining quota, and the gauge', async () => {
    fakes.slipok.bank.quota.used = 58;
    const response = await bo({ method: 'POST', url: providersUrl(brand, '/primary/test'), token: operator });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({
      object: 'slip_provider_connection_test',
      white_label_id: brand,
      slot: 'primary',
      provider: 'slipok',
      ok: true,
      remaining_quota: 942,
      failure_reason: null,
      tested_at: app.clock.now().toISOString(),
    });
    const metrics = await app.instance.services.metrics.registry.metrics();
    expect(metrics).toContain(`slip_provider_remaining_quota{provider="slipok",white_label_id="${brand}",slot="primary"} 942`);
  });

  it('asks the provider with no transaction open', async () => {
    const watch = watchTransactionsAtFetch(app.instance.services.database);
    try {
      const response = await bo({ method: 'POST', url: providersUrl(brand, '/primary/test'), token: operator });
      expect(response.json()).toMatchObject({ ok: true });
    } finally {
      watch.restore();
    }
    expect(watch.openAtFetch).toEqual([0]);
  });

  it('tests the connection: the refusal reason, the alert metric and a warning without the key', async () => {
    fakes.slipok.bank.mode = 'credentials_refused';
    const response = await bo({ method: 'POST', url: providersUrl(brand, '/primary/test'), token: operator });
    expect(response.json()).toMatchObject({ ok: false, remaining_quota: null, failure_reason: 'credentials_refused' });
    fakes.slipok.bank.mode = 'normal';
    const metrics = await app.instance.services.metrics.registry.metrics();
    expect(metrics).toContain(`slip_provider_alerts_total{provider="slipok",white_label_id="${brand}",reason="credentials_refused"} 1`);
    expect(logs.text()).toContain('slip provider needs an operator');
  });

  it('sets RDCW as the fallback and tests it', async () => {
    const set = await bo({ method: 'POST', url: providersUrl(brand, '/fallback'), token: operator, body: { provider: 'rdcw', credentials: RDCW_CREDENTIALS } });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ primary: { provider: 'slipok' }, fallback: { provider: 'rdcw', credential_hint: '••••GhIj' } });
    const tested = await bo({ method: 'POST', url: providersUrl(brand, '/fallback/test'), token: operator });
    expect(tested.json()).toMatchObject({ slot: 'fallback', provider: 'rdcw', ok: true });
  });

});

describe('a brand operator rotates and removes its providers, and each change is audited', () => {
  it('rotates the primary to EasySlip: the new credentials are used, the test asks the new provider', async () => {
    app.clock.advance(60_000);
    const response = await bo({ method: 'POST', url: providersUrl(brand, '/primary'), token: operator, body: { provider: 'easyslip', credentials: EASYSLIP_CREDENTIALS } });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({ primary: { provider: 'easyslip', credential_hint: '••••Ef01', credentials_set_at: app.clock.now().toISOString() } });
    const easyslipBefore = fakes.easyslip.requests.length;
    const tested = await bo({ method: 'POST', url: providersUrl(brand, '/primary/test'), token: operator });
    expect(tested.json()).toMatchObject({ provider: 'easyslip', ok: true });
    expect(fakes.easyslip.requests.length).toBe(easyslipBefore + 1);
    expect(fakes.easyslip.requests.at(-1)?.headers.authorization).toBe(`Bearer ${EASYSLIP_CREDENTIALS.key}`);
  });

  it('refuses to remove the primary while a fallback is set, then removes the fallback and the primary', async () => {
    const refused = await bo({ method: 'POST', url: providersUrl(brand, '/primary/remove'), token: operator });
    expect(refused.statusCode, refused.body).toBe(422);
    expect(refused.json().error.details.fields).toEqual([{ path: 'slot', reason: 'fallback_set' }]);
    const fallback = await bo({ method: 'POST', url: providersUrl(brand, '/fallback/remove'), token: operator });
    expect(fallback.json()).toMatchObject({ primary: { provider: 'easyslip' }, fallback: null });
    const primary = await bo({ method: 'POST', url: providersUrl(brand, '/primary/remove'), token: operator });
    expect(primary.json()).toMatchObject({ primary: null, fallback: null });
    const again = await bo({ method: 'POST', url: providersUrl(brand, '/primary/remove'), token: operator });
    expect(again.statusCode).toBe(404);
    const test = await bo({ method: 'POST', url: providersUrl(brand, '/primary/test'), token: operator });
    expect(test.statusCode).toBe(404);
  });

  it('audits every change, without the credentials', async () => {
    const { rows } = await app.instance.services.database.query<{ action: string; details: unknown }>(
      "SELECT action, details FROM audit_log WHERE white_label_id = $1 AND action LIKE 'slip_provider.%' ORDER BY created_at, audit_id",
      [brand],
    );
    expect(rows.map((row) => row.action)).toEqual(['slip_provider.set', 'slip_provider.set', 'slip_provider.rotated', 'slip_provider.removed', 'slip_provider.removed']);
    expectNoSecret(JSON.stringify(rows), 'the audit log');
  });
});

describe('who may', () => {
  it('a reviewer is refused every route (403)', async () => {
    for (const request of [
      { url: providersUrl(brand) },
      { method: 'POST' as const, url: providersUrl(brand, '/primary'), body: { provider: 'slipok', credentials: SLIPOK_CREDENTIALS } },
      { method: 'POST' as const, url: providersUrl(brand, '/primary/test') },
      { method: 'POST' as const, url: providersUrl(brand, '/primary/remove') },
    ]) {
      const response = await bo({ ...request, token: reviewer });
      expect(response.statusCode, `${request.url} ${response.body}`).toBe(403);
      expect(response.json().error.code).toBe('scope_denied');
    }
  });

  it("another brand's operator gets 404 and changes nothing", async () => {
    const set = await bo({ method: 'POST', url: providersUrl(brand, '/primary'), token: otherOperator, body: { provider: 'slipok', credentials: SLIPOK_CREDENTIALS } });
    expect(set.statusCode).toBe(404);
    for (const request of [{ url: providersUrl(brand) }, { method: 'POST' as const, url: providersUrl(brand, '/primary/test') }, { method: 'POST' as const, url: providersUrl(brand, '/primary/remove') }]) {
      expect((await bo({ ...request, token: otherOperator })).statusCode).toBe(404);
    }
    const { rows } = await app.instance.services.database.query('SELECT 1 FROM slip_provider_settings WHERE white_label_id = $1', [brand]);
    expect(rows).toHaveLength(0);
  });

  it('the platform administrator manages any brand; an unknown brand or slot is 404', async () => {
    const set = await bo({ method: 'POST', url: providersUrl(otherBrand, '/primary'), body: { provider: 'slipok', credentials: SLIPOK_CREDENTIALS } });
    expect(set.statusCode, set.body).toBe(200);
    expect((await bo({ url: providersUrl('wl_01JZZZZZZZZZZZZZZZZZZZZZZZ') })).statusCode).toBe(404);
    expect((await bo({ method: 'POST', url: providersUrl(otherBrand, '/secondary'), body: { provider: 'slipok', credentials: SLIPOK_CREDENTIALS } })).statusCode).toBe(404);
    expect((await bo({ method: 'POST', url: providersUrl(otherBrand, '/primary/remove') })).statusCode).toBe(200);
  });
});

describe('bad input is 422 and changes nothing', () => {
  const bodies: [string, unknown][] = [
    ['an unknown provider', { provider: 'promptcheck', credentials: { key: 'k'.repeat(20) } }],
    ['credentials of another provider', { provider: 'slipok', credentials: EASYSLIP_CREDENTIALS }],
    ['a branch id that is not digits', { provider: 'slipok', credentials: { branch_id: '42a', key: SLIPOK_CREDENTIALS.key } }],
    ['a key with a control character', { provider: 'easyslip', credentials: { key: 'abc\ndef' } }],
    ['an empty secret', { provider: 'rdcw', credentials: { client_id: 'x', client_secret: '' } }],
    ['an extra field', { provider: 'easyslip', credentials: EASYSLIP_CREDENTIALS, url: 'http://attacker.example' }],
    ['no credentials', { provider: 'easyslip' }],
  ];

  it.each(bodies)('%s', async (_name, body) => {
    const response = await bo({ method: 'POST', url: providersUrl(brand, '/primary'), token: operator, body });
    expect(response.statusCode, response.body).toBe(422);
    expect(response.json().error.code).toBe('validation_error');
    const { rows } = await app.instance.services.database.query('SELECT 1 FROM slip_provider_settings WHERE white_label_id = $1', [brand]);
    expect(rows).toHaveLength(0);
  });

  it('a fallback without a primary', async () => {
    const response = await bo({ method: 'POST', url: providersUrl(brand, '/fallback'), token: operator, body: { provider: 'rdcw', credentials: RDCW_CREDENTIALS } });
    expect(response.statusCode, response.body).toBe(422);
    expect(response.json().error.details.fields).toEqual([{ path: 'slot', reason: 'primary_required' }]);
    const { rows } = await app.instance.services.database.query('SELECT 1 FROM slip_provider_settings WHERE white_label_id = $1', [brand]);
    expect(rows).toHaveLength(0);
  });
});

describe('the credentials appear nowhere', () => {
  it('in no answer, no log line and no event', async () => {
    expect(answers.length).toBeGreaterThan(20);
    expectNoSecret(answers.join('\n'), 'an answer');
    expect(logs.text().length).toBeGreaterThan(0);
    expectNoSecret(logs.text(), 'the log');
    const { rows } = await app.instance.services.database.query('SELECT * FROM events');
    expectNoSecret(JSON.stringify(rows), 'the events');
  });
});
