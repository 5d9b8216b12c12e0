import fs from 'node:fs';
import type { Generation } from './supervisor.ts';

/**
 * What the service processes' logs (pino JSON lines, one file per process generation) tell the checks:
 * when each job handler ran in which worker (`job handler started` / `job handler ended`, logged at
 * debug level by src/jobs/worker.ts), and the error behind each 5xx (`unhandled error` with its
 * request_id). A handler with a start and no end ran until its process was killed.
 */

export interface HandlerRun {
  job_id: string;
  task: string;
  attempt: number;
  worker: string;
  started_ms: number;
  /** The end line's time, or the SIGKILL of its process when it has none. */
  ended_ms: number;
  ended_by: 'end' | 'kill' | 'open';
}

export interface LogFacts {
  runs: HandlerRun[];
  /** request_id → the error message of its `unhandled error` line. */
  request_errors: Map<string, string>;
  /** Lines (any process) whose error mentions a deadlock: the request or job, and where in src it waited. */
  deadlock_lines: { slot: string; message: string; request_id: string | null; job_id: string | null; task: string | null; waited_in: string }[];
  /** Jobs whose handler failed, by error message (first 120 characters). */
  job_failures: Map<string, number>;
  lines: number;
}

interface LogLine {
  time?: string;
  msg?: string;
  job_id?: string;
  task?: string;
  attempt?: number;
  worker_id?: string;
  request_id?: string;
  err?: { message?: string; stack?: string };
}

/**
 * Where a failed statement waited, from the error's stack: the repository function that ran it and the
 * service function that called it, e.g. "lockFeeds in MatchingService.match".
 */
export function waitedIn(stack: string | undefined): string {
  const frames = [...(stack ?? '').matchAll(/at (?:async )?([\w.<>]+) \([^)]*\/src\/([\w/-]+)\.ts:\d+:\d+\)/g)]
    .map((match) => ({ name: (match[1] ?? '').replace(/^Module\./, '').replace(/^Object\./, ''), file: match[2] ?? '' }))
    .filter((frame) => !frame.file.startsWith('platform/'));
  const statement = frames[0];
  const caller = frames.find((frame) => frame !== statement && !frame.file.endsWith('repository') && !frame.name.startsWith('EventsService.'));
  if (!statement) return 'unknown';
  return caller ? `${statement.name} in ${caller.name}` : statement.name;
}

export function readLogs(generations: readonly Generation[]): LogFacts {
  const runs: HandlerRun[] = [];
  const request_errors = new Map<string, string>();
  const deadlock_lines: LogFacts['deadlock_lines'] = [];
  const job_failures = new Map<string, number>();
  let lines = 0;
  for (const generation of generations) {
    let text: string;
    try {
      text = fs.readFileSync(generation.log_path, 'utf8');
    } catch {
      continue;
    }
    const open = new Map<string, HandlerRun>();
    for (const raw of text.split('\n')) {
      if (!raw.startsWith('{')) continue;
      let line: LogLine;
      try {
        line = JSON.parse(raw) as LogLine;
      } catch {
        // A line cut by the kill.
        continue;
      }
      lines += 1;
      const time = line.time ? Date.parse(line.time) : Number.NaN;
      const message = line.err?.message ?? '';
      if (/deadlock detected/i.test(message)) {
        deadlock_lines.push({ slot: generation.slot, message, request_id: line.request_id ?? null, job_id: line.job_id ?? null, task: line.task ?? null, waited_in: waitedIn(line.err?.stack) });
      }
      if (line.msg === 'unhandled error' && line.request_id) request_errors.set(line.request_id, message);
      if (line.msg === 'job handler failed') {
        const key = message.slice(0, 120);
        job_failures.set(key, (job_failures.get(key) ?? 0) + 1);
      }
      if (line.msg === 'job handler started' && line.job_id && Number.isFinite(time)) {
        const run: HandlerRun = {
          job_id: line.job_id,
          task: line.task ?? '',
          attempt: line.attempt ?? 0,
          worker: `${generation.slot}#${generation.generation}`,
          started_ms: time,
          ended_ms: Number.POSITIVE_INFINITY,
          ended_by: 'open',
        };
        open.set(`${line.job_id}:${run.attempt}`, run);
        runs.push(run);
      } else if (line.msg === 'job handler ended' && line.job_id && Number.isFinite(time)) {
        const run = open.get(`${line.job_id}:${line.attempt ?? 0}`);
        if (run) {
          run.ended_ms = time;
          run.ended_by = 'end';
          open.delete(`${line.job_id}:${line.attempt ?? 0}`);
        }
      }
    }
    // Handlers still running when the process died ran until its death at the latest.
    for (const run of open.values()) {
      if (generation.ended_at_ms !== null) {
        run.ended_ms = generation.ended_at_ms;
        run.ended_by = 'kill';
      }
    }
  }
  return { runs, request_errors, deadlock_lines, job_failures, lines };
}

