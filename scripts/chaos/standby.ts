import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { createFreshDatabase } from '../../bench/support.ts';
import { asPostgres, freePort, postgresBinary, readTail, waitForServer, type ChaosDatabase } from './cluster.ts';

/**
 * A primary and a synchronous streaming standby, both private throwaway clusters (initdb in a temporary
 * directory, their own loopback ports, trust authentication), for the failover run (issue 33, item 3): the
 * standby is a `pg_basebackup -R` of the primary on a physical replication slot, and the primary waits for
 * it to flush every commit's WAL before it acknowledges the commit (`synchronous_standby_names`, with
 * `synchronous_commit = on`, the default). What a client was told is committed is therefore on the standby
 * when the primary dies. `failover()` kills the primary's postmaster with SIGKILL and promotes the standby;
 * the service follows through its multi-host DATABASE_URL with `target_session_attrs=read-write`.
 */

const run = promisify(execFile);
/** The standby's name for the primary: its walreceiver's application_name, which synchronous_standby_names names. */
const STANDBY_NAME = 'standby';
const SLOT_NAME = 'standby_slot';
/**
 * A host of the URL that does not accept a connection in this long is passed over for the next one. Not
 * shorter: on two cores saturated by the run, a healthy primary took more than 2 s to accept a session
 * (run chaos_20261128162542_6cb3), and a timeout there is a needless 503.
 */
const CONNECT_TIMEOUT_S = 5;

export interface FailoverTimes {
  /** When the primary's postmaster was sent SIGKILL. */
  killed_at_ms: number;
  /** When `pg_ctl promote` returned: the standby accepts read-write sessions. */
  promoted_at_ms: number;
  /** The standby's state in pg_stat_replication just before the kill (`sync` for a synchronous standby). */
  sync_state_before_kill: string;
}

export interface ReplicatedDatabase extends ChaosDatabase {
  /** The single-host URLs of the database on the primary and on the standby. */
  primary_url: string;
  standby_url: string;
  /** SIGKILL to the primary's postmaster, then the standby promoted; once only. */
  failover(): Promise<FailoverTimes>;
  /** The URL of the server that is the primary now (the standby after the failover), for statistics. */
  currentPrimaryUrl(): string;
}

/** True when this machine has the PostgreSQL server binaries a replicated cluster needs (Debian's postgresql). */
export function replicationAvailable(): boolean {
  try {
    for (const name of ['initdb', 'pg_ctl', 'pg_basebackup']) postgresBinary(name);
    return true;
  } catch {
    return false;
  }
}

async function asPostgresRun(name: string, args: string[]): Promise<void> {
  const [command, commandArgs] = asPostgres(postgresBinary(name), args);
  await run(command, commandArgs, { timeout: 120_000 });
}

