import pg from 'pg';

/**
 * A DATABASE_URL that names several PostgreSQL servers, in libpq's syntax
 * (`postgres://user@primary:5432,standby:5432/payments?target_session_attrs=read-write`), so that the
 * service follows a failover to a promoted standby without a change of configuration (issue 33, item 3).
 * node-postgres understands neither a host list nor `target_session_attrs`, so this file reads them and
 * keeps one `pg.Pool` per host; new connections go to the host that last accepted one, else to the others in
 * the order of the URL, and with `read-write` a session on a server that is read-only (a standby in recovery)
 * is closed and the next host is tried, as libpq does. A URL with one host and no `target_session_attrs` is
 * left to node-postgres exactly as before.
 */

export type TargetSessionAttrs = 'any' | 'read-write';

export interface DatabaseHost {
  host: string;
  port: number;
}

export interface MultiHostUrl {
  hosts: DatabaseHost[];
  target_session_attrs: TargetSessionAttrs;
  /** How long one host may take to accept a connection before the next is tried. */
  connect_timeout_ms: number;
  /** The URL node-postgres is given for one host: the same user, password, database and other parameters. */
  urlOf(host: DatabaseHost): string;
}

/**
 * libpq waits for a host without a limit unless `connect_timeout` says otherwise; here a host that does not
 * answer (a machine gone, a partition) costs at most this long before the next is tried. A refused
 * connection (a server killed on a machine that is up) fails at once and costs nothing.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_PORT = 5432;
const TARGET_SESSION_ATTRS: readonly TargetSessionAttrs[] = ['any', 'read-write'];

/** A DATABASE_URL this file cannot read; the message names the part, never the password. */
export class DatabaseUrlError extends Error {
  constructor(reason: string) {
    super(`DATABASE_URL: ${reason}`);
    this.name = 'DatabaseUrlError';
  }
}

