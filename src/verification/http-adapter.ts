/**
 * The live-mode bank verifier: asks a third-party slip-verification provider, configured by URL and
 * key, about the transfer a slip names.
 *
 * ## Provider contract
 *
 * Request: `POST {url}/v1/transfers/verify` with the headers `Authorization: Bearer {key}`,
 * `Content-Type: application/json` and `Accept: application/json`, and the body
 * `{"sending_bank_code":"004","trans_ref":"…"}`. Redirects are never followed.
 *
 * Answers:
 * - `200` with `{"status":"found","transfer":{…}}` is `found`. The transfer is
 *   `{"sending_bank_code":"004","trans_ref":"…","amount":"1000.00","occurred_at":"2026-11-23T07:05:00.000Z",
 *   "sender":{"bank_code":"004","account":"xxx-x-x1234-x","name_th":"นาย สมชาย ใ","name_en":"MR. SOMCHAI J"},
 *   "receiver":{"bank_code":"014","account":"xxx-x-x5678-x","name_th":"…","name_en":null}}`, where
 *   - `sending_bank_code` and `trans_ref` echo the query exactly; an answer about any other transfer
 *     is `malformed_response`, so that a provider's mix-up can never verify this slip;
 *   - `amount` is a positive decimal string of baht with at most two decimals (`"1000"`, `"1000.5"`,
 *     `"1000.50"`), converted to satang with integer arithmetic and at most `Number.MAX_SAFE_INTEGER`;
 *   - `occurred_at` is an RFC 3339 timestamp with seconds and an offset (`Z` or `±hh:mm`);
 *   - `bank_code` values are exactly three digits;
 *   - `account` loses its `-` and whitespace separators, after which only digits and the mask
 *     characters `x`, `X`, `*`, `•` may remain, 4 to 20 of them;
 *   - `name_th` and `name_en` are strings of at most 200 characters, or null or absent (an empty
 *     string counts as absent).
 *   Unknown fields are ignored.
 * - `200` or `404` with `{"status":"not_found"}` is `not_found`. A `404` without that JSON body is
 *   `unavailable` / `http_error`: a wrong base path or a proxy answers 404 too, and that must never
 *   turn a real slip into "the bank has no such transfer".
 * - A `200` whose body does not match the schema, is not valid UTF-8 JSON, is not labelled
 *   `application/json`, or is larger than `max_response_bytes` (64 KiB by default; reading stops
 *   there) is `unavailable` / `malformed_response`, and is not retried.
 * - `429`, `5xx`, network failures and attempts that exceed `timeout_ms` are retried, up to
 *   `max_attempts` attempts in all (3 by default) with exponential backoff and jitter; when the last
 *   attempt fails the answer is `unavailable` / `timeout` if it timed out, else `http_error`.
 * - Any other status (`3xx`, other `2xx`, `400`, `401`, `403`, …) is `unavailable` / `http_error` at
 *   once, not retried: a bad key is an operator's problem, and the slip waits and is asked about again
 *   later by the pipeline.
 * - A circuit breaker opens after `breaker_threshold` (5) consecutive failed calls, a call being all
 *   of its attempts. A failure is a timeout, `429`, `5xx`, network failure or malformed answer;
 *   `found` and `not_found` close the count, and so do the other `http_error` statuses, which say
 *   nothing about the provider's health. While the breaker is open every call is `unavailable` /
 *   `circuit_open` at once without touching the network; after `breaker_half_open_after_ms` (30 s)
 *   one trial call goes through, and the calls made while it runs are `circuit_open` too. A trial
 *   that succeeds closes the breaker; one that fails opens it again.
 *
 * Nothing is logged, and no error this module makes carries the key, an account number, a name or
 * the transaction reference.
 */
import { z } from 'zod';
import type { BankVerifier, TransferLookup, TransferQuery, VerifiedTransfer } from './bank-port.ts';
import {
  HTTP_ERROR,
  MALFORMED,
  ProviderTransport,
  accountSchema,
  amountSchema,
  bankCodeSchema,
  baseUrlOf,
  credentialOf,
  nameSchema,
  timestampSchema,
  type ProviderAnswer,
  type ResilienceOptions,
} from './provider-http.ts';

