-- Claims get a life cycle (issue 11, item 5). A claim is money a payer says (or the service verified)
-- arrived beyond what an order accepted: an excess of the settling transfer, a transfer after settlement,
-- or a transfer whose slip came after the late-slip window. It is never refunded automatically: a
-- back-office operator investigates it and resolves it with an outcome, or rejects it. The review module
-- owns this table (src/review/claims-repository.ts); the deposit module opens claims through its port.

-- Claims opened before this migration: the late-slip ones came from end users at `claim_url`, the others
-- from the service's own settlement.
ALTER TABLE claims
  ADD COLUMN opened_by        text,                                     -- who opened it: end_user (at claim_url), backoffice, system
  ADD COLUMN opened_by_id     text,                                     -- the back-office credential that opened it; null otherwise
  ADD COLUMN version          integer NOT NULL DEFAULT 1 CHECK (version > 0), -- increases on every change (the claim.* events carry it)
  ADD COLUMN investigated_by  text,                                     -- the back-office credential that started the investigation
  ADD COLUMN investigated_at  timestamptz,                              -- when the investigation started
  ADD COLUMN resolution_code  text CHECK (resolution_code IN (
    'refunded_to_payer', 'credited_to_merchant_outside_service', 'no_transfer_found', 'duplicate_of_other_claim')), -- the outcome of a resolved claim
  ADD COLUMN resolution_note  text CHECK (resolution_note IS NULL OR length(resolution_note) BETWEEN 20 AND 2000), -- internal; never shown to a merchant
  ADD COLUMN resolved_by      text,                                     -- the back-office credential that resolved or rejected it
  ADD COLUMN resolved_at      timestamptz,                              -- when it was resolved or rejected
  ADD COLUMN updated_at       timestamptz;                              -- the last change

UPDATE claims SET opened_by = CASE WHEN cause = 'late_slip' THEN 'end_user' ELSE 'system' END, updated_at = created_at;

ALTER TABLE claims
  ALTER COLUMN opened_by SET NOT NULL,
  ALTER COLUMN updated_at SET NOT NULL,
  ADD CONSTRAINT claims_opened_by_check CHECK (opened_by IN ('end_user', 'backoffice', 'system')),
  ADD CONSTRAINT claims_opened_by_id CHECK ((opened_by = 'backoffice') = (opened_by_id IS NOT NULL)),
  DROP CONSTRAINT claims_status_check,
  ADD CONSTRAINT claims_status_check CHECK (status IN ('open', 'investigating', 'resolved', 'rejected')),
  -- An investigation names who started it and when, and a claim under investigation has started one.
  ADD CONSTRAINT claims_investigation CHECK ((investigated_by IS NULL) = (investigated_at IS NULL) AND (status <> 'investigating' OR investigated_at IS NOT NULL)),
  -- A decided claim (resolved or rejected) says who decided, when and why; an undecided one says none of it.
  ADD CONSTRAINT claims_decision CHECK (
    (status IN ('resolved', 'rejected')) = (resolved_by IS NOT NULL)
    AND (resolved_by IS NULL) = (resolved_at IS NULL)
    AND (resolved_by IS NULL) = (resolution_note IS NULL)),
  -- Only a resolved claim has an outcome code; a rejection is refused as a claim and has none.
  ADD CONSTRAINT claims_resolution_code CHECK ((status = 'resolved') = (resolution_code IS NOT NULL)),
  ADD CONSTRAINT claims_times CHECK (updated_at >= created_at AND (resolved_at IS NULL OR resolved_at >= created_at));

-- The back-office list: a brand's claims oldest first, keyset-paged on (created_at, claim_id).
CREATE INDEX claims_desk ON claims (white_label_id, created_at, claim_id);
-- The claims of one deposit (the list's deposit_id filter).
CREATE INDEX claims_by_deposit ON claims (white_label_id, deposit_id, created_at, claim_id);
