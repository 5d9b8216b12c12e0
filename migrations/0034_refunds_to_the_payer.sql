-- Issue 32: refunds to the payer, as withdrawals to the account the bank verified as the deposit's sender
-- (docs/decisions/refunds.md).
--
-- A deposit may have several refunds, up to what was credited for it; issue 4's rule of one live refund per deposit
-- (a partial unique index) goes. What bounds the refunds of a deposit is its allowance row below: the refunds'
-- claim on the deposit (`committed_minor`) never exceeds what the deposit brought (`refundable_cap_minor`), and the
-- database refuses a row that breaks it, so two refunds racing for the last baht cannot both commit.

DROP INDEX withdrawal_orders_refund;

-- Why a merchant refunds (a closed list, docs/decisions/refunds.md) and its own note, on the refund's order.
CREATE DOMAIN withdrawal_orders_refund_reason_code AS text
  CONSTRAINT withdrawal_orders_refund_reason_code_check CHECK ((VALUE = ANY (ARRAY[
    'customer_request'::text, 'canceled_purchase'::text, 'duplicate_payment'::text, 'overpayment'::text,
    'dispute_lost'::text, 'claim_resolution'::text, 'other'::text])));
CREATE DOMAIN withdrawal_orders_refund_note AS text
  CONSTRAINT withdrawal_orders_refund_note_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 500)));

ALTER TABLE withdrawal_orders
  ADD COLUMN refund_reason_code withdrawal_orders_refund_reason_code,
  ADD COLUMN refund_note withdrawal_orders_refund_note;

-- The refunds of one deposit, newest first (GET /v1/pay/deposits/{id}/refunds, and the deposit's refund summary).
CREATE INDEX withdrawal_orders_refunds_of_deposit ON withdrawal_orders (white_label_id, refund_of_deposit_id, created_at DESC, withdrawal_id DESC)
  WHERE refund_of_deposit_id IS NOT NULL;

CREATE DOMAIN withdrawal_refund_allowances_deposit_id AS text
  CONSTRAINT withdrawal_refund_allowances_deposit_id_check CHECK ((VALUE ~~ 'dep\_%'::text));
CREATE DOMAIN withdrawal_refund_allowances_refundable_cap_minor AS bigint
  CONSTRAINT withdrawal_refund_allowances_refundable_cap_minor_check CHECK ((VALUE > 0));
CREATE DOMAIN withdrawal_refund_allowances_committed_minor AS bigint
  CONSTRAINT withdrawal_refund_allowances_committed_minor_check CHECK ((VALUE >= 0));
-- A bound on the refunds one deposit may have (src/withdrawals/refunds.ts MAX_REFUNDS_PER_DEPOSIT).
CREATE DOMAIN withdrawal_refund_allowances_refund_count AS integer
  CONSTRAINT withdrawal_refund_allowances_refund_count_check CHECK (((VALUE >= 0) AND (VALUE <= 20)));

CREATE TABLE withdrawal_refund_allowances (
  -- What the refunds of one deposit may still take. Written by the withdrawals module in the transaction that
  -- creates, closes or reverses a fill of a refund; the deposit's credit is its cap, given by the refunds layer.
  white_label_id          text NOT NULL,
  merchant_id             text NOT NULL,
  livemode                boolean NOT NULL,
  deposit_id              withdrawal_refund_allowances_deposit_id NOT NULL,
  refundable_cap_minor    withdrawal_refund_allowances_refundable_cap_minor NOT NULL, -- the deposit's amount_received_minor
  -- The refunds' claim: the whole amount of each live refund, and what each closed refund paid out.
  committed_minor         withdrawal_refund_allowances_committed_minor NOT NULL,
  refund_count            withdrawal_refund_allowances_refund_count NOT NULL,        -- refunds the merchant or an operator opened
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, deposit_id),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  CONSTRAINT withdrawal_refund_allowances_within_cap CHECK ((committed_minor <= refundable_cap_minor))
);
