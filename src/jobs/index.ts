/**
 * Durable jobs: enqueue inside the caller's transaction, run by a polling worker with leases,
 * retries with exponential backoff computed in SQL, and a daily purge of succeeded jobs.
 */
export {
  enqueueJob,
  scheduleJob,
  cancelJobsByKey,
  unscheduleJob,
  purgeFinishedJobs,
  readJobBacklog,
  getJob,
  testClockHasDueJob,
  testClockHasLeasedJob,
  DEFAULT_MAX_ATTEMPTS,
  MAXIMUM_MAX_ATTEMPTS,
  SUCCEEDED_JOB_RETENTION_MS,
  type JobSpec,
} from './queue.ts';
export {
  Worker,
  BASE_BACKOFF_MS,
  LAST_ERROR_MAX_LENGTH,
  MAXIMUM_POLL_INTERVAL_MS,
  type ClaimedJob,
  type JobHandler,
  type JobHandlerContext,
  type WorkerOptions,
} from './worker.ts';
export { listenForDueJobs, JOBS_DUE_CHANNEL } from './wake.ts';
export type { JobRow, JobStatus } from './repository.ts';
