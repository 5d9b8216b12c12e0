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
import {
  BrokenCircuitError,
  CircuitState,
  ConsecutiveBreaker,
  ExponentialBackoff,
  TaskCancelledError,
  TimeoutStrategy,
  circuitBreaker,
  handleWhen,
  retry,
  timeout,
  wrap,
  type CircuitBreakerPolicy,
  type IPolicy,
} from 'cockatiel';
import { z } from 'zod';
import { MASK_CHARACTERS, type BankVerifier, type TransferLookup, type TransferQuery, type VerifiedTransfer } from './bank-port.ts';

export interface HttpBankVerifierOptions {
  /** The provider's base URL, http or https, without credentials; a trailing slash is ignored. */
  url: string;
  /** The provider's API key, sent as a bearer token. */
  key: string;
  /** The longest one attempt may take, from sending the request to the last byte of the answer. */
  timeout_ms: number;
  /** Attempts per call, the first included. */
  max_attempts?: number;
  /** The scale of the backoff between attempts; the longest wait is 16 times this. */
  retry_base_ms?: number;
  /** Consecutive failed calls that open the circuit breaker. */
  breaker_threshold?: number;
  /** How long the breaker stays open before it lets one trial call through. */
  breaker_half_open_after_ms?: number;
  /** The most of an answer's body that is read; a larger body is malformed. */
  max_response_bytes?: number;
}

export interface BankVerifierConfig {
  url: string;
  key: string;
  timeout_ms: number;
}

const DEFAULT_MAX_ATTEMPTS = 3;
const DEFAULT_RETRY_BASE_MS = 200;
const DEFAULT_BREAKER_THRESHOLD = 5;
const DEFAULT_BREAKER_HALF_OPEN_AFTER_MS = 30_000;
const DEFAULT_MAX_RESPONSE_BYTES = 65_536;
/** Attempts are capped so that a configuration mistake cannot turn one call into a flood. */
const MAX_ATTEMPTS_LIMIT = 10;
/** The longest backoff wait, as a multiple of retry_base_ms. */
const MAX_BACKOFF_FACTOR = 16;
const VERIFY_PATH = '/v1/transfers/verify';
const MAX_NAME_CHARACTERS = 200;
const MAX_SAFE_SATANG = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * An attempt that failed in a way worth retrying: a 429, a 5xx or a network failure. It carries no
 * detail on purpose, so that nothing about the request can leak through it.
 */
class RetryableFailure extends Error {
  constructor() {
    super('slip verification provider attempt failed');
    this.name = 'RetryableFailure';
  }
}

// ---------------------------------------------------------------------------------------------------
// The answer's schema.

const bankCodeSchema = z.string().regex(/^\d{3}$/);

function escapeForCharacterClass(character: string): string {
  return character.replace(/[\\\]^-]/g, '\\$&');
}

/** Digits and the mask characters banks print, 4 to 20 of them, once separators are gone. */
const ACCOUNT_PATTERN = new RegExp(`^[0-9${MASK_CHARACTERS.map(escapeForCharacterClass).join('')}]{4,20}$`, 'u');

const accountSchema = z
  .string()
  .max(100)
  .transform((account) => account.replace(/[\s-]/gu, ''))
  .pipe(z.string().regex(ACCOUNT_PATTERN));

/** An empty name says as little as an absent one, so both become null. */
const nameSchema = z
  .string()
  .refine((name) => [...name].length <= MAX_NAME_CHARACTERS)
  .nullish()
  .transform((name) => (name == null || name === '' ? null : name));

/** Baht with at most two decimals, no sign, no exponent, no leading zeros. */
const AMOUNT_PATTERN = /^(?:0|[1-9]\d{0,20})(?:\.\d{1,2})?$/;

/** Converts baht text to satang with integer arithmetic only: a float would round some amounts. */
function satangOf(amount: string): bigint {
  const [whole = '0', fraction = ''] = amount.split('.');
  return BigInt(whole) * 100n + BigInt(fraction.padEnd(2, '0'));
}

const amountSchema = z
  .string()
  .regex(AMOUNT_PATTERN)
  .transform(satangOf)
  .pipe(z.bigint().positive().max(MAX_SAFE_SATANG))
  .transform((satang) => Number(satang));

/** RFC 3339 date-time with seconds and an offset; `t` and `z` may be lower case. */
const TIMESTAMP_PATTERN = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Reads an RFC 3339 timestamp field by field, rejecting impossible dates (`Date.parse` quietly turns
 * 30 February into 2 March).
 */
