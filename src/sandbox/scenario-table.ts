import { SECOND_MS } from '../platform/time.ts';
import { TIME_SKEW_ALLOWANCE_MS } from '../verification/checks.ts';
import { LATE_SLIP_WINDOW_MS } from '../deposits/transitions.ts';
import type { ScenarioGatewayRoute } from '../deposits/scenario-hooks.ts';
import { SANDBOX_GATEWAY_ACCOUNT } from './bank.ts';

/**
 * The spec's sandbox scenarios (Sandbox scenarios, by created amount), as data. A test-mode order whose
 * created amount is one of these behaves as its row says; every other amount behaves like live. The
 * descriptions are the spec's table, copied; the timings below are the spec's, or our choice where the
 * table gives none (docs/decisions/sandbox.md).
 *
 * The deposit and withdrawal services never read it: they call the scenario hooks at named points, which
 * the sandbox implements from this table for test-mode orders (src/sandbox/hooks.ts).
 */

export type ScenarioAmount =
  | 10_000 | 10_100 | 10_200 | 10_300 | 10_400 | 10_500 | 10_600 | 10_700 | 10_800
  | 10_900 | 11_000 | 11_100 | 11_200 | 11_300 | 11_400 | 11_500 | 11_600;

export interface SandboxScenario {
  amount_minor: ScenarioAmount;
  /** The spec's "Scenario" column. */
  description: string;
  /** Which kind of order the amount selects: 107.00 selects both (the counterparty's withdrawal split into 3 chunks, seen from either side). */
  applies_to: 'deposit' | 'withdrawal' | 'both';
}

/** The spec's table, row by row. */
export const SANDBOX_SCENARIOS: readonly SandboxScenario[] = [
  { amount_minor: 10_000, applies_to: 'deposit', description: 'Matched, automatic slip check, settled in about 5 seconds' },
  { amount_minor: 10_100, applies_to: 'deposit', description: '`under_review` with `SENDER_NAME_MISMATCH`, stays until approved or rejected' },
  { amount_minor: 10_200, applies_to: 'deposit', description: 'Expired, automatic late slip at +60 seconds, `under_review` with `LATE_SLIP`, then settled' },
  { amount_minor: 10_300, applies_to: 'deposit', description: 'Settled, then reversed at +60 seconds' },
  { amount_minor: 10_400, applies_to: 'deposit', description: 'Fallback route with 2 legs, TTL about 4 minutes' },
  { amount_minor: 10_500, applies_to: 'deposit', description: '25 seconds in `awaiting_liquidity` before a destination appears' },
  { amount_minor: 10_600, applies_to: 'deposit', description: '`under_review` with `BANK_DISABLED`' },
  { amount_minor: 10_700, applies_to: 'both', description: 'Counterparty withdrawal split into 3 chunks' },
  { amount_minor: 10_800, applies_to: 'deposit', description: 'Duplicate transfer: settled, then `deposit.overpaid` at +45 seconds' },
  { amount_minor: 10_900, applies_to: 'deposit', description: 'Canceled, transferred anyway: canceled (`is_terminal` false), late slip, `under_review` with `CANCELED_ORDER_SLIP`' },
  { amount_minor: 11_000, applies_to: 'deposit', description: '`ALLOCATION_CONFLICT` late slip plus `withdrawal.disputed` on the counterparty' },
  { amount_minor: 11_100, applies_to: 'deposit', description: 'Clean short-pay settled automatically (`partial` true, `settled_via` `auto`)' },
  { amount_minor: 11_200, applies_to: 'deposit', description: 'Late-slip window closed: 410 with `claim_url`' },
  { amount_minor: 11_300, applies_to: 'withdrawal', description: '402 `insufficient_balance` on withdrawal creation' },
  { amount_minor: 11_400, applies_to: 'deposit', description: 'Key rotation: `webhook.key.rotating`, kid switches within 60 seconds' },
  { amount_minor: 11_500, applies_to: 'deposit', description: 'Idempotency conflict (same key, different body)' },
  { amount_minor: 11_600, applies_to: 'deposit', description: 'Same-slip overpayment: X=11600, V=12100; one `deposit.settled` with A=X and E=500' },
];

/** 113.00 THB: the withdrawal amount that always answers 402 on creation (spec, Sandbox scenarios). */
export const SANDBOX_INSUFFICIENT_BALANCE_AMOUNT_MINOR = 11_300;

