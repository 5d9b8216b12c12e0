import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { accountOf, fundAvailable, inTransaction, verifiedBeneficiary } from '../support/withdrawals.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import { createDeposit } from '../support/slips.ts';
import type { WalletAccount } from '../../src/ledger/types.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * GET /v1/pay/withdrawals (issue 32): the merchant's withdrawal list, paged by an opaque cursor bound to its
 * filters. Orders are made through the service (refunds have no request of their own in this module); every
 * read goes through HTTP, signed with the merchant's key.
 */

let app: TestApp;
let referenceCounter = 0;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

interface Page {
  object: 'list';
  data: WithdrawalView[];
  has_more: boolean;
  next_cursor: string | null;
}

interface Merchant {
  credentials: MerchantCredentials;
  account: WalletAccount;
  beneficiary_id: string;
}

/** A merchant with a verified beneficiary and money for many orders, in the sandbox brand or in a brand of its own. */
async function newMerchant(brand: 'sandbox' | 'new' = 'sandbox'): Promise<Merchant> {
  const credentials = await app.createMerchant(brand === 'new' ? {} : { white_label_id: app.sandbox.white_label_id });
  const account = accountOf(credentials);
  await fundAvailable(app, account, 50_000_000);
  return { credentials, account, beneficiary_id: await verifiedBeneficiary(app, account) };
}

function nextReference(): string {
  referenceCounter += 1;
  return `wl-${referenceCounter}`;
}

/** An order made as the merchant's request would make it (50.00 THB: no sandbox scenario, no approval). */
/**
 * `refund_of_deposit_id` names a label: the order refunds a real deposit of the merchant made for that label (the
 * refunds' allowance refers to the deposit), awaiting payment, which is all the list reads of it.
 */
async function createOrder(merchant: Merchant, extra: { amount_minor?: number; end_user_ref?: string; merchant_reference?: string; refund_of_deposit_id?: string } = {}): Promise<WithdrawalView> {
  const { refund_of_deposit_id: label, ...rest } = extra;
  const refund = label === undefined ? undefined : { deposit_id: await depositFor(merchant, label), reason_code: 'other' as const, note: null, refundable_cap_minor: 100_000_000 };
  const input = { amount_minor: 5_000, merchant_reference: nextReference(), end_user_ref: 'user-list', beneficiary_id: merchant.beneficiary_id, ...rest, ...(refund ? { refund } : {}) };
  const created = await inTransaction(app, (tx) => app.instance.services.withdrawals.create(tx, merchant.account, input, SYSTEM_CAUSE));
  if (!created.ok) throw new Error(`creation refused: ${created.error.code}`);
  return created.value;
}

const depositsByLabel = new Map<string, string>();

async function depositFor(merchant: Merchant, label: string): Promise<string> {
  const known = depositsByLabel.get(label);
  if (known !== undefined) return known;
  const deposit = await createDeposit(app, { amount_minor: 10_000, credentials: merchant.credentials });
  depositsByLabel.set(label, deposit.id);
  return deposit.id;
}

async function cancelOrder(merchant: Merchant, id: string): Promise<void> {
  const canceled = await app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: merchant.credentials });
  expect(canceled.statusCode, canceled.body).toBe(200);
}

async function list(credentials: MerchantCredentials, query: string): Promise<Page> {
  const response = await app.signed({ url: `/v1/pay/withdrawals${query ? `?${query}` : ''}`, credentials });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<Page>();
}

function idsOf(page: Page): string[] {
  return page.data.map((order) => order.id);
}

/** The orders in the list's order: (created_at, id), newest first unless ascending. */
function sorted(orders: readonly WithdrawalView[], descending = true): string[] {
  const ascending = [...orders].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1));
  return (descending ? ascending.reverse() : ascending).map((order) => order.id);
}

/** Follows next_cursor to the end, calling `between` after each page; bounded so that a cursor loop fails instead of hanging. */
async function readAll(credentials: MerchantCredentials, query: string, between: (pageNumber: number) => Promise<void> = async () => {}): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pageNumber = 1; pageNumber <= 50; pageNumber += 1) {
    const page = await list(credentials, `${query}${cursor ? `&cursor=${cursor}` : ''}`);
    ids.push(...idsOf(page));
    expect(page.has_more).toBe(page.next_cursor !== null);
    if (!page.next_cursor) return { ids, pages: pageNumber };
    cursor = page.next_cursor;
    await between(pageNumber);
  }
  throw new Error('the cursor did not end within 50 pages');
}

