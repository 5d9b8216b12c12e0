/**
 * The live bank verifier through RDCW Slip Verify (https://slip.rdcw.co.th/). RDCW's own API reference
 * was not found in the stored sources; the request, the answer and the error codes here come from the
 * public SDKs (github.com/PrakritManStudio/rdcw-slip src/index.ts and src/types/index.ts,
 * github.com/ArtifactyNight/node-rdcw-slipverify src/inquiry.ts and src/types.ts) and a mirror of the
 * answer format (https://docs.barism.net/docs-slip-verity). docs/decisions/slip-providers.md lists what
 * is therefore uncertain.
 *
 * Request: `POST {url}/v1/inquiry` with `Authorization: Basic base64(client_id:client_secret)` and the
 * JSON body `{"payload":"<mini-QR payload>"}`.
 *
 * Answers: a 200 `{"discriminator":…,"valid":true,"data":{…transfer…},"quota":{…},"isCached":…}` is
 * found (`isCached`, RDCW's memory of an earlier question, never refuses a slip); `"valid":false` is
 * `provider_refused`, since no source says what it means in words; `{"code":n,"message":…}` maps by its
 * code; a bare 401 or 403 is `credentials_refused` (no code for a wrong client is documented); 429 and
 * 5xx are retried; anything else is `http_error`, and a 200 that does not parse is `malformed_response`.
 * RDCW documents no "no such transfer" answer, so this adapter never answers `not_found`.
 */
import { z } from 'zod';
import type { TransferLookup, TransferQuery } from './bank-port.ts';
import { HTTP_ERROR, MALFORMED, baseUrlOf, credentialOf, type ConnectionCheck, type ProviderAnswer, type ProviderRequest } from './provider-http.ts';
import { ProviderVerifier, connectionRefusal, lookupOfBankSlip, type ProviderVerifierOptions } from './provider-verifier.ts';
import { buildSlipPayload } from './slip-payload.ts';

export interface RdcwVerifierOptions extends ProviderVerifierOptions {
  client_id: string;
  client_secret: string;
}

export const RDCW_DEFAULT_URL = 'https://suba.rdcw.co.th';

/**
 * The payload RDCW's SDK sends to read the quota: a sample QR that RDCW answers without counting it
 * ("QR ตัวอย่าง Quota จะไม่ถูกนับ", github.com/PrakritManStudio/rdcw-slip src/index.ts).
 */
export const RDCW_QUOTA_TEST_PAYLOAD = '0034000600000101039990213mamauishigure5102TH91046B93';

const CREDENTIALS_REFUSED: TransferLookup = { outcome: 'bank_disabled', operator_alert: 'credentials_refused' };

/** The documented error codes and the outcome of each. */
const RDCW_CODES: ReadonlyMap<number, TransferLookup> = new Map<number, TransferLookup>([
  [0, { outcome: 'unavailable', reason: 'provider_refused' }],
  [10001, { outcome: 'unavailable', reason: 'provider_refused' }],
  [10002, { outcome: 'unavailable', reason: 'provider_refused' }],
  [20001, { outcome: 'unavailable', reason: 'bank_unavailable' }],
  [20002, { outcome: 'unavailable', reason: 'bank_unavailable' }],
  [21001, { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' }],
  [40000, CREDENTIALS_REFUSED],
]);

const successSchema = z.object({ valid: z.boolean(), data: z.unknown(), isCached: z.boolean().optional() });
const errorSchema = z.object({ code: z.number().int(), message: z.string().max(1000).optional() });
const quotaSchema = z.object({
  quota: z.object({ usage: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER), limit: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER) }),
});

/** The outcome of an error answer, or null when it is not one RDCW documents. */
function mappedError(answer: ProviderAnswer): TransferLookup | null {
  const error = errorSchema.safeParse(answer.document);
  const mapped = error.success ? RDCW_CODES.get(error.data.code) : undefined;
  if (mapped !== undefined) return mapped;
  return answer.status === 401 || answer.status === 403 ? CREDENTIALS_REFUSED : null;
}

function readVerify(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
  const success = successSchema.safeParse(answer.document);
  if (answer.status === 200 && success.success && !('code' in (answer.document as object))) {
    return success.data.valid ? lookupOfBankSlip(success.data.data, query) : { outcome: 'unavailable', reason: 'provider_refused' };
  }
  return mappedError(answer) ?? (answer.status === 200 ? MALFORMED : HTTP_ERROR);
}

function readQuota(answer: ProviderAnswer): ConnectionCheck {
  const quota = quotaSchema.safeParse(answer.document);
  if (answer.status === 200 && quota.success) return { ok: true, remaining_quota: Math.max(0, quota.data.quota.limit - quota.data.quota.usage) };
  return connectionRefusal(mappedError(answer));
}

export class RdcwVerifier extends ProviderVerifier {
  private readonly endpoint: string;
  private readonly authorization: string;

  constructor(options: RdcwVerifierOptions) {
    super('rdcw', options);
    this.endpoint = `${baseUrlOf(options.url ?? RDCW_DEFAULT_URL)}/v1/inquiry`;
    // Basic authentication separates the two with a colon, so the client id cannot contain one.
    const client_id = credentialOf(options.client_id, 'client_id');
    if (client_id.includes(':')) throw new Error('invalid slip verifier configuration: client_id must not contain a colon');
    const client_secret = credentialOf(options.client_secret, 'client_secret');
    this.authorization = `Basic ${Buffer.from(`${client_id}:${client_secret}`, 'utf8').toString('base64')}`;
  }

  protected verifyRequest(query: TransferQuery): ProviderRequest {
    return this.inquiry(buildSlipPayload({ sending_bank_code: query.sending_bank_code, trans_ref: query.trans_ref }));
  }

  protected readVerifyAnswer(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
    return readVerify(answer, query);
  }

  protected connectionRequest(): ProviderRequest {
    return this.inquiry(RDCW_QUOTA_TEST_PAYLOAD);
  }

  protected readConnectionAnswer(answer: ProviderAnswer): ConnectionCheck {
    return readQuota(answer);
  }

  private inquiry(payload: string): ProviderRequest {
    return {
      method: 'POST',
      url: this.endpoint,
      headers: { authorization: this.authorization, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ payload }),
    };
  }
}

export function createRdcwVerifier(options: RdcwVerifierOptions): RdcwVerifier {
  return new RdcwVerifier(options);
}