/** The scenario a test-mode order of this kind and amount follows; null for live and for any other amount. */
export function sandboxScenarioOf(kind: 'deposit' | 'withdrawal', livemode: boolean, amount_minor: number): SandboxScenario | null {
  if (livemode) return null;
  return SANDBOX_SCENARIOS.find((scenario) => scenario.amount_minor === amount_minor && (scenario.applies_to === kind || scenario.applies_to === 'both')) ?? null;
}

/** When the sandbox payer acts after an order gets its destination: the "about 5 seconds" of 100.00 THB include verification. */
export const SCENARIO_PAYMENT_DELAY_MS = 3 * SECOND_MS;
/**
 * 102.00 and 110.00: the late slip comes 60 seconds after the transfer deadline (spec: "automatic late slip at
 * +60 seconds"). Until issue 31 it came 180 s after, waiting out the slip checks' two minutes of clock difference
 * between banks and the service (TIME_SKEW_ALLOWANCE_MS); the bank's time on 102.00's transfer now says late
 * instead (SCENARIO_LATE_TRANSFER_AFTER_DEADLINE_MS).
 */
export const SCENARIO_LATE_SLIP_DELAY_MS = 60 * SECOND_MS;
/**
 * 102.00: how long after the deadline the sandbox bank dates the late transfer: one second past the two minutes
 * of clock difference the time check tolerates (src/verification/checks.ts TIME_SKEW_ALLOWANCE_MS), so the live
 * rule calls it late without the scenario waiting for it. The sandbox bank is then a bank whose clock is a minute
 * ahead of the service's, which the tolerance exists for (docs/decisions/sandbox.md).
 */
export const SCENARIO_LATE_TRANSFER_AFTER_DEADLINE_MS = TIME_SKEW_ALLOWANCE_MS + SECOND_MS;
/** 102.00: the sandbox desk approves a late slip this long after it went to review. */
export const SCENARIO_REVIEW_APPROVAL_DELAY_MS = 60 * SECOND_MS;
/** 103.00: the reversal comes this long after settlement. */
export const SCENARIO_REVERSAL_DELAY_MS = 60 * SECOND_MS;
/** 108.00: the duplicate transfer's slip comes this long after settlement. */
export const SCENARIO_DUPLICATE_DELAY_MS = 45 * SECOND_MS;
/** 107.00: how many chunks the sandbox counterparty's deposits fill a withdrawal of this amount in. */
export const SCENARIO_FILL_CHUNKS = 3;
/** 107.00: the first chunk comes this long after the withdrawal opens, and each next one this long after the previous fill. */
export const SCENARIO_FILL_CHUNK_DELAY_MS = 5 * SECOND_MS;
/** 116.00: what the payer transfers for the 116.00 THB order (V), so that E = V − X = 500. */
export const SCENARIO_OVERPAID_TRANSFER_MINOR = 12_100;
/** 111.00: what the payer transfers (V < X), a clean short-pay. */
export const SCENARIO_SHORT_TRANSFER_MINOR = 10_000;


/**
 * The order lifetime a scenario fixes, in seconds: 104.00 has a TTL of about 4 minutes (spec), and the
 * scenarios that start with an expiry (102.00, 110.00) expire at the shortest lifetime the contract allows
 * (60 s), so that trying them takes minutes, not the default quarter of an hour; 112.00 too, but its deadline
 * is then dated back (scenarioDeadlineDatedBackSeconds).
 */
export function scenarioExpiresInSeconds(livemode: boolean, amount_minor: number): number | null {
  const scenario = sandboxScenarioOf('deposit', livemode, amount_minor);
  if (!scenario) return null;
  switch (scenario.amount_minor) {
    case 10_400:
      return 240;
    case 10_200:
    case 11_000:
    case 11_200:
      return 60;
    default:
      return null;
  }
}

/** 104.00: the amounts of the fallback route's two legs to the sandbox gateway account, half the order each. */
export const SCENARIO_GATEWAY_LEGS_MINOR: readonly number[] = [5_200, 5_200];

/**
 * 104.00's "fallback route with 2 legs": the external gateway (`liquidity_source` `external_gateway`), two legs to
 * the sandbox bank's gateway account (docs/decisions/sandbox.md); null for every other order.
 */
