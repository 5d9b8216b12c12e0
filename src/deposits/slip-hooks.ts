import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { fail, ok, type Result } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import { CURRENT_API_VERSION, type EventCause } from '../platform/cause.ts';
import type { Payee } from '../beneficiaries/service.ts';
import type { WalletLocksAnswer } from '../ledger/service.ts';
import type { FillReads } from '../withdrawals/legs.ts';
import { PlannedRead, type ReadPart } from '../platform/read-part.ts';
import type { SlipUpload } from '../slip-capability/capability.ts';
import * as repository from './repository.ts';
import type { DepositPolicy } from './policy.ts';
import type { DepositDependencies, PaymentParties, SettlementReadAhead } from './dependencies.ts';
import type { DepositChanges } from './order-changes.ts';
import type { CarriedOrderLock, DepositLocks } from './order-locks.ts';
import { SENDER_ACCOUNT_PURPOSE } from './creation.ts';
import { CANCELED_ORDER_SLIP_REASON, MAX_SLIP_UPLOADS, notPayableOptions } from './transitions.ts';
import { claimView, type DepositView } from './views.ts';
import { lateSlipClaimKey } from './claim-keys.ts';
import type { ClaimOpener, ClaimView, DepositLegRow, DepositRow, LateSlipClaimEvidence } from './types.ts';

/** What a planned read answered, or null when no statement answered it. */
function answerOf<Value>(read: PlannedRead<Value>): Value | null {
  const taken = read.take();
  return taken.found ? taken.value : null;
}

/**
 * The uploads an order has had, as its claims learn them: the slip intake refuses a fourth, the count never goes
 * back (a claim that read fewer receipts than an earlier one changes nothing), and it counts at least this claim.
 */
function uploadsSoFar(row: DepositRow, uploads: number | undefined): number {
  return Math.min(MAX_SLIP_UPLOADS, Math.max(row.slip_attempts + 1, uploads ?? 0));
}

/**
 * What the slip intake and the slip pipeline ask of an order: whether it takes a slip, its receipt and
 * attachment to a review, who pays and who is paid (locked as a settlement locks them), and the claim of a
 * slip that came after the late-slip window.
 */
export class DepositSlipHooks {
  constructor(
    private readonly deps: DepositDependencies,
    private readonly changes: DepositChanges,
    private readonly locks: DepositLocks,
  ) {}

