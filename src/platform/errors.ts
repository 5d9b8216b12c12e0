import { z } from 'zod';

/**
 * The closed catalogue of error codes. Every non-2xx response of every route is rendered from here by
 * `renderError`, and `codeToStatus` is the one place that maps a code to its HTTP status. Codes named
 * by the spec keep the spec's status and retryability; the few added here are recorded in
 * docs/decisions/errors.md.
 */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'idempotency_error'
  | 'rate_limit_error'
  | 'api_error';

interface CatalogueEntry {
  readonly status: number;
  readonly type: ErrorType;
  readonly retryable: boolean;
  readonly message: string;
  readonly message_th: string;
}

const catalogue = {
  signature_invalid: {
    status: 401, type: 'authentication_error', retryable: false,
    message: 'The request signature does not match the canonical string.',
    message_th: 'ลายเซ็นของคำขอไม่ตรงกับข้อความมาตรฐาน',
  },
  timestamp_out_of_window: {
    status: 401, type: 'authentication_error', retryable: true,
    message: 'PG-Timestamp is more than 300 seconds away from the server time; synchronise the clock and sign again.',
    message_th: 'PG-Timestamp ต่างจากเวลาของระบบเกิน 300 วินาที กรุณาตั้งเวลาให้ตรงแล้วลงลายเซ็นใหม่',
  },
  nonce_replayed: {
    status: 401, type: 'authentication_error', retryable: false,
    message: 'PG-Nonce was already used within the last 10 minutes.',
    message_th: 'PG-Nonce นี้ถูกใช้ไปแล้วภายใน 10 นาทีที่ผ่านมา',
  },
  api_key_invalid: {
    status: 401, type: 'authentication_error', retryable: false,
    message: 'The API key does not exist or belongs to another environment.',
    message_th: 'ไม่พบคีย์ API หรือคีย์นี้เป็นของสภาพแวดล้อมอื่น',
  },
  api_key_revoked: {
    status: 401, type: 'authentication_error', retryable: false,
    message: 'The API key has been revoked.',
    message_th: 'คีย์ API ถูกเพิกถอนแล้ว',
  },
  slip_token_invalid: {
    status: 401, type: 'authentication_error', retryable: false,
    message: 'The slip upload capability is missing, malformed, or not valid for this address.',
    message_th: 'สิทธิ์การอัปโหลดสลิปไม่มี ไม่ถูกต้อง หรือใช้กับที่อยู่นี้ไม่ได้',
  },
  slip_token_expired: {
    status: 401, type: 'authentication_error', retryable: false,
    message: 'The slip upload capability has expired; the merchant can issue a new one while the order takes slips.',
    message_th: 'สิทธิ์การอัปโหลดสลิปหมดอายุแล้ว ร้านค้าสามารถออกสิทธิ์ใหม่ได้หากรายการยังรับสลิปอยู่',
  },
  tenant_suspended: {
    status: 403, type: 'permission_error', retryable: false,
    message: 'An account in the chain brand, merchant, key is suspended.',
    message_th: 'บัญชีในลำดับแบรนด์ ร้านค้า หรือคีย์ ถูกระงับการใช้งาน',
  },
  scope_denied: {
    status: 403, type: 'permission_error', retryable: false,
    message: 'The credential lacks the scope for this endpoint.',
    message_th: 'ข้อมูลรับรองนี้ไม่มีสิทธิ์เรียกใช้ปลายทางนี้',
  },
  idempotency_key_required: {
    status: 400, type: 'invalid_request_error', retryable: false,
    message: 'Every POST needs an Idempotency-Key header.',
    message_th: 'คำขอ POST ทุกครั้งต้องมีส่วนหัว Idempotency-Key',
  },
  malformed_json: {
    status: 400, type: 'invalid_request_error', retryable: false,
    message: 'The request body is not valid JSON.',
    message_th: 'เนื้อหาคำขอไม่ใช่ JSON ที่ถูกต้อง',
  },
  unsupported_media_type: {
    status: 400, type: 'invalid_request_error', retryable: false,
    message: 'The Content-Type is not accepted by this endpoint.',
    message_th: 'ปลายทางนี้ไม่รองรับ Content-Type ที่ส่งมา',
  },
  cursor_filter_mismatch: {
    status: 400, type: 'invalid_request_error', retryable: false,
    message: 'Filters changed while paging with a cursor; only limit may change between pages.',
    message_th: 'ตัวกรองเปลี่ยนไประหว่างการแบ่งหน้า เปลี่ยนได้เฉพาะ limit เท่านั้น',
  },
  api_version_unsupported: {
    status: 400, type: 'invalid_request_error', retryable: false,
    message: 'PG-Version names an API version this service does not support.',
    message_th: 'PG-Version ระบุเวอร์ชัน API ที่ระบบไม่รองรับ',
  },
  validation_error: {
    status: 422, type: 'invalid_request_error', retryable: false,
    message: 'One or more fields are malformed.',
    message_th: 'ข้อมูลบางช่องไม่ถูกต้อง',
  },
  sender_required: {
    status: 422, type: 'invalid_request_error', retryable: false,
    message: 'Either sender or sender_id is required.',
    message_th: 'ต้องระบุ sender หรือ sender_id อย่างใดอย่างหนึ่ง',
  },
  amount_not_supported: {
    status: 422, type: 'invalid_request_error', retryable: false,
    message: 'The amount is outside the policy range or is not a whole baht.',
    message_th: 'จำนวนเงินอยู่นอกช่วงที่กำหนดหรือไม่เป็นจำนวนบาทเต็ม',
  },
  review_note_required: {
    status: 422, type: 'invalid_request_error', retryable: false,
    message: 'A reviewer note of at least 20 characters is required.',
    message_th: 'ต้องมีบันทึกของผู้ตรวจสอบอย่างน้อย 20 ตัวอักษร',
  },
  insufficient_balance: {
    status: 402, type: 'invalid_request_error', retryable: true,
    message: 'The available balance is below the amount plus fee; nothing was created or locked.',
    message_th: 'ยอดเงินที่ใช้ได้ต่ำกว่าจำนวนเงินรวมค่าธรรมเนียม ไม่มีการสร้างรายการหรือกันเงิน',
  },
  resource_not_found: {
    status: 404, type: 'invalid_request_error', retryable: false,
    message: 'No such resource in the scope of this account.',
    message_th: 'ไม่พบข้อมูลในขอบเขตของบัญชีนี้',
  },
  method_not_allowed: {
    status: 405, type: 'invalid_request_error', retryable: false,
    message: 'This path does not accept the HTTP method used.',
    message_th: 'เส้นทางนี้ไม่รองรับเมธอด HTTP ที่ใช้',
  },
  idempotency_key_reused: {
    status: 409, type: 'idempotency_error', retryable: false,
    message: 'This Idempotency-Key was already used with a different request body.',
    message_th: 'Idempotency-Key นี้ถูกใช้แล้วกับเนื้อหาคำขอที่ต่างกัน',
  },
  idempotency_in_flight: {
    status: 409, type: 'idempotency_error', retryable: true,
    message: 'The first request with this Idempotency-Key is still running.',
    message_th: 'คำขอแรกที่ใช้ Idempotency-Key นี้ยังดำเนินการอยู่',
  },
  sender_bank_unavailable: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: "The sender's bank is not accepting new orders.",
    message_th: 'ธนาคารของผู้โอนไม่รับรายการใหม่ในขณะนี้',
  },
  duplicate_open_deposit: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'An open deposit with the same amount and sender exists.',
    message_th: 'มีรายการฝากที่ยังเปิดอยู่ด้วยจำนวนเงินและผู้โอนเดียวกัน',
  },
  too_many_open_deposits: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The open-order cap for this user is reached.',
    message_th: 'ผู้ใช้นี้มีรายการฝากที่เปิดอยู่ครบจำนวนสูงสุดแล้ว',
  },
  deposit_not_cancelable: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The deposit cannot be canceled in its current status.',
    message_th: 'ไม่สามารถยกเลิกรายการฝากในสถานะปัจจุบันได้',
  },
  deposit_not_payable: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'The deposit has no destination to pay in its current status; a waiting order gets one when it is matched.',
    message_th: 'รายการฝากยังไม่มีบัญชีปลายทางสำหรับชำระในสถานะปัจจุบัน',
  },
  deposit_state_conflict: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'The deposit is not in a status that allows this change; re-read it.',
    message_th: 'สถานะของรายการฝากไม่อนุญาตให้ทำรายการนี้ กรุณาอ่านข้อมูลใหม่',
  },
  deposit_not_reviewable: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The deposit is not under review for another reason.',
    message_th: 'รายการฝากนี้ไม่ได้อยู่ระหว่างการตรวจสอบด้วยเหตุผลอื่น',
  },
  api_key_already_revoked: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The key is revoked, and revocation is final; create a new key instead.',
    message_th: 'คีย์นี้ถูกเพิกถอนแล้วและไม่สามารถเปิดใช้ได้อีก กรุณาสร้างคีย์ใหม่',
  },
  review_already_decided: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This review was already decided (or the order left review); re-read the order.',
    message_th: 'รายการนี้ได้รับการตัดสินการตรวจสอบแล้ว กรุณาอ่านข้อมูลใหม่',
  },
  late_slip_window_open: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: "The order's late-slip window is still open; upload the slip at upload_url instead of opening a claim.",
    message_th: 'ยังอยู่ในช่วงเวลารับสลิปล่าช้า กรุณาอัปโหลดสลิปที่ upload_url แทนการเปิดคำร้อง',
  },
  claim_state_conflict: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The claim is not in a status that allows this decision (someone may have decided it); re-read the claim.',
    message_th: 'สถานะของคำร้องไม่อนุญาตให้ดำเนินการนี้ (อาจมีผู้อื่นดำเนินการแล้ว) กรุณาอ่านข้อมูลคำร้องใหม่',
  },
  claim_refund_unusable: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: "The refund named cannot resolve this claim: it is not a refund of the claim's deposit, it closed without paying anything, or it resolves another claim (details.reason).",
    message_th: 'ไม่สามารถใช้รายการคืนเงินที่ระบุปิดคำร้องนี้ได้ เนื่องจากไม่ใช่การคืนเงินของรายการฝากของคำร้อง ปิดไปโดยไม่ได้จ่ายเงิน หรือใช้ปิดคำร้องอื่นแล้ว (ดู details.reason)',
  },
  four_eyes_same_reviewer: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This review needs two different people to approve it; you already approved it, with this or another of your credentials.',
    message_th: 'รายการนี้ต้องได้รับการอนุมัติจากบุคคลสองคนที่ต่างกัน และท่านได้อนุมัติไปแล้ว ไม่ว่าจะด้วยข้อมูลรับรองนี้หรือข้อมูลรับรองอื่นของท่าน',
  },
  escalation_same_reviewer: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'You escalated this review, with this or another of your credentials; another reviewer must approve or reject it.',
    message_th: 'ท่านเป็นผู้ส่งต่อ (escalate) รายการนี้ ไม่ว่าจะด้วยข้อมูลรับรองนี้หรือข้อมูลรับรองอื่นของท่าน ผู้ตรวจสอบคนอื่นต้องเป็นผู้อนุมัติหรือปฏิเสธรายการนี้',
  },
  evidence_limit_reached: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This order has taken as many evidence items or force-complete requests as it accepts.',
    message_th: 'รายการนี้ได้รับหลักฐานหรือคำขอครบจำนวนสูงสุดแล้ว',
  },
  dispute_window_closed: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This fill can no longer be disputed: its receipt was confirmed (auto_confirm_at passed) or it was reversed.',
    message_th: 'ไม่สามารถโต้แย้งรายการนี้ได้แล้ว เนื่องจากยืนยันการรับเงินแล้วหรือรายการถูกยกเลิกคืน',
  },
  fill_already_disputed: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This fill already has a dispute; a fill can be disputed once.',
    message_th: 'รายการนี้มีการโต้แย้งอยู่แล้ว โต้แย้งได้เพียงครั้งเดียวต่อรายการ',
  },
  dispute_evidence_closed: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'Evidence for this dispute was due before respond_by, or the dispute is resolved.',
    message_th: 'หมดเวลาส่งหลักฐานสำหรับข้อโต้แย้งนี้แล้ว หรือข้อโต้แย้งได้รับการตัดสินแล้ว',
  },
  dispute_already_resolved: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This dispute was already resolved; re-read it.',
    message_th: 'ข้อโต้แย้งนี้ได้รับการตัดสินแล้ว กรุณาอ่านข้อมูลใหม่',
  },
  dispute_not_resolvable: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The money this dispute is about was moved by another decision; this outcome no longer applies.',
    message_th: 'เงินที่เกี่ยวข้องกับข้อโต้แย้งนี้ถูกดำเนินการโดยการตัดสินอื่นแล้ว ผลการตัดสินนี้ใช้ไม่ได้',
  },
  withdrawal_has_pending_fill: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'Part of the withdrawal is being transferred; retry after the time given.',
    message_th: 'มีบางส่วนของรายการถอนกำลังโอนอยู่ กรุณาลองใหม่ตามเวลาที่ระบุ',
  },
  withdrawal_not_cancelable: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The withdrawal is already settled, expired or canceled.',
    message_th: 'รายการถอนสำเร็จ หมดอายุ หรือถูกยกเลิกไปแล้ว',
  },
  withdrawal_not_pending_approval: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The withdrawal is not waiting for approval.',
    message_th: 'รายการถอนนี้ไม่ได้อยู่ระหว่างรอการอนุมัติ',
  },
  merchant_reference_in_use: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'Another order of this merchant already uses this merchant_reference.',
    message_th: 'merchant_reference นี้ถูกใช้กับรายการอื่นของร้านค้าแล้ว',
  },
  deposit_not_refundable: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'Only a settled deposit can be refunded.',
    message_th: 'คืนเงินได้เฉพาะรายการฝากที่สำเร็จแล้วเท่านั้น',
  },
  refund_exceeds_refundable: {
    status: 422, type: 'invalid_request_error', retryable: false,
    message: 'The refund is more than what is left to refund of this deposit; details.refundable_minor says what is left.',
    message_th: 'จำนวนเงินคืนเกินยอดที่ยังคืนได้ของรายการฝากนี้ ดูยอดที่เหลือได้ที่ details.refundable_minor',
  },
  refund_limit_reached: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This deposit already has the most refunds allowed.',
    message_th: 'รายการฝากนี้มีรายการคืนเงินครบจำนวนสูงสุดแล้ว',
  },
  refund_payee_unverified: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The bank did not verify the sending account of this deposit as the one declared, so there is no account to refund to; contact support.',
    message_th: 'ธนาคารไม่ได้ยืนยันว่าบัญชีผู้โอนของรายการฝากนี้ตรงกับที่แจ้งไว้ จึงไม่มีบัญชีสำหรับคืนเงิน กรุณาติดต่อฝ่ายสนับสนุน',
  },
  webhook_endpoint_disabled: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'The webhook endpoint is disabled; enable it before resending or replaying deliveries.',
    message_th: 'ปลายทาง webhook ถูกปิดใช้งานอยู่ กรุณาเปิดใช้งานก่อนส่งซ้ำหรือเล่นซ้ำรายการ',
  },
  test_clock_advancing: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'The sandbox test clock is advancing; retry once its status is ready again.',
    message_th: 'นาฬิกาทดสอบของแซนด์บ็อกซ์กำลังเดินเวลา กรุณาลองใหม่เมื่อสถานะกลับเป็น ready',
  },
  test_clock_already_attached: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'Another test clock is attached to this sandbox; detach it first.',
    message_th: 'มีนาฬิกาทดสอบอื่นผูกกับแซนด์บ็อกซ์นี้อยู่ กรุณายกเลิกการผูกก่อน',
  },
  beneficiary_not_verified: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'The beneficiary account is not verified yet; no order was created.',
    message_th: 'บัญชีผู้รับเงินยังไม่ผ่านการตรวจสอบ ไม่มีการสร้างรายการ',
  },
  alloc_state_conflict: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'The fill changed state during the request; re-read and retry.',
    message_th: 'สถานะการจับคู่เปลี่ยนไประหว่างคำขอ กรุณาอ่านใหม่แล้วลองอีกครั้ง',
  },
  withdrawal_state_conflict: {
    status: 409, type: 'invalid_request_error', retryable: true,
    message: 'The withdrawal changed state during the request; re-read and retry.',
    message_th: 'สถานะรายการถอนเปลี่ยนไประหว่างคำขอ กรุณาอ่านใหม่แล้วลองอีกครั้ง',
  },
  slip_limit_reached: {
    status: 409, type: 'invalid_request_error', retryable: false,
    message: 'This order has taken its 3 slip uploads; contact support about any further transfer.',
    message_th: 'รายการนี้รับสลิปครบ 3 ครั้งแล้ว กรุณาติดต่อฝ่ายบริการเกี่ยวกับการโอนเพิ่มเติม',
  },
  late_slip_window_closed: {
    status: 410, type: 'invalid_request_error', retryable: false,
    message: 'The 24-hour late-slip window has closed; open a claim instead.',
    message_th: 'หมดเวลารับสลิปล่าช้า 24 ชั่วโมงแล้ว กรุณาเปิดคำร้องแทน',
  },
  slip_evidence_purged: {
    status: 410, type: 'invalid_request_error', retryable: false,
    message: 'The slip image was deleted under the evidence retention; its receipt and verification result remain.',
    message_th: 'ภาพสลิปถูกลบตามระยะเวลาการเก็บหลักฐานแล้ว ใบรับและผลการตรวจสอบยังคงอยู่',
  },
  malformed_request: {
    status: 400, type: 'invalid_request_error', retryable: false,
    message: 'The request is not valid HTTP/1.1 (request line, target or framing headers).',
    message_th: 'คำขอไม่เป็นไปตามรูปแบบ HTTP/1.1 (บรรทัดคำขอ ที่อยู่ หรือส่วนหัวกำหนดขนาดเนื้อหา)',
  },
  request_timeout: {
    status: 408, type: 'invalid_request_error', retryable: true,
    message: 'The request was not received in full in time.',
    message_th: 'ได้รับคำขอไม่ครบภายในเวลาที่กำหนด',
  },
  request_headers_too_large: {
    status: 431, type: 'invalid_request_error', retryable: false,
    message: 'The request headers are larger than the service accepts.',
    message_th: 'ส่วนหัวของคำขอมีขนาดใหญ่เกินกว่าที่ระบบรับได้',
  },
  request_too_large: {
    status: 413, type: 'invalid_request_error', retryable: false,
    message: 'The request body is larger than this endpoint accepts.',
    message_th: 'เนื้อหาคำขอมีขนาดใหญ่เกินกว่าที่ปลายทางนี้รับได้',
  },
  rate_limited: {
    status: 429, type: 'rate_limit_error', retryable: true,
    message: 'The quota bucket is exhausted; honour Retry-After with about 20 percent jitter.',
    message_th: 'เกินโควตาคำขอ กรุณารอตาม Retry-After โดยสุ่มเวลาเพิ่มประมาณร้อยละ 20',
  },
  internal_error: {
    status: 500, type: 'api_error', retryable: true,
    message: 'The service failed to handle the request.',
    message_th: 'ระบบขัดข้องระหว่างดำเนินการคำขอ',
  },
  route_unavailable: {
    status: 503, type: 'api_error', retryable: true,
    message: 'No route is available to open a new deposit right now.',
    message_th: 'ขณะนี้ไม่มีช่องทางเปิดรายการฝากใหม่',
  },
  service_unavailable: {
    status: 503, type: 'api_error', retryable: true,
    message: 'The service is shedding load or shutting down.',
    message_th: 'ระบบกำลังลดภาระหรือกำลังปิดให้บริการชั่วคราว',
  },
  slip_intake_unavailable: {
    status: 503, type: 'api_error', retryable: true,
    message: 'Durable slip intake could not be confirmed; retry the same evidence with the same key.',
    message_th: 'ไม่สามารถยืนยันการรับสลิปได้ กรุณาส่งหลักฐานเดิมด้วยคีย์เดิมอีกครั้ง',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof catalogue;

export const ERROR_CODES = Object.keys(catalogue) as ErrorCode[];

export function codeToStatus(code: ErrorCode): number {
  return catalogue[code].status;
}

export function isErrorCode(text: string): text is ErrorCode {
  return Object.hasOwn(catalogue, text);
}

/** One field problem inside `validation_error.details.fields[]`. */
export interface FieldProblem {
  path: string;
  reason: string;
  hint?: string;
}

export interface ErrorOptions {
  details?: Record<string, unknown>;
  retry_after_seconds?: number | null;
  /** Overrides the English message where a more specific one helps; never carries secrets. */
  message?: string;
  /**
   * Keep the writes the request made before this error (normally an error rolls them back). For an
   * answer whose side effect must survive it, such as 409 `beneficiary_not_verified` after an inline
   * beneficiary was created and its verification enqueued. The error is still not stored as the
   * idempotency key's answer, so a retry with the same key runs anew.
   */
  commit_writes?: boolean;
  /**
   * Whether a retry may succeed, where the code's catalogue entry is right for most cases but not this one:
   * `deposit_not_payable` is retryable for an order still waiting for a destination, never for one that is
   * final. Without it, the catalogue's `retryable` holds.
   */
  retryable?: boolean;
}

/**
 * An expected failure with a catalogue code. Business code returns these as values where it can
 * (`Result`), and throws them only to unwind an HTTP request.
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  readonly retry_after_seconds: number | null;
  readonly commit_writes: boolean;
  /** True when a retry may succeed (`error.retryable` of the body). */
  readonly retryable: boolean;

  constructor(code: ErrorCode, options: ErrorOptions = {}) {
    super(options.message ?? catalogue[code].message);
    this.name = 'ApiError';
    this.code = code;
    this.details = options.details ?? {};
    this.retry_after_seconds = options.retry_after_seconds ?? null;
    this.commit_writes = options.commit_writes ?? false;
    this.retryable = options.retryable ?? catalogue[code].retryable;
  }

  get status(): number {
    return codeToStatus(this.code);
  }
}

