-- Merchants the service runs itself (the sandbox counterparty of each brand) are not addressable through
-- the back office or the CLI: no operator may read, suspend or create keys for them, nor act as them.
ALTER TABLE merchants ADD COLUMN system_owned boolean NOT NULL DEFAULT false; -- true for the service's own merchants
UPDATE merchants SET system_owned = true
 WHERE (white_label_id, merchant_id) IN (SELECT white_label_id, merchant_id FROM sandbox_counterparties);
