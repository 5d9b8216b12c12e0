import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type ConsoleSession } from './sessions.ts';
import { requireRole, type PageKit } from './page-kit.ts';
import { bangkokDay, cursorField, dateField, makeCursor, readCursor, textField } from './search-filters.ts';
import { renderAuditLog, type AuditFilters, type AuditPage } from './audit-pages.ts';

/**
 * The audit log page: the session's brand's audit rows (src/platform/audit.ts; the tenancy module keeps the log),
 * newest first, filtered by who, what, the object and days, with a cursor. Operators and platform administrators
 * only (docs/decisions/backoffice-console.md, "The audit log page"): the log records the reviewers' own decisions
 * and sign-ins, and overseeing them is not the reviewers' job.
 */

export const AUDIT_PAGE_SIZE = 50;
export const AUDIT_ROLES: ReadonlyArray<ConsoleSession['role']> = ['operator', 'platform_admin'];

const auditQuerySchema = z
  .object({
    who: textField(100),
    action: textField(100),
    target_type: textField(100),
    target_id: textField(200),
    created_from: dateField,
    created_to: dateField,
    cursor: cursorField,
  })
  .passthrough();

function filtersOf(query: Record<string, unknown>): { filters: AuditFilters; cursor: string | undefined } {
  const parsed = auditQuerySchema.parse(query ?? {});
  const filters: AuditFilters = {
    who: parsed.who ?? null,
    action: parsed.action ?? null,
    target_type: parsed.target_type ?? null,
    target_id: parsed.target_id ?? null,
    created_from: bangkokDay(parsed.created_from, false) === null ? null : (parsed.created_from ?? null),
    created_to: bangkokDay(parsed.created_to, true) === null ? null : (parsed.created_to ?? null),
  };
  return { filters, cursor: parsed.cursor };
}

async function auditPage(kit: PageKit, session: ConsoleSession, query: Record<string, unknown>): Promise<AuditPage> {
  const { filters, cursor } = filtersOf(query);
  const key = JSON.stringify(filters);
  const after = readCursor(cursor, key);
  const { tenancy, database } = kit.deps;
  const rows = await tenancy.auditLog(database, session.white_label_id, filters.who, {
    action: filters.action,
    target_type: filters.target_type,
    target_id: filters.target_id,
    created_from: bangkokDay(filters.created_from ?? undefined, false),
    created_to: bangkokDay(filters.created_to ?? undefined, true),
    after: after && { created_at: after.created_at, audit_id: after.id },
    limit: AUDIT_PAGE_SIZE + 1,
  });
  const page = rows.slice(0, AUDIT_PAGE_SIZE);
  const last = page.at(-1);
  const holders = await tenancy.credentialHolders(database, session.white_label_id, page.filter((row) => row.actor_type === 'backoffice_credential').map((row) => row.actor_id));
  return {
    filters,
    rows: page,
    holders,
    cursor: after ? (cursor ?? null) : null,
    next_cursor: rows.length > AUDIT_PAGE_SIZE && last ? makeCursor({ created_at: last.created_at, id: last.audit_id }, key) : null,
    page_size: AUDIT_PAGE_SIZE,
  };
}

export function registerAuditPages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/audit', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, AUDIT_ROLES, kit.languageOf(request), 'audit_forbidden');
    return kit.sendHtml(reply, 200, renderAuditLog(kit.frameOf(request, session), await auditPage(kit, session, request.query)));
  }));
}
