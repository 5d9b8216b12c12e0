/**
 * Invariant assertions (TIGER_STYLE): a failed assertion is a programming error, never a business
 * outcome, so it throws and the surrounding transaction rolls back.
 */
export class InvariantViolation extends Error {
  override name = 'InvariantViolation';
}

export function invariant(condition: unknown, message: string): asserts condition {
  if (!condition) throw new InvariantViolation(message);
}
