-- Issue 31: an idempotency key keeps a refusal too.
--
-- The spec's Common request rules 2: "Same Idempotency-Key with an identical body returns the original response with its
-- original HTTP status … A 429 does not consume the key." Until now only successes (2xx) were stored. An answer that no
-- retry of the same request can turn (a 4xx the catalogue marks not retryable) is now stored as well; an answer a retry
-- may get past (every 5xx, 429, 402 and the retryable 409s) never is (src/idempotency/service.ts `consumesKey`,
-- docs/decisions/idempotency.md). The stored status's rule follows: a success, or a client error other than 429.

ALTER DOMAIN idempotency_records_response_status DROP CONSTRAINT idempotency_records_response_status_check;
ALTER DOMAIN idempotency_records_response_status ADD CONSTRAINT idempotency_records_response_status_check
  CHECK (((VALUE >= 200) AND (VALUE <= 299)) OR ((VALUE >= 400) AND (VALUE <= 499) AND (VALUE <> 429)));
