import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { ensureChromium, freePort, launchChromium } from '../support/browser.ts';
import { consoleLink } from '../support/console.ts';
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

const chromiumPath = ensureChromium();
const TH = consoleTexts('th');
const EN = consoleTexts('en');
const SCREENSHOTS = path.resolve('test-results/backoffice');
const DOCS_SCREENSHOTS = path.resolve('docs/images/backoffice');
const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const DESKTOP = { viewport: { width: 1280, height: 800 } } as const;
const HOSTILE = `<script>alert("claim")</script> 'quoted' & "double"`;
const NOTE = 'ตรวจสอบกับธนาคารแล้ว ไม่พบเงินโอนเข้าตามที่ผู้ชำระแจ้ง <b>"ok"</b>';

/** The little of the browser the page functions below touch (this project's TypeScript has no DOM library). */
interface InPage {
  document: {
    createElement(tag: string): { method: string; action: string; append(child: unknown): void; submit(): void; name: string; value: string; type: string };
    body: { append(child: unknown): void };
  };
  axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string | null; nodes: { target: unknown }[] }[] }> };
}

let browser: Browser;
let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let claim: BackofficeClaimView;
let world: DisputeWorld;
let dispute: DisputeDetail;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  if (chromiumPath === null) return;
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  app = await createTestApp({ config: { BACKOFFICE_BASE_URL: base } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  const deposit_id = await expiredOrder(app, merchant);
  await lateSlipClaim(app, app.sandbox.white_label_id, deposit_id, { trans_ref: 'LATE0001', note: 'โอนช้าไปหนึ่งวัน' });
  claim = await lateSlipClaim(app, app.sandbox.white_label_id, deposit_id, { trans_ref: 'LATE0002', note: HOSTILE });
  world = await disputeWorld(app);
  dispute = await disputedFill(app, world, { note: HOSTILE, reference: 'STMT-2026-11-28-0042', evidence_note: `ไม่พบยอดเงินเข้าในรายการเดินบัญชี ${HOSTILE}` });
  browser = await launchChromium(chromiumPath);
}, 240_000);

afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => undefined);
  await browser?.close();
  await app?.close();
});

/** A page in a fresh context (its own cookies), with console errors, failed loads and dialogs collected. */
async function openPage(): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ ...DESKTOP, locale: 'th-TH', timezoneId: 'Asia/Bangkok' });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && !/status of (401|403|404|409)/.test(message.text())) problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(String(error)));
  // A stored text that ran as script would open a dialog.
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { page, problems };
}

async function axeScan(page: Page, label: string): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const inPage = globalThis as unknown as InPage;
    const result = await inPage.axe.run(inPage.document, { resultTypes: ['violations'] });
    return result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, targets: violation.nodes.map((node) => node.target) }));
  });
  const serious = violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
  expect(serious, `${label}: ${JSON.stringify(violations)}`).toEqual([]);
}

/** Photographs the page into test-results/backoffice/, and with UPDATE_DOCS_SCREENSHOTS=1 into the docs as a palette PNG. */
async function shoot(page: Page, name: string): Promise<void> {
  const bytes = await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  if (process.env.UPDATE_DOCS_SCREENSHOTS === '1') {
    fs.mkdirSync(DOCS_SCREENSHOTS, { recursive: true });
    await sharp(bytes).png({ palette: true, quality: 80, compressionLevel: 9 }).toFile(path.join(DOCS_SCREENSHOTS, `${name}.png`));
  }
}

/** Signs in through the link's page, as a person pasting the CLI's link would. */
async function signInAs(page: Page, brand: string, role: 'reviewer' | 'operator', name: string): Promise<void> {
  const link = await consoleLink(app, base, { brand, role, name });
  await page.goto(link.url);
  await Promise.all([page.waitForURL(`${base}/bo/reviews`), page.click('#sign-in-button')]);
}

describe.skipIf(chromiumPath === null)('the claims desk in a browser', () => {
  it('an operator lists claims, reads one with its evidence as text, and resolves it', async () => {
    const { page, problems } = await openPage();
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
    expect(problems).toEqual([]);
  }, 120_000);

  it("a reviewer reads a claim without forms, and a resolution sent anyway gets the 403 page", async () => {
    const { page, problems } = await openPage();
    await signInAs(page, app.sandbox.white_label_id, 'reviewer', 'ผู้ตรวจสอบ เคลม');
    await page.goto(`${base}/bo/claims/${claim.id}?lang=en`);
    expect(await page.textContent('main')).toContain(EN.claims_closed);
    const csrf = await page.getAttribute('input[name="csrf_token"]', 'value');
    await Promise.all([
      page.waitForURL(`${base}/bo/claims/${claim.id}/resolve?lang=en`),
      page.evaluate(({ action, token }) => {
        const document = (globalThis as unknown as InPage).document;
        const form = document.createElement('form');
        form.method = 'post';
        form.action = action;
        for (const [name, value] of [['csrf_token', token], ['resolution_code', 'refunded_to_payer'], ['note', 'A reviewer tries to resolve this claim anyway.']]) {
          const field = document.createElement('input');
          field.type = 'hidden';
          field.name = name!;
          field.value = value!;
          form.append(field);
        }
        document.body.append(form);
        form.submit();
      }, { action: `/bo/claims/${claim.id}/resolve?lang=en`, token: csrf ?? '' }),
    ]);
    expect(await page.textContent('h1')).toBe(EN.forbidden_heading);
    expect(await page.textContent('main')).toContain(fill(EN.claims_forbidden_decide, { role: EN.role_reviewer }));
    await axeScan(page, 'claim forbidden');
    await shoot(page, 'claim-forbidden');
    expect(problems).toEqual([]);
  }, 120_000);
});

describe.skipIf(chromiumPath === null)('the disputes pages in a browser', () => {
  it('an operator lists disputes, reads one with its deadline and evidence, and resolves it', async () => {
    const { page, problems } = await openPage();
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
