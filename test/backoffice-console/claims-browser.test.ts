import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { consoleAppWithMerchant } from '../support/console.ts';
import { axeScan, consoleBrowser, shoot, signInWithLink, submitFormInPage } from '../support/console-browser.ts';
import { disputedFill, disputeWorld, expiredOrder, lateSlipClaim, type DisputeWorld } from '../support/console-desk.ts';
import { consoleTexts, fill } from '../../src/backoffice-console/texts.ts';
import type { BackofficeClaimView } from '../../src/review/claims.ts';
import type { DisputeDetail } from '../../src/disputes/service.ts';

/**
 * The claims desk and the disputes pages in a real browser (Debian's chromium through playwright-core) against
 * the service on a real port: an operator signs in by the CLI's link, lists claims, opens one whose payer's note is
 * a `<script>` with quotes, and resolves it; a reviewer reads it and gets the 403 page on a resolution sent anyway;
 * an operator of another brand lists disputes, reads one with its evidence and deadline, and resolves it. axe-core
 * checks every page; each page is photographed into test-results/backoffice/ and, with UPDATE_DOCS_SCREENSHOTS=1,
 * into docs/images/backoffice/ (as browser.test.ts does).
 */

const browser = consoleBrowser();
const TH = consoleTexts('th');
const EN = consoleTexts('en');
const HOSTILE = `<script>alert("claim")</script> 'quoted' & "double"`;
const NOTE = 'ตรวจสอบกับธนาคารแล้ว ไม่พบเงินโอนเข้าตามที่ผู้ชำระแจ้ง <b>"ok"</b>';

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let claim: BackofficeClaimView;
let world: DisputeWorld;
let dispute: DisputeDetail;

beforeAll(async () => {
  if (browser.skipped) return;
  ({ app, base, merchant } = await consoleAppWithMerchant());
  const deposit_id = await expiredOrder(app, merchant);
  await lateSlipClaim(app, app.sandbox.white_label_id, deposit_id, { trans_ref: 'LATE0001', note: 'โอนช้าไปหนึ่งวัน' });
  claim = await lateSlipClaim(app, app.sandbox.white_label_id, deposit_id, { trans_ref: 'LATE0002', note: HOSTILE });
  world = await disputeWorld(app);
  dispute = await disputedFill(app, world, { note: HOSTILE, reference: 'STMT-2026-11-28-0042', evidence_note: `ไม่พบยอดเงินเข้าในรายการเดินบัญชี ${HOSTILE}` });
  await browser.launch();
}, 240_000);

afterAll(async () => {
  await browser.close();
  await app?.close();
});

/** Signs in through the link's page, as a person pasting the CLI's link would. */
async function signInAs(page: Page, brand: string, role: 'reviewer' | 'operator', name: string): Promise<void> {
  await signInWithLink(page, app, base, { brand, role, name });
}

