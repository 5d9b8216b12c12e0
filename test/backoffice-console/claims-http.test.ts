import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { auditTrail, consoleAppWithMerchant, consoleGet, consolePost, expectConsolePageHeaders, formTokens, signIn } from '../support/console.ts';
import { disputedFill, disputeWorld, expiredOrder, lateSlipClaim, type DisputeWorld } from '../support/console-desk.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import type { BackofficeClaimView } from '../../src/review/claims.ts';
import type { DisputeDetail } from '../../src/disputes/service.ts';

/**
 * The claims desk and the disputes pages of the console over HTTP on a real socket, with sign-in links from the
 * CLI: lists with filters and a cursor, details with every evidence item as text, decisions through the console
 * ending where the same decisions through the /v1/bo API end, the API's roles (a reviewer reads claims but may
 * not decide them, and may not open disputes), another brand's objects as 404 pages, CSRF, a lost race, escaping.
 */

const TH = consoleTexts('th');
const HOSTILE = `<script>alert("x")</script>'"&`;
const NOTE = `Checked with the payer <script>alert('note')</script> "quoted" & done`;

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let deposit_id: string;
/** The API's operator token in the sandbox brand, for the twins decided through /v1/bo. */
let apiOperator: string;
/** A brand of its own with four disputed fills, each with the withdrawer's note and one evidence item. */
let world: DisputeWorld;
const disputes: DisputeDetail[] = [];

beforeAll(async () => {
  ({ app, base, merchant } = await consoleAppWithMerchant());
  deposit_id = await expiredOrder(app, merchant);
  const system = { actor_type: 'system' as const, actor_id: 'console-claims-test', request_id: null };
  apiOperator = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: brand(), role: 'operator', name: 'API operator' })).token;
  world = await disputeWorld(app);
  for (let index = 0; index < 4; index += 1) disputes.push(await disputedFill(app, world, { note: HOSTILE, reference: `STMT-${index} ${HOSTILE}`, evidence_note: `No credit ${HOSTILE}` }));
}, 240_000);

afterAll(async () => {
  await app.close();
});

const brand = () => app.sandbox.white_label_id;
let transfers = 0;

function newClaim(note = HOSTILE): Promise<BackofficeClaimView> {
  transfers += 1;
  return lateSlipClaim(app, brand(), deposit_id, { trans_ref: `LATE${Date.now()}N${transfers}`, note });
}

async function claimOverApi(id: string): Promise<BackofficeClaimView> {
  const response = await app.backoffice({ url: `/v1/bo/claims/${id}?white_label_id=${brand()}` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<BackofficeClaimView>();
}

async function disputeOverApi(id: string): Promise<DisputeDetail> {
  const response = await app.backoffice({ url: `/v1/bo/disputes/${id}?white_label_id=${world.brand}` });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<DisputeDetail>();
}

/** The claim as a decision leaves it, without what differs between two claims or two deciders. */
function decided(claim: BackofficeClaimView) {
  return { status: claim.status, version: claim.version, resolution_code: claim.resolution_code, resolution_note: claim.resolution_note, refund_id: claim.refund_id, investigated: claim.investigated_at !== null };
}

describe('claims: list and detail', () => {
  it('a reviewer lists claims with filters and a cursor, 25 to a page', async () => {
    const created = [];
    for (let index = 0; index < 27; index += 1) created.push(await newClaim(`${HOSTILE} ${index}`));
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Claims reader' });
    const first = await consoleGet(base, `/bo/claims?deposit_id=${deposit_id}&status=open`, cookie);
    expect(first.status).toBe(200);
    expectConsolePageHeaders(first);
    const html = await first.text();
    const ids = (text: string) => [...text.matchAll(/href="\/bo\/claims\/(clm_[0-9A-Za-z]+)"/g)].map((match) => match[1]);
    const firstIds = ids(html);
    expect(firstIds).toHaveLength(25);
    expect(firstIds).toEqual(created.slice(0, 25).map((claim) => claim.id));
    expect(html).toContain(escapeHtml(TH.claims_cause_late_slip));
    const next = /href="([^"]+)" rel="next"/.exec(html)?.[1]?.replaceAll('&amp;', '&');
    expect(next).toMatch(/^\/bo\/claims\?/);
    expect(next).toContain(`deposit_id=${deposit_id}`);
    const second = await (await consoleGet(base, next!, cookie)).text();
    expect(ids(second)).toEqual(created.slice(25).map((claim) => claim.id));
    expect(second).not.toContain('rel="next"');
    // Another status filter leaves them out; the claims link is in the reviewer's menu.
    const resolved = await (await consoleGet(base, `/bo/claims?deposit_id=${deposit_id}&status=resolved`, cookie)).text();
    expect(ids(resolved)).toEqual([]);
    expect(resolved).toContain(escapeHtml(TH.claims_empty));
    expect(resolved).toContain('href="/bo/claims" aria-current="page"');
    expect(resolved).not.toContain('href="/bo/disputes"');
  });

  it('a claim shows every evidence field as text, its times, and to a reviewer no decision forms', async () => {
    const claim = await newClaim(HOSTILE);
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Claim reader' });
    const page = await consoleGet(base, `/bo/claims/${claim.id}`, cookie);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(escapeHtml(HOSTILE));
    expect(html).not.toContain('<script>alert');
    expect(html).toContain(claim.evidence!.trans_ref!);
    expect(html).toContain('004');
    expect(html).toContain(escapeHtml(TH.claims_slip_received_at));
    expect(html).toContain(escapeHtml(TH.claims_decide_only_operators));
    expect(html).not.toContain('id="resolve-form"');
    const english = await (await consoleGet(base, `/bo/claims/${claim.id}?lang=en`, cookie)).text();
    expect(english).toContain('<html lang="en">');
    expect(english).toContain(escapeHtml(consoleTexts('en').claims_evidence_heading));
  });
});

