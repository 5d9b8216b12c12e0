import { normaliseName } from '../bank-directory/port.ts';
import { maskName } from '../deposits/masking.ts';
import type { DepositLegRow, DepositRow, ReviewReason, VerificationBooleans } from '../deposits/types.ts';
import type { Payee } from '../beneficiaries/service.ts';
import { invariant } from '../platform/assert.ts';
import { formatTimestamp, MINUTE_MS } from '../platform/time.ts';
import { MASK_CHARACTERS, type VerifiedTransfer } from './bank-port.ts';
import { orderReasons, reviewReason } from './reasons.ts';

/**
 * The six checks of a verified transfer against its order (spec, verification), and what they decide.
 * Pure functions: everything they need is passed in, so every rule is tested without a database.
 *
 * Comparison rules (recorded in docs/decisions/names-and-masking.md):
 * - Accounts: banks print account numbers masked (`xxx-x-x1234-x`). A reported number with mask
 *   characters matches when it has the declared number's length, every visible digit is equal at its
 *   position, and at least four digits are visible; a number without masks must be equal.
 * - Names: both sides are normalised as beneficiary names are (src/bank-directory/port.ts: Unicode form,
 *   invisible characters, spacing, case, a leading honorific). Banks print the first name in full and
 *   shorten or mask the rest (`นาย สมชาย ใ`, `MR. SOMCHAI J`). The reported name matches when its first
 *   word equals the declared first word and every further word is a prefix of the declared word at its
 *   position (a trailing `.` dropped); a word with mask characters must have the declared word's length,
 *   at least two characters visible and each visible one equal. The reported last word may stand for the
 *   declared surname, because banks drop middle names. Thai is compared with the declared Thai name and
 *   English with the declared English name; either matching is a match. A registered sender
 *   (`sender_id`) was verified with its name before, so a bank and account match proves the name too
 *   (`sender_name_match` true). With a registered sender neither a name nor an account that differs sends
 *   the order to review (spec, `sender_id`: "guarantees no review caused by name or account mismatch"); an
 *   account is its bank and its number, so another sending bank is an account mismatch too
 *   (docs/decisions/verification.md).
 * - Time: the transfer must fall between the time the order's destination existed and its deadline,
 *   each with TIME_SKEW_ALLOWANCE_MS for the difference between the bank's clock and ours.
 */

/** Two minutes either side of the window for the difference between the banks' clocks and ours. */
export const TIME_SKEW_ALLOWANCE_MS = 2 * MINUTE_MS;
/** Fewer visible digits than this prove nothing about an account. */
const MIN_VISIBLE_DIGITS = 4;
/** A masked word of a name proves nothing with fewer visible characters than this. */
const MIN_VISIBLE_NAME_CHARACTERS = 2;

function isMask(character: string): boolean {
  return (MASK_CHARACTERS as readonly string[]).includes(character);
}

/** A reported (possibly masked) account number against a full one. */
export function accountsMatch(reported: string, actual: string): boolean {
  if (reported.length === 0 || reported.length !== actual.length) return false;
  let visible = 0;
  for (let index = 0; index < reported.length; index += 1) {
    const character = reported[index] as string;
    if (isMask(character)) continue;
    if (character !== actual[index]) return false;
    visible += 1;
  }
  return visible === reported.length || visible >= MIN_VISIBLE_DIGITS;
}

function wordMatches(reported: string, declared: string, first: boolean): boolean {
  const word = reported.endsWith('.') ? reported.slice(0, -1) : reported;
  if (word.length === 0) return false;
  if ([...word].some(isMask)) {
    const reportedCharacters = [...word];
    const declaredCharacters = [...declared];
    const visible = reportedCharacters.filter((character) => !isMask(character)).length;
    return (
      visible >= MIN_VISIBLE_NAME_CHARACTERS &&
      reportedCharacters.length === declaredCharacters.length &&
      reportedCharacters.every((character, index) => isMask(character) || character === declaredCharacters[index])
    );
  }
  return first ? word === declared : declared.startsWith(word);
}

