/**
 * The live bank verifier through EasySlip's API v2 (https://easyslip-document.cl1.easythunder.com/en/v2,
 * `POST /verify/bank` at https://easyslip-document.cl1.easythunder.com/en/v2/verify/bank/payload, errors
 * at https://easyslip-document.cl1.easythunder.com/en/reference/error-codes, `GET /info` at
 * https://easyslip-document.cl1.easythunder.com/en/v2/info). The mapping, the error codes and what is
 * not documented are in docs/decisions/slip-providers.md.
 *
 * Request: `POST {url}/v2/verify/bank` with `Authorization: Bearer {key}` (the developer API's
 * authentication; the B2B variant signs requests with HMAC instead and is not supported here) and the
 * JSON body `{"payload":"<mini-QR payload>"}`. `checkDuplicate`, `matchAccount` and `matchAmount` are not
 * sent: those checks are ours, and EasySlip's `isDuplicate` never refuses a slip on its own.
 *
 * Answers: `{"success":true,"data":{"isDuplicate":…,"rawSlip":{…}}}` is found; `{"success":false,
 * "error":{"code":"…","message":"…"}}` maps by its code; 429 and 5xx (`API_SERVER_ERROR`,
 * `INTERNAL_SERVER_ERROR`) are retried; anything else is `http_error`, and a 200 that does not parse is
 * `malformed_response`.
 */
import { z } from 'zod';
import type { TransferLookup, TransferParty, TransferQuery, VerifiedTransfer } from './bank-port.ts';
import {
  HTTP_ERROR,
  MALFORMED,
  accountSchema,
  bankCodeOfShortName,
  baseUrlOf,
  credentialOf,
  nameSchema,
  numericAmountSchema,
  timestampSchema,
  type ConnectionCheck,
  type ProviderAnswer,
  type ProviderRequest,
} from './provider-http.ts';
import { ProviderVerifier, connectionRefusal, foundIfAbout, type ProviderVerifierOptions } from './provider-verifier.ts';
import { buildSlipPayload } from './slip-payload.ts';

export interface EasySlipVerifierOptions extends ProviderVerifierOptions {
  /** The branch's API key (a UUID), sent as a bearer token. */
  key: string;
}

export const EASYSLIP_DEFAULT_URL = 'https://api.easyslip.com';

/** The documented error codes and the outcome of each (5xx codes never reach here: they are retried). */
const EASYSLIP_CODES: ReadonlyMap<string, TransferLookup> = new Map<string, TransferLookup>([
  ['MISSING_API_KEY', { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  ['INVALID_API_KEY', { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  ['BRANCH_INACTIVE', { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  ['SERVICE_BANNED', { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  ['SERVICE_DELETED', { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  ['IP_NOT_ALLOWED', { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  ['QUOTA_EXCEEDED', { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
  ['VALIDATION_ERROR', { outcome: 'unavailable', reason: 'provider_refused' }],
  ['SLIP_NOT_FOUND', { outcome: 'not_found' }],
]);

const partySchema = z.object({
  bank: z.object({ id: z.string().max(10).nullish(), short: z.string().max(20).nullish() }),
  account: z.object({
    name: z.object({ th: nameSchema, en: nameSchema }).partial().nullish(),
    // A party with only a proxy (no bank account) is malformed, as for the other providers.
    bank: z.object({ account: accountSchema }),
  }),
});

const successSchema = z.object({
  success: z.literal(true),
  data: z.object({
    isDuplicate: z.boolean().optional(),
    rawSlip: z.object({
      transRef: z.string().min(1).max(200),
      date: timestampSchema,
      amount: z.object({ amount: numericAmountSchema }),
      sender: partySchema,
      receiver: partySchema,
    }),
  }),
});

const errorSchema = z.object({ success: z.literal(false), error: z.object({ code: z.string().max(100) }) });
const infoSchema = z.object({
  success: z.literal(true),
  data: z.object({ application: z.object({ quota: z.object({ remaining: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable() }) }) }),
});

type Party = z.infer<typeof partySchema>;

/**
 * The Bank of Thailand code of a party's bank. The short name (`KBANK`) wins over `id`: the documented
 * example pairs `"id":"001"` with `"short":"KBANK"`, so `id` is trusted only when no short name is given.
 */
function bankCodeOf(bank: Party['bank']): string | null {
  if (bank.short != null && bank.short !== '') return bankCodeOfShortName(bank.short);
  return bank.id != null && /^\d{3}$/.test(bank.id) ? bank.id : null;
}

function partyOf(party: Party): TransferParty | null {
  const bank_code = bankCodeOf(party.bank);
  if (bank_code === null) return null;
  return { bank_code, account_number: party.account.bank.account, name_th: party.account.name?.th ?? null, name_en: party.account.name?.en ?? null };
}

function lookupOfSuccess(slip: z.infer<typeof successSchema>['data']['rawSlip'], query: TransferQuery): TransferLookup {
  const sender = partyOf(slip.sender);
  const receiver = partyOf(slip.receiver);
  if (sender === null || receiver === null) return MALFORMED;
  const transfer: VerifiedTransfer = { sending_bank_code: sender.bank_code, trans_ref: slip.transRef, amount_minor: slip.amount.amount, occurred_at: slip.date, sender, receiver };
  return foundIfAbout(transfer, query);
}

function readVerify(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
  const success = successSchema.safeParse(answer.document);
  // isDuplicate is EasySlip's memory of earlier questions, not a verdict: the transfer is returned.
  if (answer.status === 200 && success.success) return lookupOfSuccess(success.data.data.rawSlip, query);
  const error = errorSchema.safeParse(answer.document);
  const mapped = error.success ? EASYSLIP_CODES.get(error.data.error.code) : undefined;
  if (mapped !== undefined) return mapped;
  return answer.status === 200 ? MALFORMED : HTTP_ERROR;
}

function readInfo(answer: ProviderAnswer): ConnectionCheck {
  const info = infoSchema.safeParse(answer.document);
  if (answer.status === 200 && info.success) return { ok: true, remaining_quota: info.data.data.application.quota.remaining };
  const error = errorSchema.safeParse(answer.document);
  return connectionRefusal(error.success ? EASYSLIP_CODES.get(error.data.error.code) : undefined);
}

export class EasySlipVerifier extends ProviderVerifier {
  private readonly base: string;
  private readonly key: string;

  constructor(options: EasySlipVerifierOptions) {
    super('easyslip', options);
    this.base = baseUrlOf(options.url ?? EASYSLIP_DEFAULT_URL);
    this.key = credentialOf(options.key, 'key');
  }

  protected verifyRequest(query: TransferQuery): ProviderRequest {
    const payload = buildSlipPayload({ sending_bank_code: query.sending_bank_code, trans_ref: query.trans_ref });
    return { method: 'POST', url: `${this.base}/v2/verify/bank`, headers: this.headers(), body: JSON.stringify({ payload }) };
  }

  protected readVerifyAnswer(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
    return readVerify(answer, query);
  }

  protected connectionRequest(): ProviderRequest {
    return { method: 'GET', url: `${this.base}/v2/info`, headers: this.headers() };
  }

  protected readConnectionAnswer(answer: ProviderAnswer): ConnectionCheck {
    return readInfo(answer);
  }

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.key}`, 'content-type': 'application/json', accept: 'application/json' };
  }
}

export function createEasySlipVerifier(options: EasySlipVerifierOptions): EasySlipVerifier {
  return new EasySlipVerifier(options);
}