/** Pairs of runs of one job whose intervals overlap: the same job running twice at once. */
export function overlappingRuns(runs: readonly HandlerRun[]): [HandlerRun, HandlerRun][] {
  const byJob = new Map<string, HandlerRun[]>();
  for (const run of runs) {
    const list = byJob.get(run.job_id);
    if (list) list.push(run);
    else byJob.set(run.job_id, [run]);
  }
  const overlaps: [HandlerRun, HandlerRun][] = [];
  for (const list of byJob.values()) {
    if (list.length < 2) continue;
    list.sort((left, right) => left.started_ms - right.started_ms);
    // The run that ends last among those started so far: any later start before its end overlaps it.
    let latest = list[0]!;
    for (const current of list.slice(1)) {
      if (current.started_ms < latest.ended_ms) overlaps.push([latest, current]);
      if (current.ended_ms > latest.ended_ms) latest = current;
    }
  }
  return overlaps;
}

/**
 * The deadlocks PostgreSQL reported for one database, from its server log: for each, the kinds of the
 * two statements that waited on each other (from the DETAIL lines), e.g. "feed lock (event_sequences) ⟷
 * withdrawal row lock". Cycle A of issue 13 is a feed lock against a withdrawal row lock.
 */
export function deadlockPairs(server_log: string, database_name: string): Map<string, number> {
  const pairs = new Map<string, number>();
  const lines = server_log.split('\n');
  const kindOf = (statement: string): string => {
    if (/INSERT INTO event_sequences/.test(statement)) return 'feed lock (event_sequences)';
    if (/FROM withdrawal_orders/.test(statement) && /FOR UPDATE/.test(statement)) return 'withdrawal row lock';
    if (/FROM wallets/.test(statement) && /FOR UPDATE/.test(statement)) return 'wallet lock';
    if (/FROM deposit_orders/.test(statement) && /FOR UPDATE/.test(statement)) return 'deposit row lock';
    return statement.replace(/\s+/g, ' ').slice(0, 60);
  };
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index] ?? '';
    if (!line.includes(`@${database_name} ERROR:  deadlock detected`)) continue;
    // The DETAIL entry follows: "Process A waits for …", then one "Process N: <statement>" per process,
    // each statement continuing on tab-indented lines.
    const statements: string[] = [];
    for (let next = index + 1; next < Math.min(lines.length, index + 60); next += 1) {
      const text = lines[next] ?? '';
      if (!text.startsWith('\t') && !text.includes(' DETAIL:  ')) break;
      const started = /Process \d+: (.*)$/.exec(text);
      if (started) statements.push(started[1] ?? '');
      else if (statements.length > 0 && text.startsWith('\t')) statements[statements.length - 1] += ` ${text.trim()}`;
    }
    const kinds = statements.map(kindOf).sort();
    const key = kinds.length > 0 ? kinds.join(' ⟷ ') : 'unknown';
    pairs.set(key, (pairs.get(key) ?? 0) + 1);
  }
  return pairs;
}
