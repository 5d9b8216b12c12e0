import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { assertPositiveMinor } from '../platform/money.ts';
import { isUnitOfWork, TransactionFacts } from '../platform/unit-of-work.ts';
import type { ReadPart } from '../platform/read-part.ts';
import { formatNullableTimestamp, formatTimestamp, HOUR_MS } from '../platform/time.ts';
import type { EventsService } from '../events/service.ts';
import type { EventCause } from '../platform/cause.ts';
import { cancelJobsByKey, scheduleJob } from '../jobs/index.ts';
import * as repository from './repository.ts';
import {
  MAY_OVERDRAW_AVAILABLE,
  MOVEMENT_RULES,
  type Balances,
  type BalanceTransactionRow,
  type BalanceTransactionType,
  type Bucket,
  type WalletAccount,
  type WalletRow,
} from './types.ts';

/**
 * The wallet ledger. `post` is the only function that moves money: every other function here, and
 * every other module, moves money by calling it. It is atomic in the caller's transaction and
 * idempotent by `movement_key`: posting the same key twice returns the first movement and changes
 * nothing. Each movement writes exactly one event.
 */
export const CLEARING_PERIOD_MS = 72 * HOUR_MS;
export const RELEASE_CLEARING_TASK = 'ledger.release_clearing';

export interface BalanceTransactionView {
  id: string;
  object: 'balance_transaction';
  type: BalanceTransactionType;
  direction: 'credit' | 'debit';
  amount_minor: number;
  currency: 'THB';
  bucket_from: Bucket | null;
  bucket_to: Bucket | null;
  available_at?: string;
  balance_after: Balances;
  source: { type: string; id: string };
  reverses_balance_transaction_id?: string;
  reason_code?: string;
  reason_display_th?: string;
  cleared_from_balance_transaction_id?: string;
  livemode: boolean;
  created_at: string;
}

export interface BalanceView extends Balances {
  object: 'balance';
  currency: 'THB';
  livemode: boolean;
  as_of: string;
}

/** A credit waiting in pending clearing: when it clears (null while held) and where it came from. */
export interface ClearingView {
  credit_balance_transaction_id: string;
  amount_minor: number;
  status: 'pending' | 'held' | 'released' | 'reversed';
  available_at: string | null;
  hold_reason: string | null;
  source: { type: string; id: string };
  created_at: string;
}

function clearingView(row: repository.ClearingScheduleRow): ClearingView {
  return {
    credit_balance_transaction_id: row.credit_balance_transaction_id,
    amount_minor: Number(row.amount_minor),
    status: row.status,
    available_at: formatNullableTimestamp(row.available_at),
    hold_reason: row.hold_reason,
    source: { type: row.source_type, id: row.source_id },
    created_at: formatTimestamp(row.created_at),
  };
}

export interface PostInput {
  account: WalletAccount;
  type: BalanceTransactionType;
  amount_minor: number;
  bucket_from: Bucket | null;
  bucket_to: Bucket | null;
  /** Makes the movement happen once: the same key returns the first movement. */
  movement_key: string;
  /** The id the movement will have, when the caller must name it first (in an event written before it). */
  balance_transaction_id?: string;
  source: { type: string; id: string };
  available_at?: Date | null;
  reverses_balance_transaction_id?: string | null;
  reason_code?: string | null;
  reason_display_th?: string | null;
  cleared_from_balance_transaction_id?: string | null;
  cause: EventCause;
}

export function balanceTransactionView(row: BalanceTransactionRow): BalanceTransactionView {
  const view: BalanceTransactionView = {
    id: row.balance_transaction_id,
    object: 'balance_transaction',
    type: row.type,
    direction: row.direction,
    amount_minor: row.amount_minor,
    currency: 'THB',
    bucket_from: row.bucket_from,
    bucket_to: row.bucket_to,
    balance_after: {
      available_minor: row.available_after,
      pending_clearing_minor: row.pending_clearing_after,
      reserved_minor: row.reserved_after,
    },
    source: { type: row.source_type, id: row.source_id },
    livemode: row.livemode,
    created_at: formatTimestamp(row.created_at),
  };
  if (row.available_at) view.available_at = formatTimestamp(row.available_at);
  if (row.reverses_balance_transaction_id) view.reverses_balance_transaction_id = row.reverses_balance_transaction_id;
  if (row.reason_code) view.reason_code = row.reason_code;
  if (row.reason_display_th) view.reason_display_th = row.reason_display_th;
  if (row.cleared_from_balance_transaction_id) view.cleared_from_balance_transaction_id = row.cleared_from_balance_transaction_id;
  return view;
}

