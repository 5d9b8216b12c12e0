import { z } from 'zod';
import { ApiError, renderError } from '../platform/errors.ts';
import { decodeCursor, encodeCursor } from '../http/paging.ts';
import { escapeHtml, href, wordsOf } from './html.ts';
import type { CaseNotice } from './review-pages.ts';
import { consoleTexts, fill, type ConsoleLanguage } from './texts.ts';

/**
 * What the claims and disputes pages share: their list cursor, a select's options, a refusal in words, the
 * notice above a page, the pager and baht typed by a person. Rendering only; nothing here reads a service.
 */

/** A console list's cursor: the last row's sort key and id, bound to the filters of the page that made it. */
const listCursorSchema = z.object({ v: z.literal(1), at: z.string().min(1).max(40), id: z.string().min(1).max(100), filters: z.string().max(400) }).strict();

export function encodeListCursor(at: string, id: string, filters: object): string {
  return encodeCursor({ v: 1, at, id, filters: JSON.stringify(filters) });
}

/**
 * The position a cursor resumes after; null for a cursor of other filters or one the console did not make, so
 * that the list starts again from the top instead of failing the page (as the review queue does).
 */
export function decodeListCursor(text: string | null, filters: object): { at: string; id: string } | null {
  if (text === null) return null;
  try {
    const decoded = decodeCursor(listCursorSchema, text);
    return decoded.filters === JSON.stringify(filters) ? { at: decoded.at, id: decoded.id } : null;
  } catch (error) {
    if (error instanceof ApiError) return null;
    throw error;
  }
}

export function option(value: string, label: string, selected: string | null): string {
  return `<option value="${escapeHtml(value)}"${selected === value ? ' selected' : ''}>${escapeHtml(label)}</option>`;
}

/** A labelled select of a GET filter form; the empty value means any. */
export function filterSelect(language: ConsoleLanguage, name: string, label: string, options: ReadonlyArray<[string, string]>, selected: string | null): string {
  const { t } = wordsOf(language);
  const choices = [option('', t.any, selected ?? ''), ...options.map(([value, text]) => option(value, text, selected))].join('');
  return `<div><label for="filter-${escapeHtml(name)}">${escapeHtml(label)}</label><select id="filter-${escapeHtml(name)}" name="${escapeHtml(name)}">${choices}</select></div>`;
}

/** The first-page and next-page links of a list, keeping its filters and language. */
export function pager(language: ConsoleLanguage, pathname: string, query: Record<string, string | null>, page: { cursor: string | null; next_cursor: string | null }, label: string): string {
  const { e } = wordsOf(language);
  const links = [
    page.cursor ? `<a href="${href(pathname, query, language)}">${e('first_page')}</a>` : '',
    page.next_cursor ? `<a href="${href(pathname, { ...query, cursor: page.next_cursor }, language)}" rel="next">${e('next_page')}</a>` : '',
  ].join('');
  return `<nav class="pager" aria-label="${escapeHtml(label)}">${links}</nav>`;
}

/** The notice above a detail page: the outcome of the last action, or why it failed. */
export function noticeHtml(notice: CaseNotice | null): string {
  if (!notice) return '';
  return `<p class="${notice.tone}" role="${notice.tone === 'error' ? 'alert' : 'status'}" id="case-notice">${escapeHtml(notice.text)}</p>`;
}

/** A refused action in words: the fields of a validation error, else the error's own message in the page's language. */
export function errorNotice(language: ConsoleLanguage, error: ApiError): CaseNotice {
  const t = consoleTexts(language);
  const fields = (error.details.fields as { path?: string; reason?: string; hint?: string }[] | undefined) ?? [];
  if (error.code === 'validation_error' && fields.length > 0) {
    return { tone: 'error', text: fill(t.error_validation, { fields: fields.map((field) => [field.path, field.reason, field.hint].filter(Boolean).join(': ')).join('; ') }) };
  }
  const body = renderError(error, '').error;
  return { tone: 'error', text: `${language === 'th' ? body.message_th : body.message} (${error.code})` };
}

export function invalidField(path: string, reason: string, hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [{ path, reason, ...(hint ? { hint } : {}) }] } });
}

/** Baht a person typed ("101" or "101.50"), in satang; null when the field is empty. */
export function bahtToMinor(field: string, text: string | null): number | null {
  if (text === null || text.trim() === '') return null;
  const match = /^([0-9]{1,10})(?:\.([0-9]{1,2}))?$/.exec(text.trim());
  if (!match) throw invalidField(field, 'invalid_format', 'baht, such as 101.00');
  const minor = Number(match[1]) * 100 + Number((match[2] ?? '').padEnd(2, '0'));
  if (minor <= 0) throw invalidField(field, 'too_small');
  return minor;
}

/** A decision's Idempotency-Key from its form, when it has the shape of one. */
export function decisionKeyOf(form: URLSearchParams): string | null {
  const key = form.get('decision_key');
  return key !== null && /^[\x20-\x7e]{1,255}$/.test(key) ? key : null;
}
