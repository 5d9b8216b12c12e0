import type { RejectionObject } from '../deposits/types.ts';

/**
 * The codes a reviewer or an operator chooses from, with the texts the merchant's end user sees.
 *
 * Rejection codes (`rejection.code`, an open enum whose list the spec does not show) are ours,
 * recorded in docs/decisions/review-desk.md; each names why the money was not accepted, in words an end user can
 * act on. The reviewer's own note never reaches these texts.
 *
 * Reversal reason codes (`reversal.reason_code`) are the spec's six, copied from it.
 */
export const REJECTION_CODES = [
  'TRANSFER_NOT_RECEIVED',
  'SLIP_NOT_GENUINE',
  'SENDER_NOT_ACCOUNT_HOLDER',
  'PAID_TO_WRONG_ACCOUNT',
  'SLIP_ALREADY_USED',
  'AMOUNT_NOT_VERIFIED',
  'PAYMENT_OUTSIDE_WINDOW',
] as const;
export type RejectionCode = (typeof REJECTION_CODES)[number];

const REJECTION_TEXTS: Record<RejectionCode, Omit<RejectionObject, 'code'>> = {
  TRANSFER_NOT_RECEIVED: {
    display_th: 'ไม่พบเงินโอนเข้าบัญชีปลายทางสำหรับรายการนี้ กรุณาติดต่อฝ่ายบริการ',
    display_en: 'No transfer for this payment reached the destination account; please contact support.',
  },
  SLIP_NOT_GENUINE: {
    display_th: 'สลิปไม่ผ่านการตรวจสอบความถูกต้อง กรุณาติดต่อฝ่ายบริการ',
    display_en: 'The slip could not be confirmed as genuine; please contact support.',
  },
  SENDER_NOT_ACCOUNT_HOLDER: {
    display_th: 'ชื่อบัญชีผู้โอนไม่ตรงกับผู้ทำรายการ กรุณาโอนจากบัญชีของท่านเอง',
    display_en: "The sending account does not belong to the payer; please pay from your own account.",
  },
  PAID_TO_WRONG_ACCOUNT: {
    display_th: 'เงินถูกโอนไปยังบัญชีอื่นที่ไม่ใช่บัญชีที่กำหนด กรุณาติดต่อฝ่ายบริการ',
    display_en: 'The money was sent to another account than the one given; please contact support.',
  },
  SLIP_ALREADY_USED: {
    display_th: 'สลิปนี้ถูกใช้กับรายการอื่นแล้ว',
    display_en: 'This slip was already used for another payment.',
  },
  AMOUNT_NOT_VERIFIED: {
    display_th: 'ไม่สามารถยืนยันจำนวนเงินที่โอนได้ กรุณาติดต่อฝ่ายบริการ',
    display_en: 'The amount transferred could not be confirmed; please contact support.',
  },
  PAYMENT_OUTSIDE_WINDOW: {
    display_th: 'การโอนเงินเกิดขึ้นนอกเวลาที่รับชำระ กรุณาติดต่อฝ่ายบริการ',
    display_en: 'The transfer was made outside the payment window; please contact support.',
  },
};

export function rejectionOf(code: RejectionCode): RejectionObject {
  return { code, ...REJECTION_TEXTS[code] };
}

/** The spec's `reversal.reason_code` values. */
export const REVERSAL_REASON_CODES = ['BANK_RECALL', 'ACCOUNT_FROZEN', 'SLIP_INVALIDATED_AFTER_SETTLEMENT', 'DUPLICATE_CREDIT', 'OPS_ERROR', 'MERCHANT_DISPUTE_LOST'] as const;
export type ReversalReasonCode = (typeof REVERSAL_REASON_CODES)[number];

/** `reason_display_th` of the reversal's balance movement (spec, balance_transaction). */
export const REVERSAL_DISPLAY_TH: Record<ReversalReasonCode, string> = {
  BANK_RECALL: 'ธนาคารเรียกคืนเงินโอน',
  ACCOUNT_FROZEN: 'บัญชีถูกอายัด',
  SLIP_INVALIDATED_AFTER_SETTLEMENT: 'สลิปถูกยกเลิกหลังการชำระเงิน',
  DUPLICATE_CREDIT: 'รายการเครดิตซ้ำ',
  OPS_ERROR: 'แก้ไขข้อผิดพลาดในการดำเนินงาน',
  MERCHANT_DISPUTE_LOST: 'ร้านค้าแพ้ข้อโต้แย้ง',
};
