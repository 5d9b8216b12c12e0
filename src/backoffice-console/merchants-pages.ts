import type { ApiKeyView, MerchantView } from '../tenancy/service.ts';
import type { BalanceTransactionView, BalanceView, ClearingView } from '../ledger/service.ts';
import type { EndpointView } from '../webhooks/service.ts';
import { API_KEY_SCOPES } from '../platform/access.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { escapeHtml, href, renderPage, wordsOf, type PageFrame } from './html.ts';
import { formatTime } from './review-pages.ts';
import { fill, type ConsoleLanguage, type ConsoleTextKey } from './texts.ts';

/**
 * The merchants area's pages: the merchant list, one merchant (with its webhook endpoints), its wallet and its API
 * keys (with the page that shows a new key's secrets, once). Pure rendering from what the services answered; every
 * stored text (a merchant's name, an endpoint's address) is escaped.
 */

export type Frame = Omit<PageFrame, 'title'>;

/** What a page says above everything else: the outcome of the last action, or why it failed. */
export interface PageNotice {
  tone: 'success' | 'error';
  text: string;
}

/** A wallet amount in baht with its sign: a wallet's available balance may be negative (a debt). */
export function formatSignedBaht(amount_minor: number): string {
  const sign = amount_minor < 0 ? '-' : '';
  const absolute = Math.abs(amount_minor);
  const baht = Math.trunc(absolute / 100);
  return `${sign}${baht.toLocaleString('en-US')}.${String(absolute % 100).padStart(2, '0')} THB`;
}

export function noticeHtml(notice: PageNotice | null): string {
  if (!notice) return '';
  return `<p class="${notice.tone}" role="${notice.tone === 'error' ? 'alert' : 'status'}" id="page-notice">${escapeHtml(notice.text)}</p>`;
}

export function statusText(language: ConsoleLanguage, status: 'active' | 'suspended' | 'revoked'): string {
  return wordsOf(language).t[`merchants_status_${status}`];
}

export function modeText(language: ConsoleLanguage, livemode: boolean): string {
  return wordsOf(language).t[livemode ? 'merchants_mode_live' : 'merchants_mode_test'];
}

/** A list's pager: back to the first page when on a later one, and on to the next when there is one. */
export function pagerHtml(language: ConsoleLanguage, label: ConsoleTextKey, first: string | null, next: string | null): string {
  const { e } = wordsOf(language);
  const links = [first ? `<a href="${first}">${e('merchants_first_page')}</a>` : '', next ? `<a href="${next}" rel="next">${e('merchants_next_page')}</a>` : ''].join('');
  return links === '' ? '' : `<nav class="pager" aria-label="${e(label)}">${links}</nav>`;
}

export function merchantPath(merchant_id: string): string {
  return `${CONSOLE_PATH}/merchants/${merchant_id}`;
}

export interface MerchantListPage {
  merchants: MerchantView[];
  /** The cursor this page started after (null: the first page). */
  cursor: string | null;
  next_cursor: string | null;
}

export function renderMerchantList(frame: Frame, page: MerchantListPage): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const rows = page.merchants.map(
    (merchant) => `<tr><td><a href="${href(merchantPath(merchant.id), {}, language)}">${escapeHtml(merchant.id)}</a></td>
<td>${escapeHtml(merchant.name)}</td><td>${escapeHtml(statusText(language, merchant.status))}</td><td>${escapeHtml(formatTime(language, merchant.created_at))}</td></tr>`,
  );
  const table =
    rows.length === 0
      ? `<p>${e('merchants_none')}</p>`
      : `<table id="merchants"><caption class="visually-hidden">${e('merchants_heading')}</caption>
<thead><tr><th scope="col">${e('merchants_col_id')}</th><th scope="col">${e('merchants_col_name')}</th><th scope="col">${e('merchants_col_status')}</th><th scope="col">${e('merchants_col_created')}</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`;
  const list = `${CONSOLE_PATH}/merchants`;
  const pager = pagerHtml(language, 'merchants_heading', page.cursor ? href(list, {}, language) : null, page.next_cursor ? href(list, { cursor: page.next_cursor }, language) : null);
  return renderPage({ ...frame, title: t.merchants_heading }, `<h1>${e('merchants_heading')}</h1>\n${table}\n${pager}`);
}