describe('claims: decisions and roles', () => {
  it("a reviewer's attempt to resolve a claim gets the 403 page; nothing changes", async () => {
    const claim = await newClaim();
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Resolving reviewer' });
    const { csrf_token } = formTokens(await (await consoleGet(base, `/bo/claims/${claim.id}`, cookie)).text());
    for (const action of ['resolve', 'investigate', 'reject']) {
      const refused = await consolePost(base, `/bo/claims/${claim.id}/${action}`, cookie, { csrf_token, resolution_code: 'no_transfer_found', note: NOTE });
      expect(refused.status, action).toBe(403);
      expectConsolePageHeaders(refused);
      expect(await refused.text()).toContain(escapeHtml(TH.claims_forbidden_decide.replace('{role}', TH.role_reviewer)));
    }
    // The API answers the reviewer the same way.
    const system = { actor_type: 'system' as const, actor_id: 'console-claims-test', request_id: null };
    const reviewerToken = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: brand(), role: 'reviewer', name: 'API reviewer' })).token;
    const api = await app.backoffice({ method: 'POST', url: `/v1/bo/claims/${claim.id}/resolve`, token: reviewerToken, body: { resolution_code: 'no_transfer_found', note: NOTE } });
    expect(api.statusCode).toBe(403);
    expect(decided(await claimOverApi(claim.id))).toMatchObject({ status: 'open', version: 1 });
  });

  it('an operator investigates and resolves through the console, ending as the same decisions through the API do', async () => {
    const throughConsole = await newClaim();
    const throughApi = await newClaim();
    const { cookie, link } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Claims operator' });
    const tokens = formTokens(await (await consoleGet(base, `/bo/claims/${throughConsole.id}`, cookie)).text());
    expect(tokens.decision_key).toMatch(/^console-/);
    const investigated = await consolePost(base, `/bo/claims/${throughConsole.id}/investigate`, cookie, tokens);
    expect(investigated.status).toBe(303);
    expect(investigated.headers.get('location')).toBe(`/bo/claims/${throughConsole.id}?done=investigating`);
    const short = await consolePost(base, `/bo/claims/${throughConsole.id}/resolve`, cookie, { ...tokens, resolution_code: 'no_transfer_found', note: 'too short' });
    expect(short.status).toBe(422);
    expect(await short.text()).toContain('review_note_required');
    const refundElsewhere = await consolePost(base, `/bo/claims/${throughConsole.id}/resolve`, cookie, { ...tokens, resolution_code: 'no_transfer_found', note: NOTE, refund_amount: '10.00' });
    expect(refundElsewhere.status).toBe(422);
    const resolved = await consolePost(base, `/bo/claims/${throughConsole.id}/resolve`, cookie, { ...tokens, resolution_code: 'no_transfer_found', note: NOTE });
    expect(resolved.status).toBe(303);
    expect(resolved.headers.get('location')).toBe(`/bo/claims/${throughConsole.id}?done=resolved`);

    expect((await app.backoffice({ method: 'POST', url: `/v1/bo/claims/${throughApi.id}/investigate`, token: apiOperator, body: {} })).statusCode).toBe(200);
    expect((await app.backoffice({ method: 'POST', url: `/v1/bo/claims/${throughApi.id}/resolve`, token: apiOperator, body: { resolution_code: 'no_transfer_found', note: NOTE } })).statusCode).toBe(200);

    const consoleClaim = await claimOverApi(throughConsole.id);
    expect(decided(consoleClaim)).toEqual(decided(await claimOverApi(throughApi.id)));
    expect(consoleClaim).toMatchObject({ status: 'resolved', investigated_by: link.credential_id, resolved_by: link.credential_id });
    expect((await auditTrail(app, throughConsole.id)).map((row) => row.action)).toEqual((await auditTrail(app, throughApi.id)).map((row) => row.action));
    expect((await auditTrail(app, throughConsole.id)).filter((row) => row.action !== 'claim.opened').every((row) => row.actor_id === link.credential_id)).toBe(true);
    // The page shows the outcome and the internal note as text, and no more forms.
    const page = await (await consoleGet(base, `/bo/claims/${throughConsole.id}?done=resolved`, cookie)).text();
    expect(page).toContain(escapeHtml(TH.claims_done_resolved));
    expect(page).toContain(escapeHtml(NOTE));
    expect(page).not.toContain("<script>alert('note')");
    expect(page).toContain(escapeHtml(TH.claims_code_no_transfer_found));
    expect(page).not.toContain('id="resolve-form"');
    // The same form sent again is the same decision repeated: the claim as it is, nothing written.
    const again = await consolePost(base, `/bo/claims/${throughConsole.id}/resolve`, cookie, { ...tokens, resolution_code: 'no_transfer_found', note: NOTE });
    expect(again.status).toBe(303);
    expect((await claimOverApi(throughConsole.id)).version).toBe(consoleClaim.version);
  });

});

