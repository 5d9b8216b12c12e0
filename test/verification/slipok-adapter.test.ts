import { describe, expect, it } from 'vitest';
import type { TransferLookup } from '../../src/verification/bank-port.ts';
import { createSlipOkVerifier } from '../../src/verification/slipok-adapter.ts';
import { buildSlipPayload } from '../../src/verification/slip-payload.ts';
import { sampleTransfer } from '../support/fake-provider-bank.ts';
import { slipOkSlipData, startFakeSlipOk } from '../support/fake-slipok.ts';
import { QUERY, SAMPLE_VERIFIED, TRANS_REF, describeProviderContract, describeScriptedAnswers, expectRefusedConfiguration, type VerifierOptions } from '../support/provider-contract.ts';

/**
 * Contract tests of the SlipOK adapter against a local SlipOK (test/support/fake-slipok.ts, written from
 * https://slipok.com/api-documentation/check-slip/ and the documented error codes).
 */

const BRANCH_ID = '12345';
const KEY = 'SLIPOKTESTKEY0123456789';

function verifierAt(url: string, options: VerifierOptions = {}, credentials = { branch_id: BRANCH_ID, key: KEY }) {
  return createSlipOkVerifier({ url, timeout_ms: 5_000, retry_base_ms: 10, ...credentials, ...options });
}

const slip = slipOkSlipData(sampleTransfer({ trans_ref: TRANS_REF }));
const found: TransferLookup = { outcome: 'found', transfer: SAMPLE_VERIFIED };
const refused: TransferLookup = { outcome: 'unavailable', reason: 'provider_refused' };

describeProviderContract(
  {
    provider: 'slipok',
    start: () => startFakeSlipOk({ branch_id: BRANCH_ID, key: KEY }),
    verifier: (url, options) => verifierAt(url, options),
    wrongCredentials: (url, options) => verifierAt(url, options, { branch_id: BRANCH_ID, key: 'NOT-THE-KEY' }),
    outcomes: {
      unknown_transfer: { outcome: 'not_found' },
      not_yet_available: { outcome: 'unavailable', reason: 'not_yet_available' },
      bank_down: { outcome: 'unavailable', reason: 'bank_unavailable' },
    },
    masking: [
      {
        label: 'the documented KBANK form xxx-x-x1234-x with "นาย กสิกร ร" / "Mr. Kasikorn R"',
        printed_account: 'xxx-x-x1234-x',
        actual_account: '0000012340',
        account_matches: true,
        printed_name_th: 'นาย กสิกร ร',
        printed_name_en: 'Mr. Kasikorn R',
        declared_th: 'กสิกร รักไทย',
        declared_en: 'Kasikorn Rakthai',
        name_matches: true,
      },
      {
        label: 'upper-case masks XXX-X-X1234-X of another account and another name',
        printed_account: 'XXX-X-X1234-X',
        actual_account: '0000099990',
        account_matches: false,
        printed_name_th: 'นาย กสิกร ร',
        printed_name_en: 'Mr. Kasikorn R',
        declared_th: 'สมชาย ใจดี',
        declared_en: 'Somchai Jaidee',
        name_matches: false,
      },
    ],
  },
  (fake) => {
    describe('the request', () => {
      it('is a POST of the QR payload built from the query to the branch route, with x-authorization', async () => {
        fake().hold(sampleTransfer({ trans_ref: TRANS_REF }));
        await verifierAt(fake().url).verifyTransfer(QUERY);
        const request = fake().requests[0]!;
        expect(request).toMatchObject({ method: 'POST', path: `/api/line/apikey/${BRANCH_ID}` });
        expect(request.headers['x-authorization']).toBe(KEY);
        expect(request.headers.authorization).toBeUndefined();
        // Neither `log` nor `amount`: SlipOK's own duplicate, amount and receiver checks are not asked for.
        expect(JSON.parse(request.body)).toEqual({ data: buildSlipPayload({ sending_bank_code: '004', trans_ref: TRANS_REF }) });
      });

      it('reads the quota from the quota route', async () => {
        await verifierAt(fake().url).testConnection();
        expect(fake().requests[0]).toMatchObject({ method: 'GET', path: `/api/line/apikey/${BRANCH_ID}/quota` });
      });

      it('refuses a wrong branch with code 1001 as credentials refused', async () => {
        const lookup = await verifierAt(fake().url, {}, { branch_id: '999', key: KEY }).verifyTransfer(QUERY);
        expect(lookup).toEqual({ outcome: 'bank_disabled', operator_alert: 'credentials_refused' });
      });
    });

    describe('configuration', () => {
      it.each([
        ['a branch id that is not digits', { branch_id: '12/../34' }],
        ['a key with a line break', { key: `${KEY}\r\nX-Injected: 1` }],
        ['a URL with credentials', { url: `http://user:${KEY}@127.0.0.1:1` }],
      ])('refuses %s without repeating the key', (_label, options) => {
        expectRefusedConfiguration(() => createSlipOkVerifier({ url: fake().url, timeout_ms: 100, branch_id: BRANCH_ID, key: KEY, ...options }), KEY);
      });
    });
  },
);