/**
 * Which event a movement writes: one per movement, so that a merchant can fold them all. The spec's
 * three names keep their exact meanings: `balance.credited` is money arriving into pending clearing,
 * `balance.cleared` the move from pending clearing to available, `balance.debited` a debit from the
 * bucket named in `bucket_from`. Every `reversal` movement is `balance.debited`, the credit of a reversed
 * fill included: the spec names that event for reversals ("for example a reversal") and makes it one of
 * the five an endpoint cannot turn off, as it does `withdrawal.fill_reversed`, so the money a reversal
 * moves can never be unsubscribed from; `direction` says which way it went. The two other credits get
 * names of their own (docs/decisions/ledger.md, "balance.* events"): `balance.released` for a withdrawal's
 * reservation returning to available, and `balance.adjusted` for an operator's or the sandbox's
 * adjustment into available.
 */
export function eventTypeOf(movement: { type: BalanceTransactionType; direction: 'credit' | 'debit'; bucket_to: Bucket | null }): string {
  if (movement.type === 'clearing_released') return 'balance.cleared';
  if (movement.direction === 'debit' || movement.type === 'reversal') return 'balance.debited';
  if (movement.bucket_to === 'pending_clearing') return 'balance.credited';
  if (movement.type === 'withdrawal_released') return 'balance.released';
  return 'balance.adjusted';
}

function applyMovement(balances: Balances, bucket: Bucket | null, delta: number): Balances {
  if (bucket === null) return balances;
  const next = { ...balances };
  if (bucket === 'available') next.available_minor += delta;
  if (bucket === 'pending_clearing') next.pending_clearing_minor += delta;
  if (bucket === 'reserved') next.reserved_minor += delta;
  return next;
}

/** The key that makes a deposit's credit happen once. */
function depositCreditKey(deposit_id: string): string {
  return `deposit_settled:${deposit_id}`;
}

/** The id of a wallet among a transaction's facts (src/platform/unit-of-work.ts `TransactionFacts`). */
function walletKey(account: WalletAccount): string {
  return `${account.white_label_id}:${account.livemode}:${account.merchant_id}`;
}

/** A wallet a transaction will post on later, with the keys it will post (`expectDepositCredit`). */
interface ExpectedPost {
  account: WalletAccount;
  movement_keys: readonly string[];
}

/** The wallets a transaction will post on later (`expectDepositCredit`), by `walletKey`. */
const EXPECTED_POSTS = new TransactionFacts<ExpectedPost>('ledger.expected_posts');

/**
 * A wallet locked ahead of its post (`lockWalletWithExpected`), as the lock statement answered it, with the
 * keys it looked up. It stays what a new lock would answer until the first post on the wallet, which takes
 * it: the wallet's lock keeps every other transaction out, and this transaction writes a wallet only in a post.
 */
interface LockedWallet {
  wallet: WalletRow;
  existing: Map<string, string>;
  stale: boolean;
  movement_keys: readonly string[];
}

/** Wallets locked ahead of their post, by `walletKey`. */
const LOCKED_WALLETS = new TransactionFacts<LockedWallet>('ledger.locked_wallets');

/** Wallets that a carried read (`walletsLockPart`) found not to exist yet, by `walletKey`. */
const ABSENT_WALLETS = new TransactionFacts<true>('ledger.absent_wallets');

/** What `walletsLockPart` answers: the wallets locked in a scope, and the keys looked up on each. */
export interface WalletLocksAnswer {
  scope: Pick<WalletAccount, 'white_label_id' | 'livemode'>;
  answered: Map<string, repository.LockedWalletAnswer>;
  movement_keys: Map<string, readonly string[]>;
}

/**
 * A wallet's first post after a carried read found no such wallet: created and locked in one statement. Its
 * merchant's feed was locked by that read's statement, and every creation of a wallet follows it, so the wallet
 * can only have been created before the statement's locks were granted; then it has movements the read did not
 * look for, and they are looked up again (`stale`). Null when no carried read said the wallet was absent.
 */
async function createAbsentWallet(tx: Queryable, account: WalletAccount, now: Date): Promise<repository.LockedWalletAnswer | null> {
  if (!ABSENT_WALLETS.take(tx, walletKey(account)).found) return null;
  const wallet = await repository.createAndLockWallet(tx, account, now);
  return { wallet, existing: new Map(), stale: wallet.last_sequence !== 0 };
}

