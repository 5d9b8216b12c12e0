import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { consoleGet, consolePost, formTokens, listeningConsoleApp, signIn } from '../support/console.ts';
import { answer, startScriptedReceiver, type ScriptedReceiver } from '../support/webhook-receivers.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { ApiKeyView, MerchantView } from '../../src/tenancy/service.ts';
import type { WalletAccount } from '../../src/ledger/types.ts';
import type { BalanceTransactionView } from '../../src/ledger/service.ts';
import type { DeliveryView, EndpointView } from '../../src/webhooks/service.ts';

/**
 * The console's merchants area over HTTP on a real socket: the merchant list and page, the wallet (buckets, balance
 * transactions with their running totals across pages, the clearing schedule), API keys (the secret shown once;
 * suspend, resume, revoke), webhook endpoints and deliveries (attempts, resend, replay). Each action ends in the
 * state the /v1/bo API shows; 403, 404 and a refused CSRF check change nothing; stored texts are escaped.
 */

const TH = consoleTexts('th');
const EN = consoleTexts('en');
const HOSTILE = `<script>alert("x")</script>'"&`;
const HOUR = 3_600_000;

let app: TestApp;
let base: string;
let receiver: ScriptedReceiver;
let hostileMerchant: MerchantView;
let otherBrandMerchant: MerchantCredentials;
let operatorCookie: string;
let reviewerCookie: string;

beforeAll(async () => {
  ({ app, base } = await listeningConsoleApp({ webhooks: { settings: { sandbox_loopback: true, timeout_ms: 5_000 } } }));
  // Deliveries to /ok succeed, to anything else fail with 500 (and are retried).
  receiver = await startScriptedReceiver({ tls: null, behaviour: (request) => answer(request.path.endsWith('/ok') ? 200 : 500) });
  const created = await app.backoffice({ method: 'POST', url: '/v1/bo/merchants', body: { name: HOSTILE, white_label_id: brand() } });
  expect(created.statusCode, created.body).toBe(201);
  hostileMerchant = created.json<MerchantView>();
  otherBrandMerchant = await app.createMerchant();
}, 60_000);

