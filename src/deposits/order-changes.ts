import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError, fail, type Result } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import type { EventCause } from '../platform/cause.ts';
import { applyTransition } from '../events/transition.ts';
import type { JobSpec } from '../jobs/index.ts';
import type { Payee } from '../beneficiaries/service.ts';
import { claimUrl, SLIP_CLAIM_PERIOD_MS, slipUploadOf, slipUploadUrl, type SlipUpload } from '../slip-capability/capability.ts';
import * as repository from './repository.ts';
import { GATEWAY_ACCOUNT_PURPOSE, type DepositPolicy } from './policy.ts';
import type { DepositDependencies } from './dependencies.ts';
import { CLOSE_WINDOW_TASK, DEPOSIT_TRANSITIONS, EVENT_OF_TRIGGER, EXPIRE_DEPOSIT_TASK, LATE_SLIP_WINDOW_MS, MATCH_RETRY_INTERVAL_MS, MATCH_RETRY_TASK } from './transitions.ts';
import { depositView, promptPayPayload, type DepositView, type LegView } from './views.ts';
import type { DepositLegRow, DepositRow, ReviewObject, ReviewReason } from './types.ts';

/**
 * A change of one order, as `DepositChanges.transition` applies it: the row before (null when it is being
 * created) and after, the trigger of DEPOSIT_TRANSITIONS, the legs that change with it and the jobs that follow.
 */
export interface OrderChange {
  before: DepositRow | null;
  after: DepositRow;
  trigger: string;
  cause: EventCause;
  legs?: DepositLegRow[];
  jobs?: JobSpec[];
  liquidity?: DepositView['liquidity'];
  /**
   * Who the new legs pay and the brand's deposit policy, when the caller holds them already (a match): for
   * `deposit.matched`'s payment instructions, which follow the policy's `qr_payload` switch.
   */
  instructions?: { payees: Map<string, Payee>; policy: DepositPolicy };
  /** Shown in the event only, beside the order (e.g. the claim of a later transfer). */
  event_extra?: Record<string, unknown>;
}

/**
 * When the late-slip window of an expired or canceled order closes, while it has not closed yet (the close job's
 * work, `deposit.closed`); null for any other order.
 */
export function windowToClose(row: DepositRow): Date | null {
  if (row.status !== 'expired' && row.status !== 'canceled') return null;
  return row.window_closed_at === null ? row.late_slip_accepted_until : null;
}

/** The one deposit event that carries payment instructions (spec: "the only event carrying payment instructions"). */
const INSTRUCTIONS_EVENT_TRIGGER = 'matched';

/** The order as an event other than `deposit.matched` shows it: without its legs, whose receivers are payment instructions. */
function withoutInstructions(view: DepositView): Omit<DepositView, 'legs'> {
  const { legs: _legs, ...rest } = view;
  return rest;
}

/**
 * What every part of the deposit service shares: the one function that applies a transition (version,
 * `previous_attributes`, event and follow-up jobs in the caller's transaction), the order's views with
 * their payment instructions, its deadline jobs, the release of its legs, and its late-slip window.
 */
export class DepositChanges {
  constructor(private readonly deps: DepositDependencies) {}

  now(): Date {
    return this.deps.clock.now();
  }

  /** The end of an order's late-slip window: always 24 h after its transfer deadline (spec, `late_slip_accepted_until`). */
  lateSlipAcceptedUntil(row: DepositRow): Date {
    return new Date(row.expires_at.getTime() + LATE_SLIP_WINDOW_MS);
  }

  async view(db: Queryable, row: DepositRow, liquidity?: DepositView['liquidity']): Promise<DepositView> {
    const legs = await repository.listLegs(db, row.white_label_id, row.deposit_id);
    return depositView(row, legs, { now: this.now(), ...(liquidity ? { liquidity } : {}) });
  }

  /** The view with its `checkout_url`, placed after `expires_at` as the spec's field table has it. */
  async withCheckoutUrl(db: Queryable, view: DepositView, white_label_id: string): Promise<DepositView> {
    const checkout_url = await this.deps.checkout_links(db, { white_label_id, deposit_id: view.id });
    const { id, object, version, status, is_terminal, merchant_reference, end_user_ref, amount_minor, currency, created_at, expires_at, ...rest } = view;
    return { id, object, version, status, is_terminal, merchant_reference, end_user_ref, amount_minor, currency, created_at, expires_at, checkout_url, ...rest };
  }

