import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkoutTexts } from '../../src/checkout/texts.ts';
import { reviewReason } from '../../src/verification/reasons.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { ensureChromium, freePort, launchChromium, startMerchantSite } from '../support/browser.ts';
import { nextReference, sandboxTransfer, slipBytes, SOMCHAI_SENDER } from '../support/slips.ts';

/**
 * The hosted checkout in a real browser (Debian's chromium through playwright-core), against the service
 * listening on a real port: a phone (390×844) and a desktop (1280×800), from the merchant's payment link
 * to the outcome and back to the merchant. Jobs run when the test says (the worker's runDueJobs) on the
 * test clock; the page's countdown and deadlines follow the service's clock, not the browser's. Each
 * state is photographed into test-results/checkout/ (git-ignored).
 */

const chromiumPath = ensureChromium();
const TH = checkoutTexts('th');
const EN = checkoutTexts('en');
const SCREENSHOTS = path.resolve('test-results/checkout');
const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 } as const;
const DESKTOP = { viewport: { width: 1280, height: 800 } } as const;

/**
 * The little of the browser the page functions below touch. This project's TypeScript has no DOM library,
 * and the functions run in the page (as functions: the page's CSP refuses text evaluated as script).
 */
interface InPage {
  document: {
    getElementById(id: string): { textContent: string | null } | null;
    querySelector(selector: string): { complete: boolean; naturalWidth: number } | null;
    activeElement: { id: string; className: string; blur(): void } | null;
  };
  getComputedStyle(element: unknown): { outlineStyle: string };
  performance: { getEntriesByType(type: string): { name: string; transferSize: number; encodedBodySize: number }[] };
  axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string | null; nodes: { target: unknown }[] }[] }> };
}

