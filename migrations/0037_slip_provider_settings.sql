-- Issue 34: each brand's live slip-verification provider(s) (src/slip-providers/; docs/decisions/slip-providers.md,
-- "Per-brand configuration").
--
-- One row per brand, livemode and slot: the primary provider, and optionally the fallback asked when the primary
-- cannot answer. Live mode only (test-mode slips are always verified by the sandbox bank). The credentials are a
-- JSON object sealed with AES-256-GCM under the master key (src/platform/crypto.ts SecretBox), with the brand,
-- slot and provider bound as additional data so that a sealed value cannot be moved to another brand or provider;
-- they are never returned after they are set. credential_hint is what the back office shows instead.
--
-- credentials_version comes from one sequence, so that every write of credentials (a rotation, a removal and a
-- new setting) has a version never used before: the worker caches adapter instances (and their circuit breakers)
-- by brand, slot and version, and a new version is a new instance with the new credentials.

CREATE SEQUENCE slip_provider_credentials_version;

-- Column rules as domains, as every table's since migration 0026 (docs/decisions/storage-and-jobs.md, "Schema rules").
CREATE DOMAIN slip_provider_settings_livemode AS boolean
  CONSTRAINT slip_provider_settings_livemode_check CHECK (VALUE);                  -- live only: the sandbox bank answers test mode
CREATE DOMAIN slip_provider_settings_slot AS text
  CONSTRAINT slip_provider_settings_slot_check CHECK ((VALUE = ANY (ARRAY['primary'::text, 'fallback'::text])));
CREATE DOMAIN slip_provider_settings_provider AS text
  CONSTRAINT slip_provider_settings_provider_check CHECK ((VALUE = ANY (ARRAY['slipok'::text, 'easyslip'::text, 'rdcw'::text])));
CREATE DOMAIN slip_provider_settings_credential_hint AS text
  CONSTRAINT slip_provider_settings_credential_hint_check CHECK (((length(VALUE) >= 1) AND (length(VALUE) <= 40)));

CREATE TABLE slip_provider_settings (
  white_label_id       text NOT NULL REFERENCES brands (white_label_id),
  livemode             slip_provider_settings_livemode NOT NULL,
  slot                 slip_provider_settings_slot NOT NULL,
  provider             slip_provider_settings_provider NOT NULL,
  credentials_sealed   text NOT NULL,                                              -- SecretBox v1, JSON of the provider's credentials
  credential_hint      slip_provider_settings_credential_hint NOT NULL,            -- what the back office shows instead
  credentials_version  bigint NOT NULL DEFAULT nextval('slip_provider_credentials_version'),
  credentials_set_at   timestamptz NOT NULL,                                       -- when these credentials were set (service clock)
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, livemode, slot)
);
