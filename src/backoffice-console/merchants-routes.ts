import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ApiError, renderError } from '../platform/errors.ts';
import { API_KEY_SCOPES, type ApiKeyScope } from '../platform/access.ts';
import { formatNullableTimestamp } from '../platform/time.ts';
import { decodeCursor, encodeCursor } from '../http/paging.ts';
import type { MerchantView } from '../tenancy/service.ts';
import type { ClearingView } from '../ledger/service.ts';
import { isWebhookId } from '../webhooks/types.ts';
import type { ConsoleSession } from './sessions.ts';
import { requireRole, PageRefusal, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { merchantPath, renderCreatedKey, renderKeys, renderMerchant, renderMerchantList, renderWallet, type PageNotice, type WalletPage } from './merchants-pages.ts';
import { consoleTexts, fill, type ConsoleLanguage } from './texts.ts';

/**
 * The merchants area of the console: the brand's merchants, one merchant with its webhook endpoints, its wallet
 * (the three buckets, the balance transactions with the balances after each, the clearing schedule) and its API
 * keys (create, suspend, resume, revoke). Every page and action calls the service method behind the matching
 * `/v1/bo/*` route (`GET /v1/bo/merchants`, `GET /v1/bo/merchants/{id}`, `GET /v1/bo/wallet`,
 * `POST /v1/bo/merchants/{id}/api-keys`, `POST /v1/bo/api-keys/{id}/{suspend|resume|revoke}`) with the session's
 * credential as the actor and its brand as the scope, and the same roles. The webhook pages are in
 * merchant-webhooks-routes.ts (registered beside these in routes.ts).
 */

const PAGE_SIZE = 25;
export const MERCHANT_ID_PATTERN = /^mch_[0-9A-Za-z]{1,64}$/;
const API_KEY_ID_PATTERN = /^key_[0-9A-Za-z]{1,64}$/;
/** The roles of `GET /v1/bo/merchants` and of the key routes. */
const MANAGERS = ['platform_admin', 'operator'] as const;
const KEY_ACTIONS = { suspend: 'suspended', resume: 'active', revoke: 'revoked' } as const;

const clearingCursorSchema = z.object({ v: z.literal(1), at: z.string().min(1).max(40), id: z.string().min(1).max(100) }).strict();

export function notFound(language: ConsoleLanguage): PageRefusal {
  return new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
}

/** A service's `resource_not_found` is the 404 page: another brand's ids are not found, exactly like unknown ones. */
export async function orNotFound<Value>(language: ConsoleLanguage, work: () => Promise<Value>): Promise<Value> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ApiError && error.code === 'resource_not_found') throw notFound(language);
    throw error;
  }
}

/** A refused request in words: its fields for a validation error, the error's own message otherwise. */
export function refusalText(language: ConsoleLanguage, error: ApiError): string {
  const t = consoleTexts(language);
  const fields = (error.details.fields as { path?: string; reason?: string; hint?: string }[] | undefined) ?? [];
  if (error.code === 'validation_error' && fields.length > 0) {
    return fill(t.merchants_error_validation, { fields: fields.map((field) => [field.path, field.reason, field.hint].filter(Boolean).join(': ')).join('; ') });
  }
  if (error.code === 'webhook_endpoint_disabled') return t.merchants_error_endpoint_disabled;
  if (error.code === 'api_key_already_revoked') return t.merchants_error_key_revoked;
  const body = renderError(error, '').error;
  return language === 'th' ? body.message_th : body.message;
}

/** The merchant the path names, in the session's brand, or the 404 page. */
export async function merchantOf(kit: PageKit, session: ConsoleSession, request: ConsoleRequest): Promise<MerchantView> {
  const language = kit.languageOf(request);
  const merchant_id = request.params.merchant_id ?? '';
  if (!MERCHANT_ID_PATTERN.test(merchant_id)) throw notFound(language);
  const merchant = await kit.deps.tenancy.getMerchant(merchant_id, session.white_label_id);
  if (!merchant) throw notFound(language);
  return merchant;
}

function queryText(request: ConsoleRequest, name: string, pattern: RegExp): string | null {
  const value = request.query?.[name];
  return typeof value === 'string' && pattern.test(value) ? value : null;
}

