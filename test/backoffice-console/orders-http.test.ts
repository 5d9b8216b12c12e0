import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { caseInReview, consoleAppWithMerchant, consoleGet, consolePost, formTokens, signIn } from '../support/console.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, SOMCHAI_SENDER, uploadMultipart } from '../support/slips.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * The console's orders and audit log pages over HTTP on a real socket, signed in by CLI links: the search by each
 * filter, brand scoping (another brand's order is 404 and never found), an order's page with its timeline, legs,
 * fills and ledger movements, the audit log's filters and who may open it, and escaping of stored references.
 */

const TH = consoleTexts('th');
const HOSTILE_REFERENCE = `<script>alert("ref")</script>'"&`;
const HOSTILE_END_USER = `"><script>alert('user')</script>`;

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;
let settled: DepositView;
let trans_ref: string;
let hostile: DepositView;
let withdrawal: WithdrawalView;
let other: { white_label_id: string; deposit: DepositView | null };
let operatorCookie: string;

const brand = () => app.sandbox.white_label_id;

async function newDeposit(credentials: MerchantCredentials, merchant_reference: string, end_user_ref: string): Promise<DepositView> {
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    credentials,
    body: {
      amount_minor: 20_000,
      currency: 'THB',
      merchant_reference,
      end_user_ref,
      sender: { ...SOMCHAI_SENDER, account_number: `77${crypto.randomInt(10_000_000, 99_999_999)}` },
      client: { device_fingerprint: `device-${crypto.randomUUID()}`, ip: '203.0.113.40', user_agent: 'orders-test' },
    },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<DepositView>();
}

async function settledWithReference(credentials: MerchantCredentials): Promise<{ order: DepositView; trans_ref: string }> {
  const order = await createDeposit(app, { amount_minor: 15_000, credentials });
  const transfer = await sandboxTransfer(app, order, {}, credentials);
  const upload = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
  expect(upload.statusCode, upload.body).toBe(202);
  await runJobs(app);
  const after = await getDeposit(app, order.id, credentials);
  expect(after.status).toBe('settled');
  return { order: after, trans_ref: transfer.trans_ref };
}

async function newWithdrawal(credentials: MerchantCredentials): Promise<WithdrawalView> {
  await fundAvailable(app, accountOf(credentials), 1_000_000);
  const beneficiary_id = await verifiedBeneficiary(app, accountOf(credentials));
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    credentials,
    body: { amount_minor: 30_000, currency: 'THB', merchant_reference: `wd-${crypto.randomUUID().slice(0, 12)}`, end_user_ref: 'payee-orders', beneficiary_id },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<WithdrawalView>();
}

/** An order in another brand, if that brand can take one (its sandbox is not bootstrapped); null otherwise. */
async function otherBrandOrder(): Promise<{ white_label_id: string; deposit: DepositView | null }> {
  const credentials = await app.createMerchant();
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    credentials,
    body: { amount_minor: 20_000, currency: 'THB', merchant_reference: `other-${crypto.randomUUID().slice(0, 8)}`, end_user_ref: 'other-user', sender: SOMCHAI_SENDER },
  });
  return { white_label_id: credentials.white_label_id, deposit: response.statusCode === 201 ? response.json<DepositView>() : null };
}

beforeAll(async () => {
  ({ app, base, merchant } = await consoleAppWithMerchant());
  withdrawal = await newWithdrawal(merchant);
  ({ order: settled, trans_ref } = await settledWithReference(merchant));
  hostile = await newDeposit(merchant, HOSTILE_REFERENCE, HOSTILE_END_USER);
  other = await otherBrandOrder();
  operatorCookie = (await signIn(app, base, { brand: brand(), role: 'operator', name: 'Orders operator' })).cookie;
}, 120_000);

afterAll(async () => {
  await app.close();
});

async function page(path: string, cookie = operatorCookie): Promise<{ status: number; html: string }> {
  const response = await consoleGet(base, path, cookie);
  return { status: response.status, html: await response.text() };
}

function search(query: Record<string, string>): Promise<{ status: number; html: string }> {
  return page(`/bo/orders?${new URLSearchParams(query).toString()}`);
}

