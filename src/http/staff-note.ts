import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';

/**
 * The note a reviewer or an operator writes with a decision (review, claim, dispute, reversal): at least
 * 20 characters, counted in code points after trimming (Thai combining marks count, as the database's
 * length() does), at most 2,000. A shorter one is 422 `review_note_required` (spec). Notes are internal:
 * they never reach a merchant's view or event.
 */
export const STAFF_NOTE_MIN_CHARS = 20;
export const STAFF_NOTE_MAX_CHARS = 2000;

/** The note as a schema takes it; the minimum is checked after the schema, to answer the spec's own code. */
export const staffNoteSchema = z.string().max(STAFF_NOTE_MAX_CHARS);

export function requireStaffNote(note: string | null | undefined): string {
  if (note === null || note === undefined || [...note.trim()].length < STAFF_NOTE_MIN_CHARS) {
    throw new ApiError('review_note_required', { details: { min_length: STAFF_NOTE_MIN_CHARS } });
  }
  return note.trim();
}
