import crypto from 'node:crypto';
import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import { invariant } from '../platform/assert.ts';
import { ApiError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { SECOND_MS } from '../platform/time.ts';
import { SYSTEM_CAUSE } from '../platform/cause.ts';
import { scheduleJob, type JobHandler } from '../jobs/index.ts';
import type { DepositService } from '../deposits/service.ts';
import type { DepositRow } from '../deposits/types.ts';
import type { WithdrawalService, WithdrawalView } from '../withdrawals/service.ts';
import type { SlipsService } from '../slips/service.ts';
import type { SlipTokenSigner } from '../slip-capability/capability.ts';
import { parseJsonEvidence } from '../slips/evidence-body.ts';
import type { ReviewService, Reviewer } from '../review/service.ts';
import type { EventsService } from '../events/service.ts';
import type { SandboxBank, SandboxTransferInput } from './bank.ts';
import type { SandboxLiquidity } from './liquidity.ts';
import {
  SCENARIO_DUPLICATE_DELAY_MS,
  SCENARIO_FILL_CHUNK_DELAY_MS,
  SCENARIO_LATE_SLIP_DELAY_MS,
  SCENARIO_LATE_TRANSFER_AFTER_DEADLINE_MS,
  SCENARIO_OVERPAID_TRANSFER_MINOR,
  SCENARIO_PAYMENT_DELAY_MS,
  SCENARIO_REVERSAL_DELAY_MS,
  SCENARIO_REVIEW_APPROVAL_DELAY_MS,
  SCENARIO_SHORT_TRANSFER_MINOR,
  SCENARIO_STEP_TASK,
  sandboxFillOf,
  sandboxScenarioOf,
  scenarioChunkAmount,
  scenarioStepJob,
  type ScenarioStep,
} from './scenario-table.ts';

/**
 * The sandbox scenarios' automatic behaviours (spec, Sandbox scenarios): what an end user, a bank, the
 * review desk or an operator would do to a test-mode order of a scenario amount, done by the service
 * on a schedule of durable jobs (one `sandbox.scenario_step` job per step, so every timing survives a
 * restart and follows a test clock). Every payment is a transfer of the sandbox bank whose slip image
 * goes through the ordinary intake with the order's own capability, then through the same reading,
 * bank check and decision as a live slip: the scenarios exercise the live pipeline, not a shortcut.
 *
 * A step acts only when the order is where the scenario left it. When the merchant or the end user got
 * there first (their own upload, a cancel), the scenario stops: the order then behaves like any other.
 * A step whose precondition is not met yet (verification still running) looks again a little later,
 * at most STEP_WAIT_LIMIT times.
 */

/** How often a step looks again while the order is not yet where it acts (verification running). */
const STEP_WAIT_MS = 5 * SECOND_MS;
/** How many times a step looks again before the scenario gives up on that order. */
const STEP_WAIT_LIMIT = 24;
/** The name the scenarios' payer gives instead of the declared one (101.00 THB, SENDER_NAME_MISMATCH). */
const OTHER_SENDER_NAME_TH = 'ประภาพร มีสุข';
const OTHER_SENDER_NAME_TH_FALLBACK = 'สุนทร ทองดี';

/**
 * The sandbox's own review desk (102.00 THB approves its late slip) and operator (103.00 THB reverses).
 * It is the service acting as itself (a `system` actor), not a back-office credential, so there is no
 * person behind it: its review decisions carry a null staff_id, and it counts as one approver.
 */
const SANDBOX_STAFF: Omit<Reviewer, 'request_id'> = {
  actor: { actor_type: 'system', actor_id: 'sandbox_scenario', request_id: null },
  reviewer_id: 'sandbox_scenario',
  idempotency_key: null,
};

export interface ScenarioStepPayload {
  white_label_id: string;
  order_id: string;
  step: ScenarioStep;
  /** Times the step has already looked and found the order not ready. */
  waited?: number;
  /** 107.00: the counterparty's deposit that pays the chunk in flight, made by the previous step. */
  chunk_deposit_id?: string;
}

export interface SandboxScenarioDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  deposits: DepositService;
  withdrawals: WithdrawalService;
  slips: SlipsService;
  slipTokens: SlipTokenSigner;
  review: ReviewService;
  sandboxBank: SandboxBank;
  /** 107.00 THB: the brand's sandbox counterparty, whose deposits fill the merchant's withdrawal. */
  liquidity: SandboxLiquidity;
  /** 110.00 THB: the counterparty's `withdrawal.disputed` is delivered to the merchant running the scenario too. */
  events: EventsService;
  /** 114.00 THB: rotates the sandbox signing keys and tells the merchant (the webhooks module; wired late). */
  rotateSandboxSigningKey?: (input: { white_label_id: string; merchant_id: string; request_id: string; scenario_run_id: string }) => Promise<void>;
}

