/**
 * Money is integer satang held in a JavaScript `number`, checked with `Number.isSafeInteger` at every
 * boundary (DESIGN: "choose once"). The database column is `bigint` and a CHECK keeps it below 2^53.
 */
export const MAX_SAFE_MINOR = Number.MAX_SAFE_INTEGER;

export function isMinorAmount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

export function assertMinor(value: unknown, what: string): asserts value is number {
  if (!isMinorAmount(value)) {
    throw new Error(`invariant: ${what} must be a safe integer amount of satang`);
  }
}

export function assertPositiveMinor(value: unknown, what: string): asserts value is number {
  assertMinor(value, what);
  if (value <= 0) throw new Error(`invariant: ${what} must be positive`);
}
