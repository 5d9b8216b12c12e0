import { invariant } from './assert.ts';
import type { Queryable, QueryResult, TransactionConnection } from './db.ts';
import { renumberPlaceholders } from './read-part.ts';

/**
 * Deferred writes: the writes of a transaction whose result nobody reads (an event, its outbox row, a
 * follow-up job, a ledger movement, the idempotency record) are queued and sent together as one
 * statement of data-modifying CTEs, with the transaction's next read or before its COMMIT. On this
 * stack a round trip costs more CPU than the statement it carries (docs/benchmarks.md), so a command
 * of ten writes pays for one.
 *
 * The rules that keep this equal to sending each write at once:
 * - A read flushes the queue first, so every read sees every earlier write of its transaction. The queue
 *   travels in the read's round trip, ahead of it, one statement per batch (PostgreSQL runs pipelined
 *   statements in order), each checking its own counts as the batches sent with COMMIT do (below).
 * - Statements of one batch share one snapshot and cannot see each other's rows, and PostgreSQL
 *   applies only one of two changes of the same row in one statement. A write therefore names the
 *   rows it writes (`rows_written`), and a write of a row already written in the queue flushes the
 *   queue first: one row, at most one change per batch.
 * - A write may state how many rows it must change (`expected_rows`); the flush checks every count
 *   and throws the write's own error (`on_unexpected_rows`, a business outcome such as a lost race)
 *   or an invariant failure. Errors of deferred writes surface at the flush, before COMMIT, so the
 *   transaction rolls back exactly as it would have.
 * - `replaces` keeps only the last write of a key in the queue: a counter's final value (an event
 *   feed's last sequence) is written once per batch.
 * - The queue's batches leave with the COMMIT, in one round trip where the engine can pipeline them
 *   (PostgreSQL). The service cannot look at their counts in between, so each statement checks them
 *   itself (`deferred_write_check`, migration 0022): a difference fails the statement, the pipelined
 *   COMMIT then rolls back, and the write's own error is thrown from the failure's detail.
 */

export interface DeferredWrite {
  /** One INSERT, UPDATE or DELETE with $n placeholders: no WITH, no RETURNING (the batch adds its own). */
  sql: string;
  params: readonly unknown[];
  /** The number of rows the write must change; checked at the flush. */
  expected_rows?: number;
  /** The error thrown when the count differs; without it a difference is an invariant failure. */
  on_unexpected_rows?: (changed_rows: number) => Error;
  /** Keys of the rows it writes (`table:key…`); a second write of a key flushes the queue first. */
  rows_written?: readonly string[];
  /** A later write with the same key takes this one's place in the queue. */
  replaces?: string;
}

/** The most writes one batch holds; a longer queue is sent in several statements. */
export const MAXIMUM_WRITES_PER_BATCH = 64;
/** PostgreSQL's limit of bound parameters per statement (a 16-bit count in the protocol). */
const MAXIMUM_PARAMETERS_PER_STATEMENT = 65_535;

const STATEMENT_START = /^\s*(INSERT|UPDATE|DELETE)\b/i;
const HAS_WITH_OR_RETURNING = /^\s*WITH\b|\bRETURNING\b/i;
/** `$` other than a numbered placeholder (dollar quoting, a literal) would be renumbered wrongly. */
const UNSAFE_DOLLAR = /\$(?![0-9])/;

/**
 * The highest placeholder of each write text already checked. The texts are the repositories' constants,
 * so each is scanned once per process instead of on every write; the cache is bounded like the prepared
 * statement names of src/platform/db.ts, past which a text is simply scanned again.
 */
const checkedTexts = new Map<string, number>();
const CHECKED_TEXT_CACHE_LIMIT = 5000;

