-- Issue 31: a brand's policy hold, a reason the spec gives for review ("A non-amount check fails, policy hold, bank
-- checking off, duplicate slip, or ambiguity" → `under_review`).
--
-- Orders whose amount due is at least this many satang never settle without a person: a slip that would settle goes
-- to review with POLICY_HOLD (docs/decisions/verification.md, "The policy hold"). Null, the default: no hold. Whole
-- baht, like the policy's amount range; 100 holds every order of the brand in that environment.

CREATE DOMAIN deposit_policies_policy_hold_min_amount_minor AS bigint
  CONSTRAINT deposit_policies_policy_hold_min_amount_minor_check CHECK (((VALUE IS NULL) OR ((VALUE > 0) AND ((VALUE % 100) = 0))));

ALTER TABLE deposit_policies ADD COLUMN policy_hold_min_amount_minor deposit_policies_policy_hold_min_amount_minor;
