import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import { InvariantViolation } from '../../src/platform/assert.ts';
import type { WalletAccount } from '../../src/ledger/types.ts';
import type { LedgerService, PostInput } from '../../src/ledger/service.ts';
import { usingPostgres } from '../support/database.ts';

let app: TestApp;
let ledger: LedgerService;
let depositCounter = 0;

const HOUR = 3600 * 1000;

beforeAll(async () => {
  app = await createTestApp();
  ledger = app.instance.services.ledger;
});
afterAll(async () => {
  await app.close();
});

function tx<T>(work: (db: Parameters<Parameters<TestApp['testDatabase']['database']['transaction']>[0]>[0]) => Promise<T>): Promise<T> {
  return app.testDatabase.database.transaction(work);
}

async function newMerchantAccount(): Promise<WalletAccount> {
  const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  return { white_label_id: merchant.white_label_id, merchant_id: merchant.merchant_id, livemode: false };
}

async function credit(target: WalletAccount, amount_minor: number) {
  depositCounter += 1;
  const depositId = `dep_01K0LEDGERTEST${String(depositCounter).padStart(12, '0')}`;
  return tx((db) => ledger.creditSettledDeposit(db, { account: target, deposit_id: depositId, amount_minor, cause: SYSTEM_CAUSE }));
}

async function balanceEvents(target: WalletAccount) {
  const { rows } = await app.testDatabase.database.query<{ type: string; envelope: { data: Record<string, unknown> } }>(
    "SELECT type, envelope FROM events WHERE merchant_id = $1 AND type LIKE 'balance.%' ORDER BY sequence",
    [target.merchant_id],
  );
  return rows;
}

