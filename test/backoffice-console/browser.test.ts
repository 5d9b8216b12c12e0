import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { caseInReview, consoleLink, listeningConsoleApp } from '../support/console.ts';
import { axeScan, consoleBrowser, shoot, signInWithLink, submitFormInPage } from '../support/console-browser.ts';
import { depositPolicyBody } from '../support/slips.ts';
import { consoleTexts, fill } from '../../src/backoffice-console/texts.ts';
import type { DepositView } from '../../src/deposits/service.ts';

/**
 * The back-office console in a real browser (Debian's chromium through playwright-core) against the service on a
 * real port: reviewers sign in by the link `npm run cli -- bo login` prints, open a case the sandbox's 101.00 THB
 * scenario sent to review, look at its slip (zoom, rotate) and decide it under four eyes, which the brand's deposit
 * policy asks for from 100.00 THB here. axe-core checks every page; each page is photographed into
 * test-results/backoffice/ (git-ignored), and with UPDATE_DOCS_SCREENSHOTS=1 into docs/images/backoffice/.
 */

const browser = consoleBrowser();
const TH = consoleTexts('th');
const EN = consoleTexts('en');
const HOSTILE_REFERENCE = `<script>alert("ref")</script> 'quoted'`;

/** The little of the browser the page functions below touch (this project's TypeScript has no DOM library). */
interface InPage {
  document: {
    querySelector(selector: string): { complete: boolean; naturalWidth: number; getAttribute(name: string): string | null } | null;
    activeElement: { id: string; className: string; textContent: string | null } | null;
  };
}

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let order: DepositView;

beforeAll(async () => {
  if (browser.skipped) return;
  ({ app, base } = await listeningConsoleApp());
  // Four eyes from 100.00 THB in test mode, so that the 101.00 THB case needs two reviewers.
  const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: app.sandbox.white_label_id, four_eyes_min_amount_minor: 10_000 }) });
  expect(policy.statusCode, policy.body).toBe(200);
  merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  order = await caseInReview(app, merchant, HOSTILE_REFERENCE);
  expect(order.review?.four_eyes_required).toBe(true);
  await browser.launch();
}, 180_000);

afterAll(async () => {
  await browser.close();
  await app?.close();
});

/** Signs in through the link's page, as a person pasting the CLI's link would. */
async function signInAs(page: Page, name: string, label?: string): Promise<{ staff_id: string }> {
  const link = await signInWithLink(page, app, base, { brand: app.sandbox.white_label_id, role: 'reviewer', name }, label ? async () => {
    await axeScan(page, `${label}: sign-in page`);
    await shoot(page, `${label}-sign-in`);
  } : undefined);
  return { staff_id: link.staff_id };
}

async function slipShown(page: Page): Promise<void> {
  await page.waitForFunction(() => {
    const image = (globalThis as unknown as InPage).document.querySelector('figure.slip img');
    return image !== null && image.complete && image.naturalWidth > 0;
  }, undefined, { timeout: 15_000 });
}

