import type { QueueCount, ReviewDetail, ReviewQueueItem } from '../review/service.ts';
import { REJECTION_CODES, rejectionOf } from '../review/catalogue.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf, type PageFrame } from './html.ts';
import type { ConsoleLanguage, ConsoleTextKey } from './texts.ts';
import type { CaseViewer } from './presence.ts';

/**
 * The review desk's pages: the queue and one case. Pure rendering from what the review service answered; every
 * stored text is escaped (html.ts). Money is shown in baht with two decimals, times in Bangkok time.
 */

/** A queue entry with its `merchant_reference` and who else has the case open now. */
export type QueueItem = ReviewQueueItem & { merchant_reference: string; viewers: readonly CaseViewer[] };

export interface QueueFilters {
  reason: string | null;
  escalated: 'true' | 'false' | null;
  mode: 'test' | 'live' | null;
  age: '15m' | '1h' | '4h' | null;
}

export interface QueuePage {
  items: QueueItem[];
  /** Read up to a limit (ReviewService.queueCountsByReason): `more` when there are more than `count`. */
  counts: QueueCount<{ reason_code: string }>[];
  total: QueueCount<object>;
  filters: QueueFilters;
  cursor: string | null;
  next_cursor: string | null;
  /** The queue's state as the polling script compares it (see routes.ts). */
  state: string;
  now: Date;
}

export function formatBaht(amount_minor: number): string {
  const baht = Math.trunc(amount_minor / 100);
  const satang = String(Math.abs(amount_minor % 100)).padStart(2, '0');
  return `${baht.toLocaleString('en-US')}.${satang} THB`;
}

export function formatTime(language: ConsoleLanguage, timestamp: string): string {
  return new Intl.DateTimeFormat(language === 'th' ? 'th-TH' : 'en-GB', { dateStyle: 'medium', timeStyle: 'medium', timeZone: 'Asia/Bangkok' }).format(new Date(timestamp));
}

/** How long a case has waited, in minutes or hours and minutes. */
export function formatWaited(language: ConsoleLanguage, opened_at: string, now: Date): string {
  const { e } = wordsOf(language);
  const minutes = Math.max(0, Math.floor((now.getTime() - Date.parse(opened_at)) / 60_000));
  return minutes < 60 ? e('minutes', { count: minutes }) : e('hours_minutes', { hours: Math.floor(minutes / 60), minutes: minutes % 60 });
}

function option(value: string, label: string, selected: string | null): string {
  return `<option value="${escapeHtml(value)}"${selected === value ? ' selected' : ''}>${escapeHtml(label)}</option>`;
}

function filterForm(language: ConsoleLanguage, page: QueuePage): string {
  const { t, e } = wordsOf(language);
  const reasons = [...new Set([...page.counts.map((count) => count.reason_code), ...(page.filters.reason ? [page.filters.reason] : [])])];
  return `<form method="get" action="${CONSOLE_PATH}/reviews" class="filters card">
${language === 'en' ? '<input type="hidden" name="lang" value="en">' : ''}
<div><label for="filter-reason">${e('filter_reason')}</label>
<select id="filter-reason" name="reason">${option('', t.any, page.filters.reason ?? '')}${reasons.map((code) => option(code, code, page.filters.reason)).join('')}</select></div>
<div><label for="filter-escalated">${e('filter_escalated')}</label>
<select id="filter-escalated" name="escalated">${option('', t.any, page.filters.escalated ?? '')}${option('true', t.yes, page.filters.escalated)}${option('false', t.no, page.filters.escalated)}</select></div>
<div><label for="filter-mode">${e('filter_mode')}</label>
<select id="filter-mode" name="mode">${option('', t.any, page.filters.mode ?? '')}${option('test', t.mode_test, page.filters.mode)}${option('live', t.mode_live, page.filters.mode)}</select></div>
<div><label for="filter-age">${e('filter_age')}</label>
<select id="filter-age" name="age">${option('', t.any, page.filters.age ?? '')}${option('15m', t.age_15m, page.filters.age)}${option('1h', t.age_1h, page.filters.age)}${option('4h', t.age_4h, page.filters.age)}</select></div>
<div><button type="submit">${e('apply_filters')}</button></div>
</form>`;
}

