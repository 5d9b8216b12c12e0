import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../platform/errors.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import { parseTimestamp } from '../platform/time.ts';
import { requireStaffNote, STAFF_NOTE_MAX_CHARS } from '../http/staff-note.ts';
import { DISPUTE_ROLES, type DisputeDetail } from '../disputes/service.ts';
import { CONSOLE_PATH, type ConsoleSession } from './sessions.ts';
import { newDecisionKey, requireRole, PageRefusal, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { DISPUTE_STATUSES, renderDispute, renderDisputeList, resolutionText, type DisputeFilters, type DisputeListPage } from './disputes-pages.ts';
import { decisionKeyOf, decodeListCursor, encodeListCursor, errorNotice, invalidField } from './desk-kit.ts';
import type { CaseNotice } from './review-pages.ts';
import { consoleTexts, fill } from './texts.ts';

/**
 * Withdrawal disputes in the console: the brand's disputes (filters and a cursor), one dispute with its deadline
 * and evidence, and its resolution. The resolution calls DisputeService.resolve, the method behind
 * POST /v1/bo/disputes/{id}/resolve, with the session's credential as the operator. The roles are the API's own
 * (DISPUTE_ROLES for every page: a reviewer gets the 403 page, as the API answers them `scope_denied`).
 */

const DISPUTES_PAGE_SIZE = 25;
const DISPUTE_ID_PATTERN = /^dsp_[0-9A-Za-z]{1,64}$/;

const listQuerySchema = z
  .object({
    status: z.enum(DISPUTE_STATUSES).optional().catch(undefined),
    mode: z.enum(['test', 'live']).optional().catch(undefined),
    order: z.enum(['oldest', 'newest']).optional().catch(undefined),
    cursor: z.string().min(1).max(1000).optional().catch(undefined),
  })
  .passthrough();

async function listPage(kit: PageKit, session: ConsoleSession, query: Record<string, unknown>): Promise<DisputeListPage> {
  const parsed = listQuerySchema.parse(query ?? {});
  const filters: DisputeFilters = { status: parsed.status ?? null, mode: parsed.mode ?? null, order: parsed.order ?? null };
  const position = decodeListCursor(parsed.cursor ?? null, filters);
  const after_opened_at = position === null ? null : parseTimestamp(position.at);
  const after = position !== null && after_opened_at !== null ? { opened_at: after_opened_at, dispute_id: position.id } : null;
  const items = await kit.deps.disputes.list(kit.deps.database, session.white_label_id, {
    status: filters.status,
    livemode: filters.mode === null ? null : filters.mode === 'live',
    newest_first: filters.order === 'newest',
    after,
    limit: DISPUTES_PAGE_SIZE + 1,
  });
  const page = items.slice(0, DISPUTES_PAGE_SIZE);
  const last = page.at(-1);
  const next_cursor = items.length > DISPUTES_PAGE_SIZE && last ? encodeListCursor(last.opened_at, last.id, filters) : null;
  return { items: page, filters, cursor: after ? (parsed.cursor ?? null) : null, next_cursor };
}

async function disputeOf(kit: PageKit, session: ConsoleSession, request: ConsoleRequest): Promise<DisputeDetail> {
  const dispute_id = request.params.dispute_id ?? '';
  const notFound = new PageRefusal(404, 'not_found_heading', consoleTexts(kit.languageOf(request)).not_found);
  if (!DISPUTE_ID_PATTERN.test(dispute_id)) throw notFound;
  const dispute = await kit.deps.disputes.detail(kit.deps.database, session.white_label_id, dispute_id);
  if (!dispute) throw notFound;
  return dispute;
}

function sendDispute(kit: PageKit, reply: FastifyReply, request: ConsoleRequest, session: ConsoleSession, dispute: DisputeDetail, status: number, notice: CaseNotice | null): FastifyReply {
  const page = { dispute, session, notice, decision_key: newDecisionKey(), now: kit.deps.clock.now() };
  return kit.sendHtml(reply, status, renderDispute(kit.frameOf(request, session), page));
}

function resolutionOf(form: URLSearchParams): { outcome: 'withdrawer' | 'depositor'; note: string } {
  const outcome = form.get('outcome');
  if (outcome !== 'withdrawer' && outcome !== 'depositor') throw invalidField('outcome', 'invalid_value', 'withdrawer or depositor');
  const note = requireStaffNote(form.get('note'));
  if ([...note].length > STAFF_NOTE_MAX_CHARS) throw invalidField('note', 'too_long', `at most ${STAFF_NOTE_MAX_CHARS} characters`);
  return { outcome, note };
}

async function resolve(kit: PageKit, request: ConsoleRequest, reply: FastifyReply): Promise<FastifyReply> {
  const language = kit.languageOf(request);
  const form = await kit.readForm(request, reply);
  const session = await kit.postSession(request, form);
  requireRole(session, DISPUTE_ROLES, language, 'disputes_forbidden');
  const dispute_id = request.params.dispute_id ?? '';
  if (!DISPUTE_ID_PATTERN.test(dispute_id)) throw new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
  let refusal: ApiError;
  try {
    const { outcome, note } = resolutionOf(form);
    const resolved = await kit.deps.disputes.resolve(session.white_label_id, dispute_id, outcome, {
      actor: kit.deps.sessions.actorOf(session.credential_id, request.id),
      resolved_by: 'operator',
      resolver_id: session.credential_id,
      note,
      cause: { request_id: request.id, idempotency_key: decisionKeyOf(form), api_version: CURRENT_API_VERSION },
    });
    if (resolved.ok) {
      const query = new URLSearchParams({ done: 'resolved', ...(language === 'en' ? { lang: 'en' } : {}) });
      return reply.code(303).header('Location', `${CONSOLE_PATH}/disputes/${dispute_id}?${query.toString()}`).send();
    }
    refusal = resolved.error;
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refusal = error;
  }
  // Another brand's dispute, or an unknown one, is the 404 page here, whatever the refusal was.
  const dispute = await disputeOf(kit, session, request);
  const lost = refusal.code === 'dispute_already_resolved' && dispute.resolution !== null;
  const notice = lost && dispute.resolution ? { tone: 'error' as const, text: fill(consoleTexts(language).disputes_lost_race, { resolution: resolutionText(language, dispute.resolution) }) } : errorNotice(language, refusal);
  return sendDispute(kit, reply, request, session, dispute, refusal.status, notice);
}

export function registerDisputePages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/disputes', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, DISPUTE_ROLES, kit.languageOf(request), 'disputes_forbidden');
    return kit.sendHtml(reply, 200, renderDisputeList(kit.frameOf(request, session), await listPage(kit, session, request.query)));
  }));

  scope.get('/disputes/:dispute_id', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, DISPUTE_ROLES, kit.languageOf(request), 'disputes_forbidden');
    const dispute = await disputeOf(kit, session, request);
    const notice: CaseNotice | null = request.query?.done === 'resolved' ? { tone: 'success', text: consoleTexts(kit.languageOf(request)).disputes_done_resolved } : null;
    return sendDispute(kit, reply, request, session, dispute, 200, notice);
  }));

  scope.post('/disputes/:dispute_id/resolve', kit.page((request, reply) => resolve(kit, request, reply)));
}