describe.skipIf(browser.skipped)('the claims desk in a browser', () => {
  it('an operator lists claims, reads one with its evidence as text, and resolves it', async () => {
    const { page, problems } = await browser.openPage();
    await signInAs(page, app.sandbox.white_label_id, 'operator', 'เจ้าหน้าที่ เคลม');
    await Promise.all([page.waitForURL(`${base}/bo/claims`), page.click('nav a[href="/bo/claims"]')]);
    expect(await page.textContent('h1')).toBe(TH.claims_heading);
    await axeScan(page, 'claims');
    await shoot(page, 'claims');

    await Promise.all([page.waitForURL(`${base}/bo/claims/${claim.id}`), page.click(`a[href="/bo/claims/${claim.id}"]`)]);
    expect(await page.textContent('#claim-evidence')).toContain(HOSTILE);
    await axeScan(page, 'claim');
    await shoot(page, 'claim');

    await page.click('#investigate-button');
    await page.waitForURL(`${base}/bo/claims/${claim.id}?done=investigating`);
    await page.selectOption('#resolution-code', 'no_transfer_found');
    await page.fill('#resolve-note', NOTE);
    await Promise.all([page.waitForURL(`${base}/bo/claims/${claim.id}?done=resolved`), page.click('#resolve-button')]);
    expect(await page.textContent('#case-notice')).toBe(TH.claims_done_resolved);
    expect(await page.textContent('#claim-resolution')).toContain(NOTE);
    await axeScan(page, 'claim resolved');
    await shoot(page, 'claim-resolved');
    const resolved = (await app.backoffice({ url: `/v1/bo/claims/${claim.id}?white_label_id=${app.sandbox.white_label_id}` })).json<BackofficeClaimView>();
    expect(resolved).toMatchObject({ status: 'resolved', resolution_code: 'no_transfer_found', resolution_note: NOTE.trim() });

    await page.goto(`${base}/bo/claims?lang=en&status=resolved`);
    expect(await page.textContent('h1')).toBe(EN.claims_heading);
    await axeScan(page, 'claims in English');

    // The form that opens a claim for a payer (its behaviour is claims-open-http.test.ts's).
    await Promise.all([page.waitForURL(`${base}/bo/claims/new?lang=en`), page.click('#open-claim-link')]);
    expect(await page.textContent('h1')).toBe(EN.claims_open_heading);
    await axeScan(page, 'open a claim');
    await shoot(page, 'claim-open');
    expect(problems).toEqual([]);
  }, 120_000);

  it("a reviewer reads a claim without forms, and a resolution sent anyway gets the 403 page", async () => {
    const { page, problems } = await browser.openPage();
    await signInAs(page, app.sandbox.white_label_id, 'reviewer', 'ผู้ตรวจสอบ เคลม');
    await page.goto(`${base}/bo/claims/${claim.id}?lang=en`);
    expect(await page.textContent('main')).toContain(EN.claims_closed);
    const csrf = await page.getAttribute('input[name="csrf_token"]', 'value');
    await Promise.all([
      page.waitForURL(`${base}/bo/claims/${claim.id}/resolve?lang=en`),
      submitFormInPage(page, `/bo/claims/${claim.id}/resolve?lang=en`, [
        ['csrf_token', csrf ?? ''],
        ['resolution_code', 'refunded_to_payer'],
        ['note', 'A reviewer tries to resolve this claim anyway.'],
      ]),
    ]);
    expect(await page.textContent('h1')).toBe(EN.forbidden_heading);
    expect(await page.textContent('main')).toContain(fill(EN.claims_forbidden_decide, { role: EN.role_reviewer }));
    await axeScan(page, 'claim forbidden');
    await shoot(page, 'claim-forbidden');
    expect(problems).toEqual([]);
  }, 120_000);
});

describe.skipIf(browser.skipped)('the disputes pages in a browser', () => {
  it('an operator lists disputes, reads one with its deadline and evidence, and resolves it', async () => {
    const { page, problems } = await browser.openPage();
    await signInAs(page, world.brand, 'operator', 'เจ้าหน้าที่ ข้อพิพาท');
    await Promise.all([page.waitForURL(`${base}/bo/disputes`), page.click('nav a[href="/bo/disputes"]')]);
    expect(await page.textContent('h1')).toBe(TH.disputes_heading);
    await axeScan(page, 'disputes');
    await shoot(page, 'disputes');

    await Promise.all([page.waitForURL(`${base}/bo/disputes/${dispute.id}`), page.click(`a[href="/bo/disputes/${dispute.id}"]`)]);
    expect(await page.textContent('#dispute-evidence')).toContain(HOSTILE);
    expect(await page.textContent('main')).toContain(TH.disputes_deadline_rule);
    await axeScan(page, 'dispute');
    await shoot(page, 'dispute');

    await page.check('#outcome-depositor');
    await page.fill('#resolve-note', NOTE);
    await Promise.all([page.waitForURL(`${base}/bo/disputes/${dispute.id}?done=resolved`), page.click('#resolve-button')]);
    expect(await page.textContent('#case-notice')).toBe(TH.disputes_done_resolved);
    expect(await page.textContent('#dispute-resolution')).toContain(TH.disputes_outcome_depositor);
    await axeScan(page, 'dispute resolved');
    await shoot(page, 'dispute-resolved');

    await page.goto(`${base}/bo/disputes/${dispute.id}?lang=en`);
    await axeScan(page, 'dispute in English');
    expect(problems).toEqual([]);
  }, 120_000);
});
