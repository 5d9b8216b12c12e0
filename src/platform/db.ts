import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
// Types only: the embedded engine is loaded when it is opened (`openDatabase`), so that a service on
// PostgreSQL never holds PGlite's code and memory (about 40 MB resident, docs/benchmarks.md).
import type { PGlite } from '@electric-sql/pglite';
import { HostSelectingPool, parseMultiHostUrl } from './multi-host.ts';
import { UnitOfWork } from './unit-of-work.ts';

/**
 * One database interface for both engines. The SQL is PostgreSQL's dialect and identical on both:
 * PGlite (embedded, one connection, serialised by PGlite itself) and a `pg` pool (real server).
 */
export interface QueryResult<Row> {
  rows: Row[];
  rowCount: number;
}

export interface Queryable {
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>>;
  /** Runs a script of several statements without parameters (migrations only). */
  exec(sql: string): Promise<void>;
}

/**
 * How long transactions waited for a connection (the pool's checkout on PostgreSQL, PGlite's own queue of
 * one connection): the longest wait since the last reading. A measured signal of database saturation for
 * load shedding (src/ops/load-shedding.ts), kept as one number so that recording it costs nothing.
 */
export class AcquireWaitMeter {
  private longest_ms = 0;

  record(wait_ms: number): void {
    if (wait_ms > this.longest_ms) this.longest_ms = wait_ms;
  }

  /** The longest wait since the previous call, and a fresh start for the next reading. */
  takeLongestMs(): number {
    const longest = this.longest_ms;
    this.longest_ms = 0;
    return longest;
  }
}

/**
 * Told of every round trip a database makes, with its duration: the statement counter of the benchmarks
 * and of the round-trip test. It must not do I/O. A round trip that carries several statements (BEGIN
 * with a transaction's first statement, deferred writes with the statement after them, its last deferred
 * writes with COMMIT) is told once, their texts joined by `;\n`.
 */
export type StatementObserver = (sql: string, duration_ms: number) => void;

/**
 * A transaction's connection as its unit of work sees it (src/platform/unit-of-work.ts): statements,
 * and the end of the transaction with its last statement, `last`, sent together with the COMMIT.
 */
export interface TransactionConnection extends Queryable {
  /** COMMIT, with `last` sent ahead of it in the same round trip (the deferred writes, statements that check their own counts). */
  commit(last: readonly { sql: string; params: readonly unknown[] }[]): Promise<void>;
  /**
   * A statement sent in the same round trip as `before` (the deferred writes queued ahead of it, statements
   * that check their own counts), which run first, in order: the answer once all have answered, or the first failure.
   */
  queryAfter<Row = Record<string, unknown>>(before: readonly { sql: string; params: readonly unknown[] }[], sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>>;
}

export interface Database extends Queryable {
  readonly engine: 'pglite' | 'postgres';
  /** Connection waits of this database's transactions (absent on test doubles). */
  readonly acquire_wait?: AcquireWaitMeter;
  /** Counts round trips when set (absent on test doubles). */
  statement_observer?: StatementObserver | null;
  /**
   * Runs `work` in one transaction; a thrown error rolls it back and is rethrown. `tx` queues deferred
   * writes (src/platform/unit-of-work.ts), which are sent with its next read and before COMMIT.
   */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/**
 * SQLSTATE classes and codes that mean the database cannot serve now (a restart, a failover, a shutdown,
 * a lost connection), as opposed to a fault in the statement: 08 connection exception, 57P01–57P03
 * admin, crash and cannot-connect-now shutdowns, 53300 too many connections.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND']);

/** True when `error` says the database is out of reach for now, so that a retry later may succeed. */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_NODE_CODES.has(code))) return true;
  // node-postgres reports a client whose connection broke, or a connection that ended mid-query, without a code.
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect)/.test(message);
}

/** Thrown by `transaction` callers that want to roll back without treating it as a failure. */
export class Rollback<T> extends Error {
  constructor(readonly value: T) {
    super('rollback');
  }
}

// Money and sequences are bigint columns; they are read as numbers and must stay safe integers.
pg.types.setTypeParser(20, (text: string) => {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error('bigint value outside the safe integer range');
  return value;
});

/**
 * On PostgreSQL every statement is sent as a named prepared statement, so that each connection
 * parses and plans it once instead of on every call. The name is derived from the SQL text. Behind a
 * pooler in transaction pooling (`DATABASE_POOLING=transaction`) every statement is unnamed instead: a
 * named statement lives in one server session, and the next transaction may run in another one.
 */
const statementNames = new Map<string, string>();
const STATEMENT_NAME_CACHE_LIMIT = 5000;

/**
 * A statement whose text starts with this comment is planned on every call, with its parameter values,
 * instead of being prepared once. For the few statements whose best plan depends on the values (a
 * range that is empty for one amount and holds every row for another); a prepared statement's generic
 * plan would pick one index for all of them.
 */
