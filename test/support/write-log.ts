import type { PGlite } from '@electric-sql/pglite';
import type { Database } from '../../src/platform/db.ts';
import { ACCESS_STATE_TABLES, tableNames } from './table-snapshot.ts';

/**
 * A test-only record of every committed change: a row trigger on every table of the test database
 * (but the access-state tables every request writes by design) reports the table and operation. A
 * change that rolls back is never reported, so "this request changed nothing" is a cheap check.
 *
 * On PostgreSQL the trigger appends to `test_write_log`, read with one query after each request. On
 * PGlite (in process, where a query costs far more than the check is worth across tens of thousands of
 * requests) the trigger also sends a NOTIFY, which PostgreSQL delivers only when the transaction commits,
 * and PGlite delivers to its listener before the committing statement returns, so before the request's
 * answer: the check reads what arrived, with no query at all.
 */

export interface WriteLog {
  /** The committed changes since the last call (table and operation, in order), and moves past them. */
  since(): Promise<{ table: string; operation: string }[]>;
}

const CHANNEL = 'test_write_log';

export async function installWriteLog(db: Database): Promise<WriteLog> {
  const tables = (await tableNames(db)).filter((table) => !ACCESS_STATE_TABLES.has(table));
  await db.query(`CREATE TABLE test_write_log (id bigserial PRIMARY KEY, table_name text NOT NULL, operation text NOT NULL)`);
  // An UPDATE that writes a row's own values back is how a lock is taken (the feed locks of
  // src/events/repository.ts): it changes nothing, so it is not reported.
  await db.query(`CREATE FUNCTION test_log_write() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' AND OLD IS NOT DISTINCT FROM NEW THEN RETURN NULL; END IF;
      INSERT INTO test_write_log (table_name, operation) VALUES (TG_TABLE_NAME, TG_OP);
      PERFORM pg_notify('${CHANNEL}', TG_TABLE_NAME || ' ' || TG_OP);
      RETURN NULL;
    END $$`);
  for (const table of tables) {
    await db.query(`CREATE TRIGGER test_log_write AFTER INSERT OR UPDATE OR DELETE ON "${table}" FOR EACH ROW EXECUTE FUNCTION test_log_write()`);
  }
  if (db.engine === 'pglite') {
    const pglite = (db as unknown as { pglite: PGlite }).pglite;
    const arrived: { table: string; operation: string }[] = [];
    await pglite.listen(CHANNEL, (payload) => {
      const [table = '', operation = ''] = payload.split(' ');
      arrived.push({ table, operation });
    });
    return {
      async since() {
        return arrived.splice(0);
      },
    };
  }
  let seen = 0;
  return {
    async since() {
      const { rows } = await db.query<{ id: string; table_name: string; operation: string }>(
        'SELECT l.id::text AS id, l.table_name, l.operation FROM test_write_log l WHERE l.id > $1 ORDER BY l.id',
        [seen],
      );
      if (rows.length > 0) seen = Number(rows.at(-1)!.id);
      return rows.map((row) => ({ table: row.table_name, operation: row.operation }));
    },
  };
}
