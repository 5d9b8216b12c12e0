import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import type { ReadPart } from '../platform/read-part.ts';
import { invariant } from '../platform/assert.ts';
import * as repository from './repository.ts';
import type { FeeChannel } from './repository.ts';

export type { FeeChannel } from './repository.ts';

/**
 * Fees (issue 3, first slice). What a merchant is charged for a deposit or a withdrawal, computed
 * from a schedule of three numbers: a rate on the amount (`processing_fee_bps`), a flat fee
 * (`fixed_fee_minor`) and VAT on the two (`vat_bps`).
 *
 * THE ROUNDING RULE (the only one; docs/decisions/fees.md). Integer arithmetic only (BigInt, so
 * `base * bps` cannot lose precision above 2^53), each component rounded separately to whole satang,
 * half up (x.5 goes up; every value here is non-negative):
 *
 *   processing = (base * processing_fee_bps + 5000) / 10000          (integer division)
 *   fixed      = fixed_fee_minor
 *   vat        = ((processing + fixed) * vat_bps + 5000) / 10000      (on the already-rounded fee)
 *   total      = processing + fixed + vat
 *
 * DEPOSIT CAP. A settled deposit must satisfy 0 <= fee_total_minor <= amount_received_minor, so on
 * the deposit channel the pre-VAT fee P = processing + fixed is lowered, when needed, to the largest
 * P' with P' + vat(P') <= base (vat computed by the same rule). The cut is taken from the fixed fee
 * first, then from the processing fee; VAT is always recomputed from what remains, so
 * `vat = round_half_up((processing + fixed) * vat_bps / 10000)` holds on every result, capped or not.
 * Withdrawals are never capped: their fee is added on top of the amount.
 */

/** Platform defaults used when neither the merchant nor its brand has a schedule (Thai market). */
export const PLATFORM_DEFAULT_SCHEDULES: Readonly<Record<FeeChannel, FeeScheduleTerms>> = Object.freeze({
  deposit: Object.freeze({ channel: 'deposit', processing_fee_bps: 150, fixed_fee_minor: 0, vat_bps: 700 }),
  withdrawal: Object.freeze({ channel: 'withdrawal', processing_fee_bps: 0, fixed_fee_minor: 1000, vat_bps: 700 }),
});

/** The largest amount (satang, 10 billion baht) the fee engine prices; keeps every fee a safe integer. */
export const MAX_FEE_BASE_MINOR = 1_000_000_000_000;
/** The largest flat fee a schedule may hold (the migration's CHECK says the same). */
export const MAX_FIXED_FEE_MINOR = 1_000_000_000_000;
export const MAX_BPS = 10_000;

export interface FeeScheduleTerms {
  channel: FeeChannel;
  processing_fee_bps: number;
  fixed_fee_minor: number;
  vat_bps: number;
}

export type FeeScheduleSource = 'merchant' | 'brand' | 'platform_default';

export interface FeeSchedule extends FeeScheduleTerms {
  /** Where the schedule came from: the merchant's own row, the brand default, or the platform default. */
  source: FeeScheduleSource;
}

/** One item of `fee_breakdown[]` (spec: `component`, `amount_minor`, `rate_bps` for rate-based ones). */
export type FeeComponent =
  | { component: 'processing_fee'; amount_minor: number; rate_bps: number }
  | { component: 'fixed_fee'; amount_minor: number }
  | { component: 'vat'; amount_minor: number; rate_bps: number };

export interface FeeComputation {
  fee_total_minor: number;
  /** Always the three components, in this order, zero amounts included. */
  fee_breakdown: [
    { component: 'processing_fee'; amount_minor: number; rate_bps: number },
    { component: 'fixed_fee'; amount_minor: number },
    { component: 'vat'; amount_minor: number; rate_bps: number },
  ];
  /** True when the deposit cap lowered the fee (fee_total_minor <= base would otherwise fail). */
  capped: boolean;
}

const BPS_DENOMINATOR = 10_000n;
const HALF = 5_000n;

function isBps(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 0 && value <= MAX_BPS;
}

export function assertScheduleTerms(terms: FeeScheduleTerms): void {
  invariant(terms.channel === 'deposit' || terms.channel === 'withdrawal', 'fee schedule channel must be deposit or withdrawal');
  invariant(isBps(terms.processing_fee_bps), 'processing_fee_bps must be an integer 0..10000');
  invariant(isBps(terms.vat_bps), 'vat_bps must be an integer 0..10000');
  invariant(
    Number.isSafeInteger(terms.fixed_fee_minor) && terms.fixed_fee_minor >= 0 && terms.fixed_fee_minor <= MAX_FIXED_FEE_MINOR,
    'fixed_fee_minor must be an integer 0..10^12',
  );
}

