/**
 * The event envelope of the spec (Events, "Envelope"), identical on every event, and the rule for
 * `data.previous_attributes`: only the keys whose value changed, with their old value, plus the old
 * `version`; null on `*.created`; absent for immutable objects such as balance_transaction.
 */

export interface EventEnvelope {
  id: string;
  object: 'event';
  type: string;
  api_version: string;
  livemode: boolean;
  created_at: string;
  sequence: number;
  account: { merchant_id: string; white_label_id: string };
  request?: { id?: string; idempotency_key?: string };
  data: { object: Record<string, unknown>; previous_attributes?: Record<string, unknown> | null };
}

/** Deep equality over JSON values; objects compare by keys regardless of order. */
export function jsonEqual(left: unknown, right: unknown): boolean {
  if (left === right) return true;
  if (left === null || right === null || typeof left !== 'object' || typeof right !== 'object') return false;
  if (Array.isArray(left) !== Array.isArray(right)) return false;
  if (Array.isArray(left) && Array.isArray(right)) {
    return left.length === right.length && left.every((item, index) => jsonEqual(item, right[index]));
  }
  const leftRecord = left as Record<string, unknown>;
  const rightRecord = right as Record<string, unknown>;
  const leftKeys = Object.keys(leftRecord).filter((key) => leftRecord[key] !== undefined);
  const rightKeys = Object.keys(rightRecord).filter((key) => rightRecord[key] !== undefined);
  if (leftKeys.length !== rightKeys.length) return false;
  return leftKeys.every((key) => Object.hasOwn(rightRecord, key) && jsonEqual(leftRecord[key], rightRecord[key]));
}

/**
 * Keys of `after` whose value differs from `before`, mapped to their old value (null when the key
 * was absent before), plus `version` with the old version. Keys removed in `after` also appear.
 */
export function computePreviousAttributes(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): Record<string, unknown> {
  const previous: Record<string, unknown> = {};
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const key of keys) {
    if (key === 'version') continue;
    const oldValue = before[key];
    const newValue = after[key];
    if (oldValue === undefined && newValue === undefined) continue;
    if (!jsonEqual(oldValue, newValue)) previous[key] = oldValue === undefined ? null : oldValue;
  }
  previous.version = before.version;
  return previous;
}
