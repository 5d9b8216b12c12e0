import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { parseTimestamp } from '../platform/time.ts';
import { requireStaffNote, STAFF_NOTE_MAX_CHARS } from '../http/staff-note.ts';
import { CLAIM_DECIDE_ROLES, CLAIM_READ_ROLES, type BackofficeClaimView, type ClaimDecision, type ClaimRefund, type ClaimStaff } from '../review/claims.ts';
import { CLAIM_RESOLUTION_CODES, REFUNDED_IN_SERVICE } from '../review/claims-repository.ts';
import { claimOpeningOf, openClaimBodySchema } from '../review/claim-routes.ts';
import { parseOrThrow } from '../http/validation.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { newDecisionKey, requireRole, PageRefusal, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { CLAIM_CAUSES, CLAIM_OPEN_FIELDS, CLAIM_STATUSES, claimStatusText, renderClaim, renderClaimList, renderClaimOpen, type ClaimFilters, type ClaimListPage, type ClaimOpenDraft } from './claims-pages.ts';
import { bahtToMinor, decisionKeyOf, decodeListCursor, encodeListCursor, errorNotice, invalidField } from './desk-kit.ts';
import type { CaseNotice } from './review-pages.ts';
import { consoleTexts, fill } from './texts.ts';

/**
 * The claims desk in the console: the brand's claims (filters and a cursor), one claim with its evidence and
 * times, and its decisions. A decision calls ClaimService.decide, the method behind
 * POST /v1/bo/claims/{id}/{investigate|resolve|reject}, with the session's credential as the staff member; the
 * roles are the API's own (CLAIM_READ_ROLES to read, CLAIM_DECIDE_ROLES to decide: a reviewer reads claims and
 * gets the 403 page on a decision). Opening a claim for a payer (/claims/new, POST /claims) calls ClaimService.open,
 * the method behind POST /v1/bo/claims, after the API's own body schema, with its roles (CLAIM_READ_ROLES: every
 * back-office role opens claims, as the API lets it).
 */

const CLAIMS_PAGE_SIZE = 25;
const CLAIM_ID_PATTERN = /^clm_[0-9A-Za-z]{1,64}$/;
const DEPOSIT_ID_PATTERN = /^dep_[0-9A-Za-z]{1,64}$/;
const REFUND_ID_PATTERN = /^wdr_[0-9A-Za-z]{1,64}$/;
/** The notices a claim's page shows after an action: a decision's new status, or an opening (new, or the claim the transfer had). */
const DONE_NOTICES = ['opened', 'existing', 'investigating', 'resolved', 'rejected'] as const;
const ACTIONS = ['investigate', 'resolve', 'reject'] as const;

const listQuerySchema = z
  .object({
    status: z.enum(CLAIM_STATUSES).optional().catch(undefined),
    cause: z.enum(CLAIM_CAUSES).optional().catch(undefined),
    mode: z.enum(['test', 'live']).optional().catch(undefined),
    deposit_id: z.string().regex(DEPOSIT_ID_PATTERN).optional().catch(undefined),
    cursor: z.string().min(1).max(1000).optional().catch(undefined),
  })
  .passthrough();

async function listPage(kit: PageKit, session: ConsoleSession, query: Record<string, unknown>): Promise<ClaimListPage> {
  const parsed = listQuerySchema.parse(query ?? {});
  const filters: ClaimFilters = { status: parsed.status ?? null, cause: parsed.cause ?? null, mode: parsed.mode ?? null, deposit_id: parsed.deposit_id ?? null };
  const position = decodeListCursor(parsed.cursor ?? null, filters);
  const after_created_at = position === null ? null : parseTimestamp(position.at);
  const after = position !== null && after_created_at !== null ? { created_at: after_created_at, claim_id: position.id } : null;
  const items = await kit.deps.claims.list(kit.deps.database, session.white_label_id, {
    livemode: filters.mode === null ? null : filters.mode === 'live',
    status: filters.status,
    cause: filters.cause,
    deposit_id: filters.deposit_id,
    after,
    limit: CLAIMS_PAGE_SIZE + 1,
  });
  const page = items.slice(0, CLAIMS_PAGE_SIZE);
  const last = page.at(-1);
  const next_cursor = items.length > CLAIMS_PAGE_SIZE && last ? encodeListCursor(last.created_at, last.id, filters) : null;
  return { items: page, filters, cursor: after ? (parsed.cursor ?? null) : null, next_cursor };
}

async function claimOf(kit: PageKit, session: ConsoleSession, request: ConsoleRequest): Promise<BackofficeClaimView> {
  const claim_id = request.params.claim_id ?? '';
  const notFound = new PageRefusal(404, 'not_found_heading', consoleTexts(kit.languageOf(request)).not_found);
  if (!CLAIM_ID_PATTERN.test(claim_id)) throw notFound;
  const claim = await kit.deps.claims.get(kit.deps.database, session.white_label_id, claim_id);
  if (!claim) throw notFound;
  return claim;
}

