import type { MerchantView } from '../tenancy/service.ts';
import type { AttemptView, DeliveryView, EndpointView } from '../webhooks/service.ts';
import type { ConsoleSession } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf } from './html.ts';
import { formatTime } from './review-pages.ts';
import { merchantPath, modeText, noticeHtml, pagerHtml, type Frame, type PageNotice } from './merchants-pages.ts';
import { fill, type ConsoleLanguage, type ConsoleTextKey } from './texts.ts';

/**
 * The webhook pages of a merchant: one endpoint with its deliveries and the replay form, and one delivery with its
 * attempts (each answer's status code, duration and error word) and the resend form. Every stored text (the
 * endpoint's address and description, event types, error words) is escaped.
 */

export type DeliveryFilter = 'pending' | 'succeeded' | 'failed' | null;

export interface EndpointPage {
  merchant: MerchantView;
  session: ConsoleSession;
  endpoint: EndpointView;
  deliveries: DeliveryView[];
  status: DeliveryFilter;
  cursor: string | null;
  next_cursor: string | null;
  notice: PageNotice | null;
  /** The replay form's fields as sent, when a refused replay re-renders the page. */
  replay: { event_types: string; created_after: string; created_before: string; only_failed: boolean };
}

export function endpointPath(merchant_id: string, endpoint_id: string): string {
  return `${merchantPath(merchant_id)}/webhooks/${endpoint_id}`;
}

function deliveryStatusText(language: ConsoleLanguage, status: DeliveryView['status']): string {
  return wordsOf(language).t[`merchants_delivery_${status}`];
}

function answerText(language: ConsoleLanguage, answer: { http_status: number | null; error: string | null }): string {
  const { t } = wordsOf(language);
  const status = answer.http_status === null ? t.merchants_no_answer : `HTTP ${answer.http_status}`;
  return answer.error ? `${status} · ${answer.error}` : status;
}

function endpointFacts(language: ConsoleLanguage, endpoint: EndpointView): string {
  const { e } = wordsOf(language);
  const fact = (key: ConsoleTextKey, value: string) => `<dt>${e(key)}</dt><dd>${escapeHtml(value)}</dd>`;
  const { t } = wordsOf(language);
  const status = endpoint.enabled ? t.merchants_endpoint_enabled : fill(t.merchants_endpoint_disabled_reason, { reason: endpoint.disabled_reason ?? '' });
  return `<dl class="facts card">
${fact('merchants_col_address', endpoint.deposit_url)}
${fact('merchants_col_mode', modeText(language, endpoint.livemode))}
${fact('merchants_col_status', status)}
${fact('merchants_endpoint_events', endpoint.event_types ? endpoint.event_types.join(', ') : t.merchants_endpoint_all_events)}
${fact('merchants_endpoint_always', endpoint.always_delivered.join(', '))}
${endpoint.description ? fact('merchants_endpoint_description', endpoint.description) : ''}
</dl>`;
}

function statusFilter(language: ConsoleLanguage, page: EndpointPage): string {
  const { e } = wordsOf(language);
  const option = (value: string, text: string) => `<option value="${value}"${(page.status ?? '') === value ? ' selected' : ''}>${escapeHtml(text)}</option>`;
  const { t } = wordsOf(language);
  return `<form method="get" action="${href(endpointPath(page.merchant.id, page.endpoint.id), {}, language)}" class="filters">
${language === 'en' ? '<input type="hidden" name="lang" value="en">' : ''}
<div><label for="status-filter">${e('merchants_filter_status')}</label><select id="status-filter" name="status">
${option('', t.merchants_filter_any)}${option('pending', t.merchants_delivery_pending)}${option('succeeded', t.merchants_delivery_succeeded)}${option('failed', t.merchants_delivery_failed)}
</select></div>
<button type="submit" class="secondary">${e('merchants_filter_apply')}</button>
</form>`;
}