function parseTimestamp(text: string): Date | null {
  const match = TIMESTAMP_PATTERN.exec(text);
  if (!match) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = match[7] ?? '';
  const milliseconds = Number(fraction.padEnd(3, '0').slice(0, 3));
  const offset_sign = match[9] === '-' ? -1 : 1;
  const offset_hours = match[8] ? 0 : Number(match[10]);
  const offset_minutes = match[8] ? 0 : Number(match[11]);
  // Date.UTC maps years 0 to 99 onto 1900 to 1999; no bank transfer is that old, so such years are refused.
  if (year < 1000) return null;
  const days_in_month = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > days_in_month) return null;
  if (hour > 23 || minute > 59 || second > 59 || offset_hours > 23 || offset_minutes > 59) return null;
  const local_ms = Date.UTC(year, month - 1, day, hour, minute, second, milliseconds);
  const instant_ms = local_ms - offset_sign * (offset_hours * 60 + offset_minutes) * 60_000;
  return new Date(instant_ms);
}

const timestampSchema = z
  .string()
  .max(64)
  .transform((text) => parseTimestamp(text))
  .pipe(z.date());

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

const MALFORMED: TransferLookup = { outcome: 'unavailable', reason: 'malformed_response' };
const HTTP_ERROR: TransferLookup = { outcome: 'unavailable', reason: 'http_error' };

function isMalformed(result: unknown): boolean {
  const lookup = result as TransferLookup | undefined;
  return lookup?.outcome === 'unavailable' && lookup.reason === 'malformed_response';
}

/** Releases an answer's body without reading it, so that the connection is not held by it. */
async function discardBody(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}

function isJsonContentType(header: string | null): boolean {
  if (header === null) return false;
  const media_type = header.split(';', 1)[0]?.trim().toLowerCase();
  return media_type === 'application/json';
}

/**
 * Reads at most max_bytes of the body; null when it is larger. The loop ends at the end of the
 * stream, at the byte limit, or when the attempt's timeout aborts the request, whichever is first.
 */
async function readBounded(response: Response, max_bytes: number): Promise<Uint8Array | null> {
  const declared = response.headers.get('content-length');
  if (declared !== null && Number(declared) > max_bytes) {
    await discardBody(response);
    return null;
  }
  if (response.body === null) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > max_bytes) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  const body = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/** Turns a 200's body into an outcome; anything unexpected is malformed. */
function interpretAnswer(body: Uint8Array, query: TransferQuery): TransferLookup {
  let document: unknown;
  try {
    document = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    return MALFORMED;
  }
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

function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < 1) throw new Error(`invalid slip verifier configuration: ${name} must be a positive integer`);
  return chosen;
}

