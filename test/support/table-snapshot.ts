import type { Queryable } from '../../src/platform/db.ts';

/**
 * Snapshots of every table of the database, to prove that a request changed nothing (or nothing of one
 * tenant's). A snapshot holds each row's version (`ctid` and `xmin`), which every INSERT, UPDATE and
 * DELETE changes, even a write of identical values, and which costs nothing to read however large the
 * row. The table list is read from the catalogue, so a table added by a later migration is covered
 * without touching the tests.
 */

/**
 * Tables that every authenticated request writes by design, whatever its answer: the nonce of its
 * signature and its rate window. A refusal may change these and nothing else.
 */
export const ACCESS_STATE_TABLES: ReadonlySet<string> = new Set(['request_nonces', 'rate_limit_counters']);

/** Per table, the versions of its rows. */
export type Snapshot = Map<string, ReadonlySet<string>>;

export async function tableNames(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  return rows.map((row) => row.name);
}

/** One round trip: the row versions of every table. */
export async function snapshotTables(db: Queryable, tables: readonly string[]): Promise<Snapshot> {
  const parts = tables.map((table) => `SELECT '${table}' AS name, coalesce(string_agg(ctid::text || xmin::text, ' '), '') AS versions FROM "${table}"`);
  const { rows } = await db.query<{ name: string; versions: string }>(parts.join('\nUNION ALL\n'));
  return new Map(rows.map((row) => [row.name, new Set(row.versions === '' ? [] : row.versions.split(' '))]));
}

function sameSet(left: ReadonlySet<string>, right: ReadonlySet<string>): boolean {
  if (left.size !== right.size) return false;
  for (const item of left) if (!right.has(item)) return false;
  return true;
}

/** Tables whose rows were written between two snapshots (inserted, updated or deleted). */
export function changedTables(before: Snapshot, after: Snapshot, ignore: ReadonlySet<string> = ACCESS_STATE_TABLES): string[] {
  const changed: string[] = [];
  for (const [table, versions] of after) {
    if (ignore.has(table)) continue;
    if (!sameSet(before.get(table) ?? new Set(), versions)) changed.push(table);
  }
  return changed;
}

/**
 * The rows written between two snapshots (new versions) that mention one of `markers` (a tenant's ids):
 * `table: marker` for each. A request of one tenant that writes a row naming another tenant's object
 * has touched that tenant's data.
 */
export async function writtenRowsMentioning(db: Queryable, before: Snapshot, after: Snapshot, markers: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const table of changedTables(before, after)) {
    const previous = before.get(table) ?? new Set<string>();
    const fresh = [...(after.get(table) ?? [])].filter((version) => !previous.has(version));
    if (fresh.length === 0) continue;
    const { rows } = await db.query<{ text: string }>(`SELECT r::text AS text FROM "${table}" r WHERE ctid::text || xmin::text = ANY($1::text[])`, [fresh]);
    for (const row of rows) for (const marker of markers) if (row.text.includes(marker)) found.push(`${table}: ${marker}`);
  }
  return found;
}
