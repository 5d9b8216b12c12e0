import type { BackofficeClaimView } from '../review/claims.ts';
import { CLAIM_RESOLUTION_CODES, REFUNDED_IN_SERVICE } from '../review/claims-repository.ts';
import { CLAIM_OPEN_CAUSES } from '../review/claim-routes.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf, type PageFrame } from './html.ts';
import { formatBaht, formatTime, type CaseNotice } from './review-pages.ts';
import { filterSelect, noticeHtml, option, pager } from './desk-kit.ts';
import type { ConsoleLanguage, ConsoleTextKey } from './texts.ts';

/**
 * The claims desk's pages: the list and one claim with its evidence, times and decisions. Pure rendering from
 * what ClaimService answered; every stored text (the payer's note, references, the internal note) is escaped.
 */

export const CLAIM_STATUSES = ['open', 'investigating', 'resolved', 'rejected'] as const;
export const CLAIM_CAUSES = ['same_transfer_excess', 'additional_transfer', 'late_slip'] as const;

export interface ClaimFilters {
  status: (typeof CLAIM_STATUSES)[number] | null;
  cause: (typeof CLAIM_CAUSES)[number] | null;
  mode: 'test' | 'live' | null;
  deposit_id: string | null;
}

export interface ClaimListPage {
  items: BackofficeClaimView[];
  filters: ClaimFilters;
  cursor: string | null;
  next_cursor: string | null;
}

/** What a person typed into the form opening a claim, kept as text to show it again after a refusal. */
export const CLAIM_OPEN_FIELDS = ['deposit_id', 'cause', 'amount', 'trans_ref', 'sending_bank_code', 'occurred_at', 'note'] as const;
export type ClaimOpenDraft = Partial<Record<(typeof CLAIM_OPEN_FIELDS)[number], string>>;

export interface ClaimOpenPage {
  session: ConsoleSession;
  draft: ClaimOpenDraft;
  notice: CaseNotice | null;
  /** A fresh Idempotency-Key for this rendering of the form. */
  decision_key: string;
}

export interface ClaimPage {
  claim: BackofficeClaimView;
  session: ConsoleSession;
  notice: CaseNotice | null;
  /** A fresh Idempotency-Key for the forms of this rendering. */
  decision_key: string;
  /** True when the session's role may decide claims (CLAIM_DECIDE_ROLES). */
  may_decide: boolean;
}

const statusText = (language: ConsoleLanguage, status: string) => wordsOf(language).t[`claims_status_${status}` as ConsoleTextKey] ?? status;
const causeText = (language: ConsoleLanguage, cause: string) => wordsOf(language).t[`claims_cause_${cause}` as ConsoleTextKey] ?? cause;
const codeText = (language: ConsoleLanguage, code: string) => wordsOf(language).t[`claims_code_${code}` as ConsoleTextKey] ?? code;

export function claimStatusText(language: ConsoleLanguage, status: string): string {
  return statusText(language, status);
}

function filterQuery(filters: ClaimFilters): Record<string, string | null> {
  return { status: filters.status, cause: filters.cause, mode: filters.mode, deposit_id: filters.deposit_id };
}

function filterForm(language: ConsoleLanguage, filters: ClaimFilters): string {
  const { t, e } = wordsOf(language);
  return `<form method="get" action="${CONSOLE_PATH}/claims" class="filters card">
${language === 'en' ? '<input type="hidden" name="lang" value="en">' : ''}
${filterSelect(language, 'status', t.claims_filter_status, CLAIM_STATUSES.map((status) => [status, statusText(language, status)]), filters.status)}
${filterSelect(language, 'cause', t.claims_filter_cause, CLAIM_CAUSES.map((cause) => [cause, causeText(language, cause)]), filters.cause)}
${filterSelect(language, 'mode', t.filter_mode, [['test', t.mode_test], ['live', t.mode_live]], filters.mode)}
<div><label for="filter-deposit_id">${e('claims_filter_deposit')}</label><input id="filter-deposit_id" name="deposit_id" value="${escapeHtml(filters.deposit_id ?? '')}" pattern="dep_[0-9A-Za-z]+" autocomplete="off"></div>
<div><button type="submit">${e('apply_filters')}</button></div>
</form>`;
}

