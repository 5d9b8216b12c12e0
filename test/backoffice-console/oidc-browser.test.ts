import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../support/app.ts';
import { caseInReview, listeningConsoleApp } from '../support/console.ts';
import { depositPolicyBody } from '../support/slips.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import { axeScan, consoleBrowser, shoot } from '../support/console-browser.ts';
import { startOpenIdProvider, type TestOpenIdProvider } from '../support/oidc-provider.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';

/**
 * Signing in to the back-office console with a brand's OpenID Connect provider, in chromium: a real provider
 * (`oidc-provider`, on http://localhost:{port}, another site than the console) with one registered client; the
 * brand's operator sets the provider and the staff list through the /v1/bo API; a listed reviewer signs in at the
 * provider and lands on the review queue; two listed reviewers decide a four-eyes case the 101.00 THB scenario sent
 * to review (the first sees its slip and gives the first approval, the second completes it); a subject not on the
 * list gets the 403 page; an answer whose state was altered on the way back is refused. axe-core checks the console's new pages (not the provider's own pages).
 */

const browser = consoleBrowser();
const TH = consoleTexts('th');
const EN = consoleTexts('en');

let app: TestApp;
let base: string;
let provider: TestOpenIdProvider;
let operatorToken: string;

beforeAll(async () => {
  if (browser.skipped) return;
  ({ app, base } = await listeningConsoleApp());
  provider = await startOpenIdProvider({ redirect_uri: `${base}/bo/oidc/callback` });
  const actor = { actor_type: 'system' as const, actor_id: 'oidc-browser-test', request_id: null };
  operatorToken = (await app.instance.services.tenancy.createBackofficeCredential(actor, { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'Brand administrator' })).token;
  // The brand's administrator (its operator) sets the provider and lists one reviewer, as docs/backoffice.md says.
  const set = await app.backoffice({
    method: 'POST',
    url: `/v1/bo/brands/${app.sandbox.white_label_id}/console-oidc`,
    body: { issuer: provider.issuer, client_id: provider.client_id, client_secret: provider.client_secret },
    token: operatorToken,
  });
  expect(set.statusCode, set.body).toBe(200);
  expect(set.json().redirect_uri).toBe(`${base}/bo/oidc/callback`);
  const listed = await app.backoffice({
    method: 'POST',
    url: `/v1/bo/brands/${app.sandbox.white_label_id}/console-oidc/staff`,
    body: { subject: 'somsri@brand.test', role: 'reviewer', name: 'สมศรี ผู้ตรวจสอบ' },
    token: operatorToken,
  });
  expect(listed.statusCode, listed.body).toBe(200);
  const second = await app.backoffice({
    method: 'POST',
    url: `/v1/bo/brands/${app.sandbox.white_label_id}/console-oidc/staff`,
    body: { subject: 'niran@brand.test', role: 'reviewer', name: 'นิรันดร์ ผู้ตรวจสอบ' },
    token: operatorToken,
  });
  expect(second.statusCode, second.body).toBe(200);
  await browser.launch();
}, 180_000);

afterAll(async () => {
  await browser.close();
  await provider?.close();
  await app?.close();
});

/** A page in a fresh context; these tests look at the console's answers, not at the problems the page collects. */
async function openPage(): Promise<Page> {
  return (await browser.openPage()).page;
}

/** Starts the brand's sign-in and signs in at the provider's development pages as `subject`. */
async function signInAtProvider(page: Page, subject: string, language: 'th' | 'en' = 'th'): Promise<void> {
  await page.goto(`${base}/bo/sign-in/oidc?brand=${app.sandbox.white_label_id}${language === 'en' ? '&lang=en' : ''}`);
  expect(new URL(page.url()).origin).toBe(provider.issuer);
  await page.fill('input[name="login"]', subject);
  await page.fill('input[name="password"]', 'any password');
  await page.click('button[type="submit"]');
  // The consent page: one button.
  await page.click('button[type="submit"]');
}

async function auditRows(action: string): Promise<Array<{ actor_id: string; details: Record<string, unknown> }>> {
  const { rows } = await app.testDatabase.database.query<{ actor_id: string; details: Record<string, unknown> | string }>('SELECT actor_id, details FROM audit_log WHERE action = $1 ORDER BY created_at', [action]);
  return rows.map((row) => ({ actor_id: row.actor_id, details: typeof row.details === 'string' ? (JSON.parse(row.details) as Record<string, unknown>) : row.details }));
}

describe.skipIf(browser.skipped)("signing in with the brand's OpenID provider", () => {
  it('a listed reviewer signs in at the provider and sees the review queue; the sign-in is audited', async () => {
    const page = await openPage();
    await signInAtProvider(page, 'somsri@brand.test');
    await page.waitForURL(`${base}/bo/reviews`);
    expect(await page.textContent('h1')).toBe(TH.queue_heading);
    expect(await page.textContent('.who')).toContain('สมศรี ผู้ตรวจสอบ');
    expect(await page.textContent('.who')).toContain(TH.role_reviewer);
    await axeScan(page, 'queue after an OpenID sign-in');
    await shoot(page, 'oidc-queue');
    const cookies = await page.context().cookies(`${base}/bo/reviews`);
    expect(cookies.map((cookie) => cookie.name)).toEqual(['pg_bo_session']);
    const signedIn = await auditRows('console.signed_in');
    expect(signedIn.at(-1)?.details).toMatchObject({ method: 'oidc', role: 'reviewer' });
    const { rows } = await app.testDatabase.database.query<{ sign_in_method: string }>('SELECT sign_in_method FROM console_sessions');
    expect(rows.map((row) => row.sign_in_method)).toContain('oidc');
  }, 60_000);

  it('a subject that is not on the staff list gets the 403 page saying so; the refusal is audited', async () => {
    const page = await openPage();
    await signInAtProvider(page, 'stranger@elsewhere.test', 'en');
    await page.waitForURL(/\/bo\/oidc\/callback/);
    expect(await page.textContent('h1')).toBe(EN.oidc_unmapped_heading);
    expect(await page.textContent('main')).toContain(EN.oidc_unmapped);
    const cookies = await page.context().cookies(`${base}/bo/reviews`);
    expect(cookies.map((cookie) => cookie.name)).not.toContain('pg_bo_session');
    await axeScan(page, 'not on the staff list');
    await shoot(page, 'oidc-unmapped');
    expect((await auditRows('console.oidc_sign_in_refused')).at(-1)?.details).toMatchObject({ subject: 'stranger@elsewhere.test', reason: 'subject_not_listed' });
  }, 60_000);

});