function deliveriesTable(language: ConsoleLanguage, page: EndpointPage): string {
  const { e } = wordsOf(language);
  if (page.deliveries.length === 0) return `<p>${e('merchants_deliveries_none')}</p>`;
  const rows = page.deliveries.map((delivery) => {
    const link = href(`${endpointPath(page.merchant.id, page.endpoint.id)}/deliveries/${delivery.id}`, {}, language);
    const last = delivery.last_attempt_at ? answerText(language, { http_status: delivery.last_http_status, error: delivery.last_error }) : '';
    return `<tr><td><a href="${link}">${escapeHtml(delivery.id)}</a></td><td>${escapeHtml(`${delivery.event_type} ${delivery.event_id}`)}</td>
<td>${escapeHtml(deliveryStatusText(language, delivery.status))}</td><td>${delivery.attempt_count}</td><td>${escapeHtml(last)}</td><td>${escapeHtml(formatTime(language, delivery.created_at))}</td></tr>`;
  });
  const heads = ['merchants_col_delivery', 'merchants_col_event', 'merchants_col_status', 'merchants_col_attempts', 'merchants_col_last_answer', 'merchants_col_created'] as const;
  return `<table id="deliveries"><caption class="visually-hidden">${e('merchants_deliveries_heading')}</caption>
<thead><tr>${heads.map((key) => `<th scope="col">${e(key)}</th>`).join('')}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`;
}

function replayForm(language: ConsoleLanguage, page: EndpointPage): string {
  const { e } = wordsOf(language);
  const { replay } = page;
  return `<form method="post" action="${href(`${endpointPath(page.merchant.id, page.endpoint.id)}/replay`, {}, language)}" id="replay-form" class="card">
<h2>${e('merchants_replay_heading')}</h2>
<p class="hint" id="replay-hint">${e('merchants_replay_hint')}</p>
<input type="hidden" name="csrf_token" value="${escapeHtml(page.session.csrf_token)}">
<label for="replay-types">${e('merchants_replay_event_types')}</label><input id="replay-types" name="event_types" value="${escapeHtml(replay.event_types)}" maxlength="2000" aria-describedby="replay-hint">
<label for="replay-after">${e('merchants_replay_created_after')}</label><input id="replay-after" type="datetime-local" name="created_after" value="${escapeHtml(replay.created_after)}">
<label for="replay-before">${e('merchants_replay_created_before')}</label><input id="replay-before" type="datetime-local" name="created_before" value="${escapeHtml(replay.created_before)}">
<label class="choice" for="replay-failed"><input type="checkbox" id="replay-failed" name="only_failed" value="true"${replay.only_failed ? ' checked' : ''}> ${e('merchants_replay_only_failed')}</label>
<p><button type="submit" id="replay-button">${e('merchants_replay_button')}</button></p>
</form>`;
}

export function renderEndpoint(frame: Frame, page: EndpointPage): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const self = endpointPath(page.merchant.id, page.endpoint.id);
  const filter = { status: page.status };
  const pager = pagerHtml(language, 'merchants_deliveries_heading', page.cursor ? href(self, filter, language) : null, page.next_cursor ? href(self, { ...filter, cursor: page.next_cursor }, language) : null);
  const main = `<p><a href="${href(merchantPath(page.merchant.id), {}, language)}">${e('merchants_back_to_merchant', { name: page.merchant.name })}</a></p>
<h1>${e('merchants_endpoint_heading', { id: page.endpoint.id })}</h1>
${noticeHtml(page.notice)}
${endpointFacts(language, page.endpoint)}
<h2>${e('merchants_deliveries_heading')}</h2>
${statusFilter(language, page)}
${deliveriesTable(language, page)}
${pager}
${replayForm(language, page)}`;
  return renderPage({ ...frame, title: fill(t.merchants_endpoint_heading, { id: page.endpoint.id }) }, main);
}

