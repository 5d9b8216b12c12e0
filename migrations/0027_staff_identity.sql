-- Issue 28: four eyes counts people, not credentials.
--
-- A back-office credential is a bearer token; a person may hold several (an operator's and a reviewer's, an old and a
-- new one). Four eyes and the escalation rule of the review desk compare people, so every credential now names the
-- staff identity (the person) it was issued to, and every review decision records the person behind the credential that
-- made it (a decision the service makes itself, without a credential, has no person). One person approves one review at
-- most once, whichever of their credentials they use: the unique index below replaces the one-approval-per-credential
-- index of 0012, which it implies for credentials (a decision names its credential's person, by the reference below,
-- and that reference keeps a credential's person from changing once it has decided); a second index keeps 0012's rule
-- for the service's own desk, which has no person.
--
-- Rules of one column are domains (migration 0026; test/schema-rules.test.ts keeps that shape).

CREATE DOMAIN staff_identities_staff_id AS text CONSTRAINT staff_identities_staff_id_check CHECK ((VALUE ~~ 'stf\_%'::text));
CREATE DOMAIN staff_identities_name AS text CONSTRAINT staff_identities_name_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 200)));

CREATE TABLE staff_identities (
  -- One person who works in a back office. Created with a credential (named by the credential's name) unless the
  -- credential's creation names an existing person; written with its audit row in the transaction of that creation.
  white_label_id   text REFERENCES brands (white_label_id),                 -- the brand the person works for; null: platform staff
  staff_id         staff_identities_staff_id PRIMARY KEY,                   -- stf_ + ULID
  name             staff_identities_name NOT NULL,                          -- who the person is, as the creator named them
  created_at       timestamptz NOT NULL,
  -- The target of the credentials' reference that keeps a credential and its person in one brand.
  UNIQUE (white_label_id, staff_id)
);

-- Every existing credential was, as far as anyone recorded, its own person: each gets an identity of its own, with the
-- credential's name and creation time, and the credential's ULID under the staff prefix (so the backfill is repeatable).
INSERT INTO staff_identities (white_label_id, staff_id, name, created_at)
  SELECT white_label_id, 'stf_' || substr(credential_id, 5), name, created_at FROM backoffice_credentials;

ALTER TABLE backoffice_credentials ADD COLUMN staff_id text;                -- the person the credential was issued to
UPDATE backoffice_credentials SET staff_id = 'stf_' || substr(credential_id, 5);
ALTER TABLE backoffice_credentials
  ALTER COLUMN staff_id SET NOT NULL,
  ADD CONSTRAINT backoffice_credentials_staff FOREIGN KEY (staff_id) REFERENCES staff_identities (staff_id),
  -- A brand's credential belongs to a person of that brand (not checked for platform credentials, whose brand is null).
  ADD CONSTRAINT backoffice_credentials_staff_of_brand FOREIGN KEY (white_label_id, staff_id) REFERENCES staff_identities (white_label_id, staff_id),
  -- The target of the decisions' reference that ties a decision's person to its credential.
  ADD CONSTRAINT backoffice_credentials_credential_staff UNIQUE (credential_id, staff_id);

-- The person behind each decision: the staff identity of its credential (reviewer_id), at the time it was made. The
-- reference to (credential_id, staff_id) means no decision can name another person than its credential's.
--
-- A decision the service makes itself (the sandbox's desk: reviewer_id 'sandbox_scenario', an actor of type system)
-- has no credential and no person, so its staff_id stays null; the backfill leaves such decisions null and gives every
-- credential's decision its person. The rule review_decisions_staff_iff_credential (in the table's rules, below) says
-- exactly that: staff_id is null exactly when reviewer_id is not a credential's id. Without it a credential's decision
-- could drop its person, since a reference with a null column is not checked.
ALTER TABLE review_decisions ADD COLUMN staff_id text;
UPDATE review_decisions d SET staff_id = c.staff_id FROM backoffice_credentials c WHERE c.credential_id = d.reviewer_id;
ALTER TABLE review_decisions
  ADD CONSTRAINT review_decisions_staff_of_credential FOREIGN KEY (reviewer_id, staff_id) REFERENCES backoffice_credentials (credential_id, staff_id);

-- The table's rules gain review_decisions_staff_iff_credential. A table keeps one CHECK over several columns, calling
-- its rules function (migration 0026), and a function's arguments cannot change in place: the CHECK is dropped, the
-- function replaced by one that also takes reviewer_id and staff_id, and the CHECK added back, which checks the
-- backfilled rows (a decision by a credential that no longer exists would fail here, as it should).
ALTER TABLE review_decisions DROP CONSTRAINT review_decisions_rules;
DROP FUNCTION review_decisions_rules_hold(text, text, text, text, bigint, text);

CREATE FUNCTION review_decisions_rules_hold(
  action text,
  effect text,
  note text,
  rejection_code text,
  verified_amount_minor bigint,
  amount_source text,
  reviewer_id text,
  staff_id text
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF NOT coalesce(((action = 'reject'::text) = (rejection_code IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'reject'::text) = (effect = 'rejected'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check1"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check1', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'escalate'::text) = (effect = 'escalated'::text)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check2"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check2', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action <> 'approve'::text) OR (effect = ANY (ARRAY['approval_recorded'::text, 'settled'::text]))), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check3"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check3', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'approve'::text) = ((verified_amount_minor IS NOT NULL) AND (amount_source IS NOT NULL))), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check4"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check4', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((action = 'approve'::text) OR (note IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_check5"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_check5', TABLE = 'review_decisions';
  END IF;
  IF NOT coalesce(((reviewer_id ~~ 'boc\_%'::text) = (staff_id IS NOT NULL)), true) THEN
    RAISE EXCEPTION 'new row for relation "review_decisions" violates check constraint "review_decisions_staff_iff_credential"'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'review_decisions_staff_iff_credential', TABLE = 'review_decisions';
  END IF;
  RETURN true;
END $$;

ALTER TABLE review_decisions
  ADD CONSTRAINT review_decisions_rules CHECK (review_decisions_rules_hold(action, effect, note, rejection_code, verified_amount_minor, amount_source, reviewer_id, staff_id));

-- Four eyes in the database, by person: one staff identity approves one review of an order at most once. A decision
-- without a person (null staff_id) is nobody's approval for this index; the service's own desk approves one review at
-- most once by the second index, as every reviewer did by 0012's index, so its approval counts as one approval.
CREATE UNIQUE INDEX review_decisions_one_approval_per_staff ON review_decisions (white_label_id, deposit_id, review_opened_at, staff_id) WHERE action = 'approve';
CREATE UNIQUE INDEX review_decisions_one_approval_per_system_reviewer ON review_decisions (white_label_id, deposit_id, review_opened_at, reviewer_id)
  WHERE action = 'approve' AND staff_id IS NULL;
DROP INDEX review_decisions_one_approval;