/** A name as the bank printed it against the declared one (see the rules above). */
export function namesCompatible(reported: string | null, declared: string | null): boolean {
  if (reported === null || declared === null) return false;
  const reportedWords = normaliseName(reported).split(' ').filter((word) => word.length > 0);
  const declaredWords = normaliseName(declared).split(' ').filter((word) => word.length > 0);
  if (reportedWords.length === 0 || reportedWords.length > declaredWords.length) return false;
  const last = reportedWords.length - 1;
  return reportedWords.every(
    (word, index) =>
      wordMatches(word, declaredWords[index] as string, index === 0) ||
      // Banks drop middle names: the reported last word may stand for the declared surname.
      (index > 0 && index === last && wordMatches(word, declaredWords[declaredWords.length - 1] as string, false)),
  );
}

/** The declared sender of an order, in full (from `DepositService.paymentParties`). */
export interface DeclaredSender {
  bank_code: string;
  account_number: string;
  name_th: string;
  name_en: string | null;
  /** The order named a registered sender (`sender_id`). */
  registered: boolean;
}

export type OrderLeg = DepositLegRow & { receiver: Payee | null };

/** What the order's slips say so far, and what it means. */
export interface Assessment {
  verification: VerificationBooleans;
  /** Empty when the slips may settle (or wait for the other legs) without a person. */
  reasons: ReviewReason[];
  /** The leg this transfer paid, when its receiver was found among the legs. */
  leg_ref: string | null;
  /** What every paid leg has received, this transfer included (legs with nothing are absent). */
  paid_by_leg: Record<string, number>;
  /** V: everything the order's verified slips moved, this transfer included. */
  transferred_minor: number;
  /** `settle`: decide now; `wait`: a multi-leg order with legs still unpaid and time left to pay them. */
  next: 'settle' | 'review' | 'wait';
}

export interface AssessmentInput {
  order: Pick<DepositRow, 'amount_minor' | 'expires_at' | 'slip_is_late' | 'status'>;
  legs: readonly OrderLeg[];
  sender: DeclaredSender;
  transfer: VerifiedTransfer;
  /** The transfer is already claimed by another order, or by this one for an earlier slip. */
  duplicate: boolean;
  /** The slip was a reference without an image (always reviewed: NO_SLIP_IMAGE). */
  reference_only: boolean;
  /** The brand's policy holds this order for a reviewer (POLICY_HOLD; `policyHolds` of src/deposits/policy.ts). */
  policy_hold: boolean;
  now: Date;
}

/** The leg whose receiver got this transfer: an unpaid one first, and of those one of the same amount. */
function legOf(legs: readonly OrderLeg[], transfer: VerifiedTransfer): { leg: OrderLeg | null; ambiguous: boolean } {
  const receiving = legs.filter(
    (leg) => leg.status !== 'filled' && leg.receiver !== null && leg.receiver.bank_code === transfer.receiver.bank_code && accountsMatch(transfer.receiver.account_number, leg.receiver.account_number),
  );
  if (receiving.length <= 1) return { leg: receiving[0] ?? null, ambiguous: false };
  const unpaid = receiving.filter((leg) => leg.paid_minor === 0);
  const candidates = unpaid.length > 0 ? unpaid : receiving;
  const sameAmount = candidates.filter((leg) => leg.amount_minor === transfer.amount_minor);
  if (sameAmount.length >= 1) return { leg: sameAmount[0] as OrderLeg, ambiguous: false };
  const amounts = new Set(candidates.map((leg) => leg.amount_minor));
  return amounts.size === 1 ? { leg: candidates[0] as OrderLeg, ambiguous: false } : { leg: null, ambiguous: true };
}