/** round_half_up(amount * bps / 10000) for non-negative integers. */
function applyRate(amount: bigint, bps: number): bigint {
  return (amount * BigInt(bps) + HALF) / BPS_DENOMINATOR;
}

/** The largest pre-VAT fee P with P + vat(P) <= base. P + vat(P) rises strictly with P. */
function maxPreVatFee(base: bigint, vatBps: number): bigint {
  // estimate = floor(base * 10000 / (10000 + vat)) satisfies estimate + vat(estimate) <= base, and
  // estimate + 2 never does, so at most one step up is needed (see docs/decisions/fees.md).
  const estimate = (base * BPS_DENOMINATOR) / (BPS_DENOMINATOR + BigInt(vatBps));
  invariant(estimate + applyRate(estimate, vatBps) <= base, 'deposit cap estimate exceeds the base');
  const next = estimate + 1n;
  return next + applyRate(next, vatBps) <= base ? next : estimate;
}

function toSafe(value: bigint, what: string): number {
  const result = Number(value);
  invariant(Number.isSafeInteger(result) && result >= 0, `${what} must be a non-negative safe integer`);
  return result;
}

/**
 * The fee of one order of `base_minor` satang under `schedule` (pure; see the rounding rule above).
 * `base_minor` is the amount the fee is on: the received amount of a deposit, the ordered amount of
 * a withdrawal. A base of 0 gives a fee of 0 on deposits (cap) and the fixed fee on withdrawals.
 */
export function computeFee(schedule: FeeScheduleTerms, base_minor: number): FeeComputation {
  assertScheduleTerms(schedule);
  invariant(Number.isSafeInteger(base_minor) && base_minor >= 0 && base_minor <= MAX_FEE_BASE_MINOR, 'fee base must be an integer 0..10^12 satang');
  const base = BigInt(base_minor);
  let processing = applyRate(base, schedule.processing_fee_bps);
  let fixed = BigInt(schedule.fixed_fee_minor);
  let capped = false;
  if (schedule.channel === 'deposit') {
    const ceiling = maxPreVatFee(base, schedule.vat_bps);
    if (processing + fixed > ceiling) {
      capped = true;
      // The cut comes out of the fixed fee first, then out of the processing fee.
      fixed = ceiling > processing ? ceiling - processing : 0n;
      if (processing > ceiling) processing = ceiling;
    }
  }
  const vat = applyRate(processing + fixed, schedule.vat_bps);
  const total = processing + fixed + vat;
  if (schedule.channel === 'deposit') invariant(total <= base, 'deposit fee exceeds the amount received');
  const result: FeeComputation = {
    fee_total_minor: toSafe(total, 'fee_total_minor'),
    fee_breakdown: [
      { component: 'processing_fee', amount_minor: toSafe(processing, 'processing_fee'), rate_bps: schedule.processing_fee_bps },
      { component: 'fixed_fee', amount_minor: toSafe(fixed, 'fixed_fee') },
      { component: 'vat', amount_minor: toSafe(vat, 'vat'), rate_bps: schedule.vat_bps },
    ],
    capped,
  };
  invariant(
    result.fee_breakdown.reduce((sum, item) => sum + item.amount_minor, 0) === result.fee_total_minor,
    'fee components must sum to fee_total_minor',
  );
  return result;
}

/**
 * Cumulative fee recognised on a withdrawal after `filled_minor` of `amount_total_minor` was paid out
 * (pure): floor(fee_total * filled / total), integer arithmetic only. Being cumulative, the parts of
 * successive fills (`recognizeFill`) never go negative, never run ahead of the pro-rata share, and the
 * final fill takes the remainder, so a fully filled order has recognised exactly `fee_total_minor`.
 */
export function recognizeFee(fee_total_minor: number, amount_total_minor: number, filled_minor: number): number {
  invariant(Number.isSafeInteger(fee_total_minor) && fee_total_minor >= 0, 'fee_total_minor must be a non-negative safe integer');
  invariant(Number.isSafeInteger(amount_total_minor) && amount_total_minor > 0, 'amount_total_minor must be a positive safe integer');
  invariant(Number.isSafeInteger(filled_minor) && filled_minor >= 0 && filled_minor <= amount_total_minor, 'filled_minor must be 0..amount_total_minor');
  const recognized = (BigInt(fee_total_minor) * BigInt(filled_minor)) / BigInt(amount_total_minor);
  const result = toSafe(recognized, 'fee_recognized_minor');
  invariant(result <= fee_total_minor, 'recognised fee exceeds the fee');
  invariant(filled_minor !== amount_total_minor || result === fee_total_minor, 'a full fill must recognise the whole fee');
  return result;
}

