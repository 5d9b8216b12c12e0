import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { requestBodiesOf } from '../http/server.ts';
import type { RouteModule } from '../http/context.ts';
import { requestHasBody, type BodyLimits } from '../http/body-reader.ts';
import type { Queryable } from '../platform/db.ts';
import type { Clock } from '../platform/clock.ts';
import type { HttpLimits } from '../platform/config.ts';
import type { TenancyService } from '../tenancy/service.ts';
import { decodeJson, isJsonMediaType } from '../http/json-body.ts';
import { parseOrThrow, unstorableTextPaths } from '../http/validation.ts';
import { applyRateHeaders, BUCKETS, isExceeded, rateLimitedError, windowStart, type BucketState } from '../http/rate-limit.ts';
import { actorOf } from '../http/backoffice-scope.ts';
import { checkoutOrigin, cookieValues, isCheckoutPath, SESSION_COOKIE, type CheckoutScope } from './links.ts';
import { checkoutAssets, renderCheckoutShell, renderMessagePage } from './page.ts';
import { checkoutLanguage, checkoutTexts } from './texts.ts';
import type { CheckoutService } from './service.ts';
import type { CheckoutAddresses } from './addresses.ts';
import { brandSchema } from '../tenancy/resources.ts';

/**
 * The hosted checkout's HTTP side (docs/drafts/checkout.md). Under /checkout, on the brand's checkout
 * origin (which points at this service):
 *
 * - GET  /checkout/{brand}/{deposit}/{secret}   `checkout_url`: exchanges the secret for the session cookie, 303 to the page
 * - GET  /checkout/{brand}/{deposit}            the page (a shell without order data)
 * - GET  /checkout/{brand}/{deposit}/status     the order as the page shows it (session)
 * - POST /checkout/{brand}/{deposit}/slip-upload     the order's slip upload capability, no-store (session)
 * - POST /checkout/{brand}/{deposit}/sandbox-transfer  the sandbox bank's transfer and slip (session, test mode)
 * - POST /checkout/{brand}/{deposit}/cancel     the payer cancels the unpaid order (session, Idempotency-Key)
 * - GET  /checkout/assets/{name}                the script, stylesheet and fonts, named by their hash
 *
 * Every answer carries the page's security headers. Routes are registered on the Fastify instance itself
 * (like the operations routes), not through the API registrar: they answer HTML, redirects and cookies,
 * and are not part of the merchant API. Their JSON errors are the API's, rendered by the server's error
 * handler. The request log names route templates only, so the secret segment never reaches a log.
 *
 * The back office sets a brand's checkout origin through the API registrar (checkoutAdminRoutes).
 */

const ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable';
const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

type CheckoutRequest = FastifyRequest<{ Params: Record<string, string>; Querystring: Record<string, unknown> }> & { rateState?: BucketState };

const simulateSchema = z.object({ leg_ref: z.string().min(1).max(100).optional() }).strict();
/** The page's only body (a simulated transfer's leg) is a few dozen bytes. */
const PAGE_BODY_MAX_BYTES = 16 * 1024;

/** Fastify's handler, with the checkout routes' parameters and query typed once. */
function checkoutHandler(handler: (request: CheckoutRequest, reply: FastifyReply) => Promise<FastifyReply>) {
  return (request: FastifyRequest, reply: FastifyReply) => handler(request as CheckoutRequest, reply);
}

function languageOf(request: CheckoutRequest): ReturnType<typeof checkoutLanguage> {
  return checkoutLanguage(request.query?.lang);
}

/**
 * A POST of the page must come from the page: the cookie is SameSite=Strict already, and a browser's
 * Fetch Metadata or Origin naming another site is refused as well (defence in depth against a browser
 * that does not honour SameSite).
 */
function refuseCrossSite(request: FastifyRequest): void {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') {
    throw new ApiError('scope_denied', { message: 'Checkout requests must come from the checkout page itself.', details: { reason: 'cross_site_request' } });
  }
  const origin = request.headers.origin;
  if (origin !== undefined && (!URL.canParse(origin) || new URL(origin).host !== request.headers.host)) {
    throw new ApiError('scope_denied', { message: 'Checkout requests must come from the checkout page itself.', details: { reason: 'cross_site_request' } });
  }
}

/** The Idempotency-Key of a page's POST that changes something (a simulated transfer, a cancel). */
function pageIdempotencyKey(request: FastifyRequest): string {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string' || key === '') throw new ApiError('idempotency_key_required');
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw new ApiError('validation_error', { details: { fields: [{ path: 'Idempotency-Key', reason: 'invalid_format', hint: '1 to 255 printable ASCII characters' }] } });
  }
  return key;
}

/** What the checkout pages call. */
export interface CheckoutPageDependencies {
  checkout: CheckoutService;
  tenancy: TenancyService;
  database: Queryable;
  clock: Clock;
  config: { http: HttpLimits };
}

