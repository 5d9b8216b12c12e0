import crypto from 'node:crypto';
import { ApiError, ConnectionError, PaymentServiceError, UnexpectedResponseError, type DetailsOf, type ErrorCode } from './errors.js';
import type { PaymentEvent } from './events.js';
import type {
  Balance,
  Bank,
  Beneficiary,
  CreateBeneficiaryParams,
  CreateDepositParams,
  CreateRefundParams,
  CreateWithdrawalParams,
  CursorPage,
  DepositOrder,
  ListDepositsParams,
  ListWithdrawalsParams,
  Sender,
  SlipUpload,
  TestVectors,
  WebhookSigningKey,
  WithdrawalOrder,
} from './resources.js';
import { API_VERSION, signRequest } from './signing.js';

/**
 * The merchant API client: every request signed as the spec says, retried when a retry is safe and may
 * help, and answered as typed values or typed errors.
 *
 * Retries (spec, Errors, rules 1 and 4, and Common request rules 2): every attempt of one call keeps its
 * `Idempotency-Key` (a POST gets a fresh random one when the caller gives none) and signs again with a
 * new nonce and timestamp. A retry happens only for an answer marked `retryable`, no answer at all, or a
 * proxy's 502/503/504; never for a non-retryable code. A few codes are retryable only once something
 * else changes (`AWAITS_A_CHANGE`), so they are returned to the caller instead of repeated blindly. The
 * wait is the service's `retry_after_seconds` (else its `Retry-After` header) plus 0 to 20 % jitter, so
 * never sooner than asked (tight loops on 429 put the whole key into backoff); without one, exponential
 * backoff from 500 ms with ±20 % jitter. At most `max_attempts` attempts (4 by default), and a wait
 * longer than `max_retry_wait_ms` (60 s by default) is not waited: the error is thrown for the caller to
 * schedule. Each attempt has its own timeout (30 s by default).
 */

export interface ClientOptions {
  /** The service's base address, such as https://api.example.com (from the sandbox credentials). */
  base_url: string;
  /** `sk_test_…` for the sandbox, `sk_live_…` for live. */
  api_key: string;
  /** The secret signing key; never log it. */
  signing_secret: string;
  /** PG-Version; the version this SDK is written for by default. */
  api_version?: string;
  /** Attempts per call, the first included: 1 (no retries) to 10; 4 by default. */
  max_attempts?: number;
  /** The longest server-requested wait the SDK waits itself; 60 000 by default. */
  max_retry_wait_ms?: number;
  /** Per attempt; 30 000 by default. */
  timeout_ms?: number;
  /** The fetch to use; the global one by default. */
  fetch?: typeof fetch;
  /** The clock for PG-Timestamp, in milliseconds; Date.now by default. */
  now_ms?: () => number;
  /** How a retry waits; a timer by default (tests can advance a clock instead). */
  sleep?: (ms: number) => Promise<void>;
  /** Uniform in [0, 1) for jitter; Math.random by default. */
  random?: () => number;
  /** Told before every retry (logging): which attempt failed, why, and how long the SDK waits. */
  on_retry?: (retry: RetryNotice) => void;
}

export interface RetryNotice {
  method: string;
  path: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  error: PaymentServiceError;
  wait_ms: number;
  idempotency_key: string | null;
}

export type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  method: 'GET' | 'POST';
  /** Starts with `/`, such as `/v1/pay/deposits`; ids in it must be encoded (the resources do). */
  path: string;
  query?: Record<string, QueryValue>;
  /** JSON-encoded as UTF-8; omitted for a request without a body. */
  body?: unknown;
  /** Kept by every retry. A POST gets a fresh random one when none is given; pass your own to retry across processes. */
  idempotency_key?: string;
  /** Cancels the call, retries included. */
  signal?: AbortSignal;
}

export interface ApiResponse<Body> {
  http_status: number;
  data: Body;
  request_id: string | null;
  /** True when the service answered with the stored response of an earlier request with this key. */
  idempotent_replay: boolean;
  headers: Headers;
  /** How many attempts the call took. */
  attempts: number;
}