export function scenarioGatewayRoute(livemode: boolean, amount_minor: number): ScenarioGatewayRoute | null {
  if (sandboxScenarioOf('deposit', livemode, amount_minor)?.amount_minor !== 10_400) return null;
  return { account: SANDBOX_GATEWAY_ACCOUNT, legs_minor: SCENARIO_GATEWAY_LEGS_MINOR };
}

/**
 * 112.00: the order's transfer deadline is dated this long before its creation, so that its late-slip window,
 * always 24 hours after the deadline (spec, `late_slip_accepted_until`), closed a minute before the order was
 * made: the order expires at once and the end user's upload is answered 410 with the `claim_url`.
 */
export const SCENARIO_CLOSED_WINDOW_DEADLINE_AGO_SECONDS = LATE_SLIP_WINDOW_MS / SECOND_MS + 60;

/** How many seconds a scenario dates the deadline back from the end of its lifetime: 112.00's lies a day and a minute before its creation. */
export function scenarioDeadlineDatedBackSeconds(livemode: boolean, amount_minor: number): number {
  if (sandboxScenarioOf('deposit', livemode, amount_minor)?.amount_minor !== 11_200) return 0;
  const lifetime = scenarioExpiresInSeconds(livemode, amount_minor);
  return (lifetime ?? 0) + SCENARIO_CLOSED_WINDOW_DEADLINE_AGO_SECONDS;
}

/** The durable job that runs a scenario's next step (src/sandbox/scenarios.ts). */
export const SCENARIO_STEP_TASK = 'sandbox.scenario_step';

/** Steps of the scenarios; each runs as one `sandbox.scenario_step` job and may schedule the next. */
export type ScenarioStep = 'start' | 'late_payment' | 'approve_late_slip' | 'reverse' | 'duplicate_transfer' | 'fill_chunk' | 'pay_leg' | 'relay_dispute';

/** The job of one step; `at` is when it runs, `order_id` the deposit or withdrawal it acts on. */
export function scenarioStepJob(input: { white_label_id: string; order_id: string; step: ScenarioStep; at: Date }) {
  return {
    task: SCENARIO_STEP_TASK,
    payload: { white_label_id: input.white_label_id, order_id: input.order_id, step: input.step },
    run_at: input.at,
    job_key: `${SCENARIO_STEP_TASK}:${input.order_id}:${input.step}`,
    white_label_id: input.white_label_id,
  };
}

/** The first step of a test-mode deposit's scenario, enqueued with its creation; none for other orders. */
export function scenarioStartJob(order: { white_label_id: string; deposit_id: string; livemode: boolean; amount_minor: number; created_at: Date }) {
  const scenario = sandboxScenarioOf('deposit', order.livemode, order.amount_minor);
  // 104.00 and 105.00 show what an order looks like (two legs, a liquidity wait) and 112.00 what the end
  // user's upload is answered; 115.00 is the merchant's own second request. Nothing runs for them after creation.
  if (!scenario || [10_400, 10_500, 11_200, 11_500].includes(scenario.amount_minor)) return [];
  return [scenarioStepJob({ white_label_id: order.white_label_id, order_id: order.deposit_id, step: 'start', at: new Date(order.created_at.getTime() + SCENARIO_PAYMENT_DELAY_MS) })];
}

/**
 * Refund scenarios (issue 32): ours, not the spec's, so they are a table of their own beside the spec's rows. A
 * test-mode refund (a withdrawal with `refund_of_deposit_id`) is filled by the sandbox counterparty's deposits
 * (`SandboxFill`); these created amounts change that. Their amounts are none of the spec's table (100.00 to 116.00
 * THB), and the spec's withdrawal rows apply to refunds too (107.00: three chunks; 113.00: 402). A withdrawal that
 * is not a refund of these amounts is an ordinary order.
 */
export interface SandboxRefundScenario {
  amount_minor: 11_700 | 11_800;
  description: string;
}

export const SANDBOX_REFUND_SCENARIOS: readonly SandboxRefundScenario[] = [
  { amount_minor: 11_700, description: 'Refund left unfilled: nobody fills it (out of the matching queue); it stays `open` until the merchant cancels it or it expires, and the amount and fee return to available' },
  { amount_minor: 11_800, description: 'Refund filled partly, then left: one chunk of 59.00 THB is filled about 5 seconds after it opens, the rest stays unfilled until the merchant cancels it or it expires' },
];

/** The refund scenarios' amounts, for the concurrent tests and the documentation. */
export const SANDBOX_REFUND_UNFILLED_AMOUNT_MINOR = 11_700;
export const SANDBOX_REFUND_PARTLY_FILLED_AMOUNT_MINOR = 11_800;

