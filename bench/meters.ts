import fs from 'node:fs';
import pg from 'pg';
import type { Database } from '../src/platform/db.ts';
import { busyShare, fixed, log, machineCpu, runPgbench, type BenchSettings, type CpuTimes, type PgbenchResult } from './support.ts';

/**
 * Meters the benchmarks share: the service's database work counted per statement and transaction
 * (a wrapper around its Database), the CPU of processes read from /proc, the CPU and WAL of a measured
 * phase, and the pgbench TPC-B phase that issue 15's ratios divide by.
 */

// Counting the database work of the service: round trips and transactions, and optionally the time spent
// in each statement.

export interface StatementStats {
  /** Every round trip: a statement, or statements sent together (BEGIN with the first, the last writes with COMMIT). */
  round_trips: number;
  /** Transactions begun (round trips that carry a BEGIN). */
  transactions: number;
  /** By statement (its first 90 characters, whitespace folded): calls and total milliseconds. */
  profile: Record<string, { calls: number; ms: number }>;
}

export function newStats(): StatementStats {
  return { round_trips: 0, transactions: 0, profile: {} };
}

export function statementKey(sql: string): string {
  return sql.replace(/\s+/g, ' ').trim().slice(0, 90);
}

export function countingDatabase(inner: Database, stats: StatementStats, profile: boolean): Database {
  // The engine tells every round trip it makes (src/platform/db.ts), deferred writes sent as one
  // statement included. The key is computed only when profiling: normalising every statement's text
  // costs the server CPU.
  inner.statement_observer = (sql, duration_ms) => {
    stats.round_trips += 1;
    if (sql.startsWith('BEGIN')) stats.transactions += 1;
    if (!profile) return;
    const key = sql === 'COMMIT' || sql === 'ROLLBACK' ? '(COMMIT alone)' : statementKey(sql);
    const entry = (stats.profile[key] ??= { calls: 0, ms: 0 });
    entry.calls += 1;
    entry.ms += duration_ms;
  };
  return inner;
}

export function diffStats(after: StatementStats, before: StatementStats): StatementStats {
  const profile: StatementStats['profile'] = {};
  for (const [key, value] of Object.entries(after.profile)) {
    const earlier = before.profile[key] ?? { calls: 0, ms: 0 };
    if (value.calls > earlier.calls) profile[key] = { calls: value.calls - earlier.calls, ms: value.ms - earlier.ms };
  }
  return { round_trips: after.round_trips - before.round_trips, transactions: after.transactions - before.transactions, profile };
}

export function copyStats(stats: StatementStats): StatementStats {
  return { round_trips: stats.round_trips, transactions: stats.transactions, profile: structuredClone(stats.profile) };
}

/** utime + stime of a process in clock ticks, or null once it has gone. */
export function processTicks(pid: number): number | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: state is field 3 of stat, utime 14 and stime 15 (1-based).
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}

/** The pids of this process's pgbench children (the load generator of the TPC-B phase). */
export function pgbenchChildren(): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const command = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
      const parent = Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1]);
      if (command === 'pgbench' && parent === process.pid) pids.push(Number(entry));
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return pids;
}

/**
 * The peak resident set of this process (VmHWM). Not `process.resourceUsage().maxRSS`: Linux carries
 * ru_maxrss over an exec, so a child forked from the parent, which holds hundreds of MiB of slips,
 * would report the parent's size at the fork.
 */
export function peakResidentBytes(): number {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (match) return Number(match[1]) * 1024;
  } catch {
    // Not Linux: fall through to the portable figure.
  }
  return process.resourceUsage().maxRSS * 1024;
}

// ---------------------------------------------------------------------------------------------------
// CPU and WAL meters of a measured phase: the machine (/proc/stat), this process, the server process
// (its CPU passed in by the caller), and PostgreSQL on behalf of the bench database (its backends plus
// the WAL writer, checkpointer and background writer, sampled from /proc), so that other people's
// processes show up as "other". Shared by bench/deposits.ts and bench/foundation.ts, so that the
// per-operation costs of both are measured the same way and can be compared.

export const CLOCK_TICKS_PER_SECOND = 100;
const SAMPLE_INTERVAL_MS = 250;

/** Where a phase's meters look: the PostgreSQL server (any database on it) and the bench database's name. */
export interface MeterTarget {
  database_url: string;
  database_name: string;
}

