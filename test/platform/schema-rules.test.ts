import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rollback, type Queryable } from '../../src/platform/db.ts';
import { readMigrations } from '../../src/platform/migrate.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * Migration 0026 moved every CHECK over one column into a domain and gathered a table's CHECKs over several columns
 * into one rules function, because PostgreSQL prepares a table's CHECKs from their text on every statement that
 * writes it (docs/decisions/storage-and-jobs.md, "Schema rules"). These tests prove that no rule was lost or changed on
 * the way, that the moved rules still refuse what they refused (with the same constraint names), and that later
 * migrations keep the shape.
 */

let testDatabase: TestDatabase;

beforeAll(async () => {
  testDatabase = await createTestDatabase();
});

afterAll(async () => {
  await testDatabase?.close();
});

/** The position of migration 0026 in the numbered list. */
const RULES_AS_DOMAINS_VERSION = 26;

/** One rule as its name, its table and its expression's text as PostgreSQL prints a table's CHECK. */
type RuleText = Record<string, string>;

/**
 * A rule's text compared without what PostgreSQL's own printing changes: a column on a domain is printed with a cast
 * to its base type where it meets an operator (`(status)::text`), and a parsed expression's nested ANDs are flattened
 * (`(a AND b) AND c` is printed `a AND b AND c`), so casts of a bare column and parentheses are left out. Every
 * operand and operator must still be there, in the same order.
 */
function comparable(table: string, definition: string): string {
  const withoutCasts = definition.replace(/\(([a-z_][a-z0-9_]*)\)::(?:text|bigint|integer|boolean)\b/g, '$1');
  return `${table}: ${withoutCasts.replace(/[()]/g, '').replace(/\s+/g, ' ')}`;
}

/** Applies the numbered migrations up to `last_version` into a schema of their own, inside the caller's transaction. */
async function migrateIntoSchema(tx: Queryable, schema: string, last_version: number): Promise<void> {
  await tx.exec(`CREATE SCHEMA ${schema}; SET LOCAL search_path = ${schema}, pg_catalog`);
  for (const migration of readMigrations()) {
    if (migration.version > last_version) break;
    await tx.exec(migration.sql);
  }
}

/** Every table CHECK of a schema: its name, its table, its text as PostgreSQL prints it, and how many columns it names. */
async function tableChecks(tx: Queryable, schema: string): Promise<{ name: string; table: string; definition: string; column_count: number }[]> {
  const { rows } = await tx.query<{ name: string; table: string; definition: string; column_count: number }>(
    `SELECT k.conname AS name, c.relname AS table, pg_get_constraintdef(k.oid) AS definition, cardinality(k.conkey) AS column_count
       FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE k.contype = 'c' AND n.nspname = $1 ORDER BY 1`,
    [schema],
  );
  return rows;
}

/** The rules of a schema after 0026: table CHECKs, the domains of columns, and the rules each rules function raises. */
async function rulesAfter(tx: Queryable, schema: string): Promise<RuleText> {
  const rules: RuleText = {};
  for (const check of await tableChecks(tx, schema)) {
    if (check.name === `${check.table}_rules`) continue;
    rules[check.name] = comparable(check.table, check.definition);
  }
  const { rows: domainRules } = await tx.query<{ name: string; table: string; column: string; definition: string }>(
    `SELECT k.conname AS name, c.relname AS table, a.attname AS column, pg_get_constraintdef(k.oid) AS definition
       FROM pg_attribute a
       JOIN pg_class c ON c.oid = a.attrelid AND c.relkind = 'r'
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_type t ON t.oid = a.atttypid AND t.typtype = 'd'
       JOIN pg_constraint k ON k.contypid = t.oid AND k.contype = 'c'
      WHERE n.nspname = $1 AND a.attnum > 0 AND NOT a.attisdropped`,
    [schema],
  );
  for (const rule of domainRules) {
    rules[rule.name] = comparable(rule.table, rule.definition.replace(/\bVALUE\b/g, rule.column));
  }
  const { rows: functions } = await tx.query<{ table: string; source: string }>(
    `SELECT regexp_replace(p.proname, '_rules_hold$', '') AS table, p.prosrc AS source
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = $1 AND p.proname LIKE '%\\_rules\\_hold'`,
    [schema],
  );
  const raised =
    /IF NOT coalesce\((.*), true\) THEN\n\s+RAISE EXCEPTION 'new row for relation "([a-z_]+)" violates check constraint "([a-z0-9_]+)"'\n\s+USING ERRCODE = 'check_violation', CONSTRAINT = '([a-z0-9_]+)', TABLE = '([a-z_]+)';/g;
  for (const rulesFunction of functions) {
    for (const [, expression, tableInMessage, nameInMessage, name, table] of rulesFunction.source.matchAll(raised)) {
      expect([tableInMessage, nameInMessage, table]).toEqual([rulesFunction.table, name, rulesFunction.table]);
      rules[name!] = comparable(table!, `CHECK (${expression})`);
    }
  }
  return rules;
}