describe.skipIf(chromiumPath === null)('the checkout page in a browser', () => {
  let browser: Browser;
  let app: TestApp;
  let base: string;
  let merchant: Awaited<ReturnType<typeof startMerchantSite>>;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await createTestApp({ config: { PUBLIC_BASE_URL: base } });
    await app.instance.app.listen({ port, host: '127.0.0.1' });
    merchant = await startMerchantSite();
    browser = await launchChromium(chromiumPath!);
  }, 120_000);

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => undefined);
    await browser?.close();
    await merchant?.close();
    await app?.close();
  });

  /** A page in a fresh context, with every console error, failed script and CSP refusal collected. */
  async function openPage(device: typeof PHONE | typeof DESKTOP): Promise<{ page: Page; problems: string[] }> {
    const context = await browser.newContext({ ...device, locale: 'th-TH', timezoneId: 'Asia/Bangkok' });
    contexts.push(context);
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(String(error)));
    page.on('response', (response) => {
      if (response.status() >= 400) problems.push(`${response.status()} ${new URL(response.url()).pathname}`);
    });
    return { page, problems };
  }

  async function createOrder(options: { amount_minor?: number; return_url?: string; expires_in_seconds?: number } = {}): Promise<DepositView & { checkout_url: string }> {
    const reference = nextReference('browser');
    const response = await app.signed({
      method: 'POST',
      url: '/v1/pay/deposits',
      idempotency_key: crypto.randomUUID(),
      body: {
        amount_minor: options.amount_minor ?? 35_000,
        currency: 'THB',
        merchant_reference: reference,
        end_user_ref: `user-${reference}`,
        sender: { ...SOMCHAI_SENDER, account_number: `77${crypto.randomInt(10_000_000, 99_999_999)}` },
        client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.10', user_agent: 'browser-test' },
        ...(options.return_url ? { return_url: options.return_url } : {}),
        ...(options.expires_in_seconds ? { expires_in_seconds: options.expires_in_seconds } : {}),
      },
    });
    expect([201, 202], response.body).toContain(response.statusCode);
    return response.json();
  }

  /** Opens the checkout the way a payer does: from the merchant's page on another site, by its link. */
  async function followShopLink(page: Page, checkout_url: string): Promise<void> {
    await page.goto(`${merchant.origin}/shop?pay=${encodeURIComponent(checkout_url)}`);
    await Promise.all([page.waitForURL((url) => url.pathname.startsWith('/checkout/')), page.click('#pay')]);
  }

  async function statusIs(page: Page, expected: string, timeout = 20_000): Promise<void> {
    await page.waitForFunction((text) => (globalThis as unknown as InPage).document.getElementById('status')?.textContent === text, expected, { timeout });
  }

  /** The leg's QR image is on the page and loaded (its pixels arrived from the signed image link). */
  async function qrShown(page: Page): Promise<void> {
    await page.waitForFunction(() => {
      const image = (globalThis as unknown as InPage).document.querySelector('#legs img.qr');
      return image !== null && image.complete && image.naturalWidth > 0;
    }, undefined, { timeout: 15_000 });
  }

  async function shoot(page: Page, name: string): Promise<void> {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  /** Runs the worker until the order leaves the states that jobs still move (slip processing). */
  async function runJobsUntil(id: string, statuses: string[]): Promise<DepositView> {
    for (let round = 0; round < 50; round += 1) {
      await app.instance.worker.runDueJobs();
      const order = (await app.signed({ url: `/v1/pay/deposits/${id}` })).json<DepositView>();
      if (statuses.includes(order.status)) return order;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`order ${id} never reached ${statuses.join(' or ')}`);
  }

  /** The page's slip is stored (202) once the page says it is checking it. */
  async function waitForReceipt(id: string): Promise<void> {
    for (let round = 0; round < 100; round += 1) {
      const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::int AS count FROM slip_receipts WHERE deposit_id = $1', [id]);
      if ((rows[0]?.count ?? 0) > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`no slip was uploaded for ${id}`);
  }

  async function axeScan(page: Page, label: string): Promise<void> {
    await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const browser = globalThis as unknown as InPage;
      const result = await browser.axe.run(browser.document, { resultTypes: ['violations'] });
      return result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, targets: violation.nodes.map((node) => node.target) }));
    });
    const serious = violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
    expect(serious, `${label}: ${JSON.stringify(violations)}`).toEqual([]);
  }

  function noProblems(problems: string[]): void {
    expect(problems).toEqual([]);
  }

  it('phone: from the shop link to a settled payment and back to the shop, in Thai', async () => {
    const order = await createOrder({ return_url: `${merchantOrigin()}/orders/42?from=checkout` });
    const { page, problems } = await openPage(PHONE);
    await followShopLink(page, order.checkout_url);
    // The secret left the address bar: the page is at the order's address without it.
    expect(new URL(page.url()).pathname).toBe(`/checkout/${app.sandbox.white_label_id}/${order.id}`);
    expect(page.url()).not.toContain('cs_');
    await statusIs(page, TH.status_awaiting_payment);
    await qrShown(page);
    expect(await page.textContent('#amount')).toBe('350.00 บาท');
    // The countdown runs on the service's clock (the test clock is in 2026, whatever the phone says).
    expect(await page.textContent('#countdown')).toMatch(/^1[45]:\d\d$/);
    expect(await page.textContent('#sender-facts')).toContain('สม*** ใจ***');
    expect(await page.isHidden('#sandbox-badge')).toBe(false);
    expect(await page.getAttribute('#slip-file', 'accept')).toBe('image/*,image/jpeg,image/png,image/webp');
    await shoot(page, 'phone-1-awaiting-payment');
    await recordFirstLoad(page);

    await page.click('#simulate-button');
    await statusIs(page, TH.status_checking);
    expect(await page.isDisabled('#slip-file')).toBe(true);
    expect(await page.isDisabled('#upload-button')).toBe(true);
    await shoot(page, 'phone-2-checking');
    await waitForReceipt(order.id);
    await runJobsUntil(order.id, ['settled']);
    await statusIs(page, TH.status_settled);
    expect(await page.isVisible('#return-link')).toBe(true);
    await shoot(page, 'phone-3-settled');
    await Promise.all([page.waitForURL(`${merchantOrigin()}/orders/42?from=checkout`), page.click('#return-link')]);
    expect(await page.textContent('#back')).toBe('Back at the shop');
    noProblems(problems);
  });

  it('desktop, keyboard only, in English: simulate, settle and return, with an axe scan of each state', async () => {
    const order = await createOrder({ return_url: `${merchantOrigin()}/done` });
    const { page, problems } = await openPage(DESKTOP);
    await page.goto(order.checkout_url.replace(/$/, '?lang=en'));
    await statusIs(page, EN.status_awaiting_payment);
    expect(await page.getAttribute('html', 'lang')).toBe('en');
    await qrShown(page);
    await axeScan(page, 'awaiting payment');
    await shoot(page, 'desktop-1-awaiting-payment');

    // From the top: the skip link first, then through the page to the sandbox button, by Tab alone.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => (globalThis as unknown as InPage).document.activeElement?.className)).toBe('skip-link');
    expect(await page.evaluate(() => (globalThis as unknown as InPage).getComputedStyle((globalThis as unknown as InPage).document.activeElement).outlineStyle)).toBe('solid');
    await page.keyboard.press('Enter');
    const visited = await tabUntil(page, 'simulate-button', 12);
    expect(visited).toEqual(expect.arrayContaining(['slip-file', 'upload-button', 'simulate-button']));
    expect(visited.indexOf('slip-file')).toBeLessThan(visited.indexOf('simulate-button'));
    await page.keyboard.press('Enter');
    await statusIs(page, EN.status_checking);
    await waitForReceipt(order.id);
    await runJobsUntil(order.id, ['settled']);
    await statusIs(page, EN.status_settled);
    await axeScan(page, 'settled');
    await shoot(page, 'desktop-2-settled');
    await page.evaluate(() => (globalThis as unknown as InPage).document.activeElement?.blur());
    await tabUntil(page, 'return-link', 10);
    await Promise.all([page.waitForURL(`${merchantOrigin()}/done`), page.keyboard.press('Enter')]);
    noProblems(problems);
  });

  it('phone: an order whose time runs out shows that it expired, and still takes a late slip', async () => {
    const order = await createOrder({ expires_in_seconds: 300 });
    const { page, problems } = await openPage(PHONE);
    await followShopLink(page, order.checkout_url);
    await statusIs(page, TH.status_awaiting_payment);
    expect(await page.textContent('#countdown')).toMatch(/^0[45]:\d\d$/);
    app.clock.advance(301_000);
    await app.instance.worker.runDueJobs();
    await statusIs(page, TH.status_expired);
    expect(await page.isVisible('#legs img.qr')).toBe(false);
    // The late-slip window is open: the page says until when, and the upload is offered.
    expect(await page.textContent('#status-detail')).toContain(TH.late_upload_hint.split('{time}')[0]!);
    expect(await page.isEnabled('#slip-file')).toBe(true);
    await axeScan(page, 'expired');
    await shoot(page, 'phone-4-expired');
    noProblems(problems);
  });

  it('phone: the payer cancels the unpaid order after a confirmation, and may still upload a slip in the window', async () => {
    const order = await createOrder();
    const { page, problems } = await openPage(PHONE);
    await followShopLink(page, order.checkout_url);
    await statusIs(page, TH.status_awaiting_payment);
    expect(await page.isVisible('#cancel-button')).toBe(true);
    expect(await page.isHidden('#cancel-confirm')).toBe(true);
    // The first press only asks; "keep paying" changes nothing.
    await page.click('#cancel-button');
    expect(await page.isVisible('#cancel-confirm')).toBe(true);
    expect(await page.textContent('#cancel-confirm-text')).toBe(TH.cancel_confirm_text);
    await axeScan(page, 'cancel confirmation');
    await shoot(page, 'phone-cancel-1-confirm');
    await page.click('#cancel-keep-button');
    expect(await page.isHidden('#cancel-confirm')).toBe(true);
    expect((await app.signed({ url: `/v1/pay/deposits/${order.id}` })).json<DepositView>().status).toBe('awaiting_payment');

    await page.click('#cancel-button');
    await page.click('#cancel-confirm-button');
    await statusIs(page, TH.status_canceled);
    const canceled = (await app.signed({ url: `/v1/pay/deposits/${order.id}` })).json<DepositView>();
    expect(canceled).toMatchObject({ status: 'canceled', canceled_by: 'end_user', cancel_reason_code: 'end_user_request' });
    expect(await page.isHidden('#cancel')).toBe(true);
    expect(await page.isVisible('#legs img.qr')).toBe(false);
    expect(await page.textContent('#status-detail')).toContain(TH.late_upload_hint.split('{time}')[0]!);
    expect(await page.isEnabled('#slip-file')).toBe(true);
    await axeScan(page, 'canceled by the payer');
    await shoot(page, 'phone-cancel-2-canceled');
    noProblems(problems);
  });

  it('phone: a transfer from another sender name, its slip chosen in the file input, puts the order under review with the spec text', async () => {
    const order = await createOrder();
    const { page, problems } = await openPage(PHONE);
    await followShopLink(page, order.checkout_url);
    await statusIs(page, TH.status_awaiting_payment);
    // The sandbox bank pays from the declared account, but the account holder's name is another one.
    const parties = await app.instance.services.deposits.paymentParties(app.testDatabase.database, app.sandbox.white_label_id, order.id);
    const sender = { bank_code: parties!.sender.bank_code, account_number: parties!.sender.account_number, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' };
    const transfer = await sandboxTransfer(app, order, { sender });
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'slip-')), 'slip.png');
    fs.writeFileSync(file, slipBytes(transfer));
    await page.click('#upload-button');
    expect(await page.textContent('#upload-error')).toBe(TH.upload_choose_first);
    await page.setInputFiles('#slip-file', file);
    await page.click('#upload-button');
    await statusIs(page, TH.status_checking);
    await waitForReceipt(order.id);
    const reviewed = await runJobsUntil(order.id, ['under_review']);
    expect(reviewed.review?.reasons[0]?.code).toBe('SENDER_NAME_MISMATCH');
    await statusIs(page, TH.status_under_review);
    expect(await page.textContent('#status-detail')).toBe(reviewReason('SENDER_NAME_MISMATCH').display_th);
    expect(await page.isVisible('#upload')).toBe(false);
    await axeScan(page, 'under review');
    await shoot(page, 'phone-5-under-review');
    noProblems(problems);
  });

  it('phone: a photo larger than max_bytes is made smaller in the browser within the spec rules and still verifies', async () => {
    const order = await createOrder();
    const { page, problems } = await openPage(PHONE);
    await followShopLink(page, order.checkout_url);
    await statusIs(page, TH.status_awaiting_payment);
    const transfer = await sandboxTransfer(app, order);
    // A "photo" of the slip: four times the size with fine noise, as a PNG far above 4 MiB.
    const slip = sharp(slipBytes(transfer));
    const { width = 720, height = 1280 } = await slip.metadata();
    const noise = crypto.randomBytes(width * 2 * height * 2 * 3);
    for (let index = 0; index < noise.length; index += 1) noise[index] = noise[index]! & 15;
    const big = await sharp(slipBytes(transfer))
      .resize(width * 2, height * 2, { kernel: 'nearest' })
      .composite([{ input: await sharp(noise, { raw: { width: width * 2, height: height * 2, channels: 3 } }).png().toBuffer(), blend: 'difference' }])
      .png({ compressionLevel: 0 })
      .toBuffer();
    expect(big.length).toBeGreaterThan(4_194_304);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'photo-')), 'photo.png');
    fs.writeFileSync(file, big);
    await page.setInputFiles('#slip-file', file);
    await page.click('#upload-button');
    await waitForReceipt(order.id);
    const image = await app.signed({ url: `/v1/pay/deposits/${order.id}/slip` });
    expect(image.statusCode).toBe(200);
    expect(image.headers['content-type']).toBe('image/jpeg');
    expect(image.rawPayload.length).toBeLessThanOrEqual(4_194_304);
    const stored = await sharp(image.rawPayload).metadata();
    // Not cropped (the whole slip, same proportions), short edge at least 1000 px, in colour.
    expect(Math.min(stored.width ?? 0, stored.height ?? 0)).toBeGreaterThanOrEqual(1000);
    expect(Math.abs((stored.width ?? 0) / (stored.height ?? 1) - width / height)).toBeLessThan(0.01);
    expect(stored.channels).toBe(3);
    await runJobsUntil(order.id, ['settled']);
    await statusIs(page, TH.status_settled);
    noProblems(problems);
  });

  it('desktop: an order waiting for liquidity shows the wait, then the destination once matched', async () => {
    // Sandbox scenario 105.00 THB: 25 seconds without a destination (a 202 with checkout_url).
    const order = await createOrder({ amount_minor: 10_500 });
    expect(order.status).toBe('awaiting_liquidity');
    const { page, problems } = await openPage(DESKTOP);
    await followShopLink(page, order.checkout_url);
    await statusIs(page, TH.status_awaiting_liquidity);
    expect(await page.isVisible('#waiting')).toBe(true);
    expect(await page.isVisible('#pay')).toBe(false);
    expect(await page.isVisible('#upload')).toBe(false);
    await shoot(page, 'desktop-3-awaiting-liquidity');
    app.clock.advance(25_000);
    await app.instance.worker.runDueJobs();
    await statusIs(page, TH.status_awaiting_payment);
    await qrShown(page);
    await shoot(page, 'desktop-4-matched');
    noProblems(problems);
  });

  it("desktop: on a brand's own checkout host the page uploads to the upload address across origins", async () => {
    const port = new URL(base).port;
    const brandHost = `http://localhost:${port}`;
    const set = await app.backoffice({ method: 'POST', url: `/v1/bo/brands/${app.sandbox.white_label_id}/checkout-base-url`, body: { checkout_base_url: brandHost } });
    expect(set.statusCode, set.body).toBe(200);
    try {
      const order = await createOrder();
      expect(order.checkout_url.startsWith(`${brandHost}/checkout/`)).toBe(true);
      const { page, problems } = await openPage(DESKTOP);
      await followShopLink(page, order.checkout_url);
      expect(new URL(page.url()).origin).toBe(brandHost);
      await statusIs(page, TH.status_awaiting_payment);
      await page.click('#simulate-button');
      await statusIs(page, TH.status_checking);
      await waitForReceipt(order.id);
      await runJobsUntil(order.id, ['settled']);
      await statusIs(page, TH.status_settled);
      noProblems(problems);
    } finally {
      await app.backoffice({ method: 'POST', url: `/v1/bo/brands/${app.sandbox.white_label_id}/checkout-base-url`, body: { checkout_base_url: null } });
    }
  });

  function merchantOrigin(): string {
    return merchant.origin;
  }

  /** Presses Tab until the element with this id has the focus; returns the ids passed on the way. */
  async function tabUntil(page: Page, id: string, limit: number): Promise<string[]> {
    const visited: string[] = [];
    for (let press = 0; press < limit; press += 1) {
      await page.keyboard.press('Tab');
      const active = await page.evaluate(() => (globalThis as unknown as InPage).document.activeElement?.id ?? '');
      visited.push(active);
      if (active === id) return visited;
    }
    throw new Error(`Tab never reached #${id}: ${visited.join(', ')}`);
  }

  /** The bytes of the first load (document, script, stylesheet, font, status, QR), written beside the screenshots. */
  async function recordFirstLoad(page: Page): Promise<void> {
    const entries = await page.evaluate(() => {
      const { performance } = globalThis as unknown as InPage;
      return [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')].map((entry) => ({
        name: new URL(entry.name).pathname,
        transfer_bytes: entry.transferSize,
        body_bytes: entry.encodedBodySize,
      }));
    });
    const total = entries.reduce((sum, entry) => sum + entry.transfer_bytes, 0);
    fs.writeFileSync(path.join(SCREENSHOTS, 'first-load.json'), `${JSON.stringify({ total_transfer_bytes: total, entries }, null, 2)}\n`);
    expect(total).toBeGreaterThan(0);
    // A light page: everything of the first load within 100 kB.
    expect(total).toBeLessThan(100_000);
  }
});
