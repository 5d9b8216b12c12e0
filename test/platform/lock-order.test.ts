import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { holdInTransaction, isLockedElsewhere, untilALockIsWaitedFor, usingPostgres } from '../support/database.ts';
import { accountOf, depositServiceWithoutSandboxLiquidity, fundAvailable, inTransaction, verifiedBeneficiary } from '../support/withdrawals.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { Queryable } from '../../src/platform/db.ts';
import type { CreateDepositInput, DepositView } from '../../src/deposits/service.ts';
import { lockOrderInBrand } from '../../src/deposits/repository.ts';
import { createDeposit, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';

/**
 * The one lock order (src/platform/lock-order.ts) under concurrency, on PostgreSQL, where row locks are
 * real (PGlite runs one transaction at a time). Issue 13 saw deadlocks under ordinary load: cycle A
 * between matching (withdrawal rows, then feeds) and a deposit's cancel or expiry (feeds, then the
 * withdrawal in `releaseLeg`), cycle B between ledger posts and deposit paths (test/ledger/ledger.test.ts).
 */

let app: TestApp;
let userCounter = 0;
const MINUTE_MS = 60_000;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

function depositInput(amount_minor: number): CreateDepositInput {
  userCounter += 1;
  const user = `lock-user-${userCounter}`;
  return {
    amount_minor,
    merchant_reference: `ref-${user}`,
    end_user_ref: user,
    sender: { bank_code: '004', account_number: `07${String(userCounter).padStart(8, '0')}`, account_name_th: 'สมหญิง รักไทย' },
    client: { device_fingerprint: `fp-${user}`, ip: '203.0.113.9', user_agent: 'Mozilla/5.0' },
  };
}

function depositBody(amount_minor: number): Record<string, unknown> {
  return { ...depositInput(amount_minor), currency: 'THB' };
}

async function openWithdrawal(merchant: MerchantCredentials, beneficiary_id: string, amount_minor: number): Promise<string> {
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    credentials: merchant,
    body: { amount_minor, currency: 'THB', merchant_reference: `w-${crypto.randomUUID()}`, end_user_ref: 'payee', beneficiary_id },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ id: string }>().id;
}

/** A new brand with merchants that each withdraw (funded, a verified payee) and deposit. */
async function brandWith(count: number): Promise<{ merchants: MerchantCredentials[]; beneficiaries: Map<string, string> }> {
  const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'test', request_id: null }, { name: 'Lock Order Brand' });
  const merchants: MerchantCredentials[] = [];
  const beneficiaries = new Map<string, string>();
  for (let index = 0; index < count; index += 1) {
    const merchant = await app.createMerchant({ white_label_id: brand.id });
    await fundAvailable(app, accountOf(merchant), 1_000_000_000);
    beneficiaries.set(merchant.merchant_id, await verifiedBeneficiary(app, accountOf(merchant)));
    merchants.push(merchant);
  }
  return { merchants, beneficiaries };
}

function isDeadlock(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '40P01';
}

async function deadlocksOfDatabase(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ deadlocks: number }>('SELECT deadlocks::int AS deadlocks FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0]?.deadlocks ?? 0);
}