export const PLANNED_PER_CALL = '/* planned per call */';

function preparedQuery(sql: string, params: readonly unknown[], named: boolean): pg.QueryConfig {
  // An unnamed statement is planned at bind time with the values bound.
  if (!named || sql.startsWith(PLANNED_PER_CALL)) return { text: sql, values: params as unknown[] };
  let name = statementNames.get(sql);
  if (!name) {
    name = `s_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
    if (statementNames.size < STATEMENT_NAME_CACHE_LIMIT) statementNames.set(sql, name);
  }
  return { name, text: sql, values: params as unknown[] };
}

/** Runs one round trip, telling the observer (when there is one) what it sent and how long it took. */
async function observed<T>(observer: StatementObserver | null | undefined, sql: string, run: () => Promise<T>): Promise<T> {
  if (!observer) return run();
  const started = performance.now();
  try {
    return await run();
  } finally {
    observer(sql, performance.now() - started);
  }
}

/**
 * The answers of the statements of one pipelined round trip, once every one has answered; the first failure
 * is thrown then. Waiting for all (not `Promise.all`, which rejects at the first failure) means no statement of
 * a transaction is still in flight when its client goes back to the pool, and no failure goes unheard.
 */
async function allAnswered(answers: readonly Promise<pg.QueryResult>[]): Promise<pg.QueryResult[]> {
  const settled = await Promise.allSettled(answers);
  const failed = settled.find((answer): answer is PromiseRejectedResult => answer.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((answer) => (answer as PromiseFulfilledResult<pg.QueryResult>).value);
}

/** What PostgresDatabase uses of its pool: a `pg.Pool`, or the HostSelectingPool of a multi-host DATABASE_URL. */
interface ConnectionPool {
  connect(): Promise<pg.PoolClient>;
  query(statement: string | pg.QueryConfig): Promise<pg.QueryResult>;
  end(): Promise<void>;
}

class PostgresDatabase implements Database {
  readonly engine = 'postgres' as const;
  statement_observer: StatementObserver | null = null;
  constructor(
    private readonly pool: ConnectionPool,
    /** False behind a transaction pooler: every statement is sent unnamed (`preparedQuery`). */
    private readonly named_statements: boolean,
  ) {}

  async query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
    const result = await observed(this.statement_observer, sql, () => this.pool.query(preparedQuery(sql, params, this.named_statements)));
    return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
  }

  async exec(sql: string): Promise<void> {
    await observed(this.statement_observer, sql, () => this.pool.query(sql));
  }

  readonly acquire_wait = new AcquireWaitMeter();

  /**
   * One transaction on one pooled client in pipeline mode (node-postgres writes a statement without
   * waiting for the answer to the one before). BEGIN is not sent on its own: it goes with the
   * transaction's first statement, and COMMIT with its last batch of deferred writes, so a command's
   * transaction costs two round trips fewer (issue 15). A transaction that sent nothing sends no BEGIN
   * and no COMMIT at all.
   */
  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const asked = performance.now();
    const client = await this.pool.connect();
    const observer = this.statement_observer;
    const named = this.named_statements;
    this.acquire_wait.record(performance.now() - asked);
    let broken = false;
    // A checked-out client has no 'error' listener of the pool's. When the server ends the session
    // between two statements (a restart with a fast shutdown, pg_terminate_backend), the client emits
    // 'error'; unheard, that event would end the process. Heard, the next statement fails, the work
    // throws, and the client is discarded instead of going back to the pool.
    const onConnectionError = () => {
      broken = true;
    };
    client.on('error', onConnectionError);
    /** BEGIN has been sent (with the first statement). */
    let begun = false;
    /** COMMIT has been sent: the server has left the transaction block, committed or (after a failure) rolled back. */
    let ended = false;
    /** Statements written in one round trip (with BEGIN before the first of the transaction); the last one's answer. */
    const send = async (statements: readonly { sql: string; statement: string | pg.QueryConfig }[]): Promise<pg.QueryResult> => {
      const sent = begun ? statements : [{ sql: 'BEGIN', statement: 'BEGIN' }, ...statements];
      begun = true;
      const text = sent.map(({ sql }) => sql).join(';\n');
      if (sent.length === 1) return observed(observer, text, () => client.query(sent[0]!.statement));
      const answers = await observed(observer, text, () => allAnswered(sent.map(({ statement }) => client.query(statement))));
      return answers[answers.length - 1] as pg.QueryResult;
    };
    try {
      const tx = new UnitOfWork({
        async query<Row>(sql: string, params: readonly unknown[] = []) {
          const result = await send([{ sql, statement: preparedQuery(sql, params, named) }]);
          return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
        },
        async queryAfter<Row>(before: readonly { sql: string; params: readonly unknown[] }[], sql: string, params: readonly unknown[] = []) {
          const result = await send([...before.map((write) => ({ sql: write.sql, statement: preparedQuery(write.sql, write.params, named) })), { sql, statement: preparedQuery(sql, params, named) }]);
          return { rows: result.rows as Row[], rowCount: result.rowCount ?? 0 };
        },
        async exec(sql: string) {
          await send([{ sql, statement: sql }]);
        },
        async commit(last) {
          if (!begun && last.length === 0) return;
          ended = true;
          const texts = [...(begun ? [] : ['BEGIN']), ...last.map((write) => write.sql), 'COMMIT'];
          await observed(observer, texts.join(';\n'), () =>
            allAnswered([...(begun ? [] : [client.query('BEGIN')]), ...last.map((write) => client.query(preparedQuery(write.sql, write.params, named))), client.query('COMMIT')]),
          );
          begun = true;
        },
      });
      const value = await work(tx);
      await tx.commit();
      return value;
    } catch (error) {
      if (begun && !ended) {
        try {
          await observed(observer, 'ROLLBACK', () => client.query('ROLLBACK'));
        } catch {
          // A connection that cannot even roll back is discarded instead of going back to the pool.
          broken = true;
        }
      }
      throw error;
    } finally {
      client.removeListener('error', onConnectionError);
      client.release(broken);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** PostgreSQL's type oid of bytea. */
const BYTEA_OID = 17;

/**
 * PGlite's own bytea codec works a byte at a time in JavaScript (an array of one number, then one string,
 * per byte): a 4 MiB slip took 0.7 s and some hundreds of MiB of transient heap to write, and as much to
 * read. The hex form PostgreSQL reads and writes is made and parsed here by Node's native codec instead,
 * in one string of twice the bytes' length.
 */
const BYTEA_SERIALIZERS = {
  [BYTEA_OID]: (value: unknown): string => {
    if (!(value instanceof Uint8Array)) throw new Error('a bytea parameter is a Buffer or Uint8Array');
    return `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`;
  },
};
const BYTEA_PARSERS = {
  [BYTEA_OID]: (text: string): Buffer => Buffer.from(text.slice(2), 'hex'),
};

class PgliteDatabase implements Database {
  readonly engine = 'pglite' as const;
  statement_observer: StatementObserver | null = null;
  constructor(
    private readonly pglite: PGlite,
    private readonly releaseLock: () => void,
  ) {}

  async query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
    const result = await observed(this.statement_observer, sql, () => this.pglite.query<Row>(sql, params as unknown[]));
    return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
  }

  async exec(sql: string): Promise<void> {
    await observed(this.statement_observer, sql, () => this.pglite.exec(sql));
  }

  readonly acquire_wait = new AcquireWaitMeter();

  /**
   * PGlite sends BEGIN and COMMIT (or ROLLBACK) itself, inside this process. The observer is told of them
   * the way PostgreSQL sends them (BEGIN with the first statement, COMMIT with the last batch of deferred
   * writes, nothing for a transaction that sent nothing), so that both engines count the same round trips.
   */
  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const asked = performance.now();
    const observer = this.statement_observer;
    let begun = false;
    let ended = false;
    const told = (sql: string): string => {
      const text = begun ? sql : `BEGIN;\n${sql}`;
      begun = true;
      return text;
    };
    try {
      return await this.pglite.transaction(async (transaction) => {
        this.acquire_wait.record(performance.now() - asked);
        const tx = new UnitOfWork({
          async query<Row>(sql: string, params: readonly unknown[] = []) {
            const result = await observed(observer, told(sql), () => transaction.query<Row>(sql, params as unknown[]));
            return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
          },
          async queryAfter<Row>(before: readonly { sql: string; params: readonly unknown[] }[], sql: string, params: readonly unknown[] = []) {
            // One round trip as PostgreSQL sends it; a failure in `before` leaves the rest unsent, as the
            // server would refuse it in the aborted transaction.
            const result = await observed(observer, told([...before.map((write) => write.sql), sql].join(';\n')), async () => {
              for (const write of before) await transaction.query(write.sql, write.params as unknown[]);
              return transaction.query<Row>(sql, params as unknown[]);
            });
            return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
          },
          async exec(sql: string) {
            await observed(observer, told(sql), () => transaction.exec(sql));
          },
          async commit(last) {
            if (!begun && last.length === 0) return;
            ended = true;
            if (last.length === 0) {
              observer?.('COMMIT', 0);
              return;
            }
            await observed(observer, told([...last.map((write) => write.sql), 'COMMIT'].join(';\n')), async () => {
              for (const write of last) await transaction.query(write.sql, write.params as unknown[]);
            });
          },
        });
        const result = await work(tx);
        await tx.commit();
        return result;
      });
    } catch (error) {
      if (begun && !ended) observer?.('ROLLBACK', 0);
      throw error;
    }
  }

  async close(): Promise<void> {
    try {
      await this.pglite.close();
    } finally {
      this.releaseLock();
    }
  }
}

export class DataDirectoryLocked extends Error {
  constructor(
    readonly lock_path: string,
    readonly holder_pid: number | null,
  ) {
    super(
      `the data directory is in use by another process${holder_pid ? ` (pid ${holder_pid})` : ''}: ${lock_path}. ` +
        'PGlite can be opened by one process only; stop that process or use its API.',
    );
    this.name = 'DataDirectoryLocked';
  }
}

/** True when a process with this pid exists (signal 0 probes without signalling). */
export function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Reads the pid in a lock file; null when absent or unreadable. */
export function readLockHolder(dataDirectory: string): number | null {
  try {
    const pid = Number(fs.readFileSync(path.join(dataDirectory, 'service.lock'), 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 && processIsAlive(pid) ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Takes an exclusive lock on the data directory with an O_EXCL lock file holding our pid. A lock left
 * by a dead process is taken over; a live holder gets a clear error instead of a corrupted directory.
 */
function lockDataDirectory(dataDirectory: string): () => void {
  fs.mkdirSync(dataDirectory, { recursive: true });
  const lockPath = path.join(dataDirectory, 'service.lock');
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const descriptor = fs.openSync(lockPath, 'wx', 0o600);
      fs.writeSync(descriptor, String(process.pid));
      fs.closeSync(descriptor);
      return () => fs.rmSync(lockPath, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = readLockHolder(dataDirectory);
      if (holder !== null && holder !== process.pid) throw new DataDirectoryLocked(lockPath, holder);
      fs.rmSync(lockPath, { force: true });
    }
  }
  throw new DataDirectoryLocked(lockPath, null);
}

export interface OpenDatabaseOptions {
  database_url: string | null;
  /** PGlite data directory; `null` keeps the embedded database in memory (tests). */
  data_dir: string | null;
  pool_size?: number;
  /**
   * `session` (default): each pooled connection is a PostgreSQL session of the service's own (a direct
   * connection, or PgBouncer in session pooling), and statements are named prepared statements.
   * `transaction`: behind a pooler in transaction pooling (PgBouncer's `pool_mode = transaction`), where
   * each transaction may run in another server session, so nothing may be kept in one: statements are
   * unnamed, and no startup option is sent (PgBouncer 1.18 refuses the `options` startup parameter).
   */
  pooling?: DatabasePooling;
}

export type DatabasePooling = 'session' | 'transaction';

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.database_url) {
    const transactionPooling = options.pooling === 'transaction';
    const config: Omit<pg.PoolConfig, 'connectionString'> = {
      // Statements are written without waiting for the answer before: a transaction's BEGIN travels with
      // its first statement and its COMMIT with its last (PostgresDatabase.transaction).
      pipeline: true,
      max: options.pool_size ?? 10,
      // Every session runs in UTC so that date arithmetic in SQL never depends on the server's zone. Behind
      // a transaction pooler the time zone is set by a SET on each new connection, before the connection is
      // handed out: TimeZone is one of the parameters PgBouncer keeps per client and applies to whichever
      // server session the client's next transaction gets, so it is not state left behind in one session.
      ...(transactionPooling
        ? {
            onConnect: async (client: pg.ClientBase) => {
              await client.query("SET TimeZone = 'UTC'");
            },
          }
        : { options: '-c TimeZone=UTC' }),
    };
    // Several hosts, or target_session_attrs: the pool picks the host (src/platform/multi-host.ts).
    const multiHost = parseMultiHostUrl(options.database_url);
    if (multiHost) return new PostgresDatabase(new HostSelectingPool(multiHost, config), !transactionPooling);
    const pool = new pg.Pool({ ...config, connectionString: options.database_url });
    pool.on('error', () => {
      // An idle client that dies is dropped by the pool; the next query opens a new one.
    });
    return new PostgresDatabase(pool, !transactionPooling);
  }
  const { PGlite } = await import('@electric-sql/pglite');
  let releaseLock = () => {};
  let pglite: PGlite;
  if (options.data_dir) {
    const directory = path.resolve(options.data_dir);
    releaseLock = lockDataDirectory(directory);
    try {
      pglite = await PGlite.create(path.join(directory, 'pgdata'), { serializers: BYTEA_SERIALIZERS, parsers: BYTEA_PARSERS });
    } catch (error) {
      releaseLock();
      throw error;
    }
  } else {
    pglite = await PGlite.create({ serializers: BYTEA_SERIALIZERS, parsers: BYTEA_PARSERS });
  }
  await pglite.query("SET TimeZone = 'UTC'");
  return new PgliteDatabase(pglite, releaseLock);
}
