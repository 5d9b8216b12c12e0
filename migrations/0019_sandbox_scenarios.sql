-- Sandbox scenarios (src/sandbox/scenarios.ts): what the sandbox bank records beyond a plain transfer.
ALTER TABLE sandbox_bank_transfers
  -- 106.00 THB: the bank answers that slip checking is off for this transfer's bank (BANK_DISABLED).
  ADD COLUMN bank_checking_off boolean NOT NULL DEFAULT false,
  -- 110.00 THB: a transfer made by a scenario's payer whose slip a later step uploads.
  ADD COLUMN kept_for_scenario boolean NOT NULL DEFAULT false;

-- The scenario's kept transfer of an order is found by its deposit.
CREATE INDEX sandbox_bank_transfers_kept_idx ON sandbox_bank_transfers (white_label_id, deposit_id, created_at) WHERE kept_for_scenario;