function highestPlaceholderOf(sql: string): number {
  const known = checkedTexts.get(sql);
  if (known !== undefined) return known;
  invariant(STATEMENT_START.test(sql), 'a deferred write is one INSERT, UPDATE or DELETE');
  invariant(!HAS_WITH_OR_RETURNING.test(sql), 'a deferred write has no WITH and no RETURNING of its own');
  invariant(!UNSAFE_DOLLAR.test(sql), 'a deferred write uses only numbered placeholders');
  let highest = 0;
  for (const match of sql.matchAll(/\$([0-9]+)/g)) highest = Math.max(highest, Number(match[1]));
  if (checkedTexts.size < CHECKED_TEXT_CACHE_LIMIT) checkedTexts.set(sql, highest);
  return highest;
}

function checkWrite(write: DeferredWrite): void {
  invariant(highestPlaceholderOf(write.sql) <= write.params.length, 'a deferred write has a value for each placeholder');
}

/** Checks a write's changed-row count against what it expected, throwing its error when they differ. */
function checkCount(write: DeferredWrite, changed_rows: number): void {
  if (write.expected_rows === undefined || write.expected_rows === changed_rows) return;
  if (write.on_unexpected_rows) throw write.on_unexpected_rows(changed_rows);
  invariant(false, `a deferred write changed ${changed_rows} rows instead of ${write.expected_rows}: ${write.sql.slice(0, 80)}`);
}

/** The SQLSTATE of `deferred_write_check` (migration 0022): a write of the statement changed another number of rows. */
export const UNEXPECTED_ROWS_SQLSTATE = 'UW001';

/** The write and its count named by a `deferred_write_check` failure; null for any other error. */
function unexpectedRowsOf(error: unknown): { write_index: number; changed_rows: number } | null {
  if (typeof error !== 'object' || error === null || (error as { code?: unknown }).code !== UNEXPECTED_ROWS_SQLSTATE) return null;
  const detail = (error as { detail?: unknown }).detail;
  if (typeof detail !== 'string') return null;
  const parsed = JSON.parse(detail) as { write_index?: unknown; changed_rows?: unknown };
  return typeof parsed.write_index === 'number' && typeof parsed.changed_rows === 'number' ? { write_index: parsed.write_index, changed_rows: parsed.changed_rows } : null;
}

/**
 * Rethrows the failure of batches that checked their own counts (`checkedStatements`): a count that differed
 * becomes its write's own error (or an invariant failure); any other failure is thrown as it is. `writes` are
 * the batches' writes in order, which the failure names by position.
 */
function throwWriteError(writes: readonly DeferredWrite[], error: unknown): never {
  const failure = unexpectedRowsOf(error);
  const write = failure ? writes[failure.write_index] : undefined;
  if (failure && write) checkCount(write, failure.changed_rows);
  throw error;
}

/**
 * The queue's batches as statements that check their own counts, sent together in one round trip; each write
 * is numbered by its position in the whole queue, so that a failure names it among `writes`.
 */
function checkedStatements(batches: readonly (readonly DeferredWrite[])[]): { statements: { sql: string; params: unknown[] }[]; writes: DeferredWrite[] } {
  const writes: DeferredWrite[] = [];
  const statements = batches.map((batch) => {
    const statement = combineWrites(batch, { checked_in_statement: true, first_write_index: writes.length });
    writes.push(...batch);
    return statement;
  });
  return { statements, writes };
}

/**
 * One statement for several writes: each a CTE, the outer SELECT reading their changed-row counts. With
 * `checked_in_statement` the statement also fails when a count differs from the write's `expected_rows`
 * (the batch sent with COMMIT, whose counts the service cannot check before the COMMIT runs).
 */
