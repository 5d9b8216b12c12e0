-- Withdrawal disputes (issue 11, item 6): a withdrawing merchant reports that a fill did not reach its
-- beneficiary (or reached it with another amount), and a late slip that paid a leg whose reservation
-- had gone to another deposit (ALLOCATION_CONFLICT) opens one for the system. The dispute holds the
-- related money until an operator, or the deadline job, resolves it for one side.
--
-- The withdrawal order keeps a snapshot of its newest dispute (the spec's `dispute` object) and
-- `funds_on_hold`, so that its versioned view and its events are written from the row alone.

CREATE TABLE withdrawal_disputes (
  white_label_id            text NOT NULL,
  dispute_id                text NOT NULL CHECK (dispute_id LIKE 'dsp\_%'),
  livemode                  boolean NOT NULL,
  kind                      text NOT NULL CHECK (kind IN ('non_receipt', 'allocation_conflict')), -- who opened it and why
  withdrawal_id             text NOT NULL,                                 -- the disputed withdrawal order
  withdrawal_merchant_id    text NOT NULL,                                 -- the withdrawing merchant: the only one told about the dispute
  leg_ref                   text NOT NULL CHECK (leg_ref LIKE 'wleg\_%'),  -- the withdrawal side's fill (or released reservation) in question
  deposit_id                text NOT NULL,                                 -- the deposit that paid (or paid late into) that leg
  deposit_merchant_id       text NOT NULL,                                 -- the depositing merchant, whose money is held
  deposit_leg_ref           text CHECK (deposit_leg_ref LIKE 'dleg\_%'),   -- allocation conflicts: the deposit leg an adjustment may cover
  reason_code               text NOT NULL CHECK (reason_code ~ '^[A-Z][A-Z_]{1,63}$'), -- dispute.reason_code (open enum)
  amount_minor              bigint NOT NULL CHECK (amount_minor > 0),      -- the amount in question (the fill, or what the late slip paid)
  note                      text CHECK (note IS NULL OR length(note) BETWEEN 1 AND 2000), -- the withdrawer's words when opening
  status                    text NOT NULL CHECK (status IN ('open', 'awaiting_decision', 'resolved')),
  clearing_held             boolean NOT NULL,                              -- the depositor's credit was held in clearing by this dispute
  opened_at                 timestamptz NOT NULL,
  respond_by                timestamptz NOT NULL,                          -- evidence is due before this; the deadline job runs then
  evidence_count            integer NOT NULL CHECK (evidence_count BETWEEN 0 AND 10),
  outcome                   text CHECK (outcome IN ('withdrawer', 'depositor')), -- which side the resolution was for
  resolved_by               text CHECK (resolved_by IN ('operator', 'system')),
  resolver_id               text,                                          -- the operator's back-office credential
  resolution_note           text CHECK (resolution_note IS NULL OR length(resolution_note) BETWEEN 20 AND 2000), -- internal; never shown to a merchant
  resolved_at               timestamptz,
  adjustment_balance_transaction_id text,                                  -- the withdrawer's debit that paid an allocation conflict
  adjustment_reversal_balance_transaction_id text,                         -- that debit given back when the covered deposit was reversed
  request_id                text,                                          -- the request that opened it; null when the system did
  created_at                timestamptz NOT NULL,
  updated_at                timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, dispute_id),
  -- One dispute per fill (or per released reservation of an allocation conflict).
  UNIQUE (white_label_id, leg_ref),
  FOREIGN KEY (white_label_id, withdrawal_id) REFERENCES withdrawal_orders (white_label_id, withdrawal_id),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id),
  CHECK (respond_by > opened_at),
  CHECK ((kind = 'allocation_conflict') = (reason_code = 'ALLOCATION_CONFLICT')),
  CHECK ((kind = 'allocation_conflict') = (deposit_leg_ref IS NOT NULL)),
  CHECK (kind = 'non_receipt' OR NOT clearing_held),
  -- Resolved exactly when an outcome, who resolved it and when are known; an operator leaves a note.
  CHECK ((status = 'resolved') = (outcome IS NOT NULL AND resolved_by IS NOT NULL AND resolved_at IS NOT NULL)),
  CHECK ((resolved_by = 'operator') = (resolver_id IS NOT NULL AND resolution_note IS NOT NULL)),
  -- A dispute waits for an operator after its deadline only when evidence came in time.
  CHECK (status <> 'awaiting_decision' OR evidence_count > 0),
  -- Only an allocation conflict resolved for the depositor debits the withdrawer, and only that debit is given back.
  CHECK (adjustment_balance_transaction_id IS NULL OR (kind = 'allocation_conflict' AND outcome = 'depositor')),
  CHECK (adjustment_reversal_balance_transaction_id IS NULL OR adjustment_balance_transaction_id IS NOT NULL)
);
-- The back-office list: a brand's disputes by status, oldest or newest first.
CREATE INDEX withdrawal_disputes_by_status ON withdrawal_disputes (white_label_id, status, opened_at, dispute_id);
CREATE INDEX withdrawal_disputes_by_withdrawal ON withdrawal_disputes (white_label_id, withdrawal_id, opened_at);
CREATE INDEX withdrawal_disputes_by_deposit ON withdrawal_disputes (white_label_id, deposit_id);

CREATE TABLE withdrawal_dispute_evidence (
  -- Evidence the withdrawing merchant sent before respond_by (POST /v1/pay/disputes/{id}/evidence): a
  -- pointer into the merchant's own evidence store and a note for the operator. JSON only, never a file.
  white_label_id    text NOT NULL,
  evidence_id       text NOT NULL CHECK (evidence_id LIKE 'dse\_%'),
  dispute_id        text NOT NULL,
  merchant_id       text NOT NULL,                                   -- the withdrawing merchant that sent it
  livemode          boolean NOT NULL,
  kind              text NOT NULL CHECK (kind IN ('bank_statement_line', 'chat_transcript', 'id_document_ref', 'other')),
  reference         text NOT NULL CHECK (length(reference) BETWEEN 1 AND 200),
  note              text NOT NULL CHECK (length(note) BETWEEN 1 AND 2000),
  request_id        text NOT NULL,                                   -- the request that sent it
  created_at        timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, evidence_id),
  FOREIGN KEY (white_label_id, dispute_id) REFERENCES withdrawal_disputes (white_label_id, dispute_id)
);
CREATE INDEX withdrawal_dispute_evidence_by_dispute ON withdrawal_dispute_evidence (white_label_id, dispute_id, created_at);

-- The order's snapshot of its newest dispute, as the withdrawing merchant sees it, and whether money
-- related to an unresolved dispute of the order is held (spec: `dispute`, `funds_on_hold`).
ALTER TABLE withdrawal_orders ADD COLUMN dispute jsonb;
ALTER TABLE withdrawal_orders ADD COLUMN funds_on_hold boolean NOT NULL DEFAULT false;
ALTER TABLE withdrawal_orders ADD CONSTRAINT withdrawal_orders_hold_has_dispute CHECK (NOT funds_on_hold OR dispute IS NOT NULL);
