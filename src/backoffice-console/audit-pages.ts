import type { AuditRow } from '../tenancy/service.ts';
import { CONSOLE_PATH } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf, type PageFrame } from './html.ts';
import { formatTime } from './review-pages.ts';
import { orderPath } from './orders-pages.ts';
import { inputField } from './search-filters.ts';
import type { ConsoleLanguage } from './texts.ts';

/**
 * The audit log page's rendering. Every actor, action, object id, request id and detail is stored text and is
 * escaped; an object that is an order links to its order page, and nothing else is a link (no page shows
 * credentials, merchants or sessions yet).
 */

export interface AuditFilters {
  who: string | null;
  action: string | null;
  target_type: string | null;
  target_id: string | null;
  /** Days (YYYY-MM-DD, Bangkok time), both included. */
  created_from: string | null;
  created_to: string | null;
}

export interface AuditPage {
  filters: AuditFilters;
  rows: AuditRow[];
  /** Who holds the credentials among the rows' actors: person id and name. */
  holders: ReadonlyMap<string, { staff_id: string; name: string }>;
  cursor: string | null;
  next_cursor: string | null;
  page_size: number;
}

/** Details are shown as their JSON text, cut at this many characters so that one row cannot swamp the page. */
const DETAILS_SHOWN = 300;
const ORDER_TARGETS = new Set(['deposit_order', 'withdrawal_order']);

function filterForm(language: ConsoleLanguage, filters: AuditFilters): string {
  const { t, e } = wordsOf(language);
  return `<form method="get" action="${CONSOLE_PATH}/audit" class="filters card" role="search" aria-label="${e('audit_heading')}">
${language === 'en' ? '<input type="hidden" name="lang" value="en">' : ''}
${inputField({ id: 'filter-who', name: 'who', label: t.audit_who, value: filters.who, max: 100 })}
${inputField({ id: 'filter-action', name: 'action', label: t.audit_action, value: filters.action, max: 100 })}
${inputField({ id: 'filter-target-type', name: 'target_type', label: t.audit_target_type, value: filters.target_type, max: 100 })}
${inputField({ id: 'filter-target-id', name: 'target_id', label: t.audit_target_id, value: filters.target_id, max: 200 })}
${inputField({ id: 'filter-created-from', name: 'created_from', label: t.audit_from, value: filters.created_from, type: 'date', hint: t.orders_dates_hint })}
${inputField({ id: 'filter-created-to', name: 'created_to', label: t.audit_to, value: filters.created_to, type: 'date' })}
<div><button type="submit">${e('orders_search')}</button> <a href="${href(`${CONSOLE_PATH}/audit`, {}, language)}">${e('orders_clear')}</a></div>
</form>`;
}

function auditRow(language: ConsoleLanguage, page: AuditPage, row: AuditRow): string {
  const holder = page.holders.get(row.actor_id);
  const who = `${escapeHtml(row.actor_type)}: ${escapeHtml(row.actor_id)}${holder ? `<br>${escapeHtml(holder.name)} (${escapeHtml(holder.staff_id)})` : ''}`;
  const target = ORDER_TARGETS.has(row.target_type) ? `<a href="${href(orderPath(row.target_id), {}, language)}">${escapeHtml(row.target_id)}</a>` : escapeHtml(row.target_id);
  const details = JSON.stringify(row.details);
  const shown = details === '{}' ? '' : details.length > DETAILS_SHOWN ? `${details.slice(0, DETAILS_SHOWN)}…` : details;
  return `<tr>
<td>${escapeHtml(formatTime(language, row.created_at.toISOString()))}</td>
<td>${who}</td>
<td>${escapeHtml(row.action)}</td>
<td>${escapeHtml(row.target_type)}: ${target}</td>
<td>${escapeHtml(row.request_id ?? '')}</td>
<td class="wrap">${escapeHtml(shown)}</td>
</tr>`;
}

export function renderAuditLog(frame: Omit<PageFrame, 'title'>, page: AuditPage): string {
  const { t, e } = wordsOf(frame.language);
  const query: Record<string, string | null> = { ...page.filters };
  const table =
    page.rows.length === 0
      ? `<p class="message">${e('audit_none')}</p>`
      : `<div class="table-scroll" role="region" aria-label="${e('audit_heading')}" tabindex="0"><table>
<caption class="visually-hidden">${e('audit_heading')}</caption>
<thead><tr><th scope="col">${e('audit_col_time')}</th><th scope="col">${e('audit_col_who')}</th><th scope="col">${e('audit_col_action')}</th><th scope="col">${e('audit_col_target')}</th><th scope="col">${e('audit_col_request')}</th><th scope="col">${e('audit_col_details')}</th></tr></thead>
<tbody>
${page.rows.map((row) => auditRow(frame.language, page, row)).join('\n')}
</tbody>
</table></div>`;
  const pager = [
    page.cursor ? `<a href="${href(`${CONSOLE_PATH}/audit`, query, frame.language)}">${e('first_page')}</a>` : '',
    page.next_cursor ? `<a href="${href(`${CONSOLE_PATH}/audit`, { ...query, cursor: page.next_cursor }, frame.language)}" rel="next">${e('next_page')}</a>` : '',
  ].join('');
  const main = `<h1>${e('audit_heading')}</h1>
${filterForm(frame.language, page.filters)}
<h2>${e('orders_results')}</h2>
<p class="hint">${e('orders_page_note', { count: page.page_size })}</p>
${table}
<nav class="pager" aria-label="${e('audit_heading')}">${pager}</nav>`;
  return renderPage({ ...frame, title: t.audit_heading }, main);
}