  /**
   * Adds the QR image link to each live leg, and its QR payload unless the brand's deposit policy switched
   * `qr_payload` off ("A brand may switch this field off"): built from the payee's account on every read,
   * never stored. The switch is applied here, where every shown leg gets its instructions, so any caller that
   * shows a payload (an API answer, an event) follows it.
   */
  async withPaymentInstructions(
    db: Queryable,
    view: DepositView,
    white_label_id: string,
    known?: { rows: DepositLegRow[]; payees: Map<string, Payee>; policy: DepositPolicy },
  ): Promise<DepositView> {
    if (view.status !== 'awaiting_payment') return view;
    const legs: LegView[] = [];
    // The creating request knows its legs, their payees and the policy already; every other read looks them up.
    const rows = known?.rows ?? (await repository.listLegs(db, white_label_id, view.id));
    const policy = known?.policy ?? (await this.deps.policies.policyFor(db, white_label_id, view.livemode));
    for (const leg of view.legs) {
      const row = rows.find((candidate) => candidate.leg_ref === leg.leg_ref);
      const destination = row ? (known?.payees.get(row.leg_ref) ?? (await this.payeeOf(db, view, row, policy))) : null;
      if (!row || !destination || row.status !== 'reserved' || row.paid_minor > 0) {
        legs.push(leg);
        continue;
      }
      const qr_image_url = this.deps.qr_links.url(this.deps.public_base_url(), {
        white_label_id,
        deposit_id: view.id,
        leg_ref: leg.leg_ref,
        expires: Math.floor(row.expires_at.getTime() / 1000),
      });
      const qr_payload = policy.qr_payload_enabled ? { qr_payload: promptPayPayload(destination.bank_code, destination.account_number, leg.amount_minor) } : {};
      legs.push({ ...leg, ...qr_payload, qr_image_url });
    }
    return { ...view, legs };
  }

  /**
   * Who a leg pays, in full: the withdrawal's beneficiary, or the gateway account: the one a sandbox scenario
   * routed the order to (104.00; the leg names that account's bank and last digits), else the brand's.
   */
  async payeeOf(
    db: Queryable,
    order: { livemode: boolean; amount_minor: number },
    leg: DepositLegRow,
    known_policy?: DepositPolicy,
  ): Promise<{ bank_code: string; account_number: string; account_name_th: string } | null> {
    if (leg.destination === 'withdrawal') {
      invariant(leg.withdrawal_leg_ref, 'a withdrawal leg names its withdrawal leg');
      return this.deps.withdrawals.destinationOf(db, leg.white_label_id, leg.withdrawal_leg_ref);
    }
    const routed = this.deps.scenarios(order.livemode).gatewayRoute(order)?.account;
    if (routed && routed.bank_code === leg.receiver_bank_code && routed.account_number.endsWith(leg.receiver_account_last4)) return { ...routed };
    // The caller may have read the brand's policy already in this transaction.
    const policy = known_policy ?? (await this.deps.policies.policyFor(db, leg.white_label_id, order.livemode));
    if (!policy.gateway) return null;
    return {
      bank_code: policy.gateway.bank_code,
      account_number: this.deps.secretBox.open(policy.gateway.account_sealed, GATEWAY_ACCOUNT_PURPOSE),
      account_name_th: policy.gateway.account_name_th,
    };
  }

  /**
   * Applies a change of an order (DEPOSIT_TRANSITIONS decides whether its trigger is allowed): the row and its
   * changed legs, a new `version`, the event with `previous_attributes`, and the follow-up jobs, in `tx`.
   */
  async transition(
    tx: Queryable,
    input: OrderChange,
  ): Promise<DepositView> {
    const existingLegs = input.before ? await repository.listLegs(tx, input.after.white_label_id, input.after.deposit_id) : [];
    const legsAfter = [...existingLegs.map((leg) => input.legs?.find((changed) => changed.leg_ref === leg.leg_ref) ?? leg), ...(input.legs ?? []).filter((leg) => !existingLegs.some((old) => old.leg_ref === leg.leg_ref))];
    const now = this.now();
    const beforeLiquidity = await this.liquidityShownBefore(tx, input);
    const beforeView = input.before ? depositView(input.before, existingLegs, { now, ...(beforeLiquidity ? { liquidity: beforeLiquidity } : {}) }) : null;
    const afterView = depositView(input.after, legsAfter, { now, ...(input.liquidity ? { liquidity: input.liquidity } : {}) });
    const event = await this.eventObjects(tx, input, { before: beforeView, after: afterView, legs: legsAfter });
    const result = await applyTransition(tx, this.deps, {
      table: DEPOSIT_TRANSITIONS,
      trigger: input.trigger,
      before: beforeView,
      after: afterView,
      persist: async (db) => {
        if (input.before) {
          if (!(await repository.updateOrder(db, input.after, input.before.version))) return false;
        } else {
          // The reference was free when the creation read it; one taken since makes the queued insert
          // change nothing, and the flush throws this, rolling back everything the creation wrote.
          const reference = input.after.merchant_reference;
          await repository.insertOrder(db, input.after, () => new ApiError('merchant_reference_in_use', { details: { merchant_reference: reference } }));
        }
        // The legs move under the order's lock: their guards can only fail through a bug, which the flush reports.
        for (const leg of input.legs ?? []) {
          const old = existingLegs.find((candidate) => candidate.leg_ref === leg.leg_ref);
          if (!old) await repository.insertLeg(db, leg);
          else if (old.status !== leg.status) await repository.setLockedLegStatus(db, leg, old.status);
        }
        return true;
      },
      event: {
        type: EVENT_OF_TRIGGER[input.trigger] ?? 'deposit.updated',
        white_label_id: input.after.white_label_id,
        merchant_id: input.after.merchant_id,
        livemode: input.after.livemode,
        cause: input.cause,
        object: event.object,
        ...(event.before_object ? { before_object: event.before_object } : {}),
      },
      jobs: [...(input.jobs ?? []), ...this.closeJobs(input.after)],
    });
    if (!result.ok) throw new ApiError('merchant_reference_in_use', { details: { merchant_reference: input.after.merchant_reference } });
    return result.view;
  }

