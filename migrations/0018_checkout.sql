-- Hosted checkout (src/checkout/): a brand may serve its payers' checkout pages on its own address.
-- The page itself is served by this service; the brand's host points at it. Null means the deployment's
-- CHECKOUT_BASE_URL (by default the service's own PUBLIC_BASE_URL). Only an origin is stored (scheme,
-- host and port, no path), https, or http for a loopback host in development.
ALTER TABLE brands ADD COLUMN checkout_base_url text
  CHECK (checkout_base_url IS NULL OR (length(checkout_base_url) BETWEEN 8 AND 300 AND checkout_base_url ~ '^https?://[^/?#@]+$')); -- origin of the brand's checkout pages; null: the deployment default
