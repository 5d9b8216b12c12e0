import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { newId } from '../platform/ids.ts';
import type { EventCause } from '../platform/cause.ts';
import { findBank } from '../banks/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { Payee } from '../beneficiaries/service.ts';
import type { EventsService } from '../events/service.ts';
import type { ReadPart } from '../platform/read-part.ts';

/**
 * Peer-to-peer matching: which withdrawals of the brand a deposit pays, and the reservation of those
 * parts through the withdrawal service's leg functions (never its tables). The rule, in full:
 *
 * 1. Within the brand and environment, never the depositor's own withdrawals.
 * 2. One leg from the oldest live withdrawal that can take the whole amount.
 * 3. Otherwise whole-baht legs from the withdrawals with the most remaining (oldest on a tie), up to the
 *    brand's `max_legs`; if they cannot cover the amount, nothing is reserved.
 * 4. Otherwise the brand's external gateway account, if it has one and the merchant did not ask for
 *    `internal_only`: one leg of the whole amount.
 *
 * A test-mode order may name the legs of a gateway route itself (`gateway_legs_minor`, sandbox 104.00 THB):
 * then rule 4 comes first, with those legs, unless the merchant asked for `internal_only`.
 *
 * Candidates are locked `FOR UPDATE SKIP LOCKED`, and `reserveLeg` re-checks under the row lock, so two
 * deposits never reserve the same satang. Taking them never waits, and it happens before any event feed
 * is locked, which is the lock order of every path (src/platform/lock-order.ts): a change to a deposit
 * locks the withdrawals its legs name before the feeds too.
 */

/**
 * Supplies liquidity before matching (the sandbox counterparty; live mode has none). `wait_until` holds
 * the order back from matching until that time (a sandbox scenario that simulates a liquidity wait, so
 * the order's next matching retry runs then and not later); a
 * `withdrawal_id` names an order this transaction has locked that takes the whole amount: the one rule 2
 * picks, or one the provider just opened for this deposit (whose feeds it has locked already); `legs`
 * are orders the provider opened for this deposit alone, one leg each (sandbox scenarios).
 */
export type LiquidityDecision = 'match' | { wait_until: Date } | { withdrawal_id: string; merchant_id: string; beneficiary_id?: string } | { legs: PlannedLeg[] };

/** No match this round, with the time liquidity is known to arrive when the provider knows it. */
export interface NoMatch {
  wait_until: Date | null;
}

export interface LiquidityProvider {
  ensureFor(
    tx: Queryable,
    input: { white_label_id: string; livemode: boolean; amount_minor: number; exclude_merchant_id: string; order_created_at: Date; carried_reads?: readonly ReadPart<unknown>[] },
  ): Promise<LiquidityDecision>;
}

export interface MatchRequest {
  white_label_id: string;
  livemode: boolean;
  /** The depositing merchant, whose own withdrawals are never used. */
  merchant_id: string;
  deposit_id: string;
  amount_minor: number;
  fill_preference: 'any' | 'internal_only';
  order_created_at: Date;
  /**
   * Sandbox scenario 107.00 THB: the one withdrawal this deposit of the sandbox counterparty fills (a
   * chunk of it); no other order is considered, and no liquidity is provided. Absent for every other order.
   */
  fill_withdrawal_id?: string | undefined;
  /**
   * Sandbox scenario 104.00 THB (the fallback route of two legs): the amounts of the gateway legs the order is
   * given instead of a match, summing to its amount; the policy's `gateway` is then the scenario's account.
   * Ignored for `internal_only`. Absent for every other order.
   */
  gateway_legs_minor?: readonly number[] | undefined;
  /**
   * The caller's reads that the candidate statement carries (src/platform/read-part.ts), parsed when a
   * candidate statement finds a row (the caller's planned reads record their answers so); a caller whose
   * reads were not answered reads them itself.
   */
  carried_reads?: readonly ReadPart<unknown>[];
}

export interface GatewayDestination {
  bank_code: string;
  account_last4: string;
  account_name_th: string;
}

export interface MatchedLeg {
  /** The deposit side's id of the leg, also the withdrawal side's dedupe key of its reservation. */
  leg_ref: string;
  sequence: number;
  amount_minor: number;
  destination: 'withdrawal' | 'gateway';
  withdrawal_id: string | null;
  withdrawal_leg_ref: string | null;
  receiver: { bank_code: string; bank_name_th: string; account_last4: string; account_name_th: string };
  /** The withdrawal's payee in full, for the payment instructions of the answer; null for the gateway. Never stored. */
  payee: Payee | null;
}

export interface Match {
  legs: MatchedLeg[];
  source: 'internal' | 'external_gateway';
}

