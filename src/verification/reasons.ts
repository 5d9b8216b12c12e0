import type { ReviewReason } from '../deposits/types.ts';
import { CANCELED_ORDER_SLIP_REASON, POLICY_HOLD_REASON } from '../deposits/service.ts';

/**
 * The review reasons a slip can raise (spec, review: `reasons[]`), with the end-user texts the spec
 * asks for (`display_th` is shown to the payer as given) and who can act. The spec's codes are copied
 * from it; the five that end in a question the spec does not list (a sender bank or account other than
 * the declared one, a transfer the bank does not know, one made before the order had a destination, and
 * the brand's policy hold) are ours, recorded in docs/decisions/verification.md.
 *
 * `REVIEW_REASON_ORDER` is the order of importance: `reasons[0]` is the one to display. It follows the
 * spec's own listing of the reason codes ("Reason codes that appear: …"), with one move: NO_SLIP_IMAGE
 * comes first, because a reference-only submission "always forces `under_review` with `NO_SLIP_IMAGE`"
 * whatever else the bank says, and it is the one reason the payer can act on (upload the image). Our own
 * codes come after every code of the spec, in the order the checks raise them, the policy hold last: any
 * finding about the slip says more to the payer than the brand's hold.
 */
export const REVIEW_REASON_ORDER = [
  'NO_SLIP_IMAGE',
  'SENDER_NAME_MISMATCH',
  'AMOUNT_MISMATCH',
  'DUPLICATE_SLIP',
  'CANCELED_ORDER_SLIP',
  'LATE_SLIP',
  'BANK_DISABLED',
  'ALLOCATION_CONFLICT',
  'AMBIGUOUS_MATCH',
  'RECEIVER_MISMATCH',
  'SENDER_BANK_MISMATCH',
  'SENDER_ACCOUNT_MISMATCH',
  'TRANSFER_NOT_FOUND',
  'TRANSFER_BEFORE_ORDER',
  'POLICY_HOLD',
] as const;
export type ReviewReasonCode = (typeof REVIEW_REASON_ORDER)[number];

type ReasonText = Omit<ReviewReason, 'code' | 'detail'>;

const TEXTS: Record<ReviewReasonCode, ReasonText> = {
  RECEIVER_MISMATCH: {
    display_th: 'บัญชีปลายทางในสลิปไม่ตรงกับบัญชีที่ให้โอน เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The slip shows a transfer to another account than the one given; support is checking it.',
    actionable_by: 'support',
  },
  DUPLICATE_SLIP: {
    display_th: 'สลิปนี้ถูกใช้กับรายการอื่นแล้ว เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'This slip has already been used for a payment; support is checking it.',
    actionable_by: 'support',
  },
  TRANSFER_NOT_FOUND: {
    display_th: 'ไม่พบรายการโอนตามสลิปนี้ที่ธนาคาร เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The bank has no record of the transfer on this slip; support is checking it.',
    actionable_by: 'support',
  },
  NO_SLIP_IMAGE: {
    display_th: 'กรุณาอัปโหลดรูปสลิปการโอนเงิน',
    display_en: 'Please upload the image of the transfer slip.',
    actionable_by: 'end_user',
  },
  CANCELED_ORDER_SLIP: {
    display_th: CANCELED_ORDER_SLIP_REASON.display_th,
    display_en: CANCELED_ORDER_SLIP_REASON.display_en,
    actionable_by: CANCELED_ORDER_SLIP_REASON.actionable_by,
  },
  LATE_SLIP: {
    display_th: 'การโอนเงินเกิดขึ้นหลังหมดเวลาชำระ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The transfer was made after the payment deadline; support is checking it.',
    actionable_by: 'support',
  },
  TRANSFER_BEFORE_ORDER: {
    display_th: 'รายการโอนนี้เกิดขึ้นก่อนมีคำสั่งชำระเงินนี้ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The transfer was made before this payment had its destination; support is checking it.',
    actionable_by: 'support',
  },
  ALLOCATION_CONFLICT: {
    display_th: 'บัญชีปลายทางของรายการนี้ถูกใช้กับรายการอื่นแล้ว เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The destination of this payment was given to another payment meanwhile; support is checking it.',
    actionable_by: 'support',
  },
  BANK_DISABLED: {
    display_th: 'ขณะนี้ไม่สามารถตรวจสอบรายการกับธนาคารผู้โอนได้ เจ้าหน้าที่จะตรวจสอบให้',
    display_en: "The sender's bank cannot be checked right now; support will check the transfer.",
    actionable_by: 'support',
  },
  SENDER_ACCOUNT_MISMATCH: {
    display_th: 'บัญชีผู้โอนไม่ตรงกับบัญชีที่แจ้งไว้ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The transfer came from another account than the one declared; support is checking it.',
    actionable_by: 'support',
  },
  SENDER_BANK_MISMATCH: {
    display_th: 'ธนาคารผู้โอนไม่ตรงกับธนาคารที่แจ้งไว้ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The transfer came from another bank than the one declared; support is checking it.',
    actionable_by: 'support',
  },
  SENDER_NAME_MISMATCH: {
    display_th: 'ชื่อบัญชีผู้โอนไม่ตรงกับชื่อที่แจ้งไว้ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: "The sender's account name does not match the declared name; support is checking it.",
    actionable_by: 'support',
  },
  AMOUNT_MISMATCH: {
    display_th: 'ยอดเงินที่โอนไม่ตรงกับยอดที่ต้องชำระ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The amount transferred differs from the amount due; support is checking it.',
    actionable_by: 'support',
  },
  POLICY_HOLD: {
    display_th: POLICY_HOLD_REASON.display_th,
    display_en: POLICY_HOLD_REASON.display_en,
    actionable_by: POLICY_HOLD_REASON.actionable_by,
  },
  AMBIGUOUS_MATCH: {
    display_th: 'ไม่สามารถระบุได้ว่าการโอนนี้เป็นของส่วนใดของรายการ เจ้าหน้าที่กำลังตรวจสอบ',
    display_en: 'The transfer cannot be matched to a single part of this payment; support is checking it.',
    actionable_by: 'support',
  },
};

/** One reason with its texts; `detail` only where the code has one (RECEIVER_MISMATCH never does). */
export function reviewReason(code: ReviewReasonCode, detail?: Record<string, unknown>): ReviewReason {
  const text = TEXTS[code];
  return detail && code !== 'RECEIVER_MISMATCH' ? { code, ...text, detail } : { code, ...text };
}

/** Reasons in the order of importance, each code once (the first occurrence keeps its detail). */
export function orderReasons(reasons: readonly ReviewReason[]): ReviewReason[] {
  const rank = (code: string) => {
    const index = REVIEW_REASON_ORDER.indexOf(code as ReviewReasonCode);
    return index === -1 ? REVIEW_REASON_ORDER.length : index;
  };
  const unique = reasons.filter((reason, index) => reasons.findIndex((other) => other.code === reason.code) === index);
  return [...unique].sort((left, right) => rank(left.code) - rank(right.code));
}