  /**
   * What the event of a change shows (spec, Envelope: `data.object` is the full object; Event types:
   * `deposit.matched` is "the only event carrying payment instructions"): `deposit.matched` shows the legs with
   * their receivers, `qr_payload` and `qr_image_url` as GET does; every other event leaves `legs` out (the field is
   * optional, and a leg without its receiver is not a leg the spec describes). `previous_attributes` compares the
   * two objects as the events show them.
   */
  private async eventObjects(
    db: Queryable,
    input: OrderChange,
    views: { before: DepositView | null; after: DepositView; legs: DepositLegRow[] },
  ): Promise<{ object: Record<string, unknown>; before_object: Record<string, unknown> | null }> {
    const extra = input.event_extra ?? {};
    if (input.trigger === INSTRUCTIONS_EVENT_TRIGGER) {
      const known = input.instructions ? { rows: views.legs, ...input.instructions } : undefined;
      const object = await this.withPaymentInstructions(db, views.after, input.after.white_label_id, known);
      return { object: { ...object, ...extra }, before_object: views.before ? { ...views.before, ...extra } : null };
    }
    return {
      object: { ...withoutInstructions(views.after), ...extra },
      before_object: views.before ? { ...withoutInstructions(views.before), ...extra } : null,
    };
  }

  /**
   * The `liquidity` a waiting order showed at its previous version, for the change that ends the wait: the
   * object is computed when it is shown (suggested amounts are read from the matching queue then), so the row
   * cannot give it back, and the matching queue must not be read again inside the match (it takes locks). The
   * previous version's event showed it; `previous_attributes` then names `liquidity` with that old value (spec:
   * "Only changed keys plus the old version").
   */
  private async liquidityShownBefore(db: Queryable, input: OrderChange): Promise<DepositView['liquidity'] | undefined> {
    if (!input.before || input.before.status !== 'awaiting_liquidity' || input.after.status === 'awaiting_liquidity') return undefined;
    const shown = await this.deps.events.objectKeyAtVersion(db, input.before.white_label_id, input.before.deposit_id, input.before.version, 'liquidity');
    return shown && typeof shown === 'object' ? (shown as DepositView['liquidity']) : undefined;
  }

  /** The next matching retry: in 10 seconds, or sooner when liquidity is known to arrive sooner, never after the wait ends. */
  retryJob(row: DepositRow, liquidity_arrives_at: Date | null): JobSpec {
    const runAt = new Date(Math.min(this.now().getTime() + MATCH_RETRY_INTERVAL_MS, row.expires_at.getTime(), liquidity_arrives_at?.getTime() ?? Number.POSITIVE_INFINITY));
    return {
      task: MATCH_RETRY_TASK,
      payload: { white_label_id: row.white_label_id, deposit_id: row.deposit_id },
      run_at: runAt,
      job_key: `${MATCH_RETRY_TASK}:${row.deposit_id}:${runAt.getTime()}`,
      white_label_id: row.white_label_id,
    };
  }

  /**
   * The close of the late-slip window of an order that is (again) expired or canceled with a window not yet
   * closed: every such change schedules it, and its key (the order and the window's end) makes a repeat a
   * no-op while it is pending. An order that leaves the state before the job runs is left alone by the job.
   */
  closeJobs(row: DepositRow): JobSpec[] {
    const closes_at = windowToClose(row);
    return closes_at === null ? [] : [this.closeJob(row, closes_at, 0)];
  }

