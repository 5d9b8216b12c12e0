/**
 * The building blocks every live slip-verification adapter shares: the resilience policy (a timeout per
 * attempt, retries with backoff for 429, 5xx and network failures, and a circuit breaker per adapter
 * instance), bounded reading of an answer's body, and the strict schemas of the values a provider
 * reports (amounts in baht as text or JSON numbers, RFC 3339 times, masked accounts, names).
 *
 * Used by the generic HTTP adapter (`http-adapter.ts`) and the provider adapters (`slipok-adapter.ts`,
 * `easyslip-adapter.ts`, `rdcw-adapter.ts`). Nothing here logs, and no error made here carries a key,
 * an account number, a name, a QR payload or a transaction reference.
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
import { MASK_CHARACTERS, type OperatorAlertReason, type TransferLookup } from './bank-port.ts';

/** The resilience settings of one adapter instance. */
export interface ResilienceOptions {
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

/** Why an operator should look at a provider: its answer will not change until a person acts. */
export interface ProviderAlert {
  provider: 'slipok' | 'easyslip' | 'rdcw';
  reason: OperatorAlertReason | 'circuit_open';
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
const MAX_NAME_CHARACTERS = 200;
const MAX_SAFE_SATANG = BigInt(Number.MAX_SAFE_INTEGER);

export const MALFORMED: TransferLookup = { outcome: 'unavailable', reason: 'malformed_response' };
export const HTTP_ERROR: TransferLookup = { outcome: 'unavailable', reason: 'http_error' };

/**
 * An attempt that failed in a way worth retrying: a 429, a 5xx or a network failure. It carries no
 * detail on purpose, so that nothing about the request can leak through it.
 */
export class RetryableFailure extends Error {
  constructor() {
    super('slip verification provider attempt failed');
    this.name = 'RetryableFailure';
  }
}

// ---------------------------------------------------------------------------------------------------
// Schemas of reported values.

export const bankCodeSchema = z.string().regex(/^\d{3}$/);

function escapeForCharacterClass(character: string): string {
  return character.replace(/[\\\]^-]/g, '\\$&');
}

/** Digits and the mask characters banks print, 4 to 20 of them, once separators are gone. */
const ACCOUNT_PATTERN = new RegExp(`^[0-9${MASK_CHARACTERS.map(escapeForCharacterClass).join('')}]{4,20}$`, 'u');

export const accountSchema = z
  .string()
  .max(100)
  .transform((account) => account.replace(/[\s-]/gu, ''))
  .pipe(z.string().regex(ACCOUNT_PATTERN));

/** An empty name says as little as an absent one, so both become null. */
export const nameSchema = z
  .string()
  .refine((name) => [...name].length <= MAX_NAME_CHARACTERS)
  .nullish()
  .transform((name) => (name == null || name.trim() === '' ? null : name));

/** Baht with at most two decimals, no sign, no exponent, no leading zeros. */
const AMOUNT_PATTERN = /^(?:0|[1-9]\d{0,20})(?:\.\d{1,2})?$/;

/** Converts baht text to satang with integer arithmetic only: a float would round some amounts. */
function satangOf(amount: string): bigint {
  const [whole = '0', fraction = ''] = amount.split('.');
  return BigInt(whole) * 100n + BigInt(fraction.padEnd(2, '0'));
}

/** A positive amount of baht as decimal text (`"1000"`, `"1000.5"`, `"1000.50"`), in satang. */
export const amountSchema = z
  .string()
  .regex(AMOUNT_PATTERN)
  .transform(satangOf)
  .pipe(z.bigint().positive().max(MAX_SAFE_SATANG))
  .transform((satang) => Number(satang));

/**
 * A positive amount of baht as a JSON number (`1000`, `1500.5`), in satang. The number's shortest
 * decimal form (what `String` gives, which is the text the provider sent for any amount with at most two
 * decimals and fifteen digits) goes through the text rules, so the conversion stays integer arithmetic;
 * a number that needs an exponent or more than two decimals is malformed.
 */
export const numericAmountSchema = z
  .number()
  .finite()
  .transform((amount) => String(amount))
  .pipe(amountSchema);

/** RFC 3339 date-time with seconds and an offset; `t` and `z` may be lower case. */
const TIMESTAMP_PATTERN = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Reads an RFC 3339 timestamp field by field, rejecting impossible dates (`Date.parse` quietly turns
 * 30 February into 2 March).
 */
export function parseTimestamp(text: string): Date | null {
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

export const timestampSchema = z
  .string()
  .max(64)
  .transform((text) => parseTimestamp(text))
  .pipe(z.date());

/**
 * A Thai bank's date (`yyyyMMdd`) and time (`HH:mm:ss`) as printed on a slip: Bangkok time, which has
 * been UTC+7 without daylight saving since 1920.
 */
export function bangkokTimeOf(date: string, time: string): Date | null {
  const match = /^(\d{4})(\d{2})(\d{2})$/.exec(date);
  if (!match || !/^\d{2}:\d{2}:\d{2}$/.test(time)) return null;
  return parseTimestamp(`${match[1]}-${match[2]}-${match[3]}T${time}+07:00`);
}

/** Thai script, by which a name the provider did not label is told to be Thai rather than English. */
const THAI_SCRIPT = /[\u0E00-\u0E7F]/u;

/**
 * Names as SlipOK and RDCW print them: `displayName` in Thai or English depending on the issuing bank,
 * `name` in English. A display name in Thai is the Thai name; one in Latin letters adds nothing to `name`.
 */
export function namesOfDisplay(display_name: string | null, name: string | null): { name_th: string | null; name_en: string | null } {
  const display_is_thai = display_name !== null && THAI_SCRIPT.test(display_name);
  return { name_th: display_is_thai ? display_name : null, name_en: name ?? (display_is_thai ? null : display_name) };
}

/** The Bank of Thailand codes of the banks table (migrations/0001_foundation.sql) by their short names. */
const BANK_CODES_BY_SHORT_NAME: ReadonlyMap<string, string> = new Map([
  ['BBL', '002'],
  ['KBANK', '004'],
  ['KTB', '006'],
  ['TTB', '011'],
  ['SCB', '014'],
  ['CIMBT', '022'],
  ['UOBT', '024'],
  ['BAY', '025'],
  ['GSB', '030'],
  ['GHB', '033'],
  ['BAAC', '034'],
  ['IBANK', '066'],
  ['TISCO', '067'],
  ['KKP', '069'],
  ['ICBCT', '070'],
  ['TCD', '071'],
  ['LHFG', '073'],
  ['SMEB', '098'],
]);

/** A provider's short bank name (`KBANK`) as a Bank of Thailand code; null when it names no known bank. */
export function bankCodeOfShortName(short_name: string): string | null {
  return BANK_CODES_BY_SHORT_NAME.get(short_name.trim().toUpperCase()) ?? null;
}

// ---------------------------------------------------------------------------------------------------
// Reading answers.

/** What a provider answered: its status and its JSON body, or undefined when there is no readable one. */
export interface ProviderAnswer {
  status: number;
  /** Undefined when the body is absent, not labelled JSON, larger than the bound, or not UTF-8 JSON. */
  document: unknown;
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

/** The JSON body of an answer, or undefined (see ProviderAnswer). */
async function readJsonBody(response: Response, max_bytes: number): Promise<unknown> {
  if (!isJsonContentType(response.headers.get('content-type'))) {
    await discardBody(response);
    return undefined;
  }
  const body = await readBounded(response, max_bytes);
  if (body === null) return undefined;
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)) as unknown;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------
// Configuration checks.

export function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < 1) throw new Error(`invalid slip verifier configuration: ${name} must be a positive integer`);
  return chosen;
}

