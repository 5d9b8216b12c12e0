import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { DEPOSIT_STATUSES, type DepositStatus } from '../deposits/service.ts';
import { WITHDRAWAL_SEARCH_MAX_IDS, WITHDRAWAL_STATUSES, type WithdrawalStatus } from '../withdrawals/service.ts';
import { type ConsoleSession } from './sessions.ts';
import { PageRefusal, requireRole, type ConsoleRequest, type PageKit } from './page-kit.ts';
import { bangkokDay, cursorField, dateField, makeCursor, readCursor, textField } from './search-filters.ts';
import { renderOrderDetail, renderOrderSearch, type OrderDetailPage, type OrderFilters, type OrderSearchItem, type OrderSearchPage } from './orders-pages.ts';
import { consoleTexts } from './texts.ts';

/**
 * The orders area: a search over the brand's deposits and withdrawals, and one order's page with its bank
 * transfers, legs and fills, event timeline and ledger movements. Read only; every read is a service method of
 * the module that owns the data, scoped by the session's brand (another brand's order is the 404 page).
 */

export const ORDERS_PAGE_SIZE = 25;
/** The most events and ledger movements an order's page lists (an order has a handful; the bound keeps a page bounded). */
export const ORDER_DETAIL_LIST_LIMIT = 200;
const ORDER_ID_PATTERN = /^(dep|wdr)_[0-9A-Za-z]{1,64}$/;
const READ_ROLES: ReadonlyArray<ConsoleSession['role']> = ['reviewer', 'operator', 'platform_admin'];

const searchQuerySchema = z
  .object({
    kind: z.enum(['deposits', 'withdrawals']).optional().catch(undefined),
    id: textField(70),
    merchant_reference: textField(64),
    end_user_ref: textField(64),
    bank_reference: textField(64),
    status: z.string().regex(/^[a-z_]{1,40}$/).optional().catch(undefined),
    mode: z.enum(['test', 'live']).optional().catch(undefined),
    created_from: dateField,
    created_to: dateField,
    cursor: cursorField,
  })
  .passthrough();

/** The filters of a search: an id names its kind itself; a status of the other kind is left out. */
function filtersOf(query: Record<string, unknown>): { filters: OrderFilters; cursor: string | undefined } {
  const parsed = searchQuerySchema.parse(query ?? {});
  const kind = parsed.id?.startsWith('wdr_') ? 'withdrawals' : parsed.id?.startsWith('dep_') ? 'deposits' : (parsed.kind ?? 'deposits');
  const statuses: readonly string[] = kind === 'deposits' ? DEPOSIT_STATUSES : WITHDRAWAL_STATUSES;
  const filters: OrderFilters = {
    kind,
    id: parsed.id ?? null,
    merchant_reference: parsed.merchant_reference ?? null,
    end_user_ref: parsed.end_user_ref ?? null,
    bank_reference: parsed.bank_reference ?? null,
    status: parsed.status !== undefined && statuses.includes(parsed.status) ? parsed.status : null,
    mode: parsed.mode ?? null,
    created_from: bangkokDay(parsed.created_from, false) === null ? null : (parsed.created_from ?? null),
    created_to: bangkokDay(parsed.created_to, true) === null ? null : (parsed.created_to ?? null),
  };
  return { filters, cursor: parsed.cursor };
}

/**
 * The ids the search is limited to, or null when neither an id nor a bank reference was given. A bank reference
 * names the deposits whose slips claimed that transfer, and for withdrawals the orders those deposits paid.
 */
async function idsOf(kit: PageKit, white_label_id: string, filters: OrderFilters): Promise<string[] | null> {
  const { database, verification, withdrawals } = kit.deps;
  let ids: string[] | null = null;
  if (filters.id !== null) ids = ORDER_ID_PATTERN.test(filters.id) ? [filters.id] : [];
  if (filters.bank_reference !== null) {
    let named = await verification.depositIdsOfTransferReference(database, white_label_id, filters.bank_reference, WITHDRAWAL_SEARCH_MAX_IDS);
    if (filters.kind === 'withdrawals') named = await withdrawals.withdrawalIdsOfDeposits(database, white_label_id, named, WITHDRAWAL_SEARCH_MAX_IDS);
    ids = ids === null ? named : ids.filter((id) => named.includes(id));
  }
  return ids;
}