export interface PlannedLeg {
  withdrawal_id: string;
  /** The withdrawing merchant, whose event feed the reservation writes to. */
  merchant_id: string;
  amount_minor: number;
  /** The order's beneficiary when the plan read it from the queue: its payee is then read before reserving. */
  beneficiary_id?: string;
}

function wholeBaht(amount_minor: number): number {
  return amount_minor - (amount_minor % 100);
}

export class MatchingService {
  constructor(private readonly deps: { withdrawals: WithdrawalService; events: EventsService; liquidity?: LiquidityProvider | null }) {}

  /** Matches and reserves, or answers NoMatch when the amount cannot be covered now (nothing reserved then). */
  async match(tx: Queryable, request: MatchRequest, policy: { max_legs: number; gateway: GatewayDestination | null }, cause: EventCause): Promise<Match | NoMatch> {
    if (request.gateway_legs_minor !== undefined && request.fill_preference !== 'internal_only' && policy.gateway) {
      invariant(!request.livemode, 'only sandbox scenario deposits name their gateway legs');
      return this.gatewayRoute(tx, policy.gateway, request.gateway_legs_minor, request.amount_minor);
    }
    const scope = { white_label_id: request.white_label_id, livemode: request.livemode, exclude_merchant_id: request.merchant_id };
    const decision = request.fill_withdrawal_id !== undefined ? await this.targetOf(tx, request, request.fill_withdrawal_id) : this.deps.liquidity ? await this.deps.liquidity.ensureFor(tx, { ...scope, amount_minor: request.amount_minor, order_created_at: request.order_created_at, carried_reads: request.carried_reads ?? [] }) : 'match';
    if (decision === null) return { wait_until: null };
    if (typeof decision === 'object' && 'wait_until' in decision) return { wait_until: decision.wait_until };
    const plan =
      typeof decision !== 'object' ? await this.plan(tx, request, policy.max_legs) : 'legs' in decision ? decision.legs : [{ ...decision, amount_minor: request.amount_minor }];
    if (plan.length === 0) {
      if (request.fill_preference === 'internal_only' || !policy.gateway) return { wait_until: null };
      return this.gatewayRoute(tx, policy.gateway, [request.amount_minor], request.amount_minor);
    }
    invariant(plan.reduce((sum, leg) => sum + leg.amount_minor, 0) === request.amount_minor, 'legs sum to the order amount');
    // Reserving writes events to the withdrawing merchants' feeds and creating the deposit to the
    // depositor's: all of them are locked in one statement, after the candidates (withdrawal rows come
    // before feeds in the lock order, src/platform/lock-order.ts), so that crossing deposits queue.
    // Payees known from the queue are read in that statement too, before any reservation, so that the
    // reservations' writes and the deposit's leave together at COMMIT instead of being flushed by a read
    // in between (src/platform/unit-of-work.ts); a plain read waits for no lock.
    const payeesKnown = plan.flatMap((planned, index) => (planned.beneficiary_id === undefined ? [] : [{ index, merchant_id: planned.merchant_id, beneficiary_id: planned.beneficiary_id }]));
    const payeesCarried = await this.deps.events.lockFeedsAndRead(
      tx,
      request.white_label_id,
      [request.merchant_id, ...plan.map((leg) => leg.merchant_id)],
      request.livemode,
      payeesKnown.map((known) => this.deps.withdrawals.payeeOfReservationPart(request, known)),
    );
    const payeesRead = new Map<number, Payee | null>(payeesKnown.map((known, position) => [known.index, payeesCarried[position] ?? null]));
    const legs: MatchedLeg[] = [];
    for (const [index, planned] of plan.entries()) {
      const leg_ref = newId('deposit_leg');
      const reserved = await this.deps.withdrawals.reserveLeg(tx, {
        white_label_id: request.white_label_id,
        livemode: request.livemode,
        withdrawal_id: planned.withdrawal_id,
        deposit_id: request.deposit_id,
        deposit_leg_key: leg_ref,
        amount_minor: planned.amount_minor,
        cause,
        // The key was minted just above: an order the queue locked for this plan is reserved as read.
        deposit_leg_key_is_new: true,
      });
      // A named target is locked only now: it may have closed, or have too little left, since it was read.
      if (!reserved.ok && request.fill_withdrawal_id !== undefined) return { wait_until: null };
      // A candidate was locked by this transaction, so it cannot have changed since it was read.
      invariant(reserved.ok, 'a locked candidate accepts its leg');
      invariant(planned.beneficiary_id === undefined || planned.beneficiary_id === reserved.value.beneficiary_id, 'a locked order keeps its beneficiary');
      const payee = payeesRead.has(index) ? (payeesRead.get(index) ?? null) : await this.deps.withdrawals.payeeOfReservation(tx, request, reserved.value);
      invariant(payee, 'a reserved leg has a payee');
      const bank = await findBank(tx, payee.bank_code);
      legs.push({
        leg_ref,
        sequence: index + 1,
        amount_minor: planned.amount_minor,
        destination: 'withdrawal',
        withdrawal_id: planned.withdrawal_id,
        withdrawal_leg_ref: reserved.value.leg_ref,
        receiver: { bank_code: payee.bank_code, bank_name_th: bank?.name_th ?? payee.bank_code, account_last4: payee.account_number.slice(-4), account_name_th: payee.account_name_th },
        payee,
      });
    }
    return { legs, source: 'internal' };
  }