function filterQuery(filters: QueueFilters): Record<string, string | null> {
  return { reason: filters.reason, escalated: filters.escalated, mode: filters.mode, age: filters.age };
}

/** A count of the queue as the desk shows it: the number, or "more than" it when the count stopped there. */
function countText(language: ConsoleLanguage, count: QueueCount<object>): string {
  const { t } = wordsOf(language);
  const number = count.count.toLocaleString('en-US');
  return count.more ? t.count_more_than.replace('{count}', number) : number;
}

/** The viewers' names as one text, earliest first (escaped where it is written, like any text). */
export function viewerNames(viewers: readonly CaseViewer[]): string {
  return viewers.map((viewer) => viewer.name).join(', ');
}

/** What a case page says about the other people on the case now ('' when nobody else is). */
export function presenceText(language: ConsoleLanguage, viewers: readonly CaseViewer[]): string {
  const { t } = wordsOf(language);
  return viewers.length === 0 ? '' : t.presence_case.replace('{names}', viewerNames(viewers));
}

function queueRow(language: ConsoleLanguage, item: QueueItem, now: Date): string {
  const { e } = wordsOf(language);
  const flags = [
    item.escalated ? `<span class="flag">${e('flag_escalated')}</span>` : '',
    item.four_eyes_required ? `<span class="flag">${e('flag_four_eyes')}</span>` : '',
    item.livemode ? '' : `<span class="flag">${e('flag_test')}</span>`,
    item.viewers.length > 0 ? `<span class="flag presence">${e('flag_open_by', { names: viewerNames(item.viewers) })}</span>` : '',
  ].join('');
  return `<tr>
<td><a href="${href(`${CONSOLE_PATH}/reviews/${item.deposit_id}`, {}, language)}">${escapeHtml(item.deposit_id)}</a></td>
<td>${escapeHtml(item.merchant_reference)}</td>
<td class="amount">${escapeHtml(formatBaht(item.amount_minor))}</td>
<td>${formatWaited(language, item.opened_at, now)}</td>
<td>${item.reasons.map((code) => escapeHtml(code)).join('<br>')}</td>
<td>${flags}</td>
</tr>`;
}