describe('claims: races, CSRF and other brands', () => {
  it('a decision that lost the race answers 409 with the claim as it now is', async () => {
    const claim = await newClaim();
    const first = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Fast operator' });
    const second = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Slow operator' });
    const slowTokens = formTokens(await (await consoleGet(base, `/bo/claims/${claim.id}`, second.cookie)).text());
    const fastTokens = formTokens(await (await consoleGet(base, `/bo/claims/${claim.id}`, first.cookie)).text());
    expect((await consolePost(base, `/bo/claims/${claim.id}/reject`, first.cookie, { ...fastTokens, note: NOTE })).status).toBe(303);
    const lost = await consolePost(base, `/bo/claims/${claim.id}/resolve`, second.cookie, { ...slowTokens, resolution_code: 'refunded_to_payer', note: NOTE });
    expect(lost.status).toBe(409);
    const html = await lost.text();
    expect(html).toContain(escapeHtml(TH.claims_lost_race.replace('{status}', TH.claims_status_rejected)));
    expect(html).toContain('id="case-notice"');
    expect(await claimOverApi(claim.id)).toMatchObject({ status: 'rejected', resolved_by: first.link.credential_id, resolution_code: null });
  });

  it('a POST without the CSRF token, or from another site, changes nothing', async () => {
    const claim = await newClaim();
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'CSRF operator' });
    const { csrf_token, decision_key } = formTokens(await (await consoleGet(base, `/bo/claims/${claim.id}`, cookie)).text());
    const missing = await consolePost(base, `/bo/claims/${claim.id}/reject`, cookie, { decision_key, note: NOTE });
    expect(missing.status).toBe(403);
    expect(await missing.text()).toContain(escapeHtml(TH.csrf_failed));
    const wrong = await consolePost(base, `/bo/claims/${claim.id}/reject`, cookie, { decision_key, note: NOTE, csrf_token: `${csrf_token.slice(0, -2)}AA` });
    expect(wrong.status).toBe(403);
    const crossSite = await consolePost(base, `/bo/claims/${claim.id}/reject`, cookie, { decision_key, note: NOTE, csrf_token }, { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    expect(await claimOverApi(claim.id)).toMatchObject({ status: 'open', version: 1 });
    expect((await auditTrail(app, claim.id)).map((row) => row.action)).toEqual(['claim.opened']);
  });

  it("another brand's claim is the 404 page, to read and to decide", async () => {
    const claim = await newClaim();
    const other = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'console-claims-test', request_id: null }, { name: 'Other claims brand' });
    const { cookie } = await signIn(app, base, { brand: other.id, role: 'operator', name: 'Other brand operator' });
    const read = await consoleGet(base, `/bo/claims/${claim.id}`, cookie);
    expect(read.status).toBe(404);
    expect(await read.text()).not.toContain(claim.deposit_id);
    const list = await (await consoleGet(base, '/bo/claims', cookie)).text();
    expect(list).not.toContain(claim.id);
    const { csrf_token } = formTokens(list);
    const decidedElsewhere = await consolePost(base, `/bo/claims/${claim.id}/reject`, cookie, { csrf_token, note: NOTE });
    expect(decidedElsewhere.status).toBe(404);
    expect(await claimOverApi(claim.id)).toMatchObject({ status: 'open', version: 1 });
  });
});

