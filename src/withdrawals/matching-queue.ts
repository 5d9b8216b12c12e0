import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import type { ReadPart } from '../platform/read-part.ts';
import type { Payee } from '../beneficiaries/service.ts';
import type { WithdrawalDependencies } from './dependencies.ts';
import * as repository from './repository.ts';
import type { WithdrawalRow } from './types.ts';
import { accountOf, type LegReservation, type MatchableWithdrawal } from './views.ts';

/** What the matching queue is asked for (`findMatchable`). */
export interface FindMatchableInput {
  white_label_id: string;
  livemode: boolean;
  amount_minor: number;
  exclude_merchant_id: string | null;
  limit?: number;
  largest_first?: boolean;
}

/**
 * The orders as the deposit side finds and locks them: the matching queue of live orders, the payees its
 * legs pay, and the locks a deposit change takes on the orders its legs name, in the lock order
 * (src/platform/lock-order.ts). None of these changes an order.
 */
export class WithdrawalMatchingQueue {
  constructor(private readonly deps: WithdrawalDependencies) {}

  /**
   * Live orders of the brand and environment that can take a leg of at least `amount_minor` now,
   * oldest first (or largest remaining first, for splitting a deposit into few legs), locked with
   * SKIP LOCKED for the caller's transaction. `exclude_merchant_id` keeps a merchant from paying itself.
   */
  async findMatchable(
    tx: Queryable,
    input: FindMatchableInput,
    /** The caller's reads that ride on the candidate statement, parsed from the first candidate's row when one is found (src/platform/read-part.ts). */
    carried: readonly ReadPart<unknown>[] = [],
  ): Promise<MatchableWithdrawal[]> {
    const rows = await repository.lockMatchable(
      tx,
      {
        ...input,
        largest_first: input.largest_first ?? false,
        now: this.deps.clock.now(),
        limit: Math.min(Math.max(input.limit ?? 1, 1), 50),
      },
      carried,
    );
    return rows.map((row) => ({ id: row.withdrawal_id, merchant_id: row.merchant_id, remaining_minor: row.remaining_minor, beneficiary_id: row.beneficiary_id }));
  }

  /** The payee of a reservation just made: its order's beneficiary, without reading the leg again. */
  async payeeOfReservation(tx: Queryable, scope: { white_label_id: string; livemode: boolean }, reservation: Pick<LegReservation, 'merchant_id' | 'beneficiary_id'>): Promise<Payee | null> {
    return this.deps.beneficiaries.payee(tx, { white_label_id: scope.white_label_id, merchant_id: reservation.merchant_id, livemode: scope.livemode }, reservation.beneficiary_id);
  }

  /**
   * `payeeOfReservation` as a read another module's statement carries (src/platform/read-part.ts): matching
   * reads the payees of the orders it is about to reserve with the event feeds it locks.
   */
  payeeOfReservationPart(scope: { white_label_id: string; livemode: boolean }, reservation: Pick<LegReservation, 'merchant_id' | 'beneficiary_id'>): ReadPart<Payee | null> {
    return this.deps.beneficiaries.payeePart({ white_label_id: scope.white_label_id, merchant_id: reservation.merchant_id, livemode: scope.livemode }, reservation.beneficiary_id);
  }

  /**
   * `destinationOf` as a read another module's statement carries (src/platform/read-part.ts), for a leg of
   * an order this transaction holds locked (a deposit change locks the withdrawals its legs name before
   * their feeds): the order's copy names its owner and beneficiary, so the leg's owner is not read first.
   * Null when the order is not held. The part answers `undefined` when the leg is not of that order, and the
   * caller asks `destinationOf` then.
   */
  destinationPart(tx: Queryable, white_label_id: string, withdrawal_id: string, leg_ref: string): ReadPart<Payee | null | undefined> | null {
    const order = repository.heldOrder(tx, white_label_id, withdrawal_id);
    if (!order) return null;
    const part = repository.legOfOrderWith(white_label_id, withdrawal_id, leg_ref, this.deps.beneficiaries.payeePart(accountOf(order), order.beneficiary_id));
    return {
      ...part,
      parse: (value) => {
        const answer = part.parse(value);
        if (!answer.leg_of_order) return undefined;
        invariant(answer.carried, 'an order keeps its beneficiary');
        return answer.carried;
      },
    };
  }

  /** The payee of a leg, for the payment instructions the deposit side shows its payer. */
  async destinationOf(tx: Queryable, white_label_id: string, leg_ref: string): Promise<Payee | null> {
    const owner = await repository.findLegOwner(tx, white_label_id, leg_ref);
    if (!owner) return null;
    const payee = await this.deps.beneficiaries.payee(tx, owner, owner.beneficiary_id);
    invariant(payee, 'an order keeps its beneficiary');
    return payee;
  }

  /**
   * Locks these orders (withdrawal-id order) and returns their owners, whose event feeds a deposit that
   * touches them writes to: a deposit change takes them after its own row and before those feeds
   * (src/platform/lock-order.ts), as every path of this module locks an order before its merchant's feed.
   */
  lockOrdersOf(tx: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
    return repository.lockOrdersOf(tx, white_label_id, withdrawal_ids);
  }

  /**
   * `lockOrdersOf` for orders another module's read names (their ids as a JSON array), with that module's
   * reads carried in the same statement (src/withdrawals/repository.ts `lockOrdersNamedBy`): a deposit change
   * names its withdrawals through its legs, which it reads in the statement that locks them.
   */
  lockOrdersNamedBy(tx: Queryable, white_label_id: string, ids: ReadPart<unknown>, carried: readonly ReadPart<unknown>[]): Promise<{ owners: string[]; carried: unknown[] }> {
    return repository.lockOrdersNamedBy(tx, white_label_id, ids, carried);
  }

  /**
   * `lockOrdersNamedBy` as a read that another module's statement carries after an earlier lock of the lock
   * order (src/withdrawals/repository.ts `lockOrdersNamedByPart`): the rows it answers are handed back with
   * `keepLockedOrders` in the same transaction, which then holds those orders as if this module had locked them.
   */
  lockOrdersNamedByPart(white_label_id: string, ids: ReadPart<unknown>): ReadPart<WithdrawalRow[]> {
    return repository.lockOrdersNamedByPart(white_label_id, ids);
  }

  /** Remembers orders that a carried read locked for this transaction (`lockOrdersNamedByPart`). */
  keepLockedOrders(tx: Queryable, rows: readonly WithdrawalRow[]): void {
    repository.keepLockedOrders(tx, rows);
  }

  /** The merchants owning these orders (read without a lock). */
  merchantsOf(db: Queryable, white_label_id: string, withdrawal_ids: readonly string[]): Promise<string[]> {
    return repository.merchantsOf(db, white_label_id, withdrawal_ids);
  }
}
