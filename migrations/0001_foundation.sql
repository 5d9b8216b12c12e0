-- Foundation: tenancy, credentials, request nonces, rate-limit counters, idempotency records,
-- the event outbox, durable jobs, the bank list and the audit log.
-- Every tenant table carries white_label_id (the brand, the shard key), and every unique key of
-- tenant data includes it. Migrations are never edited once landed; add a new numbered file instead.

CREATE TABLE brands (
  white_label_id   text PRIMARY KEY CHECK (white_label_id LIKE 'wl\_%'),  -- brand id, wl_ + ULID
  name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),    -- display name
  status           text NOT NULL CHECK (status IN ('active', 'suspended')), -- suspended blocks every key below it
  created_at       timestamptz NOT NULL,                                    -- creation instant (service clock)
  updated_at       timestamptz NOT NULL                                     -- last change instant
);

CREATE TABLE merchants (
  white_label_id   text NOT NULL REFERENCES brands (white_label_id),       -- owning brand
  merchant_id      text NOT NULL CHECK (merchant_id LIKE 'mch\_%'),        -- merchant id, mch_ + ULID
  name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),    -- display name
  status           text NOT NULL CHECK (status IN ('active', 'suspended')), -- suspended blocks its keys
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, merchant_id)
);
CREATE UNIQUE INDEX merchants_merchant_id ON merchants (merchant_id);

CREATE TABLE api_keys (
  white_label_id   text NOT NULL,                                           -- brand of the merchant
  merchant_id      text NOT NULL,                                           -- merchant the key acts for
  api_key_id       text NOT NULL CHECK (api_key_id LIKE 'key\_%'),         -- key id (not the secret), key_ + ULID
  livemode         boolean NOT NULL,                                        -- false for sk_test_ keys
  key_hash         text NOT NULL CHECK (length(key_hash) = 64),             -- hex SHA-256 of the full API key
  key_last4        text NOT NULL CHECK (length(key_last4) = 4),             -- last four characters, for display
  signing_secret_sealed text NOT NULL,                                      -- HMAC secret, AES-256-GCM under the master key
  scopes           text[] NOT NULL,                                         -- granted scopes, fixed at creation
  status           text NOT NULL CHECK (status IN ('active', 'suspended', 'revoked')), -- revoked is final
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  revoked_at       timestamptz,                                             -- set once, when revoked
  PRIMARY KEY (white_label_id, api_key_id),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  UNIQUE (white_label_id, key_hash),
  CHECK ((status = 'revoked') = (revoked_at IS NOT NULL))
);
-- Lookup by hash happens before the brand is known; the hash is unique per brand by constraint and
-- a collision across brands is cryptographically impossible, so a plain index serves the lookup.
CREATE INDEX api_keys_key_hash ON api_keys (key_hash);

CREATE TABLE backoffice_credentials (
  white_label_id   text REFERENCES brands (white_label_id),                 -- brand; null only for platform_admin
  credential_id    text PRIMARY KEY CHECK (credential_id LIKE 'boc\_%'),   -- credential id, boc_ + ULID
  name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),    -- who holds it
  role             text NOT NULL CHECK (role IN ('platform_admin', 'operator', 'reviewer')),
  token_hash       text NOT NULL UNIQUE CHECK (length(token_hash) = 64),    -- hex SHA-256 of the bearer token
  status           text NOT NULL CHECK (status IN ('active', 'suspended', 'revoked')),
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  CHECK ((role = 'platform_admin') = (white_label_id IS NULL))
);

-- Nonces and rate counters are UNLOGGED: they are written by every request, and without WAL their
-- commits do not wait for the disk, so the hot row of a key's bucket is locked only briefly. After a
-- crash PostgreSQL empties them: counters restart their window, and nonces of the last 10 minutes are
-- forgotten (the 300-second timestamp window still bounds any replay; writes stay idempotent).
CREATE UNLOGGED TABLE request_nonces (
  white_label_id   text NOT NULL,                                           -- brand of the key
  api_key_id       text NOT NULL,                                           -- key that signed the request
  nonce            text NOT NULL CHECK (length(nonce) BETWEEN 1 AND 128),   -- PG-Nonce as sent
  expires_at       timestamptz NOT NULL,                                    -- seen-at + 10 minutes; reusable after
  PRIMARY KEY (white_label_id, api_key_id, nonce)
);
CREATE INDEX request_nonces_expires_at ON request_nonces (expires_at);

