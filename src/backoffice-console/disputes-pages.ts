import type { DisputeDetail, DisputeRecord } from '../disputes/service.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf, type PageFrame } from './html.ts';
import { formatBaht, formatTime, formatWaited, type CaseNotice } from './review-pages.ts';
import { filterSelect, noticeHtml, pager } from './desk-kit.ts';
import type { ConsoleLanguage, ConsoleTextKey } from './texts.ts';

/**
 * The disputes pages: the list and one dispute with its deadline, evidence and resolution. Pure rendering from
 * what DisputeService answered; every stored text (the withdrawer's note, evidence references and notes, the
 * operator's note) is escaped.
 */

export const DISPUTE_STATUSES = ['open', 'awaiting_decision', 'resolved'] as const;

export interface DisputeFilters {
  status: (typeof DISPUTE_STATUSES)[number] | null;
  mode: 'test' | 'live' | null;
  order: 'oldest' | 'newest' | null;
}

export interface DisputeListPage {
  items: DisputeRecord[];
  filters: DisputeFilters;
  cursor: string | null;
  next_cursor: string | null;
}

export interface DisputePage {
  dispute: DisputeDetail;
  session: ConsoleSession;
  notice: CaseNotice | null;
  /** A fresh Idempotency-Key for the form of this rendering. */
  decision_key: string;
  now: Date;
}

const word = (language: ConsoleLanguage, key: string, fallback: string) => wordsOf(language).t[key as ConsoleTextKey] ?? fallback;
const statusText = (language: ConsoleLanguage, status: string) => word(language, `disputes_status_${status}`, status);
const kindText = (language: ConsoleLanguage, kind: string) => word(language, `disputes_kind_${kind}`, kind);

/** A resolution in words: for whom, by whom, when. */
export function resolutionText(language: ConsoleLanguage, resolution: NonNullable<DisputeRecord['resolution']>): string {
  const { t } = wordsOf(language);
  const who = resolution.resolved_by === 'system' ? t.disputes_resolved_by_system : t.disputes_resolved_by_operator.replace('{id}', resolution.resolver_id ?? '');
  return t.disputes_resolution_line
    .replace('{outcome}', t[`disputes_outcome_${resolution.outcome}`])
    .replace('{who}', who)
    .replace('{time}', formatTime(language, resolution.resolved_at));
}

function filterForm(language: ConsoleLanguage, filters: DisputeFilters): string {
  const { t, e } = wordsOf(language);
  return `<form method="get" action="${CONSOLE_PATH}/disputes" class="filters card">
${language === 'en' ? '<input type="hidden" name="lang" value="en">' : ''}
${filterSelect(language, 'status', t.disputes_filter_status, DISPUTE_STATUSES.map((status) => [status, statusText(language, status)]), filters.status)}
${filterSelect(language, 'mode', t.filter_mode, [['test', t.mode_test], ['live', t.mode_live]], filters.mode)}
${filterSelect(language, 'order', t.disputes_filter_order, [['oldest', t.disputes_order_oldest], ['newest', t.disputes_order_newest]], filters.order)}
<div><button type="submit">${e('apply_filters')}</button></div>
</form>`;
}

function disputeRow(language: ConsoleLanguage, dispute: DisputeRecord): string {
  const { e } = wordsOf(language);
  const flags = [
    dispute.funds_on_hold ? `<span class="flag">${e('disputes_flag_on_hold')}</span>` : '',
    dispute.livemode ? '' : `<span class="flag">${e('flag_test')}</span>`,
    `<span>${e('disputes_evidence_count', { count: dispute.evidence_count })}</span>`,
  ].join(' ');
  return `<tr>
<td><a href="${href(`${CONSOLE_PATH}/disputes/${dispute.id}`, {}, language)}">${escapeHtml(dispute.id)}</a></td>
<td>${escapeHtml(kindText(language, dispute.kind))}</td>
<td>${escapeHtml(dispute.reason_code)}</td>
<td class="amount">${escapeHtml(formatBaht(dispute.amount_minor))}</td>
<td>${escapeHtml(statusText(language, dispute.status))}</td>
<td>${escapeHtml(formatTime(language, dispute.opened_at))}</td>
<td>${escapeHtml(formatTime(language, dispute.respond_by))}</td>
<td>${flags}</td>
</tr>`;
}