export interface MerchantPage {
  merchant: MerchantView;
  session: ConsoleSession;
  endpoints: EndpointView[];
  endpoints_cursor: string | null;
  endpoints_next: string | null;
}

function endpointsTable(language: ConsoleLanguage, merchant: MerchantView, endpoints: EndpointView[]): string {
  const { e } = wordsOf(language);
  if (endpoints.length === 0) return `<p>${e('merchants_endpoints_none')}</p>`;
  const rows = endpoints.map((endpoint) => {
    const link = href(`${merchantPath(merchant.id)}/webhooks/${endpoint.id}`, {}, language);
    const status = e(endpoint.enabled ? 'merchants_endpoint_enabled' : 'merchants_endpoint_disabled');
    return `<tr><td><a href="${link}">${escapeHtml(endpoint.id)}</a></td><td>${escapeHtml(endpoint.deposit_url)}</td><td>${escapeHtml(modeText(language, endpoint.livemode))}</td><td>${status}</td></tr>`;
  });
  return `<table id="endpoints"><caption class="visually-hidden">${e('merchants_endpoints_heading')}</caption>
<thead><tr><th scope="col">${e('merchants_col_endpoint')}</th><th scope="col">${e('merchants_col_address')}</th><th scope="col">${e('merchants_col_mode')}</th><th scope="col">${e('merchants_col_status')}</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`;
}

export function renderMerchant(frame: Frame, page: MerchantPage): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const { merchant } = page;
  const self = merchantPath(merchant.id);
  const mayManage = page.session.role !== 'reviewer';
  const back = mayManage ? `<p><a href="${href(`${CONSOLE_PATH}/merchants`, {}, language)}">${e('merchants_back_to_list')}</a></p>\n` : '';
  const keys = mayManage ? `<li><a href="${href(`${self}/api-keys`, {}, language)}">${e('merchants_keys_link')}</a></li>` : '';
  const pager = pagerHtml(
    language,
    'merchants_endpoints_heading',
    page.endpoints_cursor ? href(self, {}, language) : null,
    page.endpoints_next ? href(self, { endpoints_after: page.endpoints_next }, language) : null,
  );
  const main = `${back}<h1>${e('merchants_merchant_heading', { name: merchant.name })}</h1>
<dl class="facts card">
<dt>${e('merchants_col_id')}</dt><dd>${escapeHtml(merchant.id)}</dd>
<dt>${e('merchants_col_status')}</dt><dd>${escapeHtml(statusText(language, merchant.status))}</dd>
<dt>${e('merchants_col_created')}</dt><dd>${escapeHtml(formatTime(language, merchant.created_at))}</dd>
</dl>
<ul>
<li><a href="${href(`${self}/wallet`, { mode: 'live' }, language)}">${e('merchants_wallet_live')}</a></li>
<li><a href="${href(`${self}/wallet`, { mode: 'test' }, language)}">${e('merchants_wallet_test')}</a></li>
${keys}
</ul>
<h2>${e('merchants_endpoints_heading')}</h2>
${endpointsTable(language, merchant, page.endpoints)}
${pager}`;
  return renderPage({ ...frame, title: t.merchants_merchant_heading.replace('{name}', merchant.name) }, main);
}

export interface WalletPage {
  merchant: MerchantView;
  livemode: boolean;
  balance: BalanceView;
  check: { consistent: boolean; movements: number };
  next_clearing_at: string | null;
  movements: { sequence: number; transaction: BalanceTransactionView }[];
  /** The query of this rendering (mode and the three lists' cursors), for the pagers. */
  query: Record<string, string>;
  movements_next: string | null;
  pending: ClearingView[];
  pending_next: string | null;
  held: ClearingView[];
  held_next: string | null;
}

