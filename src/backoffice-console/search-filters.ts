import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { decodeCursor, encodeCursor } from '../http/paging.ts';
import { escapeHtml } from './html.ts';

/**
 * What the console's search pages share (orders, audit log): days typed in Bangkok time, and a cursor bound to
 * the filters it was made under, so that a cursor of other filters starts again from the top instead of failing.
 */

const DAY_MS = 24 * 60 * 60 * 1000;
export const DATE_PATTERN = /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/;

/** A form's text field: absent, empty or longer than `max` characters leaves the filter out. */
export function textField(max: number): z.ZodType<string | undefined> {
  return z.string().min(1).max(max).optional().catch(undefined);
}

export const dateField = z.string().regex(DATE_PATTERN).optional().catch(undefined);
export const cursorField = z.string().min(1).max(1000).optional().catch(undefined);

/**
 * The start of a day in Bangkok time (UTC+7, which has no daylight saving), or of the next day when `next` is
 * set: "to" days are inclusive, so the bound is the start of the day after. Null for an impossible date.
 */
export function bangkokDay(text: string | undefined, next: boolean): Date | null {
  if (text === undefined) return null;
  const start = Date.parse(`${text}T00:00:00+07:00`);
  if (Number.isNaN(start) || new Date(start + 7 * 60 * 60 * 1000).toISOString().slice(0, 10) !== text) return null;
  return new Date(start + (next ? DAY_MS : 0));
}

const cursorSchema = z
  .object({ v: z.literal(1), created_at: z.string().min(1).max(40), id: z.string().min(1).max(100), filters: z.string().max(2000) })
  .strict();

/** The position a cursor names, when it was made under these filters; null otherwise (start from the top). */
export function readCursor(text: string | undefined, filters: string): { created_at: Date; id: string } | null {
  if (text === undefined) return null;
  try {
    const decoded = decodeCursor(cursorSchema, text);
    const created_at = new Date(decoded.created_at);
    if (decoded.filters !== filters || Number.isNaN(created_at.getTime())) return null;
    return { created_at, id: decoded.id };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return null;
  }
}

export function makeCursor(last: { created_at: Date; id: string }, filters: string): string {
  return encodeCursor({ v: 1, created_at: last.created_at.toISOString(), id: last.id, filters });
}

export function option(value: string, label: string, selected: string | null): string {
  return `<option value="${escapeHtml(value)}"${selected === value ? ' selected' : ''}>${escapeHtml(label)}</option>`;
}

/** A labelled text or date input of a filter form, with its current value. */
export function inputField(field: { id: string; name: string; label: string; value: string | null; type?: 'text' | 'date'; hint?: string; max?: number }): string {
  const type = field.type ?? 'text';
  const hintId = `${field.id}-hint`;
  const described = field.hint === undefined ? '' : ` aria-describedby="${hintId}"`;
  const hint = field.hint === undefined ? '' : `<p class="hint" id="${hintId}">${escapeHtml(field.hint)}</p>`;
  const limits = type === 'text' ? ` maxlength="${field.max ?? 64}" autocomplete="off"` : '';
  return `<div><label for="${field.id}">${escapeHtml(field.label)}</label>
<input id="${field.id}" name="${field.name}" type="${type}" value="${escapeHtml(field.value ?? '')}"${limits}${described}>${hint}</div>`;
}