export function registerCheckoutPages(app: FastifyInstance, services: CheckoutPageDependencies): void {
  const { checkout } = services;
  const assets = checkoutAssets();
  const pageBodyLimits: BodyLimits = { max_bytes: PAGE_BODY_MAX_BYTES, deadline_ms: services.config.http.body_deadline_ms };

  /** The order of the session cookie for this path, counted in its bucket; 404 (JSON) without one. */
  async function sessionOf(request: CheckoutRequest): Promise<CheckoutScope> {
    const { white_label_id = '', deposit_id = '' } = request.params;
    const scope = isCheckoutPath(white_label_id, deposit_id) ? checkout.openSession(white_label_id, deposit_id, cookieValues(request.headers.cookie, SESSION_COOKIE)) : null;
    if (!scope) throw new ApiError('resource_not_found');
    request.rateState = await checkout.countRequest(scope, request.ip);
    if (isExceeded(request.rateState)) throw rateLimitedError(request.rateState);
    return scope;
  }

  function sendJson(reply: FastifyReply, request: CheckoutRequest, status: number, body: string | unknown): FastifyReply {
    if (request.rateState) applyRateHeaders(reply, request.rateState);
    return reply
      .code(status)
      .header('content-type', 'application/json; charset=utf-8')
      .send(typeof body === 'string' ? body : JSON.stringify(body));
  }

  function sendHtml(reply: FastifyReply, status: number, html: string): FastifyReply {
    return reply.code(status).header('content-type', 'text/html; charset=utf-8').send(html);
  }

  void app.register(
    async (scope) => {
      // The page's security headers on every answer of this prefix: errors, redirects and 404s included.
      scope.addHook('onSend', async (request, reply, payload) => {
        reply.header('Content-Security-Policy', checkout.contentSecurityPolicy());
        reply.header('X-Frame-Options', 'DENY');
        reply.header('Referrer-Policy', 'no-referrer');
        reply.header('X-Content-Type-Options', 'nosniff');
        reply.header('Cross-Origin-Opener-Policy', 'same-origin');
        reply.header('Cross-Origin-Resource-Policy', 'same-origin');
        reply.header('Permissions-Policy', 'geolocation=(), microphone=(), payment=(), usb=()');
        const cacheable = reply.statusCode === 200 && request.routeOptions.url === '/checkout/assets/:name';
        reply.header('Cache-Control', cacheable ? ASSET_CACHE_CONTROL : 'no-store');
        return payload;
      });

      scope.setNotFoundHandler(async (request, reply) => {
        if (request.method !== 'GET' && request.method !== 'HEAD') throw new ApiError('resource_not_found');
        return sendHtml(reply, 404, renderMessagePage(languageOf(request as CheckoutRequest), assets, checkoutTexts(languageOf(request as CheckoutRequest)).link_invalid));
      });

      scope.get<{ Params: { name: string } }>('/assets/:name', async (request, reply) => {
        const asset = assets.byName.get(request.params.name);
        if (!asset) throw new ApiError('resource_not_found');
        return reply.code(200).header('content-type', asset.content_type).send(asset.bytes);
      });

      // The page itself: the same shell for every order, served without the session (see page.ts).
      scope.get('/:white_label_id/:deposit_id', checkoutHandler(async (request, reply) => {
        const language = languageOf(request);
        const { white_label_id = '', deposit_id = '' } = request.params;
        if (!isCheckoutPath(white_label_id, deposit_id)) return sendHtml(reply, 404, renderMessagePage(language, assets, checkoutTexts(language).link_invalid));
        return sendHtml(reply, 200, renderCheckoutShell(language, assets));
      }));

      scope.get('/:white_label_id/:deposit_id/status', checkoutHandler(async (request, reply) => {
        const session = await sessionOf(request);
        const state = await checkout.state(services.database, session);
        if (!state) throw new ApiError('resource_not_found');
        return sendJson(reply, request, 200, state);
      }));

      scope.post('/:white_label_id/:deposit_id/slip-upload', checkoutHandler(async (request, reply) => {
        refuseCrossSite(request);
        const session = await sessionOf(request);
        if (requestHasBody(request)) {
          throw new ApiError('validation_error', { details: { fields: [{ path: '$', reason: 'body_not_allowed' }] } });
        }
        const issued = await checkout.capability(services.database, session);
        if (!issued) throw new ApiError('resource_not_found');
        if (!issued.ok) throw issued.error;
        // The capability is a bearer secret: kept by no cache, shown in no URL, and read by the page's script only.
        return sendJson(reply, request, 200, issued.value);
      }));

      scope.post('/:white_label_id/:deposit_id/sandbox-transfer', checkoutHandler(async (request, reply) => {
        refuseCrossSite(request);
        const session = await sessionOf(request);
        // A live order has no simulated transfer: the route does not exist for it, whatever is sent.
        if (session.livemode) throw new ApiError('resource_not_found');
        const key = pageIdempotencyKey(request);
        const raw = await requestBodiesOf(app).buffer(request, reply, pageBodyLimits);
        let decoded: unknown = {};
        if (raw.length > 0) {
          if (!isJsonMediaType(request.headers['content-type'])) throw new ApiError('unsupported_media_type');
          decoded = decodeJson(raw);
          const unstorable = unstorableTextPaths(decoded);
          if (unstorable.length > 0) throw new ApiError('validation_error', { details: { fields: unstorable } });
        }
        const body = parseOrThrow(simulateSchema, decoded);
        const stored = await checkout.simulateTransfer(session, {
          leg_ref: body.leg_ref,
          idempotency_key: key,
          request_id: request.id,
          path: (request.raw.url ?? '').split('?')[0] ?? '',
          body: decoded,
        });
        if (stored.replayed) reply.header('Idempotent-Replay', 'true');
        return sendJson(reply, request, stored.status, stored.body_text);
      }));

      // The payer cancels the order from its page (spec: `canceled_by` `end_user`, `end_user_request`).
      scope.post('/:white_label_id/:deposit_id/cancel', checkoutHandler(async (request, reply) => {
        refuseCrossSite(request);
        const session = await sessionOf(request);
        const key = pageIdempotencyKey(request);
        if (requestHasBody(request)) {
          throw new ApiError('validation_error', { details: { fields: [{ path: '$', reason: 'body_not_allowed' }] } });
        }
        const stored = await checkout.cancel(session, { idempotency_key: key, request_id: request.id, path: (request.raw.url ?? '').split('?')[0] ?? '', body: undefined });
        if (stored.replayed) reply.header('Idempotent-Replay', 'true');
        return sendJson(reply, request, stored.status, stored.body_text);
      }));

      // `checkout_url`: the secret is exchanged for the session cookie, and the browser is sent on to the
      // address without it, so that the secret leaves the address bar, the history and any later referrer.
      scope.get('/:white_label_id/:deposit_id/:secret', checkoutHandler(async (request, reply) => {
        const language = languageOf(request);
        const { white_label_id = '', deposit_id = '', secret = '' } = request.params;
        // Answers before a valid secret count in the client IP's public bucket, so guessing is throttled.
        const now = services.clock.now();
        const counted = await services.tenancy.countInBucket({ white_label_id: '', bucket: BUCKETS.public.name, subject: request.ip, window_started_at: windowStart(now, BUCKETS.public) });
        const bucket: BucketState = { policy: BUCKETS.public, count: counted.request_count, window_started_at: counted.window_started_at, now };
        if (isExceeded(bucket)) {
          applyRateHeaders(reply, bucket);
          return sendHtml(reply, 429, renderMessagePage(language, assets, checkoutTexts(language).upload_rate_limited.replace('{seconds}', reply.getHeader('Retry-After')?.toString() ?? '60')));
        }
        const opened = await checkout.openLink(services.database, white_label_id, deposit_id, secret);
        if (!opened) return sendHtml(reply, 404, renderMessagePage(language, assets, checkoutTexts(language).link_invalid));
        const cookie = [`${SESSION_COOKIE}=${opened.cookie}`, `Path=${opened.path}`, `Max-Age=${opened.max_age_seconds}`, 'HttpOnly', 'SameSite=Strict', ...(opened.secure ? ['Secure'] : [])];
        const query = request.query?.lang === 'en' || request.query?.lang === 'th' ? `?lang=${request.query.lang}` : '';
        return reply.code(303).header('Set-Cookie', cookie.join('; ')).header('Location', `${opened.path}${query}`).send();
      }));
    },
    { prefix: '/checkout' },
  );
}