/** The part of the fee one fill recognises: cumulative after it minus cumulative before it. */
export function recognizeFill(fee_total_minor: number, amount_total_minor: number, filled_before_minor: number, fill_minor: number): number {
  invariant(Number.isSafeInteger(fill_minor) && fill_minor > 0, 'fill_minor must be a positive safe integer');
  const part =
    recognizeFee(fee_total_minor, amount_total_minor, filled_before_minor + fill_minor) - recognizeFee(fee_total_minor, amount_total_minor, filled_before_minor);
  invariant(part >= 0, 'a fill cannot recognise a negative fee');
  return part;
}

export interface ScheduleScope {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  channel: FeeChannel;
}

export interface SetScheduleInput extends FeeScheduleTerms {
  white_label_id: string;
  /** null sets the brand default. */
  merchant_id: string | null;
  livemode: boolean;
}

function scheduleOf(row: repository.FeeScheduleRow): FeeSchedule {
  return {
    channel: row.channel,
    processing_fee_bps: Number(row.processing_fee_bps),
    fixed_fee_minor: Number(row.fixed_fee_minor),
    vat_bps: Number(row.vat_bps),
    source: row.merchant_id === null ? 'brand' : 'merchant',
  };
}

/** The schedule a stored row gives (its terms checked), or the platform default when there is none. */
function scheduleOrDefault(scope: ScheduleScope, row: repository.FeeScheduleRow | null): FeeSchedule {
  if (!row) return { ...PLATFORM_DEFAULT_SCHEDULES[scope.channel], source: 'platform_default' };
  const schedule = scheduleOf(row);
  assertScheduleTerms(schedule);
  return schedule;
}

/** A schedule read ahead of its quote (`schedulePart`), with the scope it was read for. */
export interface ScheduleReadAhead {
  scope: ScheduleScope;
  schedule: FeeSchedule;
}

function sameScope(left: ScheduleScope, right: ScheduleScope): boolean {
  return left.white_label_id === right.white_label_id && left.merchant_id === right.merchant_id && left.livemode === right.livemode && left.channel === right.channel;
}

/** Fee schedules and quotes; no HTTP here. */
export class FeeService {
  constructor(private readonly clock: Clock) {}

  /** The merchant's own schedule, else its brand's default, else the platform default. */
  async scheduleFor(db: Queryable, scope: ScheduleScope): Promise<FeeSchedule> {
    return scheduleOrDefault(scope, await repository.findApplicableSchedule(db, scope));
  }

  /**
   * `scheduleFor`'s read, for another module's statement to carry (src/platform/read-part.ts) when the
   * amount to quote is not known yet: a settlement reads it with the feed lock of the order it settles, and
   * hands what it answered to `quote`.
   */
  schedulePart(scope: ScheduleScope): ReadPart<ScheduleReadAhead> {
    const part = repository.applicableSchedulePart(scope);
    return { ...part, parse: (value) => ({ scope, schedule: scheduleOrDefault(scope, part.parse(value)) }) };
  }

  /** `quote` as a read another module's statement carries (src/platform/read-part.ts). */
  quotePart(scope: ScheduleScope, base_minor: number): ReadPart<FeeComputation> {
    const part = repository.applicableSchedulePart(scope);
    return { ...part, parse: (value) => computeFee(scheduleOrDefault(scope, part.parse(value)), base_minor) };
  }

  /** Creates or replaces one schedule (tests today; the back office later, which will add the audit row). */
  async setSchedule(db: Queryable, input: SetScheduleInput): Promise<FeeSchedule> {
    assertScheduleTerms(input);
    const row = await repository.upsertSchedule(db, {
      white_label_id: input.white_label_id,
      merchant_id: input.merchant_id,
      livemode: input.livemode,
      channel: input.channel,
      processing_fee_bps: input.processing_fee_bps,
      fixed_fee_minor: input.fixed_fee_minor,
      vat_bps: input.vat_bps,
      now: this.clock.now(),
    });
    return scheduleOf(row);
  }

  /** The fee of `base_minor` for this merchant and channel now; with the schedule as a statement earlier in the transaction read it ahead, when it did (`schedulePart`). */
  async quote(db: Queryable, scope: ScheduleScope, base_minor: number, read_ahead: ScheduleReadAhead | null = null): Promise<FeeComputation> {
    invariant(read_ahead === null || sameScope(read_ahead.scope, scope), 'a schedule read ahead is quoted for the scope it was read for');
    return computeFee(read_ahead?.schedule ?? (await this.scheduleFor(db, scope)), base_minor);
  }
}
