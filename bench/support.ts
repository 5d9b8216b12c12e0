import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import pg from 'pg';

/**
 * Load generation, PostgreSQL administration and reporting for bench/foundation.ts. Nothing here
 * knows the service: a scenario is a function that builds one request (fresh signature, nonce and
 * Idempotency-Key each time), and the generators only send, time and count.
 */

export interface BenchSettings {
  /** Server URL of the PostgreSQL cluster (any database on it); the bench database is created beside it. */
  database_url: string;
  database_name: string;
  /** Length of each measured phase (closed-loop maximum, then the half-rate run), seconds. */
  seconds: number;
  warmup_seconds: number;
  /**
   * BENCH_CODE_WARMUP_SECONDS (15): the warm-up right before a measured phase, on the process that is
   * measured. V8 optimises hot functions in the background and counts that work as the process's CPU:
   * after three seconds of deposit creations it was still 16 % of the server's CPU in the measured window,
   * after twenty 3 % (perf, 2026-11-26, docs/benchmarks.md "fourth slice"). A service that has run for
   * minutes no longer pays it, so a bench that measures it measures a process starting up.
   */
  code_warmup_seconds: number;
  /** Closed-loop connections (autocannon) and the socket cap of the half-rate generator. */
  connections: number;
  /** The service's pg pool size (DB_POOL_SIZE of the child). */
  db_pool: number;
  pgbench_clients: number;
  pgbench_path: string;
  /** BENCH_ONLY: a comma-separated subset of bare,authenticated,idempotent_post,pgbench (default all). */
  only: ReadonlySet<string>;
  /** Share of the closed-loop maximum used for the latency run (BENCH_RATE_FRACTION, default 0.5). */
  rate_fraction: number;
  /** BENCH_SPREAD_KEYS: when > 0, an extra scenario signs round-robin with that many keys (no shared counter row). */
  spread_keys: number;
  /** BENCH_DATABASE_SETTINGS: `name=value,...` applied with ALTER DATABASE (what-if runs, e.g. synchronous_commit=off). */
  database_settings: [string, string][];
  /** Extra phase (on unless BENCH_PROBE=0): where the time of a signed request goes (see foundation.ts). */
  probe: boolean;
}

function numberFromEnv(name: string, fallback: number, min: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number >= ${min}, got "${text}"`);
  return value;
}

/** `defaults` lets another benchmark of the family use its own database name and scenario list. */
export function readSettings(defaults: { database_name?: string; only?: string } = {}): BenchSettings {
  const databaseName = process.env.BENCH_DATABASE ?? defaults.database_name ?? 'bench_foundation';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(databaseName)) throw new Error('BENCH_DATABASE must be a plain lower-case identifier');
  const dbPool = Math.floor(numberFromEnv('BENCH_DB_POOL', 10, 1));
  return {
    database_url: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    database_name: databaseName,
    seconds: numberFromEnv('BENCH_SECONDS', 10, 1),
    warmup_seconds: numberFromEnv('BENCH_WARMUP_SECONDS', 3, 0),
    code_warmup_seconds: numberFromEnv('BENCH_CODE_WARMUP_SECONDS', 15, 0),
    connections: Math.floor(numberFromEnv('BENCH_CONNECTIONS', 32, 1)),
    db_pool: dbPool,
    pgbench_clients: Math.floor(numberFromEnv('BENCH_PGBENCH_CLIENTS', dbPool, 1)),
    pgbench_path: process.env.PGBENCH ?? '/usr/bin/pgbench',
    rate_fraction: numberFromEnv('BENCH_RATE_FRACTION', 0.5, 0.01),
    spread_keys: Math.floor(numberFromEnv('BENCH_SPREAD_KEYS', 0, 0)),
    database_settings: (process.env.BENCH_DATABASE_SETTINGS ?? '')
      .split(',')
      .filter((pair) => pair.trim().length > 0)
      .map((pair) => {
        const match = /^\s*([a-z_]+)\s*=\s*([A-Za-z0-9_.]+)\s*$/.exec(pair);
        if (!match) throw new Error(`BENCH_DATABASE_SETTINGS: cannot read "${pair}" (name=value)`);
        return [match[1] as string, match[2] as string];
      }),
    only: new Set((process.env.BENCH_ONLY || defaults.only || 'bare,authenticated,idempotent_post,pgbench').split(',').map((name) => name.trim())),
    probe: process.env.BENCH_PROBE !== '0' && process.env.BENCH_PROBE !== 'false',
  };
}

/** An integer knob from the environment, in [min, max]; the fallback when unset or empty. */
export function intFromEnv(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer in [${min}, ${max}], got "${text}"`);
  return value;
}