export interface DeliveryPage {
  merchant: MerchantView;
  session: ConsoleSession;
  endpoint: EndpointView;
  delivery: DeliveryView;
  notice: PageNotice | null;
}

function attemptRow(language: ConsoleLanguage, attempt: AttemptView): string {
  const { t, e } = wordsOf(language);
  const duration = attempt.duration_ms === null ? '' : e('merchants_duration_ms', { count: attempt.duration_ms });
  const status = attempt.http_status === null ? t.merchants_no_answer : String(attempt.http_status);
  return `<tr><td>${attempt.round}</td><td>${attempt.attempt}${attempt.resend ? ` <span class="flag">${e('merchants_attempt_resend')}</span>` : ''}</td><td>${escapeHtml(attempt.status)}</td>
<td class="http-status">${escapeHtml(status)}</td><td class="amount">${duration}</td><td>${escapeHtml(attempt.error ?? '')}</td><td>${escapeHtml(formatTime(language, attempt.started_at))}</td>
<td>${escapeHtml(attempt.next_attempt_at ? formatTime(language, attempt.next_attempt_at) : '')}</td></tr>`;
}

function attemptsTable(language: ConsoleLanguage, attempts: AttemptView[]): string {
  const { e } = wordsOf(language);
  if (attempts.length === 0) return `<p>${e('merchants_attempts_none')}</p>`;
  const heads = ['merchants_col_round', 'merchants_col_attempt', 'merchants_col_status', 'merchants_col_http_status', 'merchants_col_duration', 'merchants_col_error', 'merchants_col_time', 'merchants_col_next_attempt'] as const;
  return `<table id="attempts"><caption class="visually-hidden">${e('merchants_attempts_heading')}</caption>
<thead><tr>${heads.map((key) => `<th scope="col">${e(key)}</th>`).join('')}</tr></thead>
<tbody>${attempts.map((attempt) => attemptRow(language, attempt)).join('\n')}</tbody></table>`;
}

export function renderDelivery(frame: Frame, page: DeliveryPage): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const { delivery } = page;
  const endpoint = endpointPath(page.merchant.id, page.endpoint.id);
  const fact = (key: ConsoleTextKey, value: string) => `<dt>${e(key)}</dt><dd>${escapeHtml(value)}</dd>`;
  const resend = `<form method="post" action="${href(`${endpoint}/deliveries/${delivery.id}/resend`, {}, language)}" id="resend-form" class="card">
<h2>${e('merchants_resend_heading')}</h2><p class="hint">${e('merchants_resend_hint')}</p>
<input type="hidden" name="csrf_token" value="${escapeHtml(page.session.csrf_token)}">
<button type="submit" id="resend-button">${e('merchants_resend_button')}</button></form>`;
  const main = `<p><a href="${href(endpoint, {}, language)}">${e('merchants_back_to_endpoint', { id: page.endpoint.id })}</a></p>
<h1>${e('merchants_delivery_heading', { id: delivery.id })}</h1>
${noticeHtml(page.notice)}
<dl class="facts card">
${fact('merchants_col_event', `${delivery.event_type} ${delivery.event_id}`)}
${fact('merchants_col_status', `${deliveryStatusText(language, delivery.status)}${delivery.failure_reason ? ` · ${delivery.failure_reason}` : ''}`)}
${fact('merchants_col_address', page.endpoint.deposit_url)}
${fact('merchants_col_round', String(delivery.round))}
${fact('merchants_col_next_attempt', delivery.next_attempt_at ? formatTime(language, delivery.next_attempt_at) : '')}
</dl>
<h2>${e('merchants_attempts_heading')}</h2>
<p class="hint">${e('merchants_attempts_body_note')}</p>
${attemptsTable(language, delivery.attempts ?? [])}
${resend}`;
  return renderPage({ ...frame, title: fill(t.merchants_delivery_heading, { id: delivery.id }) }, main);
}
