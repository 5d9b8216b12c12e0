import crypto from 'node:crypto';

/**
 * The merchant request signature (spec, Authentication, "Merchant requests"). The canonical string is
 * nine lines, each ending in a newline, the last included: `v1`, PG-Timestamp, PG-Nonce, the method in
 * upper case, the path, the sorted query (empty when none), the lowercase hex SHA-256 of the body bytes
 * (of the empty string without a body), the Idempotency-Key (empty when none) and PG-Version. The
 * signature is `v1=` followed by the lowercase hex HMAC-SHA256 of that string, keyed with the UTF-8
 * bytes of the signing secret. The SDK's tests check every line of this file against the service's
 * published vectors (GET /v1/webhooks/test-vectors, `api_request_vectors`).
 */

/** The API version this SDK is written against: sent as PG-Version on every request and signed. */
export const API_VERSION = '2026-08-01';

export interface CanonicalRequest {
  /** Unix seconds, as sent in PG-Timestamp. */
  timestamp: string;
  nonce: string;
  method: string;
  path: string;
  /** The raw query string without `?`, as sent; empty when none. */
  query: string;
  body: Uint8Array | string;
  /** Empty when the request has none. */
  idempotency_key: string;
  api_version: string;
}

export function sha256Hex(data: Uint8Array | string): string {
  return crypto.createHash('sha256').update(data).digest('hex');
}

/**
 * The query as the canonical string holds it: its raw `name=value` parts, empty ones dropped, sorted by
 * UTF-16 code unit (byte order for a percent-encoded query) and joined with `&`. Nothing is decoded or
 * re-encoded, so the signer and the service can never disagree about an encoding.
 */
export function sortQuery(query: string): string {
  const parts = query.split('&').filter((part) => part.length > 0);
  parts.sort((left, right) => (left < right ? -1 : left > right ? 1 : 0));
  return parts.join('&');
}

export function canonicalString(request: CanonicalRequest): string {
  return [
    'v1',
    request.timestamp,
    request.nonce,
    request.method.toUpperCase(),
    request.path,
    sortQuery(request.query),
    sha256Hex(request.body),
    request.idempotency_key,
    request.api_version,
  ]
    .map((line) => `${line}\n`)
    .join('');
}

/** `v1=` + lowercase hex HMAC-SHA256 of the canonical string, keyed with the signing secret's UTF-8 bytes. */
export function signCanonicalString(signing_secret: string, canonical: string): string {
  return `v1=${crypto.createHmac('sha256', signing_secret).update(canonical, 'utf8').digest('hex')}`;
}

export interface SignRequestInput {
  api_key: string;
  signing_secret: string;
  method: string;
  path: string;
  /** The raw query without `?`, exactly as it will be sent; empty when none. */
  query?: string;
  /** The exact body bytes that will be sent; none for a request without a body. */
  body?: Uint8Array;
  idempotency_key?: string;
  api_version?: string;
  /** Unix seconds; now by default. */
  timestamp_seconds?: number;
  /** A fresh random value by default; it must never repeat within 10 minutes. */
  nonce?: string;
}

/**
 * Every authentication header of one attempt of a merchant request. A retry calls this again: a new
 * nonce, timestamp and signature, the same Idempotency-Key (spec, Errors, rule 4).
 */
export function signRequest(input: SignRequestInput): Record<string, string> {
  const timestamp = String(input.timestamp_seconds ?? Math.floor(Date.now() / 1000));
  const nonce = input.nonce ?? crypto.randomBytes(16).toString('hex');
  const api_version = input.api_version ?? API_VERSION;
  const idempotency_key = input.idempotency_key ?? '';
  const canonical = canonicalString({
    timestamp,
    nonce,
    method: input.method,
    path: input.path,
    query: input.query ?? '',
    body: input.body ?? new Uint8Array(0),
    idempotency_key,
    api_version,
  });
  const headers: Record<string, string> = {
    authorization: `Bearer ${input.api_key}`,
    'pg-timestamp': timestamp,
    'pg-nonce': nonce,
    'pg-version': api_version,
    'pg-signature': signCanonicalString(input.signing_secret, canonical),
  };
  if (idempotency_key !== '') headers['idempotency-key'] = idempotency_key;
  return headers;
}
