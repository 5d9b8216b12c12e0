-- Webhook delivery (issue 5): the merchants' endpoints, the service's Ed25519 signing keys, one
-- fan-out cursor per event feed, one delivery per (event, endpoint), and one row per attempt.
--
-- Events are read from the outbox (events, event_sequences) and never copied: a delivery sends the
-- stored envelope text itself, so every attempt carries the same bytes. Every instant below comes from
-- the service clock, passed in as a parameter (never now()), so tests drive retries with a TestClock.

CREATE TABLE webhook_endpoints (
  white_label_id   text NOT NULL,                                           -- brand of the merchant
  merchant_id      text NOT NULL,                                           -- merchant whose events are sent here
  livemode         boolean NOT NULL,                                        -- receives only events of this environment
  endpoint_id      text NOT NULL CHECK (endpoint_id LIKE 'we\_%'),         -- we_ + ULID
  url              text NOT NULL CHECK (length(url) BETWEEN 8 AND 2048),    -- the spec's deposit_url, checked on write and on every attempt
  status           text NOT NULL CHECK (status IN ('enabled', 'disabled', 'deleted')), -- deleted rows keep their delivery history
  disabled_reason  text CHECK (disabled_reason IN ('operator', 'endpoint_gone')), -- why a disabled endpoint is disabled
  event_types      text[],                                                  -- subscribed types; null means every type
  description      text CHECK (length(description) <= 500),                 -- an operator's note
  version          integer NOT NULL CHECK (version > 0),                    -- bumped by every change (webhook.endpoint.disabled carries it)
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  disabled_at      timestamptz,                                             -- set while disabled
  deleted_at       timestamptz,                                             -- set once deleted
  PRIMARY KEY (white_label_id, endpoint_id),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  CHECK ((status = 'disabled') = (disabled_reason IS NOT NULL)),
  CHECK ((status = 'disabled') = (disabled_at IS NOT NULL)),
  CHECK ((status = 'deleted') = (deleted_at IS NOT NULL))
);
-- The back office finds an endpoint by id before it knows the brand (platform administrator); ids
-- are ULIDs, unique by construction, so a plain index serves the lookup.
CREATE INDEX webhook_endpoints_endpoint_id ON webhook_endpoints (endpoint_id);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (white_label_id, merchant_id, livemode) WHERE status <> 'deleted';

CREATE TABLE webhook_signing_keys (
  -- The service's Ed25519 key pairs. They are platform-wide today (white_label_id is '' for every
  -- row, as for the pre-authentication rate buckets): GET /v1/webhooks/signing-keys is public and
  -- unscoped, so one key set serves every brand. The column keeps per-brand keys possible later.
  white_label_id   text NOT NULL DEFAULT '',                                -- '' is the platform
  kid              text NOT NULL CHECK (kid LIKE 'whk\_%'),                -- key id in X-PG-Signature, whk_ + ULID
  generation       integer NOT NULL CHECK (generation > 0),                 -- 1 for the first key, +1 per rotation
  alg              text NOT NULL CHECK (alg = 'Ed25519'),
  public_key_spki  text NOT NULL,                                           -- SPKI DER, standard base64
  raw_public_key   text NOT NULL,                                           -- the 32 raw bytes, standard base64
  private_key_sealed text NOT NULL,                                         -- PKCS#8 DER, sealed under the master key (SecretBox)
  not_before       timestamptz NOT NULL,                                    -- signs from this instant (a rotation publishes it earlier)
  not_after        timestamptz,                                             -- set when replaced; listed and trusted until then
  created_at       timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, kid),
  UNIQUE (white_label_id, generation),
  CHECK (not_after IS NULL OR not_after > not_before)
);

CREATE TABLE webhook_feed_cursors (
  -- How far the fan-out has read one event feed (merchant and environment). Created with the feed's
  -- first endpoint, at the feed's sequence of that moment: an endpoint receives events from its
  -- creation on (older ones through replay).
  white_label_id   text NOT NULL,
  merchant_id      text NOT NULL,
  livemode         boolean NOT NULL,
  last_sequence    bigint NOT NULL CHECK (last_sequence >= 0),              -- events up to this sequence have their deliveries
  updated_at       timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, merchant_id, livemode)
);