/** Checks the URL and key once, so that a configuration mistake fails at start rather than on every slip. */
function endpointOf(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error('invalid slip verifier configuration: url is not a URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('invalid slip verifier configuration: url must be http or https');
  if (parsed.username !== '' || parsed.password !== '') throw new Error('invalid slip verifier configuration: url must not carry credentials');
  if (parsed.search !== '' || parsed.hash !== '') throw new Error('invalid slip verifier configuration: url must not have a query or fragment');
  return `${url.replace(/\/+$/, '')}${VERIFY_PATH}`;
}

function isControlCharacter(character: string): boolean {
  const code = character.codePointAt(0) ?? 0;
  return code < 0x20 || code === 0x7f;
}

export class HttpBankVerifier implements BankVerifier {
  private readonly endpoint: string;
  private readonly key: string;
  private readonly max_response_bytes: number;
  private readonly breaker: CircuitBreakerPolicy;
  private readonly policy: IPolicy;

  constructor(options: HttpBankVerifierOptions) {
    this.endpoint = endpointOf(options.url);
    // A key with control characters would make fetch throw on every attempt, which would look like a
    // network failure; it is refused here instead, without repeating the key.
    if (options.key.length === 0 || [...options.key].some(isControlCharacter)) throw new Error('invalid slip verifier configuration: key must be non-empty printable text');
    this.key = options.key;
    const timeout_ms = positiveInteger(options.timeout_ms, 0, 'timeout_ms');
    const max_attempts = Math.min(positiveInteger(options.max_attempts, DEFAULT_MAX_ATTEMPTS, 'max_attempts'), MAX_ATTEMPTS_LIMIT);
    const retry_base_ms = positiveInteger(options.retry_base_ms, DEFAULT_RETRY_BASE_MS, 'retry_base_ms');
    const breaker_threshold = positiveInteger(options.breaker_threshold, DEFAULT_BREAKER_THRESHOLD, 'breaker_threshold');
    const half_open_after_ms = positiveInteger(options.breaker_half_open_after_ms, DEFAULT_BREAKER_HALF_OPEN_AFTER_MS, 'breaker_half_open_after_ms');
    this.max_response_bytes = positiveInteger(options.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES, 'max_response_bytes');

    // instanceof rather than cockatiel's isTaskCancelledError: in 3.2.1 that helper tests for the
    // bulkhead's marker property and so never recognises a timeout.
    const isTransportFailure = (error: Error) => error instanceof RetryableFailure || error instanceof TaskCancelledError;
    // The breaker is outermost, so that it counts calls rather than attempts: one call that needed
    // three attempts is one failure, and an open breaker stops a call before any attempt or backoff.
    // Malformed answers count towards it too, though they are not retried.
    this.breaker = circuitBreaker(handleWhen(isTransportFailure).orWhenResult(isMalformed), {
      breaker: new ConsecutiveBreaker(breaker_threshold),
      halfOpenAfter: half_open_after_ms,
    });
    // Retry sits between: it sees each attempt's timeout as a failure to retry, and its backoff waits
    // are outside the per-attempt timeout. cockatiel's maxAttempts counts retries, not attempts.
    const retries = retry(handleWhen(isTransportFailure), {
      maxAttempts: max_attempts - 1,
      backoff: new ExponentialBackoff({ initialDelay: retry_base_ms, maxDelay: retry_base_ms * MAX_BACKOFF_FACTOR }),
    });
    // The timeout is innermost, bounding one attempt. Aggressive, so that the attempt is given up at
    // the deadline even if something ignores the signal; the signal goes to fetch as well, so that the
    // socket is really closed rather than left reading in the background.
    const per_attempt = timeout(timeout_ms, TimeoutStrategy.Aggressive);
    this.policy = wrap(this.breaker, retries, per_attempt);
  }

  async verifyTransfer(query: TransferQuery): Promise<TransferLookup> {
    // While a trial call runs, cockatiel would make other calls wait for its verdict (up to all of its
    // attempts); they are answered at once instead, the same as while the breaker is open.
    if (this.breaker.state === CircuitState.HalfOpen) return { outcome: 'unavailable', reason: 'circuit_open' };
    try {
      return await this.policy.execute(({ signal }) => this.attempt(query, signal));
    } catch (error) {
      // An isolated breaker's error is a BrokenCircuitError too.
      if (error instanceof BrokenCircuitError) return { outcome: 'unavailable', reason: 'circuit_open' };
      if (error instanceof TaskCancelledError) return { outcome: 'unavailable', reason: 'timeout' };
      if (error instanceof RetryableFailure) return HTTP_ERROR;
      throw error;
    }
  }

  /**
   * One exchange with the provider. Returns the outcomes that are final (found, not found, malformed,
   * a status not worth retrying) and throws RetryableFailure for those that are worth another attempt.
   */
  private async attempt(query: TransferQuery, signal: AbortSignal): Promise<TransferLookup> {
    let response: Response;
    try {
      response = await fetch(this.endpoint, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.key}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ sending_bank_code: query.sending_bank_code, trans_ref: query.trans_ref }),
        redirect: 'manual',
        signal,
      });
    } catch {
      // fetch's errors may quote the request; only the fact of the failure is kept.
      throw new RetryableFailure();
    }
    try {
      if (response.status === 404) {
        // Only the provider's own answer about the transfer is a verdict (see the contract above).
        const body = isJsonContentType(response.headers.get('content-type')) ? await readBounded(response, this.max_response_bytes) : null;
        if (body === null) await discardBody(response);
        return body !== null && interpretAnswer(body, query).outcome === 'not_found' ? { outcome: 'not_found' } : HTTP_ERROR;
      }
      if (response.status === 429 || response.status >= 500) {
        await discardBody(response);
        throw new RetryableFailure();
      }
      if (response.status !== 200) {
        await discardBody(response);
        return HTTP_ERROR;
      }
      if (!isJsonContentType(response.headers.get('content-type'))) {
        await discardBody(response);
        return MALFORMED;
      }
      const body = await readBounded(response, this.max_response_bytes);
      if (body === null) return MALFORMED;
      return interpretAnswer(body, query);
    } catch (error) {
      if (error instanceof RetryableFailure) throw error;
      // The connection broke while the body was read.
      throw new RetryableFailure();
    }
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