export function assess(input: AssessmentInput): Assessment {
  const { order, transfer, sender } = input;
  invariant(input.legs.length > 0, 'a paid order has legs');
  const reasons: ReviewReason[] = [];
  const { leg, ambiguous } = legOf(input.legs, transfer);
  if (ambiguous) reasons.push(reviewReason('AMBIGUOUS_MATCH'));
  const receiver_match = leg !== null || ambiguous;
  if (!receiver_match) reasons.push(reviewReason('RECEIVER_MISMATCH'));
  if (input.duplicate) reasons.push(reviewReason('DUPLICATE_SLIP'));
  if (input.reference_only) reasons.push(reviewReason('NO_SLIP_IMAGE'));

  const opened = Math.min(...input.legs.map((candidate) => candidate.created_at.getTime()));
  const occurred = transfer.occurred_at.getTime();
  const tooEarly = occurred < opened - TIME_SKEW_ALLOWANCE_MS;
  const tooLate = occurred > order.expires_at.getTime() + TIME_SKEW_ALLOWANCE_MS;
  if (tooLate) reasons.push(reviewReason('LATE_SLIP', { deadline_at: formatTimestamp(order.expires_at) }));
  if (tooEarly) reasons.push(reviewReason('TRANSFER_BEFORE_ORDER'));

  const sender_bank_match = transfer.sender.bank_code === sender.bank_code;
  const sender_account_match = sender_bank_match && accountsMatch(transfer.sender.account_number, sender.account_number);
  const sender_name_match =
    (sender.registered && sender_account_match) || namesCompatible(transfer.sender.name_th, sender.name_th) || namesCompatible(transfer.sender.name_en, sender.name_en);
  // A registered sender (`sender_id`) "guarantees no review caused by name or account mismatch" (spec,
  // POST /v1/pay/deposits): the booleans still say what the bank reported, but neither sends the order to
  // review. An account is its bank and its number: a transfer from another bank is from another account.
  if (!sender.registered && !sender_bank_match) reasons.push(reviewReason('SENDER_BANK_MISMATCH'));
  else if (!sender.registered && !sender_account_match) reasons.push(reviewReason('SENDER_ACCOUNT_MISMATCH'));
  if (!sender_name_match && !sender.registered) reasons.push(reviewReason('SENDER_NAME_MISMATCH', { registered_name_masked: maskName(sender.name_th) }));

  // What each leg has received: earlier slips' amounts, and this transfer on its leg.
  const paid_by_leg: Record<string, number> = {};
  for (const candidate of input.legs) if (candidate.paid_minor > 0) paid_by_leg[candidate.leg_ref] = candidate.paid_minor;
  if (leg) paid_by_leg[leg.leg_ref] = (paid_by_leg[leg.leg_ref] ?? 0) + transfer.amount_minor;
  const transferred_minor = leg ? Object.values(paid_by_leg).reduce((sum, amount) => sum + amount, 0) : transfer.amount_minor;
  const open = input.legs.filter((candidate) => candidate.status !== 'filled');
  const allPaid = open.every((candidate) => (paid_by_leg[candidate.leg_ref] ?? 0) > 0);
  const timeLeft = !order.slip_is_late && order.expires_at.getTime() > input.now.getTime();

  // Amounts: a single leg compares V with X; several legs compare each leg, because a leg paid more and
  // another less would fill the withdrawals wrongly even when the sum is right.
  const over = open.some((candidate) => (paid_by_leg[candidate.leg_ref] ?? 0) > candidate.amount_minor);
  const under = open.some((candidate) => (paid_by_leg[candidate.leg_ref] ?? 0) < candidate.amount_minor);
  const amountDiffers = leg ? over || under : transferred_minor !== order.amount_minor;
  // More legs may still be paid: the amounts are judged once they cannot be.
  const incomplete = leg !== null && !allPaid && timeLeft;
  // The policy hold is on settling, not on paying: a multi-leg order still waits for its other legs first.
  if (input.policy_hold && !incomplete) reasons.push(reviewReason('POLICY_HOLD'));
  if (!incomplete && leg !== null && over && under) reasons.push(reviewReason('AMOUNT_MISMATCH', { expected_minor: order.amount_minor, observed_minor: transferred_minor }));
  const verification: VerificationBooleans = {
    amount_exact: leg !== null && !amountDiffers,
    within_time_window: !tooEarly && !tooLate,
    sender_bank_match,
    sender_account_match,
    sender_name_match,
    receiver_match,
  };
  // A slip going to review for another reason also says how much it moved when that is not the amount due.
  if (reasons.length > 0 && amountDiffers) reasons.push(reviewReason('AMOUNT_MISMATCH', { expected_minor: order.amount_minor, observed_minor: transferred_minor }));
  const ordered = orderReasons(reasons);
  const next = ordered.length > 0 ? 'review' : incomplete ? 'wait' : 'settle';
  return { verification, reasons: ordered, leg_ref: leg?.leg_ref ?? null, paid_by_leg, transferred_minor, next };
}