CREATE TABLE webhook_deliveries (
  -- One event to one endpoint. A resend or a replay starts a new round on the same row: the row is
  -- the unit that is never attempted twice at the same time (the lease below).
  white_label_id   text NOT NULL,
  merchant_id      text NOT NULL,
  livemode         boolean NOT NULL,
  delivery_id      text NOT NULL CHECK (delivery_id LIKE 'whd\_%'),        -- whd_ + ULID, X-PG-Delivery-Id
  endpoint_id      text NOT NULL,
  event_id         text NOT NULL,                                           -- the outbox event whose stored bytes are sent
  event_type       text NOT NULL,                                           -- copied for filters (replay by event_types)
  event_created_at timestamptz NOT NULL,                                    -- copied for filters (replay windows)
  status           text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  failure_reason   text CHECK (failure_reason IN ('attempts_exhausted', 'endpoint_gone', 'endpoint_disabled', 'endpoint_deleted')),
  round            integer NOT NULL CHECK (round > 0),                      -- 1, then +1 for each resend or replay
  round_attempts   integer NOT NULL CHECK (round_attempts BETWEEN 0 AND 11), -- attempts of this round: X-PG-Attempt of the last one
  attempt_count    integer NOT NULL CHECK (attempt_count >= 0),             -- attempts over all rounds; fences a claim
  resend           boolean NOT NULL,                                        -- this round was asked for by a resend or replay (X-PG-Resend)
  resend_requested boolean NOT NULL,                                        -- a resend arrived while an attempt was in flight: a new round starts when it ends
  next_attempt_at  timestamptz,                                             -- due time while pending
  leased_by        text,                                                    -- dispatcher holding the attempt in flight
  lease_expires_at timestamptz,                                             -- after this the attempt counts as lost and the row is recovered
  last_attempt_at  timestamptz,                                             -- start of the latest attempt
  last_http_status integer,                                                 -- the latest answer's status, if any
  last_error       text,                                                    -- the latest attempt's error word, if any
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  completed_at     timestamptz,                                             -- when it stopped being pending
  PRIMARY KEY (white_label_id, delivery_id),
  UNIQUE (white_label_id, endpoint_id, event_id),
  FOREIGN KEY (white_label_id, endpoint_id) REFERENCES webhook_endpoints (white_label_id, endpoint_id),
  CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL)),
  CHECK ((status = 'failed') = (failure_reason IS NOT NULL)),
  CHECK ((leased_by IS NULL) = (lease_expires_at IS NULL))
);
-- Every row is inserted once and updated twice (claim, answer), each update touching the indexes, so
-- there are no more of them than the reads need: every lookup by delivery id also knows the brand and
-- uses the primary key.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- Only attempts in flight are leased, so this index stays as small as the in-flight set.
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_expires_at) WHERE leased_by IS NOT NULL;
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (white_label_id, endpoint_id, delivery_id);
CREATE INDEX webhook_deliveries_by_event_time ON webhook_deliveries (white_label_id, endpoint_id, event_created_at);

CREATE TABLE webhook_delivery_attempts (
  -- One attempt: written when its answer is recorded, or as 'lost' when its dispatcher vanished.
  white_label_id   text NOT NULL,
  delivery_id      text NOT NULL,
  attempt_sequence integer NOT NULL CHECK (attempt_sequence > 0),           -- the delivery's attempt_count at this attempt
  endpoint_id      text NOT NULL,
  event_id         text NOT NULL,
  round            integer NOT NULL CHECK (round > 0),
  attempt          integer NOT NULL CHECK (attempt BETWEEN 1 AND 11),       -- X-PG-Attempt as sent
  resend           boolean NOT NULL,                                        -- X-PG-Resend as sent
  kid              text,                                                    -- the signing key used; null when lost
  status           text NOT NULL CHECK (status IN ('succeeded', 'failed', 'lost')),
  http_status      integer,                                                 -- the answer's status; null without an answer
  error            text,                                                    -- a stable word (timeout, redirect_not_followed, …); null on success
  started_at       timestamptz NOT NULL,
  duration_ms      integer CHECK (duration_ms >= 0),                        -- null when lost
  next_attempt_at  timestamptz,                                             -- when the next attempt is due; null when none follows
  created_at       timestamptz NOT NULL,
  PRIMARY KEY (white_label_id, delivery_id, attempt_sequence),
  FOREIGN KEY (white_label_id, delivery_id) REFERENCES webhook_deliveries (white_label_id, delivery_id)
);
