import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { hmacSha256Hex } from '../platform/crypto.ts';
import { ApiError, fail, ok, type Result } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp, SECOND_MS } from '../platform/time.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { scheduleJob } from '../jobs/index.ts';
import { findBank, listBanks } from '../banks/service.ts';
import type { NoMatch } from '../matching/service.ts';
import type { Payee } from '../beneficiaries/service.ts';
import { planCommand, PlannedRead, type PlannedCommand, type ReadPart } from '../platform/read-part.ts';
import type { SlipUpload } from '../slip-capability/capability.ts';
import * as repository from './repository.ts';
import type { DepositPolicy } from './policy.ts';
import { maskName } from './masking.ts';
import type { CreateDepositInput, CreatedDeposit, DepositDependencies } from './dependencies.ts';
import type { DepositChanges } from './order-changes.ts';
import { MATCH_RETRY_INTERVAL_MS, notPayableOptions } from './transitions.ts';
import type { DepositView } from './views.ts';
import type { DepositAccount, DepositLegRow, DepositPolicyRow, DepositRow, DepositStatus } from './types.ts';

/**
 * Deposit orders up to the slip: creation with its request rules, peer-to-peer matching against the
 * brand's open withdrawals (through the withdrawal service's leg functions, never its tables), the
 * liquidity wait and its matching retries, and the slip capability an order with a destination gets.
 */

/** Open unpaid orders per end user: 2 per device with a complete `client`, else 1 (spec, Limits). */
export const OPEN_ORDER_CAP_WITH_CLIENT = 2;
export const OPEN_ORDER_CAP_WITHOUT_CLIENT = 1;
/** What `sender_bank_unavailable` suggests as a wait before trying the same bank again. */
export const SENDER_BANK_RETRY_HINT_SECONDS = 1800;
const DEFAULT_BANK_UNAVAILABLE_MESSAGE_TH = 'ธนาคารของท่านไม่พร้อมให้บริการชั่วคราว กรุณาเลือกบัญชีธนาคารอื่น';

/** The purpose under which a declared sender's account number is sealed. */
export const SENDER_ACCOUNT_PURPOSE = 'deposit.sender_account_number';

function validationError(path: string, reason: string, hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [hint ? { path, reason, hint } : { path, reason }] } });
}

export class DepositCreation {
  constructor(
    private readonly deps: DepositDependencies,
    private readonly changes: DepositChanges,
  ) {}

  private senderHmac(bank_code: string, account_number: string): string {
    return hmacSha256Hex(this.deps.account_lookup_key, `${bank_code}:${account_number}`);
  }

  /**
   * A merchant's creation as a planned command (src/platform/read-part.ts): its first step, the end user's lock
   * and the brand's policy, rides on the request's idempotency statement, and `create` is given what it answered.
   */
  plan(account: DepositAccount, input: CreateDepositInput, cause: EventCause): PlannedCommand<CreatedDeposit> {
    return planCommand([this.deps.policies.creationPart(account, input.end_user_ref)], (tx, [row]) => this.create(tx, account, input, cause, { prefetched_policy: { row } }));
  }