function sendClaim(kit: PageKit, reply: FastifyReply, request: ConsoleRequest, session: ConsoleSession, claim: BackofficeClaimView, status: number, notice: CaseNotice | null): FastifyReply {
  const may_decide = (CLAIM_DECIDE_ROLES as readonly string[]).includes(session.role);
  return kit.sendHtml(reply, status, renderClaim(kit.frameOf(request, session), { claim, session, notice, decision_key: newDecisionKey(), may_decide }));
}

function noteOf(form: URLSearchParams): string {
  const note = requireStaffNote(form.get('note'));
  if ([...note].length > STAFF_NOTE_MAX_CHARS) throw invalidField('note', 'too_long', `at most ${STAFF_NOTE_MAX_CHARS} characters`);
  return note;
}

/** The refund of a resolution, with the API's rule: exactly one of amount and refund id with `refunded_in_service`, neither otherwise. */
function refundOf(code: string, form: URLSearchParams): ClaimRefund | null {
  const amount_minor = bahtToMinor('refund_amount', form.get('refund_amount'));
  const refund_id = (form.get('refund_id') ?? '').trim();
  const given = [amount_minor === null ? null : 'refund_amount', refund_id === '' ? null : 'refund_id'].filter((name) => name !== null);
  if (code !== REFUNDED_IN_SERVICE) {
    if (given[0] !== undefined) throw invalidField(given[0], 'not_allowed', `only with ${REFUNDED_IN_SERVICE}`);
    return null;
  }
  if (given.length !== 1) throw invalidField(given.length === 0 ? 'refund_amount' : 'refund_id', given.length === 0 ? 'required' : 'not_allowed', 'refund_amount or refund_id, one of them');
  if (amount_minor !== null) return { action: 'create', amount_minor, reason_code: 'claim_resolution', note: null };
  if (!REFUND_ID_PATTERN.test(refund_id)) throw invalidField('refund_id', 'invalid_format', 'wdr_…');
  return { action: 'link', refund_id };
}

function decisionOf(action: ClaimDecision['action'], form: URLSearchParams): ClaimDecision {
  switch (action) {
    case 'investigate':
      return { action };
    case 'reject':
      return { action, note: noteOf(form) };
    case 'resolve': {
      const resolution_code = CLAIM_RESOLUTION_CODES.find((code) => code === form.get('resolution_code'));
      if (!resolution_code) throw invalidField('resolution_code', 'invalid_value');
      const note = noteOf(form);
      return { action, resolution_code, note, refund: refundOf(resolution_code, form) };
    }
  }
}

async function decide(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, action: ClaimDecision['action']): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, CLAIM_DECIDE_ROLES, language, 'claims_forbidden_decide');
  const claim_id = request.params.claim_id ?? '';
  if (!CLAIM_ID_PATTERN.test(claim_id)) throw new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
  const staff: ClaimStaff = { actor: kit.deps.sessions.actorOf(session.credential_id, request.id), credential_id: session.credential_id, request_id: request.id, idempotency_key: decisionKeyOf(form) };
  let refusal: ApiError;
  try {
    const outcome = await kit.deps.claims.decide(session.white_label_id, claim_id, staff, decisionOf(action, form));
    if (outcome.ok) {
      const query = new URLSearchParams({ done: outcome.value.claim.status, ...(language === 'en' ? { lang: 'en' } : {}) });
      return reply.code(303).header('Location', `${CONSOLE_PATH}/claims/${claim_id}?${query.toString()}`).send();
    }
    refusal = outcome.error;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refusal = error;
  }
  // Another brand's claim, or an unknown one, is the 404 page here, whatever the refusal was.
  const claim = await claimOf(kit, session, request);
  const notice = refusal.code === 'claim_state_conflict' ? { tone: 'error' as const, text: fill(consoleTexts(language).claims_lost_race, { status: claimStatusText(language, claim.status) }) } : errorNotice(language, refusal);
  return sendClaim(kit, reply, request, session, claim, refusal.status, notice);
}

function sendOpenForm(kit: PageKit, reply: FastifyReply, request: ConsoleRequest, session: ConsoleSession, status: number, draft: ClaimOpenDraft, notice: CaseNotice | null): FastifyReply {
  return kit.sendHtml(reply, status, renderClaimOpen(kit.frameOf(request, session), { session, draft, notice, decision_key: newDecisionKey() }));
}

function draftOf(form: URLSearchParams): ClaimOpenDraft {
  return Object.fromEntries(CLAIM_OPEN_FIELDS.map((name) => [name, form.get(name) ?? '']));
}