export function withDatabaseName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function withAdmin<T>(serverUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * Drops (if left over from an interrupted run) and creates the bench database; returns its URL. A
 * database somebody is connected to is another benchmark's, running now: dropping it would break both
 * runs (the other one's server would reconnect to this run's database and answer 401), so that stops.
 */
export async function createFreshDatabase(serverUrl: string, name: string, settings: [string, string][] = []): Promise<string> {
  await withAdmin(serverUrl, async (client) => {
    const { rows } = await client.query<{ sessions: number }>(
      'SELECT count(*)::int AS sessions FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [name],
    );
    const sessions = rows[0]?.sessions ?? 0;
    if (sessions > 0) {
      throw new Error(
        `database ${name} has ${sessions} open connection(s): another benchmark run is probably using it. ` +
          'Wait for it to finish, or set BENCH_DATABASE to another name.',
      );
    }
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
    for (const [setting, value] of settings) await client.query(`ALTER DATABASE ${name} SET ${setting} = '${value}'`);
  });
  return withDatabaseName(serverUrl, name);
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  await withAdmin(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

// ---------------------------------------------------------------------------------------------------
// Requests and results

export interface BenchRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  /** Text, or bytes (a multipart slip upload). */
  body?: string | Buffer;
}

/** Which answers count as done: any 2xx by default; a bench may ask for one status (a slip's 202). */
export type SuccessTest = (status: number) => boolean;

const anySuccess: SuccessTest = (status) => status >= 200 && status < 300;

export type RequestFactory = () => BenchRequest;

export interface Failures {
  non2xx: number;
  errors: number;
  timeouts: number;
  status_counts: Record<string, number>;
  /** The first non-2xx body seen, to make a failure explain itself. */
  sample: string | null;
}

export interface ClosedLoopResult extends Failures {
  /** Successful answers (by the run's success test) per second. */
  requests_per_second: number;
  completed: number;
  /** Answers that passed the success test. */
  succeeded: number;
  duration_seconds: number;
  /** autocannon's own latency percentiles at saturation (not the goal's latency). */
  saturated_p50_ms: number;
  saturated_p99_ms: number;
}

export interface PacedResult extends Failures {
  target_rate: number;
  achieved_rate: number;
  completed: number;
  /** Answers that passed the success test; the latencies are theirs. */
  succeeded: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** How late the generator itself sent requests (its timer and event loop), p99; included in p99_ms. */
  send_lag_p99_ms: number;
}

export function percentile(sorted: ArrayLike<number>, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index] as number;
}

/**
 * Closed loop: `connections` keep-alive connections, each sending its next request as soon as the
 * previous answer arrives. The completed-request rate is the maximum throughput at that concurrency.
 */
export async function runClosedLoop(options: {
  base_url: string;
  connections: number;
  seconds: number;
  build: RequestFactory;
  success?: SuccessTest;
}): Promise<ClosedLoopResult> {
  const success = options.success ?? anySuccess;
  let sample: string | null = null;
  const first = options.build();
  const result = await autocannon({
    url: options.base_url,
    connections: options.connections,
    duration: options.seconds,
    method: first.method,
    requests: [
      {
        setupRequest(request) {
          const next = options.build();
          return { ...request, method: next.method, path: next.path, headers: next.headers, body: next.body ?? '' };
        },
        onResponse(status, body) {
          if (!success(status) && sample === null) sample = `${status} ${body.slice(0, 500)}`;
        },
      },
    ],
  });
  const statusCounts: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCounts[code] = stats.count ?? 0;
  const completed = result['2xx'] + result.non2xx;
  const succeeded = Object.entries(statusCounts).reduce((sum, [code, count]) => sum + (success(Number(code)) ? count : 0), 0);
  return {
    requests_per_second: succeeded / result.duration,
    completed,
    succeeded,
    duration_seconds: result.duration,
    saturated_p50_ms: result.latency.p50,
    saturated_p99_ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    status_counts: statusCounts,
    sample,
  };
}

/**
 * Open loop at a constant arrival rate: request i is due at start + i/rate whatever happened to the
 * earlier ones, and its latency is measured from that due time (so time spent waiting for a free
 * connection or behind a late timer counts, as in wrk2; no coordinated omission). Requests go over at
 * most `max_sockets` keep-alive connections.
 *
 * autocannon's `overallRate` is not used for this: it gives every connection a per-second budget that
 * is spent back to back at the start of each second, so half the maximum rate arrives as a burst at
 * full speed followed by silence, and its latencies are those of saturation.
 */
export async function runPaced(options: {
  base_url: string;
  rate: number;
  /** How long to send for; or `count`, how many requests in all. */
  seconds?: number;
  count?: number;
  max_sockets: number;
  build: RequestFactory;
  timeout_ms?: number;
  success?: SuccessTest;
}): Promise<PacedResult> {
  const success = options.success ?? anySuccess;
  const target = new URL(options.base_url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.max_sockets, maxFreeSockets: options.max_sockets });
  const total = Math.max(1, options.count ?? Math.floor(options.rate * (options.seconds ?? 0)));
  const latencies = new Float64Array(total);
  const lags = new Float64Array(total);
  const intervalMs = 1000 / options.rate;
  const failures: Failures = { non2xx: 0, errors: 0, timeouts: 0, status_counts: {}, sample: null };
  let sent = 0;
  let finished = 0;
  let ok = 0;
  let lastCompletion = 0;
  const start = performance.now();

  await new Promise<void>((resolve) => {
    const fire = (index: number) => {
      let settled = false;
      // Each request completes once, whichever of answer, request error or response error comes first.
      const complete = (error: boolean) => {
        if (settled) return false;
        settled = true;
        if (error) failures.errors += 1;
        finished += 1;
        if (finished === total) resolve();
        return true;
      };
      const due = start + index * intervalMs;
      lags[index] = performance.now() - due;
      const request = options.build();
      const headers: Record<string, string> = { ...request.headers };
      if (request.body !== undefined) headers['content-length'] = String(Buffer.byteLength(request.body));
      const outgoing = http.request(
        { agent, host: target.hostname, port: target.port, method: request.method, path: request.path, headers },
        (response) => {
          const status = response.statusCode ?? 0;
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => {
            if (!success(status)) chunks.push(chunk);
          });
          response.on('error', () => complete(true));
          response.on('end', () => {
            if (!complete(false)) return;
            const now = performance.now();
            lastCompletion = now;
            failures.status_counts[status] = (failures.status_counts[status] ?? 0) + 1;
            if (success(status)) {
              latencies[ok] = now - due;
              ok += 1;
            } else {
              failures.non2xx += 1;
              failures.sample ??= `${status} ${Buffer.concat(chunks).toString('utf8').slice(0, 500)}`;
            }
          });
        },
      );
      outgoing.setTimeout(options.timeout_ms ?? 10_000, () => {
        failures.timeouts += 1;
        outgoing.destroy(new Error('timeout'));
      });
      outgoing.on('error', () => complete(true));
      outgoing.end(request.body);
    };
    const tick = () => {
      const elapsed = performance.now() - start;
      const due = Math.min(total, Math.floor(elapsed / intervalMs) + 1);
      while (sent < due) {
        fire(sent);
        sent += 1;
      }
      if (sent < total) setTimeout(tick, Math.max(0, Math.min(1, intervalMs - (elapsed % intervalMs))));
    };
    tick();
  });
  agent.destroy();
  const measured = latencies.subarray(0, ok).sort();
  const span = (lastCompletion - start) / 1000;
  return {
    target_rate: options.rate,
    achieved_rate: ok / Math.max(span, total / options.rate),
    completed: finished,
    succeeded: ok,
    p50_ms: percentile(measured, 0.5),
    p99_ms: percentile(measured, 0.99),
    max_ms: percentile(measured, 1),
    send_lag_p99_ms: percentile(lags.subarray(0, sent).sort(), 0.99),
    ...failures,
  };
}

