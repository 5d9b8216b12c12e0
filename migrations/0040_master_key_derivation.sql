-- Issue 33 (item 7, rotating MASTER_KEY): the secret the service's derived keys come from, pinned in the database
-- (src/platform/derivation-key.ts; docs/decisions/master-key-rotation.md).
--
-- The account lookup HMAC (beneficiaries, senders, deposit orders), the checkout link and session MACs, the slip
-- capability's signing seed and the QR image links are keyed by HMAC-SHA256 of one root secret over a fixed purpose.
-- Their outputs are kept in rows and handed to end users, so the root must not change when the master key rotates.
-- It is stored here sealed under the master key (SecretBox, purpose 'master_key_derivation:<purpose>'), and a
-- rotation re-seals it like every other sealed value. One row per purpose; today only 'derivation.v1'.

CREATE TABLE master_key_derivation (
  purpose     text PRIMARY KEY,
  key_sealed  text NOT NULL,
  created_at  timestamptz NOT NULL
);
