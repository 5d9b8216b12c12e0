import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, openDatabase } from '../../src/platform/db.ts';
import { DEFAULT_CONNECT_TIMEOUT_MS, HostSelectingPool, NoUsableHost, parseMultiHostUrl } from '../../src/platform/multi-host.ts';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';

describe('a multi-host DATABASE_URL (libpq syntax)', () => {
  it('reads the hosts in order, their ports (5432 when absent), target_session_attrs and connect_timeout', () => {
    const parsed = parseMultiHostUrl('postgres://app:s%40cret@db-a:5433,db-b,[::1]:6000/payments?target_session_attrs=read-write&connect_timeout=3&sslmode=disable');
    expect(parsed?.hosts).toEqual([
      { host: 'db-a', port: 5433 },
      { host: 'db-b', port: 5432 },
      { host: '[::1]', port: 6000 },
    ]);
    expect(parsed?.target_session_attrs).toBe('read-write');
    expect(parsed?.connect_timeout_ms).toBe(3000);
    // Each host's URL keeps the user, password, database and other parameters, and drops the two read here.
    expect(parsed?.urlOf(parsed.hosts[1]!)).toBe('postgres://app:s%40cret@db-b:5432/payments?sslmode=disable');
    expect(parsed?.urlOf(parsed.hosts[2]!)).toBe('postgres://app:s%40cret@[::1]:6000/payments?sslmode=disable');
  });

  it('defaults to any session and a bounded connect timeout, and reads postgresql:// too', () => {
    const parsed = parseMultiHostUrl('postgresql://h1:1,h2:2/db');
    expect(parsed?.target_session_attrs).toBe('any');
    expect(parsed?.connect_timeout_ms).toBe(DEFAULT_CONNECT_TIMEOUT_MS);
    expect(parsed?.urlOf(parsed.hosts[0]!)).toBe('postgresql://h1:1/db');
  });

  it('leaves a URL with one host and no target_session_attrs to node-postgres', () => {
    expect(parseMultiHostUrl('postgres://postgres@127.0.0.1:5432/test')).toBeNull();
    expect(parseMultiHostUrl('postgres://u:pa,ss@127.0.0.1/test')).toBeNull();
    expect(parseMultiHostUrl('socket:/var/run/postgresql?db=test')).toBeNull();
    // One host with target_session_attrs is read here: the check applies to it.
    expect(parseMultiHostUrl('postgres://u@h:1/db?target_session_attrs=read-write')?.hosts).toEqual([{ host: 'h', port: 1 }]);
  });

  it('refuses what it cannot honour, naming the part and never the password', () => {
    const refusal = (url: string) => {
      try {
        parseMultiHostUrl(url);
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(refusal('postgres://u:hunter2@h1,h2/db?target_session_attrs=standby')).toMatch(/target_session_attrs "standby" is not supported/);
    expect(refusal('postgres://u:hunter2@h1,,h2/db')).toMatch(/empty entry/);
    expect(refusal('postgres://u:hunter2@h1:99999,h2/db')).toMatch(/not a port number/);
    expect(refusal('postgres://u:hunter2@h1,h2/db?connect_timeout=0')).toMatch(/connect_timeout/);
    expect(refusal('postgres://u:hunter2@h1,h2/db?host=h3')).toMatch(/list them in the URL/);
    for (const url of ['postgres://u:hunter2@h1,h2/db?target_session_attrs=standby', 'postgres://u:hunter2@h1:99999,h2/db']) expect(refusal(url)).not.toContain('hunter2');
  });

  it('reports every host failing as "database unavailable" (08001), so that callers answer 503 and retry', () => {
    const error = new NoUsableHost([
      { host: { host: 'a', port: 1 }, error: new Error('connect ECONNREFUSED') },
      { host: { host: 'b', port: 2 }, error: new Error('the server is read-only') },
    ]);
    expect(isDatabaseUnavailable(error)).toBe(true);
    expect(error.message).toBe('no server of DATABASE_URL accepted a session: a:1 (connect ECONNREFUSED); b:2 (the server is read-only)');
  });
});

/**
 * A TCP forwarder to the test server that the test can take down and bring back on the same port: a
 * host of the URL that dies (its sessions cut, new connections refused) and returns.
 */
class Forwarder {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    const server = net.createServer((socket) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const end of [socket, upstream]) {
        this.sockets.add(end);
        end.on('error', () => {});
        end.on('close', () => this.sockets.delete(end));
      }
      socket.pipe(upstream).pipe(socket);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** A database of the test server whose sessions are read-only, as on a standby; dropped afterwards. */
async function withReadOnlyDatabase(url: string, work: (name: string) => Promise<void>): Promise<void> {
  const name = `${new URL(url).pathname.slice(1)}_read_only`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
    await work(name);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

/**
 * A test database and forwarders to its server, for one describe block: `forwarder()` starts one, and
 * `multiHostUrl` names the database through the given ports.
 */
function forwardingFixture() {
  const fixture = {
    testDatabase: null as unknown as TestDatabase,
    server: null as unknown as URL,
    forwarders: [] as Forwarder[],
    async forwarder(): Promise<Forwarder> {
      const created = new Forwarder({ host: fixture.server.hostname, port: Number(fixture.server.port || 5432) });
      await created.start();
      fixture.forwarders.push(created);
      return created;
    },
    multiHostUrl: (ports: readonly number[], query: string) =>
      `postgres://${fixture.server.username}@${ports.map((port) => `127.0.0.1:${port}`).join(',')}${fixture.server.pathname}?${query}`,
  };
  beforeAll(async () => {
    fixture.testDatabase = await createTestDatabase();
    fixture.server = new URL(fixture.testDatabase.url!);
  });
  afterAll(async () => {
    for (const forwarder of fixture.forwarders) await forwarder.stop().catch(() => {});
    await fixture.testDatabase?.close();
  });
  return fixture;
}

describe.skipIf(!usingPostgres)('the host-selecting pool of a multi-host DATABASE_URL', () => {
  const fixture = forwardingFixture();
  const forwarder = () => fixture.forwarder();
  const multiHostUrl = fixture.multiHostUrl;

  it('goes to the next host when one dies, stays there when it comes back, and evicts the broken sessions', async () => {
    const [first, second] = [await forwarder(), await forwarder()];
    const target = parseMultiHostUrl(multiHostUrl([first.port, second.port], 'target_session_attrs=read-write&connect_timeout=2'))!;
    const pool = new HostSelectingPool(target, { max: 3 });
    try {
      expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(pool.current.port).toBe(first.port);
      await first.stop();
      // The idle session through the first host was cut: the next statement opens a session on the second.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await pool.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
      expect(pool.current.port).toBe(second.port);
      await first.start();
      const client = await pool.connect();
      client.release();
      // libpq would go back to the first host of the list; the pool stays on the host that last served.
      expect(pool.current.port).toBe(second.port);
    } finally {
      await pool.end();
    }
  });

  it('a statement whose connection breaks fails, without an unheard error event, and the next one goes to the other host', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.prependListener('uncaughtException', onUncaught);
    const [first, second] = [await forwarder(), await forwarder()];
    const database = await openDatabase({ database_url: multiHostUrl([first.port, second.port], 'target_session_attrs=read-write'), data_dir: null, pool_size: 1 });
    try {
      const sleeping = database.query('SELECT pg_sleep(5)');
      await new Promise((resolve) => setTimeout(resolve, 300));
      // The connection ends while the statement runs, as when a server's machine or postmaster dies.
      await first.stop();
      await expect(sleeping).rejects.toThrow();
      expect((await database.query<{ port: number }>('SELECT 1 AS port')).rows).toEqual([{ port: 1 }]);
      expect(uncaught).toEqual([]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      await database.close();
    }
  });

});

describe.skipIf(!usingPostgres)('the host-selecting pool and a read-only server', () => {
  const fixture = forwardingFixture();

  it('with read-write, refuses a read-only server with 08001; without it, takes that server', async () => {
    await withReadOnlyDatabase(fixture.testDatabase.url!, async (readOnly) => {
      const [one, two] = [await fixture.forwarder(), await fixture.forwarder()];
      const url = (query: string) => `postgres://${fixture.server.username}@127.0.0.1:${one.port},127.0.0.1:${two.port}/${readOnly}?${query}`;
      const strict = await openDatabase({ database_url: url('target_session_attrs=read-write'), data_dir: null, pool_size: 2 });
      const error = await strict.query('SELECT 1').catch((failure: unknown) => failure);
      await strict.close();
      expect(error).toBeInstanceOf(NoUsableHost);
      expect(isDatabaseUnavailable(error)).toBe(true);
      expect((error as Error).message).toMatch(new RegExp(`127.0.0.1:${one.port} \\(the server is read-only.*127.0.0.1:${two.port} \\(the server is read-only`));
      const lenient = await openDatabase({ database_url: url('target_session_attrs=any'), data_dir: null, pool_size: 2 });
      try {
        expect((await lenient.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await lenient.close();
      }
    });
  });
});

describe.skipIf(!usingPostgres)('a multi-host DATABASE_URL behind a transaction pooler', () => {
  const fixture = forwardingFixture();

  it('runs the session set-up of pooled connections (the time zone SET) and the read-write check, both, on each new session', async () => {
    const [one, two] = [await fixture.forwarder(), await fixture.forwarder()];
    const name = new URL(fixture.testDatabase.url!).pathname;
    const url = `postgres://${fixture.server.username}@127.0.0.1:${one.port},127.0.0.1:${two.port}${name}?target_session_attrs=read-write`;
    // The server's sessions start in another zone, so that only the set-up's SET can make them UTC.
    const database = await openDatabase({ database_url: `${url}&options=-c%20TimeZone%3DAsia%2FBangkok`, data_dir: null, pool_size: 2, pooling: 'transaction' });
    try {
      const { rows } = await database.query<{ zone: string; read_only: string }>("SELECT current_setting('TimeZone') AS zone, current_setting('transaction_read_only') AS read_only");
      expect(rows).toEqual([{ zone: 'UTC', read_only: 'off' }]);
      const named = await database.query<{ count: number }>('SELECT count(*)::int AS count FROM pg_prepared_statements');
      expect(named.rows[0]?.count).toBe(0);
    } finally {
      await database.close();
    }
  });
});

describe.skipIf(!usingPostgres)('a multi-host DATABASE_URL whose hosts all refuse', () => {
  it('fails with 08001 naming each host', async () => {
    const dead = new Forwarder({ host: '127.0.0.1', port: 1 });
    await dead.start();
    await dead.stop();
    const database = await openDatabase({ database_url: `postgres://postgres@127.0.0.1:${dead.port},127.0.0.1:${dead.port}/postgres?connect_timeout=1`, data_dir: null, pool_size: 1 });
    try {
      const error = await database.transaction(async (tx) => tx.query('SELECT 1')).catch((failure: unknown) => failure);
      expect(isDatabaseUnavailable(error)).toBe(true);
      expect((error as Error).message).toContain(`127.0.0.1:${dead.port} (connect ECONNREFUSED`);
    } finally {
      await database.close();
    }
  });
});
