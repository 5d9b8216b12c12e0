import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { ensureChromium, freePort, launchChromium } from '../support/browser.ts';
import { consoleLink } from '../support/console.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';

/**
 * The sign-in settings page in chromium: the brand's operator signs in with a CLI link, sets the OpenID provider
 * and adds a person to the staff list through the page's forms; a refused form and the saved page pass axe-core.
 */

const chromiumPath = ensureChromium();
const TH = consoleTexts('th');
const SCREENSHOTS = path.resolve('test-results/backoffice');
const DOCS_SCREENSHOTS = path.resolve('docs/images/backoffice');
const require = createRequire(import.meta.url);
const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SECRET = 'browser-secret-never-shown-3141';

interface InPage {
  document: unknown;
  axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string | null; nodes: { target: unknown }[] }[] }> };
}

let browser: Browser;
let app: TestApp;
let base: string;
let context: BrowserContext | null = null;

beforeAll(async () => {
  if (chromiumPath === null) return;
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  app = await createTestApp({ config: { BACKOFFICE_BASE_URL: base } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  browser = await launchChromium(chromiumPath);
}, 180_000);

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await browser?.close();
  await app?.close();
});

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

describe.skipIf(chromiumPath === null)('the sign-in settings page', () => {
  it("the operator sets the provider and adds a reviewer through the page's forms; the pages pass axe-core", async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'th-TH', timezoneId: 'Asia/Bangkok' });
    const page = await context.newPage();
    const link = await consoleLink(app, base, { brand: app.sandbox.white_label_id, role: 'operator', name: 'ผู้ดูแลแบรนด์' });
    await page.goto(link.url);
    await page.click('button[type="submit"]');
    await page.waitForURL(`${base}/bo/reviews`);
    await page.click(`nav a[href="/bo/sign-in-settings"]`);
    await page.waitForURL(`${base}/bo/sign-in-settings`);
    expect(await page.textContent('h1')).toBe(TH.sign_in_settings_heading);

    // A plain-http issuer elsewhere than this machine is refused; the form comes back with the reason.
    await page.fill('#provider-issuer', 'http://idp.brand.test');
    await page.fill('#provider-client-id', 'console');
    await page.fill('#provider-client-secret', SECRET);
    await page.click('#provider-form button[type="submit"]');
    expect(await page.textContent('#case-notice')).toContain('must_be_https');
    expect(await page.inputValue('#provider-client-secret')).toBe('');
    await axeScan(page, 'refused provider form');

    await page.fill('#provider-issuer', 'https://idp.brand.test');
    await page.fill('#provider-client-secret', SECRET);
    await page.click('#provider-form button[type="submit"]');
    await page.waitForURL(/done=provider_set/);
    expect(await page.textContent('#case-notice')).toBe(TH.sign_in_settings_done_provider_set);

    await page.fill('#staff-subject', 'somsri@brand.test');
    await page.fill('#staff-name', 'สมศรี ผู้ตรวจสอบ');
    await page.selectOption('#staff-role', 'reviewer');
    await page.click('#staff-form button[type="submit"]');
    await page.waitForURL(/done=staff_saved/);
    expect(await page.textContent('#staff-list')).toContain('สมศรี ผู้ตรวจสอบ');
    expect(await page.content()).not.toContain(SECRET);
    await axeScan(page, 'sign-in settings');
    await shoot(page, 'sign-in-settings');
  }, 90_000);
});
