import crypto from 'node:crypto';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { consoleAppWithMerchant } from '../support/console.ts';
import { axeScan, consoleBrowser, shoot, signInWithLink } from '../support/console-browser.ts';
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

// These pages expect only the 403 and 404 refusals; any other failed load is a problem.
const browser = consoleBrowser({ expected_statuses: [403, 404] });
const TH = consoleTexts('th');
const HOSTILE_REFERENCE = `<script>alert("ref")</script> 'quoted'`;

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let settled: DepositView;
let hostile: DepositView;
let withdrawal: WithdrawalView;

beforeAll(async () => {
  if (browser.skipped) return;
  ({ app, base, merchant } = await consoleAppWithMerchant());
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
  await browser.launch();
}, 180_000);

afterAll(async () => {
  await browser.close();
  await app?.close();
});

async function signInAs(page: Page, role: 'operator' | 'reviewer', name: string): Promise<void> {
  await signInWithLink(page, app, base, { brand: app.sandbox.white_label_id, role, name });
}

describe.skipIf(browser.skipped)('the orders and audit log pages in a browser', () => {
  it('an operator searches, opens a deposit and a withdrawal, and reads the audit log', async () => {
    const { page, problems } = await browser.openPage();
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
    const { page, problems } = await browser.openPage();
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