export function combineWrites(writes: readonly DeferredWrite[], options: { checked_in_statement?: boolean; first_write_index?: number } = {}): { sql: string; params: unknown[] } {
  invariant(writes.length > 0 && writes.length <= MAXIMUM_WRITES_PER_BATCH, 'a batch holds 1 to 64 writes');
  const params: unknown[] = [];
  const parts: string[] = [];
  writes.forEach((write, index) => {
    checkWrite(write);
    const offset = params.length;
    const renumbered = renumberPlaceholders(write.sql, offset);
    parts.push(`w${index} AS (${renumbered.trim()} RETURNING 1)`);
    params.push(...write.params);
  });
  invariant(params.length <= MAXIMUM_PARAMETERS_PER_STATEMENT, 'a batch stays within the protocol limit of parameters');
  const counts = writes
    .map((write, index) => {
      const count = `(SELECT count(*) FROM w${index})`;
      const checked = options.checked_in_statement === true && write.expected_rows !== undefined;
      const position = (options.first_write_index ?? 0) + index;
      return `${checked ? `deferred_write_check(${position}, ${count}, ${write.expected_rows})` : count}::integer AS c${index}`;
    })
    .join(', ');
  return { sql: `WITH ${parts.join(', ')} SELECT ${counts}`, params };
}

/**
 * A transaction's connection with a queue of deferred writes. Every other statement goes through it
 * unchanged, after the queue is flushed. It also holds the facts that stay true while the transaction's
 * locks are held (an event feed's last sequence, an order it locked), each kind under the typed
 * `TransactionFacts` its owning module declares.
 */
export class UnitOfWork implements Queryable {
  /** The queue, cut into statements: a new batch starts where a row would be written twice or one is full. */
  private batches: DeferredWrite[][] = [];
  /** Rows written by the last batch. */
  private readonly written = new Set<string>();
  /** The facts the transaction keeps, by kind (see `TransactionFacts`, the only reader and writer). */
  readonly facts = new Map<TransactionFacts<unknown>, Map<string, unknown>>();

  constructor(private readonly connection: TransactionConnection) {}

  defer(write: DeferredWrite): void {
    checkWrite(write);
    let current = this.batches[this.batches.length - 1];
    if (current && write.replaces !== undefined) {
      const index = current.findIndex((queued) => queued.replaces === write.replaces);
      if (index >= 0) {
        current.splice(index, 1);
        current.push(write);
        return;
      }
    }
    const rows = write.rows_written ?? [];
    if (!current || current.length >= MAXIMUM_WRITES_PER_BATCH || rows.some((row) => this.written.has(row))) {
      current = [];
      this.batches.push(current);
      this.written.clear();
    }
    current.push(write);
    for (const row of rows) this.written.add(row);
  }

  /** Sends the queue: one statement per batch, in order. */
  async flush(): Promise<void> {
    for (const batch of this.takeQueue()) await this.send(batch);
  }

  /**
   * Ends the transaction: the queue is sent with the COMMIT (one round trip on PostgreSQL, which pipelines
   * them), each batch a statement that checks its own counts. A count that differs fails that statement,
   * which makes the COMMIT a rollback, and throws the write's own error here.
   */
  async commit(): Promise<void> {
    const queued = checkedStatements(this.takeQueue());
    try {
      await this.connection.commit(queued.statements);
    } catch (error) {
      throwWriteError(queued.writes, error);
    }
  }

  private takeQueue(): DeferredWrite[][] {
    const batches = this.batches;
    this.batches = [];
    this.written.clear();
    return batches;
  }

  private async send(batch: readonly DeferredWrite[]): Promise<void> {
    if (batch.length === 1) {
      const write = batch[0]!;
      const result = await this.connection.query(write.sql, write.params);
      checkCount(write, result.rowCount);
      return;
    }
    const combined = combineWrites(batch);
    const { rows } = await this.connection.query<Record<string, number>>(combined.sql, combined.params);
    const counts = rows[0];
    invariant(counts !== undefined, 'a batch answers one row of counts');
    batch.forEach((write, index) => checkCount(write, Number(counts[`c${index}`])));
  }

  /**
   * A read (or any statement) after the queue: the queue travels in the same round trip, ahead of it, each
   * batch a statement that checks its own counts as the batches sent with COMMIT do. The server runs them in
   * order, so each batch sees the ones before it and the statement sees every write; a count that differs
   * fails its batch, the server refuses everything after it in the aborted transaction, and the write's own
   * error is thrown here.
   */
  async query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>> {
    const queued = checkedStatements(this.takeQueue());
    if (queued.statements.length === 0) return this.connection.query<Row>(sql, params);
    try {
      return await this.connection.queryAfter<Row>(queued.statements, sql, params);
    } catch (error) {
      throwWriteError(queued.writes, error);
    }
  }

