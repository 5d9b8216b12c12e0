-- Issue 31: `is_terminal` of an expired or canceled order turns true as a change of the order, not as a
-- reading of the clock (spec, deposit_order: "`version` … Increases on every change of the object"; "`is_terminal`
-- must be read instead of the status name when deciding whether an order is closed"). The close job
-- (deposits.close_window, at `late_slip_accepted_until`) stores when it closed the window here, with a new
-- version and the event `deposit.closed`. Null: not closed by the job (an open window, or none at all).
-- Orders whose window had already passed before this migration are marked closed at their window's end, so
-- they stay terminal as they read before; no event is written for them.
ALTER TABLE deposit_orders ADD COLUMN window_closed_at timestamptz;
UPDATE deposit_orders SET window_closed_at = late_slip_accepted_until
 WHERE status IN ('expired', 'canceled') AND late_slip_accepted_until IS NOT NULL AND late_slip_accepted_until <= now();