describe('lock order (issue 13, cycle A)', () => {
  it.skipIf(!usingPostgres)('a cancel holding a deposit’s locks and a creation matching its withdrawal meanwhile both finish (no 40P01)', async () => {
    const { merchants, beneficiaries } = await brandWith(3);
    const [depositor, otherDepositor, withdrawer] = merchants as [MerchantCredentials, MerchantCredentials, MerchantCredentials];
    // The only withdrawal of the brand: both deposits match it, so the two paths meet on its row and its owner's feed.
    await openWithdrawal(withdrawer, beneficiaries.get(withdrawer.merchant_id) ?? '', 5_000_000);
    const deposits = depositServiceWithoutSandboxLiquidity(app);
    const first = await inTransaction(app, (tx) => deposits.create(tx, accountOf(depositor), depositInput(20_000), SYSTEM_CAUSE));
    expect(first.matched).toBe(true);

    let locked!: () => void;
    const cancelHoldsLocks = new Promise<void>((resolve) => (locked = resolve));
    // A cancel: the deposit's locks (its row, the withdrawal its leg names, the feeds), a pause, then the release.
    const cancel = inTransaction(app, async (tx) => {
      await app.instance.services.deposits.lockOrder(tx, depositor.white_label_id, first.deposit.id);
      locked();
      await new Promise((resolve) => setTimeout(resolve, 400));
      return app.instance.services.deposits.cancel(tx, accountOf(depositor), first.deposit.id, 'merchant', SYSTEM_CAUSE);
    });
    await cancelHoldsLocks;
    // Meanwhile a creation matches: before the fix it locked the withdrawal (SKIP LOCKED) and waited for its
    // owner's feed, which the cancel held while it waited for the withdrawal.
    const creation = inTransaction(app, (tx) => deposits.create(tx, accountOf(otherDepositor), depositInput(20_000), SYSTEM_CAUSE));
    const outcomes = await Promise.allSettled([cancel, creation]);
    expect(outcomes.filter((outcome) => outcome.status === 'rejected').map((outcome) => String((outcome as PromiseRejectedResult).reason))).toEqual([]);
    const canceled = outcomes[0].status === 'fulfilled' ? outcomes[0].value : null;
    expect(canceled?.ok && canceled.value.status).toBe('canceled');
  });

  it.skipIf(!usingPostgres)('creation, matching retries, cancels, expiries, fills, ledger posts and the withdrawer’s own cancels run at once with zero deadlocks', async () => {
    const services = app.instance.services;
    const { merchants, beneficiaries } = await brandWith(4);
    const withdrawalsOf = new Map<string, string[]>();
    for (const merchant of merchants) {
      const ids: string[] = [];
      for (let index = 0; index < 3; index += 1) ids.push(await openWithdrawal(merchant, beneficiaries.get(merchant.merchant_id) ?? '', 2_000_000));
      withdrawalsOf.set(merchant.merchant_id, ids);
    }
    const deadlocksBefore = await deadlocksOfDatabase();
    const failures: string[] = [];
    const record = (what: string) => (error: unknown) => {
      failures.push(`${what}: ${isDeadlock(error) ? '40P01 ' : ''}${String(error)}`);
    };
    const expectAnswered = (what: string, statusCode: number, body: string) => {
      if (statusCode >= 500) failures.push(`${what}: ${statusCode} ${body}`);
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
    const brand = merchants[0]?.white_label_id ?? '';
    let previous: { merchant: MerchantCredentials; deposit: DepositView }[] = [];

    for (let round = 0; round < 5; round += 1) {
      const work: Promise<unknown>[] = [];
      const created: { merchant: MerchantCredentials; deposit: DepositView }[] = [];
      // Creation and matching: new deposits over HTTP; each round also one that waits for liquidity
      // (sandbox scenario 105.00) and is matched by its retry in the next round.
      for (let index = 0; index < 10; index += 1) {
        const merchant = pick(merchants);
        const amount = index === 0 ? 10_500 : 20_000 + 100 * Math.floor(Math.random() * 400);
        work.push(
          app
            .signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key: crypto.randomUUID(), credentials: merchant, body: depositBody(amount) })
            .then((response) => {
              expectAnswered('create', response.statusCode, response.body);
              if (response.statusCode === 201 || response.statusCode === 202) created.push({ merchant, deposit: response.json<DepositView>() });
            }, record('create')),
        );
      }
      // The orders of the previous round, now past their deadline: a third canceled, a third expired, a
      // third paid and settled (which fills the withdrawals); waiting ones are matched again.
      previous.forEach(({ merchant, deposit }, index) => {
        if (deposit.status === 'awaiting_liquidity') {
          work.push(inTransaction(app, (tx) => services.deposits.retryMatching(tx, brand, deposit.id)).catch(record('retry matching')));
        } else if (index % 3 === 0) {
          work.push(
            app
              .signed({ method: 'POST', url: `/v1/pay/deposits/${deposit.id}/cancel`, idempotency_key: crypto.randomUUID(), credentials: merchant, body: {} })
              .then((response) => expectAnswered('cancel', response.statusCode, response.body), record('cancel')),
          );
        } else if (index % 3 === 1) {
          work.push(inTransaction(app, (tx) => services.settlement.expire(tx, brand, deposit.id)).catch(record('expire')));
        } else {
          const receive = (tx: Queryable) =>
            services.deposits.markSlipReceived(tx, { white_label_id: brand, deposit_id: deposit.id, received_at: app.clock.now(), cause: SYSTEM_CAUSE });
          const settle = (tx: Queryable) =>
            services.settlement.settle(tx, { white_label_id: brand, deposit_id: deposit.id, transferred_amount_minor: deposit.amount_minor, settled_via: 'auto', cause: SYSTEM_CAUSE });
          work.push(
            // As the slip consumer does it. With the bank's answer in hand: one transaction that takes a
            // settlement's locks first (the payment parties), then receives the slip and settles. Without it:
            // the claim's transaction (the order alone), then the decision's.
            (index % 2 === 0
              ? inTransaction(app, async (tx) => {
                  await services.deposits.lockPaymentParties(tx, brand, deposit.id, []);
                  if ((await receive(tx)).ok) await settle(tx);
                })
              : (async () => {
                  if ((await inTransaction(app, receive)).ok) await inTransaction(app, settle);
                })()
            ).catch(record('settle')),
          );
        }
      });
      // Ledger posts on every wallet, and each withdrawer cancelling one of its own orders and opening another.
      for (const merchant of merchants) {
        work.push(fundAvailable(app, accountOf(merchant), 10_000).catch(record('ledger post')));
        const own = withdrawalsOf.get(merchant.merchant_id) ?? [];
        const target = own.shift();
        if (target) {
          work.push(
            app
              .signed({ method: 'POST', url: `/v1/pay/withdrawals/${target}/cancel`, idempotency_key: crypto.randomUUID(), credentials: merchant, body: {} })
              .then((response) => expectAnswered('withdrawal cancel', response.statusCode, response.body), record('withdrawal cancel')),
          );
        }
        work.push(openWithdrawal(merchant, beneficiaries.get(merchant.merchant_id) ?? '', 2_000_000).then((id) => own.push(id), record('withdrawal create')));
      }
      await Promise.all(work);
      previous = created;
      // Past the deadline of this round's orders (15 minutes) before the next round acts on them.
      app.clock.advance(16 * MINUTE_MS);
    }

    expect(failures).toEqual([]);
    // PostgreSQL counts every deadlock it broke in this database; its statistics reach the view shortly after.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await deadlocksOfDatabase()).toBe(deadlocksBefore);
  });
});

