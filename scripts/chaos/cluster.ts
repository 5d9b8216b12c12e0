import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { createFreshDatabase, dropDatabase, withDatabaseName } from '../../bench/support.ts';

/**
 * The PostgreSQL a chaos run uses. Either the server of DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432), where the run creates a fresh database of its own and drops it
 * afterwards; or, for the run that restarts PostgreSQL, a private throwaway cluster (initdb in a
 * temporary directory, its own port, trust authentication on loopback) that the run can stop and start
 * without disturbing anybody else's database on the shared server. `--pg-restart-command` restarts the
 * DATABASE_URL server itself instead (a machine of one's own).
 */

const run = promisify(execFile);
const POSTGRES_BIN_DIRECTORIES = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];

export interface ChaosDatabase {
  /** The URL every service process and the checks use. */
  url: string;
  name: string;
  /** Where the server came from, for the report. */
  server: string;
  /** Stops PostgreSQL with a fast shutdown, waits `down_ms`, and starts it again; resolves when it answers. */
  restart(down_ms: number): Promise<{ stopped_at_ms: number; started_at_ms: number }>;
  /** The server's log text, when this machine can read it (for the deadlock report); null otherwise. */
  serverLog(): Promise<string | null>;
  /** Drops the database (unless kept) and stops a private cluster. */
  dispose(keep: boolean): Promise<void>;
}

/** The server log is read up to this many bytes from its end. */
const SERVER_LOG_TAIL_BYTES = 64 * 1024 * 1024;

export function readTail(file: string): string | null {
  try {
    const size = fs.statSync(file).size;
    const start = Math.max(0, size - SERVER_LOG_TAIL_BYTES);
    const descriptor = fs.openSync(file, 'r');
    try {
      const buffer = Buffer.alloc(size - start);
      fs.readSync(descriptor, buffer, 0, buffer.length, start);
      return buffer.toString('utf8');
    } finally {
      fs.closeSync(descriptor);
    }
  } catch {
    return null;
  }
}

/**
 * Where a local server writes its log: pg_current_logfile() with the logging collector, else Debian's
 * /var/log/postgresql/postgresql-<major>-<cluster>.log (pg_ctlcluster redirects stderr there).
 */
async function localServerLog(server_url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: server_url });
  try {
    await client.connect();
    const { rows } = await client.query<{ data_directory: string; current: string | null; version: string }>(
      "SELECT current_setting('data_directory') AS data_directory, pg_current_logfile() AS current, current_setting('server_version_num') AS version",
    );
    const row = rows[0];
    if (!row) return null;
    const candidates = [
      ...(row.current ? [path.isAbsolute(row.current) ? row.current : path.join(row.data_directory, row.current)] : []),
      `/var/log/postgresql/postgresql-${Math.floor(Number(row.version) / 10000)}-${path.basename(row.data_directory)}.log`,
    ];
    for (const candidate of candidates) {
      const text = readTail(candidate);
      if (text !== null) return text;
    }
    return null;
  } catch {
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}

export function postgresBinary(name: string): string {
  for (const directory of POSTGRES_BIN_DIRECTORIES) {
    const candidate = path.join(directory, name);
    if (fs.existsSync(candidate)) return candidate;
  }
  throw new Error(`${name} not found in ${POSTGRES_BIN_DIRECTORIES.join(', ')} (Debian package postgresql)`);
}

/** initdb and pg_ctl refuse to run as root: as root they run as the postgres user. */
export function asPostgres(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

export async function waitForServer(url: string, timeout_ms: number): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw new Error(`PostgreSQL at ${new URL(url).host} did not answer: ${String(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function runShell(command: string): Promise<void> {
  await run('sh', ['-c', command], { timeout: 120_000 });
}

/** A fresh database on the DATABASE_URL server; the restart (if asked for) runs the given shell command. */
export async function databaseOnServer(server_url: string, name: string, restart_command: string | null): Promise<ChaosDatabase> {
  const url = await createFreshDatabase(server_url, name);
  const serverUrl = withDatabaseName(server_url, 'postgres');
  return {
    url,
    name,
    server: `${new URL(server_url).host} (DATABASE_URL server)`,
    async restart(down_ms) {
      if (restart_command === null) throw new Error('no restart command for the DATABASE_URL server (--pg-restart-command)');
      const stopped_at_ms = Date.now();
      // A restart command restarts at once; the outage is as long as the command takes.
      void down_ms;
      await runShell(restart_command);
      await waitForServer(serverUrl, 120_000);
      return { stopped_at_ms, started_at_ms: Date.now() };
    },
    serverLog: () => localServerLog(serverUrl),
    async dispose(keep) {
      if (!keep) await dropDatabase(server_url, name);
    },
  };
}

/** A private cluster in a temporary directory, on a free loopback port, with a fresh database on it. */
export async function privateCluster(name: string, log: (line: string) => void): Promise<ChaosDatabase> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'chaos-pg-'));
  if (process.getuid?.() === 0) {
    // The postgres user owns its data directory; the temporary directory is made for it.
    await run('chown', ['postgres:postgres', directory]);
  }
  fs.chmodSync(directory, 0o700);
  const data = path.join(directory, 'data');
  const logFile = path.join(directory, 'postgres.log');
  const port = await freePort();
  const [initdb, initArgs] = asPostgres(postgresBinary('initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
  await run(initdb, initArgs, { timeout: 120_000 });
  // The log line prefix names the database, as on Debian's clusters, so that the deadlock report finds its lines.
  const serverOptions = `-p ${port} -k ${directory} -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=128MB -c "log_line_prefix=%m [%p] %q%u@%d "`;
  const pgCtl = (args: string[]) => {
    const [command, commandArgs] = asPostgres(postgresBinary('pg_ctl'), args);
    return run(command, commandArgs, { timeout: 120_000 });
  };
  const start = () => pgCtl(['-D', data, '-o', serverOptions, '-l', logFile, '-w', '-t', '60', 'start']);
  await start();
  const serverUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await waitForServer(serverUrl, 60_000);
  const url = await createFreshDatabase(serverUrl, name);
  log(`private PostgreSQL cluster on 127.0.0.1:${port} (${directory})`);
  let stopped = false;
  return {
    url,
    name,
    server: `private cluster 127.0.0.1:${port} (${path.dirname(postgresBinary('pg_ctl'))})`,
    async restart(down_ms) {
      const stopped_at_ms = Date.now();
      // Fast shutdown: active transactions are aborted and every client connection is closed.
      await pgCtl(['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
      await new Promise((resolve) => setTimeout(resolve, down_ms));
      await start();
      await waitForServer(serverUrl, 60_000);
      return { stopped_at_ms, started_at_ms: Date.now() };
    },
    serverLog: async () => readTail(logFile),
    async dispose(keep) {
      if (stopped) return;
      stopped = true;
      if (keep) {
        log(`kept the private cluster running: ${serverUrl} (data in ${data}); stop it with pg_ctl -D ${data} stop`);
        return;
      }
      await pgCtl(['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** The deadlock counter of one database (pg_stat_database); survives a clean restart. */
export async function deadlocksOf(url: string, name: string): Promise<number> {
  const client = new pg.Client({ connectionString: withDatabaseName(url, 'postgres') });
  await client.connect();
  try {
    const { rows } = await client.query<{ deadlocks: string }>('SELECT deadlocks::text FROM pg_stat_database WHERE datname = $1', [name]);
    return Number(rows[0]?.deadlocks ?? 0);
  } finally {
    await client.end();
  }
}