  /**
   * Whether an order takes a slip uploaded at `at` (the slip intake asks before storing anything). The
   * order is locked for the rest of the intake's transaction, so that uploads to one order are counted
   * one after another and a cancel or a transition waits for the upload (the order row is the first
   * lock of every deposit path, see docs/decisions/locks.md). Null when the order is not in this
   * brand and environment. An order in review or settled takes a slip too: it is attached to the review,
   * or verified as a transfer after settlement.
   */
  async admitSlip(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; livemode: boolean; hold_until_seconds: number; at: Date },
  ): Promise<Result<{ merchant_id: string }> | null> {
    const row = await repository.lockOrderInBrand(tx, input.white_label_id, input.deposit_id);
    if (!row || row.livemode !== input.livemode) return null;
    // The capability is bound to the reservation it was issued for (its `hold_until`, the order's deadline).
    if (Math.floor(row.expires_at.getTime() / 1000) !== input.hold_until_seconds) return fail('slip_token_invalid');
    const admitted = ok({ merchant_id: row.merchant_id });
    switch (row.status) {
      case 'awaiting_payment':
      case 'slip_processing':
      case 'under_review':
      case 'settled':
        return admitted;
      case 'expired':
      case 'canceled':
        return this.changes.windowOpenAt(row, input.at) ? admitted : this.changes.lateSlipWindowClosed(row);
      default:
        return fail('deposit_not_payable', notPayableOptions(row.status));
    }
  }

  /**
   * The slip consumer claimed a receipt (at most 3 per order), received at `received_at`:
   * `awaiting_payment` → `slip_processing`; `expired` inside its late-slip window → `slip_processing`,
   * with `slip.is_late` when the slip came after the deadline; `canceled` inside its window →
   * `under_review` with CANCELED_ORDER_SLIP, every time; after the window (or with none) →
   * `late_slip_window_closed`. The window is judged at `received_at`, when the slip became durable, so a
   * consumer that runs late (a retry, a queue backlog) never turns an accepted slip into a closed one.
   * `uploads` is how many slips the order has had so far (absent: this one is counted): `slip_attempts`, and so
   * `attempts_left`, counts uploads (spec: "A maximum of 3 slip uploads is accepted per order"), not the slips
   * processed.
   */
  async markSlipReceived(tx: Queryable, input: { white_label_id: string; deposit_id: string; received_at: Date; uploads?: number; cause: EventCause }): Promise<Result<DepositView>> {
    // Every branch below changes the order alone and writes the depositor's event only.
    const row = await this.locks.lockForOwnChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status === 'slip_processing') return ok(await this.changes.view(tx, row));
    const closed = row.status === 'expired' || row.status === 'canceled';
    if (closed && !this.changes.windowOpenAt(row, input.received_at)) return this.changes.lateSlipWindowClosed(row);
    if (row.status !== 'awaiting_payment' && !closed) return fail('deposit_state_conflict', { details: { status: row.status } });
    const late = row.status === 'canceled' || (row.status === 'expired' && input.received_at.getTime() >= row.expires_at.getTime());
    const received = { ...row, version: row.version + 1, slip_received_at: input.received_at, slip_is_late: late, slip_attempts: uploadsSoFar(row, input.uploads), updated_at: this.changes.now() };
    if (row.status === 'canceled') {
      return ok(await this.changes.transition(tx, { before: row, after: { ...received, status: 'under_review', review: await this.changes.newReview(tx, row, [CANCELED_ORDER_SLIP_REASON], false) }, trigger: 'review', cause: input.cause }));
    }
    return ok(await this.changes.transition(tx, { before: row, after: { ...received, status: 'slip_processing' }, trigger: 'slip_received', cause: input.cause }));
  }

  /**
   * A slip that arrived while the order is in review is attached to the review (spec: "Evidence
   * attached": `version` moves, status and review clock do not; `deposit.review_updated`).
   */
  async attachSlipToReview(tx: Queryable, input: { white_label_id: string; deposit_id: string; received_at: Date; uploads?: number; cause: EventCause }): Promise<Result<DepositView>> {
    const row = await this.locks.lockForOwnChange(tx, input.white_label_id, input.deposit_id);
    if (!row) return fail('resource_not_found');
    if (row.status !== 'under_review') return fail('deposit_state_conflict', { details: { status: row.status } });
    const after: DepositRow = {
      ...row,
      version: row.version + 1,
      slip_received_at: input.received_at,
      slip_attempts: uploadsSoFar(row, input.uploads),
      updated_at: this.changes.now(),
    };
    return ok(await this.changes.transition(tx, { before: row, after, trigger: 'slip_attached', cause: input.cause }));
  }

  /**
   * The order a slip belongs to, locked, for the slip consumer's claim: its status decides the claim's
   * transition, and its tenant must be the one the capability named. Null when there is no such order.
   * `carried` is the order's lock as the head receipt's statement carried it (`orderLockRead`, `settlementLockRead`).
   */
  async lockForSlip(tx: Queryable, white_label_id: string, deposit_id: string, carried: PlannedRead<CarriedOrderLock>): Promise<Pick<DepositRow, 'status' | 'merchant_id' | 'livemode'> | null> {
    return this.locks.lockOrderRow(tx, white_label_id, deposit_id, carried);
  }

  /**
   * Who pays and who is paid for an order, in full: its declared sender (the sealed number opened) and
   * each leg's receiver. For the sandbox bank and its scenarios; never returned by the API, never logged.
   * Null when there is no such order.
   */
  async paymentParties(db: Queryable, white_label_id: string, deposit_id: string): Promise<PaymentParties | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    const legs: PaymentParties['legs'] = [];
    for (const leg of await repository.listLegs(db, white_label_id, deposit_id)) {
      legs.push({ ...leg, receiver: await this.changes.payeeOf(db, row, leg) });
    }
    const policy = await this.deps.policies.policyFor(db, white_label_id, row.livemode);
    return this.partiesOf(row, legs, policy);
  }

  /**
   * `paymentParties` for the slip pipeline's checks, with the order locked as `lockForChange` locks it. The
   * reads that follow the locks take none, so they ride on the feed-lock statement instead of a round trip each
   * (src/platform/read-part.ts): the brand's policy and each withdrawal leg's payee, which the parties need, the
   * caller's `carried` reads, and what settling the order reads next, planned here: the deposit fee schedule
   * (answered as `read_ahead`, for `settle`), the reserved withdrawal legs with their orders' next fill numbers
   * and the wallets a settlement posts on (handed to their modules, which keep them as locked rows). A slip that
   * gets this far usually settles the order in the same transaction.
   */
  async lockPaymentParties(tx: Queryable, white_label_id: string, deposit_id: string, carried: readonly ReadPart<unknown>[]): Promise<{ parties: PaymentParties; read_ahead: SettlementReadAhead } | null> {
    const row = await this.locks.lockOrderRow(tx, white_label_id, deposit_id);
    if (!row) return null;
    const scope = { white_label_id, livemode: row.livemode };
    const feeRead = new PlannedRead(this.deps.fees.schedulePart({ ...scope, merchant_id: row.merchant_id, channel: 'deposit' }));
    const policyRead = new PlannedRead(this.deps.policies.policyPart(white_label_id, row.livemode));
    let destinations: (PlannedRead<Payee | null | undefined> | null)[] = [];
    let fillReads: FillReads | null = null;
    let walletsRead: PlannedRead<WalletLocksAnswer> | null = null;
    let listed: DepositLegRow[] = [];
    await this.locks.lockWithdrawalsAndFeedsOf(tx, row, (legs) => {
      listed = legs;
      destinations = legs.map((leg) => {
        const part = leg.destination === 'withdrawal' && leg.withdrawal_id && leg.withdrawal_leg_ref ? this.deps.withdrawals.destinationPart(tx, white_label_id, leg.withdrawal_id, leg.withdrawal_leg_ref) : null;
        return part === null ? null : new PlannedRead(part);
      });
      const reserved = legs.flatMap((leg) => (leg.status === 'reserved' && leg.withdrawal_id && leg.withdrawal_leg_ref ? [{ withdrawal_id: leg.withdrawal_id, leg_ref: leg.withdrawal_leg_ref }] : []));
      fillReads = this.deps.withdrawals.fillReads(tx, white_label_id, reserved);
      // The wallets a settlement posts on (the depositor's credit, each reserved leg's fill), locked by this
      // statement once it holds their merchants' feeds. Their keys are posted only under this order's lock and
      // those withdrawals' locks, which earlier statements of this transaction took (`walletsLockPart`).
      walletsRead = new PlannedRead(
        this.deps.ledger.walletsLockPart(scope, [{ merchant_id: row.merchant_id, movement_keys: this.deps.ledger.depositCreditKeys(deposit_id) }, ...this.deps.withdrawals.fillWallets(tx, white_label_id, reserved)]),
      );
      return [policyRead.part, feeRead.part, walletsRead.part, ...fillReads.parts, ...carried, ...destinations.flatMap((read) => (read ? [read.part] : []))];
    });
    return { parties: await this.partiesFromReads(tx, row, listed, { policyRead, destinations, fillReads, walletsRead }), read_ahead: { deposit_fee_schedule: answerOf(feeRead) } };
  }

  /** The parties from what the feed-lock statement answered; the wallets and fills it locked go to their modules. */
  private async partiesFromReads(
    tx: Queryable,
    row: DepositRow,
    listed: readonly DepositLegRow[],
    reads: { policyRead: PlannedRead<DepositPolicy>; destinations: readonly (PlannedRead<Payee | null | undefined> | null)[]; fillReads: FillReads | null; walletsRead: PlannedRead<WalletLocksAnswer> | null },
  ): Promise<PaymentParties> {
    const policy = answerOf(reads.policyRead);
    invariant(policy !== null && reads.fillReads !== null && reads.walletsRead !== null, 'the feed-lock statement carried the policy, the fills and the wallets');
    const wallets = answerOf(reads.walletsRead);
    invariant(wallets !== null, 'the feed-lock statement answered the wallets');
    this.deps.ledger.keepLockedWallets(tx, wallets);
    this.deps.withdrawals.keepFillReads(tx, reads.fillReads);
    const legs: PaymentParties['legs'] = [];
    for (const [index, leg] of listed.entries()) {
      const payee = reads.destinations[index]?.take();
      // A leg whose payee was not carried (a gateway leg, or one not of the order it names) is read as before.
      legs.push({ ...leg, receiver: payee?.found && payee.value !== undefined ? payee.value : await this.changes.payeeOf(tx, row, leg, policy) });
    }
    return this.partiesOf(row, legs, policy);
  }

  /**
   * Parties read with the order locked (`lockPaymentParties`), with the order as the transaction has
   * changed it since: the slip consumer receives a slip (a transition of the order alone) after reading them.
   * The legs and the sender do not change in such a transition, and the order is the lock's copy, so this
   * costs no round trip.
   */
  async partiesAfterOwnChange(tx: Queryable, parties: PaymentParties): Promise<PaymentParties> {
    invariant(repository.holdsOrder(tx, parties.order.white_label_id, parties.order.deposit_id), 'parties are refreshed only for an order the transaction holds');
    const order = await repository.lockOrderInBrand(tx, parties.order.white_label_id, parties.order.deposit_id);
    invariant(order !== null && order.sender_id === parties.order.sender_id, 'the order is still there, with its sender');
    return { ...parties, order };
  }

  private partiesOf(row: DepositRow, legs: PaymentParties['legs'], policy: DepositPolicy): PaymentParties {
    return {
      order: row,
      sender: {
        bank_code: row.sender_bank_code,
        account_number: this.deps.secretBox.open(row.sender_account_sealed, SENDER_ACCOUNT_PURPOSE),
        name_th: row.sender_name_th,
        name_en: row.sender_name_en,
        registered: row.sender_id !== null,
      },
      legs,
      four_eyes_min_amount_minor: policy.four_eyes_min_amount_minor,
      policy_hold_min_amount_minor: policy.policy_hold_min_amount_minor,
    };
  }

  /**
   * A claim for a slip that came after the late-slip window: opened at `claim_url` by the end user (the
   * order's capability) or by a back-office operator for them (POST /v1/bo/claims). Only for an expired or
   * canceled order whose window has closed, or that never had one, where an upload answers 410; inside the
   * window `late_slip_window_open` says to upload the slip instead. The same transfer (its `trans_ref`),
   * or the same evidence when there is no reference, opens one claim: a repeat returns it with `created`
   * false. Null when the order is not in this brand (and environment, when one is given).
   */
  async openLateSlipClaim(
    tx: Queryable,
    input: { white_label_id: string; deposit_id: string; livemode: boolean | null; evidence: LateSlipClaimEvidence; opened_by: ClaimOpener; cause: EventCause },
  ): Promise<Result<{ claim: ClaimView; created: boolean }> | null> {
    const row = await repository.lockOrderInBrand(tx, input.white_label_id, input.deposit_id);
    if (!row || (input.livemode !== null && row.livemode !== input.livemode)) return null;
    const now = this.changes.now();
    if (row.status !== 'expired' && row.status !== 'canceled') return fail('deposit_state_conflict', { details: { status: row.status } });
    if (this.changes.windowOpenAt(row, now)) {
      invariant(row.late_slip_accepted_until, 'an open window has an end');
      return fail('late_slip_window_open', {
        details: { deposit_id: row.deposit_id, status: row.status, late_slip_accepted_until: formatTimestamp(row.late_slip_accepted_until) },
      });
    }
    const opened = await this.deps.claims.open(tx, {
      white_label_id: row.white_label_id,
      merchant_id: row.merchant_id,
      livemode: row.livemode,
      deposit_id: row.deposit_id,
      cause: 'late_slip',
      amount_minor: input.evidence.amount_minor ?? null,
      slip_received_at: now,
      dedupe_key: lateSlipClaimKey(row.deposit_id, input.evidence),
      evidence: input.evidence,
      opened_by: input.opened_by,
      cause_of_event: input.cause,
    });
    return ok({ claim: claimView(opened.claim), created: opened.created });
  }

  /**
   * The sandbox payer's copy of the order's upload capability, the one its end user got with the order:
   * the sandbox scenarios upload their slips with it through the ordinary intake. Test mode only; null
   * for an order that never had a destination.
   */
  async sandboxPayerCapability(db: Queryable, white_label_id: string, deposit_id: string): Promise<SlipUpload | null> {
    const row = await repository.findOrderInBrand(db, white_label_id, deposit_id);
    if (!row) return null;
    invariant(!row.livemode, 'only the sandbox pays on behalf of an end user');
    if ((await repository.listLegs(db, white_label_id, deposit_id)).length === 0) return null;
    return this.changes.slipUpload(row, CURRENT_API_VERSION);
  }
}
