import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { auditTrail, consoleAppWithMerchant, consoleGet, consolePost, expectConsolePageHeaders, formTokens, signIn } from '../support/console.ts';
import { expiredOrder } from '../support/console-desk.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import type { BackofficeClaimView } from '../../src/review/claims.ts';

/**
 * Opening a claim for a payer from the console's claims desk over HTTP on a real socket: the form on /bo/claims/new,
 * POST /bo/claims ending where POST /v1/bo/claims ends (the same claim read back through GET /v1/bo/claims/{id}),
 * refusals that change nothing (bad input as the form again with the API's message, no CSRF token, another brand's
 * order as the 404 page), the API's roles, and the payer's words rendered as text.
 */

const TH = consoleTexts('th');
const EN = consoleTexts('en');
const HOSTILE_NOTE = `Payer says <script>alert("x")</script> 'quoted' & "double"`;

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
/** An order of the sandbox brand that expired unpaid, its late-slip window closed. */
let deposit_id: string;
/** An order of another brand, in the same state. */
let foreign_deposit_id: string;

beforeAll(async () => {
  ({ app, base, merchant } = await consoleAppWithMerchant());
  deposit_id = await expiredOrder(app, merchant);
  foreign_deposit_id = await expiredOrder(app, await app.createMerchant());
}, 240_000);

afterAll(async () => {
  await app.close();
});

const brand = () => app.sandbox.white_label_id;
let transfers = 0;
const nextReference = () => `OPEN${Date.now()}N${(transfers += 1)}`;

