import type { FastifyReply } from 'fastify';
import { ApiError } from '../platform/errors.ts';

/**
 * Rate buckets (spec, Limits). Each bucket is a fixed window counted in PostgreSQL, so every process
 * shares it. `pay_write` and `pay_create_per_user` are the spec's; the others cover routes whose
 * limits the spec leaves open and are recorded in docs/decisions/rate-limits.md.
 */
export interface BucketPolicy {
  name: string;
  limit: number;
  window_seconds: number;
  /** What one counter stands for; reported in X-RateLimit-Scope. */
  scope: 'api_key' | 'user' | 'merchant' | 'ip' | 'credential' | 'link';
}

export const BUCKETS = {
  pay_write: { name: 'pay_write', limit: 600, window_seconds: 60, scope: 'api_key' },
  pay_read: { name: 'pay_read', limit: 1200, window_seconds: 60, scope: 'api_key' },
  pay_create_per_user: { name: 'pay_create_per_user', limit: 10, window_seconds: 60, scope: 'user' },
  pay_create_shared: { name: 'pay_create_shared', limit: 60, window_seconds: 60, scope: 'merchant' },
  backoffice: { name: 'backoffice', limit: 600, window_seconds: 60, scope: 'credential' },
  public: { name: 'public', limit: 300, window_seconds: 60, scope: 'ip' },
  /**
   * A signed public link (a leg's QR image), counted per link once its signature verifies: unauthenticated
   * junk from the same address (or from every client behind one proxy) never uses up an end user's QR.
   */
  public_link: { name: 'public_link', limit: 60, window_seconds: 60, scope: 'link' },
  /** Slip uploads (spec, Limits): 20 per minute per end user, by the capability's rate_subject plus client IP. */
  slip_upload: { name: 'slip_upload', limit: 20, window_seconds: 60, scope: 'user' },
} as const satisfies Record<string, BucketPolicy>;

/**
 * Tight retry loops on 429 put the whole key into backoff (spec, Errors, Rules 1). The rule is ours
 * (docs/decisions/rate-limits.md, "Backoff of a key"): a key whose own bucket has refused more than
 * `refusals_before_backoff` requests in one window is refused in every bucket of the key for
 * `seconds`; a key that sends more than `tolerated_during_backoff` requests during a backoff starts it
 * again from the latest of them. The state is one counter row per key, whatever the key sends.
 */
export const KEY_BACKOFF = Object.freeze({
  bucket: 'key_backoff',
  refusals_before_backoff: 60,
  seconds: 60,
  tolerated_during_backoff: 10,
});

/** The backoff terms an admission statement needs for a request counted in the key bucket `policy`. */
export function keyBackoffTerms(policy: BucketPolicy): { bucket: string; start_above_count: number; seconds: number; tolerated: number } {
  return {
    bucket: KEY_BACKOFF.bucket,
    start_above_count: policy.limit + KEY_BACKOFF.refusals_before_backoff,
    seconds: KEY_BACKOFF.seconds,
    tolerated: KEY_BACKOFF.tolerated_during_backoff,
  };
}

export function windowStart(now: Date, policy: BucketPolicy): Date {
  const windowMs = policy.window_seconds * 1000;
  return new Date(Math.floor(now.getTime() / windowMs) * windowMs);
}

/** The state of one bucket after counting this request. */
export interface BucketState {
  policy: BucketPolicy;
  count: number;
  window_started_at: Date;
  now: Date;
  /** When the key's backoff (KEY_BACKOFF) ends, for a key bucket whose key is in one; absent otherwise. */
  backoff_until?: Date;
}

function inBackoff(state: BucketState): boolean {
  return state.backoff_until !== undefined && state.backoff_until.getTime() > state.now.getTime();
}

export function remaining(state: BucketState): number {
  return inBackoff(state) ? 0 : Math.max(0, state.policy.limit - state.count);
}

/**
 * Seconds until the bucket admits again: its window's end; in a backoff, the backoff's end, or the window's when
 * the window is exceeded too and ends later.
 */
export function resetSeconds(state: BucketState): number {
  const windowEndMs = state.window_started_at.getTime() + state.policy.window_seconds * 1000;
  const backoffEndMs = inBackoff(state) ? (state.backoff_until?.getTime() ?? 0) : null;
  const endMs = backoffEndMs === null ? windowEndMs : state.count > state.policy.limit ? Math.max(windowEndMs, backoffEndMs) : backoffEndMs;
  return Math.max(1, Math.ceil((endMs - state.now.getTime()) / 1000));
}

export function isExceeded(state: BucketState): boolean {
  return state.count > state.policy.limit || inBackoff(state);
}

/**
 * Of several buckets a request counted in, the one its rate headers report: an exceeded one (the answer is then
 * its 429), else the first, the caller's own bucket. The spec names what a merchant sees: "Rate bucket `pay_write`
 * | 600 requests per minute per API key (`RateLimit-Policy` shows `600;w=60`)", so a creation that also counts in
 * its end user's bucket still reports the key's until that other bucket refuses it.
 */
export function decisiveBucket(states: readonly BucketState[]): BucketState | null {
  return states.find(isExceeded) ?? states[0] ?? null;
}

/** Sets the six rate headers the spec requires on every response. */
export function applyRateHeaders(reply: FastifyReply, state: BucketState): void {
  const exceeded = isExceeded(state);
  reply.header('RateLimit-Limit', String(state.policy.limit));
  reply.header('RateLimit-Remaining', String(remaining(state)));
  reply.header('RateLimit-Reset', String(resetSeconds(state)));
  reply.header('RateLimit-Policy', `${state.policy.limit};w=${state.policy.window_seconds}`);
  reply.header('X-RateLimit-Scope', state.policy.scope);
  reply.header('Retry-After', String(exceeded ? resetSeconds(state) : 0));
}

export function rateLimitedError(state: BucketState): ApiError {
  return new ApiError('rate_limited', {
    retry_after_seconds: resetSeconds(state),
    // A refusal of a key in backoff names the backoff, so that a client can tell it from its bucket's window.
    details: { bucket: inBackoff(state) ? KEY_BACKOFF.bucket : state.policy.name, scope: state.policy.scope },
  });
}

/** The `client` object of creation requests (spec, POST /v1/pay/deposits). */
export interface ClientInfo {
  device_fingerprint?: string | undefined;
  ip?: string | undefined;
  user_agent?: string | undefined;
}

export function isClientComplete(client: ClientInfo | undefined): client is Required<ClientInfo> {
  return Boolean(client && client.device_fingerprint && client.ip && client.user_agent);
}

/**
 * The per-user bucket of order creation (spec, Limits): with a complete `client`, 10 per minute per
 * end user of the merchant; without it, the coarse `pay_create_shared` bucket that all of the
 * merchant's users share.
 */
export function creationBuckets(
  input: { end_user_ref: string; client?: ClientInfo | undefined },
  context: { merchant_id: string; livemode: boolean },
): { policy: BucketPolicy; subject: string }[] {
  const environment = context.livemode ? 'live' : 'test';
  if (isClientComplete(input.client)) {
    return [{ policy: BUCKETS.pay_create_per_user, subject: `${context.merchant_id}:${environment}:${input.end_user_ref}` }];
  }
  return [{ policy: BUCKETS.pay_create_shared, subject: `${context.merchant_id}:${environment}` }];
}
