import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { holdsLock } from '../platform/unit-of-work.ts';
import { PlannedRead, type ReadPart } from '../platform/read-part.ts';
import { newId } from '../platform/ids.ts';
import type { EventCause } from '../platform/cause.ts';
import { cancelJobsByKey, scheduleJob, unscheduleJob, type JobSpec } from '../jobs/index.ts';
import type { PostInput } from '../ledger/service.ts';
import { recognizeFee, recognizeFill } from '../fees/service.ts';
import type { WithdrawalCreation } from './creation.ts';
import type { WithdrawalDependencies } from './dependencies.ts';
import { AUTO_CONFIRM_FILL_TASK, autoConfirmJob, EXPIRE_WITHDRAWAL_TASK, FILL_AUTO_CONFIRM_MS } from './jobs.ts';
import * as repository from './repository.ts';
import * as refundsRepository from './refunds-repository.ts';
import { ORDER_SOURCE, type OrderTransitions } from './transitions.ts';
import type { WithdrawalLegRow, WithdrawalRow } from './types.ts';
import { accountOf, fillView, legReservation, withdrawalView, type FillOutcome, type FillReversalOutcome, type LegReservation, type WithdrawalView } from './views.ts';

/** A reservation of part of an order for one deposit leg (`reserveLeg`). */
export interface ReserveLegInput {
  white_label_id: string;
  livemode: boolean;
  withdrawal_id: string;
  deposit_id: string;
  deposit_leg_key: string;
  amount_minor: number;
  cause: EventCause;
  /**
   * True when the caller minted `deposit_leg_key` for this call, so that no leg can hold it yet: an order
   * the matching queue read and locked in this transaction is then reserved as that read answered it.
   */
  deposit_leg_key_is_new?: boolean;
}

/** The release of a reserved leg that its deposit did not pay (`releaseLeg`). */
export interface ReleaseLegInput {
  white_label_id: string;
  leg_ref: string;
  reason_code: string;
  cause: EventCause;
}

/** The fill of a reserved leg (`recordFill`); `amount_minor` below the leg's amount is a short payment. */
export interface RecordFillInput {
  white_label_id: string;
  leg_ref: string;
  amount_minor?: number;
  cause: EventCause;
}

/** The reversal of a fill whose paying deposit was reversed (`reverseFill`). */
export interface ReverseFillInput {
  white_label_id: string;
  leg_ref: string;
  reason_code: string;
  cause: EventCause;
}

/** The movement keys of a leg's fill, which make it happen once: its payout and its share of the fee (`recordFill`). */
function fillMovementKeys(leg_ref: string): { payout: string; fee: string } {
  return { payout: `withdrawal_settled:${leg_ref}`, fee: `fee:${leg_ref}` };
}

/**
 * The legs and fills of orders: the functions the deposit side calls to pay an order in chunks, which are
 * the only way an order's amounts change. Each is atomic in the caller's transaction and idempotent.
 */
/** What filling some legs reads, planned ahead of the statement that carries it (`WithdrawalLegs.fillReads`). */
export interface FillReads {
  white_label_id: string;
  legs: readonly { leg_ref: string; read: PlannedRead<WithdrawalLegRow | null> }[];
  next_fills: readonly { withdrawal_id: string; read: PlannedRead<number> }[];
  /** The reads as a statement carries them, in that order. */
  parts: readonly ReadPart<unknown>[];
}

export class WithdrawalLegs {
  constructor(
    private readonly deps: WithdrawalDependencies,
    private readonly transitions: OrderTransitions,
    /** Creates the replacement order of a reversed fill of a settled order. */
    private readonly creation: WithdrawalCreation,
  ) {}

