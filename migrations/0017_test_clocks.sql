-- Sandbox test clocks (src/test-clocks/): a merchant's own frozen time for its sandbox, attached to its
-- test-mode requests and advanced on demand. Jobs, events and webhook deliveries made under a clock
-- carry its id, so that only advancing that clock makes them due.

CREATE TABLE test_clocks (
  white_label_id   text NOT NULL,                                           -- brand of the merchant
  merchant_id      text NOT NULL,                                           -- the sandbox merchant that owns the clock
  livemode         boolean NOT NULL CHECK (livemode = false),               -- always false: live never uses a test clock
  test_clock_id    text NOT NULL CHECK (test_clock_id LIKE 'clock\_%'),    -- clock_ + ULID
  name             text CHECK (length(name) BETWEEN 1 AND 100),             -- the merchant's label; null when none was given
  frozen_time      timestamptz NOT NULL,                                    -- the instant the clock's objects see as now
  status           text NOT NULL CHECK (status IN ('ready', 'advancing')), -- advancing while its due jobs are being run
  attached         boolean NOT NULL,                                        -- the merchant's test-mode requests run at frozen_time
  version          integer NOT NULL CHECK (version > 0),                    -- increases on every change (the test_clock.* events carry it)
  advance_target   timestamptz,                                             -- the frozen_time being advanced to; set exactly while advancing
  advance_reached_time timestamptz,                                         -- while advancing: the latest run_at a job of this advance ran at
  advance_job_runs integer NOT NULL CHECK (advance_job_runs >= 0),         -- job runs of the advance in progress (0 while ready)
  advance_slice    integer NOT NULL CHECK (advance_slice >= 0),             -- slices (advance jobs) of the advance in progress finished so far
  last_advance_requested_time timestamptz,                                  -- the target of the last finished advance; null before the first
  last_advance_outcome text CHECK (last_advance_outcome IN ('completed', 'job_limit_reached')), -- how the last advance ended
  last_advance_job_runs integer CHECK (last_advance_job_runs >= 0),         -- job runs of the last finished advance
  last_advance_finished_at timestamptz,                                     -- real time at which the last advance ended
  created_at       timestamptz NOT NULL,                                    -- real time of creation (never the clock's own time)
  updated_at       timestamptz NOT NULL,                                    -- real time of the last change
  PRIMARY KEY (white_label_id, test_clock_id),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  CHECK ((status = 'advancing') = (advance_target IS NOT NULL)),
  CHECK ((status = 'advancing') = (advance_reached_time IS NOT NULL)),
  CHECK ((last_advance_requested_time IS NULL) = (last_advance_outcome IS NULL)),
  CHECK ((last_advance_outcome IS NULL) = (last_advance_finished_at IS NULL)),
  CHECK ((last_advance_outcome IS NULL) = (last_advance_job_runs IS NULL)),
  CHECK (status = 'advancing' OR (advance_job_runs = 0 AND advance_slice = 0))
);
-- One clock attached per merchant sandbox at a time; the index also finds it for every test-mode request.
CREATE UNIQUE INDEX test_clocks_attached ON test_clocks (white_label_id, merchant_id, livemode) WHERE attached;
-- The merchant's list, in creation order (ids are ULIDs).
CREATE INDEX test_clocks_of_merchant ON test_clocks (white_label_id, merchant_id, livemode, test_clock_id);

-- A job enqueued under a test clock is due by that clock's time: only an advance of the clock runs it,
-- never the ordinary worker. Null for every real-time job.
ALTER TABLE jobs ADD COLUMN test_clock_id text;
-- The ordinary worker's claim reads only real-time jobs; a clock left frozen with many jobs overdue in
-- real time must not be walked over by every poll, so the old index (every pending job) is replaced.
DROP INDEX jobs_runnable;
CREATE INDEX jobs_runnable_real ON jobs (run_at) WHERE status = 'pending' AND test_clock_id IS NULL;
-- An advance runs its clock's due jobs in order of run_at, then id.
CREATE INDEX jobs_runnable_test_clock ON jobs (test_clock_id, run_at, job_id) WHERE status = 'pending' AND test_clock_id IS NOT NULL;

-- The clock an event was written under, for events of the clock's own merchant only; null otherwise.
ALTER TABLE events ADD COLUMN test_clock_id text;

-- The clock of the delivered event: such a delivery is due when next_attempt_at is at or before the
-- clock's frozen_time, and its schedule counts in the clock's time. Null for real-time deliveries.
ALTER TABLE webhook_deliveries ADD COLUMN test_clock_id text;
-- As for jobs: the real-time claim walks real-time deliveries only, and clock deliveries have their own index.
DROP INDEX webhook_deliveries_due;
CREATE INDEX webhook_deliveries_due_real ON webhook_deliveries (next_attempt_at) WHERE status = 'pending' AND test_clock_id IS NULL;
CREATE INDEX webhook_deliveries_due_test_clock ON webhook_deliveries (test_clock_id, next_attempt_at) WHERE status = 'pending' AND test_clock_id IS NOT NULL;