  /**
   * Rule 4: legs of these amounts to the gateway account. Nothing is reserved: the account is outside the
   * brand's withdrawals, and its full payee is the policy's (or the scenario's) whenever it is needed.
   */
  private async gatewayRoute(tx: Queryable, gateway: GatewayDestination, legs_minor: readonly number[], amount_minor: number): Promise<Match> {
    invariant(legs_minor.length > 0 && legs_minor.reduce((sum, leg_minor) => sum + leg_minor, 0) === amount_minor, 'gateway legs sum to the order amount');
    const bank = await findBank(tx, gateway.bank_code);
    const receiver = { bank_code: gateway.bank_code, bank_name_th: bank?.name_th ?? gateway.bank_code, account_last4: gateway.account_last4, account_name_th: gateway.account_name_th };
    return {
      source: 'external_gateway',
      legs: legs_minor.map((leg_minor, index) => ({
        leg_ref: newId('deposit_leg'),
        sequence: index + 1,
        amount_minor: leg_minor,
        destination: 'gateway',
        withdrawal_id: null,
        withdrawal_leg_ref: null,
        receiver,
        payee: null,
      })),
    };
  }

  /** The withdrawal a sandbox chunk deposit names, with its merchant; null when it is not of the brand and environment. */
  private async targetOf(tx: Queryable, request: MatchRequest, withdrawal_id: string): Promise<{ withdrawal_id: string; merchant_id: string } | null> {
    invariant(!request.livemode, 'only sandbox scenario deposits name the withdrawal they fill');
    const [merchant_id] = await this.deps.withdrawals.merchantsOf(tx, request.white_label_id, [withdrawal_id]);
    return merchant_id === undefined || merchant_id === request.merchant_id ? null : { withdrawal_id, merchant_id };
  }

  /** Rules 2 and 3: the parts to reserve, or none. */
  private async plan(tx: Queryable, request: MatchRequest, max_legs: number): Promise<PlannedLeg[]> {
    const scope = { white_label_id: request.white_label_id, livemode: request.livemode, exclude_merchant_id: request.merchant_id };
    const carried = request.carried_reads ?? [];
    const [whole] = await this.deps.withdrawals.findMatchable(tx, { ...scope, amount_minor: request.amount_minor, limit: 1 }, carried);
    if (whole) return [{ withdrawal_id: whole.id, merchant_id: whole.merchant_id, amount_minor: request.amount_minor, beneficiary_id: whole.beneficiary_id }];
    if (max_legs <= 1) return [];
    // The first statement found no row, so it answered none of the carried reads: the second carries them again.
    const candidates = await this.deps.withdrawals.findMatchable(tx, { ...scope, amount_minor: 100, limit: max_legs, largest_first: true }, carried);
    const plan: PlannedLeg[] = [];
    let left = request.amount_minor;
    for (const candidate of candidates) {
      if (left === 0) break;
      const take = Math.min(left, wholeBaht(candidate.remaining_minor));
      if (take > 0) {
        plan.push({ withdrawal_id: candidate.id, merchant_id: candidate.merchant_id, amount_minor: take, beneficiary_id: candidate.beneficiary_id });
        left -= take;
      }
    }
    return left === 0 ? plan : [];
  }

  /**
   * Amounts below the asked one that would match at once now: the whole-baht remainders of the three
   * largest matchable withdrawals, at least `min_amount_minor`, largest first.
   */
  async suggestedAmounts(tx: Queryable, request: Pick<MatchRequest, 'white_label_id' | 'livemode' | 'merchant_id' | 'amount_minor'>, min_amount_minor: number): Promise<number[]> {
    const candidates = await this.deps.withdrawals.findMatchable(tx, {
      white_label_id: request.white_label_id,
      livemode: request.livemode,
      amount_minor: Math.max(min_amount_minor, 100),
      exclude_merchant_id: request.merchant_id,
      limit: 3,
      largest_first: true,
    });
    return [...new Set(candidates.map((candidate) => Math.min(wholeBaht(candidate.remaining_minor), request.amount_minor)))]
      .filter((amount) => amount >= min_amount_minor && amount < request.amount_minor)
      .sort((a, b) => b - a);
  }
}