  /**
   * Creates a deposit: request rules, open-order caps, duplicate check, then matching. Matched at once:
   * `awaiting_payment` with legs (201). Nothing to match: `awaiting_liquidity` with a durable retry
   * every 10 seconds (202). Refusals throw the spec's error; nothing is written then.
   */
  async create(
    tx: Queryable,
    account: DepositAccount,
    input: CreateDepositInput,
    cause: EventCause,
    options: {
      /**
       * Sandbox scenario 107.00 THB: a deposit of the sandbox counterparty that pays a chunk of this one
       * withdrawal. It is matched to that order alone (refused with `withdrawal_state_conflict` when the
       * order cannot take it, never left waiting for other liquidity), and a chunk may be smaller than the
       * brand's minimum amount. Test mode only.
       */
      fill_withdrawal_id?: string;
      /** What the request's first statement answered for the policy's lock and read (`plan`), when it carried it. */
      prefetched_policy?: { row: DepositPolicyRow | null };
    } = {},
  ): Promise<CreatedDeposit> {
    const now = this.changes.now();
    // One end user's creations are serialised (so two concurrent requests count each other), and the
    // brand's policy is read, in one round trip.
    const policy = await this.deps.policies.policyForCreation(tx, account, input.end_user_ref, options.prefetched_policy);
    const chunk = options.fill_withdrawal_id !== undefined;
    invariant(!chunk || !account.livemode, 'only sandbox scenario deposits name the withdrawal they fill');
    const withinPolicy = chunk ? input.amount_minor > 0 : input.amount_minor >= policy.min_amount_minor && input.amount_minor <= policy.max_amount_minor;
    if (input.amount_minor % 100 !== 0 || !withinPolicy) {
      throw new ApiError('amount_not_supported', { details: { min_minor: policy.min_amount_minor, max_minor: policy.max_amount_minor } });
    }
    if (!input.sender && !input.sender_id) throw new ApiError('sender_required');
    if (input.sender && input.sender_id !== undefined) throw validationError('sender_id', 'not_allowed_with', 'send sender or sender_id, not both');
    // The declared sender: the one in the body, or the registered sender the id names (its account stays sealed).
    let sender: { bank_code: string; account_sealed: string; account_hmac: string; account_last4: string; account_name_th: string; account_name_en: string | null; sender_id: string | null };
    if (input.sender_id !== undefined) {
      const registered = await repository.findSender(tx, account, input.sender_id);
      if (!registered || registered.end_user_ref !== input.end_user_ref) throw validationError('sender_id', 'unknown_sender', 'an id from GET /v1/pay/senders for this end_user_ref');
      sender = {
        bank_code: registered.bank_code,
        account_sealed: registered.account_sealed,
        account_hmac: registered.account_hmac,
        account_last4: registered.account_last4,
        account_name_th: registered.name_th,
        account_name_en: registered.name_en,
        sender_id: registered.sender_id,
      };
    } else {
      const declared = input.sender;
      invariant(declared, 'a sender is present');
      sender = {
        bank_code: declared.bank_code,
        account_sealed: this.deps.secretBox.seal(declared.account_number, SENDER_ACCOUNT_PURPOSE),
        account_hmac: this.senderHmac(declared.bank_code, declared.account_number),
        account_last4: declared.account_number.slice(-4),
        account_name_th: declared.account_name_th,
        account_name_en: declared.account_name_en ?? null,
        sender_id: null,
      };
    }
    const bank = await findBank(tx, sender.bank_code);
    if (!bank) throw validationError('sender.bank_code', 'unknown_bank', 'a three-digit code from GET /v1/pay/banks');
    if (!bank.available || !bank.sides.includes('sender')) {
      const alternatives = (await listBanks(tx)).filter((candidate) => candidate.available && candidate.side.includes('sender') && candidate.bank_code !== bank.bank_code);
      throw new ApiError('sender_bank_unavailable', {
        details: {
          bank_code: bank.bank_code,
          alternative_banks: alternatives.map((candidate) => ({ bank_code: candidate.bank_code, name_th: candidate.name_th, name_en: candidate.name_en })),
          public_message_th: bank.message_th ?? DEFAULT_BANK_UNAVAILABLE_MESSAGE_TH,
          retry_after_hint_seconds: SENDER_BANK_RETRY_HINT_SECONDS,
        },
      });
    }
    // A sandbox scenario may fix the lifetime (104.00: about 4 minutes; the expiry scenarios: 60 s) and date the
    // deadline back (112.00: before the order, so its late-slip window is closed).
    const scenario = this.deps.scenarios(account.livemode);
    const expiresIn = scenario.lifetimeSeconds(input) ?? Math.min(input.expires_in_seconds ?? policy.default_expires_in_seconds, policy.max_expires_in_seconds);
    if (input.min_ttl_seconds !== undefined && input.min_ttl_seconds > expiresIn) {
      throw validationError('min_ttl_seconds', 'exceeds_order_lifetime', `at most ${expiresIn} seconds under this brand's policy`);
    }
    const hmac = sender.account_hmac;
    const client = input.client;
    const clientComplete = Boolean(client?.device_fingerprint && client.ip && client.user_agent);
    const deposit_id = newId('deposit');
    // The duplicate, open-order and reference checks ride on the matching queue's candidate statement, the
    // next statement this creation sends; they are decided right after matching, before this creation
    // writes anything of its own, and the reservations matching queued roll back with a refusal.
    const conflictsPart = repository.creationConflictsPart(account, {
      merchant_reference: input.merchant_reference,
      amount_minor: input.amount_minor,
      sender_account_hmac: hmac,
      end_user_ref: input.end_user_ref,
      device_fingerprint: clientComplete ? (client?.device_fingerprint ?? null) : null,
    });
    const conflictsRead = new PlannedRead(conflictsPart);
    const row: DepositRow = {
      ...account,
      deposit_id,
      version: 1,
      status: 'awaiting_liquidity',
      merchant_reference: input.merchant_reference,
      end_user_ref: input.end_user_ref,
      amount_minor: input.amount_minor,
      sender_bank_code: sender.bank_code,
      sender_account_sealed: sender.account_sealed,
      sender_account_hmac: hmac,
      sender_account_last4: sender.account_last4,
      sender_name_th: sender.account_name_th,
      sender_name_en: sender.account_name_en,
      sender_id: sender.sender_id,
      device_fingerprint: clientComplete ? (client?.device_fingerprint ?? null) : null,
      client: client ? (Object.fromEntries(Object.entries(client).filter(([, value]) => value !== undefined)) as Record<string, string>) : null,
      fill_preference: input.fill_preference ?? 'any',
      min_ttl_seconds: input.min_ttl_seconds ?? null,
      expires_in_seconds: expiresIn,
      return_url: input.return_url ?? null,
      metadata: input.metadata ?? null,
      liquidity_source: null,
      expires_at: now,
      wait_started_at: null,
      late_slip_accepted_until: null,
      expired_reason: null,
      canceled_by: null,
      cancel_reason_code: null,
      slip_received_at: null,
      slip_is_late: null,
      transferred_amount_minor: null,
      amount_received_minor: null,
      fee_total_minor: null,
      fee_breakdown: null,
      credited_amount_minor: null,
      partial: null,
      settled_via: null,
      balance_transaction_id: null,
      settled_at: null,
      clearing_available_at: null,
      overpayment: null,
      reversal: null,
      review: null,
      rejection: null,
      verification: null,
      slip_attempts: 0,
      window_closed_at: null,
      created_at: now,
      updated_at: now,
    };

    const reservation = await this.reserve(tx, row, policy, cause, options.fill_withdrawal_id, [conflictsRead.part]);
    const carriedConflicts = conflictsRead.take();
    const conflicts = carriedConflicts.found ? carriedConflicts.value : await repository.readCreationConflicts(tx, conflictsPart);
    if (conflicts.reference_taken) throw new ApiError('merchant_reference_in_use', { details: { merchant_reference: input.merchant_reference } });
    if (conflicts.duplicate_ids.length > 0) throw new ApiError('duplicate_open_deposit', { details: { open_deposit_ids: conflicts.duplicate_ids } });
    const cap = clientComplete ? OPEN_ORDER_CAP_WITH_CLIENT : OPEN_ORDER_CAP_WITHOUT_CLIENT;
    if (conflicts.open_ids.length >= cap) throw new ApiError('too_many_open_deposits', { details: { open_deposit_ids: conflicts.open_ids, limit: cap } });
    if (chunk && !('legs' in reservation)) throw new ApiError('withdrawal_state_conflict', { details: { reason: 'not_matchable' } });
    if ('legs' in reservation) {
      const matched: DepositRow = { ...row, status: 'awaiting_payment', liquidity_source: reservation.source, expires_at: this.deadlineOf(row, expiresIn, now) };
      const legs = reservation.legs.map((leg) => ({ ...leg, expires_at: matched.expires_at }));
      const view = await this.changes.transition(tx, { before: null, after: matched, trigger: 'create', cause, legs, jobs: [this.changes.expireJob(matched), ...(chunk ? [] : this.deps.scenarios(matched.livemode).afterCreation(matched))] });
      const withInstructions = await this.changes.withPaymentInstructions(tx, view, account.white_label_id, { rows: legs, payees: reservation.payees, policy });
      return {
        deposit: await this.changes.withCheckoutUrl(tx, withInstructions, account.white_label_id),
        slip_upload: this.changes.slipUpload(matched, cause.api_version),
        matched: true,
      };
    }
    const waiting: DepositRow = { ...row, wait_started_at: now, expires_at: new Date(now.getTime() + policy.liquidity_wait_seconds * SECOND_MS) };
    const liquidity = await this.liquidityInfo(tx, waiting, policy);
    const view = await this.changes.transition(tx, { before: null, after: waiting, trigger: 'create', cause, jobs: [this.changes.retryJob(waiting, reservation.wait_until), ...this.deps.scenarios(waiting.livemode).afterCreation(waiting)], liquidity });
    return { deposit: await this.changes.withCheckoutUrl(tx, view, account.white_label_id), matched: false, retry_after_seconds: MATCH_RETRY_INTERVAL_MS / SECOND_MS };
  }