/**
 * The wallet as a lock statement of this transaction answered it ahead of this post, taken once: null when
 * there is none, or when it did not look up every key of this post (the post then locks and looks up anew,
 * and waits for nothing: the transaction holds the wallet). Wallets a carried read locked (`walletsLockPart`)
 * are kept as such once its statement has run (`keepLockedWallets`).
 */
function takeLockedWallet(tx: Queryable, account: WalletAccount, movement_keys: readonly string[]): { wallet: WalletRow; existing: Map<string, string>; stale: boolean } | null {
  if (!isUnitOfWork(tx)) return null;
  const taken = LOCKED_WALLETS.take(tx, walletKey(account));
  if (!taken.found) return null;
  const kept = taken.value;
  if (!movement_keys.every((movement_key) => kept.movement_keys.includes(movement_key))) return null;
  return { wallet: kept.wallet, existing: kept.existing, stale: kept.stale };
}

export class LedgerService {
  constructor(
    private readonly events: EventsService,
    private readonly clock: Clock,
  ) {}

  /**
   * Locks a wallet the way every path does: the merchant's event feed first, then the wallet row. Every
   * movement writes a `balance.*` event to that feed, and the deposit and withdrawal paths lock the feeds
   * of all merchants involved before any wallet (docs/decisions/locks.md); a post that took the wallet
   * first and the feed second closed a deadlock cycle with them (issue 13, cycle B).
   */
  private async lockAccount(tx: Queryable, account: WalletAccount, now: Date) {
    await this.lockFeedOf(tx, account);
    return repository.lockWallet(tx, account, now);
  }

  /** The first lock of `lockAccount`: the merchant's event feed, before its wallet. */
  private lockFeedOf(tx: Queryable, account: WalletAccount): Promise<void> {
    return this.events.lockFeeds(tx, account.white_label_id, [account.merchant_id], account.livemode);
  }

  /** Moves money. Returns `insufficient_balance` when a debit would take `available` below zero. */
  async post(tx: Queryable, input: PostInput): Promise<Result<BalanceTransactionView>> {
    const [posted] = await this.postMovements(tx, [input]);
    invariant(posted, 'one movement posted answers once');
    return posted.ok ? ok(posted.value.view) : posted;
  }

  /**
   * Several movements on one wallet (a fill's payout and its fee), each answered as `post` answers it
   * when they are posted one after another in this order: a movement whose key was posted before returns
   * that movement, one refused changes nothing and the next ones go on from the same balances. The wallet
   * is locked once and their keys looked up in that statement, instead of a lock and a lookup each.
   */
  async postAll(tx: Queryable, inputs: readonly PostInput[]): Promise<Result<BalanceTransactionView>[]> {
    const posted = await this.postMovements(tx, inputs);
    return posted.map((result) => (result.ok ? ok(result.value.view) : result));
  }

