import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import * as repository from './repository.ts';
import type { ReadPart } from '../platform/read-part.ts';
import type { DepositPolicyRow } from './types.ts';
import type { Actor } from '../platform/access.ts';
import type { AuditTrail } from '../platform/audit.ts';
import type { SecretBox } from '../platform/crypto.ts';
import { maskAccount } from './masking.ts';

/**
 * A brand's deposit rules per environment. The spec leaves the values to us ("Minimum and maximum
 * amount values of policy: not shown", "The brand policy cap on expires_in_seconds: not shown"); a
 * brand without a stored policy uses `DEFAULT_DEPOSIT_POLICY`.
 */
export interface DepositPolicy {
  min_amount_minor: number;
  max_amount_minor: number;
  /** Transfer time after matching when the merchant asks for none. */
  default_expires_in_seconds: number;
  /** The clamp of `expires_in_seconds`. */
  max_expires_in_seconds: number;
  /** The most destinations one deposit may be split into. */
  max_legs: number;
  /** How long an order waits in `awaiting_liquidity` before it is canceled. */
  liquidity_wait_seconds: number;
  /** The brand's external gateway account, fallback liquidity when no withdrawal matches; null for none. */
  gateway: GatewayAccount | null;
  /** A review of an order of at least this amount needs two approvers (`four_eyes_required`); null: never. */
  four_eyes_min_amount_minor: number | null;
  /** Whether orders show each leg's raw `qr_payload` ("A brand may switch this field off"); `qr_image_url` stays. */
  qr_payload_enabled: boolean;
  /**
   * The policy hold (spec: "policy hold" sends a slip to `under_review`): an order whose amount due is at least
   * this never settles without a reviewer, its review naming POLICY_HOLD; null: no hold. Whole baht; the policy's
   * smallest order amount (or 100) holds every order of the brand in that environment.
   */
  policy_hold_min_amount_minor: number | null;
}

/** A gateway account as the policy keeps it: the number sealed, never in clear outside the payment instructions. */
export interface GatewayAccount {
  bank_code: string;
  account_sealed: string;
  account_last4: string;
  account_name_th: string;
}

export const DEFAULT_DEPOSIT_POLICY: Readonly<DepositPolicy> = Object.freeze({
  // 100 to 50,000 baht: the usual range of a Thai P2P top-up; sandbox scenario amounts (100–116 baht) fit.
  min_amount_minor: 10_000,
  max_amount_minor: 5_000_000,
  default_expires_in_seconds: 15 * 60,
  max_expires_in_seconds: 60 * 60,
  max_legs: 3,
  liquidity_wait_seconds: 5 * 60,
  gateway: null,
  // 20,000 baht and more: two reviewers, as for large payouts; the sandbox scenario amounts stay below it.
  four_eyes_min_amount_minor: 2_000_000,
  qr_payload_enabled: true,
  // No hold unless the brand asks for one: the spec's automatic outcomes are the default.
  policy_hold_min_amount_minor: null,
});

/**
 * Whether the brand's policy holds an order for a reviewer (spec: a "policy hold" sends a slip to
 * `under_review`): its amount due is at least the policy's `policy_hold_min_amount_minor`.
 */
export function policyHolds(order: { amount_minor: number }, policy_hold_min_amount_minor: number | null): boolean {
  return reachesThreshold(order, policy_hold_min_amount_minor);
}

/** Whether a review of the order needs two approvers: its amount is at least the policy's `four_eyes_min_amount_minor`. */
export function fourEyesRequired(order: { amount_minor: number }, four_eyes_min_amount_minor: number | null): boolean {
  return reachesThreshold(order, four_eyes_min_amount_minor);
}

/** A policy's amount threshold: null never applies, otherwise an order of at least that amount reaches it. */
function reachesThreshold(order: { amount_minor: number }, threshold_minor: number | null): boolean {
  return threshold_minor !== null && order.amount_minor >= threshold_minor;
}

export function assertDepositPolicy(policy: DepositPolicy): void {
  invariant(policy.min_amount_minor > 0 && policy.min_amount_minor % 100 === 0 && policy.max_amount_minor % 100 === 0, 'whole-baht range');
  invariant(policy.min_amount_minor <= policy.max_amount_minor && policy.max_amount_minor <= 1_000_000_000_000, 'amount range');
  invariant(policy.default_expires_in_seconds >= 60 && policy.default_expires_in_seconds <= policy.max_expires_in_seconds && policy.max_expires_in_seconds <= 86_400, 'expiry');
  invariant(policy.max_legs >= 1 && policy.max_legs <= 10, 'legs');
  invariant(policy.liquidity_wait_seconds >= 10 && policy.liquidity_wait_seconds <= 3600, 'liquidity wait');
  invariant(policy.four_eyes_min_amount_minor === null || (Number.isSafeInteger(policy.four_eyes_min_amount_minor) && policy.four_eyes_min_amount_minor > 0), 'four-eyes threshold');
  const hold = policy.policy_hold_min_amount_minor;
  invariant(hold === null || (Number.isSafeInteger(hold) && hold > 0 && hold % 100 === 0), 'policy hold threshold');
}

