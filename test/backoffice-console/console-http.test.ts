import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { auditTrail, caseInReview, consoleAppWithMerchant, consoleGet, consoleLink, consolePost, expectConsolePageHeaders, formTokens, sessionCookieOf, signIn, useLink } from '../support/console.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import { sha256Hex } from '../../src/platform/crypto.ts';
import { runCli, type CliIo } from '../../src/cli/commands.ts';

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
  ({ app, base, merchant } = await consoleAppWithMerchant());
}, 60_000);

afterAll(async () => {
  await app.close();
});

const brand = () => app.sandbox.white_label_id;

async function auditActions(target_id: string): Promise<string[]> {
  return (await auditTrail(app, target_id)).map((entry) => entry.action);
}

async function depositStatus(id: string): Promise<string> {
  return (await app.signed({ url: `/v1/pay/deposits/${id}`, credentials: merchant })).json<DepositView>().status;
}

async function decisionCount(id: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*)::text AS count FROM review_decisions WHERE deposit_id = $1', [id]);
  return Number(rows[0]?.count ?? 0);
}

function expectPageHeaders(response: Response): void {
  expectConsolePageHeaders(response);
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

describe('the session', () => {
  it('ends after 30 idle minutes; the queue polling does not keep it alive; ending is recorded', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Idle reviewer' });
    app.clock.advance(29 * 60_000);
    expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(200);
    // Polling for 29 more minutes moves nothing: the person last asked for a page 29 minutes ago.
    app.clock.advance(20 * 60_000);
    expect((await consoleGet(base, '/bo/reviews/state', cookie)).status).toBe(200);
    app.clock.advance(9 * 60_000);
    expect((await consoleGet(base, '/bo/reviews/state', cookie)).status).toBe(200);
    app.clock.advance(60_000);
    const expired = await consoleGet(base, '/bo/reviews', cookie);
    expect(expired.status).toBe(401);
    expect(await expired.text()).toContain(escapeHtml(TH.session_needed));
    const { rows } = await app.testDatabase.database.query<{ ended_reason: string }>('SELECT ended_reason FROM console_sessions WHERE token_hash = $1', [sha256Hex(cookie)]);
    expect(rows).toEqual([{ ended_reason: 'idle' }]);
  });

  it('ends 12 hours after sign-in however busy it is', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Busy reviewer' });
    for (let hour = 0; hour < 12; hour += 1) {
      app.clock.advance(20 * 60_000);
      expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(200);
      app.clock.advance(20 * 60_000);
      expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(200);
      app.clock.advance(20 * 60_000);
      const response = await consoleGet(base, '/bo/reviews', cookie);
      expect(response.status).toBe(hour === 11 ? 401 : 200);
    }
  });

  it('signing out ends it at once, clears the cookie and is audited; it needs the CSRF token', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Leaving reviewer' });
    const page = await (await consoleGet(base, '/bo/reviews', cookie)).text();
    const { csrf_token } = formTokens(page);
    const refused = await consolePost(base, '/bo/sign-out', cookie, {});
    expect(refused.status).toBe(403);
    expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(200);
    const out = await consolePost(base, '/bo/sign-out', cookie, { csrf_token });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/^pg_bo_session=; Path=\/bo; Max-Age=0; HttpOnly; SameSite=Strict$/);
    expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(401);
    const { rows } = await app.testDatabase.database.query<{ count: string }>("SELECT count(*)::text AS count FROM audit_log WHERE action = 'console.signed_out'");
    expect(Number(rows[0]?.count)).toBeGreaterThanOrEqual(1);
  });

  it('revoking the credential ends its sessions at once', async () => {
    const { cookie, link } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Revoked reviewer' });
    expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(200);
    const revoked = await app.backoffice({ method: 'POST', url: `/v1/bo/credentials/${link.credential_id}/revoke` });
    expect(revoked.statusCode, revoked.body).toBe(200);
    expect((await consoleGet(base, '/bo/reviews', cookie)).status).toBe(401);
  });
});