describe('credits and clearing', () => {
  it.skipIf(!usingPostgres)('the same movement posted by two transactions at once posts once, and the one that waited answers the other’s', async () => {
    // The wallet lock and the movement-key lookup are one statement (src/ledger/repository.ts); the waiter
    // queues on the merchant's feed lock before it, so its statement sees what the first one committed.
    const target = await newMerchantAccount();
    await credit(target, 1_000);
    const second = await app.testDatabase.openAnother();
    let release!: () => void;
    const holding = new Promise<void>((resolve) => {
      release = resolve;
    });
    const post = (db: Parameters<Parameters<TestApp['testDatabase']['database']['transaction']>[0]>[0]) =>
      ledger.creditSettledDeposit(db, { account: target, deposit_id: 'dep_01K0LEDGERRACE00000000000', amount_minor: 700, cause: SYSTEM_CAUSE });
    const first = app.testDatabase.database.transaction(async (db) => {
      const posted = await post(db);
      await holding;
      return posted;
    });
    // The first transaction holds the wallet; the second's statement starts and waits for the lock.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const waiting = second.transaction((db) => post(db));
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    const [a, b] = await Promise.all([first, waiting]);
    expect(b.id).toBe(a.id);
    const { rows } = await app.testDatabase.database.query<{ movements: number }>(
      "SELECT count(*)::int AS movements FROM balance_transactions WHERE merchant_id = $1 AND movement_key LIKE 'deposit_settled:%RACE%'",
      [target.merchant_id],
    );
    expect(rows[0]?.movements).toBe(1);
    expect((await ledger.verify(app.testDatabase.database, target)).consistent).toBe(true);
  });

  it('credits a settled deposit into pending_clearing for 72 hours with a balance.credited event', async () => {
    const target = await newMerchantAccount();
    const movement = await credit(target, 98_390);
    expect(movement).toMatchObject({
      object: 'balance_transaction', type: 'deposit_settled', direction: 'credit', amount_minor: 98_390, currency: 'THB',
      bucket_from: null, bucket_to: 'pending_clearing', available_at: '2026-08-04T00:00:00.000Z',
      balance_after: { available_minor: 0, pending_clearing_minor: 98_390, reserved_minor: 0 }, livemode: false,
    });
    expect(movement.id).toMatch(/^btxn_/);
    const events = await balanceEvents(target);
    expect(events.map((event) => event.type)).toEqual(['balance.credited']);
    expect(events[0]!.envelope.data).toEqual({ object: movement });
    expect('previous_attributes' in events[0]!.envelope.data).toBe(false);
  });

  it('is idempotent: the same deposit credits once', async () => {
    const target = await newMerchantAccount();
    const depositId = 'dep_01K0LEDGERIDEMPOTENT00000';
    const first = await tx((db) => ledger.creditSettledDeposit(db, { account: target, deposit_id: depositId, amount_minor: 500, cause: SYSTEM_CAUSE }));
    const second = await tx((db) => ledger.creditSettledDeposit(db, { account: target, deposit_id: depositId, amount_minor: 500, cause: SYSTEM_CAUSE }));
    expect(second).toEqual(first);
    expect((await ledger.balance(app.testDatabase.database, target)).pending_clearing_minor).toBe(500);
    expect(await balanceEvents(target)).toHaveLength(1);
  });

  it('releases to available at +72 h by the durable job, with balance.cleared and the credit it cleared', async () => {
    const target = await newMerchantAccount();
    const start = app.clock.now().getTime();
    const movement = await credit(target, 10_000);
    app.clock.set(new Date(start + 72 * HOUR - 1000));
    await app.instance.worker.runDueJobs();
    expect((await ledger.balance(app.testDatabase.database, target)).available_minor).toBe(0);
    app.clock.set(new Date(start + 72 * HOUR));
    await app.instance.worker.runDueJobs();
    const balance = await ledger.balance(app.testDatabase.database, target);
    expect(balance).toMatchObject({ available_minor: 10_000, pending_clearing_minor: 0, reserved_minor: 0 });
    const events = await balanceEvents(target);
    expect(events.map((event) => event.type)).toEqual(['balance.credited', 'balance.cleared']);
    expect(events[1]!.envelope.data.object).toMatchObject({
      type: 'clearing_released', direction: 'credit', bucket_from: 'pending_clearing', bucket_to: 'available',
      cleared_from_balance_transaction_id: movement.id, amount_minor: 10_000,
    });
    // A repeated job changes nothing.
    await tx((db) => ledger.releaseClearing(db, target, movement.id));
    expect(await balanceEvents(target)).toHaveLength(2);
  });

  it('a hold keeps the credit back with no release time until the hold is lifted', async () => {
    const target = await newMerchantAccount();
    const start = app.clock.now().getTime();
    const movement = await credit(target, 7_000);
    expect(await tx((db) => ledger.holdClearing(db, target, movement.id, 'dispute dsp_1'))).toBe(true);
    expect(await ledger.nextClearingAt(app.testDatabase.database, target)).toBeNull();
    app.clock.set(new Date(start + 100 * HOUR));
    await app.instance.worker.runDueJobs();
    expect((await ledger.balance(app.testDatabase.database, target)).pending_clearing_minor).toBe(7_000);
    expect(await tx((db) => ledger.releaseHold(db, target, movement.id))).toBe(true);
    await app.instance.worker.runDueJobs();
    expect(await ledger.balance(app.testDatabase.database, target)).toMatchObject({ available_minor: 7_000, pending_clearing_minor: 0 });
  });
});