function parseHost(entry: string): DatabaseHost {
  // An IPv6 address is written in brackets, so that its colons are not read as the port's.
  const match = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d*))?$/.exec(entry);
  if (!match) throw new DatabaseUrlError(`cannot read the host "${entry}" (host, host:port or [ipv6]:port)`);
  const port = match[2] === undefined || match[2] === '' ? DEFAULT_PORT : Number(match[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new DatabaseUrlError(`the port of "${entry}" is not a port number`);
  return { host: decodeURIComponent(match[1]!), port };
}

function parseConnectTimeout(value: string | null): number {
  if (value === null) return DEFAULT_CONNECT_TIMEOUT_MS;
  const seconds = Number(value);
  // libpq reads connect_timeout in whole seconds; 0 means no limit there, which a failover cannot afford.
  if (!Number.isInteger(seconds) || seconds < 1) throw new DatabaseUrlError('connect_timeout is a whole number of seconds, at least 1');
  return seconds * 1000;
}

/**
 * Reads a libpq URL with a host list or `target_session_attrs`. Null for any other URL (one host and no
 * `target_session_attrs`, or not of the `postgres://` form), which node-postgres reads itself.
 */
export function parseMultiHostUrl(url: string): MultiHostUrl | null {
  const match = /^(postgres(?:ql)?:\/\/)([^/?#]*)([^?#]*)(?:\?([^#]*))?$/.exec(url);
  if (!match) return null;
  const [, scheme, authority, path, query] = match as unknown as [string, string, string, string, string | undefined];
  // The user information ends at the last '@': a password may hold an encoded one, never a raw one.
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = authority.slice(at + 1);
  const params = new URLSearchParams(query ?? '');
  const attrs = params.get('target_session_attrs');
  if (!hostList.includes(',') && attrs === null) return null;
  if (attrs !== null && !TARGET_SESSION_ATTRS.includes(attrs as TargetSessionAttrs)) {
    throw new DatabaseUrlError(`target_session_attrs "${attrs}" is not supported (${TARGET_SESSION_ATTRS.join(' or ')})`);
  }
  if (params.has('host') || params.has('port')) throw new DatabaseUrlError('with several hosts, list them in the URL (host1:port1,host2:port2), not in host= or port= parameters');
  const hosts = hostList.split(',').map((entry) => {
    if (entry === '') throw new DatabaseUrlError('every host of the list needs a name (an empty entry between commas)');
    return parseHost(entry);
  });
  const connect_timeout_ms = parseConnectTimeout(params.get('connect_timeout'));
  // Both are this file's to apply; node-postgres would ignore the first and read the second its own way.
  params.delete('target_session_attrs');
  params.delete('connect_timeout');
  const rest = params.toString();
  return {
    hosts,
    target_session_attrs: (attrs ?? 'any') as TargetSessionAttrs,
    connect_timeout_ms,
    urlOf: (host) => {
      // An IPv6 address keeps its brackets; a name is encoded again as it was read.
      const name = host.host.startsWith('[') ? host.host : encodeURIComponent(host.host);
      return `${scheme}${userinfo}${name}:${host.port}${path}${rest === '' ? '' : `?${rest}`}`;
    },
  };
}

/** A server that accepted the connection but serves read-only sessions (a standby in recovery). */
export class ReadOnlyServer extends Error {
  constructor() {
    super('the server is read-only (a standby in recovery, or default_transaction_read_only)');
    this.name = 'ReadOnlyServer';
  }
}

/**
 * Every host refused a session of the kind asked for. Its SQLSTATE, 08001 (the client could not establish
 * a connection), makes it "database unavailable" (src/platform/db.ts): a 503 that the caller retries, as
 * during a restart. The message names each host and why, without credentials.
 */
export class NoUsableHost extends Error {
  readonly code = '08001';
  constructor(failures: readonly { host: DatabaseHost; error: unknown }[]) {
    super(
      `no server of DATABASE_URL accepted a session: ${failures
        .map(({ host, error }) => `${host.host}:${host.port} (${error instanceof Error ? error.message : String(error)})`)
        .join('; ')}`,
      { cause: failures[0]?.error },
    );
    this.name = 'NoUsableHost';
  }
}

/**
 * The check libpq makes for `read-write`: `SHOW transaction_read_only` answers `on` on a standby in recovery
 * and on a server whose default_transaction_read_only is on. Run once per new connection, never per query:
 * a server in recovery stays read-only until promoted, and a primary becomes a standby only through a
 * restart, which closes every connection to it.
 */
async function requireReadWrite(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ transaction_read_only: string }>('SHOW transaction_read_only');
  if (rows[0]?.transaction_read_only !== 'off') throw new ReadOnlyServer();
}

/**
 * The pool of a multi-host URL, with what PostgresDatabase uses of a `pg.Pool` (connect, query, end).
 * `config` is the pool configuration of a single host (size, pipeline mode, session options).
 */
export class HostSelectingPool {
  private readonly pools: pg.Pool[];
  /** The host that last accepted a connection; new connections try it first. */
  private preferred = 0;

  constructor(
    private readonly target: MultiHostUrl,
    private readonly config: Omit<pg.PoolConfig, 'connectionString'>,
  ) {
    this.pools = target.hosts.map((host) => this.poolFor(host));
  }

  private poolFor(host: DatabaseHost): pg.Pool {
    const timeout = this.target.connect_timeout_ms;
    // The connect timeout is the client's, not the pool's: the pool's `connectionTimeoutMillis` would also
    // bound the wait for a free connection, and a busy pool would then look like a dead host.
    class BoundedClient extends pg.Client {
      constructor(config?: pg.ClientConfig) {
        super({ ...config, connectionTimeoutMillis: timeout });
      }
    }
    // The session's own set-up (the time zone behind a transaction pooler) runs first, then the host check.
    const setUp = this.config.onConnect;
    const onConnect =
      this.target.target_session_attrs === 'read-write'
        ? async (client: pg.ClientBase) => {
            await setUp?.(client);
            await requireReadWrite(client);
          }
        : setUp;
    const pool = new pg.Pool({
      ...this.config,
      connectionString: this.target.urlOf(host),
      Client: BoundedClient,
      ...(onConnect ? { onConnect } : {}),
    });
    pool.on('error', () => {
      // An idle client that dies is dropped by the pool; the next connection is chosen again.
    });
    return pool;
  }

  /** The host that last accepted a connection (for tests and diagnostics). */
  get current(): DatabaseHost {
    return this.target.hosts[this.preferred]!;
  }

  /** The preferred host first, then the others in the order of the URL. */
  private order(): number[] {
    return [this.preferred, ...this.target.hosts.map((_, index) => index).filter((index) => index !== this.preferred)];
  }

  async connect(): Promise<pg.PoolClient> {
    const failures: { host: DatabaseHost; error: unknown }[] = [];
    for (const index of this.order()) {
      try {
        const client = await this.pools[index]!.connect();
        if (index !== this.preferred) this.moveTo(index);
        return client;
      } catch (error) {
        failures.push({ host: this.target.hosts[index]!, error });
      }
    }
    throw new NoUsableHost(failures);
  }

  /**
   * New connections go to `index` from now on. The pool of the host left behind is ended (its idle clients
   * closed, the ones in use closed when released) and replaced by an empty one, so that no session opened
   * before the move is handed out again should the service ever come back to that host.
   */
  private moveTo(index: number): void {
    const left = this.preferred;
    this.preferred = index;
    const retired = this.pools[left]!;
    this.pools[left] = this.poolFor(this.target.hosts[left]!);
    retired.end().catch(() => {});
  }

  /** One statement on a pooled connection; a connection whose statement failed is closed, as `pg.Pool.query` does. */
  async query(statement: string | pg.QueryConfig): Promise<pg.QueryResult> {
    const client = await this.connect();
    // As in pg.Pool.query: a checked-out client has no 'error' listener of the pool's, and a server that ends
    // the session (its postmaster killed: FATAL 57P01) would otherwise emit an unheard 'error' that ends the
    // process. Heard, the statement fails and the client is closed instead of going back to the pool.
    const onConnectionError = () => {};
    client.on('error', onConnectionError);
    try {
      const result = typeof statement === 'string' ? await client.query(statement) : await client.query(statement);
      client.release();
      return result;
    } catch (error) {
      client.release(error instanceof Error ? error : true);
      throw error;
    } finally {
      client.removeListener('error', onConnectionError);
    }
  }

  async end(): Promise<void> {
    await Promise.all(this.pools.map((pool) => pool.end()));
  }
}