function claimRow(language: ConsoleLanguage, claim: BackofficeClaimView): string {
  const { e } = wordsOf(language);
  return `<tr>
<td><a href="${href(`${CONSOLE_PATH}/claims/${claim.id}`, {}, language)}">${escapeHtml(claim.id)}</a>${claim.livemode ? '' : ` <span class="flag">${e('flag_test')}</span>`}</td>
<td>${escapeHtml(claim.deposit_id)}</td>
<td>${escapeHtml(causeText(language, claim.cause))}</td>
<td>${escapeHtml(statusText(language, claim.status))}</td>
<td class="amount">${claim.amount_minor === null ? e('claims_amount_none') : escapeHtml(formatBaht(claim.amount_minor))}</td>
<td>${escapeHtml(formatTime(language, claim.created_at))}</td>
</tr>`;
}

/** `may_open`: the session's role may open claims (the roles of POST /v1/bo/claims). */
export function renderClaimList(frame: Omit<PageFrame, 'title'>, page: ClaimListPage, may_open: boolean): string {
  const { t, e } = wordsOf(frame.language);
  const header = ['claims_col_claim', 'claims_col_deposit', 'claims_col_cause', 'claims_col_status', 'claims_col_amount', 'claims_col_opened'] as const;
  const table =
    page.items.length === 0
      ? `<p class="message">${e('claims_empty')}</p>`
      : `<table>
<caption class="visually-hidden">${e('claims_heading')}</caption>
<thead><tr>${header.map((key) => `<th scope="col"${key === 'claims_col_amount' ? ' class="amount"' : ''}>${e(key)}</th>`).join('')}</tr></thead>
<tbody>
${page.items.map((claim) => claimRow(frame.language, claim)).join('\n')}
</tbody>
</table>`;
  const open = may_open ? `<p><a href="${href(`${CONSOLE_PATH}/claims/new`, {}, frame.language)}" id="open-claim-link">${e('claims_open_link')}</a></p>` : '';
  const main = `<h1>${e('claims_heading')}</h1>
${open}
${filterForm(frame.language, page.filters)}
${table}
${pager(frame.language, `${CONSOLE_PATH}/claims`, filterQuery(page.filters), page, t.claims_heading)}`;
  return renderPage({ ...frame, title: t.claims_heading }, main);
}

function fact(label: string, value: string): string {
  return `<dt>${escapeHtml(label)}</dt><dd>${escapeHtml(value)}</dd>`;
}

function factsSection(language: ConsoleLanguage, claim: BackofficeClaimView): string {
  const { t, e } = wordsOf(language);
  const opener = claim.opened_by.type === 'backoffice' ? t.claims_opened_by_backoffice.replace('{id}', claim.opened_by.credential_id) : t[`claims_opened_by_${claim.opened_by.type}`];
  return `<section class="card" aria-labelledby="claim-facts"><h2 id="claim-facts">${e('claims_facts_heading')}</h2><dl class="facts">${[
    fact(t.claims_col_status, statusText(language, claim.status)),
    fact(t.claims_col_cause, causeText(language, claim.cause)),
    fact(t.claims_col_amount, claim.amount_minor === null ? t.claims_amount_none : formatBaht(claim.amount_minor)),
    fact(t.claims_col_deposit, claim.deposit_id),
    fact(t.claims_merchant, claim.merchant_id),
    fact(t.claims_mode, claim.livemode ? t.mode_live : t.mode_test),
    fact(t.claims_opened_by, opener),
  ].join('')}</dl></section>`;
}

function datesSection(language: ConsoleLanguage, claim: BackofficeClaimView): string {
  const { t, e } = wordsOf(language);
  const when = (time: string | null, who: string | null) => (time === null ? t.claims_not_yet : who === null ? formatTime(language, time) : t.claims_by.replace('{time}', formatTime(language, time)).replace('{who}', who));
  return `<section class="card" aria-labelledby="claim-dates"><h2 id="claim-dates">${e('claims_dates_heading')}</h2><dl class="facts">${[
    fact(t.claims_slip_received_at, formatTime(language, claim.slip_received_at)),
    fact(t.claims_created_at, formatTime(language, claim.created_at)),
    fact(t.claims_investigated_at, when(claim.investigated_at, claim.investigated_by)),
    fact(t.claims_resolved_at, when(claim.resolved_at, claim.resolved_by)),
  ].join('')}</dl><p class="hint">${e('claims_no_deadline')}</p></section>`;
}

