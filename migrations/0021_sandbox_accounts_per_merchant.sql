-- The sandbox bank's accounts per merchant (issue 13): before, every merchant of a brand wrote into one
-- directory, so one merchant could read, close or freeze an account another merchant's tests rely on.
-- Now the brand's seeded accounts are a shared, read-only baseline (merchant_id = ''), and each account a
-- merchant writes through POST /v1/test/bank/accounts is that merchant's alone; where a merchant has its
-- own row for a number, it sees that row instead of the baseline. Rows written before this migration
-- cannot be told apart from the seed (the writer was never recorded) and stay in the shared baseline.

ALTER TABLE sandbox_bank_accounts
  ADD COLUMN merchant_id text NOT NULL DEFAULT ''; -- '' for the brand's seeded baseline; else the merchant that wrote the account (visible to it alone)

ALTER TABLE sandbox_bank_accounts DROP CONSTRAINT sandbox_bank_accounts_pkey;
ALTER TABLE sandbox_bank_accounts ADD PRIMARY KEY (white_label_id, merchant_id, bank_code, account_number);
