import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { ensureChromium, freePort, launchChromium } from '../support/browser.ts';
import { consoleLink } from '../support/console.ts';
import { SOMCHAI_SENDER } from '../support/slips.ts';
import { settledDeposit } from '../support/refunds.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * The orders and audit log pages in a real browser (Debian's chromium through playwright-core): an operator signs in
 * by a CLI link, searches, opens a deposit and a withdrawal, and reads the audit log; a reviewer meets the audit
 * log's 403 page. axe-core checks every page for serious or critical violations; a stored `<script>` reference
 * must not run (a dialog would be a failure). Screenshots go to test-results/backoffice/, and with
 * UPDATE_DOCS_SCREENSHOTS=1 to docs/images/backoffice/ for docs/backoffice.md.
 */

const chromiumPath = ensureChromium();
const TH = consoleTexts('th');
const SCREENSHOTS = path.resolve('test-results/backoffice');
const DOCS_SCREENSHOTS = path.resolve('docs/images/backoffice');
const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const HOSTILE_REFERENCE = `<script>alert("ref")</script> 'quoted'`;

interface InPage {
  document: unknown;
  axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string | null; nodes: { target: unknown }[] }[] }> };
}

let browser: Browser;
let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let settled: DepositView;
let hostile: DepositView;
let withdrawal: WithdrawalView;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  if (chromiumPath === null) return;
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  app = await createTestApp({ config: { BACKOFFICE_BASE_URL: base } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  await fundAvailable(app, accountOf(merchant), 1_000_000);
  const beneficiary_id = await verifiedBeneficiary(app, accountOf(merchant));
  const created = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    credentials: merchant,
    body: { amount_minor: 30_000, currency: 'THB', merchant_reference: 'payout-2026-0042', end_user_ref: 'payee-somchai', beneficiary_id },
  });
  expect(created.statusCode, created.body).toBe(201);
  withdrawal = created.json<WithdrawalView>();
  settled = await settledDeposit(app, merchant, 15_000);
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    credentials: merchant,
    body: { amount_minor: 20_000, currency: 'THB', merchant_reference: HOSTILE_REFERENCE, end_user_ref: `"user" <b>`, sender: { ...SOMCHAI_SENDER, account_number: '7712345678' } },
  });
  expect(response.statusCode, response.body).toBe(201);
  hostile = response.json<DepositView>();
  browser = await launchChromium(chromiumPath);
}, 180_000);

afterAll(async () => {
  for (const context of contexts) await context.close().catch(() => undefined);
  await browser?.close();
  await app?.close();
});

async function openPage(): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'th-TH', timezoneId: 'Asia/Bangkok' });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && !/status of (403|404)/.test(message.text())) problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(String(error)));
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

async function shoot(page: Page, name: string): Promise<void> {
  const bytes = await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  if (process.env.UPDATE_DOCS_SCREENSHOTS === '1') {
    fs.mkdirSync(DOCS_SCREENSHOTS, { recursive: true });
    await sharp(bytes).png({ palette: true, quality: 80, compressionLevel: 9 }).toFile(path.join(DOCS_SCREENSHOTS, `${name}.png`));
  }
}

async function signInAs(page: Page, role: 'operator' | 'reviewer', name: string): Promise<void> {
  const link = await consoleLink(app, base, { brand: app.sandbox.white_label_id, role, name });
  await page.goto(link.url);
  await Promise.all([page.waitForURL(`${base}/bo/reviews`), page.click('#sign-in-button')]);
}

describe.skipIf(chromiumPath === null)('the orders and audit log pages in a browser', () => {
  it('an operator searches, opens a deposit and a withdrawal, and reads the audit log', async () => {
    const { page, problems } = await openPage();
    await signInAs(page, 'operator', 'สมศักดิ์ ปฏิบัติการ');
    await Promise.all([page.waitForURL(`${base}/bo/orders`), page.click('a[href="/bo/orders"]')]);
    await expect.poll(() => page.textContent('main')).toContain(HOSTILE_REFERENCE);
    await axeScan(page, 'orders');
    await shoot(page, 'orders');

    await page.fill('#filter-merchant_reference', HOSTILE_REFERENCE);
    await Promise.all([page.waitForURL(/\/bo\/orders\?/), page.click('form[role="search"] button[type="submit"]')]);
    expect(await page.locator('tbody tr').count()).toBe(1);
    expect(await page.inputValue('#filter-merchant_reference')).toBe(HOSTILE_REFERENCE);
    await axeScan(page, 'orders, searched');

    await page.goto(`${base}/bo/orders?kind=withdrawals`);
    await Promise.all([page.waitForURL(`${base}/bo/orders/${withdrawal.id}`), page.click(`a[href="/bo/orders/${withdrawal.id}"]`)]);
    await expect.poll(() => page.textContent('main')).toContain('withdrawal_reserved');
    await axeScan(page, 'withdrawal');
    await shoot(page, 'order-withdrawal');

    await page.goto(`${base}/bo/orders/${settled.id}`);
    await expect.poll(() => page.textContent('main')).toContain('deposit.settled');
    await axeScan(page, 'deposit');
    await shoot(page, 'order-deposit');

    await Promise.all([page.waitForURL(`${base}/bo/audit`), page.click('a[href="/bo/audit"]')]);
    await expect.poll(() => page.textContent('main')).toContain('console.signed_in');
    await axeScan(page, 'audit');
    await shoot(page, 'audit');

    await page.goto(`${base}/bo/audit?lang=en&action=console.signed_in`);
    await expect.poll(() => page.textContent('h1')).toBe('Audit log');
    await axeScan(page, 'audit, English');
    expect(hostile.merchant_reference).toBe(HOSTILE_REFERENCE);
    expect(problems).toEqual([]);
  }, 120_000);

  it('a reviewer may search orders but gets the 403 page for the audit log', async () => {
    const { page, problems } = await openPage();
    await signInAs(page, 'reviewer', 'สมศรี ตรวจสอบ');
    expect(await page.locator('a[href="/bo/audit"]').count()).toBe(0);
    const response = await page.goto(`${base}/bo/audit`);
    expect(response?.status()).toBe(403);
    await expect.poll(() => page.textContent('main')).toContain(TH.audit_forbidden.replace('{role}', TH.role_reviewer));
    await axeScan(page, 'audit 403');
    await shoot(page, 'audit-forbidden');
    expect((await page.goto(`${base}/bo/orders`))?.status()).toBe(200);
    expect(problems).toEqual([]);
  }, 120_000);
});