  /** `postAll`, saying for each movement whether this call created it (false: its key had one already). */
  private async postMovements(tx: Queryable, inputs: readonly PostInput[]): Promise<Result<{ view: BalanceTransactionView; created: boolean }>[]> {
    const first = inputs[0];
    invariant(first, 'a post moves money at least once');
    const account = first.account;
    const rules = inputs.map((input) => {
      invariant(
        input.account.white_label_id === account.white_label_id && input.account.merchant_id === account.merchant_id && input.account.livemode === account.livemode,
        'the movements of one post are on one wallet',
      );
      assertPositiveMinor(input.amount_minor, 'amount_minor');
      const rule = MOVEMENT_RULES[input.type].find((candidate) => candidate.from === input.bucket_from && candidate.to === input.bucket_to);
      invariant(rule, `a ${input.type} movement cannot go from ${String(input.bucket_from)} to ${String(input.bucket_to)}`);
      return rule;
    });
    const keys = inputs.map((input) => input.movement_key);
    invariant(new Set(keys).size === keys.length, 'the movements of one post have distinct keys');

    // Locked as `lockAccount` locks (the feed, then the wallet), the movement keys looked up with the wallet's lock.
    await this.lockFeedOf(tx, account);
    const locked = takeLockedWallet(tx, account, keys) ?? (await createAbsentWallet(tx, account, this.clock.now())) ?? (await this.lockWalletWithExpected(tx, account, keys));
    const wallet = locked.wallet;
    let balances: Balances = {
      available_minor: wallet.available_minor,
      pending_clearing_minor: wallet.pending_clearing_minor,
      reserved_minor: wallet.reserved_minor,
    };
    let sequence = wallet.last_sequence;
    let updatedAt: Date | null = null;
    const results: Result<{ view: BalanceTransactionView; created: boolean }>[] = [];
    for (const [index, input] of inputs.entries()) {
      const rule = rules[index]!;
      const now = this.clock.now();
      const existingId = locked.existing.get(input.movement_key) ?? null;
      const existing = locked.stale
        ? await repository.findByMovementKey(tx, account, input.movement_key)
        : existingId === null
          ? null
          : await repository.findBalanceTransaction(tx, account, existingId);
      if (existing) {
        invariant(existing.type === input.type && existing.amount_minor === input.amount_minor, `movement ${input.movement_key} was posted with other terms`);
        results.push(ok({ view: balanceTransactionView(existing), created: false }));
        continue;
      }

      const before = balances;
      const after = applyMovement(applyMovement(before, input.bucket_from, -input.amount_minor), input.bucket_to, input.amount_minor);
      invariant(after.pending_clearing_minor >= 0, 'pending_clearing cannot go below zero');
      invariant(after.reserved_minor >= 0, 'reserved cannot go below zero');
      if (after.available_minor < 0 && after.available_minor < before.available_minor && !MAY_OVERDRAW_AVAILABLE.has(input.type)) {
        const pendingAt = await repository.nextClearingAt(tx, account);
        results.push(
          fail('insufficient_balance', {
            details: {
              available_minor: before.available_minor,
              required_minor: input.amount_minor,
              pending_clearing_minor: before.pending_clearing_minor,
              pending_clearing_available_at: formatNullableTimestamp(pendingAt),
            },
          }),
        );
        continue;
      }
      // Double entry: what left one bucket entered another, or crossed the wallet's edge.
      const totalBefore = before.available_minor + before.pending_clearing_minor + before.reserved_minor;
      const totalAfter = after.available_minor + after.pending_clearing_minor + after.reserved_minor;
      const edgeDelta = (input.bucket_to === null ? -input.amount_minor : 0) + (input.bucket_from === null ? input.amount_minor : 0);
      invariant(totalAfter - totalBefore === edgeDelta, 'a movement changes the wallet total only across its edge');

      sequence += 1;
      const row: BalanceTransactionRow = {
        ...account,
        balance_transaction_id: input.balance_transaction_id ?? newId('balance_transaction'),
        sequence,
        movement_key: input.movement_key,
        type: input.type,
        direction: rule.direction,
        amount_minor: input.amount_minor,
        currency: 'THB',
        bucket_from: input.bucket_from,
        bucket_to: input.bucket_to,
        available_at: input.available_at ?? null,
        available_after: after.available_minor,
        pending_clearing_after: after.pending_clearing_minor,
        reserved_after: after.reserved_minor,
        source_type: input.source.type,
        source_id: input.source.id,
        reverses_balance_transaction_id: input.reverses_balance_transaction_id ?? null,
        reason_code: input.reason_code ?? null,
        reason_display_th: input.reason_display_th ?? null,
        cleared_from_balance_transaction_id: input.cleared_from_balance_transaction_id ?? null,
        created_at: now,
      };
      await repository.insertBalanceTransaction(tx, row);
      balances = after;
      updatedAt = now;
      const view = balanceTransactionView(row);
      await this.events.emitEvent(tx, {
        ...account,
        type: eventTypeOf(row),
        object: view as unknown as Record<string, unknown>,
        previous_attributes: undefined,
        cause: input.cause,
      });
      results.push(ok({ view, created: true }));
    }
    // One write of the wallet for every movement the call created: the balances and sequence after the last.
    if (updatedAt !== null) await repository.updateWallet(tx, account, balances, { from_sequence: wallet.last_sequence, to_sequence: sequence }, updatedAt);
    return results;
  }

  /** The movement keys a settled deposit's credit looks up (`creditSettledDeposit`), for a lock taken ahead of it (`walletsLockPart`). */
  depositCreditKeys(deposit_id: string): string[] {
    return [depositCreditKey(deposit_id)];
  }

