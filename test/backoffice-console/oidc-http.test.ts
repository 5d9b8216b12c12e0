import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { snapshotTables, changedTables, tableNames } from '../support/table-snapshot.ts';

/**
 * The back-office API of a brand's OpenID Connect provider for the console and its staff list
 * (/v1/bo/brands/{brand_id}/console-oidc…): who may use it, another brand's 404, the spec's 422 shape for bad
 * input with nothing changed, a client secret that never comes back (neither in an answer, nor the audit log, nor
 * in clear in the database), and the credentials the staff list issues and revokes.
 */

const SECRET = 'oidc-client-secret-never-shown-4242';
let app: TestApp;
let tokens: { operator: string; reviewer: string; other_operator: string };
let otherBrand: string;
const actor = { actor_type: 'system' as const, actor_id: 'oidc-http-test', request_id: null };

beforeAll(async () => {
  app = await createTestApp();
  const tenancy = app.instance.services.tenancy;
  otherBrand = (await tenancy.createBrand(actor, { name: 'Other Brand' })).id;
  const credential = async (white_label_id: string, role: 'operator' | 'reviewer') => (await tenancy.createBackofficeCredential(actor, { white_label_id, role, name: role })).token;
  tokens = {
    operator: await credential(app.sandbox.white_label_id, 'operator'),
    reviewer: await credential(app.sandbox.white_label_id, 'reviewer'),
    other_operator: await credential(otherBrand, 'operator'),
  };
}, 60_000);

afterAll(async () => {
  await app.close();
});

const brand = () => app.sandbox.white_label_id;
const providerBody = { issuer: 'https://idp.brand.test', client_id: 'console', client_secret: SECRET };

describe('the provider', () => {
  it('the operator sets it for its own brand; the secret is sealed, never answered, never audited', async () => {
    const empty = await app.backoffice({ url: `/v1/bo/brands/${brand()}/console-oidc`, token: tokens.operator });
    expect(empty.statusCode).toBe(200);
    expect(empty.json()).toMatchObject({ object: 'console_oidc_provider', configured: false, issuer: null, client_secret_set: false });
    expect(empty.json().redirect_uri).toMatch(/\/bo\/oidc\/callback$/);

    const set = await app.backoffice({ method: 'POST', url: `/v1/bo/brands/${brand()}/console-oidc`, body: providerBody, token: tokens.operator });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({ configured: true, issuer: 'https://idp.brand.test', client_id: 'console', client_secret_set: true });
    expect(set.body).not.toContain(SECRET);
    const read = await app.backoffice({ url: `/v1/bo/brands/${brand()}/console-oidc`, token: tokens.operator });
    expect(read.body).not.toContain(SECRET);

    const { rows } = await app.testDatabase.database.query<{ client_secret_sealed: string }>('SELECT client_secret_sealed FROM console_oidc_providers WHERE white_label_id = $1', [brand()]);
    expect(rows[0]?.client_secret_sealed).not.toContain(SECRET);
    expect(await app.instance.services.consoleOidcSettings.providerForSignIn(brand())).toMatchObject({ client_secret: SECRET });
    const audit = await app.testDatabase.database.query<{ action: string; details: unknown }>("SELECT action, details FROM audit_log WHERE action LIKE 'console_oidc.%'");
    expect(audit.rows.map((row) => row.action)).toContain('console_oidc.provider_set');
    expect(JSON.stringify(audit.rows)).not.toContain(SECRET);
  });

  it('a reviewer may not read or change it; another brand gets 404; the platform administrator may', async () => {
    for (const request of [
      { url: `/v1/bo/brands/${brand()}/console-oidc` },
      { method: 'POST' as const, url: `/v1/bo/brands/${brand()}/console-oidc`, body: providerBody },
      { url: `/v1/bo/brands/${brand()}/console-oidc/staff` },
      { method: 'POST' as const, url: `/v1/bo/brands/${brand()}/console-oidc/staff`, body: { subject: 'x', role: 'reviewer', name: 'X' } },
    ]) {
      const refused = await app.backoffice({ ...request, token: tokens.reviewer });
      expect(refused.statusCode, request.url).toBe(403);
      expect(errorOf(refused).code).toBe('scope_denied');
      const other = await app.backoffice({ ...request, token: tokens.other_operator });
      expect(other.statusCode, request.url).toBe(404);
      expect(errorOf(other).code).toBe('resource_not_found');
    }
    const admin = await app.backoffice({ url: `/v1/bo/brands/${otherBrand}/console-oidc` });
    expect(admin.statusCode).toBe(200);
    expect((await app.backoffice({ url: '/v1/bo/brands/wl_01K0NOSUCHBRAND00000000000/console-oidc' })).statusCode).toBe(404);
  });

});

