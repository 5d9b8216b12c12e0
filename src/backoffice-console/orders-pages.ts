import type { DepositLegRow, DepositView } from '../deposits/service.ts';
import type { WithdrawalLegRow, WithdrawalView } from '../withdrawals/service.ts';
import type { BalanceTransactionView } from '../ledger/service.ts';
import { CONSOLE_PATH } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf, type PageFrame } from './html.ts';
import { formatBaht, formatTime } from './review-pages.ts';
import { inputField, option } from './search-filters.ts';
import { fill, type ConsoleLanguage } from './texts.ts';

/**
 * The orders area's pages: the search and one order. Pure rendering from what the services answered; every id,
 * reference and other stored text is escaped (html.ts), and links go only to console pages that exist: an
 * order's own page, the review case of an order in review, and no merchant page (a merchant id is text).
 */

export interface OrderFilters {
  kind: 'deposits' | 'withdrawals';
  id: string | null;
  merchant_reference: string | null;
  end_user_ref: string | null;
  bank_reference: string | null;
  status: string | null;
  mode: 'test' | 'live' | null;
  /** Days (YYYY-MM-DD, Bangkok time), both included. */
  created_from: string | null;
  created_to: string | null;
}

export interface OrderSearchItem {
  kind: 'deposit' | 'withdrawal';
  id: string;
  merchant_id: string;
  livemode: boolean;
  status: string;
  merchant_reference: string;
  end_user_ref: string;
  amount_minor: number;
  created_at: Date;
}

export interface OrderSearchPage {
  filters: OrderFilters;
  items: OrderSearchItem[];
  cursor: string | null;
  next_cursor: string | null;
  /** The statuses of the kind searched, for the status filter. */
  statuses: readonly string[];
  page_size: number;
}

interface TimelineEvent {
  event_id: string;
  type: string;
  object_status: string | null;
  created_at: Date;
}

interface OrderDetailCommon {
  merchant_id: string;
  timeline: TimelineEvent[];
  movements: BalanceTransactionView[];
}

export type OrderDetailPage =
  | (OrderDetailCommon & {
      kind: 'deposit';
      view: DepositView;
      legs: DepositLegRow[];
      /** The withdrawals among the legs' that the back office may open (the others are the service's own). */
      visible_withdrawals: ReadonlySet<string>;
      transfers: { sending_bank_code: string; trans_ref: string; amount_minor: number; receipt_id: string; created_at: Date }[];
    })
  | (OrderDetailCommon & { kind: 'withdrawal'; view: WithdrawalView; legs: WithdrawalLegRow[] });

export function orderPath(id: string): string {
  return `${CONSOLE_PATH}/orders/${id}`;
}

function filterQuery(filters: OrderFilters): Record<string, string | null> {
  return { ...filters };
}

function searchForm(language: ConsoleLanguage, page: OrderSearchPage): string {
  const { t, e } = wordsOf(language);
  const filters = page.filters;
  const text = (name: 'id' | 'merchant_reference' | 'end_user_ref' | 'bank_reference', label: string, hint?: string) =>
    inputField({ id: `filter-${name}`, name, label, value: filters[name], max: name === 'id' ? 70 : 64, ...(hint === undefined ? {} : { hint }) });
  return `<form method="get" action="${CONSOLE_PATH}/orders" class="filters card" role="search" aria-label="${e('orders_heading')}">
${language === 'en' ? '<input type="hidden" name="lang" value="en">' : ''}
<div><label for="filter-kind">${e('orders_kind')}</label>
<select id="filter-kind" name="kind">${option('deposits', t.orders_kind_deposits, filters.kind)}${option('withdrawals', t.orders_kind_withdrawals, filters.kind)}</select></div>
${text('id', t.orders_id)}
${text('merchant_reference', t.merchant_reference)}
${text('end_user_ref', t.end_user_ref)}
${text('bank_reference', t.orders_bank_reference, t.orders_bank_reference_hint)}
<div><label for="filter-status">${e('orders_status')}</label>
<select id="filter-status" name="status">${option('', t.any, filters.status ?? '')}${page.statuses.map((status) => option(status, status, filters.status)).join('')}</select></div>
<div><label for="filter-mode">${e('orders_mode')}</label>
<select id="filter-mode" name="mode">${option('', t.any, filters.mode ?? '')}${option('test', t.mode_test, filters.mode)}${option('live', t.mode_live, filters.mode)}</select></div>
${inputField({ id: 'filter-created-from', name: 'created_from', label: t.orders_created_from, value: filters.created_from, type: 'date', hint: t.orders_dates_hint })}
${inputField({ id: 'filter-created-to', name: 'created_to', label: t.orders_created_to, value: filters.created_to, type: 'date' })}
<div><button type="submit">${e('orders_search')}</button> <a href="${href(`${CONSOLE_PATH}/orders`, {}, language)}">${e('orders_clear')}</a></div>
</form>`;
}