describe('reversals and the debt rule', () => {
  it('inside the window a reversal is taken from pending_clearing and the release never happens', async () => {
    const target = await newMerchantAccount();
    const start = app.clock.now().getTime();
    const movement = await credit(target, 4_000);
    const reversal = await tx((db) =>
      ledger.reverseDepositCredit(db, {
        account: target, deposit_id: 'dep_x', credit_balance_transaction_id: movement.id, reason_code: 'BANK_RECALL', cause: SYSTEM_CAUSE,
      }),
    );
    expect(reversal).toMatchObject({
      type: 'reversal', direction: 'debit', bucket_from: 'pending_clearing', bucket_to: null, amount_minor: 4_000,
      reverses_balance_transaction_id: movement.id, reason_code: 'BANK_RECALL',
    });
    app.clock.set(new Date(start + 80 * HOUR));
    await app.instance.worker.runDueJobs();
    expect(await ledger.balance(app.testDatabase.database, target)).toMatchObject({ available_minor: 0, pending_clearing_minor: 0 });
    expect((await balanceEvents(target)).map((event) => event.type)).toEqual(['balance.credited', 'balance.debited']);
  });

  it('after clearing a reversal overdraws available: the debt is visible and blocks other debits', async () => {
    const target = await newMerchantAccount();
    const start = app.clock.now().getTime();
    const first = await credit(target, 3_000);
    app.clock.set(new Date(start + 73 * HOUR));
    await app.instance.worker.runDueJobs();
    const reserve = (amount: number, key: string) =>
      tx((db) =>
        ledger.post(db, {
          account: target, type: 'withdrawal_reserved', amount_minor: amount, bucket_from: 'available', bucket_to: 'reserved',
          movement_key: key, source: { type: 'withdrawal_order', id: 'wdr_x' }, cause: SYSTEM_CAUSE,
        }),
      );
    expect((await reserve(1_000, 'reserve:1')).ok).toBe(true);
    await tx((db) =>
      ledger.reverseDepositCredit(db, { account: target, deposit_id: 'dep_y', credit_balance_transaction_id: first.id, reason_code: 'BANK_RECALL', cause: SYSTEM_CAUSE }),
    );
    const balance = await ledger.balance(app.testDatabase.database, target);
    expect(balance).toMatchObject({ available_minor: -1_000, pending_clearing_minor: 0, reserved_minor: 1_000 });
    const refused = await reserve(1, 'reserve:2');
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.error.code).toBe('insufficient_balance');
      expect(refused.error.details).toEqual({ available_minor: -1_000, required_minor: 1, pending_clearing_minor: 0, pending_clearing_available_at: null });
    }
    expect((await ledger.verify(app.testDatabase.database, target)).consistent).toBe(true);
  });

  it('new money clearing into a wallet with a debt reduces the debt', async () => {
    const target = await newMerchantAccount();
    const start = app.clock.now().getTime();
    const first = await credit(target, 3_000);
    app.clock.set(new Date(start + 73 * HOUR));
    await app.instance.worker.runDueJobs();
    await tx((db) =>
      ledger.post(db, {
        account: target, type: 'withdrawal_reserved', amount_minor: 2_000, bucket_from: 'available', bucket_to: 'reserved',
        movement_key: 'debt:reserve', source: { type: 'withdrawal_order', id: 'wdr_d' }, cause: SYSTEM_CAUSE,
      }),
    );
    await tx((db) =>
      ledger.reverseDepositCredit(db, { account: target, deposit_id: 'dep_d', credit_balance_transaction_id: first.id, reason_code: 'BANK_RECALL', cause: SYSTEM_CAUSE }),
    );
    expect((await ledger.balance(app.testDatabase.database, target)).available_minor).toBe(-2_000);
    await credit(target, 500);
    app.clock.set(new Date(start + 150 * HOUR));
    expect(await app.instance.worker.runDueJobs()).toBeGreaterThanOrEqual(1);
    expect(await ledger.balance(app.testDatabase.database, target)).toMatchObject({ available_minor: -1_500, pending_clearing_minor: 0 });
    const released = await tx((db) =>
      ledger.post(db, {
        account: target, type: 'withdrawal_released', amount_minor: 2_000, bucket_from: 'reserved', bucket_to: 'available',
        movement_key: 'debt:release', source: { type: 'withdrawal_order', id: 'wdr_d' }, cause: SYSTEM_CAUSE,
      }),
    );
    expect(released.ok).toBe(true);
    expect(await ledger.balance(app.testDatabase.database, target)).toMatchObject({ available_minor: 500, reserved_minor: 0 });
    expect((await ledger.verify(app.testDatabase.database, target)).consistent).toBe(true);
  });

  it('refuses a movement outside the movement table or below a floor as a programming error', async () => {
    const target = await newMerchantAccount();
    await expect(
      tx((db) =>
        ledger.post(db, {
          account: target, type: 'deposit_settled', amount_minor: 1, bucket_from: null, bucket_to: 'available',
          movement_key: 'bad', source: { type: 't', id: 'x' }, cause: SYSTEM_CAUSE,
        }),
      ),
    ).rejects.toBeInstanceOf(InvariantViolation);
    await expect(
      tx((db) =>
        ledger.post(db, {
          account: target, type: 'withdrawal_settled', amount_minor: 1, bucket_from: 'reserved', bucket_to: null,
          movement_key: 'bad2', source: { type: 't', id: 'x' }, cause: SYSTEM_CAUSE,
        }),
      ),
    ).rejects.toBeInstanceOf(InvariantViolation);
    await expect(
      tx((db) =>
        ledger.post(db, {
          account: target, type: 'adjustment', amount_minor: 0, bucket_from: null, bucket_to: 'available',
          movement_key: 'bad3', source: { type: 't', id: 'x' }, cause: SYSTEM_CAUSE,
        }),
      ),
    ).rejects.toThrow(/positive/);
    expect((await ledger.verify(app.testDatabase.database, target)).movements).toBe(0);
  });

  it('the database refuses a movement that overdraws available unless it is a reversal or adjustment', async () => {
    const target = await newMerchantAccount();
    await credit(target, 100);
    await expect(
      app.testDatabase.database.query(
        `INSERT INTO balance_transactions (white_label_id, merchant_id, livemode, balance_transaction_id, sequence, movement_key, type,
           direction, amount_minor, currency, bucket_from, bucket_to, available_after, pending_clearing_after, reserved_after,
           source_type, source_id, created_at)
         VALUES ($1, $2, false, 'btxn_forged', 99, 'forged', 'withdrawal_reserved', 'debit', 50, 'THB', 'available', 'reserved',
           -50, 0, 50, 't', 'x', now())`,
        [target.white_label_id, target.merchant_id],
      ),
    ).rejects.toThrow();
  });

  it('verify detects a wallet row that disagrees with its movements', async () => {
    const target = await newMerchantAccount();
    await credit(target, 2_500);
    expect((await ledger.verify(app.testDatabase.database, target)).consistent).toBe(true);
    await app.testDatabase.database.query(
      'UPDATE wallets SET pending_clearing_minor = pending_clearing_minor + 1 WHERE merchant_id = $1',
      [target.merchant_id],
    );
    const check = await ledger.verify(app.testDatabase.database, target);
    expect(check.consistent).toBe(false);
    expect(check.folded.pending_clearing_minor).toBe(2_500);
  });
});

