/**
 * A queue's backlog as the operations gauges show it (src/ops/backlog-metrics.ts): how much work waits, and
 * since when the oldest of it has been waiting. Each module reads its own queue (jobs, webhook deliveries,
 * reviews) with its own SQL; this is the shape they share.
 */
export interface Backlog {
  /** Items waiting, counted up to BACKLOG_COUNT_LIMIT (a count past it is shown as the limit). */
  count: number;
  /** When the oldest waiting item became due; null when nothing waits. */
  oldest_at: Date | null;
}

/**
 * The most items a backlog read counts, so that reading the gauges stays one short index scan however far a
 * queue has fallen behind; an alert needs to know that a queue is long, not exactly how long.
 */
export const BACKLOG_COUNT_LIMIT = 100_000;

/** A backlog from one row of `count` and `oldest_at` (a timestamp, or text holding one). */
export function backlogOf(row: { count: number | string; oldest_at: Date | string | null } | undefined): Backlog {
  if (!row || row.oldest_at === null) return { count: Number(row?.count ?? 0), oldest_at: null };
  return { count: Number(row.count), oldest_at: row.oldest_at instanceof Date ? row.oldest_at : new Date(row.oldest_at) };
}
