-- Issue 30: signing in to the back-office console with a brand's OpenID Connect provider (src/backoffice-console/;
-- docs/backoffice.md "Signing in with a brand's OpenID provider", docs/decisions/backoffice-console.md).
--
-- console_oidc_providers: at most one provider per brand. The client secret is sealed with AES-256-GCM under the
-- master key (src/platform/crypto.ts SecretBox), with the brand bound as additional data, and is never returned;
-- key rotation reseals it (src/key-rotation/sealed-columns.ts).
--
-- console_oidc_staff: the list the brand's administrator keeps, one row per OpenID subject (`sub`, stable and
-- unique for the issuer). Each row names the person (a staff identity of the brand) and the role, and the console
-- credential issued to that person for that role when the row was saved; a sign-in acts as that credential.
-- Removing a row, or changing its role, revokes the credential it held, which ends that person's sessions.
--
-- Column rules as domains, as every table's since migration 0026 (docs/decisions/storage-and-jobs.md, "Schema rules").

CREATE DOMAIN console_oidc_providers_issuer AS text
  CONSTRAINT console_oidc_providers_issuer_check CHECK (((length(VALUE) >= 8) AND (length(VALUE) <= 500)));
CREATE DOMAIN console_oidc_providers_client_id AS text
  CONSTRAINT console_oidc_providers_client_id_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 255)));
CREATE DOMAIN console_oidc_staff_subject AS text
  CONSTRAINT console_oidc_staff_subject_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 255)));
CREATE DOMAIN console_oidc_staff_role AS text
  CONSTRAINT console_oidc_staff_role_check CHECK ((VALUE = ANY (ARRAY['reviewer'::text, 'operator'::text])));

CREATE TABLE console_oidc_providers (
  white_label_id        text PRIMARY KEY REFERENCES brands (white_label_id),
  issuer                console_oidc_providers_issuer NOT NULL,     -- the issuer URL; discovery reads its /.well-known/openid-configuration
  client_id             console_oidc_providers_client_id NOT NULL,
  client_secret_sealed  text NOT NULL,                              -- SecretBox, purpose bound to the brand
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL
);

CREATE TABLE console_oidc_staff (
  white_label_id  text NOT NULL REFERENCES brands (white_label_id),
  subject         console_oidc_staff_subject NOT NULL,                                -- the ID token's `sub`
  role            console_oidc_staff_role NOT NULL,
  staff_id        text NOT NULL,                                                      -- the person
  credential_id   text NOT NULL REFERENCES backoffice_credentials (credential_id),   -- what their sessions act as
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, subject),
  FOREIGN KEY (white_label_id, staff_id) REFERENCES staff_identities (white_label_id, staff_id)
);