export function renderQueue(frame: Omit<PageFrame, 'title'>, page: QueuePage): string {
  const { t, e } = wordsOf(frame.language);
  const query = filterQuery(page.filters);
  const rows = page.items.map((item) => queueRow(frame.language, item, page.now)).join('\n');
  const table =
    page.items.length === 0
      ? `<p class="message">${e('queue_empty')}</p>`
      : `<table>
<caption class="visually-hidden">${e('queue_heading')}</caption>
<thead><tr><th scope="col">${e('col_order')}</th><th scope="col">${e('col_merchant_reference')}</th><th scope="col" class="amount">${e('col_amount')}</th><th scope="col">${e('col_waited')}</th><th scope="col">${e('col_reasons')}</th><th scope="col">${e('col_flags')}</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
  const pager = [
    page.cursor ? `<a href="${href(`${CONSOLE_PATH}/reviews`, query, frame.language)}">${e('first_page')}</a>` : '',
    page.next_cursor ? `<a href="${href(`${CONSOLE_PATH}/reviews`, { ...query, cursor: page.next_cursor }, frame.language)}" rel="next">${e('next_page')}</a>` : '',
  ].join('');
  const pollUrl = `${CONSOLE_PATH}/reviews/state?${new URLSearchParams(Object.entries({ ...query, cursor: page.cursor }).filter((entry): entry is [string, string] => entry[1] !== null)).toString()}`;
  const main = `<h1>${e('queue_heading')}</h1>
<div id="queue" data-poll-url="${escapeHtml(pollUrl)}" data-poll-state="${escapeHtml(page.state)}" data-poll-notice="queue-changed">
<p id="queue-changed" class="notice" role="status" hidden>${e('queue_changed')} <a href="${href(`${CONSOLE_PATH}/reviews`, { ...query, cursor: page.cursor }, frame.language)}">${e('refresh')}</a></p>
${filterForm(frame.language, page)}
<h2 id="counts-heading">${e('counts_heading')}</h2>
<p>${e('queue_total', { count: countText(frame.language, page.total) })}</p>
<ul class="counts" aria-labelledby="counts-heading">${page.counts.map((count) => `<li>${escapeHtml(count.reason_code)}: ${escapeHtml(countText(frame.language, count))}</li>`).join('')}</ul>
<h2>${e('queue_heading')}</h2>
${table}
<nav class="pager" aria-label="${e('queue_heading')}">${pager}</nav>
</div>`;
  return renderPage({ ...frame, title: t.queue_heading }, main);
}

/** What the case page says above everything else: the outcome of the last action, or why it failed. */
export interface CaseNotice {
  tone: 'success' | 'error' | 'notice';
  text: string;
}

export interface CasePage {
  detail: ReviewDetail;
  session: ConsoleSession;
  state: string;
  notice: CaseNotice | null;
  /** A fresh Idempotency-Key for the forms of this rendering: a form sent twice decides once. */
  decision_key: string;
  /** The names of the people who decided or approved, by staff id. */
  staff_names: ReadonlyMap<string, string>;
  /** The other people who have the case open now. */
  viewers: readonly CaseViewer[];
  now: Date;
}

const CHECKS = ['amount_exact', 'within_time_window', 'sender_bank_match', 'sender_account_match', 'sender_name_match', 'receiver_match'] as const;

function checksSection(language: ConsoleLanguage, detail: ReviewDetail): string {
  const { e } = wordsOf(language);
  const verification = detail.deposit.verification;
  if (!verification) return `<h2>${e('checks_heading')}</h2>\n<p>${e('checks_missing')}</p>`;
  const items = CHECKS.map((check) => {
    const passed = verification[check];
    const name = e(`check_${check}` as ConsoleTextKey);
    const why = passed ? '' : ` — ${e(`check_${check}_fail` as ConsoleTextKey)}`;
    return `<li data-check="${check}"><span class="${passed ? 'pass' : 'fail'}">${e(passed ? 'check_pass' : 'check_fail')}</span> ${name}${why}</li>`;
  });
  return `<h2>${e('checks_heading')}</h2>\n<ul class="checks">${items.join('')}</ul>`;
}

function reasonsSection(language: ConsoleLanguage, detail: ReviewDetail): string {
  const { e } = wordsOf(language);
  const reasons = detail.deposit.review?.reasons ?? [];
  if (reasons.length === 0) return '';
  const items = reasons.map((reason) => `<li><strong>${escapeHtml(reason.code)}</strong>: ${escapeHtml(language === 'th' ? reason.display_th : reason.display_en)}</li>`);
  return `<h2>${e('reasons_heading')}</h2>\n<ul>${items.join('')}</ul>`;
}

function fact(label: string, value: string): string {
  return `<dt>${label}</dt><dd>${escapeHtml(value)}</dd>`;
}

function compareSection(language: ConsoleLanguage, detail: ReviewDetail): string {
  const { e } = wordsOf(language);
  const order = detail.deposit;
  const receiver = order.legs[0]?.receiver;
  const expected = [
    fact(e('amount'), formatBaht(order.amount_minor)),
    fact(e('merchant_reference'), order.merchant_reference),
    fact(e('end_user_ref'), order.end_user_ref),
    fact(e('sender'), `${order.sender.bank_code} ${order.sender.account_number_masked} ${order.sender.account_name_th_masked}`),
    receiver ? fact(e('receiver'), `${receiver.bank_code} ${receiver.account_number_masked} ${receiver.account_name_masked}`) : '',
  ].join('');
  const transfers = detail.slips.flatMap((slip) => (slip.bank_transfer ? [slip.bank_transfer] : []));
  const bank =
    transfers.length === 0
      ? `<p>${e('no_bank_transfer')}</p>`
      : transfers
          .map((transfer) => {
            const party = (side: typeof transfer.sender) => `${side.bank_code} ${side.account_number_masked} ${side.name_th ?? ''} ${side.name_en ?? ''}`.trim();
            return `<dl class="facts">${[
              fact(e('amount'), formatBaht(transfer.amount_minor)),
              fact(e('transfer_ref'), transfer.trans_ref),
              fact(e('transfer_time'), formatTime(language, transfer.occurred_at)),
              fact(e('sender'), party(transfer.sender)),
              fact(e('receiver'), party(transfer.receiver)),
            ].join('')}</dl>`;
          })
          .join('');
  return `<h2>${e('compare_heading')}</h2>
<div class="compare">
<section class="card" aria-labelledby="expected-heading"><h3 id="expected-heading">${e('expected')}</h3><dl class="facts">${expected}</dl></section>
<section class="card" aria-labelledby="bank-heading"><h3 id="bank-heading">${e('bank_verified')}: ${escapeHtml(formatBaht(detail.bank_verified_amount_minor))}</h3>${bank}</section>
</div>`;
}

function slipsSection(language: ConsoleLanguage, detail: ReviewDetail): string {
  const { e } = wordsOf(language);
  const figures = detail.slips.map((slip, index) => {
    if (slip.image_url === null) return `<p class="card">${e('slip_no_image')} (${escapeHtml(slip.receipt_id)})</p>`;
    const caption = e('slip_image', { time: formatTime(language, slip.received_at) });
    const tool = (action: string, key: ConsoleTextKey) => `<button type="button" class="secondary" data-slip-action="${action}" hidden>${e(key)}</button>`;
    return `<figure class="slip card" id="slip-${index + 1}">
<div class="slip-tools">${tool('zoom-in', 'zoom_in')}${tool('zoom-out', 'zoom_out')}${tool('rotate', 'rotate')}${tool('reset', 'reset_view')}
<a href="${escapeHtml(slip.image_url)}" target="_blank" rel="noopener noreferrer">${e('open_image')}</a></div>
<div class="slip-frame" tabindex="0" role="group" aria-label="${caption}"><img src="${escapeHtml(slip.image_url)}" alt="${caption}"></div>
<figcaption>${caption}</figcaption>
</figure>`;
  });
  return `<h2>${e('slips_heading')}</h2>\n${figures.join('\n')}`;
}

function who(language: ConsoleLanguage, page: Pick<CasePage, 'session' | 'staff_names'>, decision: { reviewer_id: string; staff_id: string | null }): string {
  const { t } = wordsOf(language);
  if (decision.staff_id === null) return t.system_desk;
  const name = page.staff_names.get(decision.staff_id) ?? decision.reviewer_id;
  if (decision.staff_id === page.session.staff_id) return `${t.you}: ${name} (${decision.staff_id})`;
  return `${name} (${decision.staff_id})`;
}

/** An earlier decision in words: what, by whom, when, and its note and rejection code (text only). */
export function decisionText(language: ConsoleLanguage, page: Pick<CasePage, 'session' | 'staff_names'>, decision: ReviewDetail['decisions'][number]): string {
  const { t } = wordsOf(language);
  const action = t[`action_${decision.action}`];
  const line = `${action} — ${t[`effect_${decision.effect}`]} — ${who(language, page, decision)} — ${formatTime(language, decision.created_at)}`;
  return decision.rejection_code ? `${line} — ${decision.rejection_code}` : line;
}

function historySection(language: ConsoleLanguage, page: CasePage): string {
  const { e } = wordsOf(language);
  const { detail } = page;
  const decisions =
    detail.decisions.length === 0
      ? `<p>${e('no_decisions')}</p>`
      : `<ol class="decisions">${detail.decisions
          .map((decision) => `<li>${escapeHtml(decisionText(language, page, decision))}${decision.note ? `<br><q>${escapeHtml(decision.note)}</q>` : ''}</li>`)
          .join('')}</ol>`;
  const evidence =
    detail.evidence.length === 0
      ? `<p>${e('no_evidence')}</p>`
      : `<ul>${detail.evidence.map((item) => `<li>${escapeHtml(item.kind)}: ${escapeHtml(item.reference)} — ${escapeHtml(item.note)} (${escapeHtml(formatTime(language, item.created_at))})</li>`).join('')}</ul>`;
  const forceCompletes = detail.force_complete_requests.length === 0
    ? ''
    : `<h2>${e('force_complete_heading')}</h2><ul>${detail.force_complete_requests
        .map((item) => `<li>${escapeHtml(formatBaht(item.claimed_verified_amount_minor))} / ${escapeHtml(formatBaht(item.derived_verified_amount_minor))} — ${escapeHtml(item.note)}</li>`)
        .join('')}</ul>`;
  return `<h2>${e('decisions_heading')}</h2>\n${decisions}\n<h2>${e('evidence_heading')}</h2>\n${evidence}\n${forceCompletes}`;
}

/** Why this person may not approve, or decide at all: the ids of the notices that say so (none: they may). */
interface Blocked {
  approve: string[];
  decide: string[];
}

/** Four eyes in words: how many approvals, who gave the first, and whether this person may give the next. */
function approvalsSection(language: ConsoleLanguage, page: CasePage): { html: string; blocked: Blocked } {
  const { e } = wordsOf(language);
  const { detail, session } = page;
  const review = detail.deposit.review;
  if (!review) return { html: '', blocked: { approve: [], decide: [] } };
  const mine = detail.approvals.some((approval) => approval.staff_id === session.staff_id);
  const escalatedByMe = detail.decisions.some((decision) => decision.action === 'escalate' && decision.staff_id === session.staff_id && decision.review_opened_at === review.opened_at);
  const first = detail.approvals[0];
  const lines = [
    `<p>${e('approvals_status', { count: detail.approvals.length, required: detail.approvals_required })}</p>`,
    detail.approvals_required > 1 ? `<p>${e('four_eyes_needed')}</p>` : '',
    first ? `<p id="first-approval">${e('four_eyes_first', { who: who(language, page, first), time: formatTime(language, first.created_at) })}</p>` : '',
    mine ? `<p class="notice" id="same-reviewer">${e('four_eyes_same_person')}</p>` : '',
    escalatedByMe ? `<p class="notice" id="escalated-by-me">${e('escalated_by_you')}</p>` : '',
  ];
  const decide = escalatedByMe ? ['escalated-by-me'] : [];
  return { html: lines.join('\n'), blocked: { approve: [...(mine ? ['same-reviewer'] : []), ...decide], decide } };
}

function actionsSection(language: ConsoleLanguage, page: CasePage, blocked: Blocked): string {
  const { t, e } = wordsOf(language);
  const { detail, session } = page;
  if (!detail.deposit.review) return `<p class="message">${e('not_in_review')}</p>`;
  if (session.role !== 'reviewer') return `<p class="message">${e('decide_only_reviewers')}</p>`;
  const action = (name: string) => href(`${CONSOLE_PATH}/reviews/${detail.deposit_id}/${name}`, {}, language);
  const hidden = `<input type="hidden" name="csrf_token" value="${escapeHtml(session.csrf_token)}"><input type="hidden" name="decision_key" value="${escapeHtml(page.decision_key)}">`;
  const amount =
    detail.bank_verified_amount_minor > 0
      ? `<p class="hint">${e('approve_amount_bank', { amount: formatBaht(detail.bank_verified_amount_minor) })}</p>`
      : `<label for="verified-amount">${e('approve_amount')}</label><input id="verified-amount" name="verified_amount" inputmode="decimal" pattern="[0-9]+([.][0-9]{1,2})?" required>`;
  const disabled = (ids: string[]) => (ids.length > 0 ? ` disabled aria-describedby="${ids.join(' ')}"` : '');
  const approveDisabled = disabled(blocked.approve);
  const decideDisabled = disabled(blocked.decide);
  const codes = REJECTION_CODES.map((code) => option(code, `${code} — ${language === 'th' ? rejectionOf(code).display_th : rejectionOf(code).display_en}`, null)).join('');
  return `<form method="post" action="${action('approve')}" id="approve-form">${hidden}
<h3>${e('approve_heading')}</h3>${amount}
<label for="approve-note">${e('note_optional')}</label><textarea id="approve-note" name="note" maxlength="2000"></textarea>
<button type="submit" id="approve-button"${approveDisabled}>${e('approve_button')}</button></form>
<form method="post" action="${action('reject')}" id="reject-form">${hidden}
<h3>${e('reject_heading')}</h3>
<label for="reject-code">${e('reject_code')}</label><select id="reject-code" name="rejection_code" required>${codes}</select>
<label for="reject-note">${e('note')}</label><p class="hint" id="reject-note-hint">${e('note_hint')}</p><textarea id="reject-note" name="note" required minlength="20" maxlength="2000" aria-describedby="reject-note-hint"></textarea>
<button type="submit" class="danger" id="reject-button"${decideDisabled}>${e('reject_button')}</button></form>
<form method="post" action="${action('escalate')}" id="escalate-form">${hidden}
<h3>${e('escalate_heading')}</h3>
<label for="escalate-note">${e('note')}</label><p class="hint" id="escalate-note-hint">${e('note_hint')}</p><textarea id="escalate-note" name="note" required minlength="20" maxlength="2000" aria-describedby="escalate-note-hint"></textarea>
<button type="submit" class="secondary" id="escalate-button">${escapeHtml(t.escalate_button)}</button></form>`;
}

export function renderCase(frame: Omit<PageFrame, 'title'>, page: CasePage): string {
  const { t, e } = wordsOf(frame.language);
  const { detail } = page;
  const approvals = approvalsSection(frame.language, page);
  const notice = page.notice ? `<p class="${page.notice.tone}" role="${page.notice.tone === 'error' ? 'alert' : 'status'}" id="case-notice">${escapeHtml(page.notice.text)}</p>` : '';
  const self = href(`${CONSOLE_PATH}/reviews/${detail.deposit_id}`, {}, frame.language);
  const main = `<p><a href="${href(`${CONSOLE_PATH}/reviews`, {}, frame.language)}">${e('back_to_queue')}</a></p>
<h1>${e('case_heading', { id: detail.deposit_id })}</h1>
<p>${e('case_status', { status: detail.deposit.status })} · ${escapeHtml(formatBaht(detail.deposit.amount_minor))}</p>
<div id="case" data-poll-url="${CONSOLE_PATH}/reviews/${escapeHtml(detail.deposit_id)}/state" data-poll-state="${escapeHtml(page.state)}" data-poll-notice="case-changed">
<p id="case-changed" class="notice" role="status" hidden>${e('case_changed')} <a href="${self}">${e('reload_case')}</a></p>
<p id="case-presence" class="presence" role="status" data-presence>${escapeHtml(presenceText(frame.language, page.viewers))}</p>
</div>
${notice}
<div class="columns">
<div>${slipsSection(frame.language, detail)}</div>
<div>${compareSection(frame.language, detail)}
${checksSection(frame.language, detail)}
${reasonsSection(frame.language, detail)}</div>
</div>
<section class="card actions" aria-labelledby="actions-heading">
<h2 id="actions-heading">${e('actions_heading')}</h2>
${approvals.html}
${actionsSection(frame.language, page, approvals.blocked)}
</section>
${historySection(frame.language, page)}`;
  return renderPage({ ...frame, title: t.case_heading.replace('{id}', detail.deposit_id) }, main);
}
