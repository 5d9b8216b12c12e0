/**
 * Timestamps leave the service as RFC 3339 UTC with exactly three millisecond digits and `Z`
 * (spec, conventions rule 2). `Date.prototype.toISOString` produces exactly that shape for years
 * 0000-9999, which is asserted so that a corrupted date can never leak a six-digit year.
 */
const TIMESTAMP_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function formatTimestamp(instant: Date): string {
  const text = instant.toISOString();
  if (!TIMESTAMP_PATTERN.test(text)) {
    throw new Error('timestamp outside the representable range');
  }
  return text;
}

export function formatNullableTimestamp(instant: Date | null | undefined): string | null {
  return instant == null ? null : formatTimestamp(instant);
}

/**
 * Accepts only the exact wire shape of a real instant between 1970 and 9999. Offsets, missing
 * milliseconds and impossible dates (02-30, 24:00, which `Date` would roll over) are refused by the
 * round trip. Years before 1970 are refused because no instant of this service precedes it, and
 * because PGlite's driver misreads early years (0001 arrives as 2001).
 */
export function parseTimestamp(text: string): Date | null {
  if (!TIMESTAMP_PATTERN.test(text)) return null;
  const year = Number(text.slice(0, 4));
  if (year < 1970) return null;
  const instant = new Date(text);
  if (Number.isNaN(instant.getTime()) || instant.toISOString() !== text) return null;
  return instant;
}

export function addMilliseconds(instant: Date, milliseconds: number): Date {
  return new Date(instant.getTime() + milliseconds);
}

export const SECOND_MS = 1000;
export const MINUTE_MS = 60 * SECOND_MS;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;
