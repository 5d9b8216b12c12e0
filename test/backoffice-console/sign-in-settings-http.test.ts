import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { freePort } from '../support/browser.ts';
import { consoleGet, consolePost, formTokens, signIn } from '../support/console.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';

/**
 * The sign-in settings page (/bo/sign-in-settings) over HTTP on a real socket: the brand's OpenID provider and
 * staff list kept through the console's forms, with the very state the /v1/bo/brands/{brand_id}/console-oidc…
 * routes show; a client secret that never comes back; roles, CSRF, escaping and another brand's session.
 */

const TH = consoleTexts('th');
const EN = consoleTexts('en');
const SECRET = 'console-page-secret-never-shown-9731';
const HOSTILE_NAME = `<script>alert("x")</script>'"& Somsri`;
const HOSTILE_SUBJECT = `sub-"quoted"-'<b>`;
const PAGE = '/bo/sign-in-settings';

let app: TestApp;
let base: string;
let operator: { cookie: string; credential_id: string };
let reviewer: string;
let otherOperator: string;
let otherBrand: string;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  app = await createTestApp({ config: { BACKOFFICE_BASE_URL: base } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  otherBrand = (await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'sign-in-settings-test', request_id: null }, { name: 'Other Brand' })).id;
  const signedIn = await signIn(app, base, { brand: app.sandbox.white_label_id, role: 'operator', name: 'Settings operator' });
  operator = { cookie: signedIn.cookie, credential_id: signedIn.link.credential_id };
  reviewer = (await signIn(app, base, { brand: app.sandbox.white_label_id, role: 'reviewer', name: 'Settings reviewer' })).cookie;
  otherOperator = (await signIn(app, base, { brand: otherBrand, role: 'operator', name: 'Other operator' })).cookie;
}, 60_000);

afterAll(async () => {
  await app.close();
});

const brand = () => app.sandbox.white_label_id;

async function pageOf(cookie: string, query = ''): Promise<{ status: number; html: string; csrf_token: string }> {
  const response = await consoleGet(base, `${PAGE}${query}`, cookie);
  const html = await response.text();
  return { status: response.status, html, csrf_token: formTokens(html).csrf_token };
}

/** A form of the page, sent with the page's own CSRF token. */
async function submit(cookie: string, action: string, form: Record<string, string>): Promise<Response> {
  const { csrf_token } = await pageOf(cookie);
  return consolePost(base, `${PAGE}${action}`, cookie, { csrf_token, ...form });
}

async function apiProvider(white_label_id = brand()): Promise<Record<string, unknown>> {
  return (await app.backoffice({ url: `/v1/bo/brands/${white_label_id}/console-oidc` })).json();
}

async function apiStaff(white_label_id = brand()): Promise<{ subject: string; role: string; staff_id: string; credential_id: string }[]> {
  return (await app.backoffice({ url: `/v1/bo/brands/${white_label_id}/console-oidc/staff?limit=100` })).json().data;
}

async function auditText(): Promise<{ text: string; rows: { action: string; actor_id: string }[] }> {
  const { rows } = await app.testDatabase.database.query<{ action: string; actor_id: string; details: unknown }>("SELECT action, actor_id, details FROM audit_log WHERE action LIKE 'console_oidc.%' ORDER BY created_at, audit_id");
  return { text: JSON.stringify(rows), rows };
}