function bucketsSection(language: ConsoleLanguage, page: WalletPage): string {
  const { e } = wordsOf(language);
  const { balance } = page;
  const bucket = (id: string, name: ConsoleTextKey, hint: ConsoleTextKey, amount: number) =>
    `<section class="card" aria-labelledby="${id}"><h3 id="${id}">${e(name)}</h3><p class="amount" data-bucket="${id}">${escapeHtml(formatSignedBaht(amount))}</p><p class="hint">${e(hint)}</p></section>`;
  const check = page.check.consistent
    ? `<p class="success" id="ledger-check">${e('merchants_ledger_consistent', { count: page.check.movements })}</p>`
    : `<p class="error" id="ledger-check" role="alert">${e('merchants_ledger_inconsistent', { count: page.check.movements })}</p>`;
  const next = page.next_clearing_at ? e('merchants_next_clearing', { time: formatTime(language, page.next_clearing_at) }) : e('merchants_no_next_clearing');
  return `<h2>${e('merchants_buckets_heading')}</h2>
<div class="compare">
${bucket('available', 'merchants_bucket_available', 'merchants_bucket_available_hint', balance.available_minor)}
${bucket('pending_clearing', 'merchants_bucket_pending', 'merchants_bucket_pending_hint', balance.pending_clearing_minor)}
${bucket('reserved', 'merchants_bucket_reserved', 'merchants_bucket_reserved_hint', balance.reserved_minor)}
</div>
<p>${e('merchants_display_total', { amount: formatSignedBaht(balance.available_minor + balance.pending_clearing_minor) })} · ${e('merchants_as_of', { time: formatTime(language, balance.as_of) })}</p>
<p>${next}</p>
${check}`;
}

function bucketName(language: ConsoleLanguage, bucket: string | null): string {
  const { t } = wordsOf(language);
  if (bucket === 'available') return t.merchants_bucket_available;
  if (bucket === 'pending_clearing') return t.merchants_bucket_pending;
  if (bucket === 'reserved') return t.merchants_bucket_reserved;
  return t.merchants_outside;
}

function movementRow(language: ConsoleLanguage, sequence: number, movement: BalanceTransactionView): string {
  const after = movement.balance_after;
  const total = after.available_minor + after.pending_clearing_minor + after.reserved_minor;
  const amount = movement.direction === 'credit' ? movement.amount_minor : -movement.amount_minor;
  const cell = (value: number) => `<td class="amount">${escapeHtml(formatSignedBaht(value))}</td>`;
  return `<tr data-sequence="${sequence}" id="${escapeHtml(movement.id)}"><td>${escapeHtml(formatTime(language, movement.created_at))}</td>
<td>${escapeHtml(movement.type)}</td>${cell(amount)}<td>${escapeHtml(`${bucketName(language, movement.bucket_from)} → ${bucketName(language, movement.bucket_to)}`)}</td>
<td>${escapeHtml(`${movement.source.type} ${movement.source.id}`)}</td>${cell(after.available_minor)}${cell(after.pending_clearing_minor)}${cell(after.reserved_minor)}<td class="amount total-after">${escapeHtml(formatSignedBaht(total))}</td></tr>`;
}

function movementsSection(language: ConsoleLanguage, page: WalletPage, self: string): string {
  const { e } = wordsOf(language);
  const heads = ['merchants_col_time', 'merchants_col_type', 'merchants_col_amount', 'merchants_col_buckets', 'merchants_col_source', 'merchants_col_available_after', 'merchants_col_pending_after', 'merchants_col_reserved_after', 'merchants_col_total_after'] as const;
  const table =
    page.movements.length === 0
      ? `<p>${e('merchants_movements_none')}</p>`
      : `<table id="movements"><caption class="visually-hidden">${e('merchants_movements_heading')}</caption>
<thead><tr>${heads.map((key) => `<th scope="col">${e(key)}</th>`).join('')}</tr></thead>
<tbody>${page.movements.map((row) => movementRow(language, row.sequence, row.transaction)).join('\n')}</tbody></table>`;
  const { before: _before, ...rest } = page.query;
  const pager = pagerHtml(language, 'merchants_movements_heading', page.query.before ? href(self, rest, language) : null, page.movements_next ? href(self, { ...rest, before: page.movements_next }, language) : null);
  return `<h2 id="movements-heading">${e('merchants_movements_heading')}</h2>\n<p class="hint">${e('merchants_movements_hint')}</p>\n${table}\n${pager}`;
}