export function renderDisputeList(frame: Omit<PageFrame, 'title'>, page: DisputeListPage): string {
  const { t, e } = wordsOf(frame.language);
  const header = ['disputes_col_dispute', 'disputes_col_kind', 'disputes_col_reason', 'disputes_col_amount', 'disputes_col_status', 'disputes_col_opened', 'disputes_col_respond_by', 'disputes_col_flags'] as const;
  const table =
    page.items.length === 0
      ? `<p class="message">${e('disputes_empty')}</p>`
      : `<table>
<caption class="visually-hidden">${e('disputes_heading')}</caption>
<thead><tr>${header.map((key) => `<th scope="col"${key === 'disputes_col_amount' ? ' class="amount"' : ''}>${e(key)}</th>`).join('')}</tr></thead>
<tbody>
${page.items.map((dispute) => disputeRow(frame.language, dispute)).join('\n')}
</tbody>
</table>`;
  const query = { status: page.filters.status, mode: page.filters.mode, order: page.filters.order };
  const main = `<h1>${e('disputes_heading')}</h1>
${filterForm(frame.language, page.filters)}
${table}
${pager(frame.language, `${CONSOLE_PATH}/disputes`, query, page, t.disputes_heading)}`;
  return renderPage({ ...frame, title: t.disputes_heading }, main);
}

function fact(label: string, value: string): string {
  return `<dt>${escapeHtml(label)}</dt><dd>${escapeHtml(value)}</dd>`;
}

function factsSection(language: ConsoleLanguage, dispute: DisputeDetail): string {
  const { t, e } = wordsOf(language);
  return `<section class="card" aria-labelledby="dispute-facts"><h2 id="dispute-facts">${e('disputes_facts_heading')}</h2><dl class="facts">${[
    fact(t.disputes_col_status, statusText(language, dispute.status)),
    fact(t.disputes_col_kind, kindText(language, dispute.kind)),
    fact(t.disputes_col_reason, dispute.reason_code),
    fact(t.disputes_col_amount, formatBaht(dispute.amount_minor)),
    fact(t.filter_mode, dispute.livemode ? t.mode_live : t.mode_test),
    fact(t.disputes_withdrawal, dispute.withdrawal_id),
    fact(t.disputes_withdrawal_merchant, dispute.withdrawal_merchant_id),
    fact(t.disputes_leg, dispute.leg_ref),
    fact(t.disputes_deposit, dispute.deposit_id),
    fact(t.disputes_deposit_merchant, dispute.deposit_merchant_id),
    dispute.deposit_leg_ref === null ? '' : fact(t.disputes_deposit_leg, dispute.deposit_leg_ref),
    fact(t.disputes_flag_on_hold, dispute.funds_on_hold ? t.disputes_funds_on_hold : t.disputes_funds_released),
    fact(t.disputes_withdrawer_note, dispute.note ?? t.disputes_no_note),
  ].join('')}</dl></section>`;
}

function deadlinesSection(language: ConsoleLanguage, page: DisputePage): string {
  const { t, e } = wordsOf(language);
  const { dispute, now } = page;
  const due = Date.parse(dispute.respond_by);
  // How long is left, in the words the queue uses for how long a case waited (counted the other way).
  const left = due > now.getTime() ? t.disputes_respond_by_left.replace('{time}', formatWaited(language, now.toISOString(), new Date(due))) : t.disputes_respond_by_passed;
  return `<section class="card" aria-labelledby="dispute-deadlines"><h2 id="dispute-deadlines">${e('disputes_deadlines_heading')}</h2><dl class="facts">${[
    fact(t.disputes_opened_at, formatTime(language, dispute.opened_at)),
    fact(t.disputes_respond_by, `${formatTime(language, dispute.respond_by)} (${dispute.status === 'resolved' ? statusText(language, dispute.status) : left})`),
  ].join('')}</dl><p class="hint">${e('disputes_deadline_rule')}</p></section>`;
}

