import type { OidcProviderView, OidcStaffEntryView } from './oidc-settings.ts';
import type { OidcStaffRole } from './oidc-repository.ts';
import { CONSOLE_PATH } from './sessions.ts';
import { escapeHtml, href, renderPage, roleName, wordsOf, type PageFrame } from './html.ts';
import { noticeHtml, option, pager } from './desk-kit.ts';
import { formatTime, type CaseNotice } from './review-pages.ts';
import type { ConsoleLanguage } from './texts.ts';

/**
 * The sign-in settings page's rendering: the brand's OpenID provider (never its client secret, which no view
 * holds), its forms, and a page of the staff list with a form per entry. Subjects, names and ids are stored text
 * and are escaped; the secret field is never filled back in, not even after a refused form.
 */

export const SIGN_IN_SETTINGS_PATH = `${CONSOLE_PATH}/sign-in-settings`;
export const STAFF_ROLES: readonly OidcStaffRole[] = ['reviewer', 'operator'];

export interface StaffListEntry {
  entry: OidcStaffEntryView;
  /** The person's name; null when the brand's people no longer name it. */
  name: string | null;
}

/** What a refused form typed, given back to it (the secret never is). */
export interface SignInSettingsDraft {
  provider?: { issuer: string; client_id: string };
  staff?: { subject: string; name: string; staff_id: string; role: string };
}

export interface SignInSettingsPage {
  provider: OidcProviderView;
  staff: StaffListEntry[];
  cursor: string | null;
  next_cursor: string | null;
  csrf_token: string;
  notice: CaseNotice | null;
  draft: SignInSettingsDraft;
}

function csrfField(page: SignInSettingsPage): string {
  return `<input type="hidden" name="csrf_token" value="${escapeHtml(page.csrf_token)}">`;
}

function textInput(id: string, name: string, label: string, value: string, options: { max: number; required?: boolean; hint?: string; type?: string; autocomplete?: string }): string {
  const hint = options.hint === undefined ? '' : `<p class="hint" id="${id}-hint">${escapeHtml(options.hint)}</p>`;
  const attributes = [
    `type="${options.type ?? 'text'}"`,
    `maxlength="${options.max}"`,
    `autocomplete="${options.autocomplete ?? 'off'}"`,
    options.required ? 'required' : '',
    options.hint === undefined ? '' : `aria-describedby="${id}-hint"`,
  ].filter(Boolean);
  return `<div><label for="${id}">${escapeHtml(label)}</label><input id="${id}" name="${name}" value="${escapeHtml(value)}" ${attributes.join(' ')}>${hint}</div>`;
}

function roleSelect(language: ConsoleLanguage, id: string, label: string, selected: string): string {
  const choices = STAFF_ROLES.map((role) => option(role, roleName(language, role), selected)).join('');
  return `<div><label for="${id}">${escapeHtml(label)}</label><select id="${id}" name="role">${choices}</select></div>`;
}

function providerSection(language: ConsoleLanguage, page: SignInSettingsPage): string {
  const { t, e } = wordsOf(language);
  const provider = page.provider;
  const fact = (label: string, value: string) => `<dt>${escapeHtml(label)}</dt><dd>${escapeHtml(value)}</dd>`;
  const facts = provider.configured
    ? `<dl class="facts" id="provider-facts">
${fact(t.sign_in_settings_issuer, provider.issuer ?? '')}
${fact(t.sign_in_settings_client_id, provider.client_id ?? '')}
${fact(t.sign_in_settings_secret_state, provider.client_secret_set ? t.sign_in_settings_secret_set : t.sign_in_settings_secret_not_set)}
${fact(t.sign_in_settings_redirect_uri, provider.redirect_uri)}
${fact(t.sign_in_settings_updated_at, provider.updated_at ? formatTime(language, provider.updated_at) : '')}
</dl>`
    : `<p class="message" id="provider-facts">${e('sign_in_settings_not_configured')}</p>
<dl class="facts">${fact(t.sign_in_settings_redirect_uri, provider.redirect_uri)}</dl>`;
  const draft = page.draft.provider ?? { issuer: provider.issuer ?? '', client_id: provider.client_id ?? '' };
  const remove = provider.configured
    ? `<form method="post" action="${href(`${SIGN_IN_SETTINGS_PATH}/provider/remove`, {}, language)}" class="card">
<h3>${e('sign_in_settings_remove_provider_heading')}</h3>
<p class="hint">${e('sign_in_settings_remove_provider_text')}</p>
${csrfField(page)}
<button type="submit" class="danger">${e('sign_in_settings_remove_provider_button')}</button>
</form>`
    : '';
  return `<section aria-labelledby="provider-heading">
<h2 id="provider-heading">${e('sign_in_settings_provider_heading')}</h2>
<div class="card">${facts}</div>
<form method="post" action="${href(`${SIGN_IN_SETTINGS_PATH}/provider`, {}, language)}" class="card" id="provider-form">
<h3>${e('sign_in_settings_set_heading')}</h3>
${csrfField(page)}
${textInput('provider-issuer', 'issuer', t.sign_in_settings_issuer, draft.issuer, { max: 500, required: true, hint: t.sign_in_settings_issuer_hint, type: 'url' })}
${textInput('provider-client-id', 'client_id', t.sign_in_settings_client_id, draft.client_id, { max: 255, required: true })}
${textInput('provider-client-secret', 'client_secret', t.sign_in_settings_client_secret, '', { max: 1000, required: true, hint: t.sign_in_settings_secret_hint, type: 'password', autocomplete: 'new-password' })}
<p><button type="submit">${e('sign_in_settings_set_button')}</button></p>
</form>
${remove}
</section>`;
}