type StepOutcome = 'done' | 'wait' | 'stopped';

/**
 * 107.00 THB: who pays the counterparty's chunk deposits, an account of the sandbox bank. Its number is
 * drawn from the withdrawal and the chunk, so that two chunks in flight at once (two merchants' orders)
 * are never the same open order of the counterparty (`duplicate_open_deposit`).
 */
function chunkPayer(withdrawal_id: string, chunk_number: number) {
  const digest = crypto.createHash('sha256').update(`${withdrawal_id}:${chunk_number}`).digest();
  const account_number = (digest.readBigUInt64BE(0) % 10_000_000_000n).toString().padStart(10, '0');
  return { bank_code: '002', account_number, account_name_th: 'กนกพร ศรีสุข', account_name_en: 'Kanokporn Srisuk' };
}

export class SandboxScenarios {
  constructor(private readonly deps: SandboxScenarioDependencies) {}

  jobHandlers(): Record<string, JobHandler> {
    return {
      [SCENARIO_STEP_TASK]: async (job) => {
        const payload = job.payload as unknown as ScenarioStepPayload;
        await this.runStep(payload);
      },
    };
  }

  /** Runs one step; a step that must wait is enqueued again, bounded by STEP_WAIT_LIMIT. */
  async runStep(payload: ScenarioStepPayload): Promise<StepOutcome> {
    if (payload.step === 'fill_chunk') return this.runFillStep(payload);
    const found = await this.deps.deposits.viewInBrand(this.deps.database, payload.white_label_id, payload.order_id);
    if (!found) return 'stopped';
    const order = found.row;
    const scenario = sandboxScenarioOf('deposit', order.livemode, order.amount_minor);
    invariant(scenario !== null, 'a scenario step belongs to a test-mode order of a scenario amount');
    const outcome = await this.step(payload.step, order);
    if (outcome === 'wait') {
      const waited = (payload.waited ?? 0) + 1;
      if (waited > STEP_WAIT_LIMIT) {
        this.deps.logger.warn({ deposit_id: order.deposit_id, step: payload.step, status: order.status }, 'sandbox scenario gave up waiting for the order');
        return 'stopped';
      }
      await this.schedule(order, payload.step, new Date(this.deps.clock.now().getTime() + STEP_WAIT_MS), waited);
    }
    if (outcome === 'stopped') this.deps.logger.info({ deposit_id: order.deposit_id, step: payload.step, status: order.status }, 'sandbox scenario stopped: the order moved on its own');
    return outcome;
  }

  private async step(step: ScenarioStep, order: DepositRow): Promise<StepOutcome> {
    switch (step) {
      case 'start':
        return this.start(order);
      case 'late_payment':
        return this.latePayment(order);
      case 'approve_late_slip':
        return this.approveLateSlip(order);
      case 'reverse':
        return this.reverse(order);
      case 'duplicate_transfer':
        return this.duplicateTransfer(order);
      case 'pay_leg':
        return this.payNextLeg(order);
      case 'relay_dispute':
        return this.relayDispute(order);
      case 'fill_chunk':
        // A withdrawal's step, run by runFillStep; never reached with a deposit.
        return 'stopped';
      default: {
        const unknown: never = step;
        throw new Error(`unknown scenario step ${String(unknown)}`);
      }
    }
  }