function modeText(language: ConsoleLanguage, livemode: boolean): string {
  const { e } = wordsOf(language);
  return livemode ? e('mode_live') : `<span class="flag">${e('mode_test')}</span>`;
}

function resultRow(language: ConsoleLanguage, item: OrderSearchItem): string {
  return `<tr>
<td><a href="${href(orderPath(item.id), {}, language)}">${escapeHtml(item.id)}</a></td>
<td>${escapeHtml(item.merchant_id)}</td>
<td>${escapeHtml(item.merchant_reference)}</td>
<td>${escapeHtml(item.end_user_ref)}</td>
<td class="amount">${escapeHtml(formatBaht(item.amount_minor))}</td>
<td>${escapeHtml(item.status)}</td>
<td>${modeText(language, item.livemode)}</td>
<td>${escapeHtml(formatTime(language, item.created_at.toISOString()))}</td>
</tr>`;
}

export function renderOrderSearch(frame: Omit<PageFrame, 'title'>, page: OrderSearchPage): string {
  const { t, e } = wordsOf(frame.language);
  const query = filterQuery(page.filters);
  const table =
    page.items.length === 0
      ? `<p class="message">${e('orders_none')}</p>`
      : `<div class="table-scroll" role="region" aria-label="${e('orders_results')}" tabindex="0"><table>
<caption class="visually-hidden">${e('orders_results')}</caption>
<thead><tr><th scope="col">${e('orders_col_id')}</th><th scope="col">${e('orders_col_merchant')}</th><th scope="col">${e('merchant_reference')}</th><th scope="col">${e('end_user_ref')}</th><th scope="col" class="amount">${e('amount')}</th><th scope="col">${e('orders_col_status')}</th><th scope="col">${e('orders_col_mode')}</th><th scope="col">${e('orders_col_created')}</th></tr></thead>
<tbody>
${page.items.map((item) => resultRow(frame.language, item)).join('\n')}
</tbody>
</table></div>`;
  const pager = [
    page.cursor ? `<a href="${href(`${CONSOLE_PATH}/orders`, query, frame.language)}">${e('first_page')}</a>` : '',
    page.next_cursor ? `<a href="${href(`${CONSOLE_PATH}/orders`, { ...query, cursor: page.next_cursor }, frame.language)}" rel="next">${e('next_page')}</a>` : '',
  ].join('');
  const main = `<h1>${e('orders_heading')}</h1>
${searchForm(frame.language, page)}
<h2>${e('orders_results')}</h2>
<p class="hint">${e('orders_page_note', { count: page.page_size })}</p>
${table}
<nav class="pager" aria-label="${e('orders_results')}">${pager}</nav>`;
  return renderPage({ ...frame, title: t.orders_heading }, main);
}

function fact(label: string, value: string): string {
  return `<dt>${label}</dt><dd>${escapeHtml(value)}</dd>`;
}

/** A section with a heading and a table, or a sentence when there are no rows (heading, texts and cells already escaped). */
function tableSection(id: string, heading: string, empty: string, columns: string[], rows: string[]): string {
  if (rows.length === 0) return `<section aria-labelledby="${id}"><h2 id="${id}">${heading}</h2><p>${empty}</p></section>`;
  return `<section aria-labelledby="${id}"><h2 id="${id}">${heading}</h2>
<table><thead><tr>${columns.map((column) => `<th scope="col">${column}</th>`).join('')}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table></section>`;
}