  /**
   * POST /v1/pay/deposits/{id}/slip-token: a capability for an order that has a destination (awaiting
   * payment, or closed inside its late-slip window). A waiting order has none yet: `deposit_not_payable`.
   */
  async issueSlipToken(db: Queryable, account: DepositAccount, deposit_id: string, api_version: string): Promise<Result<SlipUpload> | null> {
    const row = await repository.findOrder(db, account, deposit_id);
    if (!row) return null;
    if (row.status !== 'awaiting_payment' && !((row.status === 'expired' || row.status === 'canceled') && this.changes.windowOpenAt(row, this.changes.now()))) {
      return fail('deposit_not_payable', notPayableOptions(row.status));
    }
    return ok(this.changes.slipUpload(row, api_version));
  }

  /** Matches the order (see src/matching/service.ts) and turns the reserved parts into its legs. */
  private async reserve(
    tx: Queryable,
    row: DepositRow,
    policy: DepositPolicy,
    cause: EventCause,
    fill_withdrawal_id?: string,
    /** Reads of the caller's that the matching queue's candidate statement carries (`MatchRequest.carried_reads`). */
    carried_reads: readonly ReadPart<unknown>[] = [],
  ): Promise<{ legs: DepositLegRow[]; source: 'internal' | 'external_gateway'; payees: Map<string, Payee> } | NoMatch> {
    // A sandbox scenario may give the order a gateway route of its own (104.00: two legs to the sandbox bank's
    // gateway account); the brand's policy, and so every other order, keeps its own gateway or none.
    const route = this.deps.scenarios(row.livemode).gatewayRoute(row);
    const gateway = route ? { bank_code: route.account.bank_code, account_last4: route.account.account_number.slice(-4), account_name_th: route.account.account_name_th } : policy.gateway;
    const match = await this.deps.matching.match(
      tx,
      {
        white_label_id: row.white_label_id,
        livemode: row.livemode,
        merchant_id: row.merchant_id,
        deposit_id: row.deposit_id,
        amount_minor: row.amount_minor,
        fill_preference: row.fill_preference,
        order_created_at: row.created_at,
        fill_withdrawal_id,
        gateway_legs_minor: route?.legs_minor,
        carried_reads,
      },
      { max_legs: policy.max_legs, gateway },
      cause,
    );
    if (!('legs' in match)) return match;
    const now = this.changes.now();
    const payees = new Map<string, Payee>();
    for (const leg of match.legs) if (leg.payee) payees.set(leg.leg_ref, leg.payee);
    return {
      source: match.source,
      payees,
      legs: match.legs.map((leg) => ({
        white_label_id: row.white_label_id,
        deposit_id: row.deposit_id,
        leg_ref: leg.leg_ref,
        sequence: leg.sequence,
        amount_minor: leg.amount_minor,
        expires_at: now,
        status: 'reserved',
        destination: leg.destination,
        withdrawal_id: leg.withdrawal_id,
        withdrawal_leg_ref: leg.withdrawal_leg_ref,
        receiver_bank_code: leg.receiver.bank_code,
        receiver_bank_name_th: leg.receiver.bank_name_th,
        receiver_account_last4: leg.receiver.account_last4,
        receiver_name_masked: maskName(leg.receiver.account_name_th),
        created_at: now,
        updated_at: now,
        paid_minor: 0,
      })),
    };
  }

