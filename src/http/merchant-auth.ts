import type { FastifyRequest } from 'fastify';
import { invariant } from '../platform/assert.ts';
import { ApiError } from '../platform/errors.ts';
import type { ReadPart } from '../platform/read-part.ts';
import { constantTimeEqual } from '../platform/crypto.ts';
import { MINUTE_MS } from '../platform/time.ts';
import { SUPPORTED_API_VERSIONS } from '../platform/cause.ts';
import type { ApiKeyScope } from '../platform/access.ts';
import { canonicalString, signCanonical, splitTarget } from './canonical.ts';
import type { MerchantContext } from './context.ts';
import type { ResolvedApiKey, ServerDependencies } from './ports.ts';

/** What authenticating a merchant request needs of the server's dependencies. */
type MerchantAuthDependencies = Pick<ServerDependencies, 'config' | 'clock' | 'callers'>;
import { type BucketPolicy, type BucketState, isExceeded, KEY_BACKOFF, keyBackoffTerms, windowStart } from './rate-limit.ts';

/**
 * Merchant request authentication (spec, Authentication). The order of checks is fixed and recorded
 * in docs/decisions/authentication.md: key → environment → signature → version → timestamp window → (one statement:
 * nonce, rate bucket, key chain status) → revoked → suspended → nonce → rate → scope. Nothing about
 * the account is revealed to a caller whose signature has not verified.
 */
export const TIMESTAMP_WINDOW_SECONDS = 300;
export const NONCE_RETENTION_MS = 10 * MINUTE_MS;

const API_KEY_PATTERN = /^sk_(test|live)_[A-Za-z0-9_-]{16,128}$/;
// Up to 16 digits: a timestamp in milliseconds (13 digits) still verifies its signature and is then
// answered `timestamp_out_of_window`, which tells the integrator what is wrong (not `signature_invalid`).
const TIMESTAMP_PATTERN = /^[0-9]{1,16}$/;
const NONCE_PATTERN = /^[\x21-\x7e]{1,128}$/;
const SIGNATURE_PATTERN = /^v1=[0-9a-f]{64}$/;
const VERSION_PATTERN = /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/;
// Longer keys are checked for their format after authentication (validation_error); this bound only
// keeps an absurd header from being hashed.
const MAX_SIGNED_IDEMPOTENCY_KEY_LENGTH = 4096;

function headerText(request: FastifyRequest, name: string): string | null {
  const value = request.headers[name];
  if (typeof value !== 'string') return null;
  return value;
}

export function bearerToken(request: FastifyRequest): string | null {
  const authorization = headerText(request, 'authorization');
  if (!authorization || authorization.length > 512) return null;
  // The scheme is case-insensitive (RFC 9110, section 11.1).
  const match = /^Bearer ([^\s]+)$/i.exec(authorization);
  return match?.[1] ?? null;
}

export interface MerchantAdmission {
  context: MerchantContext;
  bucket: BucketState;
  /** The request's further buckets as counted by the admission, in the order `prepare` asked. */
  extra_buckets: BucketState[];
  /** The values of the reads `prepare` asked the admission to carry, in order. */
  attachments: unknown[];
}

/**
 * What a route adds to its request's admission statement, decided before it is sent from what needs no
 * database: the further buckets the request counts in (an end user's), and reads of other modules every
 * request of the route needs (the sandbox's attached test clock). One round trip then admits the request.
 */
export interface AdmissionExtras {
  buckets: { policy: BucketPolicy; subject: string }[];
  attachments: ReadPart<unknown>[];
}

/**
 * What the headers alone say of a merchant request: its key (resolved, usually from the in-process
 * cache) and the signing headers in their formats. Decided before the body is read, so that a request
 * that will be refused is refused before its body arrives; the checks keep their documented order
 * (key, environment, then the signature's headers).
 */
export interface IdentifiedMerchantRequest {
  key: ResolvedApiKey;
  timestamp: string;
  nonce: string;
  version: string;
  signature: string;
  idempotency_key: string | null;
}

export async function identifyMerchantRequest(deps: MerchantAuthDependencies, request: FastifyRequest): Promise<IdentifiedMerchantRequest> {
  const apiKey = bearerToken(request);
  const keyMatch = apiKey ? API_KEY_PATTERN.exec(apiKey) : null;
  if (!apiKey || !keyMatch) throw new ApiError('api_key_invalid');
  const prefixLivemode = keyMatch[1] === 'live';
  if (prefixLivemode ? !deps.config.accepts_live_mode : !deps.config.accepts_test_mode) {
    throw new ApiError('api_key_invalid');
  }
  const key = await deps.callers.resolveApiKey(apiKey);
  if (!key || key.livemode !== prefixLivemode) throw new ApiError('api_key_invalid');

  const timestamp = headerText(request, 'pg-timestamp');
  const nonce = headerText(request, 'pg-nonce');
  const version = headerText(request, 'pg-version');
  const signature = headerText(request, 'pg-signature');
  const idempotencyKey = headerText(request, 'idempotency-key');
  if (
    !timestamp || !TIMESTAMP_PATTERN.test(timestamp) ||
    !nonce || !NONCE_PATTERN.test(nonce) ||
    !version || !VERSION_PATTERN.test(version) ||
    !signature || !SIGNATURE_PATTERN.test(signature) ||
    (idempotencyKey !== null && idempotencyKey.length > MAX_SIGNED_IDEMPOTENCY_KEY_LENGTH)
  ) {
    throw new ApiError('signature_invalid');
  }
  return { key, timestamp, nonce, version, signature, idempotency_key: idempotencyKey };
}