describe('lock order: the slip consumer takes the receipt, then the order, in one statement', () => {
  it.skipIf(!usingPostgres)('the head-receipt statement holds the receipt while it waits for the order, and answers the order as the change it waited for committed it', async () => {
    const deposit = await createDeposit(app, { amount_minor: 10_000 });
    const accepted = await uploadMultipart(app, deposit.slip_upload, slipBytes(await sandboxTransfer(app, deposit)));
    expect(accepted.statusCode, accepted.body).toBe(202);
    const { receipt_id } = accepted.json<{ receipt_id: string }>();
    const { database, slips, deposits } = app.instance.services;
    const white_label_id = app.sandbox.white_label_id;
    const stored = await database.query<{ updated_at: Date }>('SELECT updated_at FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2', [white_label_id, deposit.id]);
    const updatedBefore = stored.rows[0]!.updated_at.getTime();

    // A change of the order that keeps its row lock until it is told to commit.
    let commitChange!: () => void;
    const mayCommit = new Promise<void>((resolve) => (commitChange = resolve));
    let changeHoldsOrder!: () => void;
    const orderHeld = new Promise<void>((resolve) => (changeHoldsOrder = resolve));
    const change = database.transaction(async (tx) => {
      await tx.query(`UPDATE deposit_orders SET updated_at = updated_at + interval '1 second' WHERE white_label_id = $1 AND deposit_id = $2`, [white_label_id, deposit.id]);
      changeHoldsOrder();
      await mayCommit;
    });
    await orderHeld;

    // The consumer's statement: the head receipt, with the order's lock carried.
    const consumer = database.transaction(async (tx) => {
      const orderLock = deposits.orderLockRead(white_label_id, deposit.id);
      const receipt = await slips.headOfQueue(tx, white_label_id, deposit.id, [orderLock.part]);
      // Taken from what the statement carried: no statement of its own.
      await deposits.lockForSlip(tx, white_label_id, deposit.id, orderLock);
      const order = await lockOrderInBrand(tx, white_label_id, deposit.id);
      return { receipt, order };
    });
    await untilALockIsWaitedFor(database);
    // While it waits for the order, the consumer already holds the receipt: the receipt came first.
    await expect(
      database.query('SELECT 1 FROM slip_receipts WHERE white_label_id = $1 AND receipt_id = $2 FOR UPDATE NOWAIT', [white_label_id, receipt_id]),
    ).rejects.toMatchObject({ code: '55P03' });

    commitChange();
    await change;
    const { receipt, order } = await consumer;
    expect(receipt?.receipt.receipt_id).toBe(receipt_id);
    expect(order?.updated_at.getTime()).toBe(updatedBefore + 1_000);
  });
});