  /** The first step, a few seconds after creation: the end user pays, or the scenario's opening move. */
  private async start(order: DepositRow): Promise<StepOutcome> {
    if (order.amount_minor === 11_400) {
      invariant(this.deps.rotateSandboxSigningKey, 'the key rotation scenario is wired');
      // The run id is the order's: a retried step answers the rotation it made and rotates nothing more.
      await this.deps.rotateSandboxSigningKey({ white_label_id: order.white_label_id, merchant_id: order.merchant_id, request_id: newId('request'), scenario_run_id: order.deposit_id });
      return 'done';
    }
    if (order.status === 'awaiting_liquidity') return 'wait';
    if (order.status !== 'awaiting_payment' || order.slip_attempts > 0 || order.slip_received_at !== null) return 'stopped';
    const now = this.deps.clock.now();
    switch (order.amount_minor) {
      case 10_000:
        return this.pay(order, 'start', {});
      case 10_100:
        return this.pay(order, 'start', { sender: { ...(await this.declaredSender(order)), account_name_th: order.sender_name_th === OTHER_SENDER_NAME_TH ? OTHER_SENDER_NAME_TH_FALLBACK : OTHER_SENDER_NAME_TH, account_name_en: undefined } });
      case 10_300:
        await this.pay(order, 'start', {});
        await this.schedule(order, 'reverse', new Date(now.getTime() + SCENARIO_REVERSAL_DELAY_MS));
        return 'done';
      case 10_600:
        return this.pay(order, 'start', { bank_checking_off: true });
      case 10_800:
        await this.pay(order, 'start', {});
        await this.schedule(order, 'duplicate_transfer', new Date(now.getTime() + SCENARIO_DUPLICATE_DELAY_MS));
        return 'done';
      case 11_100:
        return this.pay(order, 'start', { amount_minor: SCENARIO_SHORT_TRANSFER_MINOR });
      case 11_600:
        return this.pay(order, 'start', { amount_minor: SCENARIO_OVERPAID_TRANSFER_MINOR });
      case 10_700:
        return this.payNextLeg(order);
      case 10_900: {
        // The merchant cancels; the end user, who had already opened the bank app, pays anyway.
        const canceled = await this.deps.database.transaction((tx) =>
          this.deps.deposits.cancel(tx, { white_label_id: order.white_label_id, merchant_id: order.merchant_id, livemode: false }, order.deposit_id, 'merchant', SYSTEM_CAUSE),
        );
        if (!canceled?.ok) return 'stopped';
        await this.schedule(order, 'late_payment', new Date(now.getTime() + SCENARIO_PAYMENT_DELAY_MS));
        return 'done';
      }
      case 10_200:
        // Nobody pays in time; the transfer comes a minute after the deadline.
        await this.schedule(order, 'late_payment', new Date(order.expires_at.getTime() + SCENARIO_LATE_SLIP_DELAY_MS));
        return 'done';
      case 11_000: {
        // The payer transfers in time but uploads the slip a minute after the deadline, when the
        // destination is gone: the transfer is made now and its slip kept for the late step.
        await this.transferOnly(order);
        await this.schedule(order, 'late_payment', new Date(order.expires_at.getTime() + SCENARIO_LATE_SLIP_DELAY_MS));
        return 'done';
      }
      default:
        return 'stopped';
    }
  }

  /**
   * 107.00 as a deposit: the counterparty's withdrawal split into three chunks, which are the order's three legs
   * (src/sandbox/liquidity.ts). The payer transfers to one leg at a time and uploads its slip; 5 s later the
   * next step pays the next leg once that slip was verified, until the order settles. A slip received but not
   * yet verified (more uploads than paid legs) is waited for, so no leg is paid twice.
   */
  private async payNextLeg(order: DepositRow): Promise<StepOutcome> {
    if (order.status === 'settled') return 'done';
    if (order.status === 'slip_processing') return 'wait';
    if (order.status !== 'awaiting_payment') return 'stopped';
    const parties = await this.deps.deposits.paymentParties(this.deps.database, order.white_label_id, order.deposit_id);
    invariant(parties, 'the order exists');
    const paidLegs = parties.legs.filter((leg) => leg.status === 'filled' || leg.paid_minor > 0).length;
    if (order.slip_attempts > paidLegs) return 'wait';
    const leg = parties.legs.find((candidate) => candidate.status !== 'filled' && candidate.paid_minor === 0);
    if (!leg) return 'wait';
    await this.pay(order, 'pay_leg', { leg_ref: leg.leg_ref }, leg.leg_ref);
    await this.schedule(order, 'pay_leg', new Date(this.deps.clock.now().getTime() + SCENARIO_FILL_CHUNK_DELAY_MS), 0, 'due');
    return 'done';
  }

