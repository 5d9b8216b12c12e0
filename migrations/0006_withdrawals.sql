-- Withdrawal orders, their legs (the parts that deposits pay), and the brand's withdrawal policy.
--
-- A withdrawal locks amount plus fee in the merchant's wallet at creation (ledger movement
-- withdrawal_reserved). Depositors then pay it in chunks: each chunk is first a leg reserved for one
-- deposit leg, then either released (the deposit did not pay) or filled (paid out of the wallet's
-- reserved bucket). The order row holds the single source of truth for its amounts, and the
-- identity amount_total = filled + reserved + remaining is a constraint, not just an assertion.

CREATE TABLE withdrawal_policies (
  -- The brand's rules for withdrawals in one environment. A brand without a row uses the defaults
  -- written in src/withdrawals/policy.ts.
  white_label_id           text NOT NULL REFERENCES brands (white_label_id),
  livemode                 boolean NOT NULL,
  approval_threshold_minor bigint CHECK (approval_threshold_minor > 0),      -- orders of at least this amount wait for approval; null: never
  approval_ttl_seconds     integer NOT NULL CHECK (approval_ttl_seconds BETWEEN 60 AND 604800), -- unapproved orders cancel after this
  expires_in_seconds       integer NOT NULL CHECK (expires_in_seconds BETWEEN 300 AND 2592000), -- time in the matching queue
  max_splits               integer NOT NULL CHECK (max_splits BETWEEN 1 AND 100),                -- most fills one order may take
  min_amount_minor         bigint NOT NULL CHECK (min_amount_minor > 0),
  max_amount_minor         bigint NOT NULL CHECK (max_amount_minor <= 1000000000000),
  created_at               timestamptz NOT NULL,
  updated_at               timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, livemode),
  CHECK (min_amount_minor <= max_amount_minor)
);

CREATE TABLE withdrawal_orders (
  white_label_id          text NOT NULL,
  merchant_id             text NOT NULL,
  livemode                boolean NOT NULL,
  withdrawal_id           text NOT NULL CHECK (withdrawal_id LIKE 'wdr\_%'),
  version                 integer NOT NULL CHECK (version > 0),           -- change counter, bumped by every transition
  status                  text NOT NULL CHECK (status IN ('pending_approval', 'open', 'partially_filled', 'settled',
                            'expired', 'canceled', 'rejected')),
  merchant_reference      text NOT NULL CHECK (length(merchant_reference) BETWEEN 1 AND 64),
  end_user_ref            text NOT NULL CHECK (length(end_user_ref) BETWEEN 1 AND 64),
  beneficiary_id          text NOT NULL,                                  -- a verified beneficiary of the same merchant
  amount_total_minor      bigint NOT NULL CHECK (amount_total_minor > 0 AND amount_total_minor <= 1000000000000),
  fee_total_minor         bigint NOT NULL CHECK (fee_total_minor >= 0),   -- locked at creation, added on top
  fee_breakdown           json NOT NULL,                                  -- the three fee components at creation
  fee_recognized_minor    bigint NOT NULL CHECK (fee_recognized_minor >= 0), -- fee consumed by the fills so far
  filled_minor            bigint NOT NULL CHECK (filled_minor >= 0),      -- paid out
  reserved_minor          bigint NOT NULL CHECK (reserved_minor >= 0),    -- part being transferred by deposit legs now
  remaining_minor         bigint NOT NULL CHECK (remaining_minor >= 0),   -- still open (at close: the part never paid)
  refunded_minor          bigint CHECK (refunded_minor >= 0),             -- returned to the balance; set at close
  settled_splits          integer NOT NULL CHECK (settled_splits >= 0),   -- fills that stand (reversed ones excluded)
  max_splits              integer NOT NULL CHECK (max_splits BETWEEN 1 AND 100),
  expires_at              timestamptz NOT NULL,                           -- leaves the matching queue after this
  approval_expires_at     timestamptz,                                    -- set while the order waits for approval
  refund_of_deposit_id    text,                                           -- the deposit this order refunds
  replacement_of_withdrawal_id text,                                      -- the order whose reversed fill this one pays again
  metadata                json,                                           -- the merchant's metadata, as sent
  client                  json,                                           -- the end user's client facts, as sent
  close_reason_code       text,                                           -- why a canceled/rejected/expired order closed
  closed_by               text CHECK (closed_by IN ('merchant', 'operator', 'system')),
  review_note             text,                                           -- an operator's note on approval or rejection
  reserve_balance_transaction_id text NOT NULL,                           -- the withdrawal_reserved movement
  release_balance_transaction_id text,                                    -- the withdrawal_released movement at close, if any
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL,
  closed_at               timestamptz,
  PRIMARY KEY (white_label_id, withdrawal_id),
  UNIQUE (white_label_id, merchant_id, livemode, merchant_reference),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  FOREIGN KEY (white_label_id, beneficiary_id) REFERENCES beneficiaries (white_label_id, beneficiary_id),
  -- The spec's identity, on every row at every moment.
  CHECK (amount_total_minor = filled_minor + reserved_minor + remaining_minor),
  CHECK (fee_recognized_minor <= fee_total_minor),
  CHECK (settled_splits <= max_splits),
  CHECK (amount_total_minor + fee_total_minor <= 9007199254740991),
  -- A closed order has nothing in transfer, and what it never paid is exactly what it returned.
  CHECK ((status IN ('settled', 'expired', 'canceled', 'rejected')) = (refunded_minor IS NOT NULL)),
  CHECK (refunded_minor IS NULL OR (reserved_minor = 0 AND refunded_minor = remaining_minor)),
  CHECK ((status IN ('settled', 'expired', 'canceled', 'rejected')) = (closed_at IS NOT NULL)),
  -- Nothing is paid before approval, and a rejected order never paid anything.
  CHECK (status NOT IN ('pending_approval', 'rejected') OR (filled_minor = 0 AND reserved_minor = 0)),
  CHECK ((status = 'pending_approval') = (approval_expires_at IS NOT NULL)),
  CHECK (status <> 'open' OR filled_minor = 0),
  CHECK (status <> 'partially_filled' OR filled_minor > 0)
);
CREATE UNIQUE INDEX withdrawal_orders_refund ON withdrawal_orders (white_label_id, refund_of_deposit_id)
  WHERE refund_of_deposit_id IS NOT NULL AND status NOT IN ('canceled', 'rejected', 'expired');