describe('the provider', () => {
  it('the operator sets it through the page: the API shows the same, the secret is never shown nor audited', async () => {
    const empty = await pageOf(operator.cookie);
    expect(empty.status).toBe(200);
    expect(empty.html).toContain(escapeHtml(TH.sign_in_settings_not_configured));
    expect(empty.html).toContain(`href="${PAGE}" aria-current="page"`);
    expect(empty.html).toContain(`${base}/bo/oidc/callback`);

    const set = await submit(operator.cookie, '/provider', { issuer: 'https://idp.brand.test', client_id: 'console-client', client_secret: SECRET });
    expect(set.status).toBe(303);
    expect(set.headers.get('location')).toBe(`${PAGE}?done=provider_set`);
    expect(await apiProvider()).toMatchObject({ configured: true, issuer: 'https://idp.brand.test', client_id: 'console-client', client_secret_set: true });

    const shown = await pageOf(operator.cookie, '?done=provider_set&lang=en');
    expect(shown.html).toContain(escapeHtml(EN.sign_in_settings_done_provider_set));
    expect(shown.html).toContain('https://idp.brand.test');
    expect(shown.html).toContain('console-client');
    expect(shown.html).toContain(escapeHtml(EN.sign_in_settings_secret_set));
    expect(shown.html).not.toContain(SECRET);

    const audit = await auditText();
    expect(audit.rows).toContainEqual(expect.objectContaining({ action: 'console_oidc.provider_set', actor_id: operator.credential_id }));
    expect(audit.text).not.toContain(SECRET);
    expect(await app.instance.services.consoleOidcSettings.providerForSignIn(brand())).toMatchObject({ client_secret: SECRET });
  });

  it('bad input shows the form again with the service refusal as text and changes nothing', async () => {
    const before = await apiProvider();
    const auditBefore = (await auditText()).rows.length;
    const refused = await submit(operator.cookie, '/provider', { issuer: 'http://idp.elsewhere.test', client_id: 'changed-client', client_secret: 'another-secret-5150' });
    expect(refused.status).toBe(422);
    const html = await refused.text();
    expect(html).toContain('issuer: must_be_https');
    expect(html).toContain('value="http://idp.elsewhere.test"');
    expect(html).not.toContain('another-secret-5150');
    const missing = await submit(operator.cookie, '/provider', { issuer: 'https://idp.brand.test', client_id: 'changed-client', client_secret: '' });
    expect(missing.status).toBe(422);
    expect(await missing.text()).toContain('client_secret');
    expect(await apiProvider()).toEqual(before);
    expect((await auditText()).rows.length).toBe(auditBefore);
  });

  it('is removed by its form; removing it twice is refused with a page', async () => {
    const removed = await submit(operator.cookie, '/provider/remove', {});
    expect(removed.status).toBe(303);
    expect(await apiProvider()).toMatchObject({ configured: false, issuer: null, client_secret_set: false });
    expect((await pageOf(operator.cookie)).html).toContain(escapeHtml(TH.sign_in_settings_not_configured));
    const again = await submit(operator.cookie, '/provider/remove', {});
    expect(again.status).toBe(404);
    expect(await again.text()).toContain('role="alert"');
  });
});

describe('the staff list', () => {
  it('adds a reviewer entry, shown escaped on the page and the same through the API; changes its role; removes it', async () => {
    const added = await submit(operator.cookie, '/staff', { subject: HOSTILE_SUBJECT, name: HOSTILE_NAME, staff_id: '', role: 'reviewer' });
    expect(added.status).toBe(303);
    expect(added.headers.get('location')).toBe(`${PAGE}?done=staff_saved`);
    const [entry] = await apiStaff();
    expect(entry).toMatchObject({ subject: HOSTILE_SUBJECT, role: 'reviewer' });

    const page = await pageOf(operator.cookie);
    expect(page.html).toContain(escapeHtml(HOSTILE_NAME));
    expect(page.html).toContain(escapeHtml(HOSTILE_SUBJECT));
    expect(page.html).not.toContain('<script>alert');
    expect(page.html).not.toContain('<b>');
    expect(page.html).toContain(entry!.credential_id);
    expect(page.html).toContain(entry!.staff_id);

    const changed = await submit(operator.cookie, '/staff', { subject: HOSTILE_SUBJECT, role: 'operator' });
    expect(changed.status).toBe(303);
    const [promoted] = await apiStaff();
    expect(promoted).toMatchObject({ subject: HOSTILE_SUBJECT, role: 'operator', staff_id: entry!.staff_id });
    expect(promoted!.credential_id).not.toBe(entry!.credential_id);
    expect((await pageOf(operator.cookie)).html).toContain(promoted!.credential_id);

    const removed = await submit(operator.cookie, '/staff/remove', { subject: HOSTILE_SUBJECT });
    expect(removed.status).toBe(303);
    expect(removed.headers.get('location')).toBe(`${PAGE}?done=staff_removed`);
    expect(await apiStaff()).toEqual([]);
    const actions = (await auditText()).rows.filter((row) => row.action.startsWith('console_oidc.staff_')).map((row) => [row.action, row.actor_id]);
    expect(actions).toEqual([
      ['console_oidc.staff_added', operator.credential_id],
      ['console_oidc.staff_changed', operator.credential_id],
      ['console_oidc.staff_removed', operator.credential_id],
    ]);
  });

  it('bad input (no name for a new person, a wrong role) shows the refusal with what was typed, and adds nothing', async () => {
    const noName = await submit(operator.cookie, '/staff', { subject: 'sub-nameless', name: '', staff_id: '', role: 'reviewer' });
    expect(noName.status).toBe(422);
    const html = await noName.text();
    expect(html).toContain('name: required');
    expect(html).toContain('value="sub-nameless"');
    const badRole = await submit(operator.cookie, '/staff', { subject: 'sub-admin', name: 'Admin', role: 'platform_admin' });
    expect(badRole.status).toBe(422);
    expect(await badRole.text()).toContain('role');
    expect(await apiStaff()).toEqual([]);
  });
});

