import type { FastifyInstance } from 'fastify';
import { ApiError } from '../platform/errors.ts';
import { CONSOLE_PATH, SESSION_ABSOLUTE_LIMIT_MS } from './sessions.ts';
import { consoleAssets, escapeHtml, href, renderMessage, renderPage, wordsOf } from './html.ts';
import { consoleTexts } from './texts.ts';
import { pageKit, PageRefusal, sessionCookie, type ConsolePageDependencies, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { registerReviewPages } from './review-routes.ts';
import { registerClaimPages } from './claims-routes.ts';
import { registerDisputePages } from './disputes-routes.ts';
import { registerMerchantsPages } from './merchants-routes.ts';
import { registerMerchantWebhookPages } from './merchant-webhooks-routes.ts';
import { registerOrderPages } from './orders-routes.ts';
import { registerSignInSettingsPages } from './sign-in-settings-routes.ts';
import { registerAuditPages } from './audit-routes.ts';
import { registerOidcPages } from './oidc-routes.ts';

/**
 * The back-office console's HTTP side (docs/backoffice.md), under /bo on the console's origin
 * (BACKOFFICE_BASE_URL, which points at this service):
 *
 * - GET  /bo                        to the review queue
 * - GET  /bo/sign-in/{token}        the one-time link: a page with a button (a link preview does not use it up)
 * - POST /bo/sign-in                uses the link, sets the session cookie, on to the queue
 * - POST /bo/sign-out               ends the session at once (CSRF)
 * - GET  /bo/sign-in/oidc?brand=…    and /bo/oidc/callback: the brand's OpenID Connect sign-in (oidc-routes.ts)
 * - GET  /bo/assets/{name}          the script, stylesheet and fonts, named by their hash
 * - the review desk's pages (review-routes.ts), the claims desk's (claims-routes.ts) and the disputes' (disputes-routes.ts)
 * - the merchants area: merchants, wallets, API keys (merchants-routes.ts), webhook endpoints and deliveries
 *   (merchant-webhooks-routes.ts)
 * - the orders pages (orders-routes.ts) and the audit log (audit-routes.ts)
 *
 * Routes are registered on the Fastify instance itself, like the checkout pages: they answer HTML, redirects and
 * cookies, and are not part of the API. Every answer carries the pages' security headers and, except the hashed
 * assets, `Cache-Control: no-store`. The request log names route templates only, so a link's token never reaches
 * a log.
 */

const ASSET_CACHE_CONTROL = 'public, max-age=31536000, immutable';
export const CONSOLE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

function securityHeaders(scope: FastifyInstance): void {
  scope.addHook('onSend', async (request, reply, payload) => {
    reply.header('Content-Security-Policy', CONSOLE_CONTENT_SECURITY_POLICY);
    reply.header('X-Frame-Options', 'DENY');
    reply.header('Referrer-Policy', 'no-referrer');
    reply.header('X-Content-Type-Options', 'nosniff');
    reply.header('Cross-Origin-Opener-Policy', 'same-origin');
    reply.header('Cross-Origin-Resource-Policy', 'same-origin');
    reply.header('Permissions-Policy', 'camera=(), geolocation=(), microphone=(), payment=(), usb=()');
    const cacheable = reply.statusCode === 200 && request.routeOptions.url === `${CONSOLE_PATH}/assets/:name`;
    reply.header('Cache-Control', cacheable ? ASSET_CACHE_CONTROL : 'no-store');
    return payload;
  });
}

function registerSignIn(scope: FastifyInstance, kit: PageKit): void {
  const { sessions } = kit.deps;

  scope.get('/sign-in/:token', kit.page(async (request, reply) => {
    const language = kit.languageOf(request);
    const { e } = wordsOf(language);
    const frame = kit.frameOf(request, null);
    const token = request.params.token ?? '';
    if (!/^bol_[A-Za-z0-9_-]{43}$/.test(token)) throw new PageRefusal(404, 'sign_in_heading', consoleTexts(language).link_invalid);
    const main = `<h1>${e('sign_in_heading')}</h1>
<p>${e('sign_in_text')}</p>
<form method="post" action="${href(`${CONSOLE_PATH}/sign-in`, {}, language)}">
<input type="hidden" name="token" value="${escapeHtml(token)}">
<button type="submit" id="sign-in-button">${e('sign_in_button')}</button>
</form>`;
    return kit.sendHtml(reply, 200, renderPage({ ...frame, title: consoleTexts(language).sign_in_heading }, main));
  }));

  scope.post('/sign-in', kit.page(async (request, reply) => {
    const language = kit.languageOf(request);
    const form = await kit.readForm(request, reply);
    // Attempts count in the client IP's public bucket, so guessing tokens is throttled (it is hopeless anyway).
    await kit.throttleSignIn(request, reply);
    const started = await sessions.signInWithLink(form.get('token') ?? '', request.id);
    if (!started) throw new PageRefusal(404, 'sign_in_heading', consoleTexts(language).link_invalid);
    return reply
      .code(303)
      .header('Set-Cookie', sessionCookie(started.cookie_value, sessions.secure(), SESSION_ABSOLUTE_LIMIT_MS / 1000))
      .header('Location', `${CONSOLE_PATH}/reviews${language === 'en' ? '?lang=en' : ''}`)
      .send();
  }));

  scope.post('/sign-out', kit.page(async (request, reply) => {
    const language = kit.languageOf(request);
    const form = await kit.readForm(request, reply);
    const session = await kit.postSession(request, form);
    await sessions.signOut(session, request.id);
    reply.header('Set-Cookie', sessionCookie('', sessions.secure(), 0));
    return kit.sendHtml(reply, 200, renderMessage(kit.frameOf(request, null), 'sign_in_heading', consoleTexts(language).signed_out));
  }));
}

export function registerConsolePages(app: FastifyInstance, deps: ConsolePageDependencies): void {
  const assets = consoleAssets();
  const kit = pageKit(app, deps);
  void app.register(
    async (scope) => {
      securityHeaders(scope);
      scope.setNotFoundHandler(async (request, reply) => {
        if (request.method !== 'GET' && request.method !== 'HEAD') throw new ApiError('resource_not_found');
        const consoleRequest = request as ConsoleRequest;
        return kit.sendHtml(reply, 404, renderMessage(kit.frameOf(consoleRequest, null), 'not_found_heading', consoleTexts(kit.languageOf(consoleRequest)).not_found));
      });
      scope.get<{ Params: { name: string } }>('/assets/:name', async (request, reply) => {
        const asset = assets.byName.get(request.params.name);
        if (!asset) throw new ApiError('resource_not_found');
        return reply.code(200).header('content-type', asset.content_type).send(asset.bytes);
      });
      scope.get('/', async (request, reply) => {
        const language = kit.languageOf(request as ConsoleRequest);
        return reply.code(303).header('Location', `${CONSOLE_PATH}/reviews${language === 'en' ? '?lang=en' : ''}`).send();
      });
      registerSignIn(scope, kit);
      registerOidcPages(scope, kit);
      registerReviewPages(scope, kit);
      registerClaimPages(scope, kit);
      registerDisputePages(scope, kit);
      registerMerchantsPages(scope, kit);
      registerMerchantWebhookPages(scope, kit);
      registerOrderPages(scope, kit);
      registerAuditPages(scope, kit);
      registerSignInSettingsPages(scope, kit);
    },
    { prefix: CONSOLE_PATH },
  );
}
