-- Issue 30: the back-office console's sign-in links and sessions (src/backoffice-console/; docs/backoffice.md,
-- docs/decisions/backoffice-console.md).
--
-- A session acts as one back-office credential (the person behind it is the credential's staff identity), on one
-- brand, so that every decision made in the console names a credential and a person exactly as a decision made
-- through the /v1/bo API does. Neither table keeps a secret: the link's one-time token and the session's cookie are
-- kept as SHA-256 digests only, so a copy of the database signs nobody in.
--
-- Column rules as domains, as every table's since migration 0026 (docs/decisions/storage-and-jobs.md, "Schema rules").

CREATE DOMAIN console_token_hash AS text
  CONSTRAINT console_token_hash_check CHECK ((VALUE ~ '^[0-9a-f]{64}$'::text));
CREATE DOMAIN console_sessions_session_id AS text
  CONSTRAINT console_sessions_session_id_check CHECK ((VALUE ~~ 'bos\_%'::text));
CREATE DOMAIN console_sessions_sign_in_method AS text
  CONSTRAINT console_sessions_sign_in_method_check CHECK ((VALUE = ANY (ARRAY['link'::text, 'oidc'::text])));
CREATE DOMAIN console_sessions_ended_reason AS text
  CONSTRAINT console_sessions_ended_reason_check CHECK ((VALUE = ANY (ARRAY['signed_out'::text, 'idle'::text, 'expired'::text, 'credential_inactive'::text])));

CREATE TABLE console_sign_in_links (
  -- A one-time sign-in link (`npm run cli -- bo login`): single use, ten minutes.
  token_hash      console_token_hash PRIMARY KEY,                                    -- SHA-256 of the link's token
  white_label_id  text NOT NULL REFERENCES brands (white_label_id),                 -- the brand the session will act on
  credential_id   text NOT NULL REFERENCES backoffice_credentials (credential_id), -- who the session will act as
  issued_by       text NOT NULL,                                                     -- the actor that asked for the link
  created_at      timestamptz NOT NULL,
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz                                                        -- set once, by the sign-in that used it
);

CREATE TABLE console_sessions (
  session_id      console_sessions_session_id PRIMARY KEY,                          -- bos_ + ULID; in the audit log, never in a cookie
  token_hash      console_token_hash NOT NULL UNIQUE,                               -- SHA-256 of the cookie's value
  white_label_id  text NOT NULL REFERENCES brands (white_label_id),
  credential_id   text NOT NULL REFERENCES backoffice_credentials (credential_id),
  sign_in_method  console_sessions_sign_in_method NOT NULL,
  created_at      timestamptz NOT NULL,
  last_seen_at    timestamptz NOT NULL,                                              -- the idle limit counts from here
  expires_at      timestamptz NOT NULL,                                              -- the absolute limit (created_at + 12 h)
  ended_at        timestamptz,
  ended_reason    console_sessions_ended_reason
);

-- Housekeeping removes ended and expired rows by age.
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
CREATE INDEX console_sign_in_links_expiry ON console_sign_in_links (expires_at);