/**
 * Which processes a `CpuSampler` charges, and to which group: the bench database's sessions and the server's
 * shared processes of `background_types` (each named by `group_of`), and pgbench's client threads.
 */
export interface CpuGrouping<Group extends string> {
  background_types: readonly string[];
  group_of(row: { application_name: string; backend_type: string }): Group;
  pgbench_group: Group;
}

/** The meters' own grouping: PostgreSQL's processes of the bench database and its WAL, and pgbench's client. */
const POSTGRES_AND_PGBENCH: CpuGrouping<'postgres' | 'pgbench'> = {
  background_types: ['walwriter', 'checkpointer', 'background writer'],
  group_of: () => 'postgres',
  pgbench_group: 'pgbench',
};

/** CPU of PostgreSQL's and pgbench's processes, read from /proc every SAMPLE_INTERVAL_MS, summed by group. */
export class CpuSampler<Group extends string> {
  private readonly last = new Map<number, number>();
  private readonly totals = new Map<Group, number>();
  private readonly groups = new Map<number, Group>();
  private timer: NodeJS.Timeout | null = null;
  private sampling: Promise<void> = Promise.resolve();

  private constructor(
    private readonly client: pg.Client,
    private readonly database_name: string,
    private readonly grouping: CpuGrouping<Group>,
  ) {}

  static async start<Group extends string>(serverUrl: string, databaseName: string, grouping: CpuGrouping<Group>): Promise<CpuSampler<Group>> {
    const client = new pg.Client({ connectionString: serverUrl });
    await client.connect();
    const sampler = new CpuSampler(client, databaseName, grouping);
    await sampler.sample();
    sampler.timer = setInterval(() => {
      sampler.sampling = sampler.sampling.then(() => sampler.sample());
    }, SAMPLE_INTERVAL_MS);
    return sampler;
  }

  private async sample(): Promise<void> {
    const { rows } = await this.client.query<{ pid: number; application_name: string; backend_type: string }>(
      `SELECT pid, coalesce(application_name, '') AS application_name, coalesce(backend_type, '') AS backend_type FROM pg_stat_activity
        WHERE (datname = $1 OR backend_type = ANY($2::text[])) AND pid <> pg_backend_pid()`,
      [this.database_name, this.grouping.background_types],
    );
    for (const row of rows) this.groups.set(row.pid, this.grouping.group_of(row));
    for (const pid of pgbenchChildren()) this.groups.set(pid, this.grouping.pgbench_group);
    for (const [pid, group] of this.groups) {
      const ticks = processTicks(pid);
      if (ticks === null) continue;
      const previous = this.last.get(pid);
      if (previous !== undefined) this.totals.set(group, (this.totals.get(group) ?? 0) + ticks - previous);
      this.last.set(pid, ticks);
    }
  }

  /** Microseconds of CPU of a group since the start (0 for a group that had no process). */
  async stop(): Promise<(group: Group) => number> {
    if (this.timer) clearInterval(this.timer);
    await this.sampling;
    await this.sample();
    await this.client.end();
    const micros = 1e6 / CLOCK_TICKS_PER_SECOND;
    const totals = new Map(this.totals);
    return (group) => (totals.get(group) ?? 0) * micros;
  }
}

