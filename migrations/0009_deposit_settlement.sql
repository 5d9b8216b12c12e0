-- Settlement of deposits: the amounts of the spec's settlement invariants, the slip timing, the
-- reversal, and claims for excess money (same-slip overpayment or a transfer after settlement).

ALTER TABLE deposit_orders
  ADD COLUMN slip_received_at         timestamptz,                 -- when the slip was accepted
  ADD COLUMN slip_is_late             boolean,                     -- uploaded after expiry or cancel
  ADD COLUMN transferred_amount_minor bigint,                      -- V: what the bank verified as transferred
  ADD COLUMN amount_received_minor    bigint,                      -- A = min(V, X): accepted into the order
  ADD COLUMN fee_total_minor          bigint,                      -- charged to the merchant, out of A
  ADD COLUMN fee_breakdown            json,                        -- the three fee components
  ADD COLUMN credited_amount_minor    bigint,                      -- A - fee: what the wallet moved by
  ADD COLUMN partial                  boolean,                     -- a short payment accepted at V
  ADD COLUMN settled_via              text CHECK (settled_via IN ('auto', 'review')),
  ADD COLUMN balance_transaction_id   text,                        -- the deposit_settled movement (null when nothing was credited)
  ADD COLUMN settled_at               timestamptz,
  ADD COLUMN clearing_available_at    timestamptz,                 -- when the credit moves to available; null while held
  ADD COLUMN overpayment              json,                        -- the claim snapshot of an excess, or null
  ADD COLUMN reversal                 json,                        -- reason and movements of a reversal
  ADD COLUMN review                   json,                        -- the review object while under review
  ADD COLUMN rejection                json,                        -- code and display texts once rejected
  ADD COLUMN verification             json,                        -- the six booleans of the last verified slip
  ADD COLUMN slip_attempts            integer NOT NULL DEFAULT 0 CHECK (slip_attempts BETWEEN 0 AND 3), -- slips taken for this order
  -- The spec's settlement invariants 1-3 on every settled or reversed row.
  ADD CONSTRAINT deposit_orders_settlement CHECK (
    status NOT IN ('settled', 'reversed') OR (
      transferred_amount_minor IS NOT NULL AND amount_received_minor IS NOT NULL AND fee_total_minor IS NOT NULL
      AND credited_amount_minor IS NOT NULL AND partial IS NOT NULL AND settled_via IS NOT NULL AND settled_at IS NOT NULL
      AND amount_received_minor > 0
      AND amount_received_minor = least(transferred_amount_minor, amount_minor)
      AND fee_total_minor >= 0 AND fee_total_minor <= amount_received_minor
      AND credited_amount_minor = amount_received_minor - fee_total_minor
      AND partial = (transferred_amount_minor < amount_minor)
    )),
  ADD CONSTRAINT deposit_orders_reversal CHECK ((status = 'reversed') = (reversal IS NOT NULL)),
  ADD CONSTRAINT deposit_orders_review CHECK (status <> 'under_review' OR review IS NOT NULL),
  ADD CONSTRAINT deposit_orders_rejection CHECK ((status = 'rejected') = (rejection IS NOT NULL));

CREATE TABLE claims (
  -- Money that arrived beyond what an order accepted: never refunded automatically, resolved with support.
  white_label_id          text NOT NULL,
  merchant_id             text NOT NULL,
  livemode                boolean NOT NULL,
  claim_id                text NOT NULL CHECK (claim_id LIKE 'clm\_%'),
  deposit_id              text NOT NULL,
  cause                   text NOT NULL CHECK (cause IN ('same_transfer_excess', 'additional_transfer')),
  amount_minor            bigint NOT NULL CHECK (amount_minor > 0),     -- the excess E
  slip_received_at        timestamptz NOT NULL,
  status                  text NOT NULL CHECK (status IN ('open', 'resolved')),
  dedupe_key              text NOT NULL,                                 -- what makes the claim happen once
  created_at              timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, claim_id),
  UNIQUE (white_label_id, dedupe_key),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id)
);

-- The merchant's deposit list: newest first, keyset-paged by (created_at, deposit_id).
CREATE INDEX deposit_orders_listing ON deposit_orders (white_label_id, merchant_id, livemode, created_at DESC, deposit_id DESC);

CREATE TABLE senders (
  -- An end user's sender account that a settled deposit verified (bank, account and name all matched).
  -- `sender_id` in a later deposit then names it, so its declared details cannot mismatch.
  white_label_id          text NOT NULL,
  merchant_id             text NOT NULL,
  livemode                boolean NOT NULL,
  sender_id               text NOT NULL CHECK (sender_id LIKE 'snd\_%'),
  end_user_ref            text NOT NULL,
  bank_code               text NOT NULL,
  account_sealed          text NOT NULL,                                  -- the account number, sealed (SecretBox)
  account_hmac            text NOT NULL,                                  -- HMAC of bank_code:account_number
  account_last4           text NOT NULL,
  name_th                 text NOT NULL,
  name_en                 text,
  verified_by_deposit_id  text NOT NULL,                                  -- the settled deposit that verified it
  created_at              timestamptz NOT NULL,
  last_used_at            timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, sender_id),
  UNIQUE (white_label_id, merchant_id, livemode, end_user_ref, account_hmac),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id)
);