async function claimOverApi(id: string): Promise<BackofficeClaimView> {
  const response = await app.backoffice({ url: `/v1/bo/claims/${id}?white_label_id=${brand()}` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<BackofficeClaimView>();
}

/** The brand's claims on the order, through the API (at most 100, plenty for this file). */
async function claimIdsOverApi(order_id: string): Promise<string[]> {
  const response = await app.backoffice({ url: `/v1/bo/claims?white_label_id=${brand()}&deposit_id=${order_id}&limit=100` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<{ data: BackofficeClaimView[] }>().data.map((claim) => claim.id);
}

async function openForm(cookie: string, path = '/bo/claims/new'): Promise<{ html: string; csrf_token: string; decision_key: string }> {
  const response = await consoleGet(base, path, cookie);
  expect(response.status).toBe(200);
  expectConsolePageHeaders(response);
  const html = await response.text();
  return { html, ...formTokens(html) };
}

describe('claims: opening a claim for a payer', () => {
  it('an operator opens a late-slip claim through the form; the API reads the same claim', async () => {
    const { cookie, link } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Claim opener' });
    const list = await (await consoleGet(base, '/bo/claims', cookie)).text();
    expect(list).toContain('href="/bo/claims/new"');
    expect(list).toContain(escapeHtml(TH.claims_open_link));
    const { html, csrf_token, decision_key } = await openForm(cookie, `/bo/claims/new?deposit_id=${deposit_id}`);
    expect(html).toContain(`value="${deposit_id}"`);
    expect(html).toContain('<option value="late_slip"');
    expect(html).toContain('<option value="additional_transfer"');
    expect(html).not.toContain('value="same_transfer_excess"');
    expect(csrf_token).not.toBe('');
    expect(decision_key).not.toBe('');
    const trans_ref = nextReference();
    const form = { csrf_token, decision_key, deposit_id, cause: 'late_slip', amount: '120.50', trans_ref, sending_bank_code: '014', occurred_at: '2026-11-28T14:05', note: HOSTILE_NOTE };
    const opened = await consolePost(base, '/bo/claims', cookie, form);
    expect(opened.status, /id="case-notice">([^<]*)/.exec(await opened.clone().text())?.[1]).toBe(303);
    const location = opened.headers.get('location') ?? '';
    const claim_id = /^\/bo\/claims\/(clm_[0-9A-Za-z]+)\?done=opened$/.exec(location)?.[1];
    expect(claim_id, location).toBeTruthy();

    const claim = await claimOverApi(claim_id!);
    expect(claim).toMatchObject({ deposit_id, cause: 'late_slip', status: 'open', amount_minor: 12_050, opened_by: { type: 'backoffice', credential_id: link.credential_id } });
    expect(claim.evidence).toMatchObject({ trans_ref, sending_bank_code: '014', occurred_at: '2026-11-28T07:05:00.000Z', note: HOSTILE_NOTE.trim(), amount_minor: 12_050 });
    expect(await auditTrail(app, claim_id!)).toEqual([expect.objectContaining({ action: 'claim.opened', actor_id: link.credential_id })]);

    // The claim's page says it was opened, and shows the payer's words as text.
    const page = await consoleGet(base, location, cookie);
    expect(page.status).toBe(200);
    const detail = await page.text();
    expect(detail).toContain(escapeHtml(TH.claims_done_opened));
    expect(detail).toContain(escapeHtml(HOSTILE_NOTE));
    expect(detail).not.toContain('<script>alert');

    // The same transfer sent again (a second click) is the claim it opened, not a second one.
    const again = await consolePost(base, '/bo/claims', cookie, form);
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe(`/bo/claims/${claim_id}?done=existing`);
    expect((await claimIdsOverApi(deposit_id)).filter((id) => id === claim_id)).toHaveLength(1);
  });
});

describe('claims: an opening refused for its input', () => {
  it('bad input shows the form again (422) with the API’s reasons and what was typed; nothing changes', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Careless opener' });
    const before = await claimIdsOverApi(deposit_id);
    const { csrf_token, decision_key } = await openForm(cookie);
    // A transfer after settlement needs its amount and reference; neither a reference nor a note is no evidence at all.
    const cases: Record<string, string>[] = [
      { deposit_id, cause: 'additional_transfer', note: HOSTILE_NOTE },
      { deposit_id, cause: 'late_slip' },
      { deposit_id, cause: 'same_transfer_excess', note: 'excess' },
      { deposit_id, cause: 'late_slip', trans_ref: 'not a reference!', sending_bank_code: '14' },
      { deposit_id, cause: 'late_slip', note: 'x', amount: '12,00' },
      { deposit_id, cause: 'late_slip', note: 'x', occurred_at: 'yesterday' },
      { deposit_id: '', cause: 'late_slip', note: 'x' },
    ];
    for (const fields of cases) {
      const refused = await consolePost(base, '/bo/claims', cookie, { csrf_token, decision_key, ...fields });
      expect(refused.status, JSON.stringify(fields)).toBe(422);
      const html = await refused.text();
      expect(html).toContain('id="open-claim-form"');
      expect(html).toContain('id="case-notice"');
      expect(html).toContain(escapeHtml(TH.error_validation.split('{')[0]!));
      if (fields.note) expect(html).toContain(escapeHtml(fields.note));
      expect(html).not.toContain('<script>alert');
    }
    const english = await consolePost(base, '/bo/claims?lang=en', cookie, { csrf_token, decision_key, deposit_id, cause: 'additional_transfer', note: 'x' });
    expect(english.status).toBe(422);
    const englishHtml = await english.text();
    expect(englishHtml).toContain('<html lang="en">');
    expect(englishHtml).toContain('amount_minor');
    expect(englishHtml).toContain('evidence.trans_ref');
    expect(englishHtml).toContain(escapeHtml(EN.claims_open_heading));
    // An expired order is no settled one: the service's refusal, the form again, nothing opened.
    const conflict = await consolePost(base, '/bo/claims', cookie, { csrf_token, decision_key, deposit_id, cause: 'additional_transfer', amount: '10', trans_ref: nextReference() });
    expect(conflict.status).toBe(409);
    expect(await conflict.text()).toContain('deposit_state_conflict');
    expect(await claimIdsOverApi(deposit_id)).toEqual(before);
  });
});

describe('claims: an opening refused for who asks', () => {
  it('a POST without the CSRF token, or with a wrong one, changes nothing', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Forged opener' });
    const before = await claimIdsOverApi(deposit_id);
    const { csrf_token, decision_key } = await openForm(cookie);
    const fields = { decision_key, deposit_id, cause: 'late_slip', trans_ref: nextReference(), note: 'forged' };
    const missing = await consolePost(base, '/bo/claims', cookie, fields);
    expect(missing.status).toBe(403);
    expect(await missing.text()).toContain(escapeHtml(TH.csrf_failed));
    const wrong = await consolePost(base, '/bo/claims', cookie, { ...fields, csrf_token: `${csrf_token.slice(0, -2)}AA` });
    expect(wrong.status).toBe(403);
    const signedOut = await consolePost(base, '/bo/claims', null, { ...fields, csrf_token });
    expect(signedOut.status).toBe(401);
    expect(await claimIdsOverApi(deposit_id)).toEqual(before);
  });

  it("another brand's order is the 404 page, as the API refuses it; nothing is opened there", async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Wandering opener' });
    const { csrf_token, decision_key } = await openForm(cookie);
    const fields = { csrf_token, decision_key, deposit_id: foreign_deposit_id, cause: 'late_slip', trans_ref: nextReference(), note: 'another brand' };
    const refused = await consolePost(base, '/bo/claims', cookie, fields);
    expect(refused.status).toBe(404);
    expect(await refused.text()).toContain(escapeHtml(TH.not_found));
    const api = await app.backoffice({ method: 'POST', url: '/v1/bo/claims', body: { white_label_id: brand(), deposit_id: foreign_deposit_id, cause: 'late_slip', evidence: { trans_ref: fields.trans_ref } } });
    expect(api.statusCode).toBe(404);
    expect(api.json<{ error: { code: string } }>().error.code).toBe('resource_not_found');
    const unknown = await consolePost(base, '/bo/claims', cookie, { ...fields, deposit_id: 'dep_doesnotexist' });
    expect(unknown.status).toBe(404);
    const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*)::text AS count FROM claims WHERE deposit_id = $1', [foreign_deposit_id]);
    expect(rows[0]?.count).toBe('0');
  });
});

describe('claims: who opens claims', () => {
  it('the roles are the API’s: a reviewer, whom POST /v1/bo/claims lets open claims, opens one too', async () => {
    // CLAIM_READ_ROLES holds every back-office role, so no console role meets the 403 page here (see the report).
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Reviewing opener' });
    expect(await (await consoleGet(base, '/bo/claims', cookie)).text()).toContain('href="/bo/claims/new"');
    const { csrf_token, decision_key } = await openForm(cookie);
    const opened = await consolePost(base, '/bo/claims?lang=en', cookie, { csrf_token, decision_key, deposit_id, cause: 'late_slip', note: `Reviewer ${nextReference()}` });
    expect(opened.status).toBe(303);
    expect(opened.headers.get('location')).toMatch(/^\/bo\/claims\/clm_[0-9A-Za-z]+\?done=opened&lang=en$/);
  });
});