function depositFacts(language: ConsoleLanguage, page: Extract<OrderDetailPage, { kind: 'deposit' }>): string {
  const { t, e } = wordsOf(language);
  const view = page.view;
  const optional = (label: string, amount: number | undefined) => (amount === undefined ? '' : fact(label, formatBaht(amount)));
  return [
    fact(e('orders_kind'), t.orders_kind_deposit),
    fact(e('orders_merchant'), page.merchant_id),
    fact(e('orders_mode'), view.livemode ? t.mode_live : t.mode_test),
    fact(e('orders_status'), view.status),
    fact(e('merchant_reference'), view.merchant_reference),
    fact(e('end_user_ref'), view.end_user_ref),
    fact(e('amount'), formatBaht(view.amount_minor)),
    optional(e('orders_received'), view.amount_received_minor),
    optional(e('orders_fee'), view.fee_total_minor),
    optional(e('orders_credited'), view.credited_amount_minor),
    fact(e('orders_created'), formatTime(language, view.created_at)),
    fact(e('orders_expires'), formatTime(language, view.expires_at)),
  ].join('');
}

function withdrawalFacts(language: ConsoleLanguage, page: Extract<OrderDetailPage, { kind: 'withdrawal' }>): string {
  const { t, e } = wordsOf(language);
  const view = page.view;
  return [
    fact(e('orders_kind'), t.orders_kind_withdrawal),
    fact(e('orders_merchant'), page.merchant_id),
    fact(e('orders_mode'), view.livemode ? t.mode_live : t.mode_test),
    fact(e('orders_status'), view.status),
    fact(e('merchant_reference'), view.merchant_reference),
    fact(e('end_user_ref'), view.end_user_ref),
    fact(e('amount'), formatBaht(view.amount_total_minor)),
    fact(e('orders_fee'), formatBaht(view.fee_total_minor)),
    fact(e('orders_filled'), formatBaht(view.filled_minor)),
    fact(e('orders_reserved'), formatBaht(view.reserved_minor)),
    fact(e('orders_remaining'), formatBaht(view.remaining_minor)),
    fact(e('orders_beneficiary'), view.beneficiary_id),
    fact(e('orders_created'), formatTime(language, view.created_at)),
    fact(e('orders_expires'), formatTime(language, view.expires_at)),
  ].join('');
}

function depositSections(language: ConsoleLanguage, page: Extract<OrderDetailPage, { kind: 'deposit' }>): string {
  const { t } = wordsOf(language);
  const time = (date: Date) => escapeHtml(formatTime(language, date.toISOString()));
  const transfers = page.transfers.map(
    (transfer) => `<tr><td>${escapeHtml(transfer.sending_bank_code)}</td><td>${escapeHtml(transfer.trans_ref)}</td><td class="amount">${escapeHtml(formatBaht(transfer.amount_minor))}</td><td>${time(transfer.created_at)}</td></tr>`,
  );
  const legs = page.legs.map((leg) => {
    const pays =
      leg.withdrawal_id === null
        ? escapeHtml(t.orders_destination_gateway)
        : page.visible_withdrawals.has(leg.withdrawal_id)
          ? `<a href="${href(orderPath(leg.withdrawal_id), {}, language)}">${escapeHtml(leg.withdrawal_id)}</a>`
          : `${escapeHtml(leg.withdrawal_id)} ${escapeHtml(t.orders_hidden_withdrawal)}`;
    return `<tr><td>${escapeHtml(leg.leg_ref)}</td><td>${leg.sequence}</td><td class="amount">${escapeHtml(formatBaht(leg.amount_minor))}</td><td class="amount">${escapeHtml(formatBaht(leg.paid_minor))}</td><td>${escapeHtml(leg.status)}</td><td>${pays}</td></tr>`;
  });
  return [
    tableSection('transfers-heading', escapeHtml(t.orders_transfers), escapeHtml(t.orders_no_transfers), [t.orders_col_bank, t.orders_col_reference, t.amount, t.orders_col_time].map(escapeHtml), transfers),
    tableSection('legs-heading', escapeHtml(t.orders_legs), escapeHtml(t.orders_no_legs), [t.orders_col_leg, t.orders_col_sequence, t.amount, t.orders_col_paid, t.orders_col_status, t.orders_col_pays].map(escapeHtml), legs),
  ].join('\n');
}