  /**
   * The wallets of these merchants locked, and the movement keys each will post looked up, as a read that the
   * statement locking the same merchants' feeds carries (`EventsService.lockFeedsAndRead`, whose carried reads
   * run once every feed is locked): the wallets then follow their feeds in the lock order, and the posts that
   * follow in the transaction take what it answered (`takeLockedWallet`) instead of a statement each. Only for
   * that statement: a wallet lock that does not follow its merchant's feed could wait out of order. A wallet
   * that does not exist yet is not answered; its first post creates it, as always.
   *
   * Only for keys that are posted under a lock the transaction took in an earlier statement (a settlement's
   * credit under its deposit order's lock, a fill's payout and fee under its withdrawal's): a movement with such
   * a key was committed before that lock was granted, so the statement's snapshot, taken after it, sees it even
   * when the statement then waited for a feed. The wallet's last sequence may be ahead of that snapshot (a
   * settlement that filled another withdrawal of the same merchant committed while this statement waited), and
   * the generic wallet lock would call its lookup stale and ask again (`lockWalletFindingMovements`); for these
   * keys the lookup is exact.
   */
  walletsLockPart(scope: Pick<WalletAccount, 'white_label_id' | 'livemode'>, wanted: readonly { merchant_id: string; movement_keys: readonly string[] }[]): ReadPart<WalletLocksAnswer> {
    const keysOf = new Map<string, string[]>();
    for (const { merchant_id, movement_keys } of wanted) keysOf.set(merchant_id, [...new Set([...(keysOf.get(merchant_id) ?? []), ...movement_keys])]);
    const merged = [...keysOf].map(([merchant_id, movement_keys]) => ({ merchant_id, movement_keys }));
    const part = repository.lockWalletsFindingMovementsPart(scope.white_label_id, scope.livemode, merged);
    return { ...part, parse: (value) => ({ scope, answered: part.parse(value), movement_keys: keysOf }) };
  }

  /**
   * Keeps each wallet that a statement carrying `walletsLockPart` locked as a wallet locked ahead of its post
   * (`takeLockedWallet`), and marks those it did not find: their first post creates them without looking for
   * them again. The caller hands the answer over as soon as that statement has run, before any post.
   */
  keepLockedWallets(tx: Queryable, answer: WalletLocksAnswer): void {
    if (!isUnitOfWork(tx)) return;
    const { scope, answered, movement_keys: keysOf } = answer;
    for (const [merchant_id, movement_keys] of keysOf) {
      const wallet = { white_label_id: scope.white_label_id, merchant_id, livemode: scope.livemode };
      const found = answered.get(merchant_id);
      // Keys posted only under locks the transaction held before the statement began were looked up exactly (see
      // `walletsLockPart`): the wallet's other movements since the statement's snapshot cannot be these.
      if (found) LOCKED_WALLETS.set(tx, walletKey(wallet), { ...found, stale: false, movement_keys });
      else ABSENT_WALLETS.set(tx, walletKey(wallet), true);
    }
  }

  /**
   * Says that this transaction will credit a settled deposit (`creditSettledDeposit`) after other posts (a
   * settlement fills its withdrawals first): the next wallet lock the ledger sends in the transaction locks
   * the depositor's wallet too and looks the credit's key up, so that the credit needs no statement of its
   * own. Kept only when the transaction holds the depositor's feed, which every lock of a wallet follows:
   * taking the wallet early then waits for nothing and keeps the lock order. Otherwise, and outside a
   * transaction, nothing is kept and the credit locks its wallet as always.
   */
  expectDepositCredit(tx: Queryable, account: WalletAccount, deposit_id: string): void {
    if (!isUnitOfWork(tx) || !this.events.holdsFeed(tx, account.white_label_id, account.merchant_id, account.livemode)) return;
    // Locked already, with the credit's key looked up (`walletsLockPart`), or found absent: the credit takes that answer.
    const kept = LOCKED_WALLETS.get(tx, walletKey(account));
    if (kept?.movement_keys.includes(depositCreditKey(deposit_id)) || ABSENT_WALLETS.has(tx, walletKey(account))) return;
    EXPECTED_POSTS.set(tx, walletKey(account), { account, movement_keys: [depositCreditKey(deposit_id)] });
  }

