import type { RecordedRequest } from './fake-slip-provider.ts';
import { bangkokDateAndTime, bodyOf, lookUpPayload, startStatefulFake, type FakeAnswer, type FakeParty, type FakeProviderBank, type FakeTransfer, type StatefulFakeProvider } from './fake-provider-bank.ts';

/**
 * A local EasySlip API v2, answering as its documentation shows:
 * - https://easyslip-document.cl1.easythunder.com/en/v2 (base URL, the `{success, data, message}` and
 *   `{success:false, error:{code, message}}` envelopes);
 * - https://easyslip-document.cl1.easythunder.com/en/v2/verify/bank/payload (`POST /verify/bank` with
 *   `payload`; `VerifyBankData` with `isDuplicate`, `matchedAccount`, `amountInSlip`, `rawSlip`);
 * - https://easyslip-document.cl1.easythunder.com/en/reference/error-codes (the v2 codes and statuses);
 * - https://easyslip-document.cl1.easythunder.com/en/v2/info (`GET /info`, `application.quota`);
 * - https://document.easyslip.com/documents/verify/bank/base64 (the slip's fields: `bank {id, name,
 *   short}`, `account {name {th, en}, bank {type, account}}`, `amount {amount, local}`), since the v2
 *   page's `RawSlip` definition was cut short in the stored copy.
 * EasySlip documents no "not yet available" code; its nearest documented answer, `API_SERVER_ERROR`
 * ("External API error / Backend service issue / Retry later", HTTP 500), stands for it here.
 */

export const FAKE_EASYSLIP_SHORT_NAMES: Record<string, { short: string; name: string }> = {
  '004': { short: 'KBANK', name: 'กสิกรไทย' },
  '014': { short: 'SCB', name: 'ไทยพาณิชย์' },
  '030': { short: 'GSB', name: 'ธนาคารออมสิน' },
};

function error(status: number, code: string, message: string): FakeAnswer {
  return { status, body: { success: false, error: { code, message } } };
}

function partyOf(party: FakeParty): Record<string, unknown> {
  const bank = FAKE_EASYSLIP_SHORT_NAMES[party.bank_code] ?? { short: '', name: '' };
  return { bank: { id: party.bank_code, name: bank.name, short: bank.short }, account: { name: { th: party.name_th, en: party.name_en }, bank: { type: 'BANKAC', account: party.account } } };
}

/** The `rawSlip` of a transfer, with the time as EasySlip prints it (Bangkok, `+07:00`). */
export function easySlipRawSlip(transfer: FakeTransfer, payload: string): Record<string, unknown> {
  return {
    payload,
    transRef: transfer.trans_ref,
    date: bangkokDateAndTime(transfer.occurred_at).local_iso,
    countryCode: 'TH',
    amount: { amount: Number(transfer.amount), local: { amount: 0, currency: '' } },
    fee: 0,
    ref1: '',
    ref2: '',
    ref3: '',
    sender: partyOf(transfer.sender),
    receiver: partyOf(transfer.receiver),
  };
}

function verify(request: RecordedRequest, bank: FakeProviderBank): FakeAnswer {
  if (bank.mode === 'quota_exhausted') return error(403, 'QUOTA_EXCEEDED', 'Your API quota has been exceeded');
  if (bank.mode === 'bank_down') return error(500, 'API_SERVER_ERROR', 'External API error');
  if (bank.mode === 'malformed') return { status: 200, body: { success: true, data: { isDuplicate: false, rawSlip: { transRef: 'x' } } } };
  const payload = bodyOf(request)?.payload;
  if (typeof payload !== 'string' || payload.length < 1 || payload.length > 128) return error(400, 'VALIDATION_ERROR', 'Validation failed');
  const found = lookUpPayload(payload, bank);
  if (found.kind === 'invalid' || found.kind === 'unknown') return error(404, 'SLIP_NOT_FOUND', 'Slip not found or invalid');
  if (found.kind === 'not_yet') return error(500, 'API_SERVER_ERROR', 'External API error');
  const amount = Number(found.transfer.amount);
  const data = { isDuplicate: found.repeated, matchedAccount: null, amountInSlip: amount, rawSlip: easySlipRawSlip(found.transfer, payload) };
  return { status: 200, body: { success: true, data, message: 'Bank slip verified successfully' } };
}

function info(bank: FakeProviderBank): FakeAnswer {
  const quota = { used: bank.quota.used, max: bank.quota.limit, remaining: bank.quota.limit - bank.quota.used, totalUsed: bank.quota.used };
  const application = { name: 'Test Application', autoRenew: { expired: false, quota: false, createdAt: '2026-01-01T00:00:00+07:00', expiresAt: '2027-01-01T00:00:00+07:00' }, quota };
  const data = { application, branch: { name: 'Main', isActive: true, quota: { used: bank.quota.used, totalUsed: bank.quota.used } }, account: { email: 'ops@example.com', credit: 0 }, product: { name: 'Pro' } };
  return { status: 200, body: { success: true, data, message: 'Application information retrieved' } };
}

function answer(request: RecordedRequest, bank: FakeProviderBank, key: string): FakeAnswer {
  if (bank.mode === 'hang') return null;
  const authorization = request.headers.authorization;
  if (authorization === undefined) return error(401, 'MISSING_API_KEY', 'Authorization header is required');
  if (authorization !== `Bearer ${key}` || bank.mode === 'credentials_refused') return error(401, 'INVALID_API_KEY', 'The provided API key is invalid');
  if (request.method === 'GET' && request.path === '/v2/info') return info(bank);
  if (request.method === 'POST' && request.path === '/v2/verify/bank') return verify(request, bank);
  return error(404, 'NOT_FOUND', 'Resource not found');
}

export function startFakeEasySlip(key: string): Promise<StatefulFakeProvider> {
  return startStatefulFake((request, bank) => answer(request, bank, key));
}