// ---------------------------------------------------------------------------------------------------
// pgbench

export const PGBENCH_SCRIPT = `\\set n random(1, 1000000)
INSERT INTO bench_rows (merchant_id, payload) VALUES ('m', 'x');
`;

function runProcess(command: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

export interface PgbenchResult {
  tps: number;
  failed: number;
  /** From the per-transaction log of a rate-limited run, measured from the scheduled start. */
  p50_ms: number;
  p99_ms: number;
  command: string;
}

/**
 * One pgbench run of the single-row INSERT script, or of a built-in script (`builtin`, e.g.
 * `tpcb-like`, on tables made by `initPgbench`). With `rate` it is throttled (-R, Poisson arrivals)
 * and logs every transaction (-l); the logged time runs from the scheduled start, so lag counts.
 * `log` logs every transaction of an unthrottled run too, for its closed-loop p50/p99.
 */
export async function runPgbench(options: {
  pgbench_path: string;
  database_url: string;
  clients: number;
  seconds: number;
  rate?: number;
  builtin?: string;
  log?: boolean;
}): Promise<PgbenchResult> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-pgbench-'));
  try {
    const script: string[] = [];
    if (options.builtin !== undefined) {
      script.push('-b', options.builtin);
    } else {
      const scriptPath = path.join(directory, 'insert.sql');
      fs.writeFileSync(scriptPath, PGBENCH_SCRIPT);
      script.push('-f', scriptPath);
    }
    const args = ['-n', ...script, '-c', String(options.clients), '-j', '2', '-T', String(Math.max(1, Math.round(options.seconds)))];
    if (options.rate !== undefined) args.push('-R', String(Math.round(options.rate)));
    const logged = options.rate !== undefined || options.log === true;
    if (logged) args.push('-l', '--log-prefix', path.join(directory, 'tx'));
    args.push(options.database_url);
    const shown = `pgbench ${args.map((arg) => (arg.startsWith(directory) ? `<tmp>/${path.basename(arg)}` : arg)).join(' ')}`;
    const { code, stdout, stderr } = await runProcess(options.pgbench_path, args);
    if (code !== 0) throw new Error(`pgbench exited with ${code}:\n${stderr}\n${stdout}`);
    const tpsMatch = /^tps = ([0-9.]+)/m.exec(stdout);
    if (!tpsMatch) throw new Error(`pgbench printed no tps line:\n${stdout}`);
    const failedMatch = /^number of failed transactions: (\d+)/m.exec(stdout);
    let p50 = Number.NaN;
    let p99 = Number.NaN;
    if (logged) {
      const values: number[] = [];
      for (const file of fs.readdirSync(directory).filter((name) => name.startsWith('tx'))) {
        for (const line of fs.readFileSync(path.join(directory, file), 'utf8').split('\n')) {
          // client_id transaction_no time script_no time_epoch time_us [schedule_lag]; time in µs.
          const fields = line.split(' ');
          if (fields.length >= 6 && fields[2] !== 'failed' && fields[2] !== 'skipped') values.push(Number(fields[2]) / 1000);
        }
      }
      const sorted = Float64Array.from(values).sort();
      p50 = percentile(sorted, 0.5);
      p99 = percentile(sorted, 0.99);
    }
    return { tps: Number(tpsMatch[1]), failed: failedMatch ? Number(failedMatch[1]) : 0, p50_ms: p50, p99_ms: p99, command: shown };
  } finally {
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

/** `pgbench -i -s <scale>`: creates and fills the TPC-B tables (pgbench_accounts etc.) in the database. */
export async function initPgbench(options: { pgbench_path: string; database_url: string; scale: number }): Promise<string> {
  const args = ['-i', '-q', '-s', String(options.scale), options.database_url];
  const { code, stdout, stderr } = await runProcess(options.pgbench_path, args);
  if (code !== 0) throw new Error(`pgbench -i exited with ${code}:\n${stderr}\n${stdout}`);
  return `pgbench -i -q -s ${options.scale} <db>`;
}

// ---------------------------------------------------------------------------------------------------
// Machine CPU (all cores) from /proc/stat, to show how busy the two cores were during a phase.

export interface CpuTimes {
  busy: number;
  total: number;
}

export function machineCpu(): CpuTimes | null {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/** Share of all cores busy between two snapshots, 0..1. */
export function busyShare(before: CpuTimes | null, after: CpuTimes | null): number {
  if (!before || !after || after.total === before.total) return Number.NaN;
  return (after.busy - before.busy) / (after.total - before.total);
}

// ---------------------------------------------------------------------------------------------------
// Formatting

export function fixed(value: number, digits: number): string {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

export function markdownTable(header: string[], align: ('l' | 'r')[], rows: string[][]): string {
  const lines = [`| ${header.join(' | ')} |`, `| ${header.map((_, index) => (align[index] === 'r' ? '---:' : '---')).join(' | ')} |`];
  for (const row of rows) lines.push(`| ${row.join(' | ')} |`);
  return lines.join('\n');
}

export function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}
