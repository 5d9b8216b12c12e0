import { describe, expect, it } from 'vitest';
import type { TransferLookup } from '../../src/verification/bank-port.ts';
import { RDCW_QUOTA_TEST_PAYLOAD, createRdcwVerifier } from '../../src/verification/rdcw-adapter.ts';
import { buildSlipPayload } from '../../src/verification/slip-payload.ts';
import { sampleTransfer } from '../support/fake-provider-bank.ts';
import { rdcwSlipData, startFakeRdcw } from '../support/fake-rdcw.ts';
import { QUERY, SAMPLE_VERIFIED, TRANS_REF, describeProviderContract, describeScriptedAnswers, expectRefusedConfiguration, type VerifierOptions } from '../support/provider-contract.ts';

/**
 * Contract tests of the RDCW Slip Verify adapter against a local RDCW (test/support/fake-rdcw.ts, written
 * from RDCW's public SDKs, since RDCW's own API reference was not found; see its header).
 */

const CLIENT = { client_id: 'rdcw-client-0001', client_secret: 'rdcw-secret-0123456789' };

function verifierAt(url: string, options: VerifierOptions = {}, credentials = CLIENT) {
  return createRdcwVerifier({ url, timeout_ms: 5_000, retry_base_ms: 10, ...credentials, ...options });
}

const data = rdcwSlipData(sampleTransfer({ trans_ref: TRANS_REF }));
const envelope = (valid: boolean, slip: unknown, isCached = false) => ({
  discriminator: `004.${TRANS_REF}`,
  valid,
  data: slip,
  quota: { cost: 1, usage: 1, limit: 100 },
  subscription: { id: 1, postpaid: false },
  isCached,
});
const found: TransferLookup = { outcome: 'found', transfer: SAMPLE_VERIFIED };
const refused: TransferLookup = { outcome: 'unavailable', reason: 'provider_refused' };

describeProviderContract(
  {
    provider: 'rdcw',
    start: () => startFakeRdcw(CLIENT),
    verifier: (url, options) => verifierAt(url, options),
    wrongCredentials: (url, options) => verifierAt(url, options, { client_id: CLIENT.client_id, client_secret: 'wrong-secret' }),
    outcomes: {
      // RDCW documents no "no such transfer" answer: `valid: false` is not taken as one.
      unknown_transfer: refused,
      // Nor a "not yet available" one: its "unable to connect to Bank API" code stands for it.
      not_yet_available: { outcome: 'unavailable', reason: 'bank_unavailable' },
      bank_down: { outcome: 'unavailable', reason: 'bank_unavailable' },
    },
    masking: [
      {
        label: 'the documented fully masked XXX-X-XXXX-X proves no account',
        printed_account: 'XXX-X-XXXX-X',
        actual_account: '1234567890',
        account_matches: false,
        printed_name_th: 'นาย สมชาย ใ',
        printed_name_en: 'MR. SOMCHAI J',
        declared_th: 'สมชาย ใจดี',
        declared_en: 'Somchai Jaidee',
        name_matches: true,
      },
      {
        label: 'the bank form xxx-x-x7890-x',
        printed_account: 'xxx-x-x7890-x',
        actual_account: '0000078900',
        account_matches: true,
        printed_name_th: 'นาย สมชาย ใ',
        printed_name_en: 'MR. SOMCHAI J',
        declared_th: 'สมหญิง ใจดี',
        declared_en: null,
        name_matches: false,
      },
    ],
  },
  (fake) => {
    describe('the request', () => {
      it('is a POST of the QR payload to /v1/inquiry with Basic client id and secret', async () => {
        fake().hold(sampleTransfer({ trans_ref: TRANS_REF }));
        await verifierAt(fake().url).verifyTransfer(QUERY);
        const request = fake().requests[0]!;
        expect(request).toMatchObject({ method: 'POST', path: '/v1/inquiry' });
        expect(request.headers.authorization).toBe(`Basic ${Buffer.from(`${CLIENT.client_id}:${CLIENT.client_secret}`).toString('base64')}`);
        expect(JSON.parse(request.body)).toEqual({ payload: buildSlipPayload({ sending_bank_code: '004', trans_ref: TRANS_REF }) });
      });

      it('reads the quota with the sample payload RDCW does not count', async () => {
        await verifierAt(fake().url).testConnection();
        expect(JSON.parse(fake().requests[0]!.body)).toEqual({ payload: RDCW_QUOTA_TEST_PAYLOAD });
      });
    });

    describe('configuration', () => {
      it.each([
        ['a client id with a colon', { client_id: 'a:b' }],
        ['a secret with a line break', { client_secret: `${CLIENT.client_secret}\r\n` }],
      ])('refuses %s without repeating the secret', (_label, options) => {
        expectRefusedConfiguration(() => createRdcwVerifier({ url: fake().url, timeout_ms: 100, ...CLIENT, ...options }), CLIENT.client_secret);
      });
    });
  },
);

describeScriptedAnswers(
  (url) => verifierAt(url, { max_attempts: 1 }),
  [
    ['valid', 200, envelope(true, data), found],
    ['valid and cached (asked before)', 200, envelope(true, data, true), found],
    ['an amount as decimal text', 200, envelope(true, { ...data, amount: '1000.00' }), found],
    ['not valid', 200, envelope(false, null), refused],
    ['0 invalid data', 400, { code: 0, message: 'Invalid Data' }, refused],
    ['10001 invalid QR payload', 400, { code: 10001, message: 'Invalid QR Payload' }, refused],
    ['10002 not a Slip Verify API QR', 400, { code: 10002, message: 'This is not a Slip Verify API QR' }, refused],
    ['20001 bank API unreachable', 400, { code: 20001, message: 'Unable to connect to Bank API at this moment' }, { outcome: 'unavailable', reason: 'bank_unavailable' }],
    ['20002 bank API unreachable', 400, { code: 20002, message: 'Unable to connect to Bank API at this moment' }, { outcome: 'unavailable', reason: 'bank_unavailable' }],
    ['21001 subscription to renew', 400, { code: 21001, message: 'Please renew your subscription before using API' }, { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
    ['40000 address not allowed', 403, { code: 40000, message: 'Your IP address are not allowed to access this API' }, { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
    ['a bare 401', 401, { message: 'Unauthorized' }, { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
    ['a bare 404', 404, { message: 'Not Found' }, { outcome: 'unavailable', reason: 'http_error' }],
    ['an undocumented code', 400, { code: 12345, message: '?' }, { outcome: 'unavailable', reason: 'http_error' }],
    ['a date that does not exist', 200, envelope(true, { ...data, transDate: '20260230' }), { outcome: 'unavailable', reason: 'malformed_response' }],
  ],
);
