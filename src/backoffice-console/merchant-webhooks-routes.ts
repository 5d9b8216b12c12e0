import type { FastifyInstance, FastifyReply } from 'fastify';
import { ApiError } from '../platform/errors.ts';
import type { MerchantView } from '../tenancy/service.ts';
import type { EndpointView, ReplayInput } from '../webhooks/service.ts';
import { isWebhookId } from '../webhooks/types.ts';
import type { ConsoleSession } from './sessions.ts';
import { requireRole, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { merchantOf, notFound, orNotFound, refusalText } from './merchants-routes.ts';
import { endpointPath, renderDelivery, renderEndpoint, type DeliveryFilter, type EndpointPage } from './merchant-webhooks-pages.ts';
import type { PageNotice } from './merchants-pages.ts';
import { consoleTexts, fill, type ConsoleLanguage } from './texts.ts';

/**
 * A merchant's webhook endpoints in the console: one endpoint with its deliveries (filtered by status, with a
 * cursor) and the replay form; one delivery with its attempts and the resend form. They call the WebhookService
 * methods behind `GET /v1/bo/webhooks/{id}`, `…/deliveries`, `…/deliveries/{id}`, `…/deliveries/{id}/resend`
 * and `…/replay`, with the session's credential as the actor and its brand as the scope, and the same roles
 * (reading, resending and replaying are open to operators and reviewers alike). An endpoint of another merchant
 * under this merchant's address is not found, like another brand's.
 */

const PAGE_SIZE = 25;
/** The roles of the webhook routes that read, resend and replay. */
const READERS = ['platform_admin', 'operator', 'reviewer'] as const;
const EVENT_TYPE_PATTERN = /^[a-z0-9_]+(\.[a-z0-9_]+)+$/;
const LOCAL_TIME_PATTERN = /^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2})(:[0-9]{2})?$/;
const EMPTY_REPLAY = { event_types: '', created_after: '', created_before: '', only_failed: true };

async function endpointOf(kit: PageKit, session: ConsoleSession, request: ConsoleRequest, merchant: MerchantView): Promise<EndpointView> {
  const language = kit.languageOf(request);
  const endpoint_id = request.params.endpoint_id ?? '';
  if (!isWebhookId(endpoint_id, 'endpoint')) throw notFound(language);
  const endpoint = await orNotFound(language, () => kit.deps.webhooks.getEndpoint(session.white_label_id, endpoint_id));
  if (endpoint.merchant_id !== merchant.id) throw notFound(language);
  return endpoint;
}

function deliveryIdOf(language: ConsoleLanguage, request: ConsoleRequest): string {
  const delivery_id = request.params.delivery_id ?? '';
  if (!isWebhookId(delivery_id, 'delivery')) throw notFound(language);
  return delivery_id;
}

function statusOf(request: ConsoleRequest): DeliveryFilter {
  const status = request.query?.status;
  return status === 'pending' || status === 'succeeded' || status === 'failed' ? status : null;
}

function doneNotice(language: ConsoleLanguage, request: ConsoleRequest): PageNotice | null {
  const t = consoleTexts(language);
  const number = (name: string) => {
    const value = request.query?.[name];
    return typeof value === 'string' && /^[0-9]{1,6}$/.test(value) ? Number(value) : null;
  };
  const rearmed = number('rearmed');
  const created = number('created');
  if (request.query?.done === 'replayed' && rearmed !== null && created !== null) {
    const limit = request.query?.limit === 'true' ? ` ${t.merchants_replay_limit}` : '';
    return { tone: 'success', text: `${fill(t.merchants_replay_done, { rearmed, created })}${limit}` };
  }
  const round = number('round');
  if (request.query?.done === 'resent' && round !== null) return { tone: 'success', text: fill(t.merchants_resend_done, { round }) };
  return null;
}

async function sendEndpoint(
  kit: PageKit,
  request: ConsoleRequest,
  reply: FastifyReply,
  page: Pick<EndpointPage, 'merchant' | 'session' | 'endpoint' | 'notice' | 'replay'>,
  status: number,
): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const filter = request.method === 'GET' ? statusOf(request) : null;
  const after = request.method === 'GET' ? request.query?.cursor : undefined;
  const cursor = typeof after === 'string' && isWebhookId(after, 'delivery') ? after : null;
  const deliveries = await orNotFound(language, () =>
    kit.deps.webhooks.listDeliveries(page.session.white_label_id, page.endpoint.id, { status: filter, event_id: null, starting_after: cursor, limit: PAGE_SIZE }),
  );
  const next_cursor = deliveries.has_more ? (deliveries.data.at(-1)?.id ?? null) : null;
  const html = renderEndpoint(kit.frameOf(request, page.session), { ...page, deliveries: deliveries.data, status: filter, cursor, next_cursor });
  return kit.sendHtml(reply, status, html);
}