async function searchPage(kit: PageKit, session: ConsoleSession, query: Record<string, unknown>): Promise<OrderSearchPage> {
  const { filters, cursor } = filtersOf(query);
  const key = JSON.stringify(filters);
  const after = readCursor(cursor, key);
  const ids = await idsOf(kit, session.white_label_id, filters);
  const common = {
    merchant_reference: filters.merchant_reference,
    end_user_ref: filters.end_user_ref,
    livemode: filters.mode === null ? null : filters.mode === 'live',
    created_from: bangkokDay(filters.created_from ?? undefined, false),
    created_to: bangkokDay(filters.created_to ?? undefined, true),
    limit: ORDERS_PAGE_SIZE + 1,
  };
  const { database, deposits, withdrawals } = kit.deps;
  let items: OrderSearchItem[] = [];
  if (ids === null || ids.length > 0) {
    items =
      filters.kind === 'deposits'
        ? (await deposits.searchInBrand(database, session.white_label_id, { ...common, deposit_ids: ids, status: filters.status as DepositStatus | null, after: after && { created_at: after.created_at, deposit_id: after.id } })).map((row) => ({ ...row, kind: 'deposit' as const, id: row.deposit_id }))
        : (await withdrawals.searchInBrand(database, session.white_label_id, { ...common, withdrawal_ids: ids, status: filters.status as WithdrawalStatus | null, after: after && { created_at: after.created_at, withdrawal_id: after.id } })).map((row) => ({ ...row, kind: 'withdrawal' as const, id: row.withdrawal_id }));
  }
  const page = items.slice(0, ORDERS_PAGE_SIZE);
  const last = page.at(-1);
  return {
    filters,
    items: page,
    cursor: after ? (cursor ?? null) : null,
    next_cursor: items.length > ORDERS_PAGE_SIZE && last ? makeCursor(last, key) : null,
    statuses: filters.kind === 'deposits' ? DEPOSIT_STATUSES : WITHDRAWAL_STATUSES,
    page_size: ORDERS_PAGE_SIZE,
  };
}

/** One order of the session's brand with everything its page shows; null for an unknown id or another brand's. */
async function detailPage(kit: PageKit, white_label_id: string, order_id: string): Promise<OrderDetailPage | null> {
  const { database, deposits, withdrawals, verification, events, ledger } = kit.deps;
  if (!ORDER_ID_PATTERN.test(order_id)) return null;
  const timeline = () => events.timelineOfObject(database, white_label_id, order_id, ORDER_DETAIL_LIST_LIMIT);
  if (order_id.startsWith('dep_')) {
    const detail = await deposits.backOfficeDetail(database, white_label_id, order_id);
    if (!detail) return null;
    const paid = [...new Set(detail.legs.flatMap((leg) => (leg.withdrawal_id === null ? [] : [leg.withdrawal_id])))].slice(0, WITHDRAWAL_SEARCH_MAX_IDS);
    // Only the withdrawals the back office may open are links; the service's own (the sandbox counterparty's) are text.
    const visible = paid.length === 0 ? [] : await withdrawals.searchInBrand(database, white_label_id, { withdrawal_ids: paid, merchant_reference: null, end_user_ref: null, status: null, livemode: null, created_from: null, created_to: null, after: null, limit: WITHDRAWAL_SEARCH_MAX_IDS });
    return {
      kind: 'deposit',
      ...detail,
      visible_withdrawals: new Set(visible.map((row) => row.withdrawal_id)),
      transfers: await verification.transfersOf(database, white_label_id, order_id),
      timeline: await timeline(),
      movements: await ledger.movementsOfOrder(database, white_label_id, { type: 'deposit_order', id: order_id }, [], ORDER_DETAIL_LIST_LIMIT),
    };
  }
  const detail = await withdrawals.backOfficeDetail(database, white_label_id, order_id);
  if (!detail) return null;
  const fill_movements = detail.legs.flatMap((leg) => [leg.balance_transaction_id, leg.fee_balance_transaction_id].filter((id): id is string => id !== null));
  return {
    kind: 'withdrawal',
    ...detail,
    timeline: await timeline(),
    movements: await ledger.movementsOfOrder(database, white_label_id, { type: 'withdrawal_order', id: order_id }, fill_movements, ORDER_DETAIL_LIST_LIMIT),
  };
}

export function registerOrderPages(scope: FastifyInstance, kit: PageKit): void {
  scope.get('/orders', kit.page(async (request, reply) => {
    const session = await kit.sessionOf(request, true);
    requireRole(session, READ_ROLES, kit.languageOf(request), 'forbidden_heading');
    return kit.sendHtml(reply, 200, renderOrderSearch(kit.frameOf(request, session), await searchPage(kit, session, request.query)));
  }));

  scope.get('/orders/:order_id', kit.page(async (request: ConsoleRequest, reply) => {
    const session = await kit.sessionOf(request, true);
    const language = kit.languageOf(request);
    requireRole(session, READ_ROLES, language, 'forbidden_heading');
    const page = await detailPage(kit, session.white_label_id, request.params.order_id ?? '');
    if (!page) throw new PageRefusal(404, 'not_found_heading', consoleTexts(language).not_found);
    return kit.sendHtml(reply, 200, renderOrderDetail(kit.frameOf(request, session), page, ORDER_DETAIL_LIST_LIMIT));
  }));
}
