-- The review desk (issue 11): every reviewer decision on an order in review, the evidence a merchant
-- attaches to such an order, and the merchant's force-complete requests. The order itself stays in
-- deposit_orders; these rows are what the review module adds beside it.

CREATE TABLE review_decisions (
  -- One decision of one reviewer on one review of an order, written in the transaction that applies it
  -- (with its audit row). A first approval of a four-eyes review is a decision that changes nothing yet.
  white_label_id        text NOT NULL,
  decision_id           text NOT NULL CHECK (decision_id LIKE 'rvd\_%'),
  deposit_id            text NOT NULL,
  merchant_id           text NOT NULL,
  livemode              boolean NOT NULL,
  review_opened_at      timestamptz NOT NULL,                          -- which review of the order (its review.opened_at)
  action                text NOT NULL CHECK (action IN ('approve', 'reject', 'escalate')),
  effect                text NOT NULL CHECK (effect IN ('approval_recorded', 'settled', 'rejected', 'escalated')),
  reviewer_id           text NOT NULL,                                 -- the back-office credential that decided
  note                  text CHECK (note IS NULL OR length(note) BETWEEN 20 AND 2000), -- internal; never shown to a merchant
  rejection_code        text,                                          -- the rejection.code of a rejection
  verified_amount_minor bigint CHECK (verified_amount_minor IS NULL OR verified_amount_minor > 0), -- V an approval settles with
  amount_source         text CHECK (amount_source IN ('bank', 'reviewer')), -- where V came from: the bank's verified transfers, or the reviewer
  idempotency_key       text CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255), -- the reviewer's key, for replays
  deposit_version       integer NOT NULL CHECK (deposit_version > 0),  -- the order's version after the decision
  created_at            timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, decision_id),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id),
  CHECK ((action = 'reject') = (rejection_code IS NOT NULL)),
  CHECK ((action = 'reject') = (effect = 'rejected')),
  CHECK ((action = 'escalate') = (effect = 'escalated')),
  CHECK (action <> 'approve' OR effect IN ('approval_recorded', 'settled')),
  CHECK ((action = 'approve') = (verified_amount_minor IS NOT NULL AND amount_source IS NOT NULL)),
  CHECK (action = 'approve' OR note IS NOT NULL)
);
-- Four eyes in the database: one reviewer approves one review of an order at most once.
CREATE UNIQUE INDEX review_decisions_one_approval ON review_decisions (white_label_id, deposit_id, review_opened_at, reviewer_id) WHERE action = 'approve';
-- A review ends once: at most one settling or rejecting decision per review.
CREATE UNIQUE INDEX review_decisions_one_outcome ON review_decisions (white_label_id, deposit_id, review_opened_at) WHERE effect IN ('settled', 'rejected');
CREATE UNIQUE INDEX review_decisions_replay ON review_decisions (white_label_id, reviewer_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX review_decisions_by_deposit ON review_decisions (white_label_id, deposit_id, created_at);
-- The desk's recent throughput (for estimated_resolution_bucket): reviews ended per brand and time.
CREATE INDEX review_decisions_outcomes ON review_decisions (white_label_id, livemode, created_at) WHERE effect IN ('settled', 'rejected');

CREATE TABLE deposit_evidence (
  -- Evidence a merchant attached to an order in review (POST /v1/pay/deposits/{id}/evidence): a pointer
  -- into the merchant's own evidence store and a note for the reviewer. JSON only, never a file.
  white_label_id    text NOT NULL,
  evidence_id       text NOT NULL CHECK (evidence_id LIKE 'evd\_%'),
  deposit_id        text NOT NULL,
  merchant_id       text NOT NULL,
  livemode          boolean NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('bank_statement_line', 'chat_transcript', 'id_document_ref', 'other')),
  reference         text NOT NULL CHECK (length(reference) BETWEEN 1 AND 200),
  note              text NOT NULL CHECK (length(note) BETWEEN 1 AND 2000),
  request_id        text NOT NULL,                                   -- the request that attached it
  created_at        timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, evidence_id),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id)
);
CREATE INDEX deposit_evidence_by_deposit ON deposit_evidence (white_label_id, deposit_id, created_at);

CREATE TABLE force_complete_requests (
  -- A merchant's request to accept a short payment (POST /v1/pay/deposits/{id}/force-complete). It asks a
  -- reviewer to decide; it is not an approval. The merchant's figure is kept beside the one the service
  -- derived from the bank's verified transfers, which is the one an approval uses.
  white_label_id                text NOT NULL,
  request_id                    text NOT NULL,                       -- the req_ id of the request
  deposit_id                    text NOT NULL,
  merchant_id                   text NOT NULL,
  livemode                      boolean NOT NULL,
  claimed_verified_amount_minor bigint NOT NULL CHECK (claimed_verified_amount_minor > 0), -- what the merchant says was paid
  derived_verified_amount_minor bigint NOT NULL CHECK (derived_verified_amount_minor > 0), -- V from the bank's verified transfers
  note                          text NOT NULL CHECK (length(note) BETWEEN 20 AND 2000),
  created_at                    timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, request_id),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id)
);
CREATE INDEX force_complete_requests_by_deposit ON force_complete_requests (white_label_id, deposit_id, created_at);

-- The review queue: orders in review of a brand, oldest entry first.
CREATE INDEX deposit_orders_review_queue ON deposit_orders (white_label_id, ((review ->> 'opened_at')), deposit_id) WHERE status = 'under_review';
