import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { MAX_ORDER_AMOUNT_MINOR } from '../http/order-fields.ts';
import * as repository from './repository.ts';
import type { WithdrawalPolicyRow } from './types.ts';
import type { Actor } from '../platform/access.ts';
import type { AuditTrail } from '../platform/audit.ts';

/**
 * A brand's withdrawal rules per environment (the spec leaves them to us: "The value of max_splits
 * for withdrawals: not shown"). A brand without a stored policy uses `DEFAULT_WITHDRAWAL_POLICY`.
 */
export interface WithdrawalPolicy {
  /** Orders of at least this amount wait for an operator's approval; null means none do. */
  approval_threshold_minor: number | null;
  /** An order still unapproved after this long is canceled (`approval_ttl_expired`). */
  approval_ttl_seconds: number;
  /** How long an order stays in the matching queue once open. */
  expires_in_seconds: number;
  /** The most fills one order may take. */
  max_splits: number;
  min_amount_minor: number;
  max_amount_minor: number;
}

export const DEFAULT_WITHDRAWAL_POLICY: Readonly<WithdrawalPolicy> = Object.freeze({
  // 200,000 baht: large payouts get a second pair of eyes by default.
  approval_threshold_minor: 20_000_000,
  approval_ttl_seconds: 24 * 3600,
  expires_in_seconds: 24 * 3600,
  max_splits: 10,
  min_amount_minor: 100,
  max_amount_minor: MAX_ORDER_AMOUNT_MINOR,
});

export const POLICY_LIMITS = {
  approval_ttl_seconds: { min: 60, max: 7 * 24 * 3600 },
  expires_in_seconds: { min: 300, max: 30 * 24 * 3600 },
  max_splits: { min: 1, max: 100 },
} as const;

export function assertPolicy(policy: WithdrawalPolicy): void {
  invariant(policy.approval_threshold_minor === null || (Number.isSafeInteger(policy.approval_threshold_minor) && policy.approval_threshold_minor > 0), 'approval threshold');
  invariant(policy.approval_ttl_seconds >= POLICY_LIMITS.approval_ttl_seconds.min && policy.approval_ttl_seconds <= POLICY_LIMITS.approval_ttl_seconds.max, 'approval ttl');
  invariant(policy.expires_in_seconds >= POLICY_LIMITS.expires_in_seconds.min && policy.expires_in_seconds <= POLICY_LIMITS.expires_in_seconds.max, 'expiry');
  invariant(policy.max_splits >= POLICY_LIMITS.max_splits.min && policy.max_splits <= POLICY_LIMITS.max_splits.max, 'max splits');
  invariant(policy.min_amount_minor > 0 && policy.min_amount_minor <= policy.max_amount_minor && policy.max_amount_minor <= MAX_ORDER_AMOUNT_MINOR, 'amount range');
}

function policyOf(row: WithdrawalPolicyRow): WithdrawalPolicy {
  return {
    approval_threshold_minor: row.approval_threshold_minor,
    approval_ttl_seconds: row.approval_ttl_seconds,
    expires_in_seconds: row.expires_in_seconds,
    max_splits: row.max_splits,
    min_amount_minor: row.min_amount_minor,
    max_amount_minor: row.max_amount_minor,
  };
}

export interface WithdrawalPolicyDependencies {
  clock: Clock;
  database: Database;
  audit: AuditTrail;
}

export class WithdrawalPolicyService {
  constructor(private readonly deps: WithdrawalPolicyDependencies) {}

  async policyFor(db: Queryable, white_label_id: string, livemode: boolean): Promise<WithdrawalPolicy & { source: 'brand' | 'default' }> {
    return this.fromRow(await repository.findPolicy(db, white_label_id, livemode));
  }

  /** The policy a stored row gives, or the default when the brand has none (a row read with other things). */
  fromRow(row: WithdrawalPolicyRow | null): WithdrawalPolicy & { source: 'brand' | 'default' } {
    return row ? { ...policyOf(row), source: 'brand' } : { ...DEFAULT_WITHDRAWAL_POLICY, source: 'default' };
  }

  async setPolicy(db: Queryable, white_label_id: string, livemode: boolean, policy: WithdrawalPolicy): Promise<WithdrawalPolicy & { source: 'brand' }> {
    assertPolicy(policy);
    const row = await repository.upsertPolicy(db, { white_label_id, livemode, ...policy }, this.deps.clock.now());
    return { ...policyOf(row), source: 'brand' };
  }

  /** A brand's policy as the back office sets it: the change and its audit row in one transaction. */
  setPolicyByStaff(actor: Actor, white_label_id: string, mode: 'test' | 'live', policy: WithdrawalPolicy): Promise<WithdrawalPolicy & { source: 'brand' }> {
    return this.deps.database.transaction(async (tx) => {
      const stored = await this.setPolicy(tx, white_label_id, mode === 'live', policy);
      await this.deps.audit.audit(tx, actor, white_label_id, 'withdrawal_policy.updated', 'withdrawal_policy', `${white_label_id}:${mode}`, { ...policy });
      return stored;
    });
  }
}
