import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import type { EventsService } from '../events/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { WithdrawalRow } from '../withdrawals/types.ts';
import { PlannedRead, type ReadPart } from '../platform/read-part.ts';
import { isUnitOfWork, TransactionFacts } from '../platform/unit-of-work.ts';
import * as repository from './repository.ts';
import type { DepositLegRow, DepositRow } from './types.ts';

/**
 * The deposit side of the lock order (src/platform/lock-order.ts, docs/decisions/locks.md): the order row,
 * then the withdrawals its legs name, then the event feeds of every merchant involved. Every change of an
 * order takes its locks here, so that there is one place to read which path takes which lock.
 */

/** Orders a transaction locked for their own change (`lockForOwnChange`), by `orderRowKey`. */
const LOCKED_FOR_OWN_CHANGE = new TransactionFacts<true>('deposits.locked_for_own_change');

/** The legs a settlement lock read answered (`settlementLockRead`), by `orderRowKey`, until a later statement confirms them. */
const UNCONFIRMED_LEGS = new TransactionFacts<DepositLegRow[]>('deposits.unconfirmed_legs');

/**
 * Thrown at the feed-lock statement of a transaction whose settlement lock read (`settlementLockRead`) answered
 * legs older than the order it locked (its lock waited for a change of the legs that then committed): the
 * withdrawals it locked may not be the ones the legs name now. The transaction is rolled back and taken again.
 */
export class LegsChangedMeanwhile extends Error {
  override name = 'LegsChangedMeanwhile';
  constructor() {
    super("the order's legs changed while its lock was waited for");
  }
}

/**
 * What a lock of the order that an earlier statement carried answered (`orderLockRead`, `settlementLockRead`):
 * the order, and for a settlement the legs it read and the withdrawals they name, locked. Null when there is no
 * such order.
 */
export type CarriedOrderLock = { order: DepositRow; legs: { legs: DepositLegRow[]; named: WithdrawalRow[] } | null } | null;

/** Orders a transaction locked with their withdrawals and feeds (`lockWithdrawalsAndFeedsOf`), by `orderRowKey`. */
const LOCKED_FOR_WIDE_CHANGE = new TransactionFacts<true>('deposits.locked_for_wide_change');

function mapNullable<Value, Mapped>(value: Value | null, map: (value: Value) => Mapped): Mapped | null {
  return value === null ? null : map(value);
}

export class DepositLocks {
  constructor(private readonly deps: { events: EventsService; withdrawals: WithdrawalService }) {}

  /**
   * Locks the order, then every withdrawal its legs name, then the event feeds of its merchant and of
   * those withdrawals' owners, in the one lock order (src/platform/lock-order.ts): a change to the legs
   * releases, fills or reverses those withdrawals and writes events (and moves wallets) for all of them.
   * Taking the withdrawals before the feeds is what the withdrawal side and the matcher do too; taking
   * them after (as this did) closed a cycle with matching (issue 13, cycle A).
   */
  async lockForChange(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    const row = await this.lockOrderRow(tx, white_label_id, deposit_id);
    if (row) await this.lockWithdrawalsAndFeedsOf(tx, row);
    return row;
  }