describe('paging', () => {
  let merchant: Merchant;
  const initial: WithdrawalView[] = [];

  beforeAll(async () => {
    merchant = await newMerchant();
    // Seventeen orders: groups of three share one millisecond, so the id breaks the tie of created_at.
    for (let index = 0; index < 17; index += 1) {
      if (index % 3 === 0) app.clock.advance(1_000);
      initial.push(await createOrder(merchant));
    }
  });

  it('answers the envelope with the newest orders first, 20 by default', async () => {
    const page = await list(merchant.credentials, '');
    expect(page).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(idsOf(page)).toEqual(sorted(initial));
    for (const order of page.data) expect(order).toMatchObject({ object: 'withdrawal_order', livemode: false, status: 'open' });
  });

  it('pages newest first with no duplicate and no gap while orders are created between and during pages', async () => {
    const added: WithdrawalView[] = [];
    const { ids, pages } = await readAll(merchant.credentials, 'limit=4', async (pageNumber) => {
      app.clock.advance(10);
      if (pageNumber === 2) {
        // One creation runs while the next page is read, on its own connection where the engine has several.
        const [created] = await Promise.all([createOrder(merchant), list(merchant.credentials, 'limit=4')]);
        added.push(created);
      } else {
        added.push(await createOrder(merchant));
      }
    });
    expect(pages).toBe(5);
    // Orders made after the first page are newer than every cursor: a newest-first walk never reaches them.
    expect(ids).toEqual(sorted(initial));
    expect(new Set(ids).size).toBe(ids.length);
    expect(added.length).toBe(4);
  });

  it('pages oldest first with order=asc, and reaches the orders created while it pages', async () => {
    const before = (await readAll(merchant.credentials, 'order=asc&limit=100')).ids;
    const added: WithdrawalView[] = [];
    const { ids } = await readAll(merchant.credentials, 'order=asc&limit=5', async () => {
      app.clock.advance(10);
      added.push(await createOrder(merchant));
    });
    expect(ids.slice(0, before.length)).toEqual(before);
    // Each order made between pages is newer than the cursor, so the walk reaches it: every one, once, in order.
    expect(ids.slice(before.length)).toEqual(added.map((order) => order.id));
    expect(new Set(ids).size).toBe(ids.length);
    const everything = (await readAll(merchant.credentials, 'limit=100')).ids;
    expect([...ids].reverse()).toEqual(everything);
  });

  it('keeps the page size a caller asks for and lets it change between pages', async () => {
    const first = await list(merchant.credentials, 'limit=1');
    expect(first.data).toHaveLength(1);
    expect(first.has_more).toBe(true);
    const second = await list(merchant.credentials, `limit=100&cursor=${first.next_cursor}`);
    const everything = (await readAll(merchant.credentials, 'limit=100')).ids;
    expect([...idsOf(first), ...idsOf(second)]).toEqual(everything);
    expect(second).toMatchObject({ has_more: false, next_cursor: null });
  });

});

describe('list items', () => {
  it('a list item is the order as GET /v1/pay/withdrawals/{id} shows it, without fills', async () => {
    const merchant = await newMerchant();
    await createOrder(merchant);
    const page = await list(merchant.credentials, 'limit=1');
    const item = page.data[0]!;
    const single = await app.signed({ url: `/v1/pay/withdrawals/${item.id}`, credentials: merchant.credentials });
    const { fills, ...withoutFills } = single.json<WithdrawalView>();
    expect(fills).toEqual([]);
    expect(item).not.toHaveProperty('fills');
    expect(item).toEqual(withoutFills);
  });
});

/** The orders the filter tests read, each made to be found by one filter and missed by the others. */
interface FilterWorld {
  merchant: Merchant;
  open: WithdrawalView;
  prefixed: WithdrawalView;
  canceled: WithdrawalView;
  pending: WithdrawalView;
  refundA: WithdrawalView;
  refundB: WithdrawalView;
  otherUser: WithdrawalView;
  /** The created_at of `pending`: the first order at or after it. */
  boundary: string;
}

