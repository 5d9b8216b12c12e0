-- A brand may switch `qr_payload` off (spec, legs[] item: "A brand may switch this field off"). The switch
-- lives in the brand's deposit policy, one per environment, so a brand can try it in the sandbox first.
-- True keeps today's behaviour for every stored policy; a brand without a stored policy uses the default (on).
ALTER TABLE deposit_policies ADD COLUMN qr_payload_enabled boolean NOT NULL DEFAULT true;
