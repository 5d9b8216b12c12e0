-- The matching queue, indexed in both orders the matcher reads it, so that finding a withdrawal costs
-- the same with a thousand or a hundred thousand open orders in the brand (docs/benchmarks.md,
-- "Deposits"). Each index ends in the full ORDER BY of its statement, so a LIMIT stops the scan at the
-- first rows it can lock and no sort is needed.
DROP INDEX withdrawal_orders_matchable;

-- Rule 2: the oldest live order that can take a deposit whole.
CREATE INDEX withdrawal_orders_queue_oldest ON withdrawal_orders (white_label_id, livemode, created_at, withdrawal_id)
  WHERE status IN ('open', 'partially_filled') AND remaining_minor > 0;

-- Rule 3 and suggested amounts: the live orders with the most left to pay; for rule 2 also the
-- range of orders whose remaining covers the amount, when that range is small.
CREATE INDEX withdrawal_orders_queue_largest ON withdrawal_orders (white_label_id, livemode, remaining_minor DESC, created_at, withdrawal_id)
  WHERE status IN ('open', 'partially_filled') AND remaining_minor > 0;