describeScriptedAnswers(
  (url) => verifierAt(url, { max_attempts: 1 }),
  [
    ['success', 200, { success: true, data: slip }, found],
    ['1000 no QR data', 400, { success: false, code: 1000, message: 'กรุณาใส่ข้อมูล QR Code ให้ครบใน field data, files หรือ url' }, refused],
    ['1001 branch not found', 400, { success: false, code: 1001, message: 'ไม่พบข้อมูลสาขา กรุณาตรวจสอบไอดีสาขา' }, { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
    ['1002 authorization header invalid', 401, { success: false, code: 1002, message: 'Authorization Header ไม่ถูกต้อง' }, { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
    ['1003 package expired', 400, { success: false, code: 1003, message: 'Package ของคุณหมดอายุแล้ว' }, { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
    ['1004 over quota', 400, { success: false, code: 1004, message: 'Package ของคุณใช้เกินโควต้ามาแล้ว 400 บาท กรุณาต่อสมาชิกแพ็กเกจ' }, { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
    ['1005 not an image file', 400, { success: false, code: 1005, message: 'ไฟล์ไม่ใช่ไฟล์ภาพ' }, refused],
    ['1006 invalid image', 400, { success: false, code: 1006, message: 'รูปภาพไม่ถูกต้อง' }, refused],
    ['1007 image without QR', 400, { success: false, code: 1007, message: 'รูปภาพไม่มี QR Code' }, refused],
    ['1008 not a payment QR', 400, { success: false, code: 1008, message: 'QR ดังกล่าวไม่ใช่ QR สำหรับการตรวจสอบการชำระเงิน' }, refused],
    ['1009 bank data temporarily down', 400, { success: false, code: 1009, message: 'ขณะนี้ข้อมูลธนาคารเกิดขัดข้องชั่วคราว' }, { outcome: 'unavailable', reason: 'bank_unavailable' }],
    [
      '1010 slip too new',
      400,
      { success: false, code: 1010, message: 'กรุณารอการตรวจสอบสลิปหลังการโอนประมาณ 2 นาที', data: { qrcodeData: 'x', bankCode: '014', bankName: 'ไทยพาณิชย์', delay: 2 } },
      { outcome: 'unavailable', reason: 'not_yet_available' },
    ],
    ['1011 expired QR or no such transaction', 400, { success: false, code: 1011, message: 'QR Code หมดอายุ หรือ ไม่มีรายการอยู่จริง' }, { outcome: 'not_found' }],
    ['1012 repeated slip, with the slip', 400, { success: false, code: 1012, message: 'สลิปซ้ำ', data: slip }, found],
    ['1013 wrong amount, with the slip', 400, { success: false, code: 1013, message: 'ยอดที่ส่งมาไม่ตรงกับยอดสลิป', data: slip }, found],
    ['1014 wrong receiver, with the slip', 400, { success: false, code: 1014, message: 'บัญชีผู้รับไม่ตรงกับบัญชีหลักของร้าน', data: slip }, found],
    ['1012 without the slip data', 400, { success: false, code: 1012, message: 'สลิปซ้ำ' }, { outcome: 'unavailable', reason: 'malformed_response' }],
    ['a code as a string', 400, { success: false, code: '1011', message: 'QR Code หมดอายุ หรือ ไม่มีรายการอยู่จริง' }, { outcome: 'not_found' }],
    ['an undocumented code', 400, { success: false, code: 1099, message: '?' }, { outcome: 'unavailable', reason: 'http_error' }],
    ['a bare 404 (a wrong base path or a proxy)', 404, { message: 'Not Found' }, { outcome: 'unavailable', reason: 'http_error' }],
    ['a 404 page in HTML', 404, '<h1>Not Found</h1>', { outcome: 'unavailable', reason: 'http_error' }],
    ['a 200 in HTML', 200, '<h1>OK</h1>', { outcome: 'unavailable', reason: 'malformed_response' }],
    ['a slip without a sender account', 200, { success: true, data: { ...slip, sender: { displayName: 'นาย ก', name: 'Mr. K', account: { type: '', value: '' } } } }, { outcome: 'unavailable', reason: 'malformed_response' }],
  ],
);