function clearingCursorOf(text: string | null): { at: Date; credit_balance_transaction_id: string } | null {
  if (text === null) return null;
  try {
    const decoded = decodeCursor(clearingCursorSchema, text);
    const at = new Date(decoded.at);
    return Number.isNaN(at.getTime()) ? null : { at, credit_balance_transaction_id: decoded.id };
  } catch (error) {
    // A damaged cursor starts the list again from the top instead of failing the page.
    if (error instanceof ApiError) return null;
    throw error;
  }
}

function nextClearingCursor(page: { data: ClearingView[]; has_more: boolean }, held: boolean): string | null {
  const last = page.data.at(-1);
  if (!page.has_more || !last) return null;
  return encodeCursor({ v: 1, at: held ? last.created_at : (last.available_at ?? last.created_at), id: last.credit_balance_transaction_id });
}

/** The wallet page's reads: those of `GET /v1/bo/wallet` (balance, check, next clearing), then its three lists. */
async function walletPage(kit: PageKit, request: ConsoleRequest, merchant: MerchantView): Promise<WalletPage> {
  const { ledger, database } = kit.deps;
  const mode = request.query?.mode === 'test' ? 'test' : 'live';
  const account = { white_label_id: merchant.white_label_id, merchant_id: merchant.id, livemode: mode === 'live' };
  const before = queryText(request, 'before', /^[1-9][0-9]{0,15}$/);
  const pendingAfter = queryText(request, 'pending_after', /^[A-Za-z0-9_-]{1,400}$/);
  const heldAfter = queryText(request, 'held_after', /^[A-Za-z0-9_-]{1,400}$/);
  const balance = await ledger.balance(database, account);
  const check = await ledger.verify(database, account);
  const nextClearing = await ledger.nextClearingAt(database, account);
  const movements = await ledger.balanceTransactionsPage(database, account, before === null ? null : Number(before), PAGE_SIZE);
  const pending = await ledger.clearingSchedulePage(database, account, 'pending', clearingCursorOf(pendingAfter), PAGE_SIZE);
  const held = await ledger.clearingSchedulePage(database, account, 'held', clearingCursorOf(heldAfter), PAGE_SIZE);
  const query: Record<string, string> = { mode };
  if (before !== null) query.before = before;
  if (pendingAfter !== null) query.pending_after = pendingAfter;
  if (heldAfter !== null) query.held_after = heldAfter;
  const lastMovement = movements.data.at(-1);
  return {
    merchant,
    livemode: account.livemode,
    balance,
    check: { consistent: check.consistent, movements: check.movements },
    next_clearing_at: formatNullableTimestamp(nextClearing),
    movements: movements.data,
    query,
    movements_next: movements.has_more && lastMovement ? String(lastMovement.sequence) : null,
    pending: pending.data,
    pending_next: nextClearingCursor(pending, false),
    held: held.data,
    held_next: nextClearingCursor(held, true),
  };
}

async function sendKeys(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, session: ConsoleSession, merchant: MerchantView, status: number, notice: PageNotice | null): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const cursor = request.method === 'GET' ? queryText(request, 'cursor', API_KEY_ID_PATTERN) : null;
  const page = await orNotFound(language, () => kit.deps.tenancy.listApiKeysPage(merchant.id, session.white_label_id, cursor, PAGE_SIZE));
  const last = page.data.at(-1);
  const next_cursor = page.has_more && last ? last.id : null;
  return kit.sendHtml(reply, status, renderKeys(kit.frameOf(request, session), { merchant, session, keys: page.data, cursor, next_cursor, notice }));
}

/** The form of the key creation: a mode and at least one known scope, as `POST /v1/bo/merchants/{id}/api-keys` takes. */
function keyInputOf(form: URLSearchParams): { livemode: boolean; scopes: ApiKeyScope[] } {
  const mode = form.get('mode');
  if (mode !== 'test' && mode !== 'live') throw new ApiError('validation_error', { details: { fields: [{ path: 'mode', reason: 'invalid_value' }] } });
  const chosen = form.getAll('scopes');
  const scopes = API_KEY_SCOPES.filter((scope) => chosen.includes(scope));
  if (scopes.length === 0 || scopes.length !== new Set(chosen).size) throw new ApiError('validation_error', { details: { fields: [{ path: 'scopes', reason: 'invalid_value' }] } });
  return { livemode: mode === 'live', scopes };
}

