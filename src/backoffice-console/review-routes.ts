import crypto from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ApiError, renderError } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import { decodeCursor, encodeCursor } from '../http/paging.ts';
import { requireStaffNote } from '../http/staff-note.ts';
import { REJECTION_CODES } from '../review/catalogue.ts';
import type { Decision, ReviewDetail } from '../review/service.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { newDecisionKey, requireRole, PageRefusal, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { decisionText, presenceText, renderCase, renderQueue, type CaseNotice, type CasePage, type QueueFilters, type QueuePage } from './review-pages.ts';
import { consoleTexts, fill, type ConsoleLanguage } from './texts.ts';

/**
 * The review desk in the console: the queue (with its state for the polling script), one case, its slip images
 * behind the session, and the decisions. A decision calls ReviewService.decide, the method behind
 * POST /v1/bo/reviews/{id}/{action}, with the session's credential as the reviewer: the same roles (reviewers
 * only), the same four-eyes and escalation rules, the same audit rows.
 */

const QUEUE_PAGE_SIZE = 25;
const DEPOSIT_ID_PATTERN = /^dep_[0-9A-Za-z]{1,64}$/;
const RECEIPT_ID_PATTERN = /^rcpt_[0-9A-Za-z]{1,64}$/;
const DECISION_KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;
const AGE_MINUTES = { '15m': 15, '1h': 60, '4h': 240 } as const;
const DONE_EFFECTS = ['approval_recorded', 'settled', 'rejected', 'escalated'] as const;

const queueQuerySchema = z
  .object({
    reason: z.string().regex(/^[A-Z][A-Z_]{1,63}$/).optional().catch(undefined),
    escalated: z.enum(['true', 'false']).optional().catch(undefined),
    mode: z.enum(['test', 'live']).optional().catch(undefined),
    age: z.enum(['15m', '1h', '4h']).optional().catch(undefined),
    cursor: z.string().min(1).max(1000).optional().catch(undefined),
  })
  .passthrough();

const queueCursorSchema = z
  .object({ v: z.literal(1), opened_at: z.string().min(1).max(40), deposit_id: z.string().min(1).max(100), filters: z.string().max(400) })
  .strict();

function filtersOf(query: Record<string, unknown>): { filters: QueueFilters; cursor: string | null } {
  const parsed = queueQuerySchema.parse(query ?? {});
  return {
    filters: { reason: parsed.reason ?? null, escalated: parsed.escalated ?? null, mode: parsed.mode ?? null, age: parsed.age ?? null },
    cursor: parsed.cursor ?? null,
  };
}

/** Reads one page of the queue, with its counts and its state (what the polling script compares). */
async function queuePage(kit: PageKit, session: ConsoleSession, filters: QueueFilters, cursor: string | null): Promise<QueuePage> {
  const { review, database, clock } = kit.deps;
  const now = clock.now();
  let after: { opened_at: string; deposit_id: string } | null = null;
  if (cursor !== null) {
    // A cursor of other filters (or none the console made) starts again from the top instead of failing the page.
    try {
      const decoded = decodeCursor(queueCursorSchema, cursor);
      if (decoded.filters === JSON.stringify(filters)) after = { opened_at: decoded.opened_at, deposit_id: decoded.deposit_id };
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
    }
  }
  const livemode = filters.mode === null ? null : filters.mode === 'live';
  const items = await review.queueWithReferences(database, session.white_label_id, {
    livemode,
    reason_code: filters.reason,
    escalated: filters.escalated === null ? null : filters.escalated === 'true',
    opened_before: filters.age === null ? null : formatTimestamp(new Date(now.getTime() - AGE_MINUTES[filters.age] * 60_000)),
    after,
    limit: QUEUE_PAGE_SIZE + 1,
  });
  const counts = await review.queueCountsByReason(database, session.white_label_id, livemode);
  const viewers = await kit.deps.presence.viewers(session, items.slice(0, QUEUE_PAGE_SIZE).map((item) => item.deposit_id));
  const page = items.slice(0, QUEUE_PAGE_SIZE).map((item) => ({ ...item, viewers: viewers.get(item.deposit_id) ?? [] }));
  const last = page.at(-1);
  const next_cursor = items.length > QUEUE_PAGE_SIZE && last ? encodeCursor({ v: 1, opened_at: last.opened_at, deposit_id: last.deposit_id, filters: JSON.stringify(filters) }) : null;
  const total = await review.queueTotal(database, session.white_label_id, livemode);
  const state = crypto
    .createHash('sha256')
    .update(JSON.stringify([total, counts, page.map((item) => [item.deposit_id, item.escalated, item.reasons, item.viewers.map((viewer) => viewer.staff_id)])]))
    .digest('base64url')
    .slice(0, 22);
  return { items: page, counts, total, filters, cursor: after ? cursor : null, next_cursor, state, now };
}