describe('rules of the schema (migration 0026)', () => {
  it('keeps every rule of migration 0025 under its name, on its table, with its expression', async () => {
    const compared = await testDatabase.database
      .transaction(async (tx) => {
        await migrateIntoSchema(tx, 'rules_before', RULES_AS_DOMAINS_VERSION - 1);
        const before: RuleText = {};
        for (const check of await tableChecks(tx, 'rules_before')) before[check.name] = comparable(check.table, check.definition);
        await migrateIntoSchema(tx, 'rules_after', RULES_AS_DOMAINS_VERSION);
        const after = await rulesAfter(tx, 'rules_after');
        throw new Rollback({ before, after });
      })
      .catch((error: unknown) => {
        if (error instanceof Rollback) return error.value as { before: RuleText; after: RuleText };
        throw error;
      });
    expect(Object.keys(compared.before).length).toBeGreaterThan(250);
    expect(compared.after).toEqual(compared.before);
  });

  it('has no CHECK over one column and at most one over several columns per table (later migrations too)', async () => {
    const checks = await tableChecks(testDatabase.database, 'public');
    expect(checks.filter((check) => check.column_count === 1).map((check) => check.name)).toEqual([]);
    const perTable = new Map<string, string[]>();
    for (const check of checks) perTable.set(check.table, [...(perTable.get(check.table) ?? []), check.name]);
    expect([...perTable.values()].filter((names) => names.length > 1)).toEqual([]);
  });

  it('refuses a value that breaks a column’s rule, naming the rule', async () => {
    await expect(
      testDatabase.database.query(
        `INSERT INTO brands (white_label_id, name, status, created_at, updated_at) VALUES ('wl_rules', 'Rules', 'closed', now(), now())`,
      ),
    ).rejects.toThrow(/violates check constraint "brands_status_check"/);
    const { rows } = await testDatabase.database.query<{ count: number }>(`SELECT count(*)::integer AS count FROM brands WHERE white_label_id = 'wl_rules'`);
    expect(rows[0]!.count).toBe(0);
  });

  it('refuses a row that breaks a rule over several columns, naming the rule, and accepts one that keeps them all', async () => {
    await testDatabase.database.query(
      `INSERT INTO brands (white_label_id, name, status, created_at, updated_at) VALUES ('wl_rules2', 'Rules', 'active', now(), now())`,
    );
    await testDatabase.database.query(
      `INSERT INTO merchants (white_label_id, merchant_id, name, status, created_at, updated_at) VALUES ('wl_rules2', 'mch_rules2', 'Rules', 'active', now(), now())`,
    );
    const insertClock = (status: string, advance_target: string | null) =>
      testDatabase.database.query(
        `INSERT INTO test_clocks (white_label_id, merchant_id, livemode, test_clock_id, frozen_time, status, attached, version,
           advance_target, advance_reached_time, advance_job_runs, advance_slice, created_at, updated_at)
         VALUES ('wl_rules2', 'mch_rules2', false, $1, now(), $2, false, 1, $3, $3, 0, 0, now(), now())`,
        [`clock_rules_${status}_${advance_target === null ? 'none' : 'set'}`, status, advance_target],
      );
    await expect(insertClock('advancing', null)).rejects.toThrow(/new row for relation "test_clocks" violates check constraint "test_clocks_check"/);
    await expect(insertClock('ready', '2026-11-27T00:00:00Z')).rejects.toThrow(/violates check constraint "test_clocks_check"/);
    await insertClock('ready', null);
    await insertClock('advancing', '2026-11-27T00:00:00Z');
    const { rows } = await testDatabase.database.query<{ status: string }>(
      `SELECT status FROM test_clocks WHERE white_label_id = 'wl_rules2' ORDER BY status`,
    );
    expect(rows.map((row) => row.status)).toEqual(['advancing', 'ready']);
  });
});