async function createKey(kit: PageKit, request: ConsoleRequest, reply: FastifyReply): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, MANAGERS, language, 'merchants_forbidden_keys');
  const merchant = await merchantOf(kit, session, request);
  let input: { livemode: boolean; scopes: ApiKeyScope[] };
  try {
    input = keyInputOf(form);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return sendKeys(kit, request, reply, session, merchant, error.status, { tone: 'error', text: refusalText(language, error) });
  }
  const actor = kit.deps.sessions.actorOf(session.credential_id, request.id);
  const created = await orNotFound(language, () => kit.deps.tenancy.createApiKey(actor, { merchant_id: merchant.id, scope_white_label_id: session.white_label_id, ...input }));
  // The secrets are in this answer only (no redirect to a page that could show them again); every console answer is no-store.
  return kit.sendHtml(reply, 201, renderCreatedKey(kit.frameOf(request, session), merchant, created));
}

async function changeKey(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, action: keyof typeof KEY_ACTIONS): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, MANAGERS, language, 'merchants_forbidden_keys');
  const api_key_id = request.params.api_key_id ?? '';
  if (!API_KEY_ID_PATTERN.test(api_key_id)) throw notFound(language);
  const actor = kit.deps.sessions.actorOf(session.credential_id, request.id);
  try {
    const key = await orNotFound(language, () => kit.deps.tenancy.setApiKeyStatus(actor, api_key_id, session.white_label_id, KEY_ACTIONS[action]));
    const query = new URLSearchParams({ done: key.status, key: key.id, ...(language === 'en' ? { lang: 'en' } : {}) });
    return reply.code(303).header('Location', `${merchantPath(key.merchant_id)}/api-keys?${query.toString()}`).send();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    throw new PageRefusal(error.status, 'csrf_failed_heading', refusalText(language, error));
  }
}

function keyNotice(language: ConsoleLanguage, request: ConsoleRequest): PageNotice | null {
  const done = request.query?.done;
  const key = queryText(request, 'key', API_KEY_ID_PATTERN);
  if ((done !== 'suspended' && done !== 'active' && done !== 'revoked') || key === null) return null;
  const t = consoleTexts(language);
  return { tone: 'success', text: fill(t[`merchants_key_done_${done}`], { id: key }) };
}

export function registerMerchantsPages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/merchants', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, MANAGERS, kit.languageOf(request), 'merchants_forbidden_list');
    const cursor = queryText(request, 'cursor', MERCHANT_ID_PATTERN);
    const page = await kit.deps.tenancy.listMerchantsPage(session.white_label_id, cursor, PAGE_SIZE);
    const last = page.data.at(-1);
    const next_cursor = page.has_more && last ? last.id : null;
    return kit.sendHtml(reply, 200, renderMerchantList(kit.frameOf(request, session), { merchants: page.data, cursor, next_cursor }));
  }));

  scope.get('/merchants/:merchant_id', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    const merchant = await merchantOf(kit, session, request);
    const after = request.query?.endpoints_after;
    const endpoints_cursor = typeof after === 'string' && isWebhookId(after, 'endpoint') ? after : null;
    const page = await kit.deps.webhooks.listEndpoints({ white_label_id: merchant.white_label_id, merchant_id: merchant.id, livemode: null, starting_after: endpoints_cursor, limit: PAGE_SIZE });
    const endpoints_next = page.has_more ? (page.data.at(-1)?.id ?? null) : null;
    return kit.sendHtml(reply, 200, renderMerchant(kit.frameOf(request, session), { merchant, session, endpoints: page.data, endpoints_cursor, endpoints_next }));
  }));

  scope.get('/merchants/:merchant_id/wallet', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    const merchant = await merchantOf(kit, session, request);
    return kit.sendHtml(reply, 200, renderWallet(kit.frameOf(request, session), await walletPage(kit, request, merchant)));
  }));

  scope.get('/merchants/:merchant_id/api-keys', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, MANAGERS, kit.languageOf(request), 'merchants_forbidden_keys');
    const merchant = await merchantOf(kit, session, request);
    return sendKeys(kit, request, reply, session, merchant, 200, keyNotice(kit.languageOf(request), request));
  }));

  scope.post('/merchants/:merchant_id/api-keys', kit.page((request, reply) => createKey(kit, request, reply)));
  for (const action of Object.keys(KEY_ACTIONS) as (keyof typeof KEY_ACTIONS)[]) {
    scope.post(`/api-keys/:api_key_id/${action}`, kit.page((request, reply) => changeKey(kit, request, reply, action)));
  }
}

