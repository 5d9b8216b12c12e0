import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ensureDebianProgram } from './debian-package.ts';

/**
 * A private PgBouncer in transaction pooling in front of a PostgreSQL server, for the PgBouncer pass
 * (`npm run test:pgbouncer`, test/support/global-setup.ts), the test of the pooling setting
 * (test/platform/pgbouncer.test.ts) and the chaos run through PgBouncer (`npm run chaos -- --pgbouncer`).
 * Debian's pgbouncer (1.18 on bookworm) runs as a process of its own: its configuration, log and pid file
 * in a temporary directory, on a free loopback port, no Unix socket. One wildcard database entry sends every
 * database name to the server, so that the databases the tests create on the fly are reached without a
 * reload. Clients are trusted (loopback only); the server is reached as the user of its URL.
 */

export const PGBOUNCER_PATH = process.env.PGBOUNCER_PATH ?? '/usr/sbin/pgbouncer';

/**
 * The pgbouncer binary, installed by scripts/ensure-pgbouncer.sh when it is missing. With CI=true a
 * pgbouncer that cannot be installed is an error (a green CI must mean the pass ran); elsewhere null, with
 * the reason on stderr, and the caller skips.
 */
export function ensurePgBouncer(): string | null {
  return ensureDebianProgram({ name: 'pgbouncer', program_path: PGBOUNCER_PATH, path_variable: 'PGBOUNCER_PATH', skipped_label: 'pgbouncer' });
}

export interface PgBouncerOptions {
  /** The PostgreSQL server behind it (host, port, user and password are taken; the database name is not). */
  server_url: string;
  /** Server connections per database and user (PgBouncer's `default_pool_size`). */
  pool_size?: number;
  /** Client connections PgBouncer accepts in all (`max_client_conn`). */
  max_clients?: number;
  /** Startup parameters accepted and dropped instead of refused (`ignore_startup_parameters`); none by default. */
  ignore_startup_parameters?: readonly string[];
}

export interface PgBouncer {
  port: number;
  pid: number;
  /** The URL of `database` through PgBouncer, as the server URL's user. */
  url(database: string): string;
  /** Rows of an admin console command (`SHOW STATS`, `SHOW POOLS`). */
  show(command: string): Promise<Record<string, unknown>[]>;
  /** Everything PgBouncer logged so far. */
  log(): string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** PgBouncer's configuration values are unquoted; a value with a space or quote in it is refused here. */
function plain(value: string, what: string): string {
  if (!/^[^\s'"\\;]+$/.test(value)) throw new Error(`the ${what} of the server URL cannot be written into pgbouncer.ini`);
  return value;
}

function configurationOf(directory: string, port: number, options: PgBouncerOptions): { ini: string; users: string; user: string } {
  const server = new URL(options.server_url);
  const user = plain(decodeURIComponent(server.username) || 'postgres', 'user');
  const password = decodeURIComponent(server.password);
  const target = [`host=${plain(server.hostname || '127.0.0.1', 'host')}`, `port=${plain(server.port || '5432', 'port')}`, `user=${user}`, ...(password ? [`password=${plain(password, 'password')}`] : [])];
  const ini = [
    '[databases]',
    // Every database name goes to the same server: the test files' databases come and go.
    `* = ${target.join(' ')}`,
    '',
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    // No Unix socket: two bouncers of two runs would meet in /tmp.
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(directory, 'users.txt')}`,
    `admin_users = ${user}`,
    'pool_mode = transaction',
    `default_pool_size = ${options.pool_size ?? 20}`,
    `max_client_conn = ${options.max_clients ?? 500}`,
    ...(options.ignore_startup_parameters?.length ? [`ignore_startup_parameters = ${options.ignore_startup_parameters.map((name) => plain(name, 'startup parameter')).join(',')}`] : []),
    // A client that waits for a server connection fails after this long instead of hanging a test.
    'query_wait_timeout = 60',
    `logfile = ${path.join(directory, 'pgbouncer.log')}`,
    `pidfile = ${path.join(directory, 'pgbouncer.pid')}`,
    '',
  ].join('\n');
  return { ini, users: `"${user}" ""\n`, user };
}

/** PgBouncer refuses to run as root: as root it is told to switch to the postgres user (or nobody). */
function runAsUser(): string | null {
  if (process.getuid?.() !== 0) return null;
  return spawnSync('id', ['-u', 'postgres']).status === 0 ? 'postgres' : 'nobody';
}

async function launch(binary: string, options: PgBouncerOptions): Promise<{ child: ChildProcess; port: number; directory: string; user: string }> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'pgbouncer-'));
  const runAs = runAsUser();
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort();
    const { ini, users, user } = configurationOf(directory, port, options);
    fs.writeFileSync(path.join(directory, 'pgbouncer.ini'), ini);
    fs.writeFileSync(path.join(directory, 'users.txt'), users);
    if (runAs !== null) spawnSync('chown', ['-R', runAs, directory]);
    const child = spawn(binary, [...(runAs === null ? [] : ['-u', runAs]), path.join(directory, 'pgbouncer.ini')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (chunk) => (stderr += String(chunk)));
    const deadline = Date.now() + 10_000;
    while (child.exitCode === null && child.signalCode === null && !(await accepts(port)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    if (child.exitCode === null && child.signalCode === null && (await accepts(port))) return { child, port, directory, user };
    child.kill('SIGKILL');
    const logged = fs.existsSync(path.join(directory, 'pgbouncer.log')) ? fs.readFileSync(path.join(directory, 'pgbouncer.log'), 'utf8') : '';
    // Another process may have taken the free port between the probe and the bind: another port then.
    if (attempt >= 3) throw new Error(`pgbouncer did not start: ${`${stderr}\n${logged}`.trim().slice(-2000)}`);
  }
}

/** Starts a private PgBouncer; `stop()` ends it and removes its directory. */
export async function startPgBouncer(binary: string, options: PgBouncerOptions): Promise<PgBouncer> {
  const { child, port, directory, user } = await launch(binary, options);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // A run that ends without calling stop (a timeout, an interrupt) leaves no pgbouncer behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const logPath = path.join(directory, 'pgbouncer.log');
  const url = (database: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  return {
    port,
    pid: child.pid!,
    url,
    async show(command) {
      // The admin console speaks the simple query protocol only: a query without parameters.
      const client = new pg.Client({ connectionString: url('pgbouncer') });
      await client.connect();
      try {
        return (await client.query(command)).rows as Record<string, unknown>[];
      } finally {
        await client.end();
      }
    },
    log: () => (fs.existsSync(logPath) ? fs.readFileSync(logPath, 'utf8') : ''),
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) {
        // SIGTERM: immediate shutdown, every client and server connection closed.
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
