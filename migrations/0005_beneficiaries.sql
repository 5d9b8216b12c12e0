-- Beneficiaries: the bank accounts a merchant pays out to, verified by name against the bank directory
-- before any withdrawal may use them. The full account number (and PromptPay id) is needed later for
-- payouts and PromptPay QR, so it is kept sealed (AES-256-GCM under the master key, purpose bound as
-- additional data); an HMAC of bank code and number finds an existing beneficiary without opening
-- anything, and the last four digits serve the masked display. No column holds the number in clear.

CREATE TABLE beneficiaries (
  white_label_id        text NOT NULL,                                    -- brand
  merchant_id           text NOT NULL,                                    -- owner
  livemode              boolean NOT NULL,                                 -- sandbox and live beneficiaries are separate
  beneficiary_id        text NOT NULL CHECK (beneficiary_id LIKE 'ben\_%'), -- ben_ + ULID
  version               integer NOT NULL CHECK (version >= 1),            -- bumped by every transition
  status                text NOT NULL CHECK (status IN ('pending_verification', 'verified', 'rejected')),
  bank_code             text NOT NULL REFERENCES banks (bank_code),       -- Bank of Thailand code of the holding bank
  bank_name_th          text NOT NULL,                                    -- the bank's Thai name at creation (a snapshot: the view is versioned)
  account_number_sealed text NOT NULL,                                    -- full number, SecretBox purpose beneficiary.account_number
  account_number_hmac   text NOT NULL CHECK (account_number_hmac ~ '^[0-9a-f]{64}$'), -- HMAC-SHA256(lookup key, bank_code:number), for dedupe
  account_number_last4  text NOT NULL CHECK (account_number_last4 ~ '^[0-9]{4}$'),     -- for account_number_masked
  account_name_th       text NOT NULL CHECK (length(account_name_th) BETWEEN 1 AND 100), -- declared holder name, Thai, no honorific
  account_name_en       text CHECK (length(account_name_en) BETWEEN 1 AND 100),          -- declared holder name, English (optional)
  promptpay_id_sealed   text,                                             -- PromptPay id (phone or national id), SecretBox purpose beneficiary.promptpay_id
  promptpay_id_last4    text CHECK (promptpay_id_last4 ~ '^[0-9]{4}$'),   -- for promptpay_id_masked
  end_user_ref          text CHECK (length(end_user_ref) BETWEEN 1 AND 64), -- the merchant's reference of its end user (optional)
  verification_checked_at   timestamptz,                                  -- when the directory answered; null while never checked
  verification_name_match   boolean,                                      -- declared name equals the holder's name (after normalisation)
  verification_failure_code text CHECK (verification_failure_code IN
                              ('account_not_found', 'account_closed', 'account_frozen', 'name_mismatch', 'bank_unavailable')),
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL,
  verified_at           timestamptz,                                      -- set once, when verified
  PRIMARY KEY (white_label_id, beneficiary_id),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  -- One beneficiary per account per merchant and environment: creating it again returns this row.
  UNIQUE (white_label_id, merchant_id, livemode, account_number_hmac),
  CHECK ((status = 'verified') = (verified_at IS NOT NULL)),
  CHECK ((promptpay_id_sealed IS NULL) = (promptpay_id_last4 IS NULL)),
  CHECK ((verification_checked_at IS NULL) = (verification_name_match IS NULL)),
  CHECK (status <> 'pending_verification' OR verification_checked_at IS NULL),
  CHECK (status <> 'verified' OR (verification_name_match AND verification_failure_code IS NULL)),
  CHECK (status <> 'rejected' OR (verification_checked_at IS NOT NULL AND verification_failure_code IS NOT NULL))
);
