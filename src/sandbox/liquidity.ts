import type { ReadPart } from '../platform/read-part.ts';
import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { SYSTEM_CAUSE } from '../platform/cause.ts';
import { newId } from '../platform/ids.ts';
import type { LedgerService } from '../ledger/service.ts';
import type { FeeService } from '../fees/service.ts';
import type { EventsService } from '../events/service.ts';
import type { BeneficiaryService } from '../beneficiaries/service.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { LiquidityDecision, LiquidityProvider } from '../matching/service.ts';
import * as repository from './repository.ts';

/**
 * The sandbox counterparty: a simulated merchant of each brand that keeps standing withdrawals to
 * accounts of the sandbox bank, so that a sandbox deposit matches at once exactly as a live one would
 * when liquidity is present. It goes through the same services as any merchant: its wallet is funded
 * by an `adjustment` credit (sandbox money, reason `sandbox_liquidity`), its payees are beneficiaries
 * verified against the sandbox bank, and its withdrawals are ordinary orders that deposits reserve.
 */

export const COUNTERPARTY_NAME = 'Sandbox Counterparty';
/** A standing withdrawal is at least this large (50,000 baht), so that most deposits need one leg. */
export const STANDING_WITHDRAWAL_MINOR = 5_000_000;
/** Sandbox scenario 105.00 THB: no destination for the first 25 seconds of the order. */
export const LATE_LIQUIDITY_AMOUNT_MINOR = 10_500;
export const LATE_LIQUIDITY_DELAY_MS = 25_000;
/**
 * Scenarios whose destinations the counterparty opens for the deposit alone, out of the matching queue so that
 * no other deposit reserves them: per withdrawal, the amounts of the deposit's legs on it. 102.00 needs its own
 * too: its late slip reserves the leg again when approved, which a standing order that has reached its
 * `max_splits` meanwhile refuses. 107.00 as a deposit: one withdrawal split into three chunks, the three legs.
 * 104.00 is not here: its two legs go to the sandbox gateway account (scenarioGatewayRoute), not to withdrawals.
 */
const DEDICATED_WITHDRAWALS_MINOR: Readonly<Record<number, readonly (readonly number[])[]>> = {
  10_200: [[10_200]],
  10_700: [[3_500, 3_600, 3_600]],
  11_000: [[11_000]],
};

/** Seeded accounts of the sandbox bank (src/bank-directory/sandbox-adapter.ts) that the counterparty pays out to. */
const COUNTERPARTY_PAYEES = [
  { bank_code: '014', account_number: '1472583690', account_name_th: 'พิชัย สุวรรณรัตน์' },
  { bank_code: '025', account_number: '8889990001', account_name_th: 'วรวุฒิ ประเสริฐศักดิ์' },
] as const;

export interface SandboxLiquidityDependencies {
  clock: Clock;
  tenancy: TenancyService;
  beneficiaries: BeneficiaryService;
  ledger: LedgerService;
  fees: FeeService;
  withdrawals: WithdrawalService;
  events: EventsService;
}

export class SandboxLiquidity implements LiquidityProvider {
  constructor(private readonly deps: SandboxLiquidityDependencies) {}

  /**
   * Makes sure a test-mode deposit of `amount_minor` can match: when no order of the brand can take it
   * whole, the counterparty opens a standing withdrawal that can; either way the order that takes it is
   * named. Live mode is left alone. The brand lock is taken only when something must be created, so
   * matching stays concurrent otherwise.
   */
  async ensureFor(
    tx: Queryable,
    input: { white_label_id: string; livemode: boolean; amount_minor: number; exclude_merchant_id: string; order_created_at: Date; carried_reads?: readonly ReadPart<unknown>[] },
  ): Promise<LiquidityDecision> {
    if (input.livemode) return 'match';
    if (input.amount_minor === LATE_LIQUIDITY_AMOUNT_MINOR) {
      const arrives = new Date(input.order_created_at.getTime() + LATE_LIQUIDITY_DELAY_MS);
      if (this.deps.clock.now().getTime() < arrives.getTime()) return { wait_until: arrives };
    }
    const dedicated = DEDICATED_WITHDRAWALS_MINOR[input.amount_minor];
    if (dedicated) return this.dedicatedLegs(tx, input, dedicated);
    // The order found here is the one rule 2 would pick (same scope, oldest first) and this transaction
    // holds its row lock, so the matcher takes it as it is instead of searching the queue again.
    const scope = { white_label_id: input.white_label_id, livemode: false, amount_minor: input.amount_minor, exclude_merchant_id: input.exclude_merchant_id, limit: 1 };
    // Its candidate statement carries the matcher's caller's reads (`MatchRequest.carried_reads`), as the matcher's own would.
    const carried = input.carried_reads ?? [];
    const [present] = await this.deps.withdrawals.findMatchable(tx, scope, carried);
    if (present) return { withdrawal_id: present.id, merchant_id: present.merchant_id, beneficiary_id: present.beneficiary_id };
    await repository.lockBrandLiquidity(tx, input.white_label_id);
    const [arrived] = await this.deps.withdrawals.findMatchable(tx, scope, carried);
    if (arrived) return { withdrawal_id: arrived.id, merchant_id: arrived.merchant_id, beneficiary_id: arrived.beneficiary_id };
    const counterparty = await this.counterparty(tx, input.white_label_id);
    // The counterparty never pays its own deposits; a deposit of the counterparty itself gets no help.
    if (counterparty.merchant_id === input.exclude_merchant_id) return 'match';
    // The standing order writes to the counterparty's feed and the deposit then to the depositor's:
    // both are locked now, in the one order every deposit uses (see MatchingService), before either is written.
    await this.deps.events.lockFeeds(tx, input.white_label_id, [input.exclude_merchant_id, counterparty.merchant_id], false);
    const withdrawal_id = await this.openWithdrawal(tx, counterparty, Math.max(input.amount_minor, STANDING_WITHDRAWAL_MINOR), 'standing');
    return { withdrawal_id, merchant_id: counterparty.merchant_id };
  }

