/**
 * The one lock order of the service (issue 13, cycles A and B). Every transaction that waits for a lock
 * takes its locks in this order, each kind at most once in one go where it can (several rows of one kind
 * in the order given here), so that two transactions never wait for each other in a cycle and PostgreSQL
 * never has to break one with `40P01`. A lock may be taken out of this order only when it cannot wait:
 * `pg_try_advisory_xact_lock` and `FOR UPDATE SKIP LOCKED` either take the lock at once or pass.
 *
 * Every function that takes one of these locks names its rank here. `test/platform/lock-order.test.ts` runs the
 * paths that take several of them (creation and matching, cancel, expiry, fills, ledger posts, the
 * withdrawer's own cancel and expiry) concurrently on PostgreSQL and requires zero deadlocks.
 *
 * Deferred writes (src/platform/unit-of-work.ts) leave at the end of a transaction, after every lock
 * here, but they wait for no lock the transaction does not hold: an update is queued only for a row the
 * transaction locked or inserted (an order, a wallet, a feed) or one locked through such a row (an
 * order's legs), and the new rows it inserts are keyed by objects it holds (an order's id, a feed's
 * sequence, a wallet's movement key). A settlement's sender registration is an upsert of a row that only
 * a settlement of the same merchant writes, under that merchant's feed lock, which this transaction holds;
 * a queued delete of a pending job by its key can meet only the worker's one-statement transactions on
 * that row, which hold no other lock. A decision's queued claim of a bank transfer (`deferTransferClaim`)
 * waits only for another order's decision that claimed the same transfer first and has not committed; two
 * decisions that shared a feed or a wallet would have met at the feed-lock statement long before, so the other
 * holds nothing this one holds, and the wait ends with its commit (this one then rolls back and decides again).
 */
export const LOCK_ORDER = [
  /** `IdempotencyService.execute`: a try-lock on the key (a second request answers `idempotency_in_flight`). */
  'idempotency key (advisory, never waits)',
  /**
   * Locks that serialise one command for one subject before it reads anything: a deposit's end user
   * (`deposits:user:…`), a brand's webhook signing key set, a sandbox's test-clock attachment.
   */
  'command subject (advisory)',
  /**
   * The slip consumer's head receipt of an order (`SlipsService.headOfQueue`). Its statement carries the
   * order's lock (`DepositService.orderLockRead`), which the statement takes after the receipt's, so the
   * two are taken in this order in one round trip; the decision's statement also locks the withdrawals the
   * order's legs name, after the order (`DepositService.settlementLockRead`).
   */
  'slip receipt',
  /** A sandbox test clock row (`FOR UPDATE`), before anything its jobs or events touch. */
  'test clock',
  /** `deposit_orders` row: the first row of every change to a deposit (`DepositService.lockOrder`). */
  'deposit order',
  /** The sandbox counterparty's brand lock, taken only when it must open liquidity (src/sandbox/liquidity.ts). */
  'sandbox brand liquidity (advisory)',
  /**
   * `withdrawal_orders` rows: several in withdrawal-id order (`WithdrawalService.lockOrdersOf`, which a
   * deposit change calls for every withdrawal its legs name, or `lockOrdersNamedBy`, whose statement reads
   * those legs itself). The matcher takes its candidates with SKIP LOCKED, which never waits, and before any feed.
   */
  'withdrawal orders',
  /**
   * `event_sequences` rows, the per-merchant event feeds: all of a transaction's feeds in one statement,
   * in merchant-id order (`EventsService.lockFeeds`); writing an event locks its feed too.
   */
  'event feeds',
  /** Rows that hang off an order already locked: a dispute, a claim. */
  'dispute, claim',
  /**
   * `wallets` rows, always after their merchant's feed (`LedgerService.lockAccount`). A settlement's credit
   * expected ahead (`LedgerService.expectDepositCredit`) locks the depositor's wallet with the first
   * withdrawer's, in merchant-id order, only when the transaction holds both feeds: no other transaction can
   * then hold either wallet, so neither lock waits. The slip consumer's feed-lock statement carries the
   * wallets of the settlement it may make (`LedgerService.walletsLockPart`), locked in merchant-id order once
   * the statement holds every feed it names (`lockFeeds` runs its carried reads after its last feed).
   */
  'wallets',
  /** `clearings` rows, after their wallet. */
  'clearings',
  /**
   * `withdrawal_refund_allowances` rows: what the refunds of one deposit may still take, last of all. A refund's money
   * moves first (its creation's reservation, its close's release, a fill or a reversal of one, taken inside a settlement
   * that locked its feeds and wallets up front), and the refunds' claim on the deposit after it.
   */
  'refund allowance',
] as const;