  async exec(sql: string): Promise<void> {
    await this.flush();
    await this.connection.exec(sql);
  }
}

/** True when `db` is a transaction that can queue writes. */
export function isUnitOfWork(db: Queryable): db is UnitOfWork {
  return db instanceof UnitOfWork;
}

/**
 * Queues a write in the transaction, or sends it at once outside one (a plain connection, or a test's
 * wrapper around a transaction): the same checks either way.
 */
export async function deferWrite(db: Queryable, write: DeferredWrite): Promise<void> {
  if (isUnitOfWork(db)) {
    db.defer(write);
    return;
  }
  checkWrite(write);
  const result = await db.query(write.sql, write.params);
  checkCount(write, result.rowCount);
}

/**
 * A kind of fact that a transaction keeps while it holds the locks the fact was read under (an order it locked, an
 * event feed's last sequence, a wallet locked ahead of its post, a withdrawal leg read under its order's lock),
 * declared once by the module that owns it, with the type of its values. Facts of a kind are found by an id the
 * owner chooses (the row's key). Outside a unit of work (a plain connection) nothing is kept and nothing is found:
 * every owner then reads as if the transaction had just begun. This replaces string keys in one untyped map, under
 * which a reader had to know, and cast to, what some other statement had put there.
 */
export class TransactionFacts<Value> {
  /** `kind` names the facts in messages and debugging only: two kinds never share values, whatever their names. */
  constructor(readonly kind: string) {}

  private factsOf(db: Queryable, create: boolean): Map<string, Value> | undefined {
    if (!isUnitOfWork(db)) return undefined;
    let facts = db.facts.get(this) as Map<string, Value> | undefined;
    if (!facts && create) {
      facts = new Map<string, Value>();
      db.facts.set(this, facts as Map<string, unknown>);
    }
    return facts;
  }

  get(db: Queryable, id: string): Value | undefined {
    return this.factsOf(db, false)?.get(id);
  }

  has(db: Queryable, id: string): boolean {
    return this.factsOf(db, false)?.has(id) ?? false;
  }

  /** Keeps the fact in a unit of work; outside one, does nothing. */
  set(db: Queryable, id: string, value: Value): void {
    this.factsOf(db, true)?.set(id, value);
  }

  delete(db: Queryable, id: string): void {
    this.factsOf(db, false)?.delete(id);
  }

  /** The fact, once: it is forgotten as it is taken. */
  take(db: Queryable, id: string): { found: true; value: Value } | { found: false } {
    const facts = this.factsOf(db, false);
    if (!facts || !facts.has(id)) return { found: false };
    const value = facts.get(id) as Value;
    facts.delete(id);
    return { found: true, value };
  }

  /** Every fact of this kind the transaction keeps, in the order they were kept. */
  entries(db: Queryable): [string, Value][] {
    return [...(this.factsOf(db, false) ?? [])];
  }
}

/** The rows a transaction locked or inserted, by row key (see `rememberLocked`). */
const LOCKED_ROWS = new TransactionFacts<true>('platform.locked_rows');

/**
 * Row locks a transaction holds, remembered so that a later write of the row can be queued: a row this
 * transaction locked (FOR UPDATE) or inserted cannot change under it, so a version or status guard on
 * it can only fail through a bug, and the flush checks that it did not.
 */
export function rememberLocked(db: Queryable, row_key: string): void {
  LOCKED_ROWS.set(db, row_key, true);
}

/** True when `db` is a transaction that locked or inserted this row (see `rememberLocked`). */
export function holdsLock(db: Queryable, row_key: string): boolean {
  return LOCKED_ROWS.has(db, row_key);
}
