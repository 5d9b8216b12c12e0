-- Slips (issue 10): the durable intake of slip evidence (receipts and their encrypted blobs), the bank
-- transfers that slips have claimed (the duplicate check), what multi-leg orders have been paid per
-- leg, the sandbox bank's transfers, late-slip claims, and the brand's four-eyes threshold.

CREATE TABLE slip_blobs (
  -- The PostgreSQL adapter of the evidence blob store (src/slips/evidence-store.ts). Ciphertext only:
  -- AES-256-GCM under a data key of its own, which is kept wrapped on the receipt.
  white_label_id    text NOT NULL,
  blob_key          text NOT NULL,                                  -- the receipt id the blob belongs to
  ciphertext        bytea NOT NULL,                                 -- iv, tag and ciphertext of the image
  created_at        timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, blob_key)
);

CREATE TABLE slip_receipts (
  -- One accepted slip upload: the 202 receipt and the manifest of its evidence. A receipt exists only
  -- when its blob is stored, read back and checked, and its processing job is enqueued (one transaction).
  white_label_id    text NOT NULL,
  merchant_id       text NOT NULL,
  livemode          boolean NOT NULL,
  receipt_id        text NOT NULL CHECK (receipt_id LIKE 'rcpt\_%'),
  deposit_id        text NOT NULL,
  idempotency_key   text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  request_id        text NOT NULL,                                  -- the request that stored it (original_request_id of a 409)
  fingerprint       text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'), -- sha256 of the logical evidence (image bytes and canonical fields)
  shape             text NOT NULL CHECK (shape IN ('multipart', 'json_base64', 'reference')),
  media_type        text CHECK (media_type IN ('image/jpeg', 'image/png', 'image/webp')), -- from magic bytes; null without an image
  size_bytes        integer CHECK (size_bytes BETWEEN 1 AND 4194304),                    -- decoded bytes of the image
  image_sha256      text CHECK (image_sha256 ~ '^[0-9a-f]{64}$'),                         -- of the plaintext image
  blob_store        text CHECK (blob_store IN ('postgres', 'filesystem')),               -- which adapter holds the blob
  wrapped_key       text,                                           -- the blob's data key, sealed under the evidence key
  fields_sealed     text,                                           -- the client's payload or reference fields, sealed (they name a person's transfer)
  received_at       timestamptz NOT NULL,                           -- when the evidence became durable
  status            text NOT NULL CHECK (status IN ('accepted', 'claimed', 'processed')),
  outcome           text,                                           -- what processing concluded (src/verification/service.ts)
  verification      json,                                           -- the six booleans and review reasons of this slip; no personal data
  transfer_sealed   text,                                           -- the bank's verified transfer, sealed, for the reviewer
  processed_at      timestamptz,
  PRIMARY KEY (white_label_id, receipt_id),
  UNIQUE (white_label_id, deposit_id, idempotency_key),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id),
  CHECK ((shape = 'reference') = (media_type IS NULL)),
  CHECK ((media_type IS NULL) = (size_bytes IS NULL) AND (media_type IS NULL) = (image_sha256 IS NULL)
         AND (media_type IS NULL) = (blob_store IS NULL) AND (media_type IS NULL) = (wrapped_key IS NULL)),
  CHECK ((status = 'processed') = (outcome IS NOT NULL AND processed_at IS NOT NULL))
);
-- An order's receipts in arrival order: the upload limit and one-at-a-time processing read them.
CREATE INDEX slip_receipts_by_deposit ON slip_receipts (white_label_id, deposit_id, received_at, receipt_id);

CREATE TABLE slip_transfers (
  -- Every bank transfer a slip has claimed, once per brand and environment. The primary key is the
  -- duplicate check: a second order naming the same transfer is DUPLICATE_SLIP, never a second credit.
  white_label_id    text NOT NULL,
  livemode          boolean NOT NULL,
  sending_bank_code text NOT NULL CHECK (sending_bank_code ~ '^[0-9]{3}$'),
  trans_ref         text NOT NULL CHECK (length(trans_ref) BETWEEN 1 AND 64),
  deposit_id        text NOT NULL,                                  -- the order the transfer was claimed for
  receipt_id        text NOT NULL,                                  -- the receipt that claimed it first
  amount_minor      bigint NOT NULL CHECK (amount_minor > 0),       -- what the bank verified for this transfer
  created_at        timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, livemode, sending_bank_code, trans_ref),
  FOREIGN KEY (white_label_id, deposit_id) REFERENCES deposit_orders (white_label_id, deposit_id)
);
CREATE INDEX slip_transfers_by_deposit ON slip_transfers (white_label_id, deposit_id);

-- What verified slips paid into each leg of a multi-leg order before all of its legs are paid.
ALTER TABLE deposit_legs
  ADD COLUMN paid_minor bigint NOT NULL DEFAULT 0 CHECK (paid_minor >= 0);

CREATE TABLE sandbox_bank_transfers (
  -- Transfers made in the sandbox bank (POST /v1/test/bank/transfers, `sandbox pay`). The sandbox
  -- verification adapter answers from here, so a sandbox slip is verified exactly as a live one.
  white_label_id          text NOT NULL REFERENCES brands (white_label_id),
  sending_bank_code       text NOT NULL REFERENCES banks (bank_code),
  trans_ref               text NOT NULL CHECK (trans_ref ~ '^[A-Z0-9]{10,30}$'),
  amount_minor            bigint NOT NULL CHECK (amount_minor > 0),
  occurred_at             timestamptz NOT NULL,                     -- when the sandbox bank executed it
  sender_account_number   text NOT NULL CHECK (sender_account_number ~ '^[0-9]{6,20}$'),   -- test data, never logged
  sender_name_th          text NOT NULL CHECK (length(sender_name_th) BETWEEN 1 AND 100),
  sender_name_en          text CHECK (length(sender_name_en) BETWEEN 1 AND 100),
  receiver_bank_code      text NOT NULL REFERENCES banks (bank_code),
  receiver_account_number text NOT NULL CHECK (receiver_account_number ~ '^[0-9]{6,20}$'),
  receiver_name_th        text NOT NULL CHECK (length(receiver_name_th) BETWEEN 1 AND 100),
  merchant_id             text NOT NULL,                            -- the merchant whose test key made it
  deposit_id              text,                                     -- the deposit the payer meant to pay (informational)
  leg_ref                 text,                                     -- and its leg
  created_at              timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, sending_bank_code, trans_ref)
);

-- A claim for a slip that came after the late-slip window (opened by the end user at `claim_url`):
-- its amount is what the payer says, unknown until support checks it.
ALTER TABLE claims DROP CONSTRAINT claims_cause_check;
ALTER TABLE claims ADD CONSTRAINT claims_cause_check CHECK (cause IN ('same_transfer_excess', 'additional_transfer', 'late_slip'));
ALTER TABLE claims ALTER COLUMN amount_minor DROP NOT NULL;
ALTER TABLE claims ADD CONSTRAINT claims_amount_known CHECK (cause = 'late_slip' OR amount_minor IS NOT NULL);
ALTER TABLE claims ADD COLUMN evidence json;                                  -- what the payer submitted with a late-slip claim

-- Reviews of orders at or above this amount need two approvers (review.four_eyes_required); null: never.
ALTER TABLE deposit_policies
  ADD COLUMN four_eyes_min_amount_minor bigint DEFAULT 2000000 CHECK (four_eyes_min_amount_minor IS NULL OR four_eyes_min_amount_minor > 0);
