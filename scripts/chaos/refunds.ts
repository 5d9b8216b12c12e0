import { newIdempotencyKey, type ChaosClient, type Outcome } from './client.ts';
import type { ChaosMerchant, Operation } from './load.ts';

/**
 * The refunds of the chaos load (issue 32): a paid deposit is watched until it settles, then refunded through
 * POST /v1/pay/deposits/{id}/refunds in four steps that each try to take more than the deposit brought:
 *
 * - `over_refund`: one refund of the amount received plus one baht, which must be refused (422);
 * - `concurrent`: three refunds at once of about 40 % each, so that at most two fit, the first of them sent twice at
 *   once with one Idempotency-Key (`duplicate_key`), which must answer one refund;
 * - `fill_up` then `last_baht`: refunds that leave exactly one baht, then two refunds of that baht at once, of which
 *   exactly one may win.
 *
 * Every request is retried with its key through kills like the rest of the load; the checks (refund-checks.ts) read
 * what the run left: the refunds never exceed the deposit's credit and match its allowance, and each one folds.
 */

export type RefundStep = 'over_refund' | 'concurrent' | 'duplicate_key' | 'fill_up' | 'last_baht';

export interface RefundAttempt {
  deposit_id: string;
  step: RefundStep;
  amount_minor: number;
  /** The deposit's amount received, as the GET that saw it settled answered. */
  received_minor: number;
}

const ONE_BAHT_MINOR = 100;
/** The sandbox's scenario amounts (100.00 to 116.00 THB) run scripted steps, e.g. 113.00 answers 402: avoided. */
const SCENARIO_MIN_MINOR = 10_000;
const SCENARIO_MAX_MINOR = 11_600;
/** A settling deposit is read this often, at most this many times (the slip consumer takes seconds under kills). */
const SETTLE_POLL_MS = 1_000;
const SETTLE_POLLS = 90;
const REASONS = ['customer_request', 'canceled_purchase', 'duplicate_payment', 'overpayment', 'dispute_lost', 'other'] as const;
const TERMINAL_DEPOSIT = new Set(['expired', 'canceled', 'rejected', 'reversed']);

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whole baht, and never a sandbox scenario amount (moved just below the range). */
export function refundAmount(minor: number): number {
  const whole = Math.max(ONE_BAHT_MINOR, Math.floor(minor / ONE_BAHT_MINOR) * ONE_BAHT_MINOR);
  return whole >= SCENARIO_MIN_MINOR && whole <= SCENARIO_MAX_MINOR ? SCENARIO_MIN_MINOR - ONE_BAHT_MINOR : whole;
}

/** Amounts that add up to `total_minor`, none of them a scenario amount (one amount unless it would be one). */
function fillUpAmounts(total_minor: number): number[] {
  if (total_minor <= 0) return [];
  if (total_minor < SCENARIO_MIN_MINOR || total_minor > SCENARIO_MAX_MINOR) return [total_minor];
  return [5_000, total_minor - 5_000];
}

interface RefundRequest {
  idempotency_key: string;
  body: string;
}

/** A refund request with its key and bytes fixed: a random reason, a note half of the time. */
function refundRequest(step: RefundStep, amount_minor: number): RefundRequest {
  const body = JSON.stringify({
    amount_minor,
    reason_code: REASONS[Math.floor(Math.random() * REASONS.length)],
    ...(Math.random() < 0.5 ? { note: `chaos ${step}` } : {}),
  });
  return { idempotency_key: newIdempotencyKey('rfd'), body };
}

export class RefundStorm {
  constructor(
    private readonly client: ChaosClient,
    private readonly deadline_ms: number,
    private readonly record: (operation: Operation) => Operation,
  ) {}

  /** Refunds one paid deposit once it settles; the ids of the refunds acknowledged. */
  async refund(merchant: ChaosMerchant, deposit_id: string): Promise<string[]> {
    const received_minor = await this.settled(merchant, deposit_id);
    if (received_minor === null) return [];
    const created: Operation[] = [];
    const send = (step: RefundStep, amount_minor: number, request: RefundRequest = refundRequest(step, amount_minor)) =>
      this.send(merchant, { deposit_id, step, amount_minor, received_minor }, request).then((operation) => {
        created.push(operation);
        return operation;
      });
    await send('over_refund', received_minor + ONE_BAHT_MINOR);
    const share = refundAmount(received_minor * 0.4);
    // One request sent twice at once: the same key with the same bytes, as a client's retry of a lost answer.
    const twice = refundRequest('duplicate_key', share);
    await Promise.all([send('duplicate_key', share, twice), send('duplicate_key', share, twice), send('concurrent', share), send('concurrent', refundAmount(received_minor * 0.45))]);
    const refundable = await this.refundable(merchant, deposit_id);
    if (refundable !== null && refundable >= ONE_BAHT_MINOR) {
      for (const amount of fillUpAmounts(refundable - ONE_BAHT_MINOR)) {
        if ((await send('fill_up', amount)).outcome.result !== 'acked') break;
      }
      if ((await this.refundable(merchant, deposit_id)) === ONE_BAHT_MINOR) {
        await Promise.all([send('last_baht', ONE_BAHT_MINOR), send('last_baht', ONE_BAHT_MINOR)]);
      }
    }
    return [...new Set(created.filter((operation) => operation.object_id !== null).map((operation) => operation.object_id!))];
  }

  private async send(merchant: ChaosMerchant, attempt: RefundAttempt, { idempotency_key, body }: RefundRequest): Promise<Operation> {
    const outcome = await this.client.perform(
      'refund.create',
      { kind: 'merchant', method: 'POST', target: `/v1/pay/deposits/${attempt.deposit_id}/refunds`, body, idempotency_key, credentials: merchant.credentials },
      { deadline_ms: this.deadline_ms },
    );
    const id = outcome.result === 'acked' ? (JSON.parse(outcome.body_text) as { id: string }).id : null;
    return this.record({ kind: 'refund.create', merchant: merchant.index, object_id: id, refund: attempt, outcome });
  }

  private async read(merchant: ChaosMerchant, deposit_id: string): Promise<Outcome> {
    return this.client.perform(
      'refund GET /v1/pay/deposits/{id}',
      { kind: 'merchant', method: 'GET', target: `/v1/pay/deposits/${deposit_id}`, credentials: merchant.credentials },
      { deadline_ms: this.deadline_ms },
    );
  }

  /** The deposit's amount received once it is settled; null when it ends otherwise or does not settle in time. */
  private async settled(merchant: ChaosMerchant, deposit_id: string): Promise<number | null> {
    for (let poll = 0; poll < SETTLE_POLLS && Date.now() < this.deadline_ms; poll += 1) {
      const outcome = await this.read(merchant, deposit_id);
      if (outcome.result !== 'acked') return null;
      const deposit = JSON.parse(outcome.body_text) as { status: string; amount_received_minor?: number };
      if (deposit.status === 'settled') return deposit.amount_received_minor ?? null;
      if (TERMINAL_DEPOSIT.has(deposit.status)) return null;
      await sleep(SETTLE_POLL_MS);
    }
    return null;
  }

  /** What the deposit says may still be refunded. */
  private async refundable(merchant: ChaosMerchant, deposit_id: string): Promise<number | null> {
    const outcome = await this.read(merchant, deposit_id);
    if (outcome.result !== 'acked') return null;
    return (JSON.parse(outcome.body_text) as { refunds?: { amount_refundable_minor: number } }).refunds?.amount_refundable_minor ?? null;
  }
}
