/**
 * The live bank verifier through SlipOK (https://slipok.com/api-documentation/, version 1.7; the check-slip
 * route at https://slipok.com/api-documentation/check-slip/). The mapping, the error codes and what is
 * not documented are in docs/decisions/slip-providers.md.
 *
 * Request: `POST {url}/api/line/apikey/{branch_id}` with `x-authorization: {key}` and the JSON body
 * `{"data":"<the slip's mini-QR payload>"}`, the payload built from the sending bank and the transaction
 * reference (the port has no image). `log` and `amount` are not sent: the provider's own duplicate,
 * amount and receiver checks (codes 1012, 1013, 1014) are ours to make, and a slip is never refused by
 * them. Quota: `GET {url}/api/line/apikey/{branch_id}/quota`.
 *
 * Answers: `{"success":true,"data":{…transfer…}}` is found; `{"success":false,"code":1xxx,"message":…}`
 * (with `data` for 1010 and 1012 to 1014) maps by its code whatever the HTTP status, except that 429
 * and 5xx are retried; a body without a documented code is `http_error` (a bare 404 included), and a
 * 200 that does not parse is `malformed_response`.
 */
import { z } from 'zod';
import type { TransferLookup, TransferQuery } from './bank-port.ts';
import { HTTP_ERROR, MALFORMED, baseUrlOf, credentialOf, type ConnectionCheck, type ProviderAnswer, type ProviderRequest } from './provider-http.ts';
import { ProviderVerifier, connectionRefusal, lookupOfBankSlip, type ProviderVerifierOptions } from './provider-verifier.ts';
import { buildSlipPayload } from './slip-payload.ts';

export interface SlipOkVerifierOptions extends ProviderVerifierOptions {
  /** The SlipOK branch id (digits), part of the route. */
  branch_id: string;
  /** The branch's API key, sent as `x-authorization`. */
  key: string;
}

export const SLIPOK_DEFAULT_URL = 'https://api.slipok.com';

/** The documented error codes and the outcome of each; the decision doc explains every line. */
const SLIPOK_CODES: ReadonlyMap<number, TransferLookup | 'transfer'> = new Map<number, TransferLookup | 'transfer'>([
  [1000, { outcome: 'unavailable', reason: 'provider_refused' }],
  [1001, { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  [1002, { outcome: 'bank_disabled', operator_alert: 'credentials_refused' }],
  [1003, { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
  [1004, { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
  [1005, { outcome: 'unavailable', reason: 'provider_refused' }],
  [1006, { outcome: 'unavailable', reason: 'provider_refused' }],
  [1007, { outcome: 'unavailable', reason: 'provider_refused' }],
  [1008, { outcome: 'unavailable', reason: 'provider_refused' }],
  [1009, { outcome: 'unavailable', reason: 'bank_unavailable' }],
  [1010, { outcome: 'unavailable', reason: 'not_yet_available' }],
  [1011, { outcome: 'not_found' }],
  [1012, 'transfer'],
  [1013, 'transfer'],
  [1014, 'transfer'],
]);

/** A code as a number: the documentation prints numbers, one SDK types them as strings. */
const codeSchema = z.union([z.number().int(), z.string().regex(/^\d{1,6}$/).transform(Number)]);

const successSchema = z.object({ success: z.literal(true), data: z.unknown() });
const errorSchema = z.object({ success: z.literal(false).optional(), code: codeSchema, data: z.unknown().optional() });
const quotaSchema = z.object({ success: z.literal(true), data: z.object({ quota: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER) }) });

function readVerify(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
  const document = answer.document;
  if (answer.status === 200 && successSchema.safeParse(document).success) return lookupOfBankSlip((document as { data: unknown }).data, query);
  const error = errorSchema.safeParse(document);
  if (error.success) {
    const mapped = SLIPOK_CODES.get(error.data.code);
    // A repeated slip, a wrong amount or a wrong receiver still names a real transfer: it is returned as
    // found, and our own checks decide (duplicate key, amount, receiver).
    if (mapped === 'transfer') return lookupOfBankSlip(error.data.data, query);
    if (mapped !== undefined) return mapped;
  }
  return answer.status === 200 ? MALFORMED : HTTP_ERROR;
}

function readQuota(answer: ProviderAnswer): ConnectionCheck {
  const quota = quotaSchema.safeParse(answer.document);
  if (answer.status === 200 && quota.success) return { ok: true, remaining_quota: quota.data.data.quota };
  const error = errorSchema.safeParse(answer.document);
  const mapped = error.success ? SLIPOK_CODES.get(error.data.code) : undefined;
  return connectionRefusal(mapped === 'transfer' ? undefined : mapped);
}

export class SlipOkVerifier extends ProviderVerifier {
  private readonly route: string;
  private readonly key: string;

  constructor(options: SlipOkVerifierOptions) {
    super('slipok', options);
    if (!/^[0-9]{1,20}$/.test(options.branch_id)) throw new Error('invalid slip verifier configuration: branch_id must be digits');
    this.route = `${baseUrlOf(options.url ?? SLIPOK_DEFAULT_URL)}/api/line/apikey/${options.branch_id}`;
    this.key = credentialOf(options.key, 'key');
  }

  protected verifyRequest(query: TransferQuery): ProviderRequest {
    const payload = buildSlipPayload({ sending_bank_code: query.sending_bank_code, trans_ref: query.trans_ref });
    return { method: 'POST', url: this.route, headers: this.headers(), body: JSON.stringify({ data: payload }) };
  }

  protected readVerifyAnswer(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
    return readVerify(answer, query);
  }

  protected connectionRequest(): ProviderRequest {
    return { method: 'GET', url: `${this.route}/quota`, headers: this.headers() };
  }

  protected readConnectionAnswer(answer: ProviderAnswer): ConnectionCheck {
    return readQuota(answer);
  }

  private headers(): Record<string, string> {
    return { 'x-authorization': this.key, 'content-type': 'application/json', accept: 'application/json' };
  }
}

export function createSlipOkVerifier(options: SlipOkVerifierOptions): SlipOkVerifier {
  return new SlipOkVerifier(options);
}