/** Checks a base URL once, so that a configuration mistake fails at start; returns it without a trailing slash. */
export function baseUrlOf(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error('invalid slip verifier configuration: url is not a URL');
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('invalid slip verifier configuration: url must be http or https');
  if (parsed.username !== '' || parsed.password !== '') throw new Error('invalid slip verifier configuration: url must not carry credentials');
  if (parsed.search !== '' || parsed.hash !== '') throw new Error('invalid slip verifier configuration: url must not have a query or fragment');
  return url.replace(/\/+$/, '');
}

function isControlCharacter(character: string): boolean {
  const code = character.codePointAt(0) ?? 0;
  return code < 0x20 || code === 0x7f;
}

/**
 * Refuses an empty credential or one with control characters: fetch would throw on every attempt, which
 * would look like a network failure. The message names the setting, never its value.
 */
export function credentialOf(value: string, name: string): string {
  if (value.length === 0 || [...value].some(isControlCharacter)) throw new Error(`invalid slip verifier configuration: ${name} must be non-empty printable text`);
  return value;
}

// ---------------------------------------------------------------------------------------------------
// The transport.

export interface ProviderRequest {
  method: 'GET' | 'POST';
  url: string;
  headers: Record<string, string>;
  body?: string;
}

function isMalformed(result: unknown): boolean {
  const lookup = result as TransferLookup | undefined;
  return lookup?.outcome === 'unavailable' && lookup.reason === 'malformed_response';
}

/** What a probe (one attempt, no retries, no breaker) got: an answer, or why none came. */
export type ProbeResult = { answered: true; answer: ProviderAnswer } | { answered: false; failure: 'timeout' | 'http_error' };

/**
 * One provider's HTTP exchanges under one resilience policy. The breaker is outermost, so that it counts
 * calls rather than attempts: one call that needed three attempts is one failure, and an open breaker
 * stops a call before any attempt or backoff. Malformed answers count towards it too, though they are not
 * retried. Retry sits between: it sees each attempt's timeout as a failure to retry, and its backoff waits
 * are outside the per-attempt timeout. The timeout is innermost and aggressive, and its signal goes to
 * fetch, so that the socket is really closed at the deadline. While a half-open trial runs, other calls
 * are answered `circuit_open` at once rather than waiting for the trial's verdict.
 */