describe('disputes: list, detail and roles', () => {
  it('an operator lists disputes with filters and reads one with its deadline and every evidence item as text', async () => {
    const { cookie } = await signIn(app, base, { brand: world.brand, role: 'operator', name: 'Disputes operator' });
    const list = await consoleGet(base, '/bo/disputes?status=open', cookie);
    expect(list.status).toBe(200);
    expectConsolePageHeaders(list);
    const html = await list.text();
    for (const dispute of disputes) expect(html).toContain(`href="/bo/disputes/${dispute.id}"`);
    expect(html).toContain(escapeHtml(TH.disputes_flag_on_hold));
    expect(html).toContain('href="/bo/disputes" aria-current="page"');
    const newest = await (await consoleGet(base, '/bo/disputes?order=newest', cookie)).text();
    expect(newest.indexOf(disputes[3]!.id)).toBeLessThan(newest.indexOf(disputes[0]!.id));
    expect(await (await consoleGet(base, '/bo/disputes?status=resolved', cookie)).text()).toContain(escapeHtml(TH.disputes_empty));
    const detail = await consoleGet(base, `/bo/disputes/${disputes[0]!.id}`, cookie);
    expect(detail.status).toBe(200);
    const page = await detail.text();
    expect(page).toContain(escapeHtml(HOSTILE));
    expect(page).toContain(escapeHtml(`STMT-0 ${HOSTILE}`));
    expect(page).toContain(escapeHtml(`No credit ${HOSTILE}`));
    expect(page).not.toContain('<script>alert');
    expect(page).toContain(escapeHtml(TH.disputes_respond_by));
    expect(page).toContain(escapeHtml(TH.disputes_deadline_rule));
    expect(page).toContain('id="resolve-form"');
  });

  it("the list's cursor (DisputeService.list with `after`) pages both ways without a gap or a repeat", async () => {
    const list = (newest_first: boolean, after: { opened_at: Date; dispute_id: string } | null) =>
      app.instance.services.disputes.list(app.testDatabase.database, world.brand, { status: null, livemode: null, newest_first, after, limit: 3 });
    for (const newest_first of [false, true]) {
      const first = await list(newest_first, null);
      const last = first.at(-1)!;
      const rest = await list(newest_first, { opened_at: new Date(last.opened_at), dispute_id: last.id });
      const expected = disputes.map((dispute) => dispute.id);
      expect([...first, ...rest].map((dispute) => dispute.id)).toEqual(newest_first ? expected.reverse() : expected);
    }
  });

  it('a reviewer gets the 403 page on every disputes page, as the API answers them', async () => {
    const { cookie } = await signIn(app, base, { brand: world.brand, role: 'reviewer', name: 'Disputes reviewer' });
    const reason = escapeHtml(TH.disputes_forbidden.replace('{role}', TH.role_reviewer));
    for (const path of ['/bo/disputes', `/bo/disputes/${disputes[0]!.id}`]) {
      const response = await consoleGet(base, path, cookie);
      expect(response.status, path).toBe(403);
      expect(await response.text()).toContain(reason);
    }
    const { csrf_token } = formTokens(await (await consoleGet(base, '/bo/claims', cookie)).text());
    const refused = await consolePost(base, `/bo/disputes/${disputes[0]!.id}/resolve`, cookie, { csrf_token, outcome: 'depositor', note: NOTE });
    expect(refused.status).toBe(403);
    expect((await disputeOverApi(disputes[0]!.id)).status).toBe('open');
  });

});

