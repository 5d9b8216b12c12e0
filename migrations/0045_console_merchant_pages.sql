-- Issue 30: the back-office console's wallet page (src/backoffice-console/merchant-routes.ts; docs/backoffice.md).
--
-- The wallet page lists a merchant's clearing schedule: the pending clearings by the time they clear (the index
-- clearings_pending of migration 0004 serves that order) and the held ones, which have no time, by when they were
-- credited. Without this index the held list would read every clearing of the brand to find one merchant's few.

CREATE INDEX clearings_held ON clearings (white_label_id, merchant_id, livemode, created_at, credit_balance_transaction_id) WHERE status = 'held';

-- The merchant page lists the merchant's API keys a page at a time in id order; the primary key (brand, key) would
-- read every key of the brand to find them.
CREATE INDEX api_keys_merchant ON api_keys (white_label_id, merchant_id, api_key_id);
