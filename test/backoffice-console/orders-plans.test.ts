import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { usingPostgres } from '../support/database.ts';
import { settledDeposit } from '../support/refunds.ts';
import { accountOf, fundAvailable, verifiedBeneficiary } from '../support/withdrawals.ts';
import type { Queryable, QueryResult } from '../../src/platform/db.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';

/**
 * The console's searches are served by indexes (migration 0042): on PostgreSQL, with a few hundred thousand
 * generated orders and audit rows of one brand, every combination of the orders search's filters (with and
 * without a cursor, for deposits and withdrawals), of the audit log's filters, and the bank reference's look-ups
 * are planned without a sequential scan of their tables. The statements are the services' own, captured as they
 * run, and explained with their parameters. PGlite is skipped: generating the rows there takes minutes, and its
 * planner is PostgreSQL's, so the PostgreSQL run is the one that says something.
 */

const GENERATED = 200_000;
const BIG_TABLES = ['deposit_orders', 'withdrawal_orders', 'audit_log', 'slip_transfers'];

let app: TestApp;
let white_label_id: string;
let seedDeposit: string;
let seedWithdrawal: WithdrawalView;

interface Captured {
  sql: string;
  params: readonly unknown[];
}

/** A Queryable that runs each statement and keeps it, so that the test explains exactly what the service sent. */
function capturing(into: Captured[]): Queryable {
  const database = app.testDatabase.database;
  return {
    query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
      into.push({ sql, params });
      return database.query<Row>(sql, params);
    },
    exec: (sql: string) => database.exec(sql),
  };
}

/** Every node of a JSON plan. */
function nodesOf(plan: unknown): Record<string, unknown>[] {
  const nodes: Record<string, unknown>[] = [];
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(visit);
    const fields = node as Record<string, unknown>;
    if (typeof fields['Node Type'] === 'string') nodes.push(fields);
    Object.values(fields).forEach(visit);
  };
  visit(plan);
  return nodes;
}

