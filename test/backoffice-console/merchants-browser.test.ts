import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../support/app.ts';
import { listeningConsoleApp } from '../support/console.ts';
import { axeScan, consoleBrowser, shoot, signInWithLink } from '../support/console-browser.ts';
import { answer, startScriptedReceiver, type ScriptedReceiver } from '../support/webhook-receivers.ts';
import { consoleTexts, fill } from '../../src/backoffice-console/texts.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { ApiKeyView, MerchantView } from '../../src/tenancy/service.ts';
import type { DeliveryView, EndpointView } from '../../src/webhooks/service.ts';
import type { BalanceTransactionView } from '../../src/ledger/service.ts';

/**
 * The console's merchants area in a real browser (Debian's chromium through playwright-core) against the service on
 * a real port: an operator goes from the menu to the merchant list, a merchant whose name is a `<script>` with quotes,
 * its wallet, its API keys (creates one, sees the secrets once, suspends it), a webhook endpoint and a failed
 * delivery (resends it, replays the endpoint); a reviewer is refused the list. axe-core checks every page; each page
 * is photographed into test-results/backoffice/, and with UPDATE_DOCS_SCREENSHOTS=1 into docs/images/backoffice/.
 */

// Besides the console's usual refusals, a 422 answer is not counted as a problem in this file's pages.
const browser = consoleBrowser({ expected_statuses: [401, 403, 404, 409, 422] });
const TH = consoleTexts('th');
const EN = consoleTexts('en');
const HOSTILE = `<script>alert("name")</script> 'ร้าน "ทดสอบ"'`;
const HOUR = 3_600_000;

let app: TestApp;
let base: string;
let receiver: ScriptedReceiver;
let merchant: MerchantView;
let endpoint: EndpointView;
let delivery: DeliveryView;

/** The hostile merchant's history: six credits an hour apart, the first cleared, one held, a reservation. */
async function walletHistory(): Promise<void> {
  const account = { white_label_id: merchant.white_label_id, merchant_id: merchant.id, livemode: false };
  const { ledger, database } = app.instance.services;
  const start = app.clock.now().getTime();
  const credits: BalanceTransactionView[] = [];
  for (let index = 0; index < 6; index += 1) {
    const deposit_id = `dep_01K0BROWSERWALLET${String(index).padStart(9, '0')}`;
    credits.push(await database.transaction((tx) => ledger.creditSettledDeposit(tx, { account, deposit_id, amount_minor: 150_000 + index * 2_575, cause: SYSTEM_CAUSE })));
    app.clock.set(new Date(start + (index + 1) * HOUR));
  }
  app.clock.set(new Date(start + 72 * HOUR + 30 * 60_000));
  await app.instance.worker.runDueJobs();
  expect(await database.transaction((tx) => ledger.holdClearing(tx, account, credits[3]!.id, 'dispute dsp_01K0BROWSER'))).toBe(true);
  const reserved = await database.transaction((tx) =>
    ledger.post(tx, { account, type: 'withdrawal_reserved', amount_minor: 50_000, bucket_from: 'available', bucket_to: 'reserved', movement_key: 'browser:reserve', source: { type: 'withdrawal_order', id: 'wdr_01K0BROWSER' }, cause: SYSTEM_CAUSE }),
  );
  expect(reserved.ok).toBe(true);
}

async function endpointWithFailedDelivery(): Promise<void> {
  const created = await app.backoffice({ method: 'POST', url: '/v1/bo/webhooks', body: { merchant_id: merchant.id, mode: 'test', deposit_url: receiver.url, description: HOSTILE } });
  expect(created.statusCode, created.body).toBe(201);
  endpoint = created.json<EndpointView>();
  const { database, events } = app.instance.services;
  await database.transaction((tx) =>
    events.emitEvent(tx, { white_label_id: merchant.white_label_id, merchant_id: merchant.id, livemode: false, type: 'deposit.expired', object: { object: 'deposit_order', id: 'dep_01K0BROWSERHOOK000000000', version: 2 }, previous_attributes: { version: 1 }, cause: SYSTEM_CAUSE }),
  );
  await app.instance.services.webhooks.dispatcher.runUntilIdle();
  delivery = (await app.backoffice({ url: `/v1/bo/webhooks/${endpoint.id}/deliveries` })).json<{ data: DeliveryView[] }>().data[0]!;
}

beforeAll(async () => {
  if (browser.skipped) return;
  ({ app, base } = await listeningConsoleApp({ webhooks: { settings: { sandbox_loopback: true, timeout_ms: 5_000 } } }));
  receiver = await startScriptedReceiver({ tls: null, behaviour: () => answer(503) });
  const created = await app.backoffice({ method: 'POST', url: '/v1/bo/merchants', body: { name: HOSTILE, white_label_id: app.sandbox.white_label_id } });
  expect(created.statusCode, created.body).toBe(201);
  merchant = created.json<MerchantView>();
  await walletHistory();
  await endpointWithFailedDelivery();
  await browser.launch();
}, 180_000);

afterAll(async () => {
  await browser.close();
  await app?.instance.services.webhooks.dispatcher.stop();
  await receiver?.close();
  await app?.close();
});

/** Checks the page with axe-core and photographs it (for docs/backoffice.md with UPDATE_DOCS_SCREENSHOTS=1, as a palette PNG). */
async function checkAndShoot(page: Page, name: string): Promise<void> {
  await axeScan(page, name);
  await shoot(page, name);
}

async function signInAs(page: Page, role: 'operator' | 'reviewer', name: string): Promise<void> {
  await signInWithLink(page, app, base, { brand: app.sandbox.white_label_id, role, name });
}