export async function authenticateMerchant(
  deps: MerchantAuthDependencies,
  request: FastifyRequest,
  identified: IdentifiedMerchantRequest,
  rawBody: Buffer,
  scope: ApiKeyScope,
  bucket: BucketPolicy,
  prepare: (context: MerchantContext) => AdmissionExtras = () => ({ buckets: [], attachments: [] }),
): Promise<MerchantAdmission> {
  const { key, timestamp, nonce, version, signature } = identified;
  const idempotencyKey = identified.idempotency_key;
  const { path, query } = splitTarget(request.raw.url ?? request.url);
  const expected = signCanonical(
    key.signing_secret,
    canonicalString({
      timestamp,
      nonce,
      method: request.method,
      path,
      query,
      body: rawBody,
      idempotency_key: idempotencyKey ?? '',
      api_version: version,
    }),
  );
  if (!constantTimeEqual(expected, signature)) throw new ApiError('signature_invalid');

  if (!SUPPORTED_API_VERSIONS.includes(version)) {
    throw new ApiError('api_version_unsupported', { details: { supported_versions: [...SUPPORTED_API_VERSIONS] } });
  }
  const now = deps.clock.now();
  const skewSeconds = Math.abs(now.getTime() / 1000 - Number(timestamp));
  if (skewSeconds > TIMESTAMP_WINDOW_SECONDS) throw new ApiError('timestamp_out_of_window');

  const context: MerchantContext = {
    request_id: request.id,
    white_label_id: key.white_label_id,
    merchant_id: key.merchant_id,
    livemode: key.livemode,
    api_key_id: key.api_key_id,
    api_version: version,
    idempotency_key: idempotencyKey,
    cause: { request_id: request.id, idempotency_key: idempotencyKey, api_version: version },
  };
  const extras = prepare(context);
  const window = windowStart(now, bucket);
  const admission = await deps.callers.admitSignedRequest({
    white_label_id: key.white_label_id,
    merchant_id: key.merchant_id,
    api_key_id: key.api_key_id,
    nonce,
    nonce_expires_at: new Date(now.getTime() + NONCE_RETENTION_MS),
    now,
    bucket: bucket.name,
    subject: key.api_key_id,
    window_started_at: window,
    key_limit: bucket.limit,
    scope_granted: key.scopes.has(scope),
    backoff: keyBackoffTerms(bucket),
    extra_buckets: extras.buckets.map((extra) => ({ bucket: extra.policy.name, subject: extra.subject, window_started_at: windowStart(now, extra.policy) })),
    attachments: extras.attachments,
  });
  if (!admission) throw new ApiError('api_key_invalid');
  const bucketState: BucketState = { policy: bucket, count: admission.request_count, window_started_at: admission.window_started_at, now };
  if (admission.backoff_started_at) bucketState.backoff_until = new Date(admission.backoff_started_at.getTime() + KEY_BACKOFF.seconds * 1000);
  // The bucket state is attached before any later refusal so that even a 401 carries rate headers.
  (request as FastifyRequest & { rateState?: BucketState }).rateState = bucketState;
  if (admission.key_status === 'revoked') throw new ApiError('api_key_revoked');
  if (admission.key_status !== 'active' || admission.merchant_status !== 'active' || admission.brand_status !== 'active') {
    throw new ApiError('tenant_suspended');
  }
  if (!admission.nonce_fresh) throw new ApiError('nonce_replayed');
  if (!key.scopes.has(scope)) throw new ApiError('scope_denied');

  // An admitted request within its key's bucket was counted in every further bucket (the statement's rule).
  const extra_buckets = extras.buckets.map((extra, index): BucketState => {
    const counted = admission.extra_counts[index];
    if (counted) return { policy: extra.policy, count: counted.request_count, window_started_at: counted.window_started_at, now };
    invariant(isExceeded(bucketState), 'an admitted request within its key bucket is counted in its further buckets');
    return { policy: extra.policy, count: 0, window_started_at: windowStart(now, extra.policy), now };
  });
  return { bucket: bucketState, context, extra_buckets, attachments: admission.attachments };
}
