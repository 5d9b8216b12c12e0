-- Issue 32, item 2: a claim can be resolved "refunded in the service", by a refund of its deposit that the resolution
-- creates or names (docs/decisions/claims.md, "Resolved by a refund in the service").
--
-- * The closed list of outcomes gains `refunded_in_service`: the money went back to the payer through a refund of the
--   service (a withdrawal with `refund_of_deposit_id`), not outside it like `refunded_to_payer`.
-- * `refund_id` names that refund. The rule claims_refund: a claim has a refund exactly when it was resolved
--   `refunded_in_service`. A table keeps one CHECK over several columns, calling its rules function (migration 0026),
--   and a function's arguments cannot change in place: the CHECK is dropped, the function replaced by one that also
--   takes refund_id, and the CHECK added back, with every earlier rule kept by name and expression.
-- * The refund is a withdrawal order of the claim's brand, and one refund resolves one claim at most.

ALTER DOMAIN claims_resolution_code DROP CONSTRAINT claims_resolution_code_check;
ALTER DOMAIN claims_resolution_code ADD CONSTRAINT claims_resolution_code_check
  CHECK ((VALUE = ANY (ARRAY['refunded_to_payer'::text, 'credited_to_merchant_outside_service'::text, 'no_transfer_found'::text,
    'duplicate_of_other_claim'::text, 'refunded_in_service'::text])));

CREATE DOMAIN claims_refund_id AS text CONSTRAINT claims_refund_id_check CHECK ((VALUE ~~ 'wdr\_%'::text));

ALTER TABLE claims ADD COLUMN refund_id claims_refund_id;
ALTER TABLE claims
  ADD CONSTRAINT claims_refund_of_brand FOREIGN KEY (white_label_id, refund_id) REFERENCES withdrawal_orders (white_label_id, withdrawal_id);
CREATE UNIQUE INDEX claims_refund ON claims (white_label_id, refund_id) WHERE refund_id IS NOT NULL;

ALTER TABLE claims DROP CONSTRAINT claims_rules;
DROP FUNCTION claims_rules_hold(text, bigint, text, timestamp with time zone, text, text, text, timestamp with time zone, text, text, text, timestamp with time zone, timestamp with time zone);

CREATE FUNCTION claims_rules_hold(
  cause text,
  amount_minor bigint,
  status text,
  created_at timestamp with time zone,
  opened_by text,
  opened_by_id text,
  investigated_by text,
  investigated_at timestamp with time zone,
  resolution_code text,
  resolution_note text,
  resolved_by text,
  resolved_at timestamp with time zone,
  updated_at timestamp with time zone,
  refund_id text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((cause = 'late_slip'::text) OR (amount_minor IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_amount_known"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_amount_known', TABLE = 'claims';
  END IF;
  IF NOT coalesce((((status = ANY (ARRAY['resolved'::text, 'rejected'::text])) = (resolved_by IS NOT NULL)) AND ((resolved_by IS NULL) = (resolved_at IS NULL)) AND ((resolved_by IS NULL) = (resolution_note IS NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_decision"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_decision', TABLE = 'claims';
  END IF;
  IF NOT coalesce((((investigated_by IS NULL) = (investigated_at IS NULL)) AND ((status <> 'investigating'::text) OR (investigated_at IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_investigation"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_investigation', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((opened_by = 'backoffice'::text) = (opened_by_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_opened_by_id"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_opened_by_id', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((coalesce(resolution_code, '') = 'refunded_in_service'::text) = (refund_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_refund"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_refund', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((status = 'resolved'::text) = (resolution_code IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_resolution_code"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_resolution_code', TABLE = 'claims';
  END IF;
  IF NOT coalesce(((updated_at >= created_at) AND ((resolved_at IS NULL) OR (resolved_at >= created_at))), true) THEN
    RAISE EXCEPTION 'new row for relation "claims" violates check constraint "claims_times"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'claims_times', TABLE = 'claims';
  END IF;
  RETURN true;
END $$;

ALTER TABLE claims
  ADD CONSTRAINT claims_rules CHECK (claims_rules_hold(cause, amount_minor, status, created_at, opened_by, opened_by_id, investigated_by, investigated_at, resolution_code, resolution_note, resolved_by, resolved_at, updated_at, refund_id));
