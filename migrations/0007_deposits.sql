-- Deposit orders and their legs. A deposit is paid peer to peer: each leg is a transfer from the end
-- user's own account straight to the beneficiary of another merchant's withdrawal, reserved on the
-- withdrawal side (withdrawal_legs) for as long as the leg may be paid.

CREATE TABLE deposit_policies (
  -- The brand's rules for deposits in one environment. A brand without a row uses the defaults in
  -- src/deposits/policy.ts.
  white_label_id           text NOT NULL REFERENCES brands (white_label_id),
  livemode                 boolean NOT NULL,
  min_amount_minor         bigint NOT NULL CHECK (min_amount_minor > 0 AND min_amount_minor % 100 = 0),
  max_amount_minor         bigint NOT NULL CHECK (max_amount_minor % 100 = 0 AND max_amount_minor <= 1000000000000),
  default_expires_in_seconds integer NOT NULL CHECK (default_expires_in_seconds BETWEEN 60 AND 86400), -- transfer time when none is asked
  max_expires_in_seconds   integer NOT NULL CHECK (max_expires_in_seconds BETWEEN 60 AND 86400),     -- the clamp of expires_in_seconds
  max_legs                 integer NOT NULL CHECK (max_legs BETWEEN 1 AND 10),                      -- most destinations one deposit may be split into
  liquidity_wait_seconds   integer NOT NULL CHECK (liquidity_wait_seconds BETWEEN 10 AND 3600),     -- awaiting_liquidity gives up after this
  -- The brand's external gateway account: fallback liquidity when no withdrawal matches (all four or none).
  gateway_bank_code        text CHECK (gateway_bank_code ~ '^[0-9]{3}$'),
  gateway_account_sealed   text,                                        -- the account number, sealed (SecretBox)
  gateway_account_last4    text,
  gateway_account_name_th  text,
  created_at               timestamptz NOT NULL,
  updated_at               timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, livemode),
  CHECK (min_amount_minor <= max_amount_minor),
  CHECK ((gateway_bank_code IS NULL) = (gateway_account_sealed IS NULL) AND (gateway_bank_code IS NULL) = (gateway_account_last4 IS NULL)
         AND (gateway_bank_code IS NULL) = (gateway_account_name_th IS NULL)),
  CHECK (default_expires_in_seconds <= max_expires_in_seconds)
);

CREATE TABLE deposit_orders (
  white_label_id          text NOT NULL,
  merchant_id             text NOT NULL,
  livemode                boolean NOT NULL,
  deposit_id              text NOT NULL CHECK (deposit_id LIKE 'dep\_%'),
  version                 integer NOT NULL CHECK (version > 0),          -- bumped by every transition
  status                  text NOT NULL CHECK (status IN ('awaiting_liquidity', 'awaiting_payment', 'slip_processing',
                            'under_review', 'settled', 'expired', 'canceled', 'rejected', 'reversed')),
  merchant_reference      text NOT NULL CHECK (length(merchant_reference) BETWEEN 1 AND 64),
  end_user_ref            text NOT NULL CHECK (length(end_user_ref) BETWEEN 1 AND 64),
  amount_minor            bigint NOT NULL CHECK (amount_minor > 0 AND amount_minor % 100 = 0 AND amount_minor <= 1000000000000), -- X, whole baht
  sender_bank_code        text NOT NULL CHECK (sender_bank_code ~ '^[0-9]{3}$'),
  sender_account_sealed   text NOT NULL,                                 -- the declared account number, sealed (SecretBox)
  sender_account_hmac     text NOT NULL,                                 -- HMAC of bank_code:account_number, for duplicate checks
  sender_account_last4    text NOT NULL,
  sender_name_th          text NOT NULL,                                 -- declared holder name; returned masked only
  sender_name_en          text,
  sender_id               text,                                          -- the registered sender used, if any
  device_fingerprint      text,                                          -- from client; counts the open-order cap
  client                  json,                                          -- the client object as sent
  fill_preference         text NOT NULL CHECK (fill_preference IN ('any', 'internal_only')),
  min_ttl_seconds         integer CHECK (min_ttl_seconds BETWEEN 0 AND 86400),
  expires_in_seconds      integer NOT NULL CHECK (expires_in_seconds BETWEEN 60 AND 86400), -- transfer time after matching, clamped
  return_url              text,
  metadata                json,
  liquidity_source        text CHECK (liquidity_source IN ('internal', 'external_gateway')), -- set once matched
  expires_at              timestamptz NOT NULL,                          -- transfer deadline (or end of the liquidity wait)
  wait_started_at         timestamptz,                                   -- set while/after awaiting_liquidity
  late_slip_accepted_until timestamptz,                                  -- expires_at + 24 h once a destination existed
  expired_reason          text,
  canceled_by             text CHECK (canceled_by IN ('merchant', 'end_user', 'system')),
  cancel_reason_code      text,
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, deposit_id),
  UNIQUE (white_label_id, merchant_id, livemode, merchant_reference),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  CHECK ((status IN ('expired', 'canceled')) = (expired_reason IS NOT NULL OR cancel_reason_code IS NOT NULL) OR status NOT IN ('expired', 'canceled')),
  CHECK (status <> 'canceled' OR (canceled_by IS NOT NULL AND cancel_reason_code IS NOT NULL)),
  CHECK (status <> 'expired' OR late_slip_accepted_until IS NOT NULL)
);
-- The open-order caps and the duplicate check count open orders of one end user.
CREATE INDEX deposit_orders_open_by_user ON deposit_orders (white_label_id, merchant_id, livemode, end_user_ref)
  WHERE status IN ('awaiting_liquidity', 'awaiting_payment');

CREATE TABLE deposit_legs (
  -- One destination of a deposit: a part of one withdrawal, reserved on the withdrawal side.
  white_label_id          text NOT NULL,
  deposit_id              text NOT NULL,
  leg_ref                 text NOT NULL CHECK (leg_ref LIKE 'dleg\_%'),  -- the deposit side's id of the leg
  sequence                integer NOT NULL CHECK (sequence > 0),
  amount_minor            bigint NOT NULL CHECK (amount_minor > 0),
  expires_at              timestamptz NOT NULL,                          -- the reservation holds until then (hold_until)
  status                  text NOT NULL CHECK (status IN ('reserved', 'released', 'filled')),
  destination             text NOT NULL CHECK (destination IN ('withdrawal', 'gateway')), -- who receives the transfer
  withdrawal_id           text,                                          -- the withdrawal this leg pays (withdrawal legs)
  withdrawal_leg_ref      text,                                          -- the withdrawal side's key of the same leg
  receiver_bank_code      text NOT NULL,
  receiver_bank_name_th   text NOT NULL,
  receiver_account_last4  text NOT NULL,
  receiver_name_masked    text NOT NULL,
  created_at              timestamptz NOT NULL,
  updated_at              timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, leg_ref),
  UNIQUE (white_label_id, deposit_id, sequence),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id),
  CHECK ((destination = 'withdrawal') = (withdrawal_id IS NOT NULL AND withdrawal_leg_ref IS NOT NULL))
);

CREATE TABLE sandbox_counterparties (
  -- The simulated counterparty merchant of a brand's sandbox: it keeps standing withdrawals to accounts
  -- of the sandbox bank, so that a sandbox deposit finds liquidity as a live one would.
  white_label_id          text PRIMARY KEY REFERENCES brands (white_label_id),
  merchant_id             text NOT NULL,
  beneficiary_ids         text[] NOT NULL,                               -- verified payees, used in turn
  created_at              timestamptz NOT NULL,
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id)
);