describe('authority', () => {
  it('a POST without the CSRF token, or from another site, changes nothing', async () => {
    const order = await caseInReview(app, merchant, `csrf-${Date.now()}`);
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'CSRF reviewer' });
    const { csrf_token, decision_key } = formTokens(await (await consoleGet(base, `/bo/reviews/${order.id}`, cookie)).text());
    expect(csrf_token).not.toBe('');
    const missing = await consolePost(base, `/bo/reviews/${order.id}/approve`, cookie, { decision_key });
    expect(missing.status).toBe(403);
    expect(await missing.text()).toContain(escapeHtml(TH.csrf_failed));
    const wrong = await consolePost(base, `/bo/reviews/${order.id}/approve`, cookie, { decision_key, csrf_token: `${csrf_token.slice(0, -2)}AA` });
    expect(wrong.status).toBe(403);
    const crossSite = await consolePost(base, `/bo/reviews/${order.id}/approve`, cookie, { decision_key, csrf_token }, { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    const otherOrigin = await consolePost(base, `/bo/reviews/${order.id}/approve`, cookie, { decision_key, csrf_token }, { origin: 'https://attacker.example', 'sec-fetch-site': '' });
    expect(otherOrigin.status).toBe(403);
    expect(await depositStatus(order.id)).toBe('under_review');
    expect(await decisionCount(order.id)).toBe(0);
  });

  it('an operator reads the case but a decision answers the 403 page that says why; nothing changes', async () => {
    const order = await caseInReview(app, merchant, `operator-${Date.now()}`);
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Operator on the desk' });
    const page = await consoleGet(base, `/bo/reviews/${order.id}`, cookie);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(escapeHtml(TH.decide_only_reviewers));
    const { csrf_token } = formTokens(html);
    const refused = await consolePost(base, `/bo/reviews/${order.id}/approve`, cookie, { csrf_token, decision_key: 'operator-try' });
    expect(refused.status).toBe(403);
    expectPageHeaders(refused);
    expect(await refused.text()).toContain(escapeHtml(TH.forbidden_decide.replace('{role}', TH.role_operator)));
    expect(await depositStatus(order.id)).toBe('under_review');
    expect(await decisionCount(order.id)).toBe(0);
  });

  it("another brand's case, and its slip image, are 404 pages", async () => {
    const order = await caseInReview(app, merchant, `brand-${Date.now()}`);
    const other = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'console-test', request_id: null }, { name: 'Other brand' });
    const { cookie } = await signIn(app, base, { brand: other.id, role: 'reviewer', name: 'Other brand reviewer' });
    const detail = await app.backoffice({ url: `/v1/bo/reviews/${order.id}?white_label_id=${brand()}` });
    const receipt = detail.json<{ slips: { receipt_id: string }[] }>().slips[0]!.receipt_id;
    for (const path of [`/bo/reviews/${order.id}`, `/bo/reviews/${order.id}/slips/${receipt}/image`]) {
      const response = await consoleGet(base, path, cookie);
      expect(response.status, path).toBe(404);
      expectPageHeaders(response);
      expect(await response.text()).not.toContain(order.merchant_reference);
    }
    const { csrf_token } = formTokens(await (await consoleGet(base, '/bo/reviews', cookie)).text());
    const decided = await consolePost(base, `/bo/reviews/${order.id}/reject`, cookie, { csrf_token, rejection_code: 'SLIP_NOT_GENUINE', note: NOTE });
    expect(decided.status).toBe(404);
    expect(await depositStatus(order.id)).toBe('under_review');
  });

  it('the slip image is served behind the session, never stored by a cache', async () => {
    const order = await caseInReview(app, merchant, `image-${Date.now()}`);
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Image reviewer' });
    const html = await (await consoleGet(base, `/bo/reviews/${order.id}`, cookie)).text();
    const src = /<img src="([^"]+)"/.exec(html)?.[1];
    expect(src).toMatch(new RegExp(`^/bo/reviews/${order.id}/slips/rcpt_[0-9A-Z]+/image$`));
    const image = await consoleGet(base, src!, cookie);
    expect(image.status).toBe(200);
    expect(image.headers.get('content-type')).toMatch(/^image\/(png|jpeg|webp)$/);
    expect(image.headers.get('cache-control')).toBe('no-store');
    expect((await image.arrayBuffer()).byteLength).toBeGreaterThan(100);
    expect((await consoleGet(base, src!, null)).status).toBe(401);
  });

});

