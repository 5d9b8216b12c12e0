import type { OpenEnum } from './resources.js';

/**
 * Errors the SDK throws. The service's error body (spec, Errors) becomes an `ApiError` with every field
 * of it; a request that got no answer is a `ConnectionError`; an answer that is not the service's JSON
 * (a proxy's 502 page, say) is an `UnexpectedResponseError`. All three extend `PaymentServiceError`,
 * which tells whether a retry may succeed. New codes may appear: branch on `code` with a default branch
 * that honours `retryable`.
 */

/** Error codes the spec names (an open set: a later version may add codes). */
export type ErrorCode = OpenEnum<
  | 'signature_invalid'
  | 'timestamp_out_of_window'
  | 'nonce_replayed'
  | 'api_key_invalid'
  | 'api_key_revoked'
  | 'tenant_suspended'
  | 'scope_denied'
  | 'idempotency_key_required'
  | 'malformed_json'
  | 'unsupported_media_type'
  | 'cursor_filter_mismatch'
  | 'validation_error'
  | 'sender_required'
  | 'amount_not_supported'
  | 'review_note_required'
  | 'insufficient_balance'
  | 'resource_not_found'
  | 'idempotency_key_reused'
  | 'idempotency_in_flight'
  | 'sender_bank_unavailable'
  | 'duplicate_open_deposit'
  | 'too_many_open_deposits'
  | 'deposit_not_cancelable'
  | 'deposit_not_reviewable'
  | 'withdrawal_has_pending_fill'
  | 'withdrawal_not_cancelable'
  | 'deposit_not_refundable'
  | 'refund_exceeds_refundable'
  | 'refund_limit_reached'
  | 'refund_payee_unverified'
  | 'beneficiary_not_verified'
  | 'alloc_state_conflict'
  | 'withdrawal_state_conflict'
  | 'late_slip_window_closed'
  | 'rate_limited'
  | 'route_unavailable'
  | 'service_unavailable'
  | 'slip_intake_unavailable'
  | 'internal_error'
>;

export interface FieldProblem {
  path: string;
  reason: string;
  hint?: string;
}

/** The `details` the spec gives for some codes; any other code's details are a plain record. */
export interface ErrorDetailsByCode {
  validation_error: { fields: FieldProblem[] };
  amount_not_supported: { min_minor?: number; max_minor?: number };
  insufficient_balance: { available_minor: number; required_minor: number; pending_clearing_minor: number; pending_clearing_available_at: string | null };
  idempotency_key_reused: { original_request_id?: string };
  sender_bank_unavailable: { alternative_banks?: unknown[]; public_message_th?: string; retry_after_hint_seconds?: number; bank_code?: string };
  duplicate_open_deposit: { open_deposit_ids: string[] };
  too_many_open_deposits: { open_deposit_ids: string[] };
  late_slip_window_closed: { deposit_id: string; late_slip_accepted_until: string; claim_url: string };
  rate_limited: { bucket: string; scope: string };
  /** The deposit is not `settled` (`status` says what it is; `reversed` once reversed). */
  deposit_not_refundable: { deposit_id: string; status: string };
  /** `refundable_minor` is what is left to refund of the deposit, after every live refund and what closed ones paid. */
  refund_exceeds_refundable: { deposit_id: string; amount_minor: number; refundable_minor: number };
  refund_limit_reached: { deposit_id: string; max_refunds: number };
  /** `sender_not_verified`: no account the bank verified; `bank_not_receiving`: the sender's bank only sends. */
  refund_payee_unverified: { deposit_id: string; reason: OpenEnum<'sender_not_verified' | 'bank_not_receiving'> };
}

export type DetailsOf<Code extends string> = Code extends keyof ErrorDetailsByCode ? ErrorDetailsByCode[Code] & Record<string, unknown> : Record<string, unknown>;

export class PaymentServiceError extends Error {
  /** True when the same request may succeed later (the SDK already retried it when it could). */
  readonly retryable: boolean;
  constructor(message: string, retryable: boolean, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PaymentServiceError';
    this.retryable = retryable;
  }
}

/** The service's error body: branch on `code` only, and log `request_id`. */
export class ApiError<Code extends ErrorCode = ErrorCode> extends PaymentServiceError {
  readonly http_status: number;
  readonly code: Code;
  readonly type: string;
  readonly message_th: string;
  /** Set when the wait is known (429, 503, 409 idempotency_in_flight, 409 withdrawal_has_pending_fill). */
  readonly retry_after_seconds: number | null;
  readonly request_id: string | null;
  readonly details: DetailsOf<Code>;
  /** The Retry-After header of the answer, in seconds; null without one. */
  readonly retry_after_header_seconds: number | null;

  constructor(input: {
    http_status: number;
    code: Code;
    type: string;
    message: string;
    message_th: string;
    retryable: boolean;
    retry_after_seconds: number | null;
    request_id: string | null;
    details: DetailsOf<Code>;
    retry_after_header_seconds: number | null;
  }) {
    super(input.message, input.retryable);
    this.name = 'ApiError';
    this.http_status = input.http_status;
    this.code = input.code;
    this.type = input.type;
    this.message_th = input.message_th;
    this.retry_after_seconds = input.retry_after_seconds;
    this.request_id = input.request_id;
    this.details = input.details;
    this.retry_after_header_seconds = input.retry_after_header_seconds;
  }

  /** Narrows the error to one code, and so its `details` to that code's shape. */
  is<Named extends ErrorCode>(code: Named): this is ApiError<Named> {
    return (this.code as string) === code;
  }
}

/** The request got no answer (refused, reset, timed out). Retryable: with the same Idempotency-Key a POST happens once. */
export class ConnectionError extends PaymentServiceError {
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`no answer from the payment service (${reason})`, true, options);
    this.name = 'ConnectionError';
    this.reason = reason;
  }
}

/** An answer that is not the service's JSON (a proxy's error page, say); retryable for 502, 503 and 504. */
export class UnexpectedResponseError extends PaymentServiceError {
  readonly http_status: number;
  constructor(http_status: number, message: string) {
    super(message, http_status === 502 || http_status === 503 || http_status === 504);
    this.name = 'UnexpectedResponseError';
    this.http_status = http_status;
  }
}

/** True when `error` is the service's error with this code; narrows `details`. */
export function isApiError<Code extends ErrorCode>(error: unknown, code?: Code): error is ApiError<Code> {
  return error instanceof ApiError && (code === undefined || error.code === code);
}
