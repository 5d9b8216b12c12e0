import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../platform/errors.ts';
import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import type { HttpLimits } from '../platform/config.ts';
import { requestBodiesOf } from '../http/server.ts';
import type { BodyLimits } from '../http/body-reader.ts';
import type { ReviewService } from '../review/service.ts';
import type { ClaimService } from '../review/claims.ts';
import type { DisputeService } from '../disputes/service.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { LedgerService } from '../ledger/service.ts';
import type { WebhookService } from '../webhooks/service.ts';
import type { DepositService } from '../deposits/service.ts';
import type { WithdrawalService } from '../withdrawals/service.ts';
import type { EventsService } from '../events/service.ts';
import type { VerificationService } from '../verification/service.ts';
import { cookieValues } from '../checkout/links.ts';
import { applyRateHeaders, BUCKETS, isExceeded, windowStart, type BucketState } from '../http/rate-limit.ts';
import { renderError } from '../platform/errors.ts';
import type { ConsoleOidcSignIn } from './oidc-sign-in.ts';
import type { ConsoleOidcSettings } from './oidc-settings.ts';
import { CONSOLE_PATH, SESSION_COOKIE, type ConsoleSession, type ConsoleSessions } from './sessions.ts';
import { renderMessage, type PageFrame } from './html.ts';
import type { CasePresence } from './presence.ts';
import { consoleLanguage, consoleTexts, fill, type ConsoleLanguage, type ConsoleTextKey } from './texts.ts';

/**
 * What every console page shares: the language of the request, the page frame, the session (with its 401 page),
 * forms (from the console's own pages only, with the CSRF token) and the refusal pages (PageRefusal).
 */

/** A console form (a note of at most 2,000 characters, and a few fields) is far below this. */
const FORM_MAX_BYTES = 32 * 1024;

export type ConsoleRequest = FastifyRequest<{ Params: Record<string, string>; Querystring: Record<string, unknown> }>;

/** A page that refuses: its status, heading and message, rendered by `page` as a whole HTML page. */
export class PageRefusal extends Error {
  constructor(
    readonly status: number,
    readonly heading: ConsoleTextKey,
    readonly text: string,
  ) {
    super(text);
    this.name = 'PageRefusal';
  }
}

/** What the console's pages call. */
export interface ConsolePageDependencies {
  sessions: ConsoleSessions;
  presence: CasePresence;
  /** Signing in with a brand's OpenID Connect provider. */
  oidcSignIn: ConsoleOidcSignIn;
  /** The brand's OpenID provider and staff list, kept on the sign-in settings page. */
  oidcSettings: ConsoleOidcSettings;
  review: ReviewService;
  claims: ClaimService;
  disputes: DisputeService;
  tenancy: TenancyService;
  ledger: LedgerService;
  webhooks: WebhookService;
  /** The orders pages read these (search, an order, its transfers, timeline and ledger movements). */
  deposits: DepositService;
  withdrawals: WithdrawalService;
  verification: VerificationService;
  events: EventsService;
  database: Queryable;
  clock: Clock;
  config: { http: HttpLimits };
}

/** The helpers every console page shares: language, frame, session, forms and answers. */
export interface PageKit {
  deps: ConsolePageDependencies;
  languageOf(request: ConsoleRequest): ConsoleLanguage;
  frameOf(request: ConsoleRequest, session: ConsoleSession | null): Omit<PageFrame, 'title'>;
  /** The signed-in session, or a 401 page; `touch` moves the idle limit on (false for polling). */
  sessionOf(request: ConsoleRequest, touch: boolean): Promise<ConsoleSession>;
  /** The form of a POST, from the console's own pages only. */
  readForm(request: ConsoleRequest, reply: FastifyReply): Promise<URLSearchParams>;
  /** A POST's session and CSRF token, checked before anything else is read from the form. */
  postSession(request: ConsoleRequest, form: URLSearchParams): Promise<ConsoleSession>;
  sendHtml(reply: FastifyReply, status: number, html: string): FastifyReply;
  /**
   * Counts a request of a sign-in page (no session yet) in the client IP's public bucket, and refuses it with the
   * 429 page when the bucket is full: guessing link tokens, or making the service call a provider, is throttled.
   */
  throttleSignIn(request: ConsoleRequest, reply: FastifyReply): Promise<void>;
  /** Wraps a handler: a PageRefusal becomes its page. */
  page(handler: (request: ConsoleRequest, reply: FastifyReply) => Promise<FastifyReply>): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;
}

/**
 * A POST must come from a console page: the cookie is SameSite=Strict and the form carries the CSRF token
 * already; a browser's Fetch Metadata naming another site is refused as well (defence in depth, and the only
 * check the sign-in form has, since there is no session yet). Without Fetch Metadata, an Origin naming another
 * host is refused; a page with `Referrer-Policy: no-referrer` makes chromium send `Origin: null` on its own
 * forms, so that value says nothing and is left to the token.
 */
function fromOwnPages(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined) return site === 'same-origin';
  const origin = request.headers.origin;
  if (origin === undefined || origin === 'null') return true;
  return URL.canParse(origin) && new URL(origin).host === request.headers.host;
}

/**
 * The GET page an action's answer belongs to, for its language switch: a decision's case, a delivery's or an
 * endpoint's page after a resend or replay, the keys page a key was created on; an action on a key by its id
 * alone (as the API's) belongs to the merchant list.
 */