export class ProviderTransport {
  private readonly max_response_bytes: number;
  private readonly timeout_ms: number;
  private readonly breaker: CircuitBreakerPolicy;
  private readonly policy: IPolicy;

  constructor(options: ResilienceOptions, on_breaker_open?: () => void) {
    this.timeout_ms = positiveInteger(options.timeout_ms, 0, 'timeout_ms');
    const max_attempts = Math.min(positiveInteger(options.max_attempts, DEFAULT_MAX_ATTEMPTS, 'max_attempts'), MAX_ATTEMPTS_LIMIT);
    const retry_base_ms = positiveInteger(options.retry_base_ms, DEFAULT_RETRY_BASE_MS, 'retry_base_ms');
    const breaker_threshold = positiveInteger(options.breaker_threshold, DEFAULT_BREAKER_THRESHOLD, 'breaker_threshold');
    const half_open_after_ms = positiveInteger(options.breaker_half_open_after_ms, DEFAULT_BREAKER_HALF_OPEN_AFTER_MS, 'breaker_half_open_after_ms');
    this.max_response_bytes = positiveInteger(options.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES, 'max_response_bytes');
    // instanceof rather than cockatiel's isTaskCancelledError: in 3.2.1 that helper tests for the
    // bulkhead's marker property and so never recognises a timeout.
    const isTransportFailure = (error: Error) => error instanceof RetryableFailure || error instanceof TaskCancelledError;
    this.breaker = circuitBreaker(handleWhen(isTransportFailure).orWhenResult(isMalformed), {
      breaker: new ConsecutiveBreaker(breaker_threshold),
      halfOpenAfter: half_open_after_ms,
    });
    if (on_breaker_open) this.breaker.onBreak(on_breaker_open);
    // cockatiel's maxAttempts counts retries, not attempts.
    const retries = retry(handleWhen(isTransportFailure), {
      maxAttempts: max_attempts - 1,
      backoff: new ExponentialBackoff({ initialDelay: retry_base_ms, maxDelay: retry_base_ms * MAX_BACKOFF_FACTOR }),
    });
    this.policy = wrap(this.breaker, retries, timeout(this.timeout_ms, TimeoutStrategy.Aggressive));
  }

  /**
   * Asks about a transfer: `read` turns each answer that is not a 429 or 5xx into the outcome. A 429, a
   * 5xx, a network failure or a timeout is retried; when the last attempt fails the outcome is
   * `unavailable` / `timeout` if it timed out, else `http_error`.
   */
  async lookup(request: ProviderRequest, read: (answer: ProviderAnswer) => TransferLookup): Promise<TransferLookup> {
    if (this.breaker.state === CircuitState.HalfOpen) return { outcome: 'unavailable', reason: 'circuit_open' };
    try {
      return await this.policy.execute(async ({ signal }) => read(await this.exchange(request, signal)));
    } catch (error) {
      // An isolated breaker's error is a BrokenCircuitError too.
      if (error instanceof BrokenCircuitError) return { outcome: 'unavailable', reason: 'circuit_open' };
      if (error instanceof TaskCancelledError) return { outcome: 'unavailable', reason: 'timeout' };
      if (error instanceof RetryableFailure) return HTTP_ERROR;
      throw error;
    }
  }

  /** One attempt under the timeout, outside the breaker: for a "test connection" action. */
  async probe(request: ProviderRequest): Promise<ProbeResult> {
    try {
      const answer = await timeout(this.timeout_ms, TimeoutStrategy.Aggressive).execute(({ signal }) => this.exchange(request, signal, true));
      return { answered: true, answer };
    } catch (error) {
      if (error instanceof TaskCancelledError) return { answered: false, failure: 'timeout' };
      if (error instanceof RetryableFailure) return { answered: false, failure: 'http_error' };
      throw error;
    }
  }

  /**
   * One exchange. Throws RetryableFailure for a 429, a 5xx (unless `keep_server_errors`) or a broken
   * connection; otherwise returns the status and the JSON body. Redirects are never followed.
   */
  private async exchange(request: ProviderRequest, signal: AbortSignal, keep_server_errors = false): Promise<ProviderAnswer> {
    let response: Response;
    try {
      response = await fetch(request.url, { method: request.method, headers: request.headers, body: request.body, redirect: 'manual', signal });
    } catch {
      // fetch's errors may quote the request; only the fact of the failure is kept.
      throw new RetryableFailure();
    }
    try {
      if (!keep_server_errors && (response.status === 429 || response.status >= 500)) {
        await discardBody(response);
        throw new RetryableFailure();
      }
      return { status: response.status, document: await readJsonBody(response, this.max_response_bytes) };
    } catch (error) {
      if (error instanceof RetryableFailure) throw error;
      // The connection broke while the body was read.
      throw new RetryableFailure();
    }
  }
}

/** What a "test connection" action learns from a provider's info or quota route. */
export type ConnectionCheck =
  | { ok: true; /** Verifications left; null when the provider says the quota is unlimited. */ remaining_quota: number | null }
  | { ok: false; reason: OperatorAlertReason | 'unreachable' | 'unexpected_answer' };
