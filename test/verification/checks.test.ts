import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { policyHolds } from '../../src/deposits/policy.ts';
import { accountsMatch, assess, namesCompatible, TIME_SKEW_ALLOWANCE_MS, type AssessmentInput, type OrderLeg } from '../../src/verification/checks.ts';
import type { VerifiedTransfer } from '../../src/verification/bank-port.ts';
import { orderReasons, reviewReason, REVIEW_REASON_ORDER } from '../../src/verification/reasons.ts';

/**
 * The six checks and what they decide, as pure functions (the pipeline tests prove them through the
 * door; these pin every rule, including the ones a sandbox slip cannot reach: masked names, middle
 * names, registered senders, legs that share a receiver).
 */

const MATCHED_AT = new Date('2026-08-01T00:00:00.000Z');
const DEADLINE = new Date('2026-08-01T00:15:00.000Z');

function leg(overrides: Partial<OrderLeg> & { leg_ref: string; amount_minor: number }): OrderLeg {
  return {
    white_label_id: 'wl_x',
    deposit_id: 'dep_x',
    sequence: 1,
    expires_at: DEADLINE,
    status: 'reserved',
    destination: 'withdrawal',
    withdrawal_id: 'wdr_x',
    withdrawal_leg_ref: 'wleg_x',
    receiver_bank_code: '014',
    receiver_bank_name_th: 'ธนาคารไทยพาณิชย์',
    receiver_account_last4: '3690',
    receiver_name_masked: 'พิ*** สุ***',
    created_at: MATCHED_AT,
    updated_at: MATCHED_AT,
    paid_minor: 0,
    receiver: { bank_code: '014', account_number: '1472583690', account_name_th: 'พิชัย สุวรรณรัตน์' },
    ...overrides,
  };
}

function transfer(overrides: Partial<VerifiedTransfer> = {}): VerifiedTransfer {
  return {
    sending_bank_code: '004',
    trans_ref: '20260801004ABCDEFGHJK',
    amount_minor: 10_000,
    occurred_at: new Date('2026-08-01T00:05:00.000Z'),
    sender: { bank_code: '004', account_number: 'xxxxx6789x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' },
    receiver: { bank_code: '014', account_number: 'xxxxx8369x', name_th: 'พิชัย ส', name_en: null },
    ...overrides,
  };
}

function input(overrides: Partial<AssessmentInput> = {}): AssessmentInput {
  return {
    order: { amount_minor: 10_000, expires_at: DEADLINE, slip_is_late: false, status: 'slip_processing' },
    legs: [leg({ leg_ref: 'dleg_1', amount_minor: 10_000 })],
    sender: { bank_code: '004', account_number: '1234567890', name_th: 'สมชาย ใจดี', name_en: 'Somchai Jaidee', registered: false },
    transfer: transfer(),
    duplicate: false,
    reference_only: false,
    policy_hold: false,
    now: new Date('2026-08-01T00:06:00.000Z'),
    ...overrides,
  };
}

const codes = (result: ReturnType<typeof assess>) => result.reasons.map((reason) => reason.code);

describe('accounts as banks print them', () => {
  it('a masked number matches when its visible digits (at least four) are in place', () => {
    expect(accountsMatch('xxxxx6789x', '1234567890')).toBe(true);
    expect(accountsMatch('******7890', '1234567890')).toBe(true);
    expect(accountsMatch('•••••6789•', '1234567890')).toBe(true);
    expect(accountsMatch('XXXXX6789X', '1234567890')).toBe(true);
    expect(accountsMatch('xxxxx6788x', '1234567890')).toBe(false);
    expect(accountsMatch('xxxxxx789x', '1234567890')).toBe(false);
    expect(accountsMatch('xxxx6789x', '1234567890')).toBe(false);
    expect(accountsMatch('xxxxxxxxxx', '1234567890')).toBe(false);
  });

  it('a full number must be equal', () => {
    expect(accountsMatch('1234567890', '1234567890')).toBe(true);
    expect(accountsMatch('1234567891', '1234567890')).toBe(false);
    expect(accountsMatch('', '')).toBe(false);
  });
});

