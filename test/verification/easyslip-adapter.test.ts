import { describe, expect, it } from 'vitest';
import type { TransferLookup } from '../../src/verification/bank-port.ts';
import { createEasySlipVerifier } from '../../src/verification/easyslip-adapter.ts';
import { buildSlipPayload } from '../../src/verification/slip-payload.ts';
import { sampleTransfer } from '../support/fake-provider-bank.ts';
import { easySlipRawSlip, startFakeEasySlip } from '../support/fake-easyslip.ts';
import { QUERY, SAMPLE_VERIFIED, TRANS_REF, describeProviderContract, describeScriptedAnswers, expectRefusedConfiguration, type VerifierOptions } from '../support/provider-contract.ts';

/**
 * Contract tests of the EasySlip (API v2) adapter against a local EasySlip (test/support/fake-easyslip.ts,
 * written from https://easyslip-document.cl1.easythunder.com/en/v2 and its error-code reference).
 */

const KEY = 'a1b2c3d4-e5f6-7890-abcd-ef1234567890';

function verifierAt(url: string, options: VerifierOptions = {}, key = KEY) {
  return createEasySlipVerifier({ url, timeout_ms: 5_000, retry_base_ms: 10, key, ...options });
}

const payload = buildSlipPayload({ sending_bank_code: '004', trans_ref: TRANS_REF });
const rawSlip = easySlipRawSlip(sampleTransfer({ trans_ref: TRANS_REF }), payload);
const success = (slip: Record<string, unknown>, isDuplicate = false) => ({ success: true, data: { isDuplicate, matchedAccount: null, amountInSlip: 1000, rawSlip: slip }, message: 'ok' });
const failure = (code: string, message: string) => ({ success: false, error: { code, message } });
const found: TransferLookup = { outcome: 'found', transfer: SAMPLE_VERIFIED };
const credentialsRefused: TransferLookup = { outcome: 'bank_disabled', operator_alert: 'credentials_refused' };

describeProviderContract(
  {
    provider: 'easyslip',
    start: () => startFakeEasySlip(KEY),
    verifier: (url, options) => verifierAt(url, options),
    wrongCredentials: (url, options) => verifierAt(url, options, '00000000-0000-4000-8000-000000000000'),
    outcomes: {
      unknown_transfer: { outcome: 'not_found' },
      // EasySlip documents no "not yet available" code: its bank-side error is a 500, retried, and the
      // pipeline asks again later.
      not_yet_available: { outcome: 'unavailable', reason: 'http_error' },
      bank_down: { outcome: 'unavailable', reason: 'http_error' },
    },
    masking: [
      {
        label: 'the documented form 1234xxxx5678 with "นาย อีซี่ สลิป" / "MR. EASY SLIP"',
        printed_account: '1234xxxx5678',
        actual_account: '123400005678',
        account_matches: true,
        printed_name_th: 'นาย อีซี่ สลิป',
        printed_name_en: 'MR. EASY SLIP',
        declared_th: 'อีซี่ สลิป',
        declared_en: 'Easy Slip',
        name_matches: true,
      },
      {
        label: 'the bank form xxx-x-x5678-x against a longer account',
        printed_account: 'xxx-x-x5678-x',
        actual_account: '123400005678',
        account_matches: false,
        printed_name_th: 'นาย อีซี่ ส',
        printed_name_en: 'MR. EASY S',
        declared_th: 'อีซี่ สลิป',
        declared_en: null,
        name_matches: true,
      },
    ],
  },
  (fake) => {
    describe('the request', () => {
      it('is a POST of the QR payload to /v2/verify/bank with the bearer key, asking for no provider-side checks', async () => {
        fake().hold(sampleTransfer({ trans_ref: TRANS_REF }));
        await verifierAt(fake().url).verifyTransfer(QUERY);
        const request = fake().requests[0]!;
        expect(request).toMatchObject({ method: 'POST', path: '/v2/verify/bank' });
        expect(request.headers.authorization).toBe(`Bearer ${KEY}`);
        expect(JSON.parse(request.body)).toEqual({ payload });
      });

      it('reads the quota from GET /v2/info', async () => {
        await verifierAt(fake().url).testConnection();
        expect(fake().requests[0]).toMatchObject({ method: 'GET', path: '/v2/info' });
      });
    });

    describe('configuration', () => {
      it('refuses a key with a line break without repeating it', () => {
        expectRefusedConfiguration(() => createEasySlipVerifier({ url: fake().url, timeout_ms: 100, key: `${KEY}\nX: 1` }), KEY);
      });
    });
  },
);