/** Per-call options of the resource methods. */
export interface CallOptions {
  idempotency_key?: string;
  signal?: AbortSignal;
}

/**
 * Retryable codes whose retry needs something else to change first: the clock (`timestamp_out_of_window`),
 * the balance, a beneficiary's verification, the end user's choice of bank, or the order's matching. The
 * SDK returns them at once; `retryable` on the error still says a later call may succeed.
 */
export const AWAITS_A_CHANGE: ReadonlySet<string> = new Set([
  'timestamp_out_of_window',
  'insufficient_balance',
  'beneficiary_not_verified',
  'sender_bank_unavailable',
  'deposit_not_payable',
]);

const DEFAULT_MAX_ATTEMPTS = 4;
const MAX_ATTEMPTS_LIMIT = 10;
const DEFAULT_MAX_RETRY_WAIT_MS = 60_000;
const DEFAULT_TIMEOUT_MS = 30_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;
/** "About 20 percent" (spec, rate_limited). */
const JITTER = 0.2;
/** The most of an answer read; the service's bodies are far smaller. */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** `a=1&b=2` from the values given (undefined and null left out), each part encoded, the parts sorted as the canonical string sorts them. */
export function encodeQuery(query: Record<string, QueryValue> | undefined): string {
  if (!query) return '';
  const parts: string[] = [];
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    parts.push(`${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`);
  }
  parts.sort((left, right) => (left < right ? -1 : left > right ? 1 : 0));
  return parts.join('&');
}