/** A `datetime-local` value, read as Bangkok time (the console shows every time in Bangkok time). */
function localTime(path: string, text: string): Date | undefined {
  if (text.trim() === '') return undefined;
  const match = LOCAL_TIME_PATTERN.exec(text.trim());
  const instant = match ? new Date(`${match[1]}${match[2] ?? ':00'}+07:00`) : null;
  if (!instant || Number.isNaN(instant.getTime())) throw new ApiError('validation_error', { details: { fields: [{ path, reason: 'invalid_timestamp' }] } });
  return instant;
}

/** The replay form as `POST /v1/bo/webhooks/{id}/replay` takes it: the same selectors and the same checks of event type names. */
export function replayInputOf(form: URLSearchParams): ReplayInput {
  const types = (form.get('event_types') ?? '').split(/[\s,]+/).filter((type) => type !== '');
  if (types.length > 100 || types.some((type) => type.length > 100 || !EVENT_TYPE_PATTERN.test(type))) {
    throw new ApiError('validation_error', { details: { fields: [{ path: 'event_types', reason: 'invalid_event_type', hint: 'such as deposit.settled' }] } });
  }
  return {
    event_types: types.length === 0 ? null : types,
    created_after: localTime('created_after', form.get('created_after') ?? ''),
    created_before: localTime('created_before', form.get('created_before') ?? ''),
    only_failed: form.get('only_failed') === 'true',
  };
}

async function replay(kit: PageKit, request: ConsoleRequest, reply: FastifyReply): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, READERS, language, 'merchants_forbidden_webhooks');
  const merchant = await merchantOf(kit, session, request);
  const endpoint = await endpointOf(kit, session, request, merchant);
  const sent = { event_types: form.get('event_types') ?? '', created_after: form.get('created_after') ?? '', created_before: form.get('created_before') ?? '', only_failed: form.get('only_failed') === 'true' };
  try {
    const actor = kit.deps.sessions.actorOf(session.credential_id, request.id);
    const result = await orNotFound(language, () => kit.deps.webhooks.replay(actor, session.white_label_id, endpoint.id, replayInputOf(form)));
    const query = new URLSearchParams({ done: 'replayed', rearmed: String(result.rearmed), created: String(result.created), limit: String(result.limit_reached), ...(language === 'en' ? { lang: 'en' } : {}) });
    return reply.code(303).header('Location', `${endpointPath(merchant.id, endpoint.id)}?${query.toString()}`).send();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return sendEndpoint(kit, request, reply, { merchant, session, endpoint, notice: { tone: 'error', text: refusalText(language, error) }, replay: sent }, error.status);
  }
}

async function sendDelivery(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, session: ConsoleSession, status: number, notice: PageNotice | null): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const merchant = await merchantOf(kit, session, request);
  const endpoint = await endpointOf(kit, session, request, merchant);
  const delivery_id = deliveryIdOf(language, request);
  const delivery = await orNotFound(language, () => kit.deps.webhooks.getDelivery(session.white_label_id, endpoint.id, delivery_id));
  return kit.sendHtml(reply, status, renderDelivery(kit.frameOf(request, session), { merchant, session, endpoint, delivery, notice }));
}

async function resend(kit: PageKit, request: ConsoleRequest, reply: FastifyReply): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, READERS, language, 'merchants_forbidden_webhooks');
  const merchant = await merchantOf(kit, session, request);
  const endpoint = await endpointOf(kit, session, request, merchant);
  const delivery_id = deliveryIdOf(language, request);
  try {
    const actor = kit.deps.sessions.actorOf(session.credential_id, request.id);
    const delivery = await orNotFound(language, () => kit.deps.webhooks.resendDelivery(actor, session.white_label_id, endpoint.id, delivery_id));
    const query = new URLSearchParams({ done: 'resent', round: String(delivery.round), ...(language === 'en' ? { lang: 'en' } : {}) });
    return reply.code(303).header('Location', `${endpointPath(merchant.id, endpoint.id)}/deliveries/${delivery_id}?${query.toString()}`).send();
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return sendDelivery(kit, request, reply, session, error.status, { tone: 'error', text: refusalText(language, error) });
  }
}

export function registerMerchantWebhookPages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/merchants/:merchant_id/webhooks/:endpoint_id', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    const merchant = await merchantOf(kit, session, request);
    const endpoint = await endpointOf(kit, session, request, merchant);
    return sendEndpoint(kit, request, reply, { merchant, session, endpoint, notice: doneNotice(kit.languageOf(request), request), replay: EMPTY_REPLAY }, 200);
  }));

  scope.get('/merchants/:merchant_id/webhooks/:endpoint_id/deliveries/:delivery_id', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    return sendDelivery(kit, request, reply, session, 200, doneNotice(kit.languageOf(request), request));
  }));

  scope.post('/merchants/:merchant_id/webhooks/:endpoint_id/deliveries/:delivery_id/resend', kit.page((request, reply) => resend(kit, request, reply)));
  scope.post('/merchants/:merchant_id/webhooks/:endpoint_id/replay', kit.page((request, reply) => replay(kit, request, reply)));
}