/** Every field the payer (or staff for them) reported, as text; a claim has no image. */
function evidenceSection(language: ConsoleLanguage, claim: BackofficeClaimView): string {
  const { t, e } = wordsOf(language);
  const evidence = claim.evidence;
  const items = evidence === null
    ? []
    : [
        evidence.trans_ref === undefined ? '' : fact(t.claims_evidence_trans_ref, evidence.trans_ref),
        evidence.sending_bank_code === undefined ? '' : fact(t.claims_evidence_sending_bank_code, evidence.sending_bank_code),
        evidence.occurred_at === undefined ? '' : fact(t.claims_evidence_occurred_at, formatTime(language, evidence.occurred_at)),
        evidence.amount_minor === undefined ? '' : fact(t.claims_evidence_amount_minor, formatBaht(evidence.amount_minor)),
        evidence.note === undefined ? '' : fact(t.claims_evidence_note, evidence.note),
      ].filter((item) => item !== '');
  const body = items.length === 0 ? `<p>${e('claims_evidence_none')}</p>` : `<dl class="facts" id="claim-evidence">${items.join('')}</dl>`;
  return `<h2>${e('claims_evidence_heading')}</h2>\n${body}\n<p class="hint">${e('claims_evidence_image')}</p>`;
}

function resolutionSection(language: ConsoleLanguage, claim: BackofficeClaimView): string {
  const { t, e } = wordsOf(language);
  if (claim.status !== 'resolved' && claim.status !== 'rejected') return '';
  const items = [
    fact(t.claims_col_status, statusText(language, claim.status)),
    claim.resolution_code === null ? '' : fact(t.claims_resolution_code, codeText(language, claim.resolution_code)),
    claim.refund_id === null ? '' : fact(t.claims_refund, claim.refund_id),
    claim.resolution_note === null ? '' : fact(t.claims_resolution_note, claim.resolution_note),
  ].join('');
  return `<h2>${e('claims_resolution_heading')}</h2>\n<dl class="facts" id="claim-resolution">${items}</dl>`;
}

function noteField(language: ConsoleLanguage, id: string): string {
  const { e } = wordsOf(language);
  return `<label for="${id}">${e('note')}</label><p class="hint" id="${id}-hint">${e('note_hint')}</p><textarea id="${id}" name="note" required minlength="20" maxlength="2000" aria-describedby="${id}-hint"></textarea>`;
}

function actionsSection(language: ConsoleLanguage, page: ClaimPage): string {
  const { t, e } = wordsOf(language);
  const { claim, session } = page;
  if (claim.status === 'resolved' || claim.status === 'rejected') return `<p class="message">${e('claims_closed')}</p>`;
  if (!page.may_decide) return `<p class="message">${e('claims_decide_only_operators')}</p>`;
  const action = (name: string) => href(`${CONSOLE_PATH}/claims/${claim.id}/${name}`, {}, language);
  const hidden = `<input type="hidden" name="csrf_token" value="${escapeHtml(session.csrf_token)}"><input type="hidden" name="decision_key" value="${escapeHtml(page.decision_key)}">`;
  const investigate = claim.status === 'open'
    ? `<form method="post" action="${action('investigate')}" id="investigate-form">${hidden}
<h3>${e('claims_investigate_heading')}</h3>
<button type="submit" class="secondary" id="investigate-button">${e('claims_investigate_button')}</button></form>`
    : '';
  const codes = CLAIM_RESOLUTION_CODES.map((code) => option(code, codeText(language, code), null)).join('');
  return `${investigate}
<form method="post" action="${action('resolve')}" id="resolve-form">${hidden}
<h3>${e('claims_resolve_heading')}</h3>
<label for="resolution-code">${e('claims_resolution_code')}</label><select id="resolution-code" name="resolution_code" required>${codes}</select>
${noteField(language, 'resolve-note')}
<fieldset><legend>${escapeHtml(codeText(language, REFUNDED_IN_SERVICE))}</legend><p class="hint" id="refund-hint">${e('claims_refund_hint')}</p>
<label for="refund-amount">${e('claims_refund_amount')}</label><input id="refund-amount" name="refund_amount" inputmode="decimal" pattern="[0-9]+([.][0-9]{1,2})?" aria-describedby="refund-hint">
<label for="refund-id">${e('claims_refund_id')}</label><input id="refund-id" name="refund_id" pattern="wdr_[0-9A-Za-z]+" autocomplete="off" aria-describedby="refund-hint"></fieldset>
<button type="submit" id="resolve-button">${escapeHtml(t.claims_resolve_button)}</button></form>
<form method="post" action="${action('reject')}" id="reject-form">${hidden}
<h3>${e('claims_reject_heading')}</h3>
${noteField(language, 'reject-note')}
<button type="submit" class="danger" id="reject-button">${e('claims_reject_button')}</button></form>`;
}