async function createFilterWorld(): Promise<FilterWorld> {
  const merchant = await newMerchant();
  app.clock.advance(60_000);
  const open = await createOrder(merchant, { merchant_reference: 'order-1' });
  app.clock.advance(1_000);
  const prefixed = await createOrder(merchant, { merchant_reference: 'order-10' });
  app.clock.advance(1_000);
  const canceled = await createOrder(merchant);
  await cancelOrder(merchant, canceled.id);
  app.clock.advance(1_000);
  const boundary = app.clock.now().toISOString();
  // At or above the default approval threshold (200,000 THB): the order waits for approval.
  const pending = await createOrder(merchant, { amount_minor: 20_000_000 });
  app.clock.advance(1_000);
  const refundA = await createOrder(merchant, { refund_of_deposit_id: 'refunded-a', end_user_ref: 'payer-a' });
  const refundB = await createOrder(merchant, { refund_of_deposit_id: 'refunded-b', end_user_ref: 'payer-b' });
  app.clock.advance(1_000);
  const otherUser = await createOrder(merchant, { end_user_ref: 'user-other' });
  return { merchant, open, prefixed, canceled, pending, refundA, refundB, otherUser, boundary };
}

describe('filters', () => {
  let world: FilterWorld;
  let merchant: Merchant;

  beforeAll(async () => {
    world = await createFilterWorld();
    merchant = world.merchant;
  });

  it('status', async () => {
    expect(world.pending.status).toBe('pending_approval');
    expect(idsOf(await list(merchant.credentials, 'status=canceled'))).toEqual([world.canceled.id]);
    expect(idsOf(await list(merchant.credentials, 'status=pending_approval'))).toEqual([world.pending.id]);
    expect(idsOf(await list(merchant.credentials, 'status=open'))).toEqual(sorted([world.open, world.prefixed, world.refundA, world.refundB, world.otherUser]));
    expect((await list(merchant.credentials, 'status=settled')).data).toEqual([]);
  });

  it('refund_of_deposit_id: the refunds of one deposit only', async () => {
    const depositA = world.refundA.refund_of_deposit_id!;
    const page = await list(merchant.credentials, `refund_of_deposit_id=${depositA}`);
    expect(idsOf(page)).toEqual([world.refundA.id]);
    expect(page.data[0]).toMatchObject({ refund_of_deposit_id: depositA });
    expect(idsOf(await list(merchant.credentials, `refund_of_deposit_id=${world.refundB.refund_of_deposit_id!}`))).toEqual([world.refundB.id]);
    expect((await list(merchant.credentials, 'refund_of_deposit_id=dep_01K0NOSUCHDEPOSIT000000000')).data).toEqual([]);
    // Combined with another filter, both apply.
    expect((await list(merchant.credentials, `refund_of_deposit_id=${depositA}&end_user_ref=payer-b`)).data).toEqual([]);
  });

  it('merchant_reference: exact, never a prefix', async () => {
    expect(idsOf(await list(merchant.credentials, 'merchant_reference=order-1'))).toEqual([world.open.id]);
    expect(idsOf(await list(merchant.credentials, 'merchant_reference=order-10'))).toEqual([world.prefixed.id]);
    expect((await list(merchant.credentials, 'merchant_reference=order-')).data).toEqual([]);
    expect((await list(merchant.credentials, 'merchant_reference=ORDER-1')).data).toEqual([]);
  });

  it('end_user_ref', async () => {
    expect(idsOf(await list(merchant.credentials, 'end_user_ref=user-other'))).toEqual([world.otherUser.id]);
    expect(idsOf(await list(merchant.credentials, 'end_user_ref=payer-a'))).toEqual([world.refundA.id]);
    expect(idsOf(await list(merchant.credentials, 'end_user_ref=user-list'))).toEqual(sorted([world.open, world.prefixed, world.canceled, world.pending]));
  });

  it('from is inclusive and to exclusive, on created_at', async () => {
    expect(world.pending.created_at).toBe(world.boundary);
    expect(idsOf(await list(merchant.credentials, `from=${world.boundary}`))).toEqual(sorted([world.pending, world.refundA, world.refundB, world.otherUser]));
    expect(idsOf(await list(merchant.credentials, `to=${world.boundary}`))).toEqual(sorted([world.open, world.prefixed, world.canceled]));
    expect(idsOf(await list(merchant.credentials, `from=${world.boundary}&to=${world.refundA.created_at}&order=asc`))).toEqual([world.pending.id]);
    expect((await list(merchant.credentials, `from=${world.boundary}&to=${world.boundary}`)).data).toEqual([]);
  });

  it('a filtered list pages with its cursor, and the cursor keeps the filter', async () => {
    const everything = sorted([world.pending, world.refundA, world.refundB, world.otherUser]);
    const { ids, pages } = await readAll(merchant.credentials, `from=${world.boundary}&limit=1`);
    expect(ids).toEqual(everything);
    expect(pages).toBe(4);
    const ascending = await readAll(merchant.credentials, `from=${world.boundary}&limit=3&order=asc`);
    expect(ascending.ids).toEqual([...everything].reverse());
  });
});