function staffRow(language: ConsoleLanguage, page: SignInSettingsPage, item: StaffListEntry, index: number): string {
  const { e } = wordsOf(language);
  const { entry } = item;
  const other = entry.role === 'reviewer' ? 'operator' : 'reviewer';
  const person = `${escapeHtml(item.name ?? '')}<br><span class="hint">${escapeHtml(entry.staff_id)}</span>`;
  const subjectField = `<input type="hidden" name="subject" value="${escapeHtml(entry.subject)}">`;
  return `<tr>
<td class="wrap">${escapeHtml(entry.subject)}</td>
<td>${person}</td>
<td>${escapeHtml(roleName(language, entry.role))}</td>
<td>${escapeHtml(entry.credential_id)}</td>
<td>${escapeHtml(formatTime(language, entry.updated_at))}</td>
<td>
<form method="post" action="${href(`${SIGN_IN_SETTINGS_PATH}/staff`, {}, language)}">
${csrfField(page)}${subjectField}
<label for="role-${index}" class="visually-hidden">${e('sign_in_settings_new_role', { subject: entry.subject })}</label>
<select id="role-${index}" name="role">${STAFF_ROLES.map((role) => option(role, roleName(language, role), other)).join('')}</select>
<button type="submit" class="secondary">${e('sign_in_settings_change_role')}</button>
</form>
<form method="post" action="${href(`${SIGN_IN_SETTINGS_PATH}/staff/remove`, {}, language)}">
${csrfField(page)}${subjectField}
<button type="submit" class="danger">${e('sign_in_settings_remove_entry')}<span class="visually-hidden"> ${escapeHtml(entry.subject)}</span></button>
</form>
</td>
</tr>`;
}

function staffSection(language: ConsoleLanguage, page: SignInSettingsPage): string {
  const { t, e } = wordsOf(language);
  const table =
    page.staff.length === 0
      ? `<p class="message">${e('sign_in_settings_staff_none')}</p>`
      : `<div class="table-scroll" role="region" aria-label="${e('sign_in_settings_staff_heading')}" tabindex="0"><table id="staff-list">
<caption class="visually-hidden">${e('sign_in_settings_staff_heading')}</caption>
<thead><tr><th scope="col">${e('sign_in_settings_col_subject')}</th><th scope="col">${e('sign_in_settings_col_name')}</th><th scope="col">${e('sign_in_settings_col_role')}</th><th scope="col">${e('sign_in_settings_col_credential')}</th><th scope="col">${e('sign_in_settings_col_updated')}</th><th scope="col">${e('sign_in_settings_col_actions')}</th></tr></thead>
<tbody>
${page.staff.map((item, index) => staffRow(language, page, item, index)).join('\n')}
</tbody>
</table></div>`;
  const draft = page.draft.staff ?? { subject: '', name: '', staff_id: '', role: 'reviewer' };
  return `<section aria-labelledby="staff-heading">
<h2 id="staff-heading">${e('sign_in_settings_staff_heading')}</h2>
${table}
${pager(language, SIGN_IN_SETTINGS_PATH, {}, page, t.sign_in_settings_staff_heading)}
<form method="post" action="${href(`${SIGN_IN_SETTINGS_PATH}/staff`, {}, language)}" class="card" id="staff-form">
<h3>${e('sign_in_settings_add_heading')}</h3>
<p class="hint">${e('sign_in_settings_add_text')}</p>
${csrfField(page)}
${textInput('staff-subject', 'subject', t.sign_in_settings_subject, draft.subject, { max: 255, required: true })}
${textInput('staff-name', 'name', t.sign_in_settings_name, draft.name, { max: 200 })}
${textInput('staff-id', 'staff_id', t.sign_in_settings_staff_id, draft.staff_id, { max: 30 })}
${roleSelect(language, 'staff-role', t.sign_in_settings_role, draft.role)}
<p><button type="submit">${e('sign_in_settings_save_entry')}</button></p>
</form>
</section>`;
}

export function renderSignInSettings(frame: Omit<PageFrame, 'title'>, page: SignInSettingsPage): string {
  const { t, e } = wordsOf(frame.language);
  const main = `<h1>${e('sign_in_settings_heading')}</h1>
${noticeHtml(page.notice)}
<p>${e('sign_in_settings_intro')}</p>
${providerSection(frame.language, page)}
${staffSection(frame.language, page)}`;
  return renderPage({ ...frame, title: t.sign_in_settings_heading }, main);
}
