import { sha256Hex } from './crypto.ts';

/**
 * What a request asked for, independent of how its JSON was spelled: idempotency compares these
 * (spec, Common request rules 2), so a retry with its keys in another order is the same request.
 */

/** Key order never changes what a JSON body means, so the fingerprint sorts object keys. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).filter((key) => record[key] !== undefined).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`).join(',')}}`;
}

export function requestFingerprint(method: string, path: string, body: unknown): string {
  return sha256Hex(`${method.toUpperCase()}\n${path}\n${body === undefined ? '' : canonicalJson(body)}`);
}