  /** What a waiting order is told: when it started, how often matching runs, which amounts would match now. */
  async liquidityInfo(tx: Queryable, row: DepositRow, policy: DepositPolicy): Promise<NonNullable<DepositView['liquidity']>> {
    const suggestions = await this.deps.matching.suggestedAmounts(tx, row, policy.min_amount_minor);
    const waitLeft = Math.max(0, row.expires_at.getTime() - this.changes.now().getTime());
    return {
      wait_started_at: formatTimestamp(row.wait_started_at ?? row.created_at),
      // No history to estimate from yet: three retry rounds, bounded by the wait that is left.
      estimated_wait_ms: Math.min(3 * MATCH_RETRY_INTERVAL_MS, waitLeft),
      retry_interval_ms: MATCH_RETRY_INTERVAL_MS,
      suggested_amounts_minor: suggestions,
    };
  }

  /**
   * The transfer deadline of an order matched at `now`, `lifetime_seconds` later; a sandbox scenario may date it
   * back (112.00: before the order, so that its late-slip window is closed already).
   */
  private deadlineOf(row: DepositRow, lifetime_seconds: number, now: Date): Date {
    return new Date(now.getTime() + (lifetime_seconds - this.deps.scenarios(row.livemode).deadlineDatedBackSeconds(row)) * SECOND_MS);
  }

