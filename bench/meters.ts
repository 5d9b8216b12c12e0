import fs from 'node:fs';
import type { Database } from '../src/platform/db.ts';

/**
 * Meters the benchmarks share: the service's database work counted per statement and transaction
 * (a wrapper around its Database), and the CPU of processes read from /proc.
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