  /** The close job at `run_at`; `attempt` counts the times it found a slip still waiting to be processed. */
  closeJob(row: DepositRow, run_at: Date, attempt: number): JobSpec {
    return {
      task: CLOSE_WINDOW_TASK,
      payload: { white_label_id: row.white_label_id, deposit_id: row.deposit_id, attempt },
      run_at,
      // The attempt is part of the key: a job that looks again must not collide with itself while it runs.
      job_key: `${CLOSE_WINDOW_TASK}:${row.deposit_id}:${run_at.getTime()}:${attempt}`,
      white_label_id: row.white_label_id,
    };
  }

  expireJob(row: DepositRow): JobSpec {
    return {
      task: EXPIRE_DEPOSIT_TASK,
      payload: { white_label_id: row.white_label_id, deposit_id: row.deposit_id },
      run_at: row.expires_at,
      job_key: `${EXPIRE_DEPOSIT_TASK}:${row.deposit_id}`,
      white_label_id: row.white_label_id,
    };
  }

  /** Releases every reserved leg of an order back to its withdrawal. */
  async releaseLegs(tx: Queryable, row: DepositRow, reason_code: string, cause: EventCause): Promise<DepositLegRow[]> {
    const legs = await repository.listLegs(tx, row.white_label_id, row.deposit_id);
    const changed: DepositLegRow[] = [];
    const now = this.now();
    for (const leg of legs) {
      if (leg.status !== 'reserved') continue;
      if (leg.destination === 'withdrawal') {
        invariant(leg.withdrawal_leg_ref, 'a withdrawal leg names its withdrawal leg');
        const released = await this.deps.withdrawals.releaseLeg(tx, { white_label_id: row.white_label_id, leg_ref: leg.withdrawal_leg_ref, reason_code, cause });
        invariant(released.ok, 'a reserved leg of an unpaid deposit can be released');
      }
      changed.push({ ...leg, status: 'released', updated_at: now });
    }
    return changed;
  }

  /** True when an expired or canceled order still takes a slip received at `at` (its late-slip window). */
  windowOpenAt(row: DepositRow, at: Date): boolean {
    return row.late_slip_accepted_until !== null && row.late_slip_accepted_until.getTime() > at.getTime();
  }

  lateSlipWindowClosed(row: DepositRow): Result<never> {
    return fail('late_slip_window_closed', {
      details: {
        deposit_id: row.deposit_id,
        late_slip_accepted_until: row.late_slip_accepted_until ? formatTimestamp(row.late_slip_accepted_until) : null,
        claim_url: claimUrl(this.deps.upload_base_url(), row.deposit_id),
      },
    });
  }

  /**
   * A new review object. `estimated_resolution_bucket` comes from the review desk's real state (the
   * queue ahead of this order and the desk's recent pace, see ReviewEstimate), asked in this transaction.
   */
  async newReview(db: Queryable, row: DepositRow, reasons: ReviewReason[], four_eyes_required: boolean): Promise<ReviewObject> {
    invariant(reasons.length > 0, 'a review has a reason');
    return {
      opened_at: formatTimestamp(this.now()),
      escalated: false,
      four_eyes_required,
      estimated_resolution_bucket: await this.deps.review_estimate(db, {
        white_label_id: row.white_label_id,
        livemode: row.livemode,
        four_eyes_required,
        escalated: false,
        count_in_review_up_to: (up_to) => repository.countInReviewUpTo(db, row.white_label_id, row.livemode, up_to),
      }),
      reasons,
    };
  }

  /**
   * A slip upload capability for an order with a destination: valid for the order's upload URL until a
   * week after its late-slip window closes (transfer deadline + 24 h + SLIP_CLAIM_PERIOD_MS; uploads in
   * that week answer 410 with a claim_url the same capability opens), bound to the reservation's hold time.
   */
  slipUpload(row: DepositRow, api_version: string): SlipUpload {
    const htu = slipUploadUrl(this.deps.upload_base_url(), row.deposit_id);
    const claims = {
      wl: row.white_label_id,
      livemode: row.livemode,
      dep: row.deposit_id,
      htu,
      rate_subject: this.deps.slip_tokens.rateSubject(row.merchant_id, row.end_user_ref),
      api_version,
      hold_until: Math.floor(row.expires_at.getTime() / 1000),
      iat: Math.floor(this.now().getTime() / 1000),
      exp: Math.floor((row.expires_at.getTime() + LATE_SLIP_WINDOW_MS + SLIP_CLAIM_PERIOD_MS) / 1000),
    };
    return slipUploadOf(this.deps.slip_tokens.mint(claims), claims);
  }
}