export interface HttpBankVerifierOptions extends ResilienceOptions {
  /** The provider's base URL, http or https, without credentials; a trailing slash is ignored. */
  url: string;
  /** The provider's API key, sent as a bearer token. */
  key: string;
}

export interface BankVerifierConfig {
  url: string;
  key: string;
  timeout_ms: number;
}

const VERIFY_PATH = '/v1/transfers/verify';

// ---------------------------------------------------------------------------------------------------
// The answer's schema.

const partySchema = z.object({
  bank_code: bankCodeSchema,
  account: accountSchema,
  name_th: nameSchema,
  name_en: nameSchema,
});

const answerSchema = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('found'),
    transfer: z.object({
      sending_bank_code: bankCodeSchema,
      trans_ref: z.string().min(1).max(200),
      amount: amountSchema,
      occurred_at: timestampSchema,
      sender: partySchema,
      receiver: partySchema,
    }),
  }),
  z.object({ status: z.literal('not_found') }),
]);

type PartyAnswer = z.infer<typeof partySchema>;

function partyOf(party: PartyAnswer): VerifiedTransfer['sender'] {
  return { bank_code: party.bank_code, account_number: party.account, name_th: party.name_th, name_en: party.name_en };
}

// ---------------------------------------------------------------------------------------------------
// Reading the answer.

/** Turns a 200's body into an outcome; anything unexpected is malformed. */
function interpretAnswer(document: unknown, query: TransferQuery): TransferLookup {
  const parsed = answerSchema.safeParse(document);
  if (!parsed.success) return MALFORMED;
  const answer = parsed.data;
  if (answer.status === 'not_found') return { outcome: 'not_found' };
  const transfer = answer.transfer;
  if (transfer.sending_bank_code !== query.sending_bank_code || transfer.trans_ref !== query.trans_ref) return MALFORMED;
  return {
    outcome: 'found',
    transfer: {
      sending_bank_code: transfer.sending_bank_code,
      trans_ref: transfer.trans_ref,
      amount_minor: transfer.amount,
      occurred_at: transfer.occurred_at,
      sender: partyOf(transfer.sender),
      receiver: partyOf(transfer.receiver),
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// The verifier.

/**
 * Turns an answer that is not a 429 or 5xx into the outcome: a 200 is read against the schema; a 404 is
 * `not_found` only with the provider's own `not_found` body; any other status is `http_error`.
 */
function readAnswer(answer: ProviderAnswer, query: TransferQuery): TransferLookup {
  if (answer.status === 200) return answer.document === undefined ? MALFORMED : interpretAnswer(answer.document, query);
  if (answer.status === 404 && answer.document !== undefined && interpretAnswer(answer.document, query).outcome === 'not_found') return { outcome: 'not_found' };
  return HTTP_ERROR;
}

export class HttpBankVerifier implements BankVerifier {
  private readonly endpoint: string;
  private readonly key: string;
  private readonly transport: ProviderTransport;

  constructor(options: HttpBankVerifierOptions) {
    this.endpoint = `${baseUrlOf(options.url)}${VERIFY_PATH}`;
    this.key = credentialOf(options.key, 'key');
    this.transport = new ProviderTransport(options);
  }

  verifyTransfer(query: TransferQuery): Promise<TransferLookup> {
    const request = {
      method: 'POST' as const,
      url: this.endpoint,
      headers: { authorization: `Bearer ${this.key}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ sending_bank_code: query.sending_bank_code, trans_ref: query.trans_ref }),
    };
    return this.transport.lookup(request, (answer) => readAnswer(answer, query));
  }
}

const NOT_CONFIGURED: BankVerifier = {
  async verifyTransfer(): Promise<TransferLookup> {
    return { outcome: 'unavailable', reason: 'not_configured' };
  },
};

/**
 * The live verifier for the configuration; without a provider, one that answers `not_configured`
 * without any I/O, so that live slips wait rather than fail.
 */
export function createBankVerifierFromConfig(config: BankVerifierConfig | null): BankVerifier {
  if (config === null) return NOT_CONFIGURED;
  return new HttpBankVerifier({ url: config.url, key: config.key, timeout_ms: config.timeout_ms });
}