export function validationError(fields: FieldProblem[]): ApiError {
  return new ApiError('validation_error', { details: { fields } });
}

export interface ErrorBody {
  error: {
    code: ErrorCode;
    type: ErrorType;
    message: string;
    message_th: string;
    retryable: boolean;
    retry_after_seconds: number | null;
    request_id: string;
    details: Record<string, unknown>;
  };
}

/** The one error renderer: every non-2xx body of the service has this shape. */
export function renderError(error: ApiError, request_id: string): ErrorBody {
  const entry: CatalogueEntry = catalogue[error.code];
  return {
    error: {
      code: error.code,
      type: entry.type,
      message: error.message,
      message_th: entry.message_th,
      retryable: error.retryable,
      retry_after_seconds: error.retry_after_seconds,
      request_id,
      details: error.details,
    },
  };
}

const ERROR_TYPES = [
  'invalid_request_error',
  'authentication_error',
  'permission_error',
  'idempotency_error',
  'rate_limit_error',
  'api_error',
] as const satisfies readonly ErrorType[];

/**
 * The error body as a zod schema, for the OpenAPI document (src/openapi/): `code` is the closed catalogue
 * above, and the document narrows it per HTTP status and route.
 */
export const errorBodySchema = z
  .object({
    error: z
      .object({
        code: z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]).meta({ description: 'Branch on this only. New codes may appear in a later version: keep a default branch that honours `retryable`.' }),
        type: z.enum(ERROR_TYPES),
        message: z.string().meta({ description: 'English text.' }),
        message_th: z.string().meta({ description: "Thai text for the merchant's staff, not for end users." }),
        retryable: z.boolean(),
        retry_after_seconds: z.number().int().nullable().meta({ description: 'Set when the wait is known (429, 503, some 409s).' }),
        request_id: z.string().meta({ description: 'The Request-Id header of this answer: log it always.' }),
        details: z
          .record(z.string(), z.unknown())
          .meta({ description: 'Shape varies by code; `validation_error` has `fields[]` items with `path`, `reason` and an optional `hint`.' }),
      })
      .strict(),
  })
  .strict()
  .meta({ id: 'error', description: 'The body of every non-2xx answer.' });

/** The error body type and its schema stay one: a change to either without the other fails the type check. */
type SameShape<Left, Right> = [Left] extends [Right] ? ([Right] extends [Left] ? true : false) : false;
const errorBodySchemaMatches: SameShape<z.output<typeof errorBodySchema>, ErrorBody> = true;
void errorBodySchemaMatches;

/** A business outcome: either a value or a catalogue error, returned rather than thrown. */
export type Result<T> = { ok: true; value: T } | { ok: false; error: ApiError };

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function fail<T = never>(code: ErrorCode, options?: ErrorOptions): Result<T> {
  return { ok: false, error: new ApiError(code, options) };
}

/** A route's end of a Result: the value, or its refusal thrown for the error renderer. */
export function unwrap<T>(result: Result<T>): T {
  if (!result.ok) throw result.error;
  return result.value;
}