  /** 102.00, 109.00, 110.00: the slip of an order that is no longer waiting for it. */
  private async latePayment(order: DepositRow): Promise<StepOutcome> {
    if (order.slip_attempts > 0 || order.slip_received_at !== null) return 'stopped';
    switch (order.amount_minor) {
      case 10_200: {
        if (order.status === 'awaiting_payment') return 'wait';
        if (order.status !== 'expired') return 'stopped';
        await this.pay(order, 'late_payment', { occurred_at: new Date(order.expires_at.getTime() + SCENARIO_LATE_TRANSFER_AFTER_DEADLINE_MS) });
        await this.schedule(order, 'approve_late_slip', new Date(this.deps.clock.now().getTime() + SCENARIO_REVIEW_APPROVAL_DELAY_MS));
        return 'done';
      }
      case 10_900:
        if (order.status !== 'canceled') return 'stopped';
        return this.pay(order, 'late_payment', {});
      case 11_000: {
        if (order.status === 'awaiting_payment') return 'wait';
        if (order.status !== 'expired') return 'stopped';
        // The counterparty takes its dedicated withdrawal back before the slip comes: the leg's
        // destination is gone, which is what an allocation conflict is.
        await this.deps.database.transaction(async (tx) => {
          const parties = await this.deps.deposits.paymentParties(tx, order.white_label_id, order.deposit_id);
          invariant(parties, 'the order exists');
          for (const leg of parties.legs) {
            if (!leg.withdrawal_id) continue;
            const merchant_id = (await this.deps.withdrawals.merchantsOf(tx, order.white_label_id, [leg.withdrawal_id]))[0];
            invariant(merchant_id, 'a leg names a withdrawal of the brand');
            const canceled = await this.deps.withdrawals.cancel(tx, { white_label_id: order.white_label_id, merchant_id, livemode: false }, leg.withdrawal_id, SYSTEM_CAUSE);
            invariant(canceled?.ok, 'the dedicated withdrawal of an expired order can be canceled');
          }
        });
        const kept = await this.deps.sandboxBank.transferOfScenario(this.deps.database, order.white_label_id, order.deposit_id);
        invariant(kept, 'the in-time transfer was made at the start');
        await this.upload(order, 'late_payment', kept.slip);
        await this.schedule(order, 'relay_dispute', new Date(this.deps.clock.now().getTime() + STEP_WAIT_MS));
        return 'done';
      }
      default:
        return 'stopped';
    }
  }

  /**
   * 110.00: the dispute the late slip opened is on the counterparty's withdrawal, whose `withdrawal.disputed`
   * goes to the feed of the service's own merchant, which no merchant reads. The merchant running the scenario
   * gets a copy of that event in its own feed (and so at its endpoints): the same type, object and
   * `previous_attributes`, test mode only (docs/decisions/sandbox.md). A copy already there is not made again.
   */
  private async relayDispute(order: DepositRow): Promise<StepOutcome> {
    if (order.status === 'slip_processing') return 'wait';
    if (order.status !== 'under_review') return 'stopped';
    const parties = await this.deps.deposits.paymentParties(this.deps.database, order.white_label_id, order.deposit_id);
    invariant(parties, 'the order exists');
    const withdrawal_id = parties.legs.find((leg) => leg.withdrawal_id !== null)?.withdrawal_id;
    if (!withdrawal_id) return 'stopped';
    const [owner] = await this.deps.withdrawals.merchantsOf(this.deps.database, order.white_label_id, [withdrawal_id]);
    invariant(owner, 'a leg names a withdrawal of the brand');
    // The newest events of that type within the feed's scan window: the dispute it relays was written moments before.
    const disputed = (type: string, merchant_id: string) =>
      this.deps.events.listEvents(this.deps.database, {
        white_label_id: order.white_label_id, merchant_id, livemode: false, after_sequence: 0, before_sequence: null,
        type, object_status: null, created_from: null, created_to: null, descending: true, limit: 100,
      }).then((page) => page.events.find((event) => event.data.object.id === withdrawal_id) ?? null);
    const original = await disputed('withdrawal.disputed', owner);
    if (!original) return 'wait';
    if (await disputed('withdrawal.disputed', order.merchant_id)) return 'done';
    await this.deps.database.transaction((tx) =>
      this.deps.events.emitEvent(tx, {
        white_label_id: order.white_label_id,
        merchant_id: order.merchant_id,
        livemode: false,
        type: original.type,
        object: original.data.object,
        previous_attributes: original.data.previous_attributes,
        cause: SYSTEM_CAUSE,
      }),
    );
    return 'done';
  }