/** An operator's and a reviewer's sessions; the wallet's tests move the clock by days, past any session's end, so every test signs in afresh. */
async function signInBoth(): Promise<void> {
  operatorCookie = (await signIn(app, base, { brand: brand(), role: 'operator', name: 'Merchant operator' })).cookie;
  reviewerCookie = (await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Merchant reviewer' })).cookie;
}

beforeEach(signInBoth);

afterAll(async () => {
  await app.instance.services.webhooks.dispatcher.stop();
  await receiver.close();
  await app.close();
});

const brand = () => app.sandbox.white_label_id;

/** A page's `rel="next"` link (its attribute is escaped HTML), the one whose address has `parameter` when given. */
function nextLink(html: string, parameter = ''): string | null {
  const link = new RegExp(`<a href="([^"]*${parameter}[^"]*)" rel="next">`).exec(html)?.[1];
  return link ? link.replaceAll('&amp;', '&') : null;
}

async function page(path: string, cookie = operatorCookie): Promise<{ status: number; html: string; response: Response }> {
  const response = await consoleGet(base, path, cookie);
  return { status: response.status, html: await response.text(), response };
}

async function apiKeys(merchant_id: string): Promise<ApiKeyView[]> {
  const response = await app.backoffice({ url: `/v1/bo/merchants/${merchant_id}/api-keys` });
  expect(response.statusCode).toBe(200);
  return response.json<{ data: ApiKeyView[] }>().data;
}

/** A console amount ("-1,234.56 THB") in satang. */
function minorOf(text: string): number {
  const match = /^(-?)([0-9,]+)\.([0-9]{2}) THB$/.exec(text.trim());
  if (!match) throw new Error(`not an amount: ${text}`);
  const value = Number(match[2]!.replaceAll(',', '')) * 100 + Number(match[3]);
  return match[1] === '-' ? -value : value;
}

describe('the merchant list and page', () => {
  it('lists the brand’s merchants a page at a time, escaped; every page together is the API’s list', async () => {
    for (let index = 0; index < 26; index += 1) {
      expect((await app.backoffice({ method: 'POST', url: '/v1/bo/merchants', body: { name: `Shop ${index}`, white_label_id: brand() } })).statusCode).toBe(201);
    }
    const first = await page('/bo/merchants');
    expect(first.status).toBe(200);
    expect(first.html).toContain(escapeHtml(HOSTILE));
    expect(first.html).not.toContain('<script>alert');
    expect(first.html).toContain('aria-current="page"');
    const seen: string[] = [];
    let html = first.html;
    for (let pages = 1; ; pages += 1) {
      seen.push(...[...html.matchAll(/<td><a href="\/bo\/merchants\/(mch_[0-9A-Za-z]+)">/g)].map((match) => match[1]!));
      const next = nextLink(html);
      if (!next) break;
      expect(pages).toBeLessThan(5);
      html = (await page(next)).html;
    }
    const api = (await app.backoffice({ url: `/v1/bo/merchants?white_label_id=${brand()}` })).json<{ data: MerchantView[] }>().data;
    expect(seen).toEqual(api.map((merchant) => merchant.id).sort());
    expect(seen).not.toContain(otherBrandMerchant.merchant_id);
  });

  it('a reviewer may not list merchants (403 with why) but may open one, as the API allows', async () => {
    const refused = await page('/bo/merchants', reviewerCookie);
    expect(refused.status).toBe(403);
    expect(refused.html).toContain(escapeHtml(TH.merchants_forbidden_list.replace('{role}', TH.role_reviewer)));
    expect(refused.html).not.toContain(`href="/bo/merchants"`);
    const merchant = await page(`/bo/merchants/${hostileMerchant.id}`, reviewerCookie);
    expect(merchant.status).toBe(200);
    expect(merchant.html).toContain(escapeHtml(HOSTILE));
    expect(merchant.html).not.toContain('<script>alert');
    // The keys are the operators': no link to them for a reviewer.
    expect(merchant.html).not.toContain('/api-keys');
  });

  it('another brand’s merchant, or an unknown one, is the 404 page on every merchant page', async () => {
    for (const path of ['', '/wallet?mode=test', '/api-keys', '/webhooks/we_01ARZ3NDEKTSV4RRFFQ69G5FAV']) {
      expect((await page(`/bo/merchants/${otherBrandMerchant.merchant_id}${path}`)).status, path).toBe(404);
      expect((await page(`/bo/merchants/mch_01ARZ3NDEKTSV4RRFFQ69G5FAV${path}`)).status, path).toBe(404);
    }
    expect((await page('/bo/merchants/not-an-id')).status).toBe(404);
  });

  it('English on ?lang=en, kept in the links', async () => {
    const english = await page(`/bo/merchants/${hostileMerchant.id}?lang=en`);
    expect(english.html).toContain('<html lang="en">');
    expect(english.html).toContain(escapeHtml(EN.merchants_wallet_live));
    expect(english.html).toContain(`/bo/merchants/${hostileMerchant.id}/wallet?mode=live&amp;lang=en`);
  });
});

describe('API keys: creation', () => {
  it('creating shows the secrets once, on a no-store 201 answer, and never again; the key works', async () => {
    const keysPage = await page(`/bo/merchants/${hostileMerchant.id}/api-keys`);
    expect(keysPage.status).toBe(200);
    const { csrf_token } = formTokens(keysPage.html);
    const before = await apiKeys(hostileMerchant.id);
    const created = await consolePost(base, `/bo/merchants/${hostileMerchant.id}/api-keys`, operatorCookie, { csrf_token, mode: 'test', scopes: 'pay:read' });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    expect(created.headers.get('location')).toBeNull();
    const html = await created.text();
    const apiKey = /<code id="api-key">(sk_test_[^<]+)<\/code>/.exec(html)?.[1];
    const signingSecret = /<code id="signing-secret">(sig_test_[^<]+)<\/code>/.exec(html)?.[1];
    expect(apiKey).toBeTruthy();
    expect(signingSecret).toBeTruthy();
    const after = await apiKeys(hostileMerchant.id);
    expect(after).toHaveLength(before.length + 1);
    const key = after.find((candidate) => !before.some((old) => old.id === candidate.id))!;
    expect(key).toMatchObject({ livemode: false, scopes: ['pay:read'], status: 'active', key_last4: apiKey!.slice(-4) });
    // Never again: not on the keys page, not in the database (digest and sealed secret only), not in the audit log.
    const again = await page(`/bo/merchants/${hostileMerchant.id}/api-keys`);
    expect(again.html).toContain(key.id);
    expect(again.html).not.toContain(apiKey!);
    expect(again.html).not.toContain(signingSecret!);
    const { rows } = await app.testDatabase.database.query<{ text: string }>(
      "SELECT (SELECT string_agg(row_to_json(k)::text, ',') FROM api_keys k) || (SELECT string_agg(row_to_json(a)::text, ',') FROM audit_log a) AS text",
    );
    expect(rows[0]?.text).not.toContain(apiKey!);
    expect(rows[0]?.text).not.toContain(signingSecret!);
    const credentials = { white_label_id: brand(), merchant_id: hostileMerchant.id, api_key: apiKey!, signing_secret: signingSecret! };
    expect((await app.signed({ url: '/v1/pay/balance', credentials })).statusCode).toBe(200);
  });

});

describe('API keys: suspend, resume, revoke and refusals', () => {
  it('suspend, resume and revoke end in the state the API shows; a revoked key cannot be resumed (409, nothing changes)', async () => {
    const merchant = await app.createMerchant({ white_label_id: brand() });
    const [key] = await apiKeys(merchant.merchant_id);
    const keysPath = `/bo/merchants/${merchant.merchant_id}/api-keys`;
    const { csrf_token } = formTokens((await page(keysPath)).html);
    const act = (action: string) => consolePost(base, `/bo/api-keys/${key!.id}/${action}`, operatorCookie, { csrf_token });
    const suspended = await act('suspend');
    expect(suspended.status).toBe(303);
    expect(suspended.headers.get('location')).toBe(`${keysPath}?done=suspended&key=${key!.id}`);
    expect((await apiKeys(merchant.merchant_id))[0]?.status).toBe('suspended');
    expect((await app.signed({ url: '/v1/pay/balance', credentials: merchant })).statusCode).toBe(403);
    const notice = await page(suspended.headers.get('location')!);
    expect(notice.html).toContain(escapeHtml(TH.merchants_key_done_suspended.replace('{id}', key!.id)));
    expect((await act('resume')).status).toBe(303);
    expect((await apiKeys(merchant.merchant_id))[0]?.status).toBe('active');
    expect((await app.signed({ url: '/v1/pay/balance', credentials: merchant })).statusCode).toBe(200);
    expect((await act('revoke')).status).toBe(303);
    expect((await apiKeys(merchant.merchant_id))[0]?.status).toBe('revoked');
    const refused = await act('resume');
    expect(refused.status).toBe(409);
    expect(await refused.text()).toContain(escapeHtml(TH.merchants_error_key_revoked));
    expect((await apiKeys(merchant.merchant_id))[0]?.status).toBe('revoked');
    expect((await app.signed({ url: '/v1/pay/balance', credentials: merchant })).statusCode).toBe(401);
  });

  it('a reviewer (403), another brand’s key (404) and a POST without the CSRF token (403) change nothing', async () => {
    const merchant = await app.createMerchant({ white_label_id: brand() });
    const [key] = await apiKeys(merchant.merchant_id);
    const { csrf_token: reviewerToken } = formTokens((await page(`/bo/merchants/${merchant.merchant_id}`, reviewerCookie)).html);
    expect((await page(`/bo/merchants/${merchant.merchant_id}/api-keys`, reviewerCookie)).status).toBe(403);
    const byReviewer = await consolePost(base, `/bo/merchants/${merchant.merchant_id}/api-keys`, reviewerCookie, { csrf_token: reviewerToken, mode: 'test', scopes: 'pay:read' });
    expect(byReviewer.status).toBe(403);
    expect(await byReviewer.text()).toContain(escapeHtml(TH.merchants_forbidden_keys.replace('{role}', TH.role_reviewer)));
    expect((await consolePost(base, `/bo/api-keys/${key!.id}/revoke`, reviewerCookie, { csrf_token: reviewerToken })).status).toBe(403);
    const { csrf_token } = formTokens((await page(`/bo/merchants/${merchant.merchant_id}/api-keys`)).html);
    expect((await consolePost(base, `/bo/merchants/${merchant.merchant_id}/api-keys`, operatorCookie, { mode: 'test', scopes: 'pay:read' })).status).toBe(403);
    expect((await consolePost(base, `/bo/api-keys/${key!.id}/revoke`, operatorCookie, { csrf_token: 'forged' })).status).toBe(403);
    expect((await consolePost(base, `/bo/api-keys/${key!.id}/revoke`, operatorCookie, { csrf_token }, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    const [otherKey] = await apiKeys(otherBrandMerchant.merchant_id);
    expect((await consolePost(base, `/bo/api-keys/${otherKey!.id}/revoke`, operatorCookie, { csrf_token })).status).toBe(404);
    expect((await consolePost(base, `/bo/merchants/${otherBrandMerchant.merchant_id}/api-keys`, operatorCookie, { csrf_token, mode: 'test', scopes: 'pay:read' })).status).toBe(404);
    expect(await apiKeys(merchant.merchant_id)).toEqual([key]);
    expect((await apiKeys(otherBrandMerchant.merchant_id)).map((candidate) => candidate.status)).toEqual(['active']);
  });

  it('a form without a scope is refused in words (422) and creates nothing', async () => {
    const merchant = await app.createMerchant({ white_label_id: brand() });
    const { csrf_token } = formTokens((await page(`/bo/merchants/${merchant.merchant_id}/api-keys`)).html);
    const refused = await consolePost(base, `/bo/merchants/${merchant.merchant_id}/api-keys`, operatorCookie, { csrf_token, mode: 'test' });
    expect(refused.status).toBe(422);
    expect(await refused.text()).toContain('scopes: invalid_value');
    expect(await apiKeys(merchant.merchant_id)).toHaveLength(1);
  });
});

/** A test-mode wallet with 33 movements: 30 credits an hour apart, two of them cleared, one held (with a hostile reason), and a reservation. */
async function walletWithHistory(): Promise<WalletAccount> {
  const merchant = await app.createMerchant({ white_label_id: brand() });
  const account = { white_label_id: brand(), merchant_id: merchant.merchant_id, livemode: false };
  const { ledger } = app.instance.services;
  const tx = app.testDatabase.database.transaction.bind(app.testDatabase.database);
  const start = app.clock.now().getTime();
  const credits: BalanceTransactionView[] = [];
  for (let index = 0; index < 30; index += 1) {
    const deposit_id = `dep_01K0WALLETPAGE${String(index).padStart(12, '0')}`;
    credits.push(await tx((db) => ledger.creditSettledDeposit(db, { account, deposit_id, amount_minor: 1_000 + index * 7, cause: SYSTEM_CAUSE })));
    app.clock.set(new Date(start + (index + 1) * HOUR));
  }
  // The first two credits clear; one is held (a dispute) with a hostile reason; then a withdrawal reserves money.
  app.clock.set(new Date(start + 73 * HOUR + 30 * 60_000));
  await app.instance.worker.runDueJobs();
  expect(await tx((db) => ledger.holdClearing(db, account, credits[5]!.id, HOSTILE))).toBe(true);
  const reserved = await tx((db) =>
    ledger.post(db, { account, type: 'withdrawal_reserved', amount_minor: 1_500, bucket_from: 'available', bucket_to: 'reserved', movement_key: 'console:reserve', source: { type: 'withdrawal_order', id: 'wdr_console' }, cause: SYSTEM_CAUSE }),
  );
  expect(reserved.ok).toBe(true);
  await signInBoth();
  return account;
}

describe('the wallet', () => {
  it('shows the three buckets as the API does, and running totals that are right on every page', async () => {
    const account = await walletWithHistory();
    const api = (await app.backoffice({ url: `/v1/bo/wallet?merchant_id=${account.merchant_id}&mode=test` })).json<{ available_minor: number; pending_clearing_minor: number; reserved_minor: number; ledger_consistent: boolean }>();
    const path = `/bo/merchants/${account.merchant_id}/wallet?mode=test`;
    const first = await page(path, reviewerCookie);
    expect(first.status).toBe(200);
    const bucket = (name: string) => minorOf(new RegExp(`data-bucket="${name}">([^<]+)<`).exec(first.html)![1]!);
    expect({ available_minor: bucket('available'), pending_clearing_minor: bucket('pending_clearing'), reserved_minor: bucket('reserved') }).toEqual({
      available_minor: api.available_minor,
      pending_clearing_minor: api.pending_clearing_minor,
      reserved_minor: api.reserved_minor,
    });
    expect(api.ledger_consistent).toBe(true);
    expect(first.html).toContain('id="ledger-check"');
    // Every movement across the pages, newest first, with the balances after it.
    const shown = new Map<number, number[]>();
    let html = first.html;
    let pages = 1;
    for (;;) {
      for (const row of html.matchAll(/<tr data-sequence="([0-9]+)"[\s\S]*?<\/tr>/g)) {
        shown.set(Number(row[1]), [...row[0].matchAll(/<td class="amount(?: total-after)?">([^<]+)<\/td>/g)].map((cell) => minorOf(cell[1]!)));
      }
      // The movements' pager comes after their heading (the schedule's pagers keep this list's cursor too).
      const next = nextLink(html.slice(html.indexOf('id="movements-heading"')), 'before=');
      if (!next) break;
      pages += 1;
      html = (await page(next, reviewerCookie)).html;
    }
    expect(pages).toBe(2);
    const { rows } = await app.testDatabase.database.query<{ sequence: number; amount_minor: number; direction: string; bucket_from: string | null; bucket_to: string | null }>(
      'SELECT sequence, amount_minor, direction, bucket_from, bucket_to FROM balance_transactions WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = false ORDER BY sequence',
      [account.white_label_id, account.merchant_id],
    );
    expect(shown.size).toBe(rows.length);
    const running: Record<string, number> = { available: 0, pending_clearing: 0, reserved: 0 };
    for (const row of rows) {
      if (row.bucket_from) running[row.bucket_from]! -= Number(row.amount_minor);
      if (row.bucket_to) running[row.bucket_to]! += Number(row.amount_minor);
      const signed = row.direction === 'credit' ? Number(row.amount_minor) : -Number(row.amount_minor);
      const total = running.available! + running.pending_clearing! + running.reserved!;
      expect(shown.get(Number(row.sequence)), `sequence ${row.sequence}`).toEqual([signed, running.available, running.pending_clearing, running.reserved, total]);
    }
  });

  it('shows the clearing schedule: pending by time across pages, and the held one with its escaped reason', async () => {
    const account = await walletWithHistory();
    const path = `/bo/merchants/${account.merchant_id}/wallet?mode=test`;
    const first = await page(path);
    expect(first.html).toContain(escapeHtml(HOSTILE));
    expect(first.html).not.toContain('<script>alert');
    const pendingRows = (html: string) => [.../<table id="clearing-pending">([\s\S]*?)<\/table>/.exec(html)![1]!.matchAll(/<tr><td>/g)].length;
    expect(pendingRows(first.html)).toBe(25);
    const heldTable = /<table id="clearing-held">([\s\S]*?)<\/table>/.exec(first.html)![1]!;
    expect([...heldTable.matchAll(/<tr><td>/g)]).toHaveLength(1);
    const pendingNext = /<a href="([^"]*pending_after=[^"]+)" rel="next">/.exec(first.html)?.[1]?.replaceAll('&amp;', '&');
    expect(pendingNext).toBeTruthy();
    expect(pendingRows((await page(pendingNext!)).html)).toBe(2);
  });
});

/** A merchant's test endpoint (at `answerPath` of the receiver, with a hostile description) with one delivery, attempted once. */
async function endpointWithDelivery(answerPath = '/hooks'): Promise<{ merchant: MerchantCredentials; endpoint: EndpointView; delivery: DeliveryView }> {
  const merchant = await app.createMerchant({ white_label_id: brand() });
  const created = await app.backoffice({ method: 'POST', url: '/v1/bo/webhooks', body: { merchant_id: merchant.merchant_id, mode: 'test', deposit_url: `${receiver.url}${answerPath}`, description: HOSTILE } });
  expect(created.statusCode, created.body).toBe(201);
  const endpoint = created.json<EndpointView>();
  const { database, events } = app.instance.services;
  await database.transaction((tx) =>
    events.emitEvent(tx, { white_label_id: brand(), merchant_id: merchant.merchant_id, livemode: false, type: 'deposit.expired', object: { object: 'deposit_order', id: 'dep_01K0CONSOLEHOOK0000000000', version: 2 }, previous_attributes: { version: 1 }, cause: SYSTEM_CAUSE }),
  );
  await app.instance.services.webhooks.dispatcher.runUntilIdle();
  const list = (await app.backoffice({ url: `/v1/bo/webhooks/${endpoint.id}/deliveries` })).json<{ data: DeliveryView[] }>().data;
  expect(list).toHaveLength(1);
  return { merchant, endpoint, delivery: list[0]! };
}

describe('webhook endpoints and deliveries', () => {
  it('the endpoint page lists deliveries; the delivery page shows each attempt’s answer; texts are escaped', async () => {
    const { merchant, endpoint, delivery } = await endpointWithDelivery();
    const merchantPage = await page(`/bo/merchants/${merchant.merchant_id}`, reviewerCookie);
    expect(merchantPage.html).toContain(`/bo/merchants/${merchant.merchant_id}/webhooks/${endpoint.id}`);
    const endpointPage = await page(`/bo/merchants/${merchant.merchant_id}/webhooks/${endpoint.id}`, reviewerCookie);
    expect(endpointPage.status).toBe(200);
    expect(endpointPage.html).toContain(escapeHtml(HOSTILE));
    expect(endpointPage.html).not.toContain('<script>alert');
    expect(endpointPage.html).toContain(delivery.id);
    const failedOnly = await page(`/bo/merchants/${merchant.merchant_id}/webhooks/${endpoint.id}?status=succeeded`, reviewerCookie);
    expect(failedOnly.html).not.toContain(delivery.id);
    const deliveryPage = await page(`/bo/merchants/${merchant.merchant_id}/webhooks/${endpoint.id}/deliveries/${delivery.id}`, reviewerCookie);
    expect(deliveryPage.status).toBe(200);
    expect(deliveryPage.html).toMatch(/<td class="http-status">500<\/td>/);
    expect(deliveryPage.html).toContain('unexpected_status');
    expect(deliveryPage.html).toMatch(/<td class="amount">[0-9]+ มิลลิวินาที<\/td>/);
    // Another merchant's address for the same endpoint is not found.
    const other = await app.createMerchant({ white_label_id: brand() });
    expect((await page(`/bo/merchants/${other.merchant_id}/webhooks/${endpoint.id}`)).status).toBe(404);
    expect((await page(`/bo/merchants/${other.merchant_id}/webhooks/${endpoint.id}/deliveries/${delivery.id}`)).status).toBe(404);
  });

  it('resend arms the delivery again as the API would (a new round, audited as the session’s credential)', async () => {
    const { merchant, endpoint, delivery } = await endpointWithDelivery();
    const path = `/bo/merchants/${merchant.merchant_id}/webhooks/${endpoint.id}/deliveries/${delivery.id}`;
    const { csrf_token } = formTokens((await page(path, reviewerCookie)).html);
    expect((await consolePost(base, `${path}/resend`, reviewerCookie, {})).status).toBe(403);
    expect((await app.backoffice({ url: `/v1/bo/webhooks/${endpoint.id}/deliveries/${delivery.id}` })).json<DeliveryView>().round).toBe(delivery.round);
    const resent = await consolePost(base, `${path}/resend`, reviewerCookie, { csrf_token });
    expect(resent.status).toBe(303);
    const after = (await app.backoffice({ url: `/v1/bo/webhooks/${endpoint.id}/deliveries/${delivery.id}` })).json<DeliveryView>();
    expect(after.round).toBe(delivery.round + 1);
    expect(after.status).toBe('pending');
    expect(resent.headers.get('location')).toBe(`${path}?done=resent&round=${after.round}`);
    expect((await page(resent.headers.get('location')!, reviewerCookie)).html).toContain(escapeHtml(TH.merchants_resend_done.replace('{round}', String(after.round))));
    const { rows } = await app.testDatabase.database.query<{ actor_type: string }>("SELECT actor_type FROM audit_log WHERE action = 'webhook_delivery.resent' AND target_id = $1", [delivery.id]);
    expect(rows).toEqual([{ actor_type: 'backoffice_credential' }]);
  });

  it('replay takes the API’s selectors; a bad selector is refused in words and arms nothing', async () => {
    const { merchant, endpoint, delivery } = await endpointWithDelivery('/ok');
    expect(delivery.status).toBe('succeeded');
    const path = `/bo/merchants/${merchant.merchant_id}/webhooks/${endpoint.id}`;
    const { csrf_token } = formTokens((await page(path)).html);
    const refused = await consolePost(base, `${path}/replay`, operatorCookie, { csrf_token, event_types: 'Not A Type', only_failed: 'true' });
    expect(refused.status).toBe(422);
    expect(await refused.text()).toContain('event_types: invalid_event_type');
    expect((await app.backoffice({ url: `/v1/bo/webhooks/${endpoint.id}/deliveries/${delivery.id}` })).json<DeliveryView>().round).toBe(delivery.round);
    // Failed ones only: the succeeded delivery stays as it is.
    const skipped = await consolePost(base, `${path}/replay`, operatorCookie, { csrf_token, event_types: 'deposit.expired', only_failed: 'true' });
    expect(skipped.status).toBe(303);
    expect(skipped.headers.get('location')).toBe(`${path}?done=replayed&rearmed=0&created=0&limit=false`);
    // A full replay (the box unticked) of that type within a window of Bangkok times sends it again.
    const bangkok = (offset_ms: number) => new Date(app.clock.now().getTime() + offset_ms + 7 * HOUR).toISOString().slice(0, 16);
    const replayed = await consolePost(base, `${path}/replay`, operatorCookie, { csrf_token, event_types: 'deposit.expired', created_after: bangkok(-HOUR), created_before: bangkok(HOUR) });
    expect(replayed.headers.get('location')).toBe(`${path}?done=replayed&rearmed=1&created=0&limit=false`);
    expect((await app.backoffice({ url: `/v1/bo/webhooks/${endpoint.id}/deliveries/${delivery.id}` })).json<DeliveryView>().round).toBe(delivery.round + 1);
    const { rows } = await app.testDatabase.database.query<{ count: string }>("SELECT count(*)::text AS count FROM audit_log WHERE action = 'webhook_endpoint.replayed' AND target_id = $1", [endpoint.id]);
    expect(Number(rows[0]?.count)).toBe(2);
  });
});