/** The order ids a result page lists, in its order. */
function idsIn(html: string): string[] {
  return [...html.matchAll(/<td><a href="\/bo\/orders\/((?:dep|wdr)_[0-9A-Za-z]+)[^"]*">/g)].map((match) => match[1]!);
}

describe('the orders search', () => {
  it('lists the brand newest first by default, with mode, and links each order to its page', async () => {
    const { status, html } = await page('/bo/orders');
    expect(status).toBe(200);
    expect(idsIn(html).slice(0, 2)).toEqual([hostile.id, settled.id]);
    expect(html).toContain(`>${escapeHtml(TH.mode_test)}<`);
    expect(html).toContain(merchant.merchant_id);
    expect(html, 'the merchant id is text; the only link to the merchants area is the menu').not.toContain(`href="/bo/merchants/`);
  });

  it('finds an order by id, merchant_reference, end_user_ref, bank reference, status and dates', async () => {
    expect(idsIn((await search({ id: settled.id })).html)).toEqual([settled.id]);
    expect(idsIn((await search({ merchant_reference: settled.merchant_reference })).html)).toEqual([settled.id]);
    expect(idsIn((await search({ end_user_ref: settled.end_user_ref })).html)).toEqual([settled.id]);
    expect(idsIn((await search({ bank_reference: trans_ref })).html)).toEqual([settled.id]);
    expect(idsIn((await search({ bank_reference: `${trans_ref}x` })).html)).toEqual([]);
    const settledIds = idsIn((await search({ status: 'settled' })).html);
    expect(settledIds).toContain(settled.id);
    expect(settledIds).not.toContain(hostile.id);
    // The test clock's day in Bangkok: both bounds are inclusive days.
    const day = new Date(Date.parse(settled.created_at) + 7 * 3_600_000).toISOString().slice(0, 10);
    expect(idsIn((await search({ created_from: day, created_to: day })).html)).toContain(settled.id);
    expect(idsIn((await search({ created_to: '2000-01-01' })).html)).toEqual([]);
    expect(idsIn((await search({ mode: 'live' })).html)).toEqual([]);
    // Filters combine: a reference with another order's status finds nothing.
    expect(idsIn((await search({ merchant_reference: settled.merchant_reference, status: 'awaiting_payment' })).html)).toEqual([]);
  });

  it('searches withdrawals by kind, id, reference, end user and status', async () => {
    expect(idsIn((await search({ id: withdrawal.id })).html)).toEqual([withdrawal.id]);
    expect(idsIn((await search({ kind: 'withdrawals', merchant_reference: withdrawal.merchant_reference })).html)).toEqual([withdrawal.id]);
    expect(idsIn((await search({ kind: 'withdrawals', end_user_ref: 'payee-orders' })).html)).toEqual([withdrawal.id]);
    expect(idsIn((await search({ kind: 'withdrawals', status: withdrawal.status })).html)).toContain(withdrawal.id);
    // The service's own orders (the sandbox counterparty's) are never listed.
    expect(idsIn((await search({ kind: 'withdrawals' })).html)).toEqual([withdrawal.id]);
  });

  it('pages with a cursor bound to its filters', async () => {
    // Distinct end users, so that the per-user creation limit is not met; all wait for payment.
    const created: string[] = [];
    for (let index = 0; index < 26; index += 1) created.push((await newDeposit(merchant, `page-${index}-${crypto.randomUUID().slice(0, 6)}`, `pager-${index}`)).id);
    const first = await search({ status: 'awaiting_payment' });
    expect(idsIn(first.html)).toHaveLength(25);
    expect(idsIn(first.html).slice(0, 25)).toEqual(created.slice(1).reverse());
    const next = /href="(\/bo\/orders\?[^"]*cursor=[^"]+)" rel="next"/.exec(first.html)?.[1]?.replaceAll('&amp;', '&');
    expect(next).toBeDefined();
    const second = await page(next!);
    const rest = idsIn(second.html);
    expect(rest[0]).toBe(created[0]);
    expect(rest).toContain(hostile.id);
    expect(rest.filter((id) => idsIn(first.html).includes(id))).toEqual([]);
    expect(second.html).toContain(escapeHtml(TH.first_page));
    // The same cursor under other filters starts again from the top.
    const cursor = new URL(next!, base).searchParams.get('cursor')!;
    expect(idsIn((await search({ end_user_ref: settled.end_user_ref, cursor })).html)).toEqual([settled.id]);
  });

  it('renders stored references as text, and keeps them as text in the filter form', async () => {
    const found = await search({ merchant_reference: HOSTILE_REFERENCE });
    expect(idsIn(found.html)).toEqual([hostile.id]);
    expect(found.html).toContain(escapeHtml(HOSTILE_REFERENCE));
    expect(found.html).toContain(escapeHtml(HOSTILE_END_USER));
    expect(found.html).not.toContain('<script>alert');
    expect(found.html).toContain(`value="${escapeHtml(HOSTILE_REFERENCE)}"`);
    const detail = await page(`/bo/orders/${hostile.id}`);
    expect(detail.html).toContain(escapeHtml(HOSTILE_END_USER));
    expect(detail.html).not.toContain('<script>alert');
    expect(idsIn((await search({ end_user_ref: HOSTILE_END_USER })).html)).toEqual([hostile.id]);
  });
});

describe('brand scoping', () => {
  it("another brand's session gets the 404 page for this brand's orders and never finds them", async () => {
    const { cookie } = await signIn(app, base, { brand: other.white_label_id, role: 'operator', name: 'Other brand operator' });
    for (const id of [settled.id, withdrawal.id]) {
      const response = await page(`/bo/orders/${id}`, cookie);
      expect(response.status, id).toBe(404);
      expect(response.html).not.toContain(settled.merchant_reference);
    }
    const searched = await page(`/bo/orders?merchant_reference=${encodeURIComponent(settled.merchant_reference)}`, cookie);
    expect(idsIn(searched.html)).toEqual([]);
    expect(idsIn((await page(`/bo/orders?bank_reference=${encodeURIComponent(trans_ref)}`, cookie)).html)).toEqual([]);
    expect(idsIn((await page(`/bo/orders?id=${settled.id}`, cookie)).html)).toEqual([]);
    if (other.deposit) {
      // And this brand never sees the other brand's order.
      expect(idsIn((await page(`/bo/orders?id=${other.deposit.id}`, cookie)).html)).toEqual([other.deposit.id]);
      expect(idsIn((await search({ id: other.deposit.id })).html)).toEqual([]);
      expect(idsIn((await search({ merchant_reference: other.deposit.merchant_reference })).html)).toEqual([]);
      expect((await page(`/bo/orders/${other.deposit.id}`)).status).toBe(404);
    }
  });

  it('an unknown or malformed id is the 404 page', async () => {
    expect((await page('/bo/orders/dep_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status).toBe(404);
    expect((await page('/bo/orders/not-an-id')).status).toBe(404);
  });
});

describe("an order's page", () => {
  it('a settled deposit shows its transfer, legs, timeline and ledger movements', async () => {
    const { status, html } = await page(`/bo/orders/${settled.id}`);
    expect(status).toBe(200);
    expect(html).toContain(escapeHtml(TH.orders_detail_heading.replace('{id}', settled.id)));
    expect(html).toContain(merchant.merchant_id);
    expect(html).toContain(trans_ref);
    expect(html).toContain(settled.legs[0]!.leg_ref);
    for (const type of ['deposit.created', 'deposit.settled']) expect(html).toContain(`<td>${type}</td>`);
    expect(html).toContain(settled.balance_transaction_id!);
    expect(html).toContain('<td>deposit_settled</td>');
    expect(html).not.toContain(escapeHtml(TH.orders_no_movements));
  });

  it('a withdrawal shows its reservation in the ledger and its timeline', async () => {
    const { status, html } = await page(`/bo/orders/${withdrawal.id}`);
    expect(status).toBe(200);
    expect(html).toContain(withdrawal.merchant_reference);
    expect(html).toContain('<td>withdrawal_reserved</td>');
    expect(html).toContain('<td>withdrawal.created</td>');
  });

  it('every role of the brand may read orders', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Orders reviewer' });
    expect((await page(`/bo/orders/${settled.id}`, cookie)).status).toBe(200);
    expect((await page('/bo/orders', cookie)).status).toBe(200);
  });
});

describe('the audit log page', () => {
  it('is for operators and platform administrators; a reviewer gets the 403 page', async () => {
    const { cookie } = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Audit reviewer' });
    const refused = await page('/bo/audit', cookie);
    expect(refused.status).toBe(403);
    expect(refused.html).toContain(escapeHtml(TH.audit_forbidden.replace('{role}', TH.role_reviewer)));
    expect(refused.html).not.toContain('href="/bo/audit"');
    const admin = await signIn(app, base, { brand: brand() });
    expect((await page('/bo/audit', admin.cookie)).status).toBe(200);
  });

  it('filters by who, what, object and days, newest first', async () => {
    const { cookie, link } = await signIn(app, base, { brand: brand(), role: 'operator', name: 'Audited operator' });
    const rowsOf = (html: string) => [...html.matchAll(/<tr>\n<td>[^<]*<\/td>\n<td>([^<]*)[\s\S]*?<\/td>\n<td>([^<]*)<\/td>\n<td>([^<]*)/g)].map((match) => ({ who: match[1]!, action: match[2]!, target: match[3]! }));
    const byCredential = rowsOf((await page(`/bo/audit?who=${link.credential_id}`, cookie)).html);
    expect(byCredential.map((row) => row.action)).toEqual(['console.signed_in']);
    const byPerson = rowsOf((await page(`/bo/audit?who=${link.staff_id}`, cookie)).html);
    expect(byPerson.map((row) => row.action)).toEqual(['console.signed_in']);
    const byAction = rowsOf((await page('/bo/audit?action=console.sign_in_link_issued', cookie)).html);
    expect(byAction.length).toBeGreaterThanOrEqual(3);
    expect(new Set(byAction.map((row) => row.action))).toEqual(new Set(['console.sign_in_link_issued']));
    const byTarget = rowsOf((await page(`/bo/audit?target_type=backoffice_credential&target_id=${link.credential_id}`, cookie)).html);
    expect(byTarget.map((row) => row.action)).toEqual(['console.sign_in_link_issued', 'backoffice_credential.created']);
    const byType = rowsOf((await page('/bo/audit?target_type=console_session', cookie)).html);
    expect(byType.length).toBeGreaterThanOrEqual(2);
    expect(rowsOf((await page('/bo/audit?created_to=2000-01-01', cookie)).html)).toEqual([]);
    const today = new Date(app.clock.now().getTime() + 7 * 3_600_000).toISOString().slice(0, 10);
    expect(rowsOf((await page(`/bo/audit?created_from=${today}&who=${link.credential_id}`, cookie)).html)).toHaveLength(1);
  });

  it('links an order target to its order page, and shows who by name; an order in review links to its case', async () => {
    const order = await caseInReview(app, merchant, `audit-${crypto.randomUUID().slice(0, 8)}`);
    const reviewer = await signIn(app, base, { brand: brand(), role: 'reviewer', name: 'Escalating reviewer' });
    const { csrf_token } = formTokens((await page(`/bo/reviews/${order.id}`, reviewer.cookie)).html);
    const escalated = await consolePost(base, `/bo/reviews/${order.id}/escalate`, reviewer.cookie, { csrf_token, note: 'Escalated for the orders page audit test' });
    expect(escalated.status).toBe(303);
    const html = (await page(`/bo/audit?target_type=deposit_order&target_id=${order.id}`)).html;
    expect(html).toContain(`<a href="/bo/orders/${order.id}">${order.id}</a>`);
    expect(html).toContain('review.escalated');
    expect(html).toContain('Escalating reviewer');
    const detail = (await page(`/bo/orders/${order.id}`)).html;
    expect(detail).toContain(`href="/bo/reviews/${order.id}"`);
    expect(detail).toContain('<td>deposit.review_updated</td>');
  }, 60_000);
});
