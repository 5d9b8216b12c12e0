import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, openDatabase, type Database } from '../../src/platform/db.ts';
import { replicatedCluster, replicationAvailable, type ReplicatedDatabase } from '../../scripts/chaos/standby.ts';
import { NotificationListener } from '../../src/platform/notifications.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { usingPostgres } from '../support/database.ts';

/**
 * Issue 33, item 3: a primary with a synchronous streaming standby, both private clusters of this test; the
 * primary's postmaster is killed with SIGKILL while a writer commits, the standby is promoted, and a Database
 * opened with the multi-host URL (`target_session_attrs=read-write`) goes on writing, now to the promoted
 * standby, with every write it was told was committed there. The chaos run (`npm run chaos -- --failover`)
 * does the same under the service's whole load.
 */
/** Two writers that insert one row after another, as clients that retry would, keeping what was acknowledged and where. */
function startWriters(database: Database): { acknowledged: number[]; ports: number[]; stop: () => Promise<void> } {
  const acknowledged: number[] = [];
  const ports: number[] = [];
  let next = 1;
  let stopped = false;
  const writer = async () => {
    while (!stopped) {
      const id = next++;
      try {
        const port = await database.transaction(async (tx) => {
          const { rows } = await tx.query<{ port: number }>('INSERT INTO writes (id) VALUES ($1) RETURNING inet_server_port() AS port', [id]);
          return rows[0]!.port;
        });
        acknowledged.push(id);
        ports.push(port);
      } catch (error) {
        // The kill and the promotion are seen as "unavailable", never as another error.
        if (!isDatabaseUnavailable(error)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };
  const writers = [writer(), writer()];
  return {
    acknowledged,
    ports,
    stop: async () => {
      stopped = true;
      await Promise.all(writers);
    },
  };
}

async function until(condition: () => boolean, what: string, timeout_ms = 20_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A worker's LISTEN session (src/platform/notifications.ts) on a URL that lists `first` before `second`, and a
 * check that it hears a notification sent through `database` (which writes to the primary).
 */
async function listenerHearsPrimary(database: Database, url_of: (first: number, second: number) => string, first: number, second: number): Promise<number> {
  const heard: string[] = [];
  const listener = new NotificationListener({
    connection_string: url_of(first, second),
    channel: 'failover_probe',
    on_notification: (payload) => heard.push(payload),
    on_listening: () => {},
    logger: createLogger('silent'),
    minimum_backoff_ms: 20,
    maximum_backoff_ms: 200,
  });
  listener.start();
  try {
    await until(() => listener.listening, 'the listener to listen');
    const probe = `probe-${Date.now()}`;
    await database.query('SELECT pg_notify($1, $2)', ['failover_probe', probe]);
    await until(() => heard.includes(probe), 'the notification');
    return listener.listens;
  } finally {
    await listener.stop();
  }
}

const skipReason = !usingPostgres ? 'a PostgreSQL run only' : !replicationAvailable() ? 'initdb, pg_ctl or pg_basebackup not found (Debian package postgresql)' : null;

describe.skipIf(skipReason !== null)(`failover to a promoted synchronous standby${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let cluster: ReplicatedDatabase;
  let database: Database;

  beforeAll(async () => {
    cluster = await replicatedCluster(`failover_test_${process.pid}`, () => {});
    database = await openDatabase({ database_url: cluster.url, data_dir: null, pool_size: 3 });
    await database.exec('CREATE TABLE writes (id integer PRIMARY KEY)');
  }, 60_000);

  afterAll(async () => {
    await database?.close();
    await cluster?.dispose(false);
  }, 30_000);

  /** A multi-host URL of the two clusters in the given order of ports. */
  const urlOf = (first: number, second: number) => {
    const primary = new URL(cluster.primary_url);
    return `postgres://${primary.username}@127.0.0.1:${first},127.0.0.1:${second}${primary.pathname}?target_session_attrs=read-write&connect_timeout=5`;
  };
  const portOf = (url: string) => Number(new URL(url).port);

  it('a LISTEN session given the standby first settles on the primary, the standby refusing LISTEN in recovery', async () => {
    expect(await listenerHearsPrimary(database, urlOf, portOf(cluster.standby_url), portOf(cluster.primary_url))).toBe(1);
  }, 60_000);

  it('loses no acknowledged write, and the next writes go to the promoted standby', async () => {
    const { acknowledged, ports, stop } = startWriters(database);
    while (acknowledged.length < 50) await new Promise((resolve) => setTimeout(resolve, 10));
    const primaryPort = Number(new URL(cluster.primary_url).port);
    const standbyPort = Number(new URL(cluster.standby_url).port);
    expect(new Set(ports)).toEqual(new Set([primaryPort]));

    const times = await cluster.failover();
    expect(times.sync_state_before_kill).toBe('sync');
    const acknowledgedBeforeKill = acknowledged.length;
    const deadline = Date.now() + 30_000;
    while (!ports.includes(standbyPort) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const firstWriteOnStandbyMs = Date.now() - times.killed_at_ms;
    while (acknowledged.length < acknowledgedBeforeKill + 50 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    await stop();

    expect(ports.includes(standbyPort)).toBe(true);
    expect(firstWriteOnStandbyMs).toBeLessThan(30_000);
    // Once a write went to the promoted standby, none went back to the killed primary.
    expect(ports.slice(ports.indexOf(standbyPort)).every((port) => port === standbyPort)).toBe(true);
    const promoted = new pg.Client({ connectionString: cluster.standby_url });
    await promoted.connect();
    try {
      const { rows: recovery } = await promoted.query<{ in_recovery: boolean }>('SELECT pg_is_in_recovery() AS in_recovery');
      expect(recovery[0]?.in_recovery).toBe(false);
      const { rows } = await promoted.query<{ id: number }>('SELECT id FROM writes WHERE id = ANY($1::int[])', [acknowledged]);
      // Every acknowledged write is on the promoted standby, the ones committed on the primary before the kill included.
      expect(rows.map((row) => row.id).sort((left, right) => left - right)).toEqual([...acknowledged].sort((left, right) => left - right));
    } finally {
      await promoted.end();
    }
  }, 60_000);

  it('after the failover, a LISTEN session given the killed primary first listens on the promoted standby', async () => {
    expect(await listenerHearsPrimary(database, urlOf, portOf(cluster.primary_url), portOf(cluster.standby_url))).toBe(1);
  }, 60_000);
});