describe('decisions', () => {
  it('escalate and reject call the review service as the signed-in reviewer; notes show as text', async () => {
    const order = await caseInReview(app, merchant, `notes-${Date.now()}`);
    const first = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Escalating reviewer' });
    const second = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Deciding reviewer' });
    const tokens = formTokens(await (await consoleGet(base, `/bo/reviews/${order.id}`, first.cookie)).text());
    const short = await consolePost(base, `/bo/reviews/${order.id}/escalate`, first.cookie, { ...tokens, note: 'too short' });
    expect(short.status).toBe(422);
    const escalated = await consolePost(base, `/bo/reviews/${order.id}/escalate`, first.cookie, { ...tokens, note: NOTE });
    expect(escalated.status).toBe(303);
    expect(escalated.headers.get('location')).toBe(`/bo/reviews/${order.id}?done=escalated`);
    const afterEscalation = await (await consoleGet(base, `/bo/reviews/${order.id}?done=escalated`, first.cookie)).text();
    expect(afterEscalation).toContain(escapeHtml(TH.effect_escalated));
    expect(afterEscalation).toContain(escapeHtml(NOTE));
    expect(afterEscalation).not.toContain("<script>alert('note')");
    expect(afterEscalation).toContain(escapeHtml(TH.escalated_by_you));
    const secondTokens = formTokens(await (await consoleGet(base, `/bo/reviews/${order.id}`, second.cookie)).text());
    const rejected = await consolePost(base, `/bo/reviews/${order.id}/reject`, second.cookie, { ...secondTokens, rejection_code: 'SENDER_NOT_ACCOUNT_HOLDER', note: NOTE });
    expect(rejected.status).toBe(303);
    expect(await depositStatus(order.id)).toBe('rejected');
    const { rows } = await app.testDatabase.database.query<{ action: string; reviewer_id: string; staff_id: string }>(
      'SELECT action, reviewer_id, staff_id FROM review_decisions WHERE deposit_id = $1 ORDER BY created_at',
      [order.id],
    );
    expect(rows).toEqual([
      { action: 'escalate', reviewer_id: first.link.credential_id, staff_id: first.link.staff_id },
      { action: 'reject', reviewer_id: second.link.credential_id, staff_id: second.link.staff_id },
    ]);
    expect(await auditActions(order.id)).toEqual(['review.escalated', 'review.rejected']);
  });

  it('a decision that lost the race says so, with the winner’s decision; a form sent twice decides once', async () => {
    const order = await caseInReview(app, merchant, `race-${Date.now()}`);
    const slow = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Slow reviewer' });
    const fast = await signIn(app, base, { brand: brand(), role: 'reviewer', name: `Fast "<i>reviewer</i>"` });
    const slowTokens = formTokens(await (await consoleGet(base, `/bo/reviews/${order.id}`, slow.cookie)).text());
    const fastTokens = formTokens(await (await consoleGet(base, `/bo/reviews/${order.id}`, fast.cookie)).text());
    const approved = await consolePost(base, `/bo/reviews/${order.id}/approve`, fast.cookie, fastTokens);
    expect(approved.status).toBe(303);
    expect(approved.headers.get('location')).toBe(`/bo/reviews/${order.id}?done=settled`);
    const again = await consolePost(base, `/bo/reviews/${order.id}/approve`, fast.cookie, fastTokens);
    expect(again.status).toBe(303);
    expect(await decisionCount(order.id)).toBe(1);
    const lost = await consolePost(base, `/bo/reviews/${order.id}/reject`, slow.cookie, { ...slowTokens, rejection_code: 'SLIP_NOT_GENUINE', note: NOTE });
    expect(lost.status).toBe(409);
    const html = await lost.text();
    expect(html).toContain('id="case-notice"');
    expect(html).toContain(fast.link.staff_id);
    // The winner is named, as text.
    expect(html).toContain(escapeHtml(`Fast "<i>reviewer</i>"`));
    expect(html).not.toContain('<i>reviewer</i>');
    expect(html).toContain(escapeHtml(TH.action_approve));
    expect(await depositStatus(order.id)).toBe('settled');
    expect(await decisionCount(order.id)).toBe(1);
  });
});

describe('npm run cli -- bo login', () => {
  async function cli(argv: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const io: CliIo = {
      stdout: { write: (text: string) => ((stdout += text), true) },
      stderr: { write: (text: string) => ((stderr += text), true) },
      env: { PG_BASE_URL: base, PG_OPERATOR_TOKEN: app.operator_token, DATA_DIR: '/nonexistent-console-test', LOG_LEVEL: 'silent', ...env },
    };
    return { code: await runCli(argv, io), stdout, stderr };
  }

  it('prints the link alone on stdout, and refuses bad usage before calling the service', async () => {
    const printed = await cli(['bo', 'login', '--brand', brand(), '--role', 'reviewer', '--name', 'Printed reviewer']);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).toMatch(new RegExp(`^${base}/bo/sign-in/bol_[A-Za-z0-9_-]{43}\\n$`));
    expect(printed.stderr).toContain('reviewer');
    expect((await cli(['bo', 'login', '--name', 'No role'])).code).toBe(2);
    expect((await cli(['bo', 'login', '--token', 'bo_x'])).code).toBe(2);
    expect((await cli(['bo', 'logout'])).code).toBe(2);
    const help = await cli(['bo', 'login', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('one-time sign-in link');
  });

  it('the platform administrator without --brand, and a reviewer credential, are refused by the service', async () => {
    const noBrand = await cli(['bo', 'login', '--json']);
    expect(noBrand.code).toBe(1);
    expect(JSON.parse(noBrand.stderr)).toMatchObject({ error: { code: 'validation_error' } });
    const reviewer = await app.instance.services.tenancy.createBackofficeCredential(
      { actor_type: 'system', actor_id: 'console-test', request_id: null },
      { white_label_id: brand(), role: 'reviewer', name: 'CLI reviewer' },
    );
    const refused = await cli(['bo', 'login', '--json'], { PG_OPERATOR_TOKEN: reviewer.token });
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stderr)).toMatchObject({ error: { code: 'scope_denied' } });
    expect(refused.stderr).not.toContain(reviewer.token);
  });
});