describeScriptedAnswers(
  (url) => verifierAt(url, { max_attempts: 1 }),
  [
    ['success', 200, success(rawSlip), found],
    ['success with isDuplicate', 200, success(rawSlip, true), found],
    ['a bank named by its short name only', 200, success({ ...rawSlip, sender: { ...(rawSlip.sender as object), bank: { short: 'KBANK' } } }), found],
    // The documented example pairs "id":"001" with "short":"KBANK": the short name wins.
    ['the documented id 001 beside KBANK', 200, success({ ...rawSlip, sender: { ...(rawSlip.sender as object), bank: { id: '001', name: 'กสิกรไทย', short: 'KBANK' } } }), found],
    ['an unknown short name', 200, success({ ...rawSlip, sender: { ...(rawSlip.sender as object), bank: { id: '004', short: 'NOPE' } } }), { outcome: 'unavailable', reason: 'malformed_response' }],
    ['MISSING_API_KEY', 401, failure('MISSING_API_KEY', 'Authorization header is required'), credentialsRefused],
    ['INVALID_API_KEY', 401, failure('INVALID_API_KEY', 'The provided API key is invalid'), credentialsRefused],
    ['BRANCH_INACTIVE', 403, failure('BRANCH_INACTIVE', 'This API branch has been deactivated'), credentialsRefused],
    ['SERVICE_BANNED', 403, failure('SERVICE_BANNED', 'Service has been banned'), credentialsRefused],
    ['SERVICE_DELETED', 403, failure('SERVICE_DELETED', 'Service has been deleted'), credentialsRefused],
    ['IP_NOT_ALLOWED', 403, failure('IP_NOT_ALLOWED', 'Your IP address is not in the allowed list'), credentialsRefused],
    ['QUOTA_EXCEEDED', 403, failure('QUOTA_EXCEEDED', 'Your API quota has been exceeded'), { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
    ['VALIDATION_ERROR', 400, failure('VALIDATION_ERROR', 'Validation failed'), { outcome: 'unavailable', reason: 'provider_refused' }],
    ['SLIP_NOT_FOUND', 404, failure('SLIP_NOT_FOUND', 'Slip not found or invalid'), { outcome: 'not_found' }],
    ['NOT_FOUND (a wrong endpoint)', 404, failure('NOT_FOUND', 'Resource not found'), { outcome: 'unavailable', reason: 'http_error' }],
    ['API_SERVER_ERROR', 500, failure('API_SERVER_ERROR', 'External API error'), { outcome: 'unavailable', reason: 'http_error' }],
    ['INTERNAL_SERVER_ERROR', 500, failure('INTERNAL_SERVER_ERROR', 'Internal server error'), { outcome: 'unavailable', reason: 'http_error' }],
    ['a bare 404', 404, { message: 'Not Found' }, { outcome: 'unavailable', reason: 'http_error' }],
    ['an amount with three decimals', 200, success({ ...rawSlip, amount: { amount: 10.005 } }), { outcome: 'unavailable', reason: 'malformed_response' }],
    ['a date without an offset', 200, success({ ...rawSlip, date: '2026-11-23T14:05:00' }), { outcome: 'unavailable', reason: 'malformed_response' }],
  ],
);