  /**
   * Reserves `amount_minor` of an order for one deposit leg (`deposit_leg_key` is the deposit side's
   * key of that leg, and makes the call idempotent). Refused with `withdrawal_state_conflict` when the
   * order is not live, expired, has too little remaining or no split left.
   */
  async reserveLeg(tx: Queryable, input: ReserveLegInput): Promise<Result<LegReservation>> {
    invariant(Number.isSafeInteger(input.amount_minor) && input.amount_minor > 0, 'a leg amount is a positive safe integer');
    // An order the matching queue read and locked in this transaction, unwritten since, is what a new read
    // would answer (the row lock holds it), and a new key has no leg to find: it is not read again. Another
    // order this transaction locked is read with its legs in one statement; any other is locked first, and
    // its legs read after the lock, so that both see every leg committed before.
    const candidate = input.deposit_leg_key_is_new === true ? repository.takeCandidate(tx, input.white_label_id, input.withdrawal_id) : null;
    const held = candidate
      ? { row: candidate.row, existing_leg_ref: null, reserved_legs: candidate.reserved_legs }
      : holdsLock(tx, repository.orderRowKey(input.white_label_id, input.withdrawal_id))
        ? await repository.readHeldOrderForReservation(tx, input.white_label_id, input.withdrawal_id, input.deposit_leg_key)
        : null;
    const row = held ? held.row : await repository.lockOrderInBrand(tx, input.white_label_id, input.withdrawal_id);
    if (!row || row.livemode !== input.livemode) return fail('withdrawal_state_conflict', { details: { reason: 'not_found' } });
    const { existing_leg_ref, reserved_legs: reservedLegs } = held ?? (await repository.legsOfReservation(tx, input.white_label_id, input.withdrawal_id, input.deposit_leg_key));
    const existing = existing_leg_ref ? await repository.findLeg(tx, input.white_label_id, existing_leg_ref) : null;
    if (existing) {
      invariant(
        existing.withdrawal_id === input.withdrawal_id && existing.reserved_amount_minor === input.amount_minor,
        `deposit leg ${input.deposit_leg_key} was reserved with other terms`,
      );
      return ok(legReservation(existing, row));
    }
    const refuse = (reason: string) => fail<LegReservation>('withdrawal_state_conflict', { details: { reason, withdrawal_id: row.withdrawal_id } });
    if (row.status !== 'open' && row.status !== 'partially_filled') return refuse('not_open');
    // A candidate of the matching queue is judged at the instant its statement found it live: the order
    // has been locked since, so no expiry can have run on it, and the match that chose it must be able to
    // reserve it (an order expiring in the milliseconds between the two answered 500 in the chaos run).
    const expiry_checked_at = candidate ? candidate.read_at : this.deps.clock.now();
    if (row.expires_at.getTime() <= expiry_checked_at.getTime()) return refuse('expired');
    if (row.remaining_minor < input.amount_minor) return refuse('insufficient_remaining');
    if (row.settled_splits + reservedLegs >= row.max_splits) return refuse('max_splits_reached');

    const now = this.deps.clock.now();
    const leg: WithdrawalLegRow = {
      ...accountOf(row),
      withdrawal_id: row.withdrawal_id,
      leg_ref: newId('withdrawal_leg'),
      deposit_leg_key: input.deposit_leg_key,
      deposit_id: input.deposit_id,
      amount_minor: input.amount_minor,
      reserved_amount_minor: input.amount_minor,
      status: 'reserved',
      sequence: null,
      fee_recognized_minor: null,
      settled_at: null,
      balance_transaction_id: null,
      fee_balance_transaction_id: null,
      auto_confirm_at: null,
      receipt_state: null,
      release_reason_code: null,
      reversal_reason_code: null,
      replacement_withdrawal_id: null,
      created_at: now,
      updated_at: now,
    };
    await repository.insertLeg(tx, leg);
    const moved = await this.transitions.apply(tx, {
      before: row,
      after: { ...row, version: row.version + 1, reserved_minor: row.reserved_minor + leg.amount_minor, remaining_minor: row.remaining_minor - leg.amount_minor, updated_at: now },
      trigger: 'leg_reserved',
      cause: input.cause,
      event_extra: { leg: { leg_ref: leg.leg_ref, amount_minor: leg.amount_minor } },
    });
    if (!moved.ok) return moved;
    return ok(legReservation(leg, row));
  }

  /**
   * Locks the order of a leg found without its lock, and the leg as it is under that lock: read again,
   * unless the transaction held the order's lock already when it found the leg (a deposit locks the
   * withdrawals its legs name before it fills or releases them), since the leg cannot have moved then.
   */
  private async lockLegOrder(tx: Queryable, white_label_id: string, found: WithdrawalLegRow): Promise<{ leg: WithdrawalLegRow; order: WithdrawalRow }> {
    const heldBefore = holdsLock(tx, repository.orderRowKey(white_label_id, found.withdrawal_id));
    const order = await repository.lockOrderInBrand(tx, white_label_id, found.withdrawal_id);
    invariant(order, 'a leg belongs to an order');
    const leg = heldBefore ? found : await repository.findLeg(tx, white_label_id, found.leg_ref);
    invariant(leg, 'a leg does not disappear');
    return { leg, order };
  }

