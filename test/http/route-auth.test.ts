import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { apiRoutesOf, type ApiRoute } from '../../src/http/server.ts';
import { API_KEY_SCOPES, type BackofficeRole } from '../../src/platform/access.ts';

/**
 * One authentication test run against every API route the service registers (the route catalogue
 * of `buildServer`), so that a new route cannot ship without its guard. Each route must refuse a
 * missing credential, a wrong signature, a revoked key, a suspended merchant and a key without its
 * scope (merchant routes), or a missing token, an integration key and a role it does not allow
 * (back-office routes), each with the spec's code, and change nothing while doing so.
 */

let app: TestApp;
let routes: readonly ApiRoute[];
const actor = { actor_type: 'system' as const, actor_id: 'route-auth-test', request_id: null };

beforeAll(async () => {
  app = await createTestApp();
  routes = apiRoutesOf(app.instance.app);
});
afterAll(async () => {
  await app.close();
});

/** A concrete path for a route pattern: every parameter becomes a well-formed id that exists nowhere. */
function pathOf(route: ApiRoute): string {
  return route.url.replace(/:[a-z_]+/g, 'wdr_01K0NOSUCHID0000000000000');
}

async function keyWithScopes(scopes: string[]): Promise<MerchantCredentials> {
  const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, scopes });
  return merchant;
}

async function countRows(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>(
    `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM balance_transactions) + (SELECT count(*) FROM withdrawal_orders)
          + (SELECT count(*) FROM beneficiaries) + (SELECT count(*) FROM idempotency_records) AS count`,
  );
  return Number(rows[0]?.count);
}

