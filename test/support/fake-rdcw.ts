import type { RecordedRequest } from './fake-slip-provider.ts';
import { bankSlipData, bodyOf, lookUpPayload, startStatefulFake, type FakeAnswer, type FakeProviderBank, type StatefulFakeProvider } from './fake-provider-bank.ts';
import { RDCW_QUOTA_TEST_PAYLOAD } from '../../src/verification/rdcw-adapter.ts';

/**
 * A local RDCW Slip Verify (https://slip.rdcw.co.th/). RDCW's own API reference was not in the stored
 * sources; this fake answers as the public SDKs and a mirror of the answer format show:
 * - github.com/PrakritManStudio/rdcw-slip src/index.ts (`POST https://suba.rdcw.co.th/v1/inquiry`, Basic
 *   authentication with client id and secret, `{payload}`, the quota read with a sample payload that is
 *   not counted) and src/types/index.ts (the error codes 0, 10001, 10002, 20001, 20002, 21001, 40000 with
 *   their messages; `quota {cost, usage, limit}`);
 * - github.com/ArtifactyNight/node-rdcw-slipverify src/types.ts (`{discriminator, valid, data, quota,
 *   subscription, isCached}` with the transfer directly under `data`);
 * - https://docs.barism.net/docs-slip-verity (the same answer with `"value": "XXX-X-XXXX-X"`).
 * Not documented anywhere found: the HTTP status of an error (this fake answers 400 with the documented
 * body), the answer to a wrong client id or secret (a bare 401 here), and the answer about a transfer the
 * bank does not have (`valid: false` without data here, which the adapter does not take as "no such
 * transfer"). RDCW documents no "not yet available" answer; 20001 ("Unable to connect to Bank API at this
 * moment") stands for it.
 */

export interface FakeRdcwCredentials {
  client_id: string;
  client_secret: string;
}

const MESSAGES: Record<number, string> = {
  0: 'Invalid Data',
  10001: 'Invalid QR Payload',
  10002: 'This is not a Slip Verify API QR',
  20001: 'Unable to connect to Bank API at this moment',
  21001: 'Please renew your subscription before using API',
  40000: 'Your IP address are not allowed to access this API',
};

function error(code: number): FakeAnswer {
  return { status: 400, body: { code, message: MESSAGES[code] } };
}

/** The inquiry's `data` for a transfer: the bank's slip as RDCW passes it on. */
export const rdcwSlipData = bankSlipData;

function envelope(bank: FakeProviderBank, discriminator: string, valid: boolean, data: unknown, cost: number, cached: boolean): FakeAnswer {
  const body = { discriminator, valid, data, quota: { cost, usage: bank.quota.used, limit: bank.quota.limit }, subscription: { id: 1, postpaid: false }, isCached: cached };
  return { status: 200, body };
}

function inquiry(request: RecordedRequest, bank: FakeProviderBank): FakeAnswer {
  const payload = bodyOf(request)?.payload;
  if (payload === RDCW_QUOTA_TEST_PAYLOAD) return envelope(bank, '999.mamauishigure', true, null, 0, false);
  if (bank.mode === 'quota_exhausted') return error(21001);
  if (bank.mode === 'bank_down') return error(20001);
  if (bank.mode === 'malformed') return { status: 200, body: { valid: true, data: { transRef: 'x', amount: 'lots' } } };
  if (typeof payload !== 'string') return error(0);
  const found = lookUpPayload(payload, bank);
  if (found.kind === 'invalid') return error(10002);
  if (found.kind === 'not_yet') return error(20001);
  if (found.kind === 'unknown') return envelope(bank, 'unknown', false, null, 1, false);
  const discriminator = `${found.transfer.sending_bank_code}.${found.transfer.trans_ref}`;
  return envelope(bank, discriminator, true, rdcwSlipData(found.transfer), 1, found.repeated);
}

function answer(request: RecordedRequest, bank: FakeProviderBank, credentials: FakeRdcwCredentials): FakeAnswer {
  if (bank.mode === 'hang') return null;
  const expected = `Basic ${Buffer.from(`${credentials.client_id}:${credentials.client_secret}`).toString('base64')}`;
  if (request.headers.authorization !== expected || bank.mode === 'credentials_refused') return { status: 401, body: { message: 'Unauthorized' } };
  if (request.method === 'POST' && request.path === '/v1/inquiry') return inquiry(request, bank);
  return { status: 404, body: { message: 'Not Found' } };
}

export function startFakeRdcw(credentials: FakeRdcwCredentials): Promise<StatefulFakeProvider> {
  return startStatefulFake((request, bank) => answer(request, bank, credentials));
}