describe('a cursor is bound to its filters', () => {
  let merchant: Merchant;
  let cursor: string;

  beforeAll(async () => {
    merchant = await newMerchant();
    for (let index = 0; index < 3; index += 1) {
      app.clock.advance(1_000);
      await createOrder(merchant, { refund_of_deposit_id: `refunded-cursor-${index}` });
    }
    const first = await list(merchant.credentials, 'limit=1&status=open&end_user_ref=user-list');
    cursor = first.next_cursor!;
    expect(cursor).toBeTruthy();
  });

  it('answers 400 cursor_filter_mismatch when any filter changes, is added or is dropped', async () => {
    for (const changed of [
      'status=canceled&end_user_ref=user-list',
      'end_user_ref=user-list',
      'status=open',
      'status=open&end_user_ref=user-other',
      'status=open&end_user_ref=user-list&order=asc',
      'status=open&end_user_ref=user-list&refund_of_deposit_id=dep_01K0LISTCURSOR000000000000',
      'status=open&end_user_ref=user-list&merchant_reference=wl-1',
      'status=open&end_user_ref=user-list&from=2026-01-01T00:00:00.000Z',
      'status=open&end_user_ref=user-list&to=2030-01-01T00:00:00.000Z',
    ]) {
      const response = await app.signed({ url: `/v1/pay/withdrawals?${changed}&cursor=${cursor}`, credentials: merchant.credentials });
      expect(response.statusCode, changed).toBe(400);
      expect(errorOf(response).code, changed).toBe('cursor_filter_mismatch');
    }
  });

  it('follows with the same filters in another order of the query, and with another limit', async () => {
    const next = await list(merchant.credentials, `end_user_ref=user-list&limit=2&cursor=${cursor}&status=open`);
    expect(next.data).toHaveLength(2);
  });

  it('a cursor of the deposit list is not a cursor of this list', async () => {
    const deposits = Buffer.from(
      JSON.stringify({ v: 1, created_at: Date.now(), id: 'dep_01K0NOSUCHID0000000000000', filters: { status: null, end_user_ref: null, from: null, to: null, order: 'desc' } }),
      'utf8',
    ).toString('base64url');
    const response = await app.signed({ url: `/v1/pay/withdrawals?cursor=${deposits}`, credentials: merchant.credentials });
    expect(response.statusCode).toBe(422);
    expect(errorOf(response)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'cursor', reason: 'invalid_cursor' }] } });
  });
});

describe('bad query values', () => {
  it('answer 422 validation_error naming the field', async () => {
    const cases: [string, string][] = [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=-1', 'limit'],
      ['limit=ten', 'limit'],
      ['limit=1.5', 'limit'],
      ['status=paid', 'status'],
      ['status=OPEN', 'status'],
      ['order=newest', 'order'],
      ['from=2026-08-01', 'from'],
      ['from=2026-08-01T00:00:00Z', 'from'],
      ['to=2026-02-30T00:00:00.000Z', 'to'],
      ['to=yesterday', 'to'],
      ['from=2026-08-01T07:00:00.000%2B07:00', 'from'],
      ['merchant_reference=', 'merchant_reference'],
      [`merchant_reference=${'r'.repeat(65)}`, 'merchant_reference'],
      [`end_user_ref=${'u'.repeat(65)}`, 'end_user_ref'],
      ['refund_of_deposit_id=', 'refund_of_deposit_id'],
      ['cursor=not-a-cursor', 'cursor'],
      ['starting_after=wdr_01K0NOSUCHID0000000000000', 'starting_after'],
    ];
    for (const [query, path] of cases) {
      const response = await app.signed({ url: `/v1/pay/withdrawals?${query}` });
      expect(response.statusCode, query).toBe(422);
      const error = errorOf(response);
      expect(error.code, query).toBe('validation_error');
      expect((error.details.fields as { path: string }[]).map((field) => field.path), query).toContain(path);
    }
  });
});