  /**
   * Locks the wallet and looks its keys up (`lockWalletFindingMovements`), together with the wallets this
   * transaction said it will post on later (`expectDepositCredit`), in one statement; what those answered is
   * kept for their posts (`takeLockedWallet`).
   */
  private async lockWalletWithExpected(tx: Queryable, account: WalletAccount, movement_keys: readonly string[]) {
    const now = this.clock.now();
    if (!isUnitOfWork(tx)) return repository.lockWalletFindingMovements(tx, account, movement_keys, now);
    // The wallet's own expectation is answered by this lock.
    EXPECTED_POSTS.delete(tx, walletKey(account));
    const expected: { merchant_id: string; movement_keys: readonly string[] }[] = [];
    for (const [, post] of EXPECTED_POSTS.entries(tx)) {
      if (post.account.white_label_id !== account.white_label_id || post.account.livemode !== account.livemode) continue;
      const merchant_id = post.account.merchant_id;
      // Only wallets whose feed the transaction holds: their locks cannot wait (see `expectDepositCredit`).
      if (!this.events.holdsFeed(tx, account.white_label_id, merchant_id, account.livemode)) continue;
      expected.push({ merchant_id, movement_keys: post.movement_keys });
    }
    if (expected.length === 0) return repository.lockWalletFindingMovements(tx, account, movement_keys, now);
    const answered = await repository.lockWalletsFindingMovements(tx, account.white_label_id, account.livemode, [
      { merchant_id: account.merchant_id, movement_keys },
      ...expected,
    ]);
    for (const { merchant_id, movement_keys: keys } of expected) {
      const wallet = { white_label_id: account.white_label_id, merchant_id, livemode: account.livemode };
      EXPECTED_POSTS.delete(tx, walletKey(wallet));
      const found = answered.get(merchant_id);
      // A wallet that does not exist yet is created by its first post, as always.
      if (found) LOCKED_WALLETS.set(tx, walletKey(wallet), { ...found, movement_keys: keys });
    }
    const own = answered.get(account.merchant_id);
    // The wallet's first movement: created and locked by the single lock, which finds no row.
    return own ?? repository.lockWalletFindingMovements(tx, account, movement_keys, now);
  }

  /**
   * Credits a settled deposit into pending_clearing with `available_at` 72 hours on, and schedules
   * the durable job that releases it then.
   */
  async creditSettledDeposit(
    tx: Queryable,
    input: {
      account: WalletAccount;
      deposit_id: string;
      amount_minor: number;
      cause: EventCause;
      balance_transaction_id?: string;
      /** When the credit clears: the order's `clearing_available_at`, so that the two never differ (spec, 142 and 222). */
      available_at?: Date;
    },
  ): Promise<BalanceTransactionView> {
    const availableAt = input.available_at ?? new Date(this.clock.now().getTime() + CLEARING_PERIOD_MS);
    const [posted] = await this.postMovements(tx, [{
      account: input.account,
      type: 'deposit_settled',
      amount_minor: input.amount_minor,
      ...(input.balance_transaction_id ? { balance_transaction_id: input.balance_transaction_id } : {}),
      bucket_from: null,
      bucket_to: 'pending_clearing',
      movement_key: depositCreditKey(input.deposit_id),
      source: { type: 'deposit_order', id: input.deposit_id },
      available_at: availableAt,
      cause: input.cause,
    }]);
    invariant(posted?.ok, 'a credit into pending_clearing cannot be refused');
    const { view, created } = posted.value;
    // A credit this call created has no clearing yet: only a credit posted before can have one to find.
    const existingClearing = created ? null : await repository.lockClearing(tx, input.account.white_label_id, view.id);
    if (!existingClearing) {
      const now = this.clock.now();
      const when = new Date(view.available_at ?? availableAt);
      await repository.insertClearing(tx, {
        ...input.account,
        credit_balance_transaction_id: view.id,
        amount_minor: view.amount_minor,
        available_at: when,
        status: 'pending',
        hold_reason: null,
        released_balance_transaction_id: null,
        created_at: now,
        updated_at: now,
      });
      await this.scheduleRelease(tx, input.account, view.id, when);
    }
    return view;
  }

  private async scheduleRelease(tx: Queryable, account: WalletAccount, creditId: string, when: Date): Promise<void> {
    await scheduleJob(tx, this.clock, {
      task: RELEASE_CLEARING_TASK,
      payload: { ...account, credit_balance_transaction_id: creditId },
      run_at: when,
      job_key: `clearing:${account.white_label_id}:${creditId}`,
      white_label_id: account.white_label_id,
    });
  }