function clearingTable(language: ConsoleLanguage, id: string, clearings: ClearingView[], held: boolean): string {
  const { e } = wordsOf(language);
  if (clearings.length === 0) return `<p>${e('merchants_schedule_none')}</p>`;
  const rows = clearings.map((clearing) => {
    const when = held ? `${escapeHtml(clearing.hold_reason ?? '')}` : escapeHtml(clearing.available_at ? formatTime(language, clearing.available_at) : '');
    return `<tr><td>${when}</td><td class="amount">${escapeHtml(formatSignedBaht(clearing.amount_minor))}</td><td>${escapeHtml(`${clearing.source.type} ${clearing.source.id}`)}</td>
<td>${escapeHtml(clearing.credit_balance_transaction_id)}</td><td>${escapeHtml(formatTime(language, clearing.created_at))}</td></tr>`;
  });
  return `<table id="${id}"><thead><tr><th scope="col">${e(held ? 'merchants_col_hold_reason' : 'merchants_col_clears_at')}</th><th scope="col">${e('merchants_col_amount')}</th>
<th scope="col">${e('merchants_col_source')}</th><th scope="col">${e('merchants_col_credit')}</th><th scope="col">${e('merchants_col_credited')}</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`;
}

function scheduleSection(language: ConsoleLanguage, page: WalletPage, self: string): string {
  const { e } = wordsOf(language);
  const list = (cursorName: 'pending_after' | 'held_after', next: string | null) => {
    const { [cursorName]: current, ...rest } = page.query;
    return pagerHtml(language, 'merchants_schedule_heading', current ? href(self, rest, language) : null, next ? href(self, { ...rest, [cursorName]: next }, language) : null);
  };
  return `<h2>${e('merchants_schedule_heading')}</h2>
<h3>${e('merchants_schedule_pending')}</h3>
${clearingTable(language, 'clearing-pending', page.pending, false)}
${list('pending_after', page.pending_next)}
<h3>${e('merchants_schedule_held')}</h3>
${clearingTable(language, 'clearing-held', page.held, true)}
${list('held_after', page.held_next)}`;
}

export function renderWallet(frame: Frame, page: WalletPage): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const self = `${merchantPath(page.merchant.id)}/wallet`;
  const mode = modeText(language, page.livemode);
  const other = page.livemode ? 'test' : 'live';
  const main = `<p><a href="${href(merchantPath(page.merchant.id), {}, language)}">${e('merchants_back_to_merchant', { name: page.merchant.name })}</a>
· <a href="${href(self, { mode: other }, language)}">${e(other === 'live' ? 'merchants_wallet_live' : 'merchants_wallet_test')}</a></p>
<h1>${e('merchants_wallet_heading', { name: page.merchant.name, mode })}</h1>
${bucketsSection(language, page)}
${scheduleSection(language, page, self)}
${movementsSection(language, page, self)}`;
  return renderPage({ ...frame, title: fill(t.merchants_wallet_heading, { name: page.merchant.name, mode }) }, main);
}

export interface KeysPage {
  merchant: MerchantView;
  session: ConsoleSession;
  keys: ApiKeyView[];
  cursor: string | null;
  next_cursor: string | null;
  notice: PageNotice | null;
}

function keyActions(language: ConsoleLanguage, session: ConsoleSession, key: ApiKeyView): string {
  const { e } = wordsOf(language);
  if (key.status === 'revoked') return '';
  const form = (action: 'suspend' | 'resume' | 'revoke', text: ConsoleTextKey, style: string) =>
    `<form method="post" action="${href(`${CONSOLE_PATH}/api-keys/${key.id}/${action}`, {}, language)}" class="inline">
<input type="hidden" name="csrf_token" value="${escapeHtml(session.csrf_token)}"><button type="submit" class="${style}" id="${escapeHtml(`${action}-${key.id}`)}">${e(text)}</button></form>`;
  const toggle = key.status === 'active' ? form('suspend', 'merchants_key_suspend', 'secondary') : form('resume', 'merchants_key_resume', 'secondary');
  return `${toggle}${form('revoke', 'merchants_key_revoke', 'danger')}`;
}

