-- Issue 30: the back-office console's order search and audit log (docs/backoffice.md, "Orders" and "Audit log";
-- docs/decisions/backoffice-console.md, "Order search" and "The audit log page").
--
-- The console searches a whole brand, not one merchant: every statement is scoped by white_label_id (and the mode
-- when one is chosen), keyset-paged newest first on (created_at, id),
-- and names only the filters that are set. The merchant-scoped indexes of 0009 and 0035 lead with merchant_id
-- and cannot serve a brand-wide search, so each filter below has an index that leads with the brand and the
-- filter, and ends in the page's order, so that a page is read in order and its LIMIT stops the scan.
-- Checked with EXPLAIN on 200,000 generated orders of each kind, bank transfers and audit rows (test/backoffice-console/
-- orders-plans.test.ts on PostgreSQL): no filter combination scans a table sequentially.

-- Deposits: no filter and the created_at range; the mode; end_user_ref; status; merchant_reference (unique per merchant
-- and mode, so a brand holds a few at most). The id has the primary key.
CREATE INDEX deposit_orders_brand_created ON deposit_orders (white_label_id, created_at DESC, deposit_id DESC);
-- A mode without a selective filter: with the mode as a mere condition, a brand with no live orders made the
-- planner read every test order (a sequential scan, measured), so the mode leads an index of its own.
CREATE INDEX deposit_orders_brand_mode ON deposit_orders (white_label_id, livemode, created_at DESC, deposit_id DESC);
CREATE INDEX deposit_orders_brand_end_user ON deposit_orders (white_label_id, end_user_ref, created_at DESC, deposit_id DESC);
CREATE INDEX deposit_orders_brand_status ON deposit_orders (white_label_id, status, created_at DESC, deposit_id DESC);
CREATE INDEX deposit_orders_brand_reference ON deposit_orders (white_label_id, merchant_reference);

-- Withdrawals: the same five.
CREATE INDEX withdrawal_orders_brand_created ON withdrawal_orders (white_label_id, created_at DESC, withdrawal_id DESC);
CREATE INDEX withdrawal_orders_brand_mode ON withdrawal_orders (white_label_id, livemode, created_at DESC, withdrawal_id DESC);
CREATE INDEX withdrawal_orders_brand_end_user ON withdrawal_orders (white_label_id, end_user_ref, created_at DESC, withdrawal_id DESC);
CREATE INDEX withdrawal_orders_brand_status ON withdrawal_orders (white_label_id, status, created_at DESC, withdrawal_id DESC);
CREATE INDEX withdrawal_orders_brand_reference ON withdrawal_orders (white_label_id, merchant_reference);

-- The bank reference: the transaction reference (trans_ref) of a bank transfer a slip claimed. Its primary key
-- leads with the mode and the sending bank, which the console's search does not know.
CREATE INDEX slip_transfers_by_reference ON slip_transfers (white_label_id, trans_ref);

-- The withdrawals a deposit's transfer paid (the bank reference search of withdrawals, and an order's fills).
CREATE INDEX withdrawal_legs_by_deposit ON withdrawal_legs (white_label_id, deposit_id);

-- The audit log page: newest first, by time range alone, by who (the actor's credentials), what (the action) and
-- the object (its type, and its type and id). audit_log_target of 0001 serves an id without a type.
CREATE INDEX audit_log_brand_time ON audit_log (white_label_id, created_at DESC, audit_id DESC);
CREATE INDEX audit_log_brand_actor ON audit_log (white_label_id, actor_id, created_at DESC, audit_id DESC);
CREATE INDEX audit_log_brand_action ON audit_log (white_label_id, action, created_at DESC, audit_id DESC);
CREATE INDEX audit_log_brand_target ON audit_log (white_label_id, target_type, target_id, created_at DESC, audit_id DESC);

-- "Who" given as a person: the credentials issued to that person (a brand's credential table is small, but the
-- filter runs on every audit page asked for by person).
CREATE INDEX backoffice_credentials_by_staff ON backoffice_credentials (staff_id);