CREATE UNLOGGED TABLE rate_limit_counters (
  white_label_id   text NOT NULL,                                           -- brand, or '' for pre-auth buckets
  bucket           text NOT NULL,                                           -- bucket name, e.g. pay_write
  subject          text NOT NULL,                                           -- what the bucket counts (key id, user, ip)
  window_started_at timestamptz NOT NULL,                                   -- start of the current fixed window
  request_count    integer NOT NULL CHECK (request_count >= 0),             -- requests counted in that window
  PRIMARY KEY (white_label_id, bucket, subject)
);
CREATE INDEX rate_limit_counters_window ON rate_limit_counters (window_started_at);

CREATE TABLE idempotency_records (
  white_label_id   text NOT NULL,                                           -- brand of the caller
  merchant_id      text NOT NULL,                                           -- merchant of the caller
  livemode         boolean NOT NULL,                                        -- keys are scoped per environment
  idempotency_key  text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  request_fingerprint text NOT NULL CHECK (length(request_fingerprint) = 64), -- SHA-256 of method, path, canonical body
  request_id       text NOT NULL,                                           -- req_ id of the request that stored it
  response_status  integer NOT NULL CHECK (response_status BETWEEN 200 AND 299), -- only successes are kept
  response_body    text NOT NULL,                                           -- exact bytes returned, replayed verbatim
  response_headers json NOT NULL,                                           -- headers the route set (e.g. Location), replayed too
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,                                    -- created_at + 7 days
  PRIMARY KEY (white_label_id, merchant_id, livemode, idempotency_key)
);
CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at);

CREATE TABLE event_sequences (
  white_label_id   text NOT NULL,
  merchant_id      text NOT NULL,
  livemode         boolean NOT NULL,
  last_sequence    bigint NOT NULL CHECK (last_sequence >= 0),              -- highest sequence handed out
  PRIMARY KEY (white_label_id, merchant_id, livemode)
);

CREATE TABLE events (
  white_label_id   text NOT NULL,                                           -- account.white_label_id
  merchant_id      text NOT NULL,                                           -- account.merchant_id
  livemode         boolean NOT NULL,
  event_id         text NOT NULL CHECK (event_id LIKE 'evt\_%'),           -- envelope id
  sequence         bigint NOT NULL CHECK (sequence > 0),                    -- per (merchant, livemode), strictly increasing
  type             text NOT NULL,                                           -- event type, e.g. deposit.created
  object_type      text NOT NULL,                                           -- data.object.object
  object_id        text,                                                    -- data.object.id when it has one
  object_status    text,                                                    -- data.object.status when it has one
  created_at       timestamptz NOT NULL,
  envelope         json NOT NULL,                                           -- the full event, key order kept as written
  PRIMARY KEY (white_label_id, merchant_id, livemode, sequence),
  UNIQUE (white_label_id, event_id)
);
CREATE INDEX events_type ON events (white_label_id, merchant_id, livemode, type, sequence);
CREATE INDEX events_object ON events (white_label_id, object_id);

CREATE TABLE jobs (
  job_id           text PRIMARY KEY CHECK (job_id LIKE 'job\_%'),
  white_label_id   text,                                                    -- brand the job works for; null for housekeeping
  task             text NOT NULL,                                           -- handler name
  payload          jsonb NOT NULL,                                          -- handler input
  job_key          text,                                                    -- dedupe key: one pending job per key
  status           text NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
  run_at           timestamptz NOT NULL,                                    -- not claimed before this instant
  attempts         integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),        -- claims so far
  max_attempts     integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
  locked_by        text,                                                    -- worker id holding the lease
  locked_until     timestamptz,                                             -- lease end; a later claim may take it over
  last_error       text,                                                    -- last failure, truncated, no secrets
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  CHECK ((status = 'running') = (locked_until IS NOT NULL))
);
CREATE INDEX jobs_runnable ON jobs (run_at) WHERE status = 'pending';
CREATE INDEX jobs_leases ON jobs (locked_until) WHERE status = 'running';
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status = 'succeeded';
CREATE UNIQUE INDEX jobs_job_key ON jobs (job_key) WHERE job_key IS NOT NULL AND status IN ('pending', 'running');

CREATE TABLE banks (
  -- Reference data shared by every brand (a replicated reference table under sharding).
  bank_code        text PRIMARY KEY CHECK (bank_code ~ '^[0-9]{3}$'),       -- Bank of Thailand code
  short_name       text NOT NULL,                                           -- common abbreviation, e.g. KBANK
  name_th          text NOT NULL,
  name_en          text NOT NULL,
  available        boolean NOT NULL,                                        -- accepting new orders at all
  sides            text[] NOT NULL,                                         -- subset of {sender, receiver}
  message_th       text,                                                    -- end-user text while unavailable
  display_order    integer NOT NULL,
  CHECK (sides <@ ARRAY['sender', 'receiver']::text[]),
  CHECK (available OR message_th IS NOT NULL)
);