describe('scope: the caller sees its own orders of its own mode only', () => {
  it("never lists another merchant's or another brand's orders, even by their references", async () => {
    const own = await newMerchant();
    const sibling = await newMerchant();
    const elsewhere = await newMerchant('new');
    expect(elsewhere.credentials.white_label_id).not.toBe(own.credentials.white_label_id);
    app.clock.advance(1_000);
    const mine = await createOrder(own, { merchant_reference: 'shared-ref', end_user_ref: 'shared-user', refund_of_deposit_id: 'refunded-own' });
    const theirs = await createOrder(sibling, { merchant_reference: 'shared-ref', end_user_ref: 'shared-user', refund_of_deposit_id: 'refunded-sibling' });
    const foreign = await createOrder(elsewhere, { merchant_reference: 'shared-ref', end_user_ref: 'shared-user', refund_of_deposit_id: 'refunded-foreign' });

    for (const [merchant, order] of [[own, mine], [sibling, theirs], [elsewhere, foreign]] as const) {
      expect(idsOf(await list(merchant.credentials, 'limit=100'))).toEqual([order.id]);
      expect(idsOf(await list(merchant.credentials, 'merchant_reference=shared-ref'))).toEqual([order.id]);
      expect(idsOf(await list(merchant.credentials, 'end_user_ref=shared-user'))).toEqual([order.id]);
    }
    // Naming another merchant's refunded deposit finds nothing, as an unknown id would.
    expect((await list(own.credentials, `refund_of_deposit_id=${theirs.refund_of_deposit_id!}`)).data).toEqual([]);
    expect((await list(own.credentials, `refund_of_deposit_id=${foreign.refund_of_deposit_id!}`)).data).toEqual([]);
    // The sandbox merchant of the brand (no orders of its own here) sees none of theirs.
    const sandboxIds = idsOf(await list(app.sandbox, 'limit=100'));
    for (const order of [mine, theirs, foreign]) expect(sandboxIds).not.toContain(order.id);
  });

  it('separates test mode from live mode for the same merchant', async () => {
    const merchant = await newMerchant();
    const testOrder = await createOrder(merchant);
    const live = await app.instance.services.tenancy.createApiKey(
      { actor_type: 'system', actor_id: 'test', request_id: null },
      { merchant_id: merchant.credentials.merchant_id, scope_white_label_id: merchant.credentials.white_label_id, livemode: true },
    );
    const liveCredentials = { ...merchant.credentials, api_key: live.api_key, signing_secret: live.signing_secret };
    const liveAccount = accountOf(merchant.credentials, true);
    await fundAvailable(app, liveAccount, 100_000);
    // A live beneficiary cannot be verified here (no live bank directory), so the order is made through the service.
    const liveOrder = await inTransaction(app, async (tx) => {
      const { beneficiary } = await app.instance.services.beneficiaries.create(tx, liveAccount, { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }, SYSTEM_CAUSE);
      return app.instance.services.withdrawals.create(tx, liveAccount, { amount_minor: 5_000, merchant_reference: testOrder.merchant_reference, end_user_ref: 'user-list', beneficiary_id: beneficiary.id }, SYSTEM_CAUSE);
    });
    if (!liveOrder.ok) throw new Error(liveOrder.error.code);

    const testPage = await list(merchant.credentials, 'limit=100');
    expect(idsOf(testPage)).toEqual([testOrder.id]);
    const livePage = await list(liveCredentials, 'limit=100');
    expect(idsOf(livePage)).toEqual([liveOrder.value.id]);
    expect(livePage.data[0]).toMatchObject({ livemode: true });
    // The same merchant_reference in each mode names that mode's order only.
    expect(idsOf(await list(liveCredentials, `merchant_reference=${testOrder.merchant_reference}`))).toEqual([liveOrder.value.id]);
  });
});