function caseState(detail: ReviewDetail): string {
  return `${detail.deposit.version}.${detail.decisions.length}`;
}

async function detailOf(kit: PageKit, session: ConsoleSession, request: ConsoleRequest): Promise<ReviewDetail> {
  const deposit_id = request.params.deposit_id ?? '';
  const language = kit.languageOf(request);
  const notFound = new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
  if (!DEPOSIT_ID_PATTERN.test(deposit_id)) throw notFound;
  const detail = await kit.deps.review.detail(kit.deps.database, session.white_label_id, deposit_id, (receipt_id) => `${CONSOLE_PATH}/reviews/${deposit_id}/slips/${receipt_id}/image`);
  if (!detail) throw notFound;
  return detail;
}

async function sendCase(kit: PageKit, reply: FastifyReply, request: ConsoleRequest, session: ConsoleSession, detail: ReviewDetail, status: number, notice: CaseNotice | null): Promise<FastifyReply> {
  const staff_names = await kit.deps.tenancy.staffNames(kit.deps.database, session.white_label_id, staffIdsOf(detail));
  const viewers = (await kit.deps.presence.viewers(session, [detail.deposit_id])).get(detail.deposit_id) ?? [];
  const page = { detail, session, state: caseState(detail), notice, decision_key: newDecisionKey(), now: kit.deps.clock.now(), staff_names, viewers };
  return kit.sendHtml(reply, status, renderCase(kit.frameOf(request, session), page));
}

function staffIdsOf(detail: ReviewDetail): string[] {
  return [...detail.decisions, ...detail.approvals].flatMap((decision) => (decision.staff_id === null ? [] : [decision.staff_id]));
}

/** The baht a reviewer typed, in satang; a validation error names the field otherwise. */
function amountOf(text: string | null): number | null {
  if (text === null || text.trim() === '') return null;
  const match = /^([0-9]{1,10})(?:\.([0-9]{1,2}))?$/.exec(text.trim());
  if (!match) throw new ApiError('validation_error', { details: { fields: [{ path: 'verified_amount', reason: 'invalid_format', hint: 'baht, such as 101.00' }] } });
  return Number(match[1]) * 100 + Number((match[2] ?? '').padEnd(2, '0'));
}

function decisionOf(action: Decision['action'], form: URLSearchParams): Decision {
  const note = form.get('note');
  switch (action) {
    case 'approve':
      return { action, verified_amount_minor: amountOf(form.get('verified_amount')), note: note === null || note.trim() === '' ? null : requireStaffNote(note) };
    case 'reject': {
      const code = form.get('rejection_code');
      const rejection_code = REJECTION_CODES.find((candidate) => candidate === code);
      if (!rejection_code) throw new ApiError('validation_error', { details: { fields: [{ path: 'rejection_code', reason: 'invalid_value' }] } });
      return { action, rejection_code, note: requireStaffNote(note) };
    }
    case 'escalate':
      return { action, note: requireStaffNote(note) };
  }
}

/** A refused decision in words: the race lost (with the winner's decision), the four-eyes rules, bad input. */
function refusalNotice(language: ConsoleLanguage, page: Pick<CasePage, 'session' | 'staff_names'>, error: ApiError, detail: ReviewDetail): CaseNotice {
  const t = consoleTexts(language);
  if (error.code === 'review_already_decided') {
    const winner = [...detail.decisions].reverse().find((decision) => decision.effect === 'settled' || decision.effect === 'rejected');
    const decision = winner ? decisionText(language, page, winner) : detail.deposit.status;
    return { tone: 'error', text: fill(t.lost_race, { decision }) };
  }
  if (error.code === 'four_eyes_same_reviewer') return { tone: 'error', text: t.error_four_eyes_same_reviewer };
  if (error.code === 'escalation_same_reviewer') return { tone: 'error', text: t.error_escalation_same_reviewer };
  const fields = (error.details.fields as { path?: string; reason?: string; hint?: string }[] | undefined) ?? [];
  if (error.code === 'validation_error' && fields.length > 0) {
    return { tone: 'error', text: fill(t.error_validation, { fields: fields.map((field) => [field.path, field.reason, field.hint].filter(Boolean).join(': ')).join('; ') }) };
  }
  const body = renderError(error, '').error;
  return { tone: 'error', text: language === 'th' ? body.message_th : body.message };
}