describe('names as banks print them', () => {
  it('accepts the honorific, the full first name and a shortened or masked surname', () => {
    expect(namesCompatible('นาย สมชาย ใ', 'สมชาย ใจดี')).toBe(true);
    expect(namesCompatible('นายสมชาย ใจดี', 'สมชาย ใจดี')).toBe(true);
    expect(namesCompatible('สมชาย  ใจดี\u200b', 'สมชาย ใจดี')).toBe(true);
    expect(namesCompatible('น.ส. วิไล ชื่', 'วิไล ชื่นสุข')).toBe(true);
    expect(namesCompatible('MR. SOMCHAI J', 'Somchai Jaidee')).toBe(true);
    expect(namesCompatible('MR SOMCHAI J.', 'Somchai Jaidee')).toBe(true);
    expect(namesCompatible('สมชาย', 'สมชาย ใจดี')).toBe(true);
    expect(namesCompatible('สมชาย ใxxx', 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible('สมชาย ใจxx', 'สมชาย ใจดี')).toBe(true);
  });

  it('takes the last printed word for the surname when a bank drops a middle name', () => {
    expect(namesCompatible('MR. JOHN S', 'John Michael Smith')).toBe(true);
    expect(namesCompatible('MR. JOHN M', 'John Michael Smith')).toBe(true);
    expect(namesCompatible('MR. JOHN X', 'John Michael Smith')).toBe(false);
  });

  it('refuses another first name, more words, too little visible, and no name at all', () => {
    expect(namesCompatible('นาย สมชัย ใ', 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible('สม ใ', 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible('สมชาย ใจดี มาก', 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible('xxxxx ใจดี', 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible('นาย', 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible(null, 'สมชาย ใจดี')).toBe(false);
    expect(namesCompatible('SOMCHAI J', null)).toBe(false);
  });

  it('never matches a name whose first word differs, whatever is printed after it', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 12 }).filter((word) => !/\s/.test(word) && word.toLowerCase() !== 'somchai'), fc.string({ maxLength: 10 }), (first, rest) => {
        expect(namesCompatible(`${first} ${rest}`, 'Somchai Jaidee')).toBe(false);
      }),
    );
  });
});

describe('what a verified transfer decides', () => {
  it('all six pass: settle, nothing to review', () => {
    const result = assess(input());
    expect(result).toMatchObject({ next: 'settle', transferred_minor: 10_000, paid_by_leg: { dleg_1: 10_000 }, leg_ref: 'dleg_1', reasons: [] });
    expect(Object.values(result.verification).every(Boolean)).toBe(true);
  });

  it('short and over, with every other check passing, settle; only the amount boolean is false', () => {
    for (const amount_minor of [9_000, 12_100]) {
      const result = assess(input({ transfer: transfer({ amount_minor }) }));
      expect(result).toMatchObject({ next: 'settle', transferred_minor: amount_minor, reasons: [] });
      expect(result.verification).toMatchObject({ amount_exact: false, receiver_match: true, sender_name_match: true });
    }
  });

  it('another reason also reports the amount when it differs, never when it is right', () => {
    const wrongName = transfer({ sender: { ...transfer().sender, name_th: 'นาย ประเสริฐ ม', name_en: null } });
    expect(codes(assess(input({ transfer: wrongName })))).toEqual(['SENDER_NAME_MISMATCH']);
    expect(assess(input({ transfer: wrongName })).reasons[0]).toMatchObject({ detail: { registered_name_masked: 'สม*** ใจ***' } });
    expect(codes(assess(input({ transfer: { ...wrongName, amount_minor: 9_000 } })))).toEqual(['SENDER_NAME_MISMATCH', 'AMOUNT_MISMATCH']);
    const elsewhere = transfer({ receiver: { bank_code: '069', account_number: 'xxxxx9888x', name_th: 'ศิริพร ใ', name_en: null } });
    const result = assess(input({ transfer: elsewhere }));
    expect(codes(result)).toEqual(['RECEIVER_MISMATCH']);
    expect(result.reasons[0]).not.toHaveProperty('detail');
    expect(result.verification).toMatchObject({ receiver_match: false, amount_exact: false });
  });

  it('the sender: another bank, another account, and a registered sender whose name the bank prints its own way', () => {
    expect(codes(assess(input({ transfer: transfer({ sender: { ...transfer().sender, bank_code: '002' } }) })))).toEqual(['SENDER_BANK_MISMATCH']);
    expect(codes(assess(input({ transfer: transfer({ sender: { ...transfer().sender, account_number: 'xxxxx1111x' } }) })))).toEqual(['SENDER_ACCOUNT_MISMATCH']);
    const oddlyPrinted = transfer({ sender: { ...transfer().sender, name_th: 'SOMCHAI JAIDEE', name_en: null } });
    expect(codes(assess(input({ transfer: oddlyPrinted })))).toEqual(['SENDER_NAME_MISMATCH']);
    expect(assess(input({ transfer: oddlyPrinted, sender: { ...input().sender, registered: true } }))).toMatchObject({ next: 'settle', reasons: [] });
    // A registered sender: no review for another account (its bank or its number) or name (spec, sender_id).
    const registered = { ...input().sender, registered: true };
    const otherAccount = transfer({ sender: { ...transfer().sender, account_number: 'xxxxx1111x', name_th: 'วิภาวรรณ ศ', name_en: null } });
    expect(assess(input({ transfer: otherAccount, sender: registered }))).toMatchObject({
      next: 'settle',
      reasons: [],
      verification: { sender_bank_match: true, sender_account_match: false, sender_name_match: false },
    });
    const otherBank = transfer({ sender: { ...transfer().sender, bank_code: '002', name_th: 'วิภาวรรณ ศ', name_en: null } });
    expect(assess(input({ transfer: otherBank, sender: registered }))).toMatchObject({ next: 'settle', reasons: [], verification: { sender_bank_match: false, sender_account_match: false } });
  });

  it('time: late after the deadline (beyond the allowance for bank clocks), and before the order had a destination', () => {
    const at = (milliseconds: number) => transfer({ occurred_at: new Date(milliseconds) });
    expect(assess(input({ transfer: at(DEADLINE.getTime() + TIME_SKEW_ALLOWANCE_MS) })).next).toBe('settle');
    const late = assess(input({ transfer: at(DEADLINE.getTime() + TIME_SKEW_ALLOWANCE_MS + 1) }));
    expect(codes(late)).toEqual(['LATE_SLIP']);
    expect(late.reasons[0]?.detail).toEqual({ deadline_at: DEADLINE.toISOString() });
    expect(codes(assess(input({ transfer: at(MATCHED_AT.getTime() - TIME_SKEW_ALLOWANCE_MS - 1) })))).toEqual(['TRANSFER_BEFORE_ORDER']);
  });

  it('a duplicate and a reference without an image always go to a person', () => {
    expect(codes(assess(input({ duplicate: true })))).toEqual(['DUPLICATE_SLIP']);
    expect(codes(assess(input({ reference_only: true })))).toEqual(['NO_SLIP_IMAGE']);
  });
});

describe('multi-leg orders', () => {
  const legs = [
    leg({ leg_ref: 'dleg_1', sequence: 1, amount_minor: 40_000 }),
    leg({
      leg_ref: 'dleg_2',
      sequence: 2,
      amount_minor: 20_000,
      receiver: { bank_code: '004', account_number: '0123456789', account_name_th: 'สมหญิง รักไทย' },
    }),
  ];
  const order = { amount_minor: 60_000, expires_at: DEADLINE, slip_is_late: false, status: 'slip_processing' as const };
  const toSecond = { bank_code: '004', account_number: 'xxxxx5678x', name_th: 'สมหญิง ร', name_en: null };

  it('maps a slip to the leg whose receiver it names, and waits for the others while there is time', () => {
    const result = assess(input({ order, legs, transfer: transfer({ amount_minor: 20_000, receiver: toSecond }) }));
    expect(result).toMatchObject({ next: 'wait', leg_ref: 'dleg_2', paid_by_leg: { dleg_2: 20_000 }, transferred_minor: 20_000, reasons: [] });
    expect(result.verification.amount_exact).toBe(false);
  });

  it('settles once every leg is paid, on the sum, and short at the deadline on what was paid', () => {
    const paid = [{ ...legs[0]!, paid_minor: 40_000 }, legs[1]!];
    expect(assess(input({ order, legs: paid, transfer: transfer({ amount_minor: 20_000, receiver: toSecond }) }))).toMatchObject({
      next: 'settle',
      transferred_minor: 60_000,
      paid_by_leg: { dleg_1: 40_000, dleg_2: 20_000 },
      verification: { amount_exact: true },
    });
    const afterDeadline = assess(input({ order, legs, transfer: transfer({ amount_minor: 20_000, receiver: toSecond }), now: new Date(DEADLINE.getTime() + 1) }));
    expect(afterDeadline).toMatchObject({ next: 'settle', transferred_minor: 20_000, paid_by_leg: { dleg_2: 20_000 } });
  });

  it("the brand's policy hold: a slip that would settle goes to review with POLICY_HOLD; a leg paid with others unpaid still waits", () => {
    const paid = [{ ...legs[0]!, paid_minor: 40_000 }, legs[1]!];
    const held = assess(input({ order, legs: paid, transfer: transfer({ amount_minor: 20_000, receiver: toSecond }), policy_hold: true }));
    expect(held).toMatchObject({ next: 'review', transferred_minor: 60_000, verification: { amount_exact: true } });
    expect(codes(held)).toEqual(['POLICY_HOLD']);
    expect(assess(input({ order, legs, transfer: transfer({ amount_minor: 20_000, receiver: toSecond }), policy_hold: true }))).toMatchObject({ next: 'wait', reasons: [] });
    // A short slip on a held order says how much it moved, the spec's AMOUNT_MISMATCH before our POLICY_HOLD.
    expect(codes(assess(input({ transfer: transfer({ amount_minor: 9_000 }), policy_hold: true })))).toEqual(['AMOUNT_MISMATCH', 'POLICY_HOLD']);
    expect(policyHolds({ amount_minor: 60_000 }, 60_000)).toBe(true);
    expect(policyHolds({ amount_minor: 59_900 }, 60_000)).toBe(false);
    expect(policyHolds({ amount_minor: 60_000 }, null)).toBe(false);
  });

  it('one leg paid more and another less is AMOUNT_MISMATCH, even when the sum is right', () => {
    const paid = [{ ...legs[0]!, paid_minor: 45_000 }, legs[1]!];
    const result = assess(input({ order, legs: paid, transfer: transfer({ amount_minor: 15_000, receiver: toSecond }) }));
    expect(result.next).toBe('review');
    expect(result.reasons).toEqual([expect.objectContaining({ code: 'AMOUNT_MISMATCH', detail: { expected_minor: 60_000, observed_minor: 60_000 } })]);
  });

  it('legs that share a receiver: an unpaid one first, of the same amount; otherwise AMBIGUOUS_MATCH', () => {
    const twins = [leg({ leg_ref: 'dleg_1', amount_minor: 40_000 }), leg({ leg_ref: 'dleg_2', sequence: 2, amount_minor: 20_000 })];
    expect(assess(input({ order, legs: twins, transfer: transfer({ amount_minor: 20_000 }) })).leg_ref).toBe('dleg_2');
    const ambiguous = assess(input({ order, legs: twins, transfer: transfer({ amount_minor: 30_000 }) }));
    expect(codes(ambiguous)).toEqual(['AMOUNT_MISMATCH', 'AMBIGUOUS_MATCH']);
    expect(ambiguous.verification.receiver_match).toBe(true);
  });
});

describe('the reason catalogue', () => {
  it('orders reasons by importance, each code once, and never gives RECEIVER_MISMATCH a detail', () => {
    const ordered = orderReasons([reviewReason('AMOUNT_MISMATCH', { expected_minor: 1, observed_minor: 2 }), reviewReason('LATE_SLIP'), reviewReason('RECEIVER_MISMATCH', { x: 1 }), reviewReason('LATE_SLIP')]);
    expect(ordered.map((reason) => reason.code)).toEqual(['AMOUNT_MISMATCH', 'LATE_SLIP', 'RECEIVER_MISMATCH']);
    expect(ordered[2]).not.toHaveProperty('detail');
  });

  it("follows the spec's listing of the codes, NO_SLIP_IMAGE first, and ranks our own codes after every code of the spec", () => {
    const specListing = ['SENDER_NAME_MISMATCH', 'AMOUNT_MISMATCH', 'NO_SLIP_IMAGE', 'DUPLICATE_SLIP', 'CANCELED_ORDER_SLIP', 'LATE_SLIP', 'BANK_DISABLED', 'ALLOCATION_CONFLICT', 'AMBIGUOUS_MATCH', 'RECEIVER_MISMATCH'];
    const ours = REVIEW_REASON_ORDER.filter((code) => !specListing.includes(code));
    expect(REVIEW_REASON_ORDER).toEqual(['NO_SLIP_IMAGE', ...specListing.filter((code) => code !== 'NO_SLIP_IMAGE'), ...ours]);
    expect(ours).toEqual(['SENDER_BANK_MISMATCH', 'SENDER_ACCOUNT_MISMATCH', 'TRANSFER_NOT_FOUND', 'TRANSFER_BEFORE_ORDER', 'POLICY_HOLD']);
    // Every reason at once: the spec's codes first, in its order, ours behind them.
    const everything = orderReasons([...REVIEW_REASON_ORDER].reverse().map((code) => reviewReason(code)));
    expect(everything.map((reason) => reason.code)).toEqual([...REVIEW_REASON_ORDER]);
    for (const code of REVIEW_REASON_ORDER) {
      expect(reviewReason(code)).toMatchObject({ code, display_th: expect.stringMatching(/[\u0e00-\u0e7f]/), display_en: expect.any(String), actionable_by: expect.stringMatching(/^(end_user|support)$/) });
    }
  });
});