/** Seconds from a Retry-After header (delta seconds or an HTTP date); null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now_ms: number): number | null {
  if (value === null || value.trim() === '') return null;
  const text = value.trim();
  if (/^[0-9]{1,9}$/.test(text)) return Number(text);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return null;
  return Math.max(0, Math.ceil((date - now_ms) / 1000));
}

function segment(id: string): string {
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('an id is a non-empty string');
  return encodeURIComponent(id);
}

export class PaymentClient {
  readonly base_url: string;
  readonly api_version: string;
  private readonly options: Required<Pick<ClientOptions, 'max_attempts' | 'max_retry_wait_ms' | 'timeout_ms'>> & ClientOptions;
  private readonly fetchFunction: typeof fetch;
  private readonly now_ms: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(options: ClientOptions) {
    let url: URL;
    try {
      url = new URL(options.base_url);
    } catch {
      throw new TypeError('base_url must be an absolute http(s) URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError('base_url must be an absolute http(s) URL');
    if (url.search || url.hash || url.username || url.password) throw new TypeError('base_url must not carry a query, fragment or credentials');
    if (typeof options.api_key !== 'string' || options.api_key.length === 0) throw new TypeError('api_key is required');
    if (typeof options.signing_secret !== 'string' || options.signing_secret.length === 0) throw new TypeError('signing_secret is required');
    const max_attempts = options.max_attempts ?? DEFAULT_MAX_ATTEMPTS;
    if (!Number.isInteger(max_attempts) || max_attempts < 1 || max_attempts > MAX_ATTEMPTS_LIMIT) throw new RangeError(`max_attempts must be 1 to ${MAX_ATTEMPTS_LIMIT}`);
    this.base_url = url.href.replace(/\/+$/, '');
    this.api_version = options.api_version ?? API_VERSION;
    this.options = {
      ...options,
      max_attempts,
      max_retry_wait_ms: options.max_retry_wait_ms ?? DEFAULT_MAX_RETRY_WAIT_MS,
      timeout_ms: options.timeout_ms ?? DEFAULT_TIMEOUT_MS,
    };
    this.fetchFunction = options.fetch ?? fetch;
    this.now_ms = options.now_ms ?? Date.now;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
  }

  /** One call: signed, sent, retried as the class comment says. Resolves with a 2xx answer, else throws. */
  async request<Body>(request: RequestOptions): Promise<ApiResponse<Body>> {
    if (!request.path.startsWith('/') || request.path.includes('?') || request.path.includes('#')) {
      throw new TypeError('path starts with / and carries no query (use `query`)');
    }
    const query = encodeQuery(request.query);
    const body = request.body === undefined ? undefined : new TextEncoder().encode(JSON.stringify(request.body));
    const idempotency_key = request.idempotency_key ?? (request.method === 'POST' ? crypto.randomUUID() : undefined);
    const url = `${this.base_url}${request.path}${query ? `?${query}` : ''}`;
    for (let attempt = 1; ; attempt += 1) {
      const headers = signRequest({
        api_key: this.options.api_key,
        signing_secret: this.options.signing_secret,
        method: request.method,
        path: request.path,
        query,
        ...(body ? { body } : {}),
        ...(idempotency_key !== undefined ? { idempotency_key } : {}),
        api_version: this.api_version,
        timestamp_seconds: Math.floor(this.now_ms() / 1000),
      });
      headers.accept = 'application/json';
      if (body) headers['content-type'] = 'application/json';
      let error: PaymentServiceError;
      try {
        const response = await this.fetchFunction(url, {
          method: request.method,
          headers,
          ...(body ? { body } : {}),
          // A redirect would carry the key and signature elsewhere; the base URL should be fixed instead.
          redirect: 'error',
          signal: request.signal ? AbortSignal.any([request.signal, AbortSignal.timeout(this.options.timeout_ms)]) : AbortSignal.timeout(this.options.timeout_ms),
        });
        const answer = await this.read<Body>(response, attempt);
        if ('data' in answer) return answer;
        error = answer.error;
      } catch (thrown) {
        if (request.signal?.aborted) throw thrown;
        if (thrown instanceof PaymentServiceError) error = thrown;
        else error = new ConnectionError(reasonOf(thrown), { cause: thrown });
      }
      const wait_ms = this.retryWait(error, attempt);
      if (wait_ms === null) throw error;
      this.options.on_retry?.({ method: request.method, path: request.path, attempt, error, wait_ms, idempotency_key: idempotency_key ?? null });
      await this.sleep(wait_ms);
      if (request.signal?.aborted) throw request.signal.reason;
    }
  }

  /**
   * How long to wait before the next attempt, or null when there is none: the attempts are used up, the
   * error is not retryable or awaits a change, or the service asked for a longer wait than the SDK waits.
   */
  retryWait(error: PaymentServiceError, attempt: number): number | null {
    if (attempt >= this.options.max_attempts || !error.retryable) return null;
    if (error instanceof ApiError && AWAITS_A_CHANGE.has(error.code)) return null;
    const asked = error instanceof ApiError ? (error.retry_after_seconds ?? error.retry_after_header_seconds) : null;
    if (asked !== null && asked > 0) {
      const asked_ms = asked * 1000;
      if (asked_ms > this.options.max_retry_wait_ms) return null;
      return Math.round(asked_ms * (1 + JITTER * this.random()));
    }
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1));
    return Math.round(base * (1 - JITTER + 2 * JITTER * this.random()));
  }

  private async read<Body>(response: Response, attempts: number): Promise<ApiResponse<Body> | { error: PaymentServiceError }> {
    const declared = Number(response.headers.get('content-length') ?? '0');
    if (declared > MAX_RESPONSE_BYTES) throw new UnexpectedResponseError(response.status, `the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
    const text = await response.text();
    let decoded: unknown;
    try {
      decoded = text.length > 0 ? JSON.parse(text) : undefined;
    } catch {
      decoded = undefined;
    }
    const request_id = response.headers.get('request-id');
    if (response.status >= 200 && response.status < 300) {
      if (decoded === undefined) return { error: new UnexpectedResponseError(response.status, `HTTP ${response.status} without a JSON body`) };
      return {
        http_status: response.status,
        data: decoded as Body,
        request_id,
        idempotent_replay: response.headers.get('idempotent-replay') === 'true',
        headers: response.headers,
        attempts,
      };
    }
    const body = (decoded as { error?: Record<string, unknown> } | undefined)?.error;
    if (!body || typeof body.code !== 'string') {
      return { error: new UnexpectedResponseError(response.status, `HTTP ${response.status} without the service's error body`) };
    }
    const retryAfter = typeof body.retry_after_seconds === 'number' && Number.isFinite(body.retry_after_seconds) ? body.retry_after_seconds : null;
    return {
      error: new ApiError({
        http_status: response.status,
        code: body.code as ErrorCode,
        type: typeof body.type === 'string' ? body.type : 'api_error',
        message: typeof body.message === 'string' ? body.message : body.code,
        message_th: typeof body.message_th === 'string' ? body.message_th : '',
        retryable: body.retryable === true,
        retry_after_seconds: retryAfter,
        request_id: typeof body.request_id === 'string' ? body.request_id : request_id,
        details: (body.details !== null && typeof body.details === 'object' ? body.details : {}) as DetailsOf<ErrorCode>,
        retry_after_header_seconds: parseRetryAfter(response.headers.get('retry-after'), this.now_ms()),
      }),
    };
  }

  private async call<Body>(request: RequestOptions): Promise<Body> {
    return (await this.request<Body>(request)).data;
  }

  /** Deposit orders (spec, POST /v1/pay/deposits and friends). */
  readonly deposits = {
    /** 201 with `awaiting_payment` (and `slip_upload`, `checkout_url`), or 202 with `awaiting_liquidity`. */
    create: (params: CreateDepositParams, options: CallOptions = {}) =>
      this.call<DepositOrder>({ method: 'POST', path: '/v1/pay/deposits', body: params, ...options }),
    retrieve: (id: string, options: CallOptions = {}) => this.call<DepositOrder>({ method: 'GET', path: `/v1/pay/deposits/${segment(id)}`, ...options }),
    list: (params: ListDepositsParams = {}, options: CallOptions = {}) =>
      this.call<CursorPage<DepositOrder>>({ method: 'GET', path: '/v1/pay/deposits', query: { ...params }, ...options }),
    cancel: (id: string, options: CallOptions = {}) => this.call<DepositOrder>({ method: 'POST', path: `/v1/pay/deposits/${segment(id)}/cancel`, ...options }),
    /** A fresh slip capability (after `deposit.matched` on the waiting path). Secret: never log it. */
    slipToken: (id: string, options: CallOptions = {}) => this.call<SlipUpload>({ method: 'POST', path: `/v1/pay/deposits/${segment(id)}/slip-token`, ...options }),
  };

  readonly senders = {
    list: (end_user_ref: string, options: CallOptions = {}) =>
      this.call<{ object: 'list'; data: Sender[] }>({ method: 'GET', path: '/v1/pay/senders', query: { end_user_ref }, ...options }),
  };

  readonly withdrawals = {
    create: (params: CreateWithdrawalParams, options: CallOptions = {}) =>
      this.call<WithdrawalOrder>({ method: 'POST', path: '/v1/pay/withdrawals', body: params, ...options }),
    retrieve: (id: string, options: CallOptions = {}) => this.call<WithdrawalOrder>({ method: 'GET', path: `/v1/pay/withdrawals/${segment(id)}`, ...options }),
    /** A page of the merchant's orders; items carry no `fills` (read one order for them). */
    list: (params: ListWithdrawalsParams = {}, options: CallOptions = {}) =>
      this.call<CursorPage<WithdrawalOrder>>({ method: 'GET', path: '/v1/pay/withdrawals', query: { ...params }, ...options }),
    cancel: (id: string, options: CallOptions = {}) => this.call<WithdrawalOrder>({ method: 'POST', path: `/v1/pay/withdrawals/${segment(id)}/cancel`, ...options }),
  };

  /**
   * Refunds to a deposit's payer (POST and GET /v1/pay/deposits/{id}/refunds). A refund is a withdrawal order with
   * `refund_of_deposit_id`: read, list and cancel it with `withdrawals`, follow it by its `withdrawal.*` events.
   */
  readonly refunds = {
    /** 201 with the refund's withdrawal order; its amount and fee are reserved from `available_minor`. */
    create: (deposit_id: string, params: CreateRefundParams, options: CallOptions = {}) =>
      this.call<WithdrawalOrder>({ method: 'POST', path: `/v1/pay/deposits/${segment(deposit_id)}/refunds`, body: params, ...options }),
    /** The deposit's refunds, oldest first; the whole list (a deposit has at most 20 refunds and their replacements). */
    list: (deposit_id: string, options: CallOptions = {}) =>
      this.call<{ object: 'list'; data: WithdrawalOrder[] }>({ method: 'GET', path: `/v1/pay/deposits/${segment(deposit_id)}/refunds`, ...options }),
  };

  readonly beneficiaries = {
    /** 201 for a new beneficiary, 200 with the existing one for an account already registered. */
    create: (params: CreateBeneficiaryParams, options: CallOptions = {}) =>
      this.call<Beneficiary>({ method: 'POST', path: '/v1/pay/beneficiaries', body: params, ...options }),
    retrieve: (id: string, options: CallOptions = {}) => this.call<Beneficiary>({ method: 'GET', path: `/v1/pay/beneficiaries/${segment(id)}`, ...options }),
  };

  readonly balance = {
    retrieve: (options: CallOptions = {}) => this.call<Balance>({ method: 'GET', path: '/v1/pay/balance', ...options }),
  };

  readonly banks = {
    list: (options: CallOptions = {}) => this.call<{ data: Bank[] }>({ method: 'GET', path: '/v1/pay/banks', ...options }),
  };

  /** The events feed (GET /v1/pay/events); `reconcile` walks it and reports gaps. */
  readonly events = {
    list: (
      params: { since_sequence?: number; limit?: number; cursor?: string; type?: string; status?: string; from?: string; to?: string; order?: 'asc' | 'desc' } = {},
      options: CallOptions = {},
    ) => this.call<CursorPage<PaymentEvent>>({ method: 'GET', path: '/v1/pay/events', query: { ...params }, ...options }),
  };

  /** Public endpoints (no signature): the webhook signing keys and the offline test vectors. */
  readonly webhooks = {
    signingKeys: async (options: { signal?: AbortSignal } = {}) => (await this.publicGet<{ keys: WebhookSigningKey[] }>('/v1/webhooks/signing-keys', options.signal)).keys,
    testVectors: (options: { signal?: AbortSignal } = {}) => this.publicGet<TestVectors>('/v1/webhooks/test-vectors', options.signal),
  };

  /** An unsigned GET of a public endpoint, with the same timeout and the same error reading, not retried. */
  async publicGet<Body>(path: string, signal?: AbortSignal): Promise<Body> {
    let response: Response;
    try {
      response = await this.fetchFunction(`${this.base_url}${path}`, {
        headers: { accept: 'application/json' },
        redirect: 'error',
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.options.timeout_ms)]) : AbortSignal.timeout(this.options.timeout_ms),
      });
    } catch (thrown) {
      if (signal?.aborted) throw thrown;
      throw new ConnectionError(reasonOf(thrown), { cause: thrown });
    }
    const answer = await this.read<Body>(response, 1);
    if ('error' in answer) throw answer.error;
    return answer.data;
  }
}

/** Why fetch failed, in a few words: the socket error code or the timeout, never a stack. */
function reasonOf(error: unknown): string {
  if (error instanceof Error) {
    if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timeout';
    const cause = (error as Error & { cause?: unknown }).cause;
    if (cause && typeof cause === 'object' && 'code' in cause && typeof cause.code === 'string') return cause.code;
    return error.message;
  }
  return 'network error';
}
