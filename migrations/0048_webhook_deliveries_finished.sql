-- Issue 33, item 6: housekeeping's purge of finished deliveries read the whole of webhook_deliveries on every round.
-- Its statement asks for deliveries finished before the retention's cut-off (31 days), and no index led with the
-- completion time, so each round was a sequential scan: 4.4 GB at the full month of bench:growth, every round of
-- every worker process, whether or not anything was old enough to go. Found by the growth bench's retention week at
-- full scale, which never finished its first simulated day (docs/benchmarks.md, "Cost as data grows").
--
-- A partial index on exactly the rows the purge may take (finished: not pending, not leased), by completion time:
-- a round reads the old end of the index and stops after its batch. A delivery enters the index when it finishes
-- (one index insert on that update) and leaves it when it is purged.

CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (completed_at) WHERE status <> 'pending' AND leased_by IS NULL;