const LOCAL_TIME_PATTERN = /^([0-9]{4}-[0-9]{2}-[0-9]{2})T([0-9]{2}:[0-9]{2})(:[0-9]{2})?$/;

/**
 * A time typed in the form's datetime-local field, which has no zone, read as Thai time (UTC+7 all year) and
 * written as the API's timestamp; other text goes to the API's schema as it is, for it to refuse.
 */
function bangkokTimeToTimestamp(text: string): string {
  const match = LOCAL_TIME_PATTERN.exec(text);
  if (!match) return text;
  const instant = new Date(`${match[1]}T${match[2]}${match[3] ?? ':00'}+07:00`);
  return Number.isNaN(instant.getTime()) ? text : instant.toISOString();
}

/**
 * The form as POST /v1/bo/claims's body, for the API's schema to judge: an empty field is left out (as a JSON body
 * would leave it out), baht become satang, and the form's other fields (its token, its key) are not part of it.
 */
function openingBodyOf(form: URLSearchParams): Record<string, unknown> {
  const given = (name: string) => {
    const value = form.get(name) ?? '';
    return value.trim() === '' ? undefined : name === 'note' ? value : value.trim();
  };
  const amount_minor = bahtToMinor('amount', form.get('amount'));
  const occurred_at = given('occurred_at');
  const evidence = Object.fromEntries(
    [['trans_ref', given('trans_ref')], ['sending_bank_code', given('sending_bank_code')], ['occurred_at', occurred_at === undefined ? undefined : bangkokTimeToTimestamp(occurred_at)], ['note', given('note')]].filter(([, value]) => value !== undefined),
  );
  return { deposit_id: given('deposit_id'), cause: given('cause'), ...(amount_minor === null ? {} : { amount_minor }), evidence };
}

/**
 * POST /claims: ClaimService.open in the session's brand with its credential as the staff member. A refusal of the
 * input or of the order's state shows the form again with what was typed; another brand's order (or none) is the
 * 404 page, as the API answers 404.
 */
async function openClaim(kit: PageKit, request: ConsoleRequest, reply: FastifyReply): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, CLAIM_READ_ROLES, language, 'claims_forbidden_open');
  const staff: ClaimStaff = { actor: kit.deps.sessions.actorOf(session.credential_id, request.id), credential_id: session.credential_id, request_id: request.id, idempotency_key: decisionKeyOf(form) };
  let refusal: ApiError;
  try {
    const body = parseOrThrow(openClaimBodySchema, openingBodyOf(form));
    const outcome = await kit.deps.claims.open(session.white_label_id, claimOpeningOf(body), staff);
    if (outcome.ok) {
      const query = new URLSearchParams({ done: outcome.value.created ? 'opened' : 'existing', ...(language === 'en' ? { lang: 'en' } : {}) });
      return reply.code(303).header('Location', `${CONSOLE_PATH}/claims/${outcome.value.claim.id}?${query.toString()}`).send();
    }
    refusal = outcome.error;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refusal = error;
  }
  if (refusal.code === 'resource_not_found') throw new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
  return sendOpenForm(kit, reply, request, session, refusal.status, draftOf(form), errorNotice(language, refusal));
}

export function registerClaimPages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/claims', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, CLAIM_READ_ROLES, kit.languageOf(request), 'claims_forbidden_read');
    const may_open = (CLAIM_READ_ROLES as readonly string[]).includes(session.role);
    return kit.sendHtml(reply, 200, renderClaimList(kit.frameOf(request, session), await listPage(kit, session, request.query), may_open));
  }));

  scope.get('/claims/new', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, CLAIM_READ_ROLES, kit.languageOf(request), 'claims_forbidden_open');
    const deposit_id = typeof request.query?.deposit_id === 'string' && DEPOSIT_ID_PATTERN.test(request.query.deposit_id) ? request.query.deposit_id : '';
    return sendOpenForm(kit, reply, request, session, 200, { deposit_id }, null);
  }));

  scope.post('/claims', kit.page((request, reply) => openClaim(kit, request, reply)));

  scope.get('/claims/:claim_id', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, CLAIM_READ_ROLES, kit.languageOf(request), 'claims_forbidden_read');
    const claim = await claimOf(kit, session, request);
    const done = DONE_NOTICES.find((status) => status === request.query?.done);
    const notice: CaseNotice | null = done ? { tone: 'success', text: consoleTexts(kit.languageOf(request))[`claims_done_${done}`] } : null;
    return sendClaim(kit, reply, request, session, claim, 200, notice);
  }));

  for (const action of ACTIONS) {
    scope.post(`/claims/:claim_id/${action}`, kit.page((request, reply) => decide(kit, request, reply, action)));
  }
}