  /**
   * The clearing job: moves a pending credit to available once its time has come. A held, reversed
   * or already released credit is left as it is, so a late or repeated job does nothing.
   */
  async releaseClearing(tx: Queryable, account: WalletAccount, creditId: string): Promise<BalanceTransactionView | null> {
    await this.lockAccount(tx, account, this.clock.now());
    const clearing = await repository.lockClearing(tx, account.white_label_id, creditId);
    if (!clearing || clearing.status !== 'pending' || !clearing.available_at) return null;
    if (clearing.available_at.getTime() > this.clock.now().getTime()) return null;
    const posted = await this.post(tx, {
      account,
      type: 'clearing_released',
      amount_minor: clearing.amount_minor,
      bucket_from: 'pending_clearing',
      bucket_to: 'available',
      movement_key: `clearing_released:${creditId}`,
      source: { type: 'balance_transaction', id: creditId },
      cleared_from_balance_transaction_id: creditId,
      cause: { request_id: null, idempotency_key: null, api_version: '2026-08-01' },
    });
    invariant(posted.ok, 'a release into available cannot be refused');
    await repository.updateClearing(
      tx,
      account.white_label_id,
      creditId,
      { status: 'released', available_at: clearing.available_at, hold_reason: null, released_balance_transaction_id: posted.value.id },
      this.clock.now(),
    );
    return posted.value;
  }

  /** Holds a pending credit (a dispute): it stays in pending_clearing with no release time. */
  async holdClearing(tx: Queryable, account: WalletAccount, creditId: string, reason: string): Promise<boolean> {
    await this.lockAccount(tx, account, this.clock.now());
    const clearing = await repository.lockClearing(tx, account.white_label_id, creditId);
    if (!clearing || (clearing.status !== 'pending' && clearing.status !== 'held')) return false;
    await repository.updateClearing(
      tx,
      account.white_label_id,
      creditId,
      { status: 'held', available_at: null, hold_reason: reason, released_balance_transaction_id: null },
      this.clock.now(),
    );
    await cancelJobsByKey(tx, `clearing:${account.white_label_id}:${creditId}`);
    return true;
  }

  /**
   * Lifts a hold. The credit clears at its original time if that is still ahead, else at once (the
   * job runs as soon as a worker is free).
   */
  async releaseHold(tx: Queryable, account: WalletAccount, creditId: string): Promise<boolean> {
    await this.lockAccount(tx, account, this.clock.now());
    const clearing = await repository.lockClearing(tx, account.white_label_id, creditId);
    if (!clearing || clearing.status !== 'held') return false;
    const credit = await repository.findBalanceTransaction(tx, account, creditId);
    invariant(credit?.available_at, 'a clearing belongs to a deposit credit with available_at');
    const now = this.clock.now();
    const when = credit.available_at.getTime() > now.getTime() ? credit.available_at : now;
    await repository.updateClearing(
      tx,
      account.white_label_id,
      creditId,
      { status: 'pending', available_at: when, hold_reason: null, released_balance_transaction_id: null },
      now,
    );
    await this.scheduleRelease(tx, account, creditId, when);
    return true;
  }

  /**
   * Reverses a deposit credit. Inside the clearing window (pending or held) the amount leaves
   * pending_clearing; after clearing it leaves available, which may then go below zero: the debt
   * stays visible and blocks withdrawals until new money covers it (docs/decisions/ledger.md).
   */
  async reverseDepositCredit(
    tx: Queryable,
    input: { account: WalletAccount; deposit_id: string; credit_balance_transaction_id: string; reason_code: string; reason_display_th?: string; cause: EventCause },
  ): Promise<BalanceTransactionView> {
    await this.lockAccount(tx, input.account, this.clock.now());
    const credit = await repository.findBalanceTransaction(tx, input.account, input.credit_balance_transaction_id);
    invariant(credit && credit.type === 'deposit_settled', 'only a deposit credit of this wallet can be reversed');
    const clearing = await repository.lockClearing(tx, input.account.white_label_id, credit.balance_transaction_id);
    invariant(clearing, 'a deposit credit has its clearing row');
    // A credit clears whole, so whatever its state the reversal takes back the whole credit.
    const fromBucket: Bucket = clearing.status === 'released' ? 'available' : 'pending_clearing';
    const posted = await this.post(tx, {
      account: input.account,
      type: 'reversal',
      amount_minor: credit.amount_minor,
      bucket_from: fromBucket,
      bucket_to: null,
      movement_key: `reversal:${credit.balance_transaction_id}`,
      source: { type: 'deposit_order', id: input.deposit_id },
      reverses_balance_transaction_id: credit.balance_transaction_id,
      reason_code: input.reason_code,
      reason_display_th: input.reason_display_th ?? null,
      cause: input.cause,
    });
    invariant(posted.ok, 'a reversal may overdraw available and is never refused');
    if (clearing.status === 'pending' || clearing.status === 'held') {
      await repository.updateClearing(
        tx,
        input.account.white_label_id,
        credit.balance_transaction_id,
        { status: 'reversed', available_at: clearing.available_at ?? credit.available_at, hold_reason: clearing.hold_reason, released_balance_transaction_id: null },
        this.clock.now(),
      );
      await cancelJobsByKey(tx, `clearing:${input.account.white_label_id}:${credit.balance_transaction_id}`);
    }
    return posted.value;
  }

