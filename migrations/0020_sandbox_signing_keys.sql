-- Webhook signing keys per environment (docs/drafts/sandbox-signing-keys.md). Until now one platform key
-- set signed every webhook, sandbox and live alike. From here on the live set is that same platform set
-- (white_label_id '', livemode true: the keys already published stay exactly as they are for every
-- receiver), and each brand has a sandbox set of its own (white_label_id the brand, livemode false),
-- created when it is first needed and rotated by the 114.00 THB sandbox scenario. A key belongs to one
-- set, so sandbox and live never cross, keys included.

ALTER TABLE webhook_signing_keys
  -- The environment whose events the key signs: true for live, false for sandbox. Every existing row is
  -- the platform set, which becomes the live set; the default is dropped below so that every key
  -- written from now on states its environment.
  ADD COLUMN livemode boolean NOT NULL DEFAULT true;
ALTER TABLE webhook_signing_keys ALTER COLUMN livemode DROP DEFAULT;

-- Generations count per set (brand and environment): each set is rotated on its own, and two rotations
-- of one set at once still meet on the same generation, so one of them wins.
ALTER TABLE webhook_signing_keys DROP CONSTRAINT webhook_signing_keys_white_label_id_generation_key;
ALTER TABLE webhook_signing_keys ADD CONSTRAINT webhook_signing_keys_set_generation UNIQUE (white_label_id, livemode, generation);
-- The live set is the platform's (one key list for every brand, as before); a sandbox set always belongs
-- to a brand, so that a brand's sandbox rotation never reaches another brand's receivers.
ALTER TABLE webhook_signing_keys ADD CONSTRAINT webhook_signing_keys_set_owner
  CHECK ((livemode AND white_label_id = '') OR (NOT livemode AND white_label_id <> ''));

CREATE TABLE webhook_key_announcements (
  -- Which event feeds were told about which new key by webhook.key.rotating: one row per (feed, kid),
  -- written in the rotation's transaction. A sandbox scenario that meets a rotation already waiting for
  -- its switch reads it to tell its merchant only when that feed has not been told yet.
  white_label_id   text NOT NULL,                                           -- brand of the feed told
  merchant_id      text NOT NULL,                                           -- merchant of the feed told
  livemode         boolean NOT NULL,                                        -- environment of the feed told, which is also the key's
  kid              text NOT NULL CHECK (kid LIKE 'whk\_%'),                -- the announced key (live keys are stored under the platform, '')
  event_id         text NOT NULL CHECK (event_id LIKE 'evt\_%'),           -- the webhook.key.rotating event written to that feed
  created_at       timestamptz NOT NULL,                                    -- when the feed was told (service clock)
  PRIMARY KEY (white_label_id, merchant_id, livemode, kid),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id)
);

CREATE TABLE webhook_sandbox_key_rotation_runs (
  -- One row per run of the 114.00 THB sandbox scenario that asked for a key rotation. A scenario step
  -- is a durable job, which runs at least once: a run asked again answers the rotation it got the first
  -- time instead of rotating the brand's sandbox keys a second time.
  white_label_id   text NOT NULL,                                           -- brand whose sandbox key set answered
  merchant_id      text NOT NULL,                                           -- merchant whose scenario asked; its sandbox feed is told
  scenario_run_id  text NOT NULL CHECK (length(scenario_run_id) BETWEEN 1 AND 255), -- the run, as named by the scenario engine
  request_id       text,                                                    -- the API request behind the run (request.id of the announcement), if any
  kid              text NOT NULL,                                           -- the key that answered: made by this run, or one already waiting
  previous_kid     text,                                                    -- the key that signed before it; null when the set had none
  rotated          boolean NOT NULL,                                        -- true when this run made the key, false when it met one waiting for its switch
  created_at       timestamptz NOT NULL,                                    -- when the run asked (service clock)
  PRIMARY KEY (white_label_id, merchant_id, scenario_run_id),
  FOREIGN KEY (white_label_id, merchant_id) REFERENCES merchants (white_label_id, merchant_id),
  FOREIGN KEY (white_label_id, kid) REFERENCES webhook_signing_keys (white_label_id, kid)
);
