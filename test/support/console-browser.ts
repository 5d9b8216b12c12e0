import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import sharp from 'sharp';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { expect } from 'vitest';
import type { TestApp } from './app.ts';
import { ensureChromium, launchChromium } from './browser.ts';
import { consoleLink, type ConsoleLink, type ConsoleLinkOptions } from './console.ts';

/**
 * The back-office console's browser tests share this: one chromium per test file (skipped with the reason when
 * chromium cannot be had, see browser.ts), pages in fresh contexts that collect what would be a problem in the
 * page, the axe-core scan that fails on serious or critical violations, and the photographs each page leaves in
 * test-results/backoffice/ (git-ignored) and, with UPDATE_DOCS_SCREENSHOTS=1, in docs/images/backoffice/ for
 * docs/backoffice.md.
 */

export const DESKTOP = { viewport: { width: 1280, height: 800 } } as const;
export const SCREENSHOTS = path.resolve('test-results/backoffice');
export const DOCS_SCREENSHOTS = path.resolve('docs/images/backoffice');
const require = createRequire(import.meta.url);
export const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** The little of the browser the scan touches (this project's TypeScript has no DOM library). */
interface AxeInPage {
  document: unknown;
  axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string | null; nodes: { target: unknown }[] }[] }> };
}

/** A page and what went wrong in it: console errors, uncaught errors and dialogs (a stored text run as script opens one). */
export interface ConsolePage {
  page: Page;
  problems: string[];
}

export interface ConsoleBrowserOptions {
  /**
   * The HTTP statuses the file's pages answer on purpose (a refusal page): chromium logs "Failed to load resource:
   * … status of 403" for them, which is then not a problem.
   */
  expected_statuses?: readonly number[];
}

export interface ConsoleBrowser {
  /** True when chromium is missing outside CI: the file's tests are skipped (ensureChromium said why). */
  readonly skipped: boolean;
  launch(): Promise<void>;
  /** A page in a fresh context (its own cookies), Thai and in Bangkok's time, with its problems collected. */
  openPage(): Promise<ConsolePage>;
  /** Closes every context, then chromium. */
  close(): Promise<void>;
}

export function consoleBrowser(options: ConsoleBrowserOptions = {}): ConsoleBrowser {
  const chromiumPath = ensureChromium();
  const expected = new RegExp(`status of (${(options.expected_statuses ?? [401, 403, 404, 409]).join('|')})`);
  const contexts: BrowserContext[] = [];
  let browser: Browser | null = null;
  return {
    skipped: chromiumPath === null,
    async launch() {
      if (chromiumPath === null) throw new Error('chromium is missing; a skipped file must not launch it');
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      browser = await launchChromium(chromiumPath);
    },
    async openPage() {
      if (browser === null) throw new Error('chromium is not launched');
      const context = await browser.newContext({ ...DESKTOP, locale: 'th-TH', timezoneId: 'Asia/Bangkok' });
      contexts.push(context);
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error' && !expected.test(message.text())) problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(String(error)));
      // A stored text that ran as script would open a dialog.
      page.on('dialog', (dialog) => {
        problems.push(`dialog: ${dialog.message()}`);
        void dialog.dismiss();
      });
      return { page, problems };
    },
    async close() {
      for (const context of contexts) await context.close().catch(() => undefined);
      await browser?.close();
    },
  };
}

/** Runs axe-core in the page; a serious or critical violation fails the test with every violation listed. */
export async function axeScan(page: Page, label: string): Promise<void> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const inPage = globalThis as unknown as AxeInPage;
    const result = await inPage.axe.run(inPage.document, { resultTypes: ['violations'] });
    return result.violations.map((violation) => ({ id: violation.id, impact: violation.impact, targets: violation.nodes.map((node) => node.target) }));
  });
  const serious = violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
  expect(serious, `${label}: ${JSON.stringify(violations)}`).toEqual([]);
}

/**
 * Photographs the page into test-results/backoffice/; with UPDATE_DOCS_SCREENSHOTS=1 also into
 * docs/images/backoffice/, as a palette PNG (a few dozen kB instead of a few hundred) for docs/backoffice.md.
 */
export async function shoot(page: Page, name: string): Promise<void> {
  const bytes = await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
  if (process.env.UPDATE_DOCS_SCREENSHOTS === '1') {
    fs.mkdirSync(DOCS_SCREENSHOTS, { recursive: true });
    await sharp(bytes).png({ palette: true, quality: 80, compressionLevel: 9 }).toFile(path.join(DOCS_SCREENSHOTS, `${name}.png`));
  }
}

/**
 * Signs in as a person pasting the CLI's link would: the link's page, then its button, landing on the review
 * queue. `onSignInPage` runs on the link's page before the click (to scan or photograph it).
 */
export async function signInWithLink(page: Page, app: TestApp, base: string, options: ConsoleLinkOptions, onSignInPage?: (page: Page) => Promise<void>): Promise<ConsoleLink> {
  const link = await consoleLink(app, base, options);
  await page.goto(link.url);
  if (onSignInPage) await onSignInPage(page);
  await Promise.all([page.waitForURL(`${base}/bo/reviews`), page.click('#sign-in-button')]);
  return link;
}

/**
 * Sends a POST form made inside the page (hidden fields in this order), as a person who edits the page could: how
 * the tests send a decision the page offers no form for. The caller waits for the answer's page.
 */
export function submitFormInPage(page: Page, action: string, fields: ReadonlyArray<readonly [string, string]>): Promise<void> {
  return page.evaluate(({ action, fields }) => {
    const document = (globalThis as unknown as FormInPage).document;
    const form = document.createElement('form');
    form.method = 'post';
    form.action = action;
    for (const [name, value] of fields) {
      const field = document.createElement('input');
      field.type = 'hidden';
      field.name = name;
      field.value = value;
      form.append(field);
    }
    document.body.append(form);
    form.submit();
  }, { action, fields: fields.map(([name, value]) => [name, value] as [string, string]) });
}

/** The little of the document submitFormInPage touches. */
interface FormInPage {
  document: {
    createElement(tag: string): { method: string; action: string; append(child: unknown): void; submit(): void; name: string; value: string; type: string };
    body: { append(child: unknown): void };
  };
}
