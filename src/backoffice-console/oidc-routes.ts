import type { FastifyInstance, FastifyReply } from 'fastify';
import { cookieValues } from '../checkout/links.ts';
import { href, renderMessage } from './html.ts';
import { OIDC_ATTEMPT_COOKIE, OIDC_ATTEMPT_LIFETIME_MS, type OidcCompletion } from './oidc-sign-in.ts';
import { PageRefusal, sessionCookie, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { CONSOLE_PATH, SESSION_ABSOLUTE_LIMIT_MS } from './sessions.ts';
import { consoleTexts, type ConsoleLanguage, type ConsoleTextKey } from './texts.ts';

/**
 * Signing in with a brand's OpenID Connect provider (oidc-sign-in.ts; docs/backoffice.md):
 *
 * - GET /bo/sign-in/oidc?brand=wl_…   starts: the attempt cookie, then on to the provider (303)
 * - GET /bo/oidc/callback             where the provider sends the browser back: a session, or a page saying why not
 *
 * The brand is a query parameter rather than a path of its own, so that the provider is given one redirect URI
 * for every brand of a deployment. The callback ends with a page that moves on to the queue itself (see
 * `refresh_to` in html.ts) instead of a redirect, so that the SameSite=Strict session cookie is sent with it.
 */

const OIDC_PATH = `${CONSOLE_PATH}/oidc`;
const BRAND_PATTERN = /^wl_[0-9A-HJKMNP-TV-Z]{26}$/;

function attemptCookie(value: string, secure: boolean, max_age_seconds: number): string {
  // Lax, not Strict: the provider's redirect back to the callback is a cross-site navigation, which must carry it.
  return [`${OIDC_ATTEMPT_COOKIE}=${value}`, `Path=${OIDC_PATH}`, `Max-Age=${max_age_seconds}`, 'HttpOnly', 'SameSite=Lax', ...(secure ? ['Secure'] : [])].join('; ');
}

/** The page of each way a callback can fail: its status, heading and text. */
const REFUSALS: Record<Exclude<OidcCompletion['outcome'], 'signed_in'>, [number, ConsoleTextKey, ConsoleTextKey]> = {
  unmapped: [403, 'oidc_unmapped_heading', 'oidc_unmapped'],
  credential_inactive: [403, 'forbidden_heading', 'oidc_credential_inactive'],
  provider_unavailable: [502, 'oidc_heading', 'oidc_provider_unavailable'],
  refused: [400, 'oidc_heading', 'oidc_refused'],
};

export function registerOidcPages(scope: FastifyInstance, kit: PageKit): void {
  const { oidcSignIn, sessions } = kit.deps;

  scope.get('/sign-in/oidc', kit.page(async (request, reply) => {
    const language = kit.languageOf(request);
    const t = consoleTexts(language);
    const brand = request.query.brand;
    if (typeof brand !== 'string' || !BRAND_PATTERN.test(brand)) throw new PageRefusal(404, 'oidc_heading', t.oidc_not_configured);
    // Each start asks the provider for its metadata: throttled like the link's sign-in.
    await kit.throttleSignIn(request, reply);
    const started = await oidcSignIn.begin(brand, language);
    if (started === 'not_configured') throw new PageRefusal(404, 'oidc_heading', t.oidc_not_configured);
    if (started === 'provider_unavailable') throw new PageRefusal(502, 'oidc_heading', t.oidc_provider_unavailable);
    return reply
      .code(303)
      .header('Set-Cookie', attemptCookie(started.cookie_value, sessions.secure(), OIDC_ATTEMPT_LIFETIME_MS / 1000))
      .header('Location', started.authorization_url)
      .send();
  }));

  scope.get('/oidc/callback', kit.page(async (request, reply) => {
    await kit.throttleSignIn(request, reply);
    const address = request.raw.url ?? '';
    const query = address.includes('?') ? address.slice(address.indexOf('?')) : '';
    const completed = await oidcSignIn.complete(cookieValues(request.headers.cookie, OIDC_ATTEMPT_COOKIE), query, request.id);
    // The attempt is spent whatever happened: a second use of the same answer finds no cookie.
    const cleared = attemptCookie('', sessions.secure(), 0);
    // The callback's address carries no `lang`: its pages speak the language the sign-in was started in.
    const language = completed.language ?? kit.languageOf(request);
    const t = consoleTexts(language);
    if (completed.outcome === 'signed_in') {
      return signedIn(kit, request, reply, [cleared, sessionCookie(completed.cookie_value, sessions.secure(), SESSION_ABSOLUTE_LIMIT_MS / 1000)], language);
    }
    const [status, heading, text] = REFUSALS[completed.outcome];
    reply.header('Set-Cookie', cleared);
    return kit.sendHtml(reply, status, renderMessage({ ...kit.frameOf(request, null), language, pathname: CONSOLE_PATH, query: {} }, heading, t[text]));
  }));
}

/** The page that ends a sign-in: the cookies, and a move on to the queue that the console's own page makes. */
function signedIn(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, cookies: string[], language: ConsoleLanguage): FastifyReply {
  const queue = `${CONSOLE_PATH}/reviews${language === 'en' ? '?lang=en' : ''}`;
  const frame = { ...kit.frameOf(request, null), language, pathname: `${CONSOLE_PATH}/reviews`, query: {}, refresh_to: queue };
  reply.header('Set-Cookie', cookies);
  return kit.sendHtml(reply, 200, renderMessage(frame, 'oidc_heading', consoleTexts(language).oidc_signed_in, { href: href(`${CONSOLE_PATH}/reviews`, {}, language), text: 'oidc_continue' }));
}