function createKeyForm(language: ConsoleLanguage, session: ConsoleSession, merchant: MerchantView): string {
  const { e } = wordsOf(language);
  const scopes = API_KEY_SCOPES.map(
    (scope, index) => `<label class="choice" for="scope-${index}"><input type="checkbox" id="scope-${index}" name="scopes" value="${escapeHtml(scope)}" checked> ${escapeHtml(scope)}</label>`,
  ).join('\n');
  const mode = (value: 'test' | 'live', checked: boolean) =>
    `<label class="choice" for="mode-${value}"><input type="radio" id="mode-${value}" name="mode" value="${value}"${checked ? ' checked' : ''}> ${escapeHtml(modeText(language, value === 'live'))}</label>`;
  return `<form method="post" action="${href(`${merchantPath(merchant.id)}/api-keys`, {}, language)}" id="create-key-form" class="card">
<h2>${e('merchants_key_create_heading')}</h2>
<input type="hidden" name="csrf_token" value="${escapeHtml(session.csrf_token)}">
<fieldset><legend>${e('merchants_key_create_mode')}</legend>${mode('test', true)}${mode('live', false)}</fieldset>
<fieldset><legend>${e('merchants_key_create_scopes')}</legend>${scopes}</fieldset>
<button type="submit" id="create-key-button">${e('merchants_key_create_button')}</button>
</form>`;
}

export function renderKeys(frame: Frame, page: KeysPage): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const { merchant } = page;
  const self = `${merchantPath(merchant.id)}/api-keys`;
  const heads = ['merchants_col_key', 'merchants_col_mode', 'merchants_col_last4', 'merchants_col_scopes', 'merchants_col_status', 'merchants_col_created', 'merchants_col_actions'] as const;
  const rows = page.keys.map(
    (key) => `<tr id="${escapeHtml(key.id)}" data-status="${escapeHtml(key.status)}"><td>${escapeHtml(key.id)}</td><td>${escapeHtml(modeText(language, key.livemode))}</td><td>…${escapeHtml(key.key_last4)}</td>
<td>${escapeHtml(key.scopes.join(', '))}</td><td>${escapeHtml(statusText(language, key.status))}</td><td>${escapeHtml(formatTime(language, key.created_at))}</td><td>${keyActions(language, page.session, key)}</td></tr>`,
  );
  const table =
    rows.length === 0
      ? `<p>${e('merchants_keys_none')}</p>`
      : `<table id="keys"><caption class="visually-hidden">${e('merchants_keys_link')}</caption>
<thead><tr>${heads.map((key) => `<th scope="col">${e(key)}</th>`).join('')}</tr></thead>
<tbody>${rows.join('\n')}</tbody></table>`;
  const pager = pagerHtml(language, 'merchants_keys_link', page.cursor ? href(self, {}, language) : null, page.next_cursor ? href(self, { cursor: page.next_cursor }, language) : null);
  const main = `<p><a href="${href(merchantPath(merchant.id), {}, language)}">${e('merchants_back_to_merchant', { name: merchant.name })}</a></p>
<h1>${e('merchants_keys_heading', { name: merchant.name })}</h1>
${noticeHtml(page.notice)}
<p class="hint">${e('merchants_key_revoke_hint')}</p>
${table}
${pager}
${createKeyForm(language, page.session, merchant)}`;
  return renderPage({ ...frame, title: fill(t.merchants_keys_heading, { name: merchant.name }) }, main);
}

/** The one page that shows a new key's secrets; it is answered to the creating POST itself, never redirected to. */
export function renderCreatedKey(frame: Frame, merchant: MerchantView, created: ApiKeyView & { api_key: string; signing_secret: string }): string {
  const { t, e } = wordsOf(frame.language);
  const language = frame.language;
  const main = `<p><a href="${href(`${merchantPath(merchant.id)}/api-keys`, {}, language)}">${e('merchants_keys_heading', { name: merchant.name })}</a></p>
<h1>${e('merchants_key_created_heading', { id: created.id })}</h1>
<p class="notice" role="status">${e('merchants_key_created_once')}</p>
<dl class="facts card" id="created-key">
<dt>${e('merchants_key_secret')}</dt><dd><code id="api-key">${escapeHtml(created.api_key)}</code></dd>
<dt>${e('merchants_key_signing_secret')}</dt><dd><code id="signing-secret">${escapeHtml(created.signing_secret)}</code></dd>
<dt>${e('merchants_col_mode')}</dt><dd>${escapeHtml(modeText(language, created.livemode))}</dd>
<dt>${e('merchants_col_scopes')}</dt><dd>${escapeHtml(created.scopes.join(', '))}</dd>
</dl>`;
  return renderPage({ ...frame, title: fill(t.merchants_key_created_heading, { id: created.id }) }, main);
}