describe('bad input', () => {
  it('bad input answers 422 validation_error with its fields, and changes nothing', async () => {
    const database = app.testDatabase.database;
    const tables = await tableNames(database);
    const before = await snapshotTables(database, tables);
    const cases: Array<[unknown, string, string]> = [
      [{ ...providerBody, issuer: 'http://idp.brand.test' }, 'issuer', 'must_be_https'],
      [{ ...providerBody, issuer: 'https://idp.brand.test/?tenant=1' }, 'issuer', 'invalid_url'],
      [{ ...providerBody, issuer: 'not a url at all' }, 'issuer', 'invalid_url'],
      [{ ...providerBody, client_secret: '' }, 'client_secret', ''],
      [{ issuer: providerBody.issuer, client_id: 'console' }, 'client_secret', ''],
      [{ ...providerBody, extra: true }, '', ''],
    ];
    for (const [body, path, reason] of cases) {
      const answer = await app.backoffice({ method: 'POST', url: `/v1/bo/brands/${brand()}/console-oidc`, body, token: tokens.operator });
      expect(answer.statusCode, JSON.stringify(body)).toBe(422);
      const error = errorOf(answer);
      expect(error.code).toBe('validation_error');
      const fields = error.details.fields as Array<{ path: string; reason: string }>;
      expect(fields.length).toBeGreaterThan(0);
      if (path) expect(fields.map((field) => field.path)).toContain(path);
      if (reason) expect(fields.map((field) => field.reason)).toContain(reason);
      expect(answer.body).not.toContain(SECRET);
    }
    for (const body of [{ subject: '', role: 'reviewer', name: 'X' }, { subject: 's', role: 'platform_admin', name: 'X' }, { subject: 's', role: 'reviewer' }, { subject: 'x'.repeat(256), role: 'operator', name: 'X' }]) {
      const answer = await app.backoffice({ method: 'POST', url: `/v1/bo/brands/${brand()}/console-oidc/staff`, body, token: tokens.operator });
      expect(answer.statusCode, JSON.stringify(body)).toBe(422);
      expect(errorOf(answer).code).toBe('validation_error');
    }
    const invalidCursor = await app.backoffice({ url: `/v1/bo/brands/${brand()}/console-oidc/staff?cursor=nonsense`, token: tokens.operator });
    expect(invalidCursor.statusCode).toBe(422);
    const after = await snapshotTables(database, tables);
    expect(changedTables(before, after)).toEqual([]);
  });
});

describe('the staff list', () => {
  it('an entry issues a credential to its person; a role change replaces it; removal revokes it; pages with a cursor', async () => {
    const url = `/v1/bo/brands/${brand()}/console-oidc/staff`;
    const added = await app.backoffice({ method: 'POST', url, body: { subject: 'sub-somsri', role: 'reviewer', name: 'Somsri' }, token: tokens.operator });
    expect(added.statusCode, added.body).toBe(200);
    const entry = added.json();
    expect(entry).toMatchObject({ object: 'console_oidc_staff_entry', subject: 'sub-somsri', role: 'reviewer' });
    const tenancy = app.instance.services.tenancy;
    const database = app.testDatabase.database;
    expect(await tenancy.activeCredentialForSession(database, entry.credential_id, brand())).toMatchObject({ role: 'reviewer', staff_name: 'Somsri' });

    // Saved again unchanged: the same credential.
    const again = await app.backoffice({ method: 'POST', url, body: { subject: 'sub-somsri', role: 'reviewer' }, token: tokens.operator });
    expect(again.json().credential_id).toBe(entry.credential_id);

    const promoted = await app.backoffice({ method: 'POST', url, body: { subject: 'sub-somsri', role: 'operator' }, token: tokens.operator });
    expect(promoted.statusCode).toBe(200);
    expect(promoted.json()).toMatchObject({ role: 'operator', staff_id: entry.staff_id });
    expect(promoted.json().credential_id).not.toBe(entry.credential_id);
    expect(await tenancy.activeCredentialForSession(database, entry.credential_id, brand())).toBeNull();

    for (const subject of ['sub-a', 'sub-b', 'sub-c']) {
      expect((await app.backoffice({ method: 'POST', url, body: { subject, role: 'reviewer', name: subject }, token: tokens.operator })).statusCode).toBe(200);
    }
    const first = (await app.backoffice({ url: `${url}?limit=2`, token: tokens.operator })).json();
    expect(first.data.map((item: { subject: string }) => item.subject)).toEqual(['sub-a', 'sub-b']);
    expect(first.has_more).toBe(true);
    const second = (await app.backoffice({ url: `${url}?limit=2&cursor=${first.next_cursor}`, token: tokens.operator })).json();
    expect(second.data.map((item: { subject: string }) => item.subject)).toEqual(['sub-c', 'sub-somsri']);
    expect(second.has_more).toBe(false);
    // A cursor of one brand is no cursor on another.
    expect((await app.backoffice({ url: `/v1/bo/brands/${otherBrand}/console-oidc/staff?cursor=${first.next_cursor}` })).statusCode).toBe(422);

    const removed = await app.backoffice({ method: 'POST', url: `${url}/remove`, body: { subject: 'sub-somsri' }, token: tokens.operator });
    expect(removed.statusCode).toBe(200);
    expect(await tenancy.activeCredentialForSession(database, promoted.json().credential_id, brand())).toBeNull();
    expect((await app.backoffice({ method: 'POST', url: `${url}/remove`, body: { subject: 'sub-somsri' }, token: tokens.operator })).statusCode).toBe(404);
  });

  it('an entry may name an existing person of the brand, not one of another brand', async () => {
    const url = `/v1/bo/brands/${brand()}/console-oidc/staff`;
    const tenancy = app.instance.services.tenancy;
    const own = await tenancy.createBackofficeCredential(actor, { white_label_id: brand(), role: 'reviewer', name: 'Linked person' });
    const named = await app.backoffice({ method: 'POST', url, body: { subject: 'sub-linked', role: 'reviewer', staff_id: own.staff_id }, token: tokens.operator });
    expect(named.statusCode, named.body).toBe(200);
    expect(named.json().staff_id).toBe(own.staff_id);
    const foreign = await tenancy.createBackofficeCredential(actor, { white_label_id: otherBrand, role: 'reviewer', name: 'Foreign person' });
    const refused = await app.backoffice({ method: 'POST', url, body: { subject: 'sub-foreign', role: 'reviewer', staff_id: foreign.staff_id }, token: tokens.operator });
    expect(refused.statusCode).toBe(404);
    const { rows } = await app.testDatabase.database.query("SELECT 1 FROM console_oidc_staff WHERE subject = 'sub-foreign'");
    expect(rows).toHaveLength(0);
  });
});