function withdrawalSections(language: ConsoleLanguage, page: Extract<OrderDetailPage, { kind: 'withdrawal' }>): string {
  const { t } = wordsOf(language);
  const legs = page.legs.map(
    (leg) => `<tr><td>${escapeHtml(leg.leg_ref)}</td><td>${leg.sequence ?? ''}</td><td class="amount">${escapeHtml(formatBaht(leg.amount_minor))}</td><td>${escapeHtml(leg.status)}</td><td><a href="${href(orderPath(leg.deposit_id), {}, language)}">${escapeHtml(leg.deposit_id)}</a></td><td>${leg.settled_at ? escapeHtml(formatTime(language, leg.settled_at.toISOString())) : ''}</td><td>${escapeHtml(leg.receipt_state ?? '')}</td></tr>`,
  );
  return tableSection('legs-heading', escapeHtml(t.orders_fills), escapeHtml(t.orders_no_legs), [t.orders_col_leg, t.orders_col_sequence, t.amount, t.orders_col_status, t.orders_col_paid_by, t.orders_col_settled, t.orders_col_receipt].map(escapeHtml), legs);
}

function timelineSection(language: ConsoleLanguage, page: OrderDetailPage, limit: number): string {
  const { t, e } = wordsOf(language);
  const rows = page.timeline.map(
    (event) => `<tr><td>${escapeHtml(formatTime(language, event.created_at.toISOString()))}</td><td>${escapeHtml(event.type)}</td><td>${escapeHtml(event.object_status ?? '')}</td><td>${escapeHtml(event.event_id)}</td></tr>`,
  );
  const note = rows.length >= limit ? `<p class="hint">${e('orders_list_limit', { count: limit })}</p>` : '';
  return tableSection('timeline-heading', escapeHtml(t.orders_timeline), escapeHtml(t.orders_no_events), [t.orders_col_time, t.orders_col_event, t.orders_col_status, t.orders_col_event_id].map(escapeHtml), rows) + note;
}

function ledgerSection(language: ConsoleLanguage, page: OrderDetailPage, limit: number): string {
  const { t, e } = wordsOf(language);
  const rows = page.movements.map((movement) => {
    const buckets = `${movement.bucket_from ?? t.orders_outside} → ${movement.bucket_to ?? t.orders_outside}`;
    return `<tr><td>${escapeHtml(formatTime(language, movement.created_at))}</td><td>${escapeHtml(movement.id)}</td><td>${escapeHtml(movement.type)}</td><td>${escapeHtml(movement.direction)}</td><td class="amount">${escapeHtml(formatBaht(movement.amount_minor))}</td><td>${escapeHtml(buckets)}</td></tr>`;
  });
  const note = rows.length >= limit ? `<p class="hint">${e('orders_list_limit', { count: limit })}</p>` : '';
  return tableSection('ledger-heading', escapeHtml(t.orders_ledger), escapeHtml(t.orders_no_movements), [t.orders_col_time, t.orders_col_movement, t.orders_col_type, t.orders_col_direction, t.amount, t.orders_col_buckets].map(escapeHtml), rows) + note;
}

export function renderOrderDetail(frame: Omit<PageFrame, 'title'>, page: OrderDetailPage, limit: number): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const id = page.view.id;
  const review =
    page.kind === 'deposit' && page.view.status === 'under_review'
      ? `<p class="notice">${e('orders_in_review')} <a href="${href(`${CONSOLE_PATH}/reviews/${id}`, {}, language)}">${e('orders_open_case')}</a></p>`
      : '';
  const facts = page.kind === 'deposit' ? depositFacts(language, page) : withdrawalFacts(language, page);
  const children = page.kind === 'deposit' ? depositSections(language, page) : withdrawalSections(language, page);
  const main = `<p><a href="${href(`${CONSOLE_PATH}/orders`, {}, language)}">${e('orders_back')}</a></p>
<h1>${e('orders_detail_heading', { id })}</h1>
${review}
<section class="card" aria-labelledby="facts-heading"><h2 id="facts-heading">${e('orders_facts')}</h2><dl class="facts">${facts}</dl></section>
${children}
${timelineSection(language, page, limit)}
${ledgerSection(language, page, limit)}`;
  return renderPage({ ...frame, title: fill(t.orders_detail_heading, { id }) }, main);
}