/** A test-mode refund is filled in this many chunks (a refund of a single baht in one). */
export const SCENARIO_REFUND_CHUNKS = 2;

/**
 * How the sandbox counterparty fills a test-mode withdrawal: the amount is split into `chunks` deposits of whole
 * baht (scenarioChunkAmount), of which the counterparty pays the first `paid`; the order is kept out of the matching
 * queue, so that nobody else's deposit changes the count.
 */
export interface SandboxFill {
  chunks: number;
  paid: number;
}

/**
 * The sandbox fill of a test-mode order, or null for an order the sandbox leaves to the brand's depositors (live
 * orders, withdrawals that are not refunds, except 107.00 THB). A refund is filled in two chunks (one when it is a
 * single baht), 107.00 THB in three; 117.00 THB is never filled, 118.00 THB only its first chunk of two.
 */
export function sandboxFillOf(order: { livemode: boolean; amount_total_minor: number; refund_of_deposit_id: string | null }): SandboxFill | null {
  if (order.livemode) return null;
  if (sandboxScenarioOf('withdrawal', false, order.amount_total_minor)?.amount_minor === 10_700) return { chunks: SCENARIO_FILL_CHUNKS, paid: SCENARIO_FILL_CHUNKS };
  if (order.refund_of_deposit_id === null) return null;
  switch (order.amount_total_minor) {
    case SANDBOX_REFUND_UNFILLED_AMOUNT_MINOR:
      return { chunks: SCENARIO_REFUND_CHUNKS, paid: 0 };
    case SANDBOX_REFUND_PARTLY_FILLED_AMOUNT_MINOR:
      return { chunks: SCENARIO_REFUND_CHUNKS, paid: 1 };
    default: {
      const chunks = order.amount_total_minor >= SCENARIO_REFUND_CHUNKS * 100 ? SCENARIO_REFUND_CHUNKS : 1;
      return { chunks, paid: chunks };
    }
  }
}

/** The first chunk's job of an order the sandbox fills, `SCENARIO_FILL_CHUNK_DELAY_MS` after `from`; none for others. */
function firstChunkJob(order: { white_label_id: string; withdrawal_id: string; livemode: boolean; amount_total_minor: number; refund_of_deposit_id: string | null }, from: Date) {
  const fill = sandboxFillOf(order);
  if (!fill || fill.paid === 0) return [];
  return [scenarioStepJob({ white_label_id: order.white_label_id, order_id: order.withdrawal_id, step: 'fill_chunk', at: new Date(from.getTime() + SCENARIO_FILL_CHUNK_DELAY_MS) })];
}

/**
 * The first chunk of a test-mode order the sandbox fills (107.00 THB, a refund), enqueued with its creation; an
 * order waiting for approval gets it with its approval instead (scenarioWithdrawalApprovedJob).
 */
export function scenarioWithdrawalStartJob(order: { white_label_id: string; withdrawal_id: string; livemode: boolean; status: string; amount_total_minor: number; refund_of_deposit_id: string | null; created_at: Date }) {
  if (order.status !== 'open') return [];
  return firstChunkJob(order, order.created_at);
}

/** The first chunk of an order the sandbox fills, enqueued with its approval. */
export function scenarioWithdrawalApprovedJob(order: { white_label_id: string; withdrawal_id: string; livemode: boolean; amount_total_minor: number; refund_of_deposit_id: string | null; updated_at: Date }) {
  return firstChunkJob(order, order.updated_at);
}

/**
 * The amount of the next chunk of an order split into `chunks`, given what is left of it and how many of its fills
 * have settled: whole baht (a deposit's amount), the last chunk takes the rest (107.00 THB in three: 3,500, then
 * 3,600, then 3,600 satang; a refund of 500.00 THB in two: 25,000 and 25,000). Zero when less than a baht is left,
 * which no deposit can pay.
 */
export function scenarioChunkAmount(remaining_minor: number, settled_splits: number, chunks: number = SCENARIO_FILL_CHUNKS): number {
  const wholeBaht = (amount_minor: number) => amount_minor - (amount_minor % 100);
  const chunksLeft = Math.max(1, chunks - settled_splits);
  const share = wholeBaht(Math.floor(remaining_minor / chunksLeft));
  return chunksLeft === 1 || share === 0 ? wholeBaht(remaining_minor) : share;
}
