import type { RecordedRequest } from './fake-slip-provider.ts';
import { bankSlipData, bodyOf, lookUpPayload, startStatefulFake, type FakeAnswer, type FakeProviderBank, type FakeTransfer, type StatefulFakeProvider } from './fake-provider-bank.ts';

/**
 * A local SlipOK, answering as its documentation shows:
 * - https://slipok.com/api-documentation/ (version 1.7: the change log naming codes 1010, 1012, 1013, 1014
 *   and the quota route);
 * - https://slipok.com/api-documentation/check-slip/ (the request: `POST /api/line/apikey/<BRANCH_ID>`,
 *   header `x-authorization`; the answer's fields, examples and the masking note);
 * - the error codes 1000 to 1014 with their messages and the quota answer `{quota, specialQuota,
 *   overQuota}`, as SlipOK's SDKs type them (github.com/PrakritManStudio/slipok-sdk src/types/index.ts,
 *   github.com/xhayper/node-slipok src/types.ts).
 * The HTTP status of an error answer is not documented; this fake answers 400 with the documented body,
 * and the adapter reads the code whatever the status.
 */

export interface FakeSlipOkCredentials {
  branch_id: string;
  key: string;
}

/** The documented messages (Thai, as SlipOK sends them). */
const MESSAGES: Record<number, string> = {
  1000: 'กรุณาใส่ข้อมูล QR Code ให้ครบใน field data, files หรือ url',
  1001: 'ไม่พบข้อมูลสาขา กรุณาตรวจสอบไอดีสาขา',
  1002: 'Authorization Header ไม่ถูกต้อง',
  1004: 'Package ของคุณใช้เกินโควต้ามาแล้ว 400 บาท กรุณาต่อสมาชิกแพ็กเกจ',
  1008: 'QR ดังกล่าวไม่ใช่ QR สำหรับการตรวจสอบการชำระเงิน',
  1009: 'ขออภัยในความไม่สะดวก ขณะนี้ข้อมูลธนาคารเกิดขัดข้องชั่วคราว โปรดตรวจใหม่อีกครั้งใน 15 นาทีถัดไป (ไม่เสียโควต้าสลิป)',
  1011: 'QR Code หมดอายุ หรือ ไม่มีรายการอยู่จริง',
  1012: 'สลิปซ้ำ สลิปนี้เคยส่งเข้ามาในระบบเมื่อ 2026-11-23 14:05:00',
  1014: 'บัญชีผู้รับไม่ตรงกับบัญชีหลักของร้าน',
};

function error(code: number, data?: unknown): FakeAnswer {
  return { status: 400, body: { success: false, code, message: MESSAGES[code] ?? 'error', ...(data === undefined ? {} : { data }) } };
}

/** The check-slip answer's `data` for a transfer: the bank's slip with SlipOK's own fields. */
export function slipOkSlipData(transfer: FakeTransfer): Record<string, unknown> {
  return { success: true, message: '✅', rqUID: '735_20260801_abc', ...bankSlipData(transfer), transTimestamp: new Date(transfer.occurred_at).toISOString() };
}

function checkSlip(request: RecordedRequest, bank: FakeProviderBank): FakeAnswer {
  if (bank.mode === 'quota_exhausted') return error(1004);
  if (bank.mode === 'bank_down') return error(1009);
  if (bank.mode === 'malformed') return { status: 200, body: { success: true, data: { success: true, transRef: 42 } } };
  const payload = bodyOf(request)?.data;
  if (payload === undefined) return error(1000);
  const found = lookUpPayload(payload, bank);
  if (found.kind === 'invalid') return error(1008);
  if (found.kind === 'unknown') return error(1011);
  if (found.kind === 'not_yet') {
    const message = 'เนื่องจากเป็นสลิปจากธนาคารไทยพาณิชย์ กรุณารอการตรวจสอบสลิปหลังการโอนประมาณ 2 นาที';
    return { status: 400, body: { success: false, code: 1010, message, data: { qrcodeData: payload, bankCode: '014', bankName: 'ธนาคารไทยพาณิชย์', delay: 2 } } };
  }
  const data = slipOkSlipData(found.transfer);
  if (found.repeated) return error(1012, data);
  if (bank.registered_receiver !== null && bank.registered_receiver !== found.transfer.receiver.account) return error(1014, data);
  return { status: 200, body: { success: true, data } };
}

function answer(request: RecordedRequest, bank: FakeProviderBank, credentials: FakeSlipOkCredentials): FakeAnswer {
  if (bank.mode === 'hang') return null;
  const route = `/api/line/apikey/${credentials.branch_id}`;
  if (!request.path.startsWith('/api/line/apikey/')) return { status: 404, body: { message: 'Not Found' } };
  if (request.path !== route && request.path !== `${route}/quota`) return error(1001);
  if (request.headers['x-authorization'] !== credentials.key || bank.mode === 'credentials_refused') return error(1002);
  if (request.method === 'GET' && request.path === `${route}/quota`) {
    return { status: 200, body: { success: true, data: { quota: bank.quota.limit - bank.quota.used, specialQuota: 0, overQuota: 0 } } };
  }
  return request.method === 'POST' && request.path === route ? checkSlip(request, bank) : { status: 404, body: { message: 'Not Found' } };
}

export function startFakeSlipOk(credentials: FakeSlipOkCredentials): Promise<StatefulFakeProvider> {
  return startStatefulFake((request, bank) => answer(request, bank, credentials));
}
