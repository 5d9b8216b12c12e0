-- The sandbox bank (issue 3): a simulated Thai interbank directory that answers "who owns this
-- account" for test-mode requests. It is per brand, so that one brand's test accounts never leak to
-- another. Nothing is seeded here: brands are created at runtime, and the service seeds a brand's
-- directory on first use (INSERT … ON CONFLICT DO NOTHING). Later issues add the sandbox bank's
-- transfers and slips beside this table.

CREATE TABLE sandbox_bank_accounts (
  white_label_id   text NOT NULL REFERENCES brands (white_label_id),       -- brand whose sandbox holds the account
  bank_code        text NOT NULL REFERENCES banks (bank_code),             -- Bank of Thailand code of the holding bank
  account_number   text NOT NULL CHECK (account_number ~ '^[0-9]{6,20}$'), -- digits only, no dashes (test data, never logged)
  holder_name_th   text NOT NULL CHECK (length(holder_name_th) BETWEEN 1 AND 100), -- holder's Thai name as the bank records it
  holder_name_en   text CHECK (length(holder_name_en) BETWEEN 1 AND 100),   -- holder's English name; null when the bank has none
  account_type     text NOT NULL CHECK (account_type IN ('personal', 'business')), -- individual or juristic-person account
  status           text NOT NULL CHECK (status IN ('open', 'closed', 'frozen')),   -- only open accounts can receive
  created_at       timestamptz NOT NULL,                                    -- creation instant (service clock)
  updated_at       timestamptz NOT NULL,                                    -- last change instant (the test endpoint may replace it)
  PRIMARY KEY (white_label_id, bank_code, account_number)
);