-- The matching queue: live orders of a brand and environment with something left to pay, oldest first.
CREATE INDEX withdrawal_orders_matchable ON withdrawal_orders (white_label_id, livemode, created_at)
  WHERE status IN ('open', 'partially_filled') AND remaining_minor > 0;

CREATE TABLE withdrawal_legs (
  -- One chunk of a withdrawal that one deposit leg pays: reserved, then released or filled; a filled
  -- leg may later be reversed. This is the withdrawal side's record; the deposit side keeps its own.
  white_label_id          text NOT NULL,
  merchant_id             text NOT NULL,                                  -- the withdrawing merchant
  livemode                boolean NOT NULL,
  withdrawal_id           text NOT NULL,
  leg_ref                 text NOT NULL CHECK (leg_ref LIKE 'wleg\_%'),  -- the withdrawal side's key of the fill
  deposit_leg_key         text NOT NULL,                                  -- the deposit side's key of its leg (dedupes reservations)
  deposit_id              text NOT NULL,                                  -- the paying deposit (possibly another merchant's)
  amount_minor            bigint NOT NULL CHECK (amount_minor > 0),        -- reserved, then what the fill paid
  reserved_amount_minor   bigint NOT NULL CHECK (reserved_amount_minor >= amount_minor), -- what the deposit leg reserved (idempotency)
  status                  text NOT NULL CHECK (status IN ('reserved', 'released', 'filled', 'reversed')),
  sequence                integer CHECK (sequence > 0),                   -- fill number within the order, from 1
  fee_recognized_minor    bigint CHECK (fee_recognized_minor >= 0),       -- fee share this fill consumed
  settled_at              timestamptz,
  balance_transaction_id  text,                                           -- the withdrawal_settled movement
  fee_balance_transaction_id text,                                        -- the fee movement (null when the share was 0)
  auto_confirm_at         timestamptz,                                    -- receipt assumed at this time (3 h after the fill)
  receipt_state           text CHECK (receipt_state IN ('awaiting_confirmation', 'confirmed', 'disputed', 'reversed')),
  release_reason_code     text,                                           -- why a reserved leg was released
  reversal_reason_code    text,                                           -- why a filled leg was reversed
  replacement_withdrawal_id text,                                         -- the order created to pay a reversed fill again
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, leg_ref),
  UNIQUE (white_label_id, deposit_leg_key),
  FOREIGN KEY (white_label_id, withdrawal_id) REFERENCES withdrawal_orders (white_label_id, withdrawal_id),
  CHECK ((status IN ('filled', 'reversed')) = (sequence IS NOT NULL AND settled_at IS NOT NULL
         AND balance_transaction_id IS NOT NULL AND fee_recognized_minor IS NOT NULL AND receipt_state IS NOT NULL
         AND auto_confirm_at IS NOT NULL)),
  CHECK ((status = 'reversed') = (receipt_state IS NOT DISTINCT FROM 'reversed'))
);
CREATE INDEX withdrawal_legs_order ON withdrawal_legs (white_label_id, withdrawal_id, status);
-- Fill numbers are unique per order (a reversed fill keeps its number; the next fill takes a new one).
CREATE UNIQUE INDEX withdrawal_legs_sequence ON withdrawal_legs (white_label_id, withdrawal_id, sequence) WHERE sequence IS NOT NULL;