  /** 102.00: the sandbox's desk approves the late slip, as a reviewer would after checking it. */
  private async approveLateSlip(order: DepositRow): Promise<StepOutcome> {
    if (order.status === 'slip_processing') return 'wait';
    if (order.status !== 'under_review') return 'stopped';
    const decided = await this.deps.review.decide(order.white_label_id, order.deposit_id, { ...SANDBOX_STAFF, request_id: newId('request') }, { action: 'approve', note: null, verified_amount_minor: null });
    if (!decided.ok) {
      this.deps.logger.info({ deposit_id: order.deposit_id, code: decided.error.code }, 'sandbox scenario approval refused');
      return 'stopped';
    }
    return 'done';
  }

  /** 103.00: the sending bank recalls the transfer a minute after settlement. */
  private async reverse(order: DepositRow): Promise<StepOutcome> {
    if (order.status === 'slip_processing' || order.status === 'awaiting_payment') return 'wait';
    if (order.status !== 'settled' || order.settled_at === null) return 'stopped';
    const due = order.settled_at.getTime() + SCENARIO_REVERSAL_DELAY_MS;
    if (due > this.deps.clock.now().getTime()) {
      await this.schedule(order, 'reverse', new Date(due), 0, 'due');
      return 'done';
    }
    const reversed = await this.deps.review.reverse(order.white_label_id, order.deposit_id, { ...SANDBOX_STAFF, request_id: newId('request') }, { reason_code: 'BANK_RECALL', note: 'Sandbox scenario 103.00 THB: the sending bank recalled the transfer.' });
    return reversed.ok ? 'done' : 'stopped';
  }

  /** 108.00: the end user pays the same amount a second time and uploads that slip too. */
  private async duplicateTransfer(order: DepositRow): Promise<StepOutcome> {
    if (order.status === 'slip_processing' || order.status === 'awaiting_payment') return 'wait';
    if (order.status !== 'settled' || order.settled_at === null) return 'stopped';
    const due = order.settled_at.getTime() + SCENARIO_DUPLICATE_DELAY_MS;
    if (due > this.deps.clock.now().getTime()) {
      await this.schedule(order, 'duplicate_transfer', new Date(due), 0, 'due');
      return 'done';
    }
    return this.pay(order, 'duplicate_transfer', {});
  }

  /**
   * A step of a merchant's test-mode withdrawal that the sandbox fills (107.00 THB, a refund: `sandboxFillOf`): the
   * sandbox counterparty deposits the next chunk into it (a deposit matched to this order alone), pays it through
   * the sandbox bank and uploads the slip through the ordinary intake; verification then settles the deposit and
   * records the fill, and the next step, 5 s later, waits for that fill before it makes the next chunk, until the
   * fill's chunks are paid.
   *
   * The chunk's deposit, its transfer and the next step are one transaction, so a crash after it leaves
   * the next step to upload the kept slip; a second run of a step finds the chunk's reference taken
   * (`merchant_reference_in_use`) and stops, so an order never gets a chunk twice.
   */
  private async runFillStep(payload: ScenarioStepPayload): Promise<StepOutcome> {
    const { database } = this.deps;
    const order = await this.deps.withdrawals.getInBrand(database, payload.white_label_id, payload.order_id);
    if (!order || order.livemode) return 'stopped';
    const outcome = await this.fillStep(payload.white_label_id, order, payload);
    if (outcome === 'wait') {
      // Waiting for a chunk's verification is bounded by STEP_WAIT_LIMIT.
      const waited = (payload.waited ?? 0) + 1;
      if (waited > STEP_WAIT_LIMIT) {
        this.deps.logger.warn({ withdrawal_id: order.id, step: payload.step, status: order.status }, 'sandbox scenario gave up waiting for the order');
        return 'stopped';
      }
      const at = new Date(this.deps.clock.now().getTime() + STEP_WAIT_MS);
      await this.enqueueFillStep(database, payload.white_label_id, order.id, at, { waited, chunk_deposit_id: payload.chunk_deposit_id, tag: `wait:${at.getTime()}:${waited}` });
    }
    if (outcome === 'stopped') this.deps.logger.info({ withdrawal_id: order.id, step: payload.step, status: order.status }, 'sandbox scenario stopped: the order moved on its own');
    return outcome;
  }