  /**
   * `lockForChange` for a change of the order and its legs alone that writes only the depositor's events
   * (a slip received, or attached to a review): the order, then the depositor's feed, with the legs read in
   * the feed-lock statement (its snapshot follows the order's lock, under which alone the legs change). The
   * withdrawals the legs name and their owners' feeds are not locked: such a change touches neither, and the
   * lock order lets a transaction skip ranks, never go back to one. The transaction may not widen the change
   * afterwards (`lockWithdrawalsAndFeedsOf` asserts it), since its withdrawal locks would then come after its feed.
   * A transaction that locked the order for a wider change first (the slip consumer's one transaction, which
   * receives a slip and settles it) holds every lock this takes, in order, and may go on to any other change.
   */
  async lockForOwnChange(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositRow | null> {
    const row = await this.lockOrderRow(tx, white_label_id, deposit_id);
    if (!row) return null;
    const key = repository.orderRowKey(white_label_id, deposit_id);
    if (LOCKED_FOR_WIDE_CHANGE.has(tx, key)) return row;
    LOCKED_FOR_OWN_CHANGE.set(tx, key, true);
    const readLegs = repository.knownLegs(tx, white_label_id, deposit_id) === null;
    const answers = await this.deps.events.lockFeedsAndRead(tx, white_label_id, [row.merchant_id], row.livemode, readLegs ? [repository.legsPart(white_label_id, deposit_id)] : []);
    if (readLegs) repository.keepLegs(tx, white_label_id, deposit_id, answers[0] as DepositLegRow[]);
    return row;
  }

  /**
   * The withdrawal and feed locks of `lockForChange`. `carry` names reads that the feed-lock statement
   * sends along (src/platform/read-part.ts), answered in their order: it is called once the withdrawals are
   * locked, since some reads are offered only for orders the transaction holds.
   */
  async lockWithdrawalsAndFeedsOf(tx: Queryable, row: DepositRow, carry: (legs: DepositLegRow[]) => readonly ReadPart<unknown>[] = () => []): Promise<unknown[]> {
    // The withdrawals come before the feeds in the lock order: after `lockForOwnChange`, locking them would wait out of order.
    const key = repository.orderRowKey(row.white_label_id, row.deposit_id);
    invariant(!LOCKED_FOR_OWN_CHANGE.has(tx, key), 'an order locked for its own change is not locked for a wider one');
    const { legs, owners, unconfirmed } = await this.lockWithdrawalsOf(tx, row);
    const parts = carry(legs);
    // Legs read before the order's lock was granted are read again here, after it, and must be the same.
    const answers = await this.deps.events.lockFeedsAndRead(tx, row.white_label_id, [row.merchant_id, ...owners], row.livemode, unconfirmed ? [...parts, repository.legsPart(row.white_label_id, row.deposit_id)] : parts);
    if (unconfirmed) {
      const current = answers.pop() as DepositLegRow[];
      if (JSON.stringify(current) !== JSON.stringify(legs)) throw new LegsChangedMeanwhile();
      repository.keepLegs(tx, row.white_label_id, row.deposit_id, current);
    }
    LOCKED_FOR_WIDE_CHANGE.set(tx, key, true);
    return answers;
  }

  /**
   * The order's legs and the withdrawals they name, locked. Legs the transaction has not read yet are read
   * in the statement that locks those withdrawals, which names them through the legs (the legs change only
   * under the order's lock, which an earlier statement of the transaction took, so its snapshot sees them as
   * they are); legs it knows already name the withdrawals to lock themselves.
   */
  async lockWithdrawalsOf(tx: Queryable, row: DepositRow): Promise<{ legs: DepositLegRow[]; owners: string[]; unconfirmed?: true }> {
    const known = repository.knownLegs(tx, row.white_label_id, row.deposit_id);
    const unconfirmed = known === null ? UNCONFIRMED_LEGS.take(tx, repository.orderRowKey(row.white_label_id, row.deposit_id)) : { found: false as const };
    if (unconfirmed.found) {
      // The settlement lock read locked the withdrawals these legs name: locking them again costs nothing.
      const withdrawals = unconfirmed.value.flatMap((leg) => (leg.withdrawal_id ? [leg.withdrawal_id] : []));
      return { legs: unconfirmed.value, owners: await this.deps.withdrawals.lockOrdersOf(tx, row.white_label_id, withdrawals), unconfirmed: true };
    }
    if (known === null && repository.holdsOrder(tx, row.white_label_id, row.deposit_id)) {
      const locked = await this.deps.withdrawals.lockOrdersNamedBy(tx, row.white_label_id, repository.legWithdrawalIdsPart(row.white_label_id, row.deposit_id), [
        repository.legsPart(row.white_label_id, row.deposit_id),
      ]);
      const legs = locked.carried[0] as DepositLegRow[];
      repository.keepLegs(tx, row.white_label_id, row.deposit_id, legs);
      return { legs, owners: locked.owners };
    }
    const legs = known ?? (await repository.listLegs(tx, row.white_label_id, row.deposit_id));
    const withdrawals = legs.flatMap((leg) => (leg.withdrawal_id ? [leg.withdrawal_id] : []));
    return { legs, owners: await this.deps.withdrawals.lockOrdersOf(tx, row.white_label_id, withdrawals) };
  }

  /**
   * The order's lock as a read that the slip consumer's head-receipt statement carries (the receipt comes
   * before the order in the lock order, and the statement takes them in that order): `lockForSlip` and every
   * later lock of the order in the transaction then cost no round trip.
   */
  orderLockRead(white_label_id: string, deposit_id: string): PlannedRead<CarriedOrderLock> {
    const part = repository.lockOrderInBrandPart(white_label_id, deposit_id);
    return new PlannedRead({ ...part, parse: (value) => mapNullable(part.parse(value), (order) => ({ order, legs: null })) });
  }

  /**
   * `orderLockRead` for a transaction that goes on to settle the order (the slip consumer's decision): the
   * statement also locks the withdrawals the order's legs name, after the order (`lockOrderWithLegsPart`), so
   * that the settlement's next statement is the feeds'. The legs it reads for that are confirmed by the
   * feed-lock statement (`lockWithdrawalsAndFeedsOf`); should they have changed while the order's lock was
   * waited for, the transaction fails with `LegsChangedMeanwhile` before it changes anything.
   */
  settlementLockRead(white_label_id: string, deposit_id: string): PlannedRead<CarriedOrderLock> {
    const part = repository.lockOrderWithLegsPart(white_label_id, deposit_id, (ids) => this.deps.withdrawals.lockOrdersNamedByPart(white_label_id, ids));
    return new PlannedRead({ ...part, parse: (value) => mapNullable(part.parse(value), ({ order, legs, named }) => ({ order, legs: { legs, named } })) });
  }

  /**
   * The order's row lock (`repository.lockOrderInBrand`), for every lock of a change of the order. With `carried`,
   * the lock an earlier statement of the transaction carried for it (`orderLockRead`, `settlementLockRead`) is
   * kept first (`keepCarriedLocks`), so that the order's lock comes from there.
   */
  lockOrderRow(tx: Queryable, white_label_id: string, deposit_id: string, carried: PlannedRead<CarriedOrderLock> | null = null): Promise<DepositRow | null> {
    if (carried !== null) this.keepCarriedLocks(tx, white_label_id, deposit_id, carried);
    return repository.lockOrderInBrand(tx, white_label_id, deposit_id);
  }

  /**
   * Keeps what a carried lock of the order answered, once: the order's lock for `lockOrderInBrand`, and for a
   * settlement lock read the withdrawals' locks for their module and the legs, unconfirmed, for `lockWithdrawalsOf`.
   */
  private keepCarriedLocks(tx: Queryable, white_label_id: string, deposit_id: string, carried: PlannedRead<CarriedOrderLock>): void {
    const taken = carried.take();
    if (!taken.found || taken.value === null) return;
    const { order, legs } = taken.value;
    invariant(order.white_label_id === white_label_id && order.deposit_id === deposit_id, 'a carried lock is of the order it is kept for');
    repository.keepLockedOrder(tx, order);
    if (legs === null || !isUnitOfWork(tx)) return;
    this.deps.withdrawals.keepLockedOrders(tx, legs.named);
    UNCONFIRMED_LEGS.set(tx, repository.orderRowKey(white_label_id, deposit_id), legs.legs);
  }
}
