-- The worker claims due jobs in order of run_at, then id (src/jobs/repository.ts, claimDueJobs). With the
-- index on run_at alone, jobs that share a run_at (every job enqueued by one transaction has the same
-- now()) had to be read whole and sorted before the first of them could be claimed: a backlog of 300
-- such jobs meant 300 rows read per claim of 4. With the id in the index, the claim walks the index in its
-- own order and stops after the rows it locks. Same rows, one more column: the replaced index is dropped.
CREATE INDEX jobs_runnable_real_in_order ON jobs (run_at, job_id) WHERE status = 'pending' AND test_clock_id IS NULL;
DROP INDEX jobs_runnable_real;