  private async fillStep(white_label_id: string, order: WithdrawalView, payload: ScenarioStepPayload): Promise<StepOutcome> {
    // An order waiting for approval gets its first step with the approval (scenarioWithdrawalApprovedJob).
    if (order.status !== 'open' && order.status !== 'partially_filled') return order.status === 'settled' ? 'done' : 'stopped';
    if (payload.chunk_deposit_id !== undefined) {
      const chunk = await this.deps.deposits.viewInBrand(this.deps.database, white_label_id, payload.chunk_deposit_id);
      invariant(chunk, 'a chunk step names the deposit the previous step made');
      const row = chunk.row;
      if (row.status === 'awaiting_payment' && row.slip_attempts === 0 && row.slip_received_at === null) {
        // The step that made the chunk stopped before its upload (a crash): the kept slip goes in now.
        const kept = await this.deps.sandboxBank.transferOfScenario(this.deps.database, row.white_label_id, row.deposit_id);
        invariant(kept, 'a chunk deposit was paid in the transaction that made it');
        await this.upload(row, 'fill_chunk', kept.slip);
        return 'wait';
      }
      if (row.status === 'awaiting_payment' || row.status === 'slip_processing') return 'wait';
      if (row.status !== 'settled') return 'stopped';
    }
    // Another depositor's leg is in transfer: its fill (or release) comes first.
    if (order.reserved_minor > 0) return 'wait';
    const fill = sandboxFillOf({ ...order, refund_of_deposit_id: order.refund_of_deposit_id ?? null });
    if (!fill || order.settled_splits >= fill.paid) return 'done';
    // A refund whose deposit was reversed takes no new chunk (docs/decisions/refunds.md): it ends by its expiry or cancel.
    if (order.refund_of_deposit_id !== undefined && !(await this.refundedDepositStands(white_label_id, order.refund_of_deposit_id))) return 'stopped';
    const amount_minor = scenarioChunkAmount(order.remaining_minor, order.settled_splits, fill.chunks);
    if (amount_minor === 0) return 'done';
    const chunk_number = order.settled_splits + 1;
    let made: { deposit: DepositRow; slip: { media_type: string; image_base64: string; payload: string } };
    try {
      made = await this.deps.database.transaction(async (tx) => {
        const counterparty = await this.deps.liquidity.counterpartyAccount(tx, white_label_id);
        const created = await this.deps.deposits.create(
          tx,
          counterparty,
          { amount_minor, merchant_reference: `fill-${order.id}-${chunk_number}`, end_user_ref: `fill-${order.id}`, sender: chunkPayer(order.id, chunk_number) },
          SYSTEM_CAUSE,
          { fill_withdrawal_id: order.id },
        );
        const transfer = await this.deps.sandboxBank.transfer(tx, counterparty, { deposit_id: created.deposit.id, scenario: true });
        invariant(transfer?.ok, 'a matched chunk deposit can be paid');
        const deposit = await this.deps.deposits.viewInBrand(tx, white_label_id, created.deposit.id);
        invariant(deposit, 'the chunk deposit exists');
        const next = new Date(this.deps.clock.now().getTime() + SCENARIO_FILL_CHUNK_DELAY_MS);
        await this.enqueueFillStep(tx, white_label_id, order.id, next, { waited: 0, chunk_deposit_id: created.deposit.id, tag: created.deposit.id });
        return { deposit: deposit.row, slip: transfer.value.slip };
      });
    } catch (error) {
      // Another run of this scenario made this chunk (its reference is taken), or the order stopped
      // taking deposits between the read above and the lock: either way this run has nothing to do.
      if (error instanceof ApiError && error.code === 'merchant_reference_in_use') return 'stopped';
      if (error instanceof ApiError && error.code === 'withdrawal_state_conflict') return 'wait';
      throw error;
    }
    await this.upload(made.deposit, 'fill_chunk', made.slip);
    return 'done';
  }

  /** True while the deposit a refund pays back is settled (not reversed), so that the sandbox may go on filling the refund. */
  private async refundedDepositStands(white_label_id: string, deposit_id: string): Promise<boolean> {
    const deposit = await this.deps.deposits.viewInBrand(this.deps.database, white_label_id, deposit_id);
    return deposit?.row.status === 'settled';
  }

