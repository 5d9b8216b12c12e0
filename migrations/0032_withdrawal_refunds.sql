-- Issue 31, item 2: a closed withdrawal's refunded_minor is the amount returned to the balance, and nothing stays open.
--
-- The spec's withdrawal_order table: "`remaining_minor` | Amount still open" and "`refunded_minor` | Amount returned to
-- the balance"; its wallet table: "Withdrawal expires or is canceled with a remainder | Remainder plus unused fee
-- returns | `withdrawal_released` (credit)". Until now a closed order kept its unpaid principal in remaining_minor and
-- refunded_minor repeated it (principal only). Now, once an order is closed (settled, expired, canceled, rejected):
-- * remaining_minor is 0 and reserved_minor is 0 (withdrawal_orders_check5);
-- * refunded_minor is what came back to available: the withdrawal_released credit (remainder plus unused fee), plus
--   the reversal credits of any fill reversed after the close, so amount + fee = filled + fee recognised + refunded
--   (withdrawal_orders_check5);
-- * the spec's identity total = filled + reserved + remaining holds while the order is live (withdrawal_orders_check).
-- The rules keep their names (migration 0026's one rules function per table); src/withdrawals/transitions.ts
-- `assertOrderInvariants` asserts the same before every write.
--
-- Closed orders already stored are rewritten to the new meaning from the identity itself: every amount that left
-- reserved at or after the close went to available, so refunded = amount + fee - filled - fee recognised. Their
-- version does not move and no event is written: the money did not change, only how the row states it
-- (docs/decisions/withdrawals.md, "Refunds at close").

CREATE OR REPLACE FUNCTION withdrawal_orders_rules_hold(
  status text,
  amount_total_minor bigint,
  fee_total_minor bigint,
  fee_recognized_minor bigint,
  filled_minor bigint,
  reserved_minor bigint,
  remaining_minor bigint,
  refunded_minor bigint,
  settled_splits integer,
  max_splits integer,
  approval_expires_at timestamp with time zone,
  closed_at timestamp with time zone,
  dispute jsonb,
  funds_on_hold boolean
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((refunded_minor IS NOT NULL) OR (amount_total_minor = ((filled_minor + reserved_minor) + remaining_minor))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce((fee_recognized_minor <= fee_total_minor), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check1', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status <> 'partially_filled'::text) OR (filled_minor > 0)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check10"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check10', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce((settled_splits <= max_splits), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check2', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((amount_total_minor + fee_total_minor) <= '9007199254740991'::bigint), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check3', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status = ANY (ARRAY['settled'::text, 'expired'::text, 'canceled'::text, 'rejected'::text])) = (refunded_minor IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check4', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((refunded_minor IS NULL) OR ((reserved_minor = 0) AND (remaining_minor = 0) AND ((amount_total_minor + fee_total_minor) = ((filled_minor + fee_recognized_minor) + refunded_minor)))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check5', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status = ANY (ARRAY['settled'::text, 'expired'::text, 'canceled'::text, 'rejected'::text])) = (closed_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check6"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check6', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status <> ALL (ARRAY['pending_approval'::text, 'rejected'::text])) OR ((filled_minor = 0) AND (reserved_minor = 0))), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check7"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check7', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status = 'pending_approval'::text) = (approval_expires_at IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check8"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check8', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((status <> 'open'::text) OR (filled_minor = 0)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_check9"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_check9', TABLE = 'withdrawal_orders';
  END IF;
  IF NOT coalesce(((NOT funds_on_hold) OR (dispute IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "withdrawal_orders" violates check constraint "withdrawal_orders_hold_has_dispute"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'withdrawal_orders_hold_has_dispute', TABLE = 'withdrawal_orders';
  END IF;
  RETURN true;
END $$;

UPDATE withdrawal_orders
   SET refunded_minor = amount_total_minor + fee_total_minor - filled_minor - fee_recognized_minor,
       remaining_minor = 0
 WHERE refunded_minor IS NOT NULL;