function policyOf(row: DepositPolicyRow): DepositPolicy {
  return {
    min_amount_minor: row.min_amount_minor,
    max_amount_minor: row.max_amount_minor,
    default_expires_in_seconds: row.default_expires_in_seconds,
    max_expires_in_seconds: row.max_expires_in_seconds,
    max_legs: row.max_legs,
    liquidity_wait_seconds: row.liquidity_wait_seconds,
    gateway:
      row.gateway_bank_code && row.gateway_account_sealed && row.gateway_account_last4 && row.gateway_account_name_th
        ? { bank_code: row.gateway_bank_code, account_sealed: row.gateway_account_sealed, account_last4: row.gateway_account_last4, account_name_th: row.gateway_account_name_th }
        : null,
    four_eyes_min_amount_minor: row.four_eyes_min_amount_minor,
    qr_payload_enabled: row.qr_payload_enabled,
    policy_hold_min_amount_minor: row.policy_hold_min_amount_minor,
  };
}


/** The purpose the gateway's account number is sealed under (src/platform/crypto.ts, SecretBox). */
export const GATEWAY_ACCOUNT_PURPOSE = 'deposit.gateway_account_number';

/** A gateway account as the back office names it: the number in clear, sealed before it is stored. */
export interface GatewayAccountInput {
  bank_code: string;
  account_number: string;
  account_name_th: string;
}

export interface DepositPolicyDependencies {
  clock: Clock;
  database: Database;
  audit: AuditTrail;
  secretBox: SecretBox;
}

export class DepositPolicyService {
  constructor(private readonly deps: DepositPolicyDependencies) {}

  async policyFor(db: Queryable, white_label_id: string, livemode: boolean): Promise<DepositPolicy & { source: 'brand' | 'default' }> {
    const row = await repository.findPolicy(db, white_label_id, livemode);
    return row ? { ...policyOf(row), source: 'brand' } : { ...DEFAULT_DEPOSIT_POLICY, source: 'default' };
  }

  /** `policyFor`'s read, for another statement of the transaction to carry (src/platform/read-part.ts). */
  policyPart(white_label_id: string, livemode: boolean): ReadPart<DepositPolicy & { source: 'brand' | 'default' }> {
    const part = repository.findPolicyPart(white_label_id, livemode);
    return {
      ...part,
      parse: (value) => {
        const row = part.parse(value);
        return row ? { ...policyOf(row), source: 'brand' } : { ...DEFAULT_DEPOSIT_POLICY, source: 'default' };
      },
    };
  }

  /**
   * The policy a creation works under, read in the same round trip that serialises the end user's
   * creations until the transaction ends (the advisory lock of `lockEndUser`).
   */
  async policyForCreation(
    db: Queryable,
    account: { white_label_id: string; merchant_id: string; livemode: boolean },
    end_user_ref: string,
    /** What the request's first statement answered for `creationPart` (the lock taken, the policy read), when it carried it. */
    prefetched?: { row: DepositPolicyRow | null },
  ): Promise<DepositPolicy & { source: 'brand' | 'default' }> {
    const row = prefetched ? prefetched.row : await repository.lockEndUserAndFindPolicy(db, account, end_user_ref);
    return row ? { ...policyOf(row), source: 'brand' } : { ...DEFAULT_DEPOSIT_POLICY, source: 'default' };
  }

  /** `policyForCreation`'s lock and read, for a planned creation's first statement to carry (src/platform/read-part.ts). */
  creationPart(account: { white_label_id: string; merchant_id: string; livemode: boolean }, end_user_ref: string): ReadPart<DepositPolicyRow | null> {
    return repository.lockEndUserAndFindPolicyPart(account, end_user_ref);
  }

  async setPolicy(db: Queryable, white_label_id: string, livemode: boolean, policy: DepositPolicy): Promise<DepositPolicy & { source: 'brand' }> {
    assertDepositPolicy(policy);
    const { gateway, ...terms } = policy;
    const row = await repository.upsertPolicy(
      db,
      {
        white_label_id,
        livemode,
        ...terms,
        gateway_bank_code: gateway?.bank_code ?? null,
        gateway_account_sealed: gateway?.account_sealed ?? null,
        gateway_account_last4: gateway?.account_last4 ?? null,
        gateway_account_name_th: gateway?.account_name_th ?? null,
      },
      this.deps.clock.now(),
    );
    return { ...policyOf(row), source: 'brand' };
  }
  /**
   * A brand's policy as the back office sets it: the gateway's account number sealed, the change and its
   * audit row (which names the gateway by its masked number only) in one transaction.
   */
  setPolicyByStaff(
    actor: Actor,
    white_label_id: string,
    mode: 'test' | 'live',
    terms: Omit<DepositPolicy, 'gateway'>,
    gateway: GatewayAccountInput | null,
  ): Promise<DepositPolicy & { source: 'brand' }> {
    const sealed = gateway
      ? {
          bank_code: gateway.bank_code,
          account_sealed: this.deps.secretBox.seal(gateway.account_number, GATEWAY_ACCOUNT_PURPOSE),
          account_last4: gateway.account_number.slice(-4),
          account_name_th: gateway.account_name_th,
        }
      : null;
    return this.deps.database.transaction(async (tx) => {
      const stored = await this.setPolicy(tx, white_label_id, mode === 'live', { ...terms, gateway: sealed });
      await this.deps.audit.audit(tx, actor, white_label_id, 'deposit_policy.updated', 'deposit_policy', `${white_label_id}:${mode}`, {
        ...terms,
        gateway: gateway ? { bank_code: gateway.bank_code, account_number_masked: maskAccount(gateway.account_number.slice(-4)) } : null,
      });
      return stored;
    });
  }

}