describe('every API route is guarded', () => {
  it('has a catalogue that includes the routes of every module', () => {
    const urls = routes.map((route) => `${route.method} ${route.url}`);
    for (const expected of ['POST /v1/pay/withdrawals', 'GET /v1/pay/withdrawals/:id', 'GET /v1/pay/balance', 'POST /v1/bo/withdrawals/:id/approve', 'GET /v1/pay/events']) {
      expect(urls).toContain(expected);
    }
  });

  it('merchant routes: api_key_invalid, signature_invalid, api_key_revoked, tenant_suspended, scope_denied; nothing written', async () => {
    const merchantRoutes = routes.filter((route): route is Extract<ApiRoute, { kind: 'merchant' }> => route.kind === 'merchant');
    expect(merchantRoutes.length).toBeGreaterThan(10);

    const revoked = await keyWithScopes([...API_KEY_SCOPES]);
    const suspended = await keyWithScopes([...API_KEY_SCOPES]);
    await app.instance.services.tenancy.setMerchantStatus(actor, suspended.merchant_id, null, 'suspended');
    const keysByScope = new Map<string, MerchantCredentials>();
    for (const scope of API_KEY_SCOPES) keysByScope.set(scope, await keyWithScopes(API_KEY_SCOPES.filter((other) => other !== scope)));
    const { rows } = await app.testDatabase.database.query<{ api_key_id: string }>('SELECT api_key_id FROM api_keys WHERE merchant_id = $1', [revoked.merchant_id]);
    await app.instance.services.tenancy.setApiKeyStatus(actor, rows[0]!.api_key_id, null, 'revoked');

    const before = await countRows();
    for (const route of merchantRoutes) {
      const url = pathOf(route);
      const method = route.method as 'GET' | 'POST';
      const body = method === 'POST' ? {} : undefined;
      const idempotency_key = method === 'POST' ? 'route-auth' : undefined;
      const label = `${route.method} ${route.url}`;

      const unsigned = await app.instance.app.inject({ method, url, ...(body ? { payload: body } : {}) });
      expect(unsigned.statusCode, label).toBe(401);
      expect(errorOf(unsigned).code, label).toBe('api_key_invalid');

      const forged = await app.signed({ method, url, body, idempotency_key, credentials: { ...app.sandbox, signing_secret: 'sig_test_not_the_secret' } });
      expect(errorOf(forged).code, label).toBe('signature_invalid');

      const revokedAnswer = await app.signed({ method, url, body, idempotency_key, credentials: revoked });
      expect(errorOf(revokedAnswer).code, label).toBe('api_key_revoked');

      const suspendedAnswer = await app.signed({ method, url, body, idempotency_key, credentials: suspended });
      expect(errorOf(suspendedAnswer).code, label).toBe('tenant_suspended');

      const withoutScope = await app.signed({ method, url, body, idempotency_key, credentials: keysByScope.get(route.scope) });
      expect(withoutScope.statusCode, label).toBe(403);
      expect(errorOf(withoutScope).code, label).toBe('scope_denied');
    }
    expect(await countRows()).toBe(before);
  });

  it('capability routes: slip_token_invalid without a valid capability, scope_denied for merchant credentials; nothing written', async () => {
    const capabilityRoutes = routes.filter((route) => route.kind === 'capability');
    expect(capabilityRoutes.map((route) => `${route.method} ${route.url}`).sort()).toEqual(['POST /v1/pay/deposits/:id/claims', 'POST /v1/pay/deposits/:id/slip']);
    const forged = `${Buffer.from('{"alg":"EdDSA","kid":"slip_0"}').toString('base64url')}.${Buffer.from('{}').toString('base64url')}.${'A'.repeat(86)}`;
    const before = await countRows();
    for (const route of capabilityRoutes) {
      const url = pathOf(route);
      const label = `${route.method} ${route.url}`;
      const headers = { 'content-type': 'application/json', 'idempotency-key': 'route-auth' };
      const send = (extra: Record<string, string>) => app.instance.app.inject({ method: 'POST', url, headers: { ...headers, ...extra }, payload: '{}' });
      for (const [answer, code] of [
        [await send({}), 'slip_token_invalid'],
        [await send({ authorization: `Bearer ${forged}` }), 'slip_token_invalid'],
        [await send({ authorization: 'Bearer not-a-token' }), 'slip_token_invalid'],
        [await send({ authorization: `Bearer ${app.sandbox.api_key}` }), 'scope_denied'],
        [await send({ authorization: `Bearer ${forged}`, 'pg-signature': `v1=${'0'.repeat(64)}` }), 'scope_denied'],
      ] as const) {
        expect(answer.statusCode, `${label}: ${code}`).toBe(code === 'scope_denied' ? 403 : 401);
        expect(errorOf(answer).code, label).toBe(code);
      }
    }
    expect(await countRows()).toBe(before);
  });

  it('back-office routes: api_key_invalid without a token, scope_denied for an integration key and for a role not allowed', async () => {
    const backofficeRoutes = routes.filter((route): route is Extract<ApiRoute, { kind: 'backoffice' }> => route.kind === 'backoffice');
    expect(backofficeRoutes.length).toBeGreaterThan(10);
    const tokens = new Map<BackofficeRole, string>([['platform_admin', app.operator_token]]);
    for (const role of ['operator', 'reviewer'] as const) {
      const created = await app.instance.services.tenancy.createBackofficeCredential(actor, { white_label_id: app.sandbox.white_label_id, role, name: role });
      tokens.set(role, created.token);
    }
    const before = await countRows();
    for (const route of backofficeRoutes) {
      const url = pathOf(route);
      const method = route.method as 'GET' | 'POST';
      const label = `${route.method} ${route.url}`;
      const body = method === 'POST' ? {} : undefined;

      const anonymous = await app.instance.app.inject({ method, url });
      expect(errorOf(anonymous).code, label).toBe('api_key_invalid');
      const integrationKey = await app.backoffice({ method, url, body, token: app.sandbox.api_key });
      expect(errorOf(integrationKey).code, label).toBe('scope_denied');
      for (const [role, token] of tokens) {
        if (route.roles.includes(role)) continue;
        const refused = await app.backoffice({ method, url, body, token });
        expect(refused.statusCode, `${label} as ${role}`).toBe(403);
        expect(errorOf(refused).code, `${label} as ${role}`).toBe('scope_denied');
      }
    }
    expect(await countRows()).toBe(before);
  });
});