describe.skipIf(browser.skipped)('the merchants area in a browser', () => {
  it('an operator: the list, a merchant, its wallet', async () => {
    const { page, problems } = await browser.openPage();
    await signInAs(page, 'operator', 'ผู้ดูแลร้านค้า');
    await Promise.all([page.waitForURL(`${base}/bo/merchants`), page.click(`nav a[href="/bo/merchants"]`)]);
    expect(await page.textContent('main')).toContain(HOSTILE);
    await checkAndShoot(page, 'merchants');
    await Promise.all([page.waitForURL(`${base}/bo/merchants/${merchant.id}`), page.click(`a[href="/bo/merchants/${merchant.id}"]`)]);
    expect(await page.textContent('h1')).toBe(fill(TH.merchants_merchant_heading, { name: HOSTILE }));
    await checkAndShoot(page, 'merchant');
    await Promise.all([page.waitForURL(`${base}/bo/merchants/${merchant.id}/wallet?mode=test`), page.click(`a[href="/bo/merchants/${merchant.id}/wallet?mode=test"]`)]);
    const wallet = (await app.backoffice({ url: `/v1/bo/wallet?merchant_id=${merchant.id}&mode=test` })).json<{ reserved_minor: number }>();
    expect(await page.textContent('[data-bucket="reserved"]')).toBe(`${(wallet.reserved_minor / 100).toLocaleString('en-US', { minimumFractionDigits: 2 })} THB`);
    expect(await page.locator('#movements tbody tr').count()).toBe(8);
    expect(await page.locator('#clearing-held tbody tr').count()).toBe(1);
    await checkAndShoot(page, 'wallet');
    await page.goto(`${base}/bo/merchants/${merchant.id}/wallet?mode=test&lang=en`);
    expect(await page.textContent('h2')).toBe(EN.merchants_buckets_heading);
    await axeScan(page, 'wallet in English');
    expect(problems).toEqual([]);
  }, 120_000);

  it('an operator: API keys, created (the secrets once), then suspended', async () => {
    const { page, problems } = await browser.openPage();
    await signInAs(page, 'operator', 'ผู้ดูแลคีย์');
    await page.goto(`${base}/bo/merchants/${merchant.id}/api-keys`);
    expect(await page.textContent('main')).toContain(TH.merchants_keys_none);
    await checkAndShoot(page, 'api-keys');
    await page.uncheck('#scope-1');
    await Promise.all([page.waitForURL(`${base}/bo/merchants/${merchant.id}/api-keys`), page.click('#create-key-button')]);
    const secret = await page.textContent('#api-key');
    expect(secret).toMatch(/^sk_test_/);
    expect(await page.textContent('main')).toContain(TH.merchants_key_created_once);
    await checkAndShoot(page, 'api-key-created');
    await page.goto(`${base}/bo/merchants/${merchant.id}/api-keys`);
    expect(await page.textContent('main')).not.toContain(secret!);
    const [key] = (await app.backoffice({ url: `/v1/bo/merchants/${merchant.id}/api-keys` })).json<{ data: ApiKeyView[] }>().data;
    await Promise.all([page.waitForURL(`${base}/bo/merchants/${merchant.id}/api-keys?done=suspended&key=${key!.id}`), page.click(`#suspend-${key!.id}`)]);
    expect(await page.textContent('#page-notice')).toBe(fill(TH.merchants_key_done_suspended, { id: key!.id }));
    expect((await app.backoffice({ url: `/v1/bo/merchants/${merchant.id}/api-keys` })).json<{ data: ApiKeyView[] }>().data[0]?.status).toBe('suspended');
    await checkAndShoot(page, 'api-keys-suspended');
    expect(problems).toEqual([]);
  }, 120_000);

  it('a reviewer: the endpoint, the failed delivery with its answers, resend and replay; the list is refused', async () => {
    const { page, problems } = await browser.openPage();
    await signInAs(page, 'reviewer', 'ผู้ตรวจเว็บฮุก');
    await page.goto(`${base}/bo/merchants/${merchant.id}`);
    await Promise.all([page.waitForURL(`${base}/bo/merchants/${merchant.id}/webhooks/${endpoint.id}`), page.click(`a[href="/bo/merchants/${merchant.id}/webhooks/${endpoint.id}"]`)]);
    expect(await page.textContent('main')).toContain(HOSTILE);
    await checkAndShoot(page, 'webhook-endpoint');
    await Promise.all([page.waitForURL(new RegExp(`/deliveries/${delivery.id}$`)), page.click(`a[href$="/deliveries/${delivery.id}"]`)]);
    expect(await page.textContent('#attempts td.http-status')).toBe('503');
    await checkAndShoot(page, 'webhook-delivery');
    await Promise.all([page.waitForURL(/done=resent/), page.click('#resend-button')]);
    expect(await page.textContent('#page-notice')).toBe(fill(TH.merchants_resend_done, { round: delivery.round + 1 }));
    await page.goto(`${base}/bo/merchants/${merchant.id}/webhooks/${endpoint.id}`);
    await page.fill('#replay-types', 'deposit.expired');
    await Promise.all([page.waitForURL(/done=replayed/), page.click('#replay-button')]);
    expect(await page.textContent('#page-notice')).toBe(fill(TH.merchants_replay_done, { rearmed: 0, created: 0 }));
    await axeScan(page, 'endpoint after a replay');
    await page.goto(`${base}/bo/merchants`);
    expect(await page.textContent('h1')).toBe(TH.forbidden_heading);
    await checkAndShoot(page, 'merchants-forbidden');
    expect(problems).toEqual([]);
  }, 120_000);
});