describe.skipIf(browser.skipped)('the back-office console in a browser: four eyes', () => {
  it('four eyes: a reviewer signs in by the CLI link, sees the slip, gives the first approval; another completes it', async () => {
    const first = await browser.openPage();
    const reviewerA = await signInAs(first.page, 'ผู้ตรวจสอบ ก', 'queue');
    await expect.poll(() => first.page.textContent('main')).toContain(HOSTILE_REFERENCE);
    await axeScan(first.page, 'queue');
    await shoot(first.page, 'queue');

    await Promise.all([first.page.waitForURL(`${base}/bo/reviews/${order.id}`), first.page.click(`a[href="/bo/reviews/${order.id}"]`)]);
    await slipShown(first.page);
    await first.page.click('button[data-slip-action="zoom-in"]');
    await first.page.click('button[data-slip-action="rotate"]');
    expect(await first.page.getAttribute('figure.slip', 'data-scale')).toBe('1.5');
    expect(await first.page.getAttribute('figure.slip', 'data-rotation')).toBe('90');
    await first.page.click('button[data-slip-action="reset"]');
    expect(await first.page.textContent('main')).toContain(TH.check_sender_name_match_fail);
    expect(await first.page.textContent('main')).toContain('SENDER_NAME_MISMATCH');
    await axeScan(first.page, 'case');
    await shoot(first.page, 'case');

    await Promise.all([first.page.waitForURL(`${base}/bo/reviews/${order.id}?done=approval_recorded`), first.page.click('#approve-button')]);
    await expect.poll(() => first.page.textContent('#case-notice')).toBe(TH.effect_approval_recorded);
    // Before any click, the page says this reviewer cannot give the second approval, and the button is off.
    expect(await first.page.textContent('#same-reviewer')).toBe(TH.four_eyes_same_person);
    expect(await first.page.isDisabled('#approve-button')).toBe(true);
    await axeScan(first.page, 'case after the first approval');
    await shoot(first.page, 'case-first-approval');

    const second = await browser.openPage();
    await signInAs(second.page, 'ผู้ตรวจสอบ ข');
    await second.page.goto(`${base}/bo/reviews/${order.id}`);
    await slipShown(second.page);
    expect(await second.page.textContent('#first-approval')).toContain(`ผู้ตรวจสอบ ก (${reviewerA.staff_id})`);
    expect(await second.page.isEnabled('#approve-button')).toBe(true);
    await Promise.all([second.page.waitForURL(`${base}/bo/reviews/${order.id}?done=settled`), second.page.click('#approve-button')]);
    await expect.poll(() => second.page.textContent('#case-notice')).toBe(TH.effect_settled);
    await shoot(second.page, 'case-settled');
    const settled = (await app.signed({ url: `/v1/pay/deposits/${order.id}`, credentials: merchant })).json<DepositView>();
    expect(settled).toMatchObject({ status: 'settled', settled_via: 'review' });

    // The first reviewer's open page learns by polling (at most every 5 s) that the case changed.
    await first.page.waitForSelector('#case-changed:not([hidden])', { timeout: 15_000 });
    expect(first.problems).toEqual([]);
    expect(second.problems).toEqual([]);
  }, 120_000);

});

describe.skipIf(browser.skipped)('the back-office console in a browser: English, keyboard, refusals', () => {
  it('in English, by keyboard, with the refusal pages: 401, 404, 403, signed out', async () => {
    const { page, problems } = await browser.openPage();
    await page.goto(`${base}/bo/reviews?lang=en`);
    expect(await page.textContent('h1')).toBe(EN.session_needed_heading);
    await axeScan(page, 'sign-in needed');
    await signInAs(page, 'Keyboard reviewer');
    await page.goto(`${base}/bo/reviews?lang=en`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => (globalThis as unknown as InPage).document.activeElement?.className)).toBe('skip-link');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => (globalThis as unknown as InPage).document.activeElement?.id)).toBe('main');
    await axeScan(page, 'queue in English');
    await shoot(page, 'queue-english');

    await page.goto(`${base}/bo/reviews/dep_01ARZ3NDEKTSV4RRFFQ69G5FAV?lang=en`);
    expect(await page.textContent('h1')).toBe(EN.not_found_heading);
    await axeScan(page, 'not found');

    // The operator's page has no decision forms; a decision sent anyway (a form made in the page) gets the 403 page.
    const link = await consoleLink(app, base, { brand: app.sandbox.white_label_id, role: 'operator', name: 'Desk operator' });
    const operator = await browser.openPage();
    await operator.page.goto(`${link.url}?lang=en`);
    await Promise.all([operator.page.waitForURL(`${base}/bo/reviews?lang=en`), operator.page.click('#sign-in-button')]);
    const fresh = await caseInReview(app, merchant, 'operator-case');
    await operator.page.goto(`${base}/bo/reviews/${fresh.id}?lang=en`);
    expect(await operator.page.textContent('main')).toContain(EN.decide_only_reviewers);
    const csrf = await operator.page.getAttribute('input[name="csrf_token"]', 'value');
    await Promise.all([
      operator.page.waitForURL(`${base}/bo/reviews/${fresh.id}/approve?lang=en`),
      submitFormInPage(operator.page, `/bo/reviews/${fresh.id}/approve?lang=en`, [['csrf_token', csrf ?? '']]),
    ]);
    expect(await operator.page.textContent('h1')).toBe(EN.forbidden_heading);
    expect(await operator.page.textContent('main')).toContain(fill(EN.forbidden_decide, { role: EN.role_operator }));
    await axeScan(operator.page, 'forbidden');
    await shoot(operator.page, 'forbidden');

    await Promise.all([page.waitForURL(`${base}/bo/sign-out?lang=en`), page.click('form.sign-out button')]);
    expect(await page.textContent('main')).toContain(EN.signed_out);
    await axeScan(page, 'signed out');
    await page.goto(`${base}/bo/reviews?lang=en`);
    expect(await page.textContent('h1')).toBe(EN.session_needed_heading);
    expect(problems).toEqual([]);
    expect(operator.problems).toEqual([]);
  }, 120_000);
});