  /**
   * Scenarios 107.00 (a withdrawal split into three chunks), 110.00 (a
   * destination that is gone when the late slip comes) and 102.00 (a late slip reserves its leg again): the
   * counterparty opens withdrawals of exactly these amounts for this deposit alone, kept out of the matching
   * queue, so the scenario's later steps act on them and no other order's deposit can take them meanwhile.
   */
  private async dedicatedLegs(
    tx: Queryable,
    input: { white_label_id: string; amount_minor: number; exclude_merchant_id: string },
    withdrawals_minor: readonly (readonly number[])[],
  ): Promise<LiquidityDecision> {
    invariant(withdrawals_minor.flat().reduce((sum, amount) => sum + amount, 0) === input.amount_minor, 'dedicated legs sum to the order amount');
    await repository.lockBrandLiquidity(tx, input.white_label_id);
    const counterparty = await this.counterparty(tx, input.white_label_id);
    if (counterparty.merchant_id === input.exclude_merchant_id) return 'match';
    await this.deps.events.lockFeeds(tx, input.white_label_id, [input.exclude_merchant_id, counterparty.merchant_id], false);
    const legs = [];
    for (const legs_minor of withdrawals_minor) {
      const withdrawal_id = await this.openWithdrawal(tx, counterparty, legs_minor.reduce((sum, amount) => sum + amount, 0), 'scenario');
      for (const amount_minor of legs_minor) legs.push({ withdrawal_id, merchant_id: counterparty.merchant_id, amount_minor });
    }
    return { legs };
  }

  /** Opens one withdrawal of the counterparty, first funding its wallet with sandbox money when it is short. */
  private async openWithdrawal(tx: Queryable, counterparty: repository.CounterpartyRow, amount_minor: number, purpose: 'standing' | 'scenario'): Promise<string> {
    const account = { white_label_id: counterparty.white_label_id, merchant_id: counterparty.merchant_id, livemode: false };
    const balance = await this.deps.ledger.balance(tx, account);
    const fee = await this.deps.fees.quote(tx, { ...account, channel: 'withdrawal' }, amount_minor);
    const needed = amount_minor + fee.fee_total_minor - Math.max(balance.available_minor, 0);
    // A fresh id per order: the clock may not move between two of them (a test clock, a busy second).
    const standingId = newId('withdrawal').slice('wdr_'.length);
    const key = `sandbox_liquidity:${counterparty.white_label_id}:${standingId}`;
    if (needed > 0) {
      const funded = await this.deps.ledger.post(tx, {
        account,
        type: 'adjustment',
        amount_minor: needed,
        bucket_from: null,
        bucket_to: 'available',
        movement_key: key,
        source: { type: 'sandbox_counterparty', id: counterparty.merchant_id },
        reason_code: 'sandbox_liquidity',
        cause: SYSTEM_CAUSE,
      });
      invariant(funded.ok, 'a credit cannot be refused');
    }
    const payees = counterparty.beneficiary_ids;
    const beneficiary_id = payees[standingId.charCodeAt(standingId.length - 1) % payees.length];
    invariant(beneficiary_id, 'the counterparty has payees');
    const created = await this.deps.withdrawals.create(
      tx,
      account,
      { amount_minor, merchant_reference: `${purpose}-${standingId}`, end_user_ref: 'sandbox-counterparty', beneficiary_id },
      SYSTEM_CAUSE,
      { sandbox_liquidity: true, outside_matching_queue: purpose === 'scenario' },
    );
    invariant(created.ok, 'a funded counterparty can always open its withdrawal');
    return created.value.id;
  }

  /** The account of the brand's counterparty (107.00 THB: the depositor of a withdrawal's chunks), created on first use. */
  async counterpartyAccount(tx: Queryable, white_label_id: string): Promise<{ white_label_id: string; merchant_id: string; livemode: false }> {
    const counterparty = await this.counterparty(tx, white_label_id);
    return { white_label_id, merchant_id: counterparty.merchant_id, livemode: false };
  }

  /** The brand's counterparty, created with its verified payees on first use. */
  private async counterparty(tx: Queryable, white_label_id: string): Promise<repository.CounterpartyRow> {
    const existing = await repository.findCounterparty(tx, white_label_id);
    if (existing) return existing;
    return this.createCounterparty(tx, white_label_id);
  }

  /** The brand's counterparty is the brand's, in real time whatever clock the deposit that needs it runs on. */
  private async createCounterparty(tx: Queryable, white_label_id: string): Promise<repository.CounterpartyRow> {
    const merchant = await this.deps.tenancy.createMerchantIn(tx, { actor_type: 'system', actor_id: 'sandbox', request_id: null }, { white_label_id, name: COUNTERPARTY_NAME, system_owned: true });
    invariant(merchant, 'the brand exists');
    const account = { white_label_id, merchant_id: merchant.id, livemode: false };
    const beneficiary_ids: string[] = [];
    for (const payee of COUNTERPARTY_PAYEES) {
      const beneficiary = await this.deps.beneficiaries.createVerifiedInSandbox(tx, account, { ...payee });
      invariant(beneficiary.status === 'verified', 'the counterparty pays out to verified sandbox accounts');
      beneficiary_ids.push(beneficiary.id);
    }
    const row = { white_label_id, merchant_id: merchant.id, beneficiary_ids, created_at: this.deps.clock.now() };
    await repository.insertCounterparty(tx, row);
    return row;
  }
}