function evidenceSection(language: ConsoleLanguage, dispute: DisputeDetail): string {
  const { e } = wordsOf(language);
  const items = dispute.evidence.map((item) => {
    const kind = word(language, `disputes_evidence_kind_${item.kind}`, item.kind);
    return `<li>${escapeHtml(kind)}: ${escapeHtml(item.reference)} — ${escapeHtml(item.note)} (${escapeHtml(formatTime(language, item.created_at))})</li>`;
  });
  const body = items.length === 0 ? `<p>${e('disputes_evidence_none')}</p>` : `<ol class="evidence" id="dispute-evidence">${items.join('')}</ol>`;
  return `<h2>${e('disputes_evidence_heading')}</h2>\n${body}\n<p class="hint">${e('disputes_evidence_image')}</p>`;
}

function resolutionSection(language: ConsoleLanguage, dispute: DisputeDetail): string {
  const { t, e } = wordsOf(language);
  const resolution = dispute.resolution;
  if (!resolution) return '';
  const adjustments = [resolution.adjustment_balance_transaction_id, resolution.adjustment_reversal_balance_transaction_id].filter((id): id is string => id !== null);
  const items = [
    `<p id="dispute-resolution">${escapeHtml(resolutionText(language, resolution))}</p>`,
    resolution.note === null ? '' : `<p><q>${escapeHtml(resolution.note)}</q></p>`,
    adjustments.length === 0 ? '' : `<p>${escapeHtml(t.disputes_adjustment)}: ${adjustments.map((id) => escapeHtml(id)).join(', ')}</p>`,
  ].join('\n');
  return `<h2>${e('disputes_resolution_heading')}</h2>\n${items}`;
}

function actionsSection(language: ConsoleLanguage, page: DisputePage): string {
  const { e } = wordsOf(language);
  const { dispute, session } = page;
  if (dispute.status === 'resolved') return `<p class="message">${e('disputes_closed')}</p>`;
  const outcome = (value: 'withdrawer' | 'depositor') =>
    `<div class="choice"><input type="radio" id="outcome-${value}" name="outcome" value="${value}" required aria-describedby="outcome-${value}-hint"><label for="outcome-${value}">${e(`disputes_outcome_${value}`)}</label><p class="hint" id="outcome-${value}-hint">${e(`disputes_outcome_${value}_hint`)}</p></div>`;
  return `<form method="post" action="${href(`${CONSOLE_PATH}/disputes/${dispute.id}/resolve`, {}, language)}" id="resolve-form">
<input type="hidden" name="csrf_token" value="${escapeHtml(session.csrf_token)}"><input type="hidden" name="decision_key" value="${escapeHtml(page.decision_key)}">
<fieldset><legend>${e('disputes_outcome_label')}</legend>${outcome('withdrawer')}${outcome('depositor')}</fieldset>
<label for="resolve-note">${e('note')}</label><p class="hint" id="resolve-note-hint">${e('note_hint')}</p><textarea id="resolve-note" name="note" required minlength="20" maxlength="2000" aria-describedby="resolve-note-hint"></textarea>
<button type="submit" id="resolve-button">${e('disputes_resolve_button')}</button></form>`;
}

export function renderDispute(frame: Omit<PageFrame, 'title'>, page: DisputePage): string {
  const { t, e } = wordsOf(frame.language);
  const { dispute } = page;
  const main = `<p><a href="${href(`${CONSOLE_PATH}/disputes`, {}, frame.language)}">${e('disputes_back')}</a></p>
<h1>${e('disputes_detail_heading', { id: dispute.id })}</h1>
<p>${e('case_status', { status: statusText(frame.language, dispute.status) })} · ${escapeHtml(formatBaht(dispute.amount_minor))}</p>
${noticeHtml(page.notice)}
<div class="columns">
<div>${factsSection(frame.language, dispute)}</div>
<div>${deadlinesSection(frame.language, page)}</div>
</div>
${evidenceSection(frame.language, dispute)}
${resolutionSection(frame.language, dispute)}
<section class="card actions" aria-labelledby="actions-heading">
<h2 id="actions-heading">${e('disputes_actions_heading')}</h2>
${actionsSection(frame.language, page)}
</section>`;
  return renderPage({ ...frame, title: t.disputes_detail_heading.replace('{id}', dispute.id) }, main);
}