describe('disputes: resolutions', () => {
  it('a resolution through the console ends as the same one through the API; a late second one answers 409', async () => {
    const [throughConsole, throughApi] = [disputes[0]!, disputes[1]!];
    const first = await signIn(app, base, { brand: world.brand, role: 'operator', name: 'Resolving operator' });
    const late = await signIn(app, base, { brand: world.brand, role: 'operator', name: 'Late operator' });
    const lateTokens = formTokens(await (await consoleGet(base, `/bo/disputes/${throughConsole.id}`, late.cookie)).text());
    const tokens = formTokens(await (await consoleGet(base, `/bo/disputes/${throughConsole.id}`, first.cookie)).text());
    const short = await consolePost(base, `/bo/disputes/${throughConsole.id}/resolve`, first.cookie, { ...tokens, outcome: 'depositor', note: 'short' });
    expect(short.status).toBe(422);
    const resolved = await consolePost(base, `/bo/disputes/${throughConsole.id}/resolve`, first.cookie, { ...tokens, outcome: 'depositor', note: NOTE });
    expect(resolved.status).toBe(303);
    expect(resolved.headers.get('location')).toBe(`/bo/disputes/${throughConsole.id}?done=resolved`);
    const system = { actor_type: 'system' as const, actor_id: 'console-disputes-test', request_id: null };
    const operatorToken = (await app.instance.services.tenancy.createBackofficeCredential(system, { white_label_id: world.brand, role: 'operator', name: 'API operator' })).token;
    const api = await app.backoffice({ method: 'POST', url: `/v1/bo/disputes/${throughApi.id}/resolve`, token: operatorToken, body: { outcome: 'depositor', note: NOTE } });
    expect(api.statusCode, api.body).toBe(200);

    const [byConsole, byApi] = [await disputeOverApi(throughConsole.id), await disputeOverApi(throughApi.id)];
    const outcome = (dispute: DisputeDetail) => ({ status: dispute.status, funds_on_hold: dispute.funds_on_hold, outcome: dispute.resolution?.outcome, resolved_by: dispute.resolution?.resolved_by, note: dispute.resolution?.note });
    expect(outcome(byConsole)).toEqual(outcome(byApi));
    expect(byConsole.resolution?.resolver_id).toBe(first.link.credential_id);
    const depositStatus = async (id: string) => (await app.signed({ url: `/v1/pay/deposits/${id}`, credentials: world.depositor })).json<{ status: string }>().status;
    expect(await depositStatus(byConsole.deposit_id)).toBe(await depositStatus(byApi.deposit_id));
    const audit = async (id: string) => (await auditTrail(app, id)).map((row) => row.action);
    expect(await audit(throughConsole.id)).toEqual(await audit(throughApi.id));

    const lost = await consolePost(base, `/bo/disputes/${throughConsole.id}/resolve`, late.cookie, { ...lateTokens, outcome: 'withdrawer', note: NOTE });
    expect(lost.status).toBe(409);
    const html = await lost.text();
    expect(html).toContain('id="case-notice"');
    expect(html).toContain(first.link.credential_id);
    expect(html).toContain(escapeHtml(TH.disputes_outcome_depositor));
    expect((await disputeOverApi(throughConsole.id)).resolution?.outcome).toBe('depositor');
  });

  it('a POST without the CSRF token changes nothing; another brand sees the 404 page', async () => {
    const dispute = disputes[2]!;
    const { cookie } = await signIn(app, base, { brand: world.brand, role: 'operator', name: 'CSRF disputes operator' });
    const refused = await consolePost(base, `/bo/disputes/${dispute.id}/resolve`, cookie, { outcome: 'withdrawer', note: NOTE });
    expect(refused.status).toBe(403);
    expect((await disputeOverApi(dispute.id)).status).toBe('open');
    const other = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Sandbox operator' });
    const read = await consoleGet(base, `/bo/disputes/${dispute.id}`, other.cookie);
    expect(read.status).toBe(404);
    expect(await read.text()).not.toContain(dispute.withdrawal_id);
    expect(await (await consoleGet(base, '/bo/disputes', other.cookie)).text()).not.toContain(dispute.id);
    const { csrf_token } = formTokens(await (await consoleGet(base, '/bo/disputes', other.cookie)).text());
    const decided = await consolePost(base, `/bo/disputes/${dispute.id}/resolve`, other.cookie, { csrf_token, outcome: 'withdrawer', note: NOTE });
    expect(decided.status).toBe(404);
    expect((await disputeOverApi(dispute.id)).status).toBe('open');
  });
});
