-- Fee schedules (issue 3, fees): what a merchant is charged per channel and environment.
-- A row with merchant_id NULL is the brand's default; a row with a merchant_id overrides it for that
-- merchant. With no row at all the service uses the platform default written in src/fees/service.ts
-- (deposit 150 bps + 0, withdrawal 0 bps + 1000 satang, VAT 700 bps), so no seed rows are needed.
-- Amounts are integer satang; rates are integer basis points (1 bps = 0.01 percent).

CREATE TABLE fee_schedules (
  white_label_id   text NOT NULL REFERENCES brands (white_label_id),       -- owning brand (shard key)
  merchant_id      text CHECK (merchant_id LIKE 'mch\_%'),                  -- merchant it overrides for; NULL = the brand default
  livemode         boolean NOT NULL,                                        -- sandbox and live are priced separately
  channel          text NOT NULL CHECK (channel IN ('deposit', 'withdrawal')), -- which order type it prices
  processing_fee_bps integer NOT NULL CHECK (processing_fee_bps BETWEEN 0 AND 10000), -- rate on the amount, basis points
  fixed_fee_minor  bigint NOT NULL CHECK (fixed_fee_minor BETWEEN 0 AND 1000000000000), -- flat fee per order, satang (at most 10^12 keeps every fee a safe integer)
  vat_bps          integer NOT NULL CHECK (vat_bps BETWEEN 0 AND 10000),    -- VAT on (processing + fixed), basis points; Thai VAT is 700
  created_at       timestamptz NOT NULL,                                    -- creation instant (service clock)
  updated_at       timestamptz NOT NULL,                                    -- last change instant
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id)
);
-- One schedule per (brand, merchant or brand default, environment, channel). The brand default's
-- merchant_id is NULL, which a plain unique key would never treat as equal, hence the COALESCE.
-- The same index serves the lookup (brand, merchant or default, livemode, channel).
CREATE UNIQUE INDEX fee_schedules_scope ON fee_schedules (white_label_id, (COALESCE(merchant_id, '')), livemode, channel);
