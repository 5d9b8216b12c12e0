-- Issue 30 (the console's speed): the review queue's reasons, kept beside the orders in review so that the
-- queue's counts per reason and its reason filter read an index instead of every open review's JSON
-- (docs/decisions/review-desk.md, "The queue at a hundred thousand open reviews").
--
-- * One row per reason code of each order in review: its brand, mode, the review's opened_at text (what the
--   queue orders by) and whether the review is escalated. The index below serves the counts per reason as an
--   index-only scan and a reason's page of the queue in the queue's own order, so neither reads the orders'
--   rows, whose number grows with the traffic.
-- * Triggers keep it, so every way an order enters, changes within or leaves review (the transition function,
--   a reviewer's decision, an escalation) is followed without an edit and without a round trip, in the
--   transaction that writes the order. The rows are a projection of deposit_orders.review and nothing else
--   writes them.
-- * The trigger of an update fires only when the order is or was in review, so the updates of every other
--   order (nearly all of them) pay one comparison.

CREATE TABLE deposit_review_reasons (
  white_label_id text NOT NULL,
  deposit_id     text NOT NULL,
  reason_code    text NOT NULL,
  livemode       boolean NOT NULL,
  opened_at      text NOT NULL,
  escalated      boolean NOT NULL,
  PRIMARY KEY (white_label_id, deposit_id, reason_code),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id) ON DELETE CASCADE
);

CREATE INDEX deposit_review_reasons_queue ON deposit_review_reasons (white_label_id, reason_code, opened_at, deposit_id) INCLUDE (livemode, escalated);

-- Escalated reviews are few: the queue filtered to them walks this index instead of every open review.
CREATE INDEX deposit_orders_review_queue_escalated ON deposit_orders (white_label_id, ((review ->> 'opened_at')), deposit_id)
  WHERE status = 'under_review' AND (review ->> 'escalated') = 'true';

CREATE FUNCTION deposit_review_reasons_follow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    DELETE FROM deposit_review_reasons WHERE white_label_id = OLD.white_label_id AND deposit_id = OLD.deposit_id;
  END IF;
  IF NEW.status = 'under_review' THEN
    INSERT INTO deposit_review_reasons (white_label_id, deposit_id, reason_code, livemode, opened_at, escalated)
    SELECT DISTINCT NEW.white_label_id, NEW.deposit_id, reason ->> 'code', NEW.livemode, NEW.review ->> 'opened_at',
           coalesce((NEW.review ->> 'escalated')::boolean, false)
      FROM jsonb_array_elements(coalesce(NEW.review::jsonb -> 'reasons', '[]'::jsonb)) AS reason;
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER deposit_review_reasons_on_insert
  AFTER INSERT ON deposit_orders
  FOR EACH ROW
  WHEN (NEW.status = 'under_review')
  EXECUTE FUNCTION deposit_review_reasons_follow();

CREATE TRIGGER deposit_review_reasons_on_update
  AFTER UPDATE ON deposit_orders
  FOR EACH ROW
  WHEN (OLD.status = 'under_review' OR NEW.status = 'under_review')
  EXECUTE FUNCTION deposit_review_reasons_follow();

INSERT INTO deposit_review_reasons (white_label_id, deposit_id, reason_code, livemode, opened_at, escalated)
SELECT DISTINCT o.white_label_id, o.deposit_id, reason ->> 'code', o.livemode, o.review ->> 'opened_at', coalesce((o.review ->> 'escalated')::boolean, false)
  FROM deposit_orders o, jsonb_array_elements(coalesce(o.review::jsonb -> 'reasons', '[]'::jsonb)) AS reason
 WHERE o.status = 'under_review';
