-- Issue 33, item 4: a job that becomes runnable wakes the workers of every process at once through
-- LISTEN/NOTIFY on the channel `jobs_due`, instead of waiting for their next poll
-- (docs/decisions/storage-and-jobs.md, "Waking workers in other processes").
--
-- * A trigger, not a pg_notify in each statement: every way a job becomes pending (insertJob, the deferred
--   insert of scheduleJob, a retry written by markJobFailed, and any later path) notifies without an edit,
--   and the notification rides in the statement that writes the row, so no command gains a round trip.
--   NOTIFY is delivered at commit, so no worker wakes for a job that was rolled back.
-- * The payload is the job's run_at in milliseconds since the epoch: a job due now wakes a worker at once,
--   a job due later arms the worker's timer for that instant (src/jobs/worker.ts, wakeAt). PostgreSQL folds
--   identical notifications of one transaction into one, so a transaction that enqueues many jobs due at the
--   same instant sends one.
-- * Only jobs due within a minute of the write notify. A transaction that notifies takes a lock shared by the
--   whole cluster from its commit until its commit record is flushed, which serialises the commits of every
--   notifying transaction; deposit creation schedules its deadline (minutes to hours ahead) and must not pay
--   that. A job due later is found by the workers' own claim, which answers the next pending run_at with the
--   jobs it claims: a poll comes at least every WORKER_POLL_INTERVAL_MS, at most a minute, so a job more
--   than a minute away is known to every polling worker before it falls due.
-- * Jobs of a sandbox test clock never notify: only an advance of their clock runs them.

CREATE FUNCTION jobs_notify_due() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('jobs_due', floor(extract(epoch FROM NEW.run_at) * 1000)::bigint::text);
  RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_due_on_insert
  AFTER INSERT ON jobs
  FOR EACH ROW
  WHEN (NEW.status = 'pending' AND NEW.test_clock_id IS NULL AND NEW.run_at < NEW.updated_at + interval '1 minute')
  EXECUTE FUNCTION jobs_notify_due();

-- An update notifies only when it makes a job pending again (a retry), not for the claims and heartbeats
-- that make up nearly every update of the table.
CREATE TRIGGER jobs_notify_due_on_retry
  AFTER UPDATE OF status ON jobs
  FOR EACH ROW
  WHEN (OLD.status <> 'pending' AND NEW.status = 'pending' AND NEW.test_clock_id IS NULL AND NEW.run_at < NEW.updated_at + interval '1 minute')
  EXECUTE FUNCTION jobs_notify_due();