CREATE TABLE audit_log (
  white_label_id   text,                                                    -- brand affected; null for platform actions
  audit_id         text PRIMARY KEY CHECK (audit_id LIKE 'aud\_%'),
  actor_type       text NOT NULL,                                           -- backoffice_credential, cli, system
  actor_id         text NOT NULL,
  action           text NOT NULL,                                           -- e.g. api_key.revoked
  target_type      text NOT NULL,
  target_id        text NOT NULL,
  request_id       text,                                                    -- req_ id when it came through HTTP
  details          jsonb NOT NULL,                                          -- never secrets
  created_at       timestamptz NOT NULL
);
CREATE INDEX audit_log_target ON audit_log (white_label_id, target_id);

INSERT INTO banks (bank_code, short_name, name_th, name_en, available, sides, message_th, display_order) VALUES
  ('002', 'BBL',   'ธนาคารกรุงเทพ',                     'Bangkok Bank',                         true, ARRAY['sender','receiver'], NULL, 1),
  ('004', 'KBANK', 'ธนาคารกสิกรไทย',                    'Kasikornbank',                         true, ARRAY['sender','receiver'], NULL, 2),
  ('006', 'KTB',   'ธนาคารกรุงไทย',                     'Krungthai Bank',                       true, ARRAY['sender','receiver'], NULL, 3),
  ('011', 'TTB',   'ธนาคารทหารไทยธนชาต',                'TMBThanachart Bank',                   true, ARRAY['sender','receiver'], NULL, 4),
  ('014', 'SCB',   'ธนาคารไทยพาณิชย์',                  'Siam Commercial Bank',                 true, ARRAY['sender','receiver'], NULL, 5),
  ('022', 'CIMBT', 'ธนาคารซีไอเอ็มบี ไทย',              'CIMB Thai Bank',                       true, ARRAY['sender','receiver'], NULL, 6),
  ('024', 'UOBT',  'ธนาคารยูโอบี',                      'United Overseas Bank (Thai)',          true, ARRAY['sender','receiver'], NULL, 7),
  ('025', 'BAY',   'ธนาคารกรุงศรีอยุธยา',               'Bank of Ayudhya (Krungsri)',           true, ARRAY['sender','receiver'], NULL, 8),
  ('030', 'GSB',   'ธนาคารออมสิน',                      'Government Savings Bank',              true, ARRAY['sender','receiver'], NULL, 9),
  ('033', 'GHB',   'ธนาคารอาคารสงเคราะห์',              'Government Housing Bank',              true, ARRAY['sender','receiver'], NULL, 10),
  ('034', 'BAAC',  'ธนาคารเพื่อการเกษตรและสหกรณ์การเกษตร', 'Bank for Agriculture and Agricultural Cooperatives', true, ARRAY['sender','receiver'], NULL, 11),
  ('066', 'IBANK', 'ธนาคารอิสลามแห่งประเทศไทย',         'Islamic Bank of Thailand',             true, ARRAY['sender','receiver'], NULL, 12),
  ('067', 'TISCO', 'ธนาคารทิสโก้',                      'TISCO Bank',                           true, ARRAY['sender'],            NULL, 13),
  ('069', 'KKP',   'ธนาคารเกียรตินาคินภัทร',            'Kiatnakin Phatra Bank',                true, ARRAY['sender','receiver'], NULL, 14),
  ('070', 'ICBCT', 'ธนาคารไอซีบีซี (ไทย)',              'Industrial and Commercial Bank of China (Thai)', true, ARRAY['sender'], NULL, 15),
  ('071', 'TCD',   'ธนาคารไทยเครดิต',                   'Thai Credit Bank',                     true, ARRAY['sender'],            NULL, 16),
  ('073', 'LHFG',  'ธนาคารแลนด์ แอนด์ เฮ้าส์',          'Land and Houses Bank',                 true, ARRAY['sender','receiver'], NULL, 17),
  ('098', 'SMEB',  'ธนาคารพัฒนาวิสาหกิจขนาดกลางและขนาดย่อมแห่งประเทศไทย', 'SME Development Bank', false, ARRAY['sender'],
     'ขณะนี้ธนาคารนี้ยังไม่เปิดให้ใช้ชำระเงิน กรุณาเลือกธนาคารอื่น', 18);
