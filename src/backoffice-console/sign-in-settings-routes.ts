import type { FastifyInstance, FastifyReply } from 'fastify';
import { ApiError } from '../platform/errors.ts';
import { decodeCursor, encodeCursor } from '../http/paging.ts';
import { parseOrThrow } from '../http/validation.ts';
import { providerBodySchema, staffBodySchema, staffCursorSchema, staffRemoveBodySchema } from './oidc-api-routes.ts';
import type { ConsoleSession } from './sessions.ts';
import { requireRole, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { errorNotice } from './desk-kit.ts';
import type { CaseNotice } from './review-pages.ts';
import { renderSignInSettings, SIGN_IN_SETTINGS_PATH, type SignInSettingsDraft, type SignInSettingsPage } from './sign-in-settings-pages.ts';
import { consoleTexts } from './texts.ts';

/**
 * The sign-in settings page: the brand's OpenID Connect provider and its staff list, kept by the brand's operator
 * (its administrator) and the platform administrator, as through /v1/bo/brands/{brand_id}/console-oidc…; a
 * reviewer gets the 403 page. Every form calls the ConsoleOidcSettings method its API route calls, with the
 * session's credential as the actor and the session's brand, after the API route's own body schema; a refused
 * form is shown again with the refusal and nothing changed, and a done one answers 303 to the page, so that a
 * reload does not repeat it.
 */

const SIGN_IN_SETTINGS_ROLES: ReadonlyArray<ConsoleSession['role']> = ['operator', 'platform_admin'];
const STAFF_PAGE_SIZE = 25;
const DONE = ['provider_set', 'provider_removed', 'staff_saved', 'staff_removed'] as const;
type Done = (typeof DONE)[number];

/** The position a cursor resumes after; a damaged cursor, or another brand's, starts the list from the top. */
function cursorPosition(text: unknown, white_label_id: string): string | null {
  if (typeof text !== 'string' || text === '' || text.length > 1000) return null;
  try {
    const decoded = decodeCursor(staffCursorSchema, text);
    return decoded.white_label_id === white_label_id ? decoded.after : null;
  } catch (error) {
    if (error instanceof ApiError) return null;
    throw error;
  }
}

async function settingsPage(kit: PageKit, session: ConsoleSession, cursor: unknown, notice: CaseNotice | null, draft: SignInSettingsDraft): Promise<SignInSettingsPage> {
  const settings = kit.deps.oidcSettings;
  const brand = session.white_label_id;
  const after = cursorPosition(cursor, brand);
  const provider = await settings.viewProvider(brand);
  const list = await settings.listStaff(brand, after, STAFF_PAGE_SIZE);
  const names = await kit.deps.tenancy.staffNames(kit.deps.database, brand, list.data.map((entry) => entry.staff_id));
  const next_cursor = list.has_more && list.last_subject !== null ? encodeCursor({ v: 1, white_label_id: brand, after: list.last_subject }) : null;
  return {
    provider,
    staff: list.data.map((entry) => ({ entry, name: names.get(entry.staff_id) ?? null })),
    cursor: after === null ? null : (cursor as string),
    next_cursor,
    csrf_token: session.csrf_token,
    notice,
    draft,
  };
}

/** A form's fields as the API route's body: an empty optional field is left out, as a JSON body would. */
function bodyOf(form: URLSearchParams, names: readonly string[], optional: readonly string[]): Record<string, string> {
  const body: Record<string, string> = {};
  for (const name of names) {
    const value = form.get(name) ?? '';
    if (value === '' && optional.includes(name)) continue;
    body[name] = value;
  }
  return body;
}

type Action = (session: ConsoleSession, form: URLSearchParams, actor: ReturnType<PageKit['deps']['sessions']['actorOf']>) => Promise<Done>;

/**
 * One form of the page: session and CSRF token first, then the role, then the action; a refusal (a validation
 * error, or the service's own) shows the page again with it and what was typed, a success moves on with 303.
 */
async function act(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, action: Action, draftOf: (form: URLSearchParams) => SignInSettingsDraft): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, SIGN_IN_SETTINGS_ROLES, language, 'sign_in_settings_forbidden');
  let refusal: ApiError;
  try {
    const done = await action(session, form, kit.deps.sessions.actorOf(session.credential_id, request.id));
    const query = new URLSearchParams({ done, ...(language === 'en' ? { lang: 'en' } : {}) });
    return reply.code(303).header('Location', `${SIGN_IN_SETTINGS_PATH}?${query.toString()}`).send();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refusal = error;
  }
  const page = await settingsPage(kit, session, null, errorNotice(language, refusal), draftOf(form));
  return kit.sendHtml(reply, refusal.status, renderSignInSettings(kit.frameOf(request, session), page));
}

const providerDraft = (form: URLSearchParams): SignInSettingsDraft => ({ provider: { issuer: form.get('issuer') ?? '', client_id: form.get('client_id') ?? '' } });
const staffDraft = (form: URLSearchParams): SignInSettingsDraft => ({
  staff: { subject: form.get('subject') ?? '', name: form.get('name') ?? '', staff_id: form.get('staff_id') ?? '', role: form.get('role') ?? 'reviewer' },
});

export function registerSignInSettingsPages(scope: FastifyInstance, kit: PageKit): void {
  const settings = kit.deps.oidcSettings;
  scope.get('/sign-in-settings', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    const language = kit.languageOf(request);
    requireRole(session, SIGN_IN_SETTINGS_ROLES, language, 'sign_in_settings_forbidden');
    const done = DONE.find((value) => value === request.query?.done);
    const notice: CaseNotice | null = done ? { tone: 'success', text: consoleTexts(language)[`sign_in_settings_done_${done}`] } : null;
    return kit.sendHtml(reply, 200, renderSignInSettings(kit.frameOf(request, session), await settingsPage(kit, session, request.query?.cursor, notice, {})));
  }));

  scope.post('/sign-in-settings/provider', kit.page((request, reply) => act(kit, request, reply, async (session, form, actor) => {
    await settings.setProvider(actor, session.white_label_id, parseOrThrow(providerBodySchema, bodyOf(form, ['issuer', 'client_id', 'client_secret'], [])));
    return 'provider_set';
  }, providerDraft)));

  scope.post('/sign-in-settings/provider/remove', kit.page((request, reply) => act(kit, request, reply, async (session, _form, actor) => {
    await settings.removeProvider(actor, session.white_label_id);
    return 'provider_removed';
  }, () => ({}))));

  scope.post('/sign-in-settings/staff', kit.page((request, reply) => act(kit, request, reply, async (session, form, actor) => {
    await settings.setStaff(actor, session.white_label_id, parseOrThrow(staffBodySchema, bodyOf(form, ['subject', 'role', 'name', 'staff_id'], ['name', 'staff_id'])));
    return 'staff_saved';
  }, staffDraft)));

  scope.post('/sign-in-settings/staff/remove', kit.page((request, reply) => act(kit, request, reply, async (session, form, actor) => {
    await settings.removeStaff(actor, session.white_label_id, parseOrThrow(staffRemoveBodySchema, bodyOf(form, ['subject'], [])).subject);
    return 'staff_removed';
  }, () => ({}))));
}