export async function adminQuery<Row extends pg.QueryResultRow>(serverUrl: string, sql: string, params: unknown[] = []): Promise<Row[]> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    return (await client.query<Row>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

export function lsnBytes(lsn: string): number {
  const [high, low] = lsn.split('/');
  return parseInt(high ?? '0', 16) * 2 ** 32 + parseInt(low ?? '0', 16);
}

export async function walBytes(serverUrl: string): Promise<number> {
  const rows = await adminQuery<{ lsn: string }>(serverUrl, 'SELECT pg_current_wal_lsn()::text AS lsn');
  return lsnBytes(rows[0]?.lsn ?? '0/0');
}

export interface Meter {
  machine: CpuTimes | null;
  self_us: number;
  wal: number;
  sampler: CpuSampler<'postgres' | 'pgbench'>;
}

export interface Cost {
  ops: number;
  app_cpu_us: number;
  loadgen_cpu_us: number;
  postgres_cpu_us: number;
  other_cpu_us: number;
  machine_busy: number;
  wal_bytes: number;
  stats: StatementStats | null;
}

export async function startMeter(target: MeterTarget): Promise<Meter> {
  const sampler = await CpuSampler.start(target.database_url, target.database_name, POSTGRES_AND_PGBENCH);
  const usage = process.cpuUsage();
  return { machine: machineCpu(), self_us: usage.user + usage.system, wal: await walBytes(target.database_url), sampler };
}

/** `app_us` is the service's CPU over the phase; null means this process is the service (no load generator). */
export async function stopMeter(target: MeterTarget, meter: Meter, ops: number, app_us: number | null, stats: StatementStats | null): Promise<Cost> {
  const usage = process.cpuUsage();
  const machine = machineCpu();
  const wal = await walBytes(target.database_url);
  const sampled = await meter.sampler.stop();
  const postgres_us = sampled('postgres');
  const self = usage.user + usage.system - meter.self_us;
  const app = app_us ?? self;
  const loadgen = (app_us === null ? 0 : self) + sampled('pgbench');
  const count = Math.max(1, ops);
  const machineMicros = meter.machine && machine ? ((machine.busy - meter.machine.busy) * 1e6) / CLOCK_TICKS_PER_SECOND : Number.NaN;
  return {
    ops,
    app_cpu_us: app / count,
    loadgen_cpu_us: loadgen / count,
    postgres_cpu_us: postgres_us / count,
    other_cpu_us: (machineMicros - app - loadgen - postgres_us) / count,
    machine_busy: busyShare(meter.machine, machine),
    wal_bytes: (wal - meter.wal) / count,
    stats,
  };
}

// ---------------------------------------------------------------------------------------------------
// The reference of issue 15's ratios: pgbench TPC-B in the same run, on tables `initPgbench` made.

export interface PgbenchPhase {
  result: PgbenchResult;
  cost: Cost;
}

/**
 * A warm-up, then `pgbench -b tpcb-like` for `seconds` under the meters. The pgbench client processes
 * count as load generator; the PostgreSQL CPU per transaction is the unit of issue 15's ratios.
 */
export async function runPgbenchTpcbPhase(settings: BenchSettings, databaseUrl: string): Promise<PgbenchPhase> {
  const args = { pgbench_path: settings.pgbench_path, database_url: databaseUrl, clients: settings.pgbench_clients, builtin: 'tpcb-like' };
  if (settings.warmup_seconds > 0) {
    log(`pgbench TPC-B: warm-up ${settings.warmup_seconds} s`);
    await runPgbench({ ...args, seconds: settings.warmup_seconds });
  }
  log(`pgbench TPC-B: ${settings.pgbench_clients} clients, ${settings.seconds} s`);
  const meter = await startMeter(settings);
  const result = await runPgbench({ ...args, seconds: settings.seconds, log: true });
  const cost = await stopMeter(settings, meter, Math.round(result.tps * settings.seconds), 0, null);
  log(`pgbench TPC-B: ${fixed(result.tps, 0)} tps, p50 ${fixed(result.p50_ms, 2)} ms, p99 ${fixed(result.p99_ms, 2)} ms`);
  return { result, cost };
}

// ---------------------------------------------------------------------------------------------------
// The per-operation table: one row per operation, in the columns every bench of issue 15 prints.

/** The columns after the row's name. */
export const COST_COLUMNS = [
  'service CPU µs',
  'load generator CPU µs',
  'PostgreSQL CPU µs',
  'sum µs',
  'other processes µs',
  'machine busy',
  'DB round trips',
  'transactions',
  'WAL KB',
];

export function costRow(name: string, cost: Cost, roundTrips: string, transactions: string): string[] {
  return [
    name,
    fixed(cost.app_cpu_us, 0),
    fixed(cost.loadgen_cpu_us, 0),
    fixed(cost.postgres_cpu_us, 0),
    fixed(cost.app_cpu_us + cost.loadgen_cpu_us + cost.postgres_cpu_us, 0),
    fixed(cost.other_cpu_us, 0),
    `${fixed(cost.machine_busy * 100, 0)} %`,
    roundTrips,
    transactions,
    fixed(cost.wal_bytes / 1024, 1),
  ];
}

/** A counted statistic per operation (one decimal), or n/a when the phase counted none. */
export function perOperation(cost: Cost, pick: (stats: StatementStats) => number): string {
  return cost.stats ? fixed(pick(cost.stats) / Math.max(1, cost.ops), 1) : 'n/a';
}