/** The options both servers start with; the log line prefix names the database, as the deadlock report expects. */
function serverOptions(port: number, socketDirectory: string, extra: string): string {
  return (
    `-p ${port} -k ${socketDirectory} -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=128MB ` +
    `-c wal_level=replica -c max_wal_senders=5 -c max_replication_slots=5 -c "log_line_prefix=%m [%p] %q%u@%d " ${extra}`
  );
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

/** The standby's replication state as the primary sees it; null when it is not connected. */
async function standbyState(primaryServerUrl: string): Promise<{ state: string; sync_state: string } | null> {
  return withClient(primaryServerUrl, async (client) => {
    const { rows } = await client.query<{ state: string; sync_state: string }>('SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1', [STANDBY_NAME]);
    return rows[0] ?? null;
  });
}

async function waitForStandbyState(primaryServerUrl: string, wanted: (state: { state: string; sync_state: string }) => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const state = await standbyState(primaryServerUrl);
    if (state !== null && wanted(state)) return;
    if (Date.now() > deadline) throw new Error(`the standby did not become ${what}: ${JSON.stringify(state)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The postmaster's pid, from the first line of postmaster.pid in its data directory. */
function postmasterPid(data: string): number {
  const pid = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  if (!Number.isSafeInteger(pid) || pid <= 0) throw new Error(`no postmaster pid in ${data}`);
  return pid;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Builds the primary (with the database `name`) and its synchronous standby. The primary starts without
 * synchronous_standby_names, so that creating the database and the base backup do not wait for a standby that
 * does not exist yet; it is set with ALTER SYSTEM once the standby streams, after the base backup was taken,
 * so that the standby's own configuration does not carry it and the promoted standby waits for nobody.
 */
export async function replicatedCluster(name: string, log: (line: string) => void): Promise<ReplicatedDatabase> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'chaos-pg-replicated-'));
  // The postgres user owns the data directories; the temporary directory is made for it.
  if (process.getuid?.() === 0) await run('chown', ['postgres:postgres', directory]);
  fs.chmodSync(directory, 0o700);
  const primaryData = path.join(directory, 'primary');
  const standbyData = path.join(directory, 'standby');
  const primaryLog = path.join(directory, 'primary.log');
  const standbyLog = path.join(directory, 'standby.log');
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const serverUrl = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const pgCtl = (args: string[]) => asPostgresRun('pg_ctl', args);
  let primaryRunning = false;
  let standbyRunning = false;
  const stopAll = async () => {
    if (standbyRunning) await pgCtl(['-D', standbyData, '-m', 'immediate', '-w', 'stop']).catch(() => {});
    if (primaryRunning) await pgCtl(['-D', primaryData, '-m', 'immediate', '-w', 'stop']).catch(() => {});
    standbyRunning = primaryRunning = false;
  };
  try {
    await asPostgresRun('initdb', ['-D', primaryData, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
    await pgCtl(['-D', primaryData, '-o', serverOptions(primaryPort, directory, ''), '-l', primaryLog, '-w', '-t', '60', 'start']);
    primaryRunning = true;
    await waitForServer(serverUrl(primaryPort, 'postgres'), 60_000);
    await createFreshDatabase(serverUrl(primaryPort, 'postgres'), name);
    await withClient(serverUrl(primaryPort, 'postgres'), (client) => client.query('SELECT pg_create_physical_replication_slot($1)', [SLOT_NAME]));
    // -R writes standby.signal and primary_conninfo; -S streams from the slot, so that the primary keeps
    // every WAL segment the standby has not received yet.
    await asPostgresRun('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standbyData, '-R', '-S', SLOT_NAME, '-X', 'stream', '-c', 'fast']);
    // cluster_name becomes the walreceiver's application_name, the name synchronous_standby_names uses.
    await pgCtl(['-D', standbyData, '-o', serverOptions(standbyPort, directory, `-c cluster_name=${STANDBY_NAME}`), '-l', standbyLog, '-w', '-t', '60', 'start']);
    standbyRunning = true;
    await waitForStandbyState(serverUrl(primaryPort, 'postgres'), (state) => state.state === 'streaming', 'streaming');
    await withClient(serverUrl(primaryPort, 'postgres'), async (client) => {
      await client.query(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
      await client.query('SELECT pg_reload_conf()');
    });
    await waitForStandbyState(serverUrl(primaryPort, 'postgres'), (state) => state.sync_state === 'sync', 'synchronous');
  } catch (error) {
    await stopAll();
    fs.rmSync(directory, { recursive: true, force: true });
    throw error;
  }
  log(`private PostgreSQL primary on 127.0.0.1:${primaryPort} with a synchronous standby on 127.0.0.1:${standbyPort} (${directory})`);
  return handle({ name, directory, primaryData, standbyData, primaryLog, standbyLog, primaryPort, standbyPort, serverUrl, pgCtl, stopAll, log, setPrimaryRunning: (running) => (primaryRunning = running) });
}

interface Parts {
  name: string;
  directory: string;
  primaryData: string;
  standbyData: string;
  primaryLog: string;
  standbyLog: string;
  primaryPort: number;
  standbyPort: number;
  serverUrl: (port: number, database: string) => string;
  pgCtl: (args: string[]) => Promise<void>;
  stopAll: () => Promise<void>;
  log: (line: string) => void;
  setPrimaryRunning: (running: boolean) => void;
}

function handle(parts: Parts): ReplicatedDatabase {
  const { name, directory, primaryPort, standbyPort, serverUrl } = parts;
  let failedOver = false;
  let disposed = false;
  return {
    url: `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/${name}?target_session_attrs=read-write&connect_timeout=${CONNECT_TIMEOUT_S}`,
    name,
    server: `private primary 127.0.0.1:${primaryPort} + synchronous standby 127.0.0.1:${standbyPort} (${path.dirname(postgresBinary('pg_ctl'))})`,
    primary_url: serverUrl(primaryPort, name),
    standby_url: serverUrl(standbyPort, name),
    currentPrimaryUrl: () => serverUrl(failedOver ? standbyPort : primaryPort, name),
    async failover() {
      if (failedOver) throw new Error('the cluster has failed over already');
      const sync_state_before_kill = (await standbyState(serverUrl(primaryPort, 'postgres')))?.sync_state ?? 'not connected';
      const pid = postmasterPid(parts.primaryData);
      failedOver = true;
      const killed_at_ms = Date.now();
      process.kill(pid, 'SIGKILL');
      parts.setPrimaryRunning(false);
      // The postmaster's children notice its death and exit on their own; the standby is promoted at once.
      await parts.pgCtl(['-D', parts.standbyData, '-w', '-t', '60', 'promote']);
      const promoted_at_ms = Date.now();
      parts.log(`primary postmaster (pid ${pid}) killed; standby promoted in ${((promoted_at_ms - killed_at_ms) / 1000).toFixed(1)} s`);
      return { killed_at_ms, promoted_at_ms, sync_state_before_kill };
    },
    async restart() {
      throw new Error('the replicated cluster fails over; it is not restarted');
    },
    // Both servers' logs: a deadlock may be in the primary's before the kill or in the new primary's after.
    serverLog: async () => {
      const texts = [readTail(parts.primaryLog), readTail(parts.standbyLog)].filter((text): text is string => text !== null);
      return texts.length === 0 ? null : texts.join('\n');
    },
    async dispose(keep) {
      if (disposed) return;
      disposed = true;
      if (keep) {
        parts.log(`kept the replicated cluster: ${serverUrl(failedOver ? standbyPort : primaryPort, name)} (data in ${directory}); stop it with pg_ctl -D <data> stop`);
        return;
      }
      await parts.stopAll();
      // Orphaned backends of the killed primary exit on their own within moments; wait for them before removing the files.
      const primaryPid = fs.existsSync(path.join(parts.primaryData, 'postmaster.pid')) ? postmasterPid(parts.primaryData) : null;
      const deadline = Date.now() + 10_000;
      while (primaryPid !== null && processExists(primaryPid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