function pageOfAction(path: string): string {
  const decided = /^(\/bo\/reviews\/[^/]+)\/(approve|reject|escalate)$/.exec(path);
  if (decided?.[1]) return decided[1];
  const webhook = /^(\/bo\/merchants\/[^/]+\/webhooks\/[^/]+(?:\/deliveries\/[^/]+)?)\/(resend|replay)$/.exec(path);
  if (webhook?.[1]) return webhook[1];
  if (/^\/bo\/merchants\/[^/]+\/api-keys$/.test(path)) return path;
  if (path.startsWith(`${CONSOLE_PATH}/api-keys/`)) return `${CONSOLE_PATH}/merchants`;
  if (path.startsWith(`${CONSOLE_PATH}/sign-in-settings/`)) return `${CONSOLE_PATH}/sign-in-settings`;
  // A claim opened from the console is refused back onto its form.
  if (path === `${CONSOLE_PATH}/claims`) return `${CONSOLE_PATH}/claims/new`;
  // Any other decision's POST (`/bo/{area}/{id}/{action}`: claims, disputes) links to the page of the object it decided.
  const other = /^(\/bo\/[a-z-]+\/[^/]+)\/[a-z-]+$/.exec(path);
  if (other?.[1]) return other[1];
  return `${CONSOLE_PATH}/reviews`;
}

export function pageKit(app: FastifyInstance, deps: ConsolePageDependencies): PageKit {
  const formLimits: BodyLimits = { max_bytes: FORM_MAX_BYTES, deadline_ms: deps.config.http.body_deadline_ms };
  const languageOf = (request: ConsoleRequest) => consoleLanguage(request.query?.lang);
  const kit: PageKit = {
    deps,
    languageOf,
    frameOf(request, session) {
      // The language switch links to the page's own address; a page answering a POST links to its GET page instead.
      const query: Record<string, string> = {};
      if (request.method === 'GET') for (const [name, value] of Object.entries(request.query ?? {})) if (typeof value === 'string') query[name] = value;
      const path = (request.raw.url ?? '').split('?')[0] ?? CONSOLE_PATH;
      const pathname = request.method === 'GET' ? path : pageOfAction(path);
      return { language: languageOf(request), pathname, query, session };
    },
    async sessionOf(request, touch) {
      const session = await deps.sessions.open(cookieValues(request.headers.cookie, SESSION_COOKIE), touch);
      if (!session) throw new PageRefusal(401, 'session_needed_heading', consoleTexts(languageOf(request)).session_needed);
      return session;
    },
    async readForm(request, reply) {
      const t = consoleTexts(languageOf(request));
      if (!fromOwnPages(request)) throw new PageRefusal(403, 'csrf_failed_heading', t.csrf_failed);
      const type = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
      const raw = await requestBodiesOf(app).buffer(request, reply, formLimits);
      if (raw.length > 0 && type !== 'application/x-www-form-urlencoded') throw new ApiError('unsupported_media_type');
      return new URLSearchParams(raw.toString('utf8'));
    },
    async postSession(request, form) {
      const session = await kit.sessionOf(request, true);
      if (!deps.sessions.verifyCsrf(session, form.get('csrf_token'))) throw new PageRefusal(403, 'csrf_failed_heading', consoleTexts(languageOf(request)).csrf_failed);
      return session;
    },
    async throttleSignIn(request, reply) {
      const now = deps.clock.now();
      const counted = await deps.tenancy.countInBucket({ white_label_id: '', bucket: BUCKETS.public.name, subject: request.ip, window_started_at: windowStart(now, BUCKETS.public) });
      const bucket: BucketState = { policy: BUCKETS.public, count: counted.request_count, window_started_at: counted.window_started_at, now };
      if (!isExceeded(bucket)) return;
      applyRateHeaders(reply, bucket);
      const error = renderError(new ApiError('rate_limited'), request.id).error;
      throw new PageRefusal(429, 'sign_in_heading', languageOf(request) === 'th' ? error.message_th : error.message);
    },
    sendHtml(reply, status, html) {
      return reply.code(status).header('content-type', 'text/html; charset=utf-8').send(html);
    },
    page(handler) {
      return async (request, reply) => {
        try {
          return await handler(request as ConsoleRequest, reply);
        } catch (error) {
          if (!(error instanceof PageRefusal)) throw error;
          const consoleRequest = request as ConsoleRequest;
          const session = error.status === 401 ? null : await deps.sessions.open(cookieValues(request.headers.cookie, SESSION_COOKIE), false);
          return kit.sendHtml(reply, error.status, renderMessage(kit.frameOf(consoleRequest, session), error.heading, error.text));
        }
      };
    },
  };
  return kit;
}

/**
 * Refuses a session whose role is not among `roles` with the 403 page, which says why in the page's words
 * (`why`: a text key whose `{role}` is filled with the session's role).
 */
export function requireRole(session: ConsoleSession, roles: ReadonlyArray<ConsoleSession['role']>, language: ConsoleLanguage, why: ConsoleTextKey): void {
  if (roles.includes(session.role)) return;
  const t = consoleTexts(language);
  throw new PageRefusal(403, 'forbidden_heading', fill(t[why], { role: t[`role_${session.role}`] }));
}

/** The session cookie's Set-Cookie value: HttpOnly, SameSite=Strict, on the console's path only. */
export function sessionCookie(value: string, secure: boolean, max_age_seconds: number): string {
  return [`${SESSION_COOKIE}=${value}`, `Path=${CONSOLE_PATH}`, `Max-Age=${max_age_seconds}`, 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : [])].join('; ');
}

/** A fresh Idempotency-Key for a rendering's decision forms. */
export function newDecisionKey(): string {
  return `console-${crypto.randomUUID()}`;
}