describe('who may use the page', () => {
  it('a reviewer gets the 403 page, and its forms change nothing', async () => {
    const page = await pageOf(reviewer);
    expect(page.status).toBe(403);
    expect(page.html).toContain(escapeHtml(TH.sign_in_settings_forbidden.replace('{role}', TH.role_reviewer)));
    expect(page.html).not.toContain(`href="${PAGE}"`);
    const refused = await consolePost(base, `${PAGE}/staff`, reviewer, { csrf_token: formTokens((await pageOf(reviewer)).html).csrf_token, subject: 'sub-reviewer', name: 'R', role: 'operator' });
    expect(refused.status).toBe(403);
    expect(await apiStaff()).toEqual([]);
  });

  it('a POST without the CSRF token (or with a wrong one) changes nothing', async () => {
    const without = await consolePost(base, `${PAGE}/staff`, operator.cookie, { subject: 'sub-forged', name: 'Forged', role: 'operator' });
    expect(without.status).toBe(403);
    expect(await without.text()).toContain(escapeHtml(TH.csrf_failed));
    const wrong = await consolePost(base, `${PAGE}/provider`, operator.cookie, { csrf_token: 'wrong', issuer: 'https://evil.test', client_id: 'x', client_secret: 'y' });
    expect(wrong.status).toBe(403);
    expect(await apiStaff()).toEqual([]);
    expect(await apiProvider()).toMatchObject({ configured: false });
  });

  it("another brand's session sees its own list only, pages it with the cursor, and cannot remove this brand's entry", async () => {
    expect((await submit(operator.cookie, '/staff', { subject: 'sub-this-brand', name: 'This brand', role: 'reviewer' })).status).toBe(303);
    const settings = app.instance.services.consoleOidcSettings;
    const actor = { actor_type: 'system' as const, actor_id: 'sign-in-settings-test', request_id: null };
    for (let index = 0; index < 26; index += 1) await settings.setStaff(actor, otherBrand, { subject: `sub-other-${String(index).padStart(2, '0')}`, role: 'reviewer', name: `Other ${index}` });

    const first = await pageOf(otherOperator);
    expect(first.status).toBe(200);
    expect(first.html).not.toContain('sub-this-brand');
    expect(first.html).toContain('sub-other-24');
    expect(first.html).not.toContain('sub-other-25');
    const next = /href="([^"]+)" rel="next"/.exec(first.html)?.[1] ?? '';
    expect(next).toContain('cursor=');
    const second = await pageOf(otherOperator, next.replace(PAGE, '').replaceAll('&amp;', '&'));
    expect(second.html).toContain('sub-other-25');
    expect(second.html).not.toContain('sub-other-24');
    expect(second.html).toContain(escapeHtml(TH.first_page));

    const refused = await submit(otherOperator, '/staff/remove', { subject: 'sub-this-brand' });
    expect(refused.status).toBe(404);
    expect((await apiStaff()).map((entry) => entry.subject)).toEqual(['sub-this-brand']);
  });
});