  /**
   * Releases a reserved leg (the deposit did not pay): its amount returns to the order's remaining.
   * Releasing a released leg returns it again; a filled or reversed leg answers `alloc_state_conflict`.
   * An order past its expiry with nothing left in transfer closes here as `expired`.
   */
  async releaseLeg(tx: Queryable, input: ReleaseLegInput): Promise<Result<LegReservation>> {
    const found = await repository.findLeg(tx, input.white_label_id, input.leg_ref);
    if (!found) return fail('alloc_state_conflict', { details: { reason: 'not_found' } });
    const { leg, order: row } = await this.lockLegOrder(tx, input.white_label_id, found);
    if (leg.status === 'released') return ok(legReservation(leg, row));
    if (leg.status !== 'reserved') return fail('alloc_state_conflict', { details: { reason: leg.status, leg_ref: leg.leg_ref } });
    const now = this.deps.clock.now();
    const releasedLeg: WithdrawalLegRow = { ...leg, status: 'released', release_reason_code: input.reason_code, updated_at: now };
    await repository.updateLockedLeg(tx, releasedLeg, 'reserved');
    const after: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      reserved_minor: row.reserved_minor - leg.amount_minor,
      remaining_minor: row.remaining_minor + leg.amount_minor,
      updated_at: now,
    };
    const extra = { leg: { leg_ref: leg.leg_ref, amount_minor: leg.amount_minor, reason_code: input.reason_code } };
    const moved = this.dueToClose(after)
      ? await this.transitions.close(tx, row, after, { status: 'expired', trigger: 'leg_released', reason_code: 'expired', closed_by: 'system' }, input.cause, extra)
      : await this.transitions.apply(tx, { before: row, after, trigger: 'leg_released', cause: input.cause, event_extra: extra });
    if (!moved.ok) return moved;
    return ok(legReservation(releasedLeg, row));
  }

  /**
   * Records the fill of a reserved leg: the chunk leaves the wallet's reserved bucket
   * (`withdrawal_settled`) with its share of the fee (`fee`), the order's amounts move, and
   * `withdrawal.filled` carries the fill with `auto_confirm_at` 3 hours on (a durable job then assumes
   * receipt). `amount_minor` below the leg's amount is a short payment: the rest returns to remaining.
   * Recording a fill again returns the first one; a released leg answers `alloc_state_conflict`.
   */
  async recordFill(tx: Queryable, input: RecordFillInput): Promise<Result<FillOutcome>> {
    const found = await repository.findLeg(tx, input.white_label_id, input.leg_ref);
    if (!found) return fail('alloc_state_conflict', { details: { reason: 'not_found' } });
    const { leg, order: row } = await this.lockLegOrder(tx, input.white_label_id, found);
    if (leg.status === 'filled') return ok({ fill: fillView(leg, false), withdrawal: withdrawalView(row) });
    if (leg.status !== 'reserved') return fail('alloc_state_conflict', { details: { reason: leg.status, leg_ref: leg.leg_ref } });
    const paid = input.amount_minor ?? leg.amount_minor;
    invariant(Number.isSafeInteger(paid) && paid > 0 && paid <= leg.amount_minor, 'a fill pays between 1 satang and its leg amount');

    const now = this.deps.clock.now();
    const account = accountOf(row);
    const feeShare = recognizeFill(row.fee_total_minor, row.amount_total_minor, row.filled_minor, paid);
    // The payout and its fee leave the wallet in one post: one lock of the wallet and one lookup of both keys.
    const source = { type: ORDER_SOURCE, id: row.withdrawal_id };
    const keys = fillMovementKeys(leg.leg_ref);
    const movements: PostInput[] = [
      { account, type: 'withdrawal_settled', amount_minor: paid, bucket_from: 'reserved', bucket_to: null, movement_key: keys.payout, source, cause: input.cause },
    ];
    if (feeShare > 0) {
      movements.push({ account, type: 'fee', amount_minor: feeShare, bucket_from: 'reserved', bucket_to: null, movement_key: keys.fee, source, cause: input.cause });
    }
    const [settled, fee] = await this.deps.ledger.postAll(tx, movements);
    invariant(settled?.ok, 'a payout from reserved cannot be refused');
    let feeMovementId: string | null = null;
    if (fee) {
      invariant(fee.ok, 'a fee from reserved cannot be refused');
      feeMovementId = fee.value.id;
    }
    const filledLeg: WithdrawalLegRow = {
      ...leg,
      amount_minor: paid,
      status: 'filled',
      sequence: await repository.nextFillSequence(tx, row.white_label_id, row.withdrawal_id),
      fee_recognized_minor: feeShare,
      settled_at: now,
      balance_transaction_id: settled.value.id,
      fee_balance_transaction_id: feeMovementId,
      auto_confirm_at: new Date(now.getTime() + FILL_AUTO_CONFIRM_MS),
      receipt_state: 'awaiting_confirmation',
      updated_at: now,
    };
    await repository.updateLockedLeg(tx, filledLeg, 'reserved');
    invariant(filledLeg.amount_minor === paid, 'a fill records what was paid');

    const filled = row.filled_minor + paid;
    const base: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      filled_minor: filled,
      reserved_minor: row.reserved_minor - leg.amount_minor,
      remaining_minor: row.remaining_minor + (leg.amount_minor - paid),
      fee_recognized_minor: row.fee_recognized_minor + feeShare,
      settled_splits: row.settled_splits + 1,
      status: 'partially_filled',
      updated_at: now,
    };
    const fill = fillView(filledLeg, false);
    const jobs = [autoConfirmJob(filledLeg)];
    let moved: Result<WithdrawalView>;
    if (base.remaining_minor === 0 && base.reserved_minor === 0) {
      // Queued: nothing here reads whether the deadline job was still pending.
      await unscheduleJob(tx, `${EXPIRE_WITHDRAWAL_TASK}:${row.withdrawal_id}`);
      moved = await this.transitions.apply(tx, {
        before: row,
        after: { ...base, status: 'settled', refunded_minor: 0, closed_at: now },
        trigger: 'fill',
        cause: input.cause,
        jobs,
        event_extra: { fill },
      });
    } else if (this.dueToClose(base)) {
      moved = await this.transitions.close(tx, row, base, { status: 'expired', trigger: 'fill', reason_code: 'expired', closed_by: 'system' }, input.cause, { fill });
      if (moved.ok) await this.enqueue(tx, jobs);
    } else {
      moved = await this.transitions.apply(tx, { before: row, after: base, trigger: 'fill', cause: input.cause, jobs, event_extra: { fill } });
    }
    if (!moved.ok) return moved;
    return ok({ fill, withdrawal: moved.value });
  }

  private async enqueue(tx: Queryable, jobs: JobSpec[]): Promise<void> {
    for (const job of jobs) await scheduleJob(tx, this.deps.clock, job);
  }

  /**
   * Reverses a fill (the paying deposit was reversed, so the beneficiary did not keep the chunk). The
   * chunk and the fee it no longer earns come back into the wallet (`reversal` movements that point at
   * the fill's payout). A live order takes the chunk back into remaining and is matched again; a
   * closed order returns it and its fee to available (added to `refunded_minor`; `remaining_minor` stays 0),
   * and a settled one gets a replacement order for it
   * (`replacement_of_withdrawal_id`, no second fee) when the balance covers it. Idempotent by leg.
   */
  async reverseFill(tx: Queryable, input: ReverseFillInput): Promise<Result<FillReversalOutcome>> {
    const found = await repository.findLeg(tx, input.white_label_id, input.leg_ref);
    if (!found) return fail('alloc_state_conflict', { details: { reason: 'not_found' } });
    const { leg, order: row } = await this.lockLegOrder(tx, input.white_label_id, found);
    if (leg.status === 'reversed') return ok({ withdrawal: withdrawalView(row), replacement_withdrawal_id: leg.replacement_withdrawal_id });
    if (leg.status !== 'filled') return fail('alloc_state_conflict', { details: { reason: leg.status, leg_ref: leg.leg_ref } });
    invariant(leg.balance_transaction_id, 'a fill has its payout movement');
    invariant(row.status !== 'pending_approval' && row.status !== 'rejected' && row.status !== 'open', 'a filled leg belongs to an order with fills');

    const now = this.deps.clock.now();
    const account = accountOf(row);
    const live = row.status === 'partially_filled';
    const filled = row.filled_minor - leg.amount_minor;
    // Recognition stays pro rata on what is still paid out, so a later fill cannot over-recognise.
    const recognized = recognizeFee(row.fee_total_minor, row.amount_total_minor, filled);
    const feeBack = row.fee_recognized_minor - recognized;
    invariant(feeBack >= 0, 'a reversal never recognises more fee');
    const into = live ? 'reserved' : 'available';
    // The chunk and the fee it no longer earns come back in one post: one lock of the wallet and one lookup of both keys.
    const source = { type: ORDER_SOURCE, id: row.withdrawal_id };
    const movements: PostInput[] = [
      {
        account,
        type: 'reversal',
        amount_minor: leg.amount_minor,
        bucket_from: null,
        bucket_to: into,
        movement_key: `reversal:${leg.balance_transaction_id}`,
        source,
        reverses_balance_transaction_id: leg.balance_transaction_id,
        reason_code: input.reason_code,
        cause: input.cause,
      },
    ];
    if (feeBack > 0) {
      movements.push({
        account,
        type: 'reversal',
        amount_minor: feeBack,
        bucket_from: null,
        bucket_to: into,
        movement_key: `fee_reversal:${leg.leg_ref}`,
        source,
        reverses_balance_transaction_id: leg.fee_balance_transaction_id ?? leg.balance_transaction_id,
        reason_code: input.reason_code,
        cause: input.cause,
      });
    }
    const [principal, fee] = await this.deps.ledger.postAll(tx, movements);
    invariant(principal?.ok, 'a credit cannot be refused');
    if (fee) invariant(fee.ok, 'a credit cannot be refused');

    let after: WithdrawalRow = {
      ...row,
      version: row.version + 1,
      filled_minor: filled,
      fee_recognized_minor: recognized,
      settled_splits: row.settled_splits - 1,
      updated_at: now,
    };
    if (live) {
      after = { ...after, status: filled > 0 ? 'partially_filled' : 'open', remaining_minor: row.remaining_minor + leg.amount_minor };
    } else {
      // A closed order has nothing open: the chunk and its fee went back to available, so they are returned
      // to the balance and `refunded_minor` grows by exactly the two credits.
      const credited = principal.value.amount_minor + (fee?.ok ? fee.value.amount_minor : 0);
      invariant(credited === leg.amount_minor + feeBack, `${row.withdrawal_id}: the reversal credits are the chunk and its fee`);
      invariant(row.refunded_minor !== null, 'a closed order has its refund');
      after = { ...after, refunded_minor: row.refunded_minor + credited };
    }

    // A closed refund's reversed chunk never reached the payer: its claim on the deposit goes back (a replacement
    // below takes it again). After the wallets: the lock order.
    if (!live && row.refund_of_deposit_id !== null) {
      await refundsRepository.adjustRefundCommitment(tx, row.white_label_id, row.refund_of_deposit_id, -leg.amount_minor, now);
    }
    let replacementId: string | null = null;
    if (row.status === 'settled') {
      const replacement = await this.creation.create(
        tx,
        account,
        {
          amount_minor: leg.amount_minor,
          merchant_reference: `rpl_${leg.leg_ref}`.slice(0, 64),
          end_user_ref: row.end_user_ref,
          beneficiary_id: row.beneficiary_id,
          ...(row.metadata ? { metadata: row.metadata } : {}),
        },
        input.cause,
        { replacement_of_withdrawal_id: row.withdrawal_id, ...(row.refund_of_deposit_id !== null ? { refund_replaced: row } : {}) },
      );
      // Without the balance (a debt on available) the money stays in available for the merchant to decide.
      if (replacement.ok) replacementId = replacement.value.id;
    }

    const reversedLeg: WithdrawalLegRow = {
      ...leg,
      status: 'reversed',
      receipt_state: 'reversed',
      reversal_reason_code: input.reason_code,
      replacement_withdrawal_id: replacementId,
      updated_at: now,
    };
    await repository.updateLockedLeg(tx, reversedLeg, 'filled');
    await cancelJobsByKey(tx, `${AUTO_CONFIRM_FILL_TASK}:${leg.leg_ref}`);

    const extra = {
      fill: { ...fillView(leg, false), receipt_state: 'reversed', reason_code: input.reason_code },
      replacement_withdrawal_id: replacementId,
    };
    let moved: Result<WithdrawalView>;
    if (live && this.dueToClose(after)) {
      moved = await this.transitions.close(tx, row, after, { status: 'expired', trigger: 'fill_reversed', reason_code: 'expired', closed_by: 'system' }, input.cause, extra);
    } else {
      moved = await this.transitions.apply(tx, { before: row, after, trigger: 'fill_reversed', cause: input.cause, event_extra: extra });
    }
    if (!moved.ok) return moved;
    return ok({ withdrawal: moved.value, replacement_withdrawal_id: replacementId });
  }

  /**
   * The auto-confirm job: receipt of a fill is assumed 3 hours after it settled unless it was
   * disputed or reversed meanwhile. `receipt_state` belongs to the fill, not to the versioned order,
   * so this changes neither the order's version nor writes an event.
   */
  async autoConfirmFill(tx: Queryable, white_label_id: string, leg_ref: string): Promise<boolean> {
    const found = await repository.findLeg(tx, white_label_id, leg_ref);
    if (!found) return false;
    await repository.lockOrderInBrand(tx, white_label_id, found.withdrawal_id);
    const leg = await repository.findLeg(tx, white_label_id, leg_ref);
    if (!leg || leg.status !== 'filled' || leg.receipt_state !== 'awaiting_confirmation' || !leg.auto_confirm_at) return false;
    if (leg.auto_confirm_at.getTime() > this.deps.clock.now().getTime()) return false;
    return repository.updateLeg(tx, { ...leg, receipt_state: 'confirmed', updated_at: this.deps.clock.now() }, 'filled');
  }

  /** True when a live order has passed its expiry with nothing in transfer: it must close now. */
  private dueToClose(row: WithdrawalRow): boolean {
    return (
      (row.status === 'open' || row.status === 'partially_filled') &&
      row.reserved_minor === 0 &&
      row.remaining_minor > 0 &&
      row.expires_at.getTime() <= this.deps.clock.now().getTime()
    );
  }

  /**
   * What filling these legs reads (each leg, and its order's next fill number), planned for another module's
   * statement to carry (src/platform/read-part.ts) and handed back with `keepFillReads`, for `recordFill` to
   * take later in the transaction. Only for orders this transaction holds locked: their legs cannot move under
   * that lock, and a write of one of them here forgets what was read.
   */
  fillReads(tx: Queryable, white_label_id: string, legs: readonly { withdrawal_id: string; leg_ref: string }[]): FillReads {
    const held = legs.filter((leg) => holdsLock(tx, repository.orderRowKey(white_label_id, leg.withdrawal_id)));
    const orders = [...new Set(held.map((leg) => leg.withdrawal_id))];
    const legReads = held.map((leg) => ({ leg_ref: leg.leg_ref, read: new PlannedRead(repository.legPart(white_label_id, leg.leg_ref)) }));
    const nextFills = orders.map((withdrawal_id) => ({ withdrawal_id, read: new PlannedRead(repository.nextFillSequencePart(white_label_id, withdrawal_id)) }));
    return { white_label_id, legs: legReads, next_fills: nextFills, parts: [...legReads.map(({ read }) => read.part), ...nextFills.map(({ read }) => read.part)] };
  }

  /** Keeps what the statement that carried `fillReads` answered, for the fills that follow in the transaction. */
  keepFillReads(tx: Queryable, reads: FillReads): void {
    const legs = reads.legs.flatMap(({ leg_ref, read }) => {
      const taken = read.take();
      return taken.found ? [{ leg_ref, row: taken.value }] : [];
    });
    const nextFills = reads.next_fills.flatMap(({ withdrawal_id, read }) => {
      const taken = read.take();
      return taken.found ? [{ withdrawal_id, next: taken.value }] : [];
    });
    repository.keepHeldLegReads(tx, reads.white_label_id, { legs, next_fills: nextFills });
  }

  /**
   * The wallets that filling these legs posts on (each leg's order's owner), with the movement keys `recordFill`
   * looks up there, for a lock of the wallets taken ahead of the fills (`LedgerService.walletsLockPart`). Only
   * legs of orders this transaction holds locked.
   */
  fillWallets(tx: Queryable, white_label_id: string, legs: readonly { withdrawal_id: string; leg_ref: string }[]): { merchant_id: string; movement_keys: string[] }[] {
    return legs.flatMap((leg) => {
      const order = repository.heldOrder(tx, white_label_id, leg.withdrawal_id);
      if (!order) return [];
      const keys = fillMovementKeys(leg.leg_ref);
      return [{ merchant_id: order.merchant_id, movement_keys: [keys.payout, keys.fee] }];
    });
  }
}