describe('lock order: a change of a deposit order alone, and a wider one, in one transaction', () => {
  it('receiving a slip may widen into a settlement only when the settlement’s locks were taken first', async () => {
    const { database, deposits, settlement } = app.instance.services;
    const white_label_id = app.sandbox.white_label_id;
    const receive = (tx: Queryable, deposit_id: string) => deposits.markSlipReceived(tx, { white_label_id, deposit_id, received_at: app.clock.now(), cause: SYSTEM_CAUSE });
    const settle = (tx: Queryable, deposit_id: string) =>
      settlement.settle(tx, { white_label_id, deposit_id, transferred_amount_minor: 10_000, settled_via: 'auto', cause: SYSTEM_CAUSE });

    // The order alone first: its feed is locked before the withdrawals its legs name, which a settlement
    // would then lock after that feed, against the lock order. Refused at once, and rolled back whole.
    const narrow = await createDeposit(app, { amount_minor: 10_000 });
    await expect(
      database.transaction(async (tx) => {
        expect((await receive(tx, narrow.id)).ok).toBe(true);
        await settle(tx, narrow.id);
      }),
    ).rejects.toThrow('an order locked for its own change is not locked for a wider one');
    expect((await database.query<{ status: string }>('SELECT status FROM deposit_orders WHERE deposit_id = $1', [narrow.id])).rows).toEqual([{ status: 'awaiting_payment' }]);

    // The settlement's locks first (the slip consumer's one transaction): the slip is received, then settled.
    const wide = await createDeposit(app, { amount_minor: 10_000 });
    const settled = await database.transaction(async (tx) => {
      await deposits.lockPaymentParties(tx, white_label_id, wide.id, []);
      expect((await receive(tx, wide.id)).ok).toBe(true);
      return settle(tx, wide.id);
    });
    expect(settled.ok && settled.value.status).toBe('settled');
  });
});