  private async enqueueFillStep(db: Queryable, white_label_id: string, withdrawal_id: string, at: Date, next: { waited: number; chunk_deposit_id: string | undefined; tag: string }): Promise<void> {
    const job = scenarioStepJob({ white_label_id, order_id: withdrawal_id, step: 'fill_chunk', at });
    const payload: ScenarioStepPayload = { ...job.payload, waited: next.waited, ...(next.chunk_deposit_id === undefined ? {} : { chunk_deposit_id: next.chunk_deposit_id }) };
    await scheduleJob(db, this.deps.clock, { ...job, payload: { ...payload }, job_key: `${job.job_key}:${next.tag}` });
  }

  /** The order's declared sender in full, as the sandbox bank's default payer uses it. */
  private async declaredSender(order: DepositRow): Promise<NonNullable<SandboxTransferInput['sender']>> {
    const parties = await this.deps.deposits.paymentParties(this.deps.database, order.white_label_id, order.deposit_id);
    invariant(parties, 'the order exists');
    return { bank_code: parties.sender.bank_code, account_number: parties.sender.account_number, account_name_th: parties.sender.name_th, account_name_en: parties.sender.name_en ?? undefined };
  }

  /** A transfer of the sandbox bank to the order's first unpaid leg, and the upload of its slip. */
  private async pay(order: DepositRow, step: ScenarioStep, input: Omit<SandboxTransferInput, 'deposit_id'>, leg_ref?: string): Promise<StepOutcome> {
    const account = { white_label_id: order.white_label_id, merchant_id: order.merchant_id, livemode: false };
    const made = await this.deps.database.transaction((tx) => this.deps.sandboxBank.transfer(tx, account, { ...input, deposit_id: order.deposit_id }));
    invariant(made?.ok, 'a scenario order with a leg can be paid');
    await this.upload(order, step, made.value.slip, leg_ref);
    return 'done';
  }

  /** 110.00: the transfer alone, its slip kept by the sandbox bank for the step that uploads it. */
  private async transferOnly(order: DepositRow): Promise<void> {
    const account = { white_label_id: order.white_label_id, merchant_id: order.merchant_id, livemode: false };
    const made = await this.deps.database.transaction((tx) => this.deps.sandboxBank.transfer(tx, account, { deposit_id: order.deposit_id, scenario: true }));
    invariant(made?.ok, 'a scenario order with a leg can be paid');
  }

  /**
   * Uploads a slip through the ordinary intake, with the order's capability, as the end user's app
   * would (JSON base64 with the mini-QR text). The idempotency key is the step's: a retried step whose
   * upload had been stored gets 409 `idempotency_key_reused` for its new transfer's slip, which means
   * the step's slip is in, and the step is done.
   */
  private async upload(order: DepositRow, step: ScenarioStep, slip: { media_type: string; image_base64: string; payload: string }, leg_ref?: string): Promise<void> {
    const capability = await this.deps.deposits.sandboxPayerCapability(this.deps.database, order.white_label_id, order.deposit_id);
    invariant(capability, 'a paid order has its capability');
    const verified = this.deps.slipTokens.verify(capability.token, { url: capability.upload_url, deposit_id: order.deposit_id, now: this.deps.clock.now() });
    invariant(verified.ok, 'the capability the service just made verifies');
    const evidence = await parseJsonEvidence(Buffer.from(JSON.stringify({ image_base64: slip.image_base64, payload: slip.payload })));
    try {
      await this.deps.slips.upload({
        claims: verified.claims,
        // 107.00's steps pay one leg each: the leg is part of the key, so each leg's slip is its own request.
        idempotency_key: `sandbox-scenario-${step}-${order.deposit_id}${leg_ref === undefined ? '' : `-${leg_ref}`}`,
        request_id: newId('request'),
        path: new URL(capability.upload_url).pathname,
        evidence,
      });
    } catch (error) {
      if (error instanceof ApiError && error.code === 'idempotency_key_reused') return;
      throw error;
    }
  }

  private async schedule(order: DepositRow, step: ScenarioStep, at: Date, waited = 0, tag: 'wait' | 'due' = 'wait'): Promise<void> {
    const job = scenarioStepJob({ white_label_id: order.white_label_id, order_id: order.deposit_id, step, at });
    await scheduleJob(this.deps.database, this.deps.clock, {
      ...job,
      payload: { ...job.payload, waited },
      // A step enqueued by itself (a wait, or a due time moved) must not collide with the running job's key.
      job_key: waited > 0 || tag === 'due' ? `${job.job_key}:${tag}:${at.getTime()}` : job.job_key,
    });
  }
}