describe.skipIf(browser.skipped)('reviewers signed in through the OpenID provider decide a four-eyes case', () => {
  it('the first sees the 101.00 THB case and its slip and approves; the second, not the first, completes it', async () => {
    // Four eyes from 100.00 THB in test mode, so that the sandbox's 101.00 THB review case needs two reviewers.
    const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: app.sandbox.white_label_id, four_eyes_min_amount_minor: 10_000 }) });
    expect(policy.statusCode, policy.body).toBe(200);
    const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const order = await caseInReview(app, merchant, `oidc-four-eyes-${Date.now()}`);
    expect(order.review?.four_eyes_required).toBe(true);

    const first = await openPage();
    await signInAtProvider(first, 'somsri@brand.test');
    await first.waitForURL(`${base}/bo/reviews`);
    await Promise.all([first.waitForURL(`${base}/bo/reviews/${order.id}`), first.click(`a[href="/bo/reviews/${order.id}"]`)]);
    await first.waitForFunction(() => {
      const image = (globalThis as unknown as { document: { querySelector(selector: string): { complete: boolean; naturalWidth: number } | null } }).document.querySelector('figure.slip img');
      return image !== null && image.complete && image.naturalWidth > 0;
    }, undefined, { timeout: 15_000 });
    await Promise.all([first.waitForURL(`${base}/bo/reviews/${order.id}?done=approval_recorded`), first.click('#approve-button')]);
    expect(await first.textContent('#same-reviewer')).toBe(TH.four_eyes_same_person);
    expect(await first.isDisabled('#approve-button')).toBe(true);

    const second = await openPage();
    await signInAtProvider(second, 'niran@brand.test');
    await second.waitForURL(`${base}/bo/reviews`);
    await second.goto(`${base}/bo/reviews/${order.id}`);
    expect(await second.textContent('#first-approval')).toContain('สมศรี ผู้ตรวจสอบ');
    await Promise.all([second.waitForURL(`${base}/bo/reviews/${order.id}?done=settled`), second.click('#approve-button')]);
    const settled = (await app.signed({ url: `/v1/pay/deposits/${order.id}`, credentials: merchant })).json<DepositView>();
    expect(settled).toMatchObject({ status: 'settled', settled_via: 'review' });
  }, 120_000);
});

describe.skipIf(browser.skipped)("a sign-in with the brand's OpenID provider that goes wrong", () => {
  it('an answer whose state was altered on the way back is refused, and signs nobody in', async () => {
    const page = await openPage();
    let tampered = '';
    // A route sees only the first request of a redirect chain, and the provider reaches the callback by redirects
    // after a form's POST. So each POST to the provider is sent here, its redirects inside the provider followed
    // with the context's cookies, and the browser is sent where they lead, with another state when that is the
    // console's callback.
    await page.route((url) => url.origin === provider.issuer, async (route) => {
      if (route.request().method() !== 'POST') return route.continue();
      let response = await route.fetch({ maxRedirects: 0 });
      let location = response.headers().location ?? '';
      while (location.startsWith('/') || location.startsWith(provider.issuer)) {
        const next = new URL(location, provider.issuer).href;
        response = await page.context().request.get(next, { maxRedirects: 0 });
        if (!response.headers().location) {
          location = next;
          break;
        }
        location = response.headers().location ?? '';
      }
      if (location.startsWith(`${base}/bo/oidc/callback`)) {
        const url = new URL(location);
        url.searchParams.set('state', `${url.searchParams.get('state') ?? ''}x`);
        tampered = url.href;
        location = url.href;
      }
      return route.fulfill({ status: 303, headers: { location } });
    });
    const sessionsBefore = await app.testDatabase.database.query('SELECT 1 FROM console_sessions');
    await signInAtProvider(page, 'somsri@brand.test');
    await page.waitForURL(/\/bo\/oidc\/callback/);
    expect(tampered).toContain('state=');
    expect(await page.textContent('h1')).toBe(TH.oidc_heading);
    expect(await page.textContent('main')).toContain(TH.oidc_refused);
    expect((await page.context().cookies(`${base}/bo/reviews`)).map((cookie) => cookie.name)).not.toContain('pg_bo_session');
    const sessionsAfter = await app.testDatabase.database.query('SELECT 1 FROM console_sessions');
    expect(sessionsAfter.rows.length).toBe(sessionsBefore.rows.length);
    await axeScan(page, 'refused sign-in');
  }, 60_000);

  it('a brand without a provider answers the 404 page, which passes axe-core', async () => {
    const page = await openPage();
    const answer = await page.goto(`${base}/bo/sign-in/oidc?brand=wl_01K0NOSUCHBRAND00000000000`);
    expect(answer?.status()).toBe(404);
    expect(await page.textContent('main')).toContain(TH.oidc_not_configured);
    await axeScan(page, 'not configured');
  }, 60_000);
});
