-- The merchant wallet: a double-entry ledger with three buckets per merchant and environment.
-- Every movement is an immutable balance_transaction that names the bucket it leaves and the bucket
-- it enters (null is outside the wallet); the wallet row holds the running balances, updated in the
-- same transaction, and each movement records the balances after it, so the row can always be
-- re-derived from the movements and checked against them.

CREATE TABLE wallets (
  white_label_id         text NOT NULL,                                  -- brand
  merchant_id            text NOT NULL,                                  -- owner of the wallet
  livemode               boolean NOT NULL,                               -- sandbox and live wallets are separate
  available_minor        bigint NOT NULL,                                -- withdrawable; below zero only as a visible debt (a reversal of cleared money)
  pending_clearing_minor bigint NOT NULL CHECK (pending_clearing_minor >= 0), -- credited, not yet cleared (72 h) or held
  reserved_minor         bigint NOT NULL CHECK (reserved_minor >= 0),    -- locked for open withdrawals, principal plus fee
  last_sequence          bigint NOT NULL CHECK (last_sequence >= 0),     -- sequence of the latest movement folded in
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, merchant_id, livemode),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  CHECK (abs(available_minor) <= 9007199254740991 AND pending_clearing_minor <= 9007199254740991 AND reserved_minor <= 9007199254740991)
);

CREATE TABLE balance_transactions (
  white_label_id         text NOT NULL,
  merchant_id            text NOT NULL,
  livemode               boolean NOT NULL,
  balance_transaction_id text NOT NULL CHECK (balance_transaction_id LIKE 'btxn\_%'),
  sequence               bigint NOT NULL CHECK (sequence > 0),           -- order of movements in this wallet, 1, 2, …
  movement_key           text NOT NULL,                                  -- what makes the movement happen once (e.g. deposit_settled:dep_…)
  type                   text NOT NULL CHECK (type IN ('deposit_settled', 'clearing_released', 'withdrawal_reserved',
                           'withdrawal_settled', 'withdrawal_released', 'fee', 'reversal', 'adjustment')),
  direction              text NOT NULL CHECK (direction IN ('credit', 'debit')),
  amount_minor           bigint NOT NULL CHECK (amount_minor > 0 AND amount_minor <= 9007199254740991), -- always positive
  currency               text NOT NULL CHECK (currency = 'THB'),
  bucket_from            text CHECK (bucket_from IN ('available', 'pending_clearing', 'reserved')), -- null: from outside
  bucket_to              text CHECK (bucket_to IN ('available', 'pending_clearing', 'reserved')),   -- null: to outside
  available_at           timestamptz,                                    -- when a pending credit becomes withdrawable
  available_after        bigint NOT NULL,                                -- balance_after.available_minor
  pending_clearing_after bigint NOT NULL CHECK (pending_clearing_after >= 0),
  reserved_after         bigint NOT NULL CHECK (reserved_after >= 0),
  source_type            text NOT NULL,                                  -- e.g. deposit_order, withdrawal_order
  source_id              text NOT NULL,
  reverses_balance_transaction_id     text,                              -- set on reversals only
  reason_code            text,                                           -- reason of a reversal or adjustment
  reason_display_th      text,
  cleared_from_balance_transaction_id text,                              -- set on clearing_released only
  created_at             timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, balance_transaction_id),
  UNIQUE (white_label_id, merchant_id, livemode, sequence),
  UNIQUE (white_label_id, merchant_id, livemode, movement_key),
  FOREIGN KEY (white_label_id, merchant_id, livemode) REFERENCES wallets (white_label_id, merchant_id, livemode),
  CHECK (bucket_from IS DISTINCT FROM bucket_to),
  CHECK (bucket_from IS NOT NULL OR bucket_to IS NOT NULL),
  -- Only a reversal or an adjustment may take available below zero. A movement into available while it
  -- carries a debt (a clearing release, say) leaves it negative but smaller, and is allowed.
  CHECK (available_after >= 0 OR type IN ('reversal', 'adjustment') OR bucket_from IS DISTINCT FROM 'available'),
  CHECK ((type = 'clearing_released') = (cleared_from_balance_transaction_id IS NOT NULL)),
  CHECK (type <> 'reversal' OR reverses_balance_transaction_id IS NOT NULL),
  CHECK ((type = 'deposit_settled') = (available_at IS NOT NULL AND bucket_to = 'pending_clearing') OR type <> 'deposit_settled')
);
CREATE INDEX balance_transactions_source ON balance_transactions (white_label_id, source_type, source_id);

CREATE TABLE clearings (
  -- One row per credit into pending_clearing: when it may move to available, or that it is held.
  white_label_id         text NOT NULL,
  merchant_id            text NOT NULL,
  livemode               boolean NOT NULL,
  credit_balance_transaction_id text NOT NULL,                           -- the deposit_settled movement
  amount_minor           bigint NOT NULL CHECK (amount_minor > 0),       -- still pending of that credit
  available_at           timestamptz,                                    -- null while held with no release time
  status                 text NOT NULL CHECK (status IN ('pending', 'held', 'released', 'reversed')),
  hold_reason            text,                                           -- why it is held (e.g. dispute id)
  released_balance_transaction_id text,                                  -- the clearing_released movement
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, credit_balance_transaction_id),
  FOREIGN KEY (white_label_id, credit_balance_transaction_id) REFERENCES balance_transactions (white_label_id, balance_transaction_id),
  CHECK ((status = 'held') = (available_at IS NULL)),
  CHECK ((status = 'released') = (released_balance_transaction_id IS NOT NULL))
);
CREATE INDEX clearings_pending ON clearings (white_label_id, merchant_id, livemode, available_at) WHERE status = 'pending';