describe('random sequences of movements', () => {
  type Operation =
    | { kind: 'credit'; amount: number }
    | { kind: 'advance'; hours: number }
    | { kind: 'hold'; pick: number }
    | { kind: 'unhold'; pick: number }
    | { kind: 'reverse'; pick: number }
    | { kind: 'reserve'; amount: number }
    | { kind: 'release_reserved'; amount: number };

  const operation: fc.Arbitrary<Operation> = fc.oneof(
    fc.record({ kind: fc.constant('credit' as const), amount: fc.integer({ min: 1, max: 50_000 }) }),
    fc.record({ kind: fc.constant('advance' as const), hours: fc.integer({ min: 1, max: 80 }) }),
    fc.record({ kind: fc.constant('hold' as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant('unhold' as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant('reverse' as const), pick: fc.nat() }),
    fc.record({ kind: fc.constant('reserve' as const), amount: fc.integer({ min: 1, max: 60_000 }) }),
    fc.record({ kind: fc.constant('release_reserved' as const), amount: fc.integer({ min: 1, max: 60_000 }) }),
  );

  it('keep the wallet equal to the fold of its movements, floors respected, one event per movement', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 14 }), async (operations) => {
        run += 1;
        const target = await newMerchantAccount();
        const credits: string[] = [];
        for (const [index, step] of operations.entries()) {
          const pick = (value: number) => credits[value % Math.max(1, credits.length)];
          if (step.kind === 'credit') credits.push((await credit(target, step.amount)).id);
          if (step.kind === 'advance') {
            app.clock.advance(step.hours * HOUR);
            await app.instance.worker.runDueJobs();
          }
          const chosen = 'pick' in step ? pick(step.pick) : undefined;
          if (step.kind === 'hold' && chosen) await tx((db) => ledger.holdClearing(db, target, chosen, 'dispute'));
          if (step.kind === 'unhold' && chosen) await tx((db) => ledger.releaseHold(db, target, chosen));
          if (step.kind === 'reverse' && chosen) {
            await tx((db) =>
              ledger.reverseDepositCredit(db, { account: target, deposit_id: `dep_r${run}`, credit_balance_transaction_id: chosen, reason_code: 'OPS_ERROR', cause: SYSTEM_CAUSE }),
            );
          }
          if (step.kind === 'reserve' || step.kind === 'release_reserved') {
            const before = await ledger.balance(app.testDatabase.database, target);
            const result = await tx((db) =>
              ledger.post(db, {
                account: target,
                type: step.kind === 'reserve' ? 'withdrawal_reserved' : 'withdrawal_released',
                amount_minor: step.kind === 'reserve' ? step.amount : Math.min(step.amount, Math.max(1, before.reserved_minor)),
                bucket_from: step.kind === 'reserve' ? 'available' : 'reserved',
                bucket_to: step.kind === 'reserve' ? 'reserved' : 'available',
                movement_key: `${step.kind}:${run}:${index}`,
                source: { type: 'withdrawal_order', id: 'wdr_p' },
                cause: SYSTEM_CAUSE,
              }).catch((error: unknown) => {
                // Releasing more than is reserved is a programming error the ledger refuses.
                expect(error).toBeInstanceOf(InvariantViolation);
                expect(before.reserved_minor).toBe(0);
                return null;
              }),
            );
            if (result && !result.ok) {
              expect(result.error.code).toBe('insufficient_balance');
              expect(step.amount).toBeGreaterThan(before.available_minor);
            }
          }
          const check = await ledger.verify(app.testDatabase.database, target);
          expect(check.consistent).toBe(true);
          expect(check.wallet.pending_clearing_minor).toBeGreaterThanOrEqual(0);
          expect(check.wallet.reserved_minor).toBeGreaterThanOrEqual(0);
          const events = await balanceEvents(target);
          expect(events).toHaveLength(check.movements);
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});

describe('GET /v1/pay/balance and GET /v1/bo/wallet', () => {
  it('answers the caller’s own wallet in its environment, zeros before any movement', async () => {
    const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const empty = await app.signed({ url: '/v1/pay/balance', credentials: merchant });
    expect(empty.statusCode).toBe(200);
    expect(empty.json()).toEqual({
      object: 'balance', available_minor: 0, pending_clearing_minor: 0, reserved_minor: 0, currency: 'THB', livemode: false,
      as_of: app.clock.now().toISOString(),
    });
    await credit({ white_label_id: merchant.white_label_id, merchant_id: merchant.merchant_id, livemode: false }, 1_234);
    expect((await app.signed({ url: '/v1/pay/balance', credentials: merchant })).json().pending_clearing_minor).toBe(1_234);
    // Another merchant, and the live wallet of the same merchant, see nothing of it.
    expect((await app.signed({ url: '/v1/pay/balance' })).json().pending_clearing_minor).toBe(0);
  });

  it('gives a brand operator the same numbers, the ledger check and the next clearing time; another brand answers 404', async () => {
    const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    await credit({ white_label_id: merchant.white_label_id, merchant_id: merchant.merchant_id, livemode: false }, 5_000);
    const operator = await app.instance.services.tenancy.createBackofficeCredential(
      { actor_type: 'system', actor_id: 'test', request_id: null },
      { white_label_id: app.sandbox.white_label_id, role: 'operator', name: 'Ops' },
    );
    const response = await app.backoffice({ url: `/v1/bo/wallet?merchant_id=${merchant.merchant_id}&mode=test`, token: operator.token });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    const balance = (await app.signed({ url: '/v1/pay/balance', credentials: merchant })).json();
    expect([body.available_minor, body.pending_clearing_minor, body.reserved_minor]).toEqual([
      balance.available_minor, balance.pending_clearing_minor, balance.reserved_minor,
    ]);
    expect(body.ledger_consistent).toBe(true);
    expect(body.next_clearing_at).toMatch(/Z$/);
    const foreign = await app.createMerchant();
    const notFound = await app.backoffice({ url: `/v1/bo/wallet?merchant_id=${foreign.merchant_id}&mode=test`, token: operator.token });
    expect(errorOf(notFound).code).toBe('resource_not_found');
    const integration = await app.backoffice({ url: `/v1/bo/wallet?merchant_id=${merchant.merchant_id}&mode=test`, token: merchant.api_key });
    expect(errorOf(integration).code).toBe('scope_denied');
  });
});

describe('several movements in one post', () => {
  it('postAll answers and moves exactly as posting them one after another, refusals and replays included', async () => {
    const one = await newMerchantAccount();
    const all = await newMerchantAccount();
    const movements = (target: WalletAccount): PostInput[] => {
      const base = { account: target, source: { type: 'withdrawal_order', id: `wdr_${target.merchant_id}` }, cause: SYSTEM_CAUSE };
      return [
        { ...base, type: 'withdrawal_reserved', amount_minor: 600, bucket_from: 'available', bucket_to: 'reserved', movement_key: 'many:reserve' },
        // Refused: 400 left in available. The refusal changes nothing and the next movement goes on.
        { ...base, type: 'withdrawal_reserved', amount_minor: 700, bucket_from: 'available', bucket_to: 'reserved', movement_key: 'many:too_much' },
        { ...base, type: 'withdrawal_settled', amount_minor: 450, bucket_from: 'reserved', bucket_to: null, movement_key: 'many:settle' },
        { ...base, type: 'fee', amount_minor: 150, bucket_from: 'reserved', bucket_to: null, movement_key: 'many:fee' },
      ];
    };
    for (const target of [one, all]) {
      await tx((db) =>
        ledger.post(db, { account: target, type: 'adjustment', amount_minor: 1_000, bucket_from: null, bucket_to: 'available', movement_key: 'many:funding', source: { type: 'test_funding', id: target.merchant_id }, reason_code: 'test_funding', cause: SYSTEM_CAUSE }),
      );
    }
    const sequential = await tx(async (db) => {
      const answers = [];
      for (const movement of movements(one)) answers.push(await ledger.post(db, movement));
      return answers;
    });
    const together = await tx((db) => ledger.postAll(db, movements(all)));
    // The same answers but for the new ids and times.
    const comparable = (answers: typeof together) =>
      answers.map((answer) => (answer.ok ? { ok: true, type: answer.value.type, amount_minor: answer.value.amount_minor, balance_after: answer.value.balance_after } : { ok: false, code: answer.error.code, details: answer.error.details }));
    expect(comparable(together)).toEqual(comparable(sequential));
    expect(together.map((answer) => answer.ok)).toEqual([true, false, true, true]);
    expect(await ledger.balance(app.testDatabase.database, all)).toMatchObject({ available_minor: 400, reserved_minor: 0, pending_clearing_minor: 0 });
    expect((await balanceEvents(all)).map((event) => event.type)).toEqual((await balanceEvents(one)).map((event) => event.type));
    expect((await ledger.verify(app.testDatabase.database, all)).consistent).toBe(true);

    // Posted again, with one key new: the posted ones answer their first movement, the new one moves alone.
    const replayed = await tx((db) =>
      ledger.postAll(db, [
        ...movements(all).filter((movement) => movement.movement_key !== 'many:too_much'),
        { account: all, type: 'withdrawal_reserved', amount_minor: 300, bucket_from: 'available', bucket_to: 'reserved', movement_key: 'many:later', source: { type: 'withdrawal_order', id: 'wdr_later' }, cause: SYSTEM_CAUSE },
      ]),
    );
    const ids = (answers: typeof together) => answers.map((answer) => (answer.ok ? answer.value.id : null));
    expect(ids(replayed).slice(0, 3)).toEqual([ids(together)[0], ids(together)[2], ids(together)[3]]);
    expect(replayed[3]?.ok && replayed[3].value.balance_after).toEqual({ available_minor: 100, pending_clearing_minor: 0, reserved_minor: 300 });
    expect((await ledger.verify(app.testDatabase.database, all)).consistent).toBe(true);
  });
});

describe('a credit expected ahead (a settlement: fills first, then the depositor’s credit)', () => {
  it('locks the depositor’s wallet with the first post’s and credits exactly as without, one statement fewer', async () => {
    const events = app.instance.services.events;
    const run = async (expect_ahead: boolean) => {
      const withdrawer = await newMerchantAccount();
      const depositor = await newMerchantAccount();
      await credit(depositor, 100);
      await tx((db) =>
        ledger.post(db, { account: withdrawer, type: 'adjustment', amount_minor: 1_000, bucket_from: null, bucket_to: 'available', movement_key: 'ahead:funding', source: { type: 'test_funding', id: withdrawer.merchant_id }, reason_code: 'test_funding', cause: SYSTEM_CAUSE }),
      );
      const sent: string[] = [];
      app.testDatabase.database.statement_observer = (sql) => sent.push(sql);
      try {
        const answers = await tx(async (db) => {
          await events.lockFeeds(db, withdrawer.white_label_id, [withdrawer.merchant_id, depositor.merchant_id], false);
          if (expect_ahead) ledger.expectDepositCredit(db, depositor, 'dep_01K0LEDGERAHEAD00000000000');
          const paid = await ledger.post(db, {
            account: withdrawer, type: 'adjustment', amount_minor: 300, bucket_from: 'available', bucket_to: null, movement_key: 'ahead:payout', source: { type: 't', id: 'x' }, reason_code: 'test', cause: SYSTEM_CAUSE,
          });
          const credited = await ledger.creditSettledDeposit(db, { account: depositor, deposit_id: 'dep_01K0LEDGERAHEAD00000000000', amount_minor: 700, cause: SYSTEM_CAUSE });
          // The same credit again in the transaction answers the first one.
          const again = await ledger.creditSettledDeposit(db, { account: depositor, deposit_id: 'dep_01K0LEDGERAHEAD00000000000', amount_minor: 700, cause: SYSTEM_CAUSE });
          return { paid, credited, again };
        });
        return { answers, statements: sent.length, withdrawer, depositor };
      } finally {
        app.testDatabase.database.statement_observer = null;
      }
    };
    const plain = await run(false);
    const ahead = await run(true);
    expect(ahead.statements).toBe(plain.statements - 1);
    expect(ahead.answers.credited.balance_after).toEqual(plain.answers.credited.balance_after);
    expect(ahead.answers.credited.balance_after).toEqual({ available_minor: 0, pending_clearing_minor: 800, reserved_minor: 0 });
    expect(ahead.answers.again.id).toBe(ahead.answers.credited.id);
    expect([plain.answers.paid.ok, ahead.answers.paid.ok]).toEqual([true, true]);
    expect(ahead.answers.paid.ok && ahead.answers.paid.value.balance_after).toEqual(plain.answers.paid.ok && plain.answers.paid.value.balance_after);
    for (const target of [ahead.withdrawer, ahead.depositor]) expect((await ledger.verify(app.testDatabase.database, target)).consistent).toBe(true);
    expect((await balanceEvents(ahead.depositor)).map((event) => event.type)).toEqual((await balanceEvents(plain.depositor)).map((event) => event.type));
  });
});

describe('lock order (issue 13, cycle B)', () => {
  it.skipIf(!usingPostgres)('a post takes the merchant’s feed before its wallet, as every deposit and withdrawal path does: no deadlock', async () => {
    const target = await newMerchantAccount();
    await credit(target, 10_000);
    const events = app.instance.services.events;
    let feedHeld!: () => void;
    const feedTaken = new Promise<void>((resolve) => (feedHeld = resolve));
    // A deposit-style path: the feed first, then (a moment later) the wallet.
    const feedFirst = tx(async (db) => {
      await events.lockFeeds(db, target.white_label_id, [target.merchant_id], target.livemode);
      feedHeld();
      await new Promise((resolve) => setTimeout(resolve, 300));
      await db.query('SELECT 1 FROM wallets WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 FOR UPDATE', [target.white_label_id, target.merchant_id, target.livemode]);
      return 'feed first';
    });
    await feedTaken;
    // A post meanwhile: before the fix it took the wallet, then waited for the feed, and PostgreSQL had to
    // break the cycle with 40P01; now it waits for the feed and then runs.
    const post = tx((db) => ledger.creditSettledDeposit(db, { account: target, deposit_id: 'dep_01K0LEDGERLOCKORDER000000001', amount_minor: 500, cause: SYSTEM_CAUSE }));
    const outcomes = await Promise.allSettled([feedFirst, post]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled']);
    expect((await ledger.verify(app.testDatabase.database, target)).consistent).toBe(true);
  });
});

describe('balance.* events name what the movement is', () => {
  it('balance.credited only for money arriving in pending_clearing; a released reservation is balance.released, an adjustment balance.adjusted', async () => {
    const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const target: WalletAccount = { white_label_id: merchant.white_label_id, merchant_id: merchant.merchant_id, livemode: false };
    const funded = await tx((db) =>
      ledger.post(db, { account: target, type: 'adjustment', amount_minor: 50_000, bucket_from: null, bucket_to: 'available', movement_key: `funding:${merchant.merchant_id}`, source: { type: 'test_funding', id: merchant.merchant_id }, reason_code: 'test_funding', cause: SYSTEM_CAUSE }),
    );
    expect(funded.ok).toBe(true);
    await credit(target, 10_000);
    // A withdrawal opened and canceled over HTTP: its reservation leaves available and comes back.
    const { beneficiary } = await tx((db) => app.instance.services.beneficiaries.create(db, target, { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }, SYSTEM_CAUSE));
    await app.instance.worker.runDueJobs();
    const created = await app.signed({
      method: 'POST', url: '/v1/pay/withdrawals', idempotency_key: `w-${merchant.merchant_id}`, credentials: merchant,
      body: { amount_minor: 20_000, currency: 'THB', merchant_reference: `events-${merchant.merchant_id}`, end_user_ref: 'user-events', beneficiary_id: beneficiary.id },
    });
    expect(created.statusCode, created.body).toBe(201);
    const canceled = await app.signed({ method: 'POST', url: `/v1/pay/withdrawals/${created.json<{ id: string }>().id}/cancel`, idempotency_key: `c-${merchant.merchant_id}`, credentials: merchant });
    expect(canceled.statusCode, canceled.body).toBe(200);

    const events = (await balanceEvents(target)).map((event) => {
      const object = event.envelope.data.object as { type: string; bucket_from: string | null; bucket_to: string | null };
      return [event.type, object.type, object.bucket_from, object.bucket_to];
    });
    expect(events).toEqual([
      ['balance.adjusted', 'adjustment', null, 'available'],
      ['balance.credited', 'deposit_settled', null, 'pending_clearing'],
      ['balance.debited', 'withdrawal_reserved', 'available', 'reserved'],
      ['balance.released', 'withdrawal_released', 'reserved', 'available'],
    ]);
  });
});