  /**
   * The ledger movements of one order of a brand, for the back office's order page: those whose source is the
   * order, those named by id (its fills' movements), and the clearing releases of any of them; oldest first, at
   * most `limit`.
   */
  async movementsOfOrder(db: Queryable, white_label_id: string, source: { type: string; id: string }, balance_transaction_ids: readonly string[], limit: number): Promise<BalanceTransactionView[]> {
    const rows = await repository.movementsOfSource(db, white_label_id, source, balance_transaction_ids, limit);
    return rows.map(balanceTransactionView);
  }

  async balance(db: Queryable, account: WalletAccount): Promise<BalanceView> {
    const wallet = await repository.findWallet(db, account);
    return {
      object: 'balance',
      available_minor: wallet?.available_minor ?? 0,
      pending_clearing_minor: wallet?.pending_clearing_minor ?? 0,
      reserved_minor: wallet?.reserved_minor ?? 0,
      currency: 'THB',
      livemode: account.livemode,
      as_of: formatTimestamp(this.clock.now()),
    };
  }

  nextClearingAt(db: Queryable, account: WalletAccount): Promise<Date | null> {
    return repository.nextClearingAt(db, account);
  }

  /**
   * A page of a wallet's movements, newest first, each with its sequence (the cursor: pass the last one as
   * `before_sequence` for the next page). Every movement carries the balances after it, written under the
   * wallet's lock, so a running total read from them is right on every page, whatever page came before.
   */
  async balanceTransactionsPage(
    db: Queryable,
    account: WalletAccount,
    before_sequence: number | null,
    limit: number,
  ): Promise<{ data: { sequence: number; transaction: BalanceTransactionView }[]; has_more: boolean }> {
    const rows = await repository.listBalanceTransactions(db, account, before_sequence, limit + 1);
    const data = rows.slice(0, limit).map((row) => ({ sequence: Number(row.sequence), transaction: balanceTransactionView(row) }));
    return { data, has_more: rows.length > limit };
  }

  /** A page of the clearing schedule: the pending clearings by the time they clear, or the held ones by when they were credited. */
  async clearingSchedulePage(
    db: Queryable,
    account: WalletAccount,
    status: 'pending' | 'held',
    after: repository.ClearingCursor | null,
    limit: number,
  ): Promise<{ data: ClearingView[]; has_more: boolean }> {
    const rows = await repository.listClearings(db, account, status, after, limit + 1);
    return { data: rows.slice(0, limit).map(clearingView), has_more: rows.length > limit };
  }

  /** Re-derives the balances from the movements and compares them with the wallet row. */
  async verify(db: Queryable, account: WalletAccount): Promise<{ consistent: boolean; wallet: Balances; folded: Balances; movements: number }> {
    const wallet = await repository.findWallet(db, account);
    const folded = await repository.foldMovements(db, account);
    const stored: Balances = {
      available_minor: wallet?.available_minor ?? 0,
      pending_clearing_minor: wallet?.pending_clearing_minor ?? 0,
      reserved_minor: wallet?.reserved_minor ?? 0,
    };
    const consistent =
      stored.available_minor === folded.available_minor &&
      stored.pending_clearing_minor === folded.pending_clearing_minor &&
      stored.reserved_minor === folded.reserved_minor &&
      (wallet?.last_sequence ?? 0) === folded.last_sequence &&
      folded.movements === folded.last_sequence;
    return {
      consistent,
      wallet: stored,
      folded: { available_minor: folded.available_minor, pending_clearing_minor: folded.pending_clearing_minor, reserved_minor: folded.reserved_minor },
      movements: folded.movements,
    };
  }
}
