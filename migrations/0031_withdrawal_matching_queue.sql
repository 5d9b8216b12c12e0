-- Issue 31: a withdrawal may stay out of the matching queue.
--
-- The sandbox scenarios open withdrawals for one deposit or one scenario alone (104.00, 110.00 and 102.00 THB: the
-- sandbox counterparty's dedicated legs; 107.00 THB: a merchant's test-mode withdrawal that the scenario fills in three
-- chunks). While such an order is in the queue, any other deposit of the brand may reserve it, and the scenario's
-- later steps then find it taken: 110.00's cancel was refused and the order never reached review. Such an order is
-- reserved only by the deposit that names it (`fill_withdrawal_id`, or the dedicated legs of the liquidity provider);
-- the queue's statements skip it (src/withdrawals/repository.ts `matchableConditions`, docs/decisions/sandbox.md).
-- Every live order, and every order made before this migration, stays in the queue.

ALTER TABLE withdrawal_orders ADD COLUMN in_matching_queue boolean NOT NULL DEFAULT true;