/** The sequential scans of the big tables in the plans of these statements, described for the failure message. */
async function sequentialScans(statements: Captured[]): Promise<string[]> {
  const found: string[] = [];
  for (const statement of statements) {
    const { rows } = await app.testDatabase.database.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${statement.sql}`, statement.params);
    const plan = rows[0]?.['QUERY PLAN'];
    for (const node of nodesOf(typeof plan === 'string' ? JSON.parse(plan) : plan)) {
      if (node['Node Type'] === 'Seq Scan' && BIG_TABLES.includes(String(node['Relation Name']))) found.push(`${String(node['Relation Name'])}: ${statement.sql.replace(/\s+/g, ' ')} ${JSON.stringify(statement.params)}`);
    }
  }
  return found;
}

/** Every subset of `names`. */
function subsets<Name>(names: readonly Name[]): Name[][] {
  return names.reduce<Name[][]>((all, name) => [...all, ...all.map((subset) => [...subset, name])], [[]]);
}

async function generate(): Promise<void> {
  const db = app.testDatabase.database;
  const copy = async (table: string, key: string, seed: string, overrides: Record<string, string>) => {
    const { rows } = await db.query<{ column_name: string }>('SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position', [table]);
    const columns = rows.map((row) => row.column_name);
    const select = columns.map((column) => overrides[column] ?? `t.${column}`);
    await db.query(`INSERT INTO ${table} (${columns.join(', ')}) SELECT ${select.join(', ')} FROM ${table} t, generate_series(1, ${GENERATED}) AS g WHERE t.white_label_id = $1 AND t.${key} = $2`, [white_label_id, seed]);
  };
  const common = {
    merchant_reference: `'gen-' || g`,
    end_user_ref: `'user-' || (g % 50000)`,
    livemode: 'false',
    created_at: `timestamptz '2026-01-01' + g * interval '1 minute'`,
  };
  await copy('deposit_orders', 'deposit_id', seedDeposit, { ...common, deposit_id: `'dep_gen' || g`, status: `CASE WHEN g % 10 = 0 THEN 'awaiting_payment' ELSE t.status END` });
  await copy('withdrawal_orders', 'withdrawal_id', seedWithdrawal.id, { ...common, withdrawal_id: `'wdr_gen' || g` });
  await db.query(
    `INSERT INTO slip_transfers (white_label_id, livemode, sending_bank_code, trans_ref, deposit_id, receipt_id, amount_minor, created_at)
     SELECT white_label_id, livemode, '002', 'TRGEN' || deposit_id, deposit_id, 'rcpt_gen', amount_minor, created_at FROM deposit_orders WHERE white_label_id = $1 AND deposit_id LIKE 'dep\\_gen%'`,
    [white_label_id],
  );
  await db.query(
    `INSERT INTO audit_log (white_label_id, audit_id, actor_type, actor_id, action, target_type, target_id, request_id, details, created_at)
     SELECT $1, 'aud_gen' || g, 'backoffice_credential', 'boc_gen' || (g % 40), 'action.' || (g % 30), 'type_' || (g % 12), 'target_' || (g % 20000), NULL, '{}'::jsonb,
            timestamptz '2026-01-01' + g * interval '1 minute' FROM generate_series(1, ${GENERATED}) AS g`,
    [white_label_id],
  );
  for (const table of BIG_TABLES) await db.query(`ANALYZE ${table}`);
}

beforeAll(async () => {
  if (!usingPostgres) return;
  app = await createTestApp();
  white_label_id = app.sandbox.white_label_id;
  seedDeposit = (await settledDeposit(app, app.sandbox, 10_000)).id;
  await fundAvailable(app, accountOf(app.sandbox), 1_000_000);
  const beneficiary_id = await verifiedBeneficiary(app, accountOf(app.sandbox));
  const created = await app.signed({
    method: 'POST',
    url: '/v1/pay/withdrawals',
    idempotency_key: crypto.randomUUID(),
    body: { amount_minor: 30_000, currency: 'THB', merchant_reference: 'plan-seed', end_user_ref: 'plan-seed', beneficiary_id },
  });
  expect(created.statusCode, created.body).toBe(201);
  seedWithdrawal = created.json<WithdrawalView>();
  await generate();
}, 600_000);

afterAll(async () => {
  if (app) await app.close();
});

const ORDER_FILTERS = ['ids', 'merchant_reference', 'end_user_ref', 'status', 'livemode', 'dates', 'cursor'] as const;

function orderFilters(chosen: readonly (typeof ORDER_FILTERS)[number][], status: string) {
  const has = (name: (typeof ORDER_FILTERS)[number]) => chosen.includes(name);
  return {
    merchant_reference: has('merchant_reference') ? 'gen-4242' : null,
    end_user_ref: has('end_user_ref') ? 'user-4242' : null,
    status: has('status') ? status : null,
    livemode: has('livemode') ? status === 'settled' || status === 'open' : null,
    created_from: has('dates') ? new Date('2026-02-01T00:00:00Z') : null,
    created_to: has('dates') ? new Date('2026-02-08T00:00:00Z') : null,
    limit: 26,
  } as const;
}

describe.skipIf(!usingPostgres)('the console searches use indexes (PostgreSQL, generated rows)', () => {
  it('every combination of the deposit search filters', async () => {
    const statements: Captured[] = [];
    for (const chosen of subsets(ORDER_FILTERS)) {
      for (const status of ['settled', 'under_review'] as const) {
        await app.instance.services.deposits.searchInBrand(capturing(statements), white_label_id, {
          ...orderFilters(chosen, status),
          status: chosen.includes('status') ? status : null,
          deposit_ids: chosen.includes('ids') ? ['dep_gen4242', 'dep_gen17'] : null,
          after: chosen.includes('cursor') ? { created_at: new Date('2026-03-01T00:00:00Z'), deposit_id: 'dep_gen1' } : null,
        });
      }
    }
    expect(statements.length).toBeGreaterThanOrEqual(2 ** ORDER_FILTERS.length);
    expect(await sequentialScans(statements)).toEqual([]);
  }, 120_000);

  it('every combination of the withdrawal search filters', async () => {
    const statements: Captured[] = [];
    for (const chosen of subsets(ORDER_FILTERS)) {
      for (const status of ['open', 'rejected'] as const) {
        await app.instance.services.withdrawals.searchInBrand(capturing(statements), white_label_id, {
          ...orderFilters(chosen, status),
          status: chosen.includes('status') ? status : null,
          withdrawal_ids: chosen.includes('ids') ? ['wdr_gen4242', 'wdr_gen17'] : null,
          after: chosen.includes('cursor') ? { created_at: new Date('2026-03-01T00:00:00Z'), withdrawal_id: 'wdr_gen1' } : null,
        });
      }
    }
    expect(await sequentialScans(statements.filter((statement) => /withdrawal_orders/.test(statement.sql)))).toEqual([]);
  }, 120_000);

  it('the bank reference, and an order page, read by index', async () => {
    const statements: Captured[] = [];
    const db = capturing(statements);
    const services = app.instance.services;
    const ids = await services.verification.depositIdsOfTransferReference(db, white_label_id, 'TRGENdep_gen4242', 50);
    expect(ids).toEqual(['dep_gen4242']);
    await services.withdrawals.withdrawalIdsOfDeposits(db, white_label_id, ids, 50);
    await services.verification.transfersOf(db, white_label_id, 'dep_gen4242');
    await services.deposits.backOfficeDetail(db, white_label_id, 'dep_gen4242');
    await services.events.timelineOfObject(db, white_label_id, 'dep_gen4242', 200);
    await services.ledger.movementsOfOrder(db, white_label_id, { type: 'deposit_order', id: 'dep_gen4242' }, [], 200);
    expect(await sequentialScans(statements)).toEqual([]);
  }, 60_000);

  it('every combination of the audit log filters', async () => {
    const statements: Captured[] = [];
    const names = ['who', 'action', 'target_type', 'target_id', 'dates', 'cursor'] as const;
    for (const chosen of subsets(names)) {
      const has = (name: (typeof names)[number]) => chosen.includes(name);
      const rows = await app.instance.services.tenancy.auditLog(capturing(statements), white_label_id, has('who') ? 'boc_gen7' : null, {
        action: has('action') ? 'action.7' : null,
        target_type: has('target_type') ? 'type_7' : null,
        target_id: has('target_id') ? 'target_4207' : null,
        created_from: has('dates') ? new Date('2026-02-01T00:00:00Z') : null,
        created_to: has('dates') ? new Date('2026-02-08T00:00:00Z') : null,
        after: has('cursor') ? { created_at: new Date('2026-03-01T00:00:00Z'), audit_id: 'aud_gen1' } : null,
        limit: 51,
      });
      expect(rows.length).toBeLessThanOrEqual(51);
    }
    // A person as who: their credentials first, then the rows.
    await app.instance.services.tenancy.auditLog(capturing(statements), white_label_id, 'stf_01ARZ3NDEKTSV4RRFFQ69G5FAV', { action: null, target_type: null, target_id: null, created_from: null, created_to: null, after: null, limit: 51 });
    expect(await sequentialScans(statements)).toEqual([]);
  }, 120_000);
});