async function decide(kit: PageKit, request: ConsoleRequest, reply: FastifyReply, action: Decision['action']): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, ['reviewer'], language, 'forbidden_decide');
  const deposit_id = request.params.deposit_id ?? '';
  if (!DEPOSIT_ID_PATTERN.test(deposit_id)) throw new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
  const key = form.get('decision_key');
  const reviewer = {
    actor: kit.deps.sessions.actorOf(session.credential_id, request.id),
    reviewer_id: session.credential_id,
    request_id: request.id,
    idempotency_key: key !== null && DECISION_KEY_PATTERN.test(key) ? key : null,
  };
  let refusal: ApiError;
  try {
    const outcome = await kit.deps.review.decide(session.white_label_id, deposit_id, reviewer, decisionOf(action, form));
    if (outcome.ok) {
      const query = new URLSearchParams({ done: outcome.value.effect, ...(language === 'en' ? { lang: 'en' } : {}) });
      return reply.code(303).header('Location', `${CONSOLE_PATH}/reviews/${deposit_id}?${query.toString()}`).send();
    }
    refusal = outcome.error;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refusal = error;
  }
  const detail = await detailOf(kit, session, request);
  const staff_names = await kit.deps.tenancy.staffNames(kit.deps.database, session.white_label_id, staffIdsOf(detail));
  return sendCase(kit, reply, request, session, detail, refusal.status, refusalNotice(language, { session, staff_names }, refusal, detail));
}

export function registerReviewPages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/reviews', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    const { filters, cursor } = filtersOf(request.query);
    return kit.sendHtml(reply, 200, renderQueue(kit.frameOf(request, session), await queuePage(kit, session, filters, cursor)));
  }));

  // The polling script's question: has the queue changed? JSON, and the idle limit does not move.
  scope.get('/reviews/state', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, false);
    const { filters, cursor } = filtersOf(request.query);
    const page = await queuePage(kit, session, filters, cursor);
    return reply.code(200).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify({ state: page.state }));
  }));

  scope.get('/reviews/:deposit_id', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    const detail = await detailOf(kit, session, request);
    await kit.deps.presence.record(session, detail.deposit_id);
    const done = DONE_EFFECTS.find((effect) => effect === request.query?.done);
    const notice: CaseNotice | null = done ? { tone: 'success', text: consoleTexts(kit.languageOf(request))[`effect_${done}`] } : null;
    return sendCase(kit, reply, request, session, detail, 200, notice);
  }));

  scope.get('/reviews/:deposit_id/state', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, false);
    const detail = await detailOf(kit, session, request);
    // The page's polling keeps its view alive and brings back who else is on the case, as text for the page.
    await kit.deps.presence.record(session, detail.deposit_id);
    const viewers = (await kit.deps.presence.viewers(session, [detail.deposit_id])).get(detail.deposit_id) ?? [];
    const body = { state: caseState(detail), viewers: presenceText(kit.languageOf(request), viewers) };
    return reply.code(200).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify(body));
  }));

  scope.get('/reviews/:deposit_id/slips/:receipt_id/image', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, false);
    const { deposit_id = '', receipt_id = '' } = request.params;
    const notFound = new PageRefusal(404, 'not_found_heading', consoleTexts(kit.languageOf(request)).not_found);
    if (!DEPOSIT_ID_PATTERN.test(deposit_id) || !RECEIPT_ID_PATTERN.test(receipt_id)) throw notFound;
    const image = await kit.deps.review.image(kit.deps.database, session.white_label_id, deposit_id, receipt_id);
    if (!image) throw notFound;
    return reply.code(200).header('content-type', image.media_type).header('Content-Disposition', 'inline').send(image.bytes);
  }));

  for (const action of ['approve', 'reject', 'escalate'] as const) {
    scope.post(`/reviews/:deposit_id/${action}`, kit.page((request, reply) => decide(kit, request, reply, action)));
  }
}


