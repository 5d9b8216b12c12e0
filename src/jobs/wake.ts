import { NotificationListener } from '../platform/notifications.ts';
import type { Logger } from '../platform/logger.ts';
import type { Worker } from './worker.ts';

/**
 * The channel a job that becomes runnable is announced on, by the trigger of migrations/0038_jobs_due_notify.sql,
 * with its run_at in milliseconds since the epoch as the payload.
 */
export const JOBS_DUE_CHANNEL = 'jobs_due';

/**
 * Reads a notification's payload: the instant the job falls due, or null for a payload this version does
 * not know (a newer migration's), which then wakes the worker at once, since polling early costs one claim.
 */
export function dueInstantOf(payload: string): Date | null {
  if (!/^-?\d{1,16}$/.test(payload)) return null;
  return new Date(Number(payload));
}

/**
 * Wakes `worker` when another process (or this one) commits a job that falls due: at once for a job due
 * now, at its run_at for one due within the trigger's minute. Each (re)connection polls once, for the
 * jobs whose notifications were sent while no session listened. Polling stays as the fallback for
 * everything the listener cannot see: a lost connection, a lease that ran out.
 */
export function listenForDueJobs(worker: Worker, options: { connection_string: string; logger: Logger; minimum_backoff_ms?: number; maximum_backoff_ms?: number }): NotificationListener {
  return new NotificationListener({
    connection_string: options.connection_string,
    channel: JOBS_DUE_CHANNEL,
    logger: options.logger,
    ...(options.minimum_backoff_ms === undefined ? {} : { minimum_backoff_ms: options.minimum_backoff_ms }),
    ...(options.maximum_backoff_ms === undefined ? {} : { maximum_backoff_ms: options.maximum_backoff_ms }),
    on_notification: (payload) => {
      const instant = dueInstantOf(payload);
      if (instant === null) worker.wake();
      else worker.wakeAt(instant);
    },
    on_listening: () => worker.wake(),
  });
}
