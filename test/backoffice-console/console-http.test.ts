import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { freePort } from '../support/browser.ts';
import { caseInReview, consoleGet, consoleLink, consolePost, formTokens, sessionCookieOf, signIn, useLink } from '../support/console.ts';
import { CONSOLE_CONTENT_SECURITY_POLICY } from '../../src/backoffice-console/routes.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import type { DepositView } from '../../src/deposits/service.ts';

/**
 * The back-office console over HTTP on a real socket: sign-in links made by the CLI, the session cookie and its
 * limits (on the test clock), the pages' headers, CSRF, the 403 and 404 pages, escaping, and decisions that reach
 * the review service exactly as the /v1/bo routes do.
 */

const TH = consoleTexts('th');
const EN = consoleTexts('en');
const HOSTILE_REFERENCE = `<script>alert("x")</script>'"&`;
const NOTE = `Checked with the bank <script>alert('note')</script> "quoted" & done`;

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  // The console's own origin (BACKOFFICE_BASE_URL) names the address the CLI's links point at.
  app = await createTestApp({ config: { BACKOFFICE_BASE_URL: base } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}, 60_000);

afterAll(async () => {
  await app.close();
});

const brand = () => app.sandbox.white_label_id;

async function auditActions(target_id: string): Promise<string[]> {
  const { rows } = await app.testDatabase.database.query<{ action: string }>('SELECT action FROM audit_log WHERE target_id = $1 ORDER BY created_at, audit_id', [target_id]);
  return rows.map((row) => row.action);
}

async function depositStatus(id: string): Promise<string> {
  return (await app.signed({ url: `/v1/pay/deposits/${id}`, credentials: merchant })).json<DepositView>().status;
}

async function decisionCount(id: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*)::text AS count FROM review_decisions WHERE deposit_id = $1', [id]);
  return Number(rows[0]?.count ?? 0);
}

function expectPageHeaders(response: Response): void {
  expect(response.headers.get('content-security-policy')).toBe(CONSOLE_CONTENT_SECURITY_POLICY);
  expect(response.headers.get('cache-control')).toBe('no-store');
  expect(response.headers.get('x-frame-options')).toBe('DENY');
  expect(response.headers.get('referrer-policy')).toBe('no-referrer');
  expect(response.headers.get('x-content-type-options')).toBe('nosniff');
}

describe('signing in with the CLI link', () => {
  it('the link works once: its page, then a session cookie, then never again', async () => {
    const link = await consoleLink(app, base, { brand: brand(), role: 'reviewer', name: 'Link reviewer' });
    expect(link.url).toMatch(new RegExp(`^${base}/bo/sign-in/bol_[A-Za-z0-9_-]{43}$`));
    // Opening the link's page uses nothing up (a link preview must not sign anyone in or spend the link).
    const page = await fetch(link.url);
    expectPageHeaders(page);
    expect(page.headers.get('set-cookie')).toBeNull();
    const first = await useLink(link.url);
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/bo/reviews');
    const cookie = first.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/^pg_bo_session=bok_[A-Za-z0-9_-]{43}; Path=\/bo; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    const second = await useLink(link.url);
    expect(second.status).toBe(404);
    expect(sessionCookieOf(second)).toBeNull();
    expect(await second.text()).toContain(escapeHtml(TH.link_invalid));
    expect(await auditActions(link.credential_id)).toEqual(expect.arrayContaining(['backoffice_credential.created', 'console.sign_in_link_issued']));
    const { rows } = await app.testDatabase.database.query<{ action: string; actor_id: string }>("SELECT action, actor_id FROM audit_log WHERE action = 'console.signed_in' AND actor_id = $1", [link.credential_id]);
    expect(rows).toHaveLength(1);
  });

  it('a link expires after 10 minutes, and the database keeps only digests of links and cookies', async () => {
    const link = await consoleLink(app, base, { brand: brand(), role: 'reviewer', name: 'Late reviewer' });
    app.clock.advance(10 * 60_000);
    expect((await useLink(link.url)).status).toBe(404);
    const token = link.url.split('/').at(-1)!;
    const { rows } = await app.testDatabase.database.query<{ text: string }>(
      "SELECT (SELECT string_agg(token_hash, ',') FROM console_sign_in_links) || ',' || coalesce((SELECT string_agg(token_hash, ',') FROM console_sessions), '') AS text",
    );
    expect(rows[0]?.text).not.toContain(token);
    expect(rows[0]?.text).toMatch(/^[0-9a-f,]+$/);
  });

  it('the platform administrator must name a brand; without --role the link signs in as the caller', async () => {
    const { cookie, link } = await signIn(app, base, { brand: brand() });
    expect(link.role).toBe('platform_admin');
    const queue = await consoleGet(base, '/bo/reviews', cookie);
    expect(queue.status).toBe(200);
    expect(await queue.text()).toContain(escapeHtml(TH.role_platform_admin));
  });
});

describe('pages and their headers', () => {
  it('without a session every page answers the sign-in page (401), with the security headers and no-store', async () => {
    for (const path of ['/bo/reviews', '/bo/reviews/dep_01ARZ3NDEKTSV4RRFFQ69G5FAV', '/bo/reviews/dep_01ARZ3NDEKTSV4RRFFQ69G5FAV/slips/rcpt_01ARZ3NDEKTSV4RRFFQ69G5FAV/image']) {
      const response = await consoleGet(base, path, null);
      expect(response.status, path).toBe(401);
      expectPageHeaders(response);
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(await response.text()).toContain(escapeHtml(TH.session_needed));
    }
    // An unknown cookie is no session either.
    expect((await consoleGet(base, '/bo/reviews', `bok_${'A'.repeat(43)}`)).status).toBe(401);
  });

  it('the queue is Thai by default and English on ?lang=en, and names are escaped', async () => {
    const order = await caseInReview(app, merchant, HOSTILE_REFERENCE);
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: `Somsri <b>"Reviewer"</b>` });
    const thai = await consoleGet(base, '/bo/reviews', cookie);
    expect(thai.status).toBe(200);
    expectPageHeaders(thai);
    const html = await thai.text();
    expect(html).toContain('<html lang="th">');
    expect(html).toContain(order.id);
    expect(html).toContain(escapeHtml(HOSTILE_REFERENCE));
    expect(html).not.toContain('<script>alert');
    expect(html).toContain('Somsri &lt;b&gt;&quot;Reviewer&quot;&lt;/b&gt;');
    expect(html).toContain('SENDER_NAME_MISMATCH');
    const english = await (await consoleGet(base, '/bo/reviews?lang=en', cookie)).text();
    expect(english).toContain('<html lang="en">');
    expect(english).toContain(escapeHtml(EN.queue_heading));
  });

  it('assets are hashed and kept a year; an unknown console address is a 404 page', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Asset reviewer' });
    const html = await (await consoleGet(base, '/bo/reviews', cookie)).text();
    const script = /<script src="([^"]+)" defer><\/script>/.exec(html)?.[1];
    expect(script).toMatch(/^\/bo\/assets\/console\.[0-9a-f]{16}\.js$/);
    const asset = await fetch(`${base}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    const missing = await consoleGet(base, '/bo/nothing-here', cookie);
    expect(missing.status).toBe(404);
    expectPageHeaders(missing);
  });
});