describe('lock order: wallets carried by the feed-lock statement', () => {
  it.skipIf(!usingPostgres)('the statement locks the wallets after every feed it names, even while it waits for the last feed', async () => {
    const { database, events, ledger } = app.instance.services;
    const brand = await app.instance.services.tenancy.createBrand({ actor_type: 'system', actor_id: 'test', request_id: null }, { name: 'Wallet Lock Brand' });
    const merchants = [
      await app.createMerchant({ white_label_id: brand.id }),
      await app.createMerchant({ white_label_id: brand.id }),
    ].sort((left, right) => (left.merchant_id < right.merchant_id ? -1 : 1));
    const [first, last] = merchants as [MerchantCredentials, MerchantCredentials];
    for (const merchant of merchants) await fundAvailable(app, accountOf(merchant), 1_000);
    const scope = { white_label_id: brand.id, livemode: false };
    const walletLocked = (merchant: MerchantCredentials) =>
      isLockedElsewhere(database, 'SELECT 1 FROM wallets WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = false FOR UPDATE NOWAIT', [brand.id, merchant.merchant_id]);

    // Another transaction holds the last merchant's feed.
    const holder = holdInTransaction(database, (tx) => events.lockFeeds(tx, brand.id, [last.merchant_id], false));
    await holder.held;

    // Both feeds, with both wallets carried: the first merchant's feed is locked at once, the last one waits.
    const locking = database.transaction(async (tx) => {
      const wallets = ledger.walletsLockPart(scope, merchants.map((merchant) => ({ merchant_id: merchant.merchant_id, movement_keys: ['never-posted'] })));
      const [answer] = await events.lockFeedsAndRead(tx, brand.id, merchants.map((merchant) => merchant.merchant_id), false, [wallets]);
      const locked = (answer as { answered: Map<string, unknown> }).answered;
      // Locked now, by this transaction, until it ends.
      expect(await walletLocked(first)).toBe(true);
      expect(await walletLocked(last)).toBe(true);
      return [...locked.keys()];
    });
    await untilALockIsWaitedFor(database);
    // While the statement waits for the last feed, neither wallet is locked: the wallets come after every feed.
    expect(await walletLocked(first)).toBe(false);
    expect(await walletLocked(last)).toBe(false);
    holder.release();
    await holder.done;
    expect(await locking).toEqual([first.merchant_id, last.merchant_id]);
  });
});

describe('lock order: the slip consumer’s decision takes the receipt, the order and its withdrawals in one statement', () => {
  it.skipIf(!usingPostgres)('the withdrawals the legs name are locked after the order, never while the statement waits for it', async () => {
    const deposit = await createDeposit(app, { amount_minor: 10_000 });
    const accepted = await uploadMultipart(app, deposit.slip_upload, slipBytes(await sandboxTransfer(app, deposit)));
    expect(accepted.statusCode, accepted.body).toBe(202);
    const { database, slips, deposits } = app.instance.services;
    const white_label_id = app.sandbox.white_label_id;
    const { rows: legs } = await database.query<{ withdrawal_id: string }>('SELECT withdrawal_id FROM deposit_legs WHERE deposit_id = $1 AND withdrawal_id IS NOT NULL', [deposit.id]);
    expect(legs.length).toBeGreaterThan(0);
    const withdrawalLocked = () =>
      isLockedElsewhere(database, 'SELECT 1 FROM withdrawal_orders WHERE white_label_id = $1 AND withdrawal_id = ANY($2::text[]) FOR UPDATE NOWAIT', [
        white_label_id,
        legs.map((leg) => leg.withdrawal_id),
      ]);

    // Another transaction holds the order.
    const holder = holdInTransaction(database, async (tx) => {
      await tx.query('SELECT 1 FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2 FOR UPDATE', [white_label_id, deposit.id]);
    });
    await holder.held;

    const consumer = database.transaction(async (tx) => {
      const receipt = await slips.headOfQueue(tx, white_label_id, deposit.id, [deposits.settlementLockRead(white_label_id, deposit.id).part]);
      // Held by this transaction now, until it ends.
      expect(await withdrawalLocked()).toBe(true);
      return receipt?.receipt.receipt_id;
    });
    await untilALockIsWaitedFor(database);
    // Waiting for the order, the statement holds no withdrawal yet: the withdrawals come after the order.
    expect(await withdrawalLocked()).toBe(false);
    holder.release();
    await holder.done;
    expect(await consumer).toBe(accepted.json<{ receipt_id: string }>().receipt_id);
  });
});
