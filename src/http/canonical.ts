import crypto from 'node:crypto';
import { hmacSha256Hex, sha256Hex } from '../platform/crypto.ts';

/**
 * The merchant request signature (spec, Authentication): nine lines, each ending in a newline:
 * `v1`, timestamp, nonce, METHOD, path, sorted query, hex SHA-256 of the body bytes, Idempotency-Key
 * (empty when none), PG-Version. The signature is `v1=` + lowercase hex HMAC-SHA256 keyed with the
 * signing secret's UTF-8 bytes, so `openssl dgst -sha256 -hmac "$SECRET"` produces the same value.
 *
 * The query is sorted as sent: split on `&`, empty parts dropped, the raw `name=value` parts sorted by
 * UTF-16 code unit (byte order for the ASCII of a percent-encoded query), joined with `&`. Nothing is
 * decoded or re-encoded, so signer and verifier can never disagree on an encoding.
 */
export interface CanonicalInput {
  timestamp: string;
  nonce: string;
  method: string;
  path: string;
  /** The raw query string without the leading `?`; empty when none. */
  query: string;
  body: Uint8Array | string;
  idempotency_key: string;
  api_version: string;
}

export function sortQuery(query: string): string {
  const parts = query.split('&').filter((part) => part.length > 0);
  parts.sort((left, right) => (left < right ? -1 : left > right ? 1 : 0));
  return parts.join('&');
}

export function canonicalString(input: CanonicalInput): string {
  return [
    'v1',
    input.timestamp,
    input.nonce,
    input.method.toUpperCase(),
    input.path,
    sortQuery(input.query),
    sha256Hex(input.body),
    input.idempotency_key,
    input.api_version,
  ]
    .map((line) => `${line}\n`)
    .join('');
}

export function signCanonical(signingSecret: string, canonical: string): string {
  return `v1=${hmacSha256Hex(signingSecret, canonical)}`;
}

/** Splits a request target into path and raw query. */
export function splitTarget(target: string): { path: string; query: string } {
  const index = target.indexOf('?');
  return index === -1 ? { path: target, query: '' } : { path: target.slice(0, index), query: target.slice(index + 1) };
}

export interface SignedHeadersInput {
  api_key: string;
  signing_secret: string;
  method: string;
  /** Path plus optional query, exactly as it will be sent. */
  target: string;
  body?: string | Uint8Array;
  idempotency_key?: string;
  api_version?: string;
  timestamp_seconds?: number;
  nonce?: string;
}

/** Builds every header of a signed merchant request; used by tests, benchmarks and the CLI. */
export function signedHeaders(input: SignedHeadersInput): Record<string, string> {
  const { path, query } = splitTarget(input.target);
  const timestamp = String(input.timestamp_seconds ?? Math.floor(Date.now() / 1000));
  const nonce = input.nonce ?? crypto.randomBytes(16).toString('hex');
  const apiVersion = input.api_version ?? '2026-08-01';
  const body = input.body ?? '';
  const canonical = canonicalString({
    timestamp,
    nonce,
    method: input.method,
    path,
    query,
    body,
    idempotency_key: input.idempotency_key ?? '',
    api_version: apiVersion,
  });
  const headers: Record<string, string> = {
    authorization: `Bearer ${input.api_key}`,
    'pg-timestamp': timestamp,
    'pg-nonce': nonce,
    'pg-version': apiVersion,
    'pg-signature': signCanonical(input.signing_secret, canonical),
  };
  if (input.idempotency_key !== undefined) headers['idempotency-key'] = input.idempotency_key;
  if (input.body !== undefined && (typeof input.body === 'string' ? input.body.length : input.body.byteLength) > 0) {
    headers['content-type'] = 'application/json';
  }
  return headers;
}