export function renderClaim(frame: Omit<PageFrame, 'title'>, page: ClaimPage): string {
  const { t, e } = wordsOf(frame.language);
  const { claim } = page;
  const main = `<p><a href="${href(`${CONSOLE_PATH}/claims`, {}, frame.language)}">${e('claims_back')}</a></p>
<h1>${e('claims_detail_heading', { id: claim.id })}</h1>
<p>${e('case_status', { status: statusText(frame.language, claim.status) })} · ${escapeHtml(causeText(frame.language, claim.cause))}</p>
${noticeHtml(page.notice)}
<div class="columns">
<div>${factsSection(frame.language, claim)}</div>
<div>${datesSection(frame.language, claim)}</div>
</div>
${evidenceSection(frame.language, claim)}
${resolutionSection(frame.language, claim)}
<section class="card actions" aria-labelledby="actions-heading">
<h2 id="actions-heading">${e('claims_actions_heading')}</h2>
${actionsSection(frame.language, page)}
</section>`;
  return renderPage({ ...frame, title: t.claims_detail_heading.replace('{id}', claim.id) }, main);
}

function openField(language: ConsoleLanguage, draft: ClaimOpenDraft, name: 'deposit_id' | 'amount' | 'trans_ref' | 'sending_bank_code' | 'occurred_at', label: string, attributes: string, hint: string | null): string {
  const hinted = hint === null ? '' : ` aria-describedby="open-${name}-hint"`;
  const hintHtml = hint === null ? '' : `<p class="hint" id="open-${name}-hint">${escapeHtml(hint)}</p>`;
  return `<label for="open-${name}">${escapeHtml(label)}</label>${hintHtml}<input id="open-${name}" name="${name}" value="${escapeHtml(draft[name] ?? '')}" ${attributes}${hinted}>`;
}

/** The form opening a claim for a payer (POST /bo/claims, as POST /v1/bo/claims): the order, the cause and the reported transfer. */
export function renderClaimOpen(frame: Omit<PageFrame, 'title'>, page: ClaimOpenPage): string {
  const language = frame.language;
  const { t, e } = wordsOf(language);
  const { draft } = page;
  const causes = CLAIM_OPEN_CAUSES.map((cause) => option(cause, causeText(language, cause), draft.cause ?? null)).join('');
  const main = `<p><a href="${href(`${CONSOLE_PATH}/claims`, {}, language)}">${e('claims_back')}</a></p>
<h1>${e('claims_open_heading')}</h1>
${noticeHtml(page.notice)}
<p>${e('claims_open_intro')}</p>
<form method="post" action="${href(`${CONSOLE_PATH}/claims`, {}, language)}" id="open-claim-form" class="card">
<input type="hidden" name="csrf_token" value="${escapeHtml(page.session.csrf_token)}"><input type="hidden" name="decision_key" value="${escapeHtml(page.decision_key)}">
${openField(language, draft, 'deposit_id', t.claims_open_deposit, 'required pattern="dep_[0-9A-Za-z]+" autocomplete="off"', null)}
<label for="open-cause">${e('claims_open_cause')}</label><p class="hint" id="open-cause-hint">${e('claims_open_cause_hint')}</p><select id="open-cause" name="cause" required aria-describedby="open-cause-hint">${causes}</select>
<fieldset><legend>${e('claims_open_evidence_legend')}</legend>
${openField(language, draft, 'amount', t.claims_open_amount, 'inputmode="decimal" pattern="[0-9]+([.][0-9]{1,2})?"', t.claims_open_amount_hint)}
${openField(language, draft, 'trans_ref', t.claims_evidence_trans_ref, 'pattern="[A-Za-z0-9]{1,50}" maxlength="50" autocomplete="off"', null)}
${openField(language, draft, 'sending_bank_code', t.claims_evidence_sending_bank_code, 'pattern="[0-9]{3}" maxlength="3" inputmode="numeric" autocomplete="off"', null)}
${openField(language, draft, 'occurred_at', t.claims_evidence_occurred_at, 'type="datetime-local" step="1" autocomplete="off"', t.claims_open_occurred_at_hint)}
<label for="open-note">${e('claims_evidence_note')}</label><p class="hint" id="open-note-hint">${e('claims_open_note_hint')}</p><textarea id="open-note" name="note" maxlength="1000" aria-describedby="open-note-hint">${escapeHtml(draft.note ?? '')}</textarea>
</fieldset>
<button type="submit" id="open-claim-button">${e('claims_open_button')}</button>
</form>`;
  return renderPage({ ...frame, title: t.claims_open_heading }, main);
}