  /**
   * The matching retry job of a waiting order: matched → `awaiting_payment` with legs and a new
   * `expires_at` (`deposit.matched`); the wait over → canceled `no_liquidity_available` with no
   * late-slip window (there was never a destination); otherwise the next retry in 10 seconds.
   */
  async retryMatching(tx: Queryable, white_label_id: string, deposit_id: string): Promise<DepositStatus | null> {
    const row = await repository.lockOrderInBrand(tx, white_label_id, deposit_id);
    if (!row || row.status !== 'awaiting_liquidity') return null;
    const now = this.changes.now();
    if (row.expires_at.getTime() <= now.getTime()) {
      await this.changes.transition(tx, {
        before: row,
        after: { ...row, version: row.version + 1, status: 'canceled', canceled_by: 'system', cancel_reason_code: 'no_liquidity_available', late_slip_accepted_until: null, updated_at: now },
        trigger: 'liquidity_timeout',
        cause: SYSTEM_CAUSE,
      });
      return 'canceled';
    }
    const policy = await this.deps.policies.policyFor(tx, row.white_label_id, row.livemode);
    const reservation = await this.reserve(tx, row, policy, SYSTEM_CAUSE);
    if (!('legs' in reservation)) {
      await scheduleJob(tx, this.deps.clock, this.changes.retryJob(row, reservation.wait_until));
      return 'awaiting_liquidity';
    }
    const legs = reservation.legs;
    const matched: DepositRow = {
      ...row,
      version: row.version + 1,
      status: 'awaiting_payment',
      liquidity_source: reservation.source,
      expires_at: this.deadlineOf(row, row.expires_in_seconds, now),
      updated_at: now,
    };
    await this.changes.transition(tx, {
      before: row,
      after: matched,
      trigger: 'matched',
      cause: SYSTEM_CAUSE,
      legs: legs.map((leg) => ({ ...leg, expires_at: matched.expires_at })),
      instructions: { payees: reservation.payees, policy },
      jobs: [this.changes.expireJob(matched)],
    });
    return 'awaiting_payment';
  }
}