const brandCheckoutSchema = z
  .object({
    checkout_base_url: z
      .string()
      .max(300)
      .refine((text) => checkoutOrigin(text) !== null, { params: { reason: 'invalid_format', hint: 'an https origin such as https://pay.example.com (http only for localhost)' } })
      .nullable(),
  })
  .strict();

/**
 * POST /v1/bo/brands/{brand_id}/checkout-base-url (platform administrator): the origin on which the
 * brand's checkout pages are served, or null for the deployment's. Every order's `checkout_url` is
 * made from it when the order is read, so a change applies to existing orders too.
 */
export function checkoutAdminRoutes(services: { checkoutAddresses: CheckoutAddresses; tenancy: TenancyService }): RouteModule {
  return (registrar) => {
    registrar.backoffice({
      method: 'POST',
      url: '/v1/bo/brands/:brand_id/checkout-base-url',
      summary: "Set a brand's checkout origin",
      responses: { 200: { description: 'The brand with its checkout origin.', schema: brandSchema } },
      roles: ['platform_admin'],
      body: brandCheckoutSchema,
      async handler({ context, params, body }) {
        const brand_id = params.brand_id ?? '';
        const origin = body.checkout_base_url === null ? null : checkoutOrigin(body.checkout_base_url);
        const brand = await services.tenancy.setBrandCheckoutBaseUrl(actorOf(context), brand_id, origin);
        services.checkoutAddresses.forgetBrandOrigin(brand_id);
        return { status: 200, body: brand };
      },
    });
  };
}
