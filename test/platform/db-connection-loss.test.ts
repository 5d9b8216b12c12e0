import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';

/**
 * A PostgreSQL restart with a fast shutdown (or pg_terminate_backend) ends every session with FATAL 57P01
 * "terminating connection due to administrator command". The chaos run (issue 13) found that a service
 * process died of it: a pooled connection checked out for a transaction has no 'error' listener of the
 * pool's, so the message, arriving while the transaction's code was between two statements, was an
 * unhandled 'error' event. The transaction must fail instead, and the pool must go on with new connections.
 */
describe.skipIf(!usingPostgres)('a transaction whose connection the server terminates', () => {
  let testDatabase: TestDatabase;
  let admin: pg.Client;

  beforeAll(async () => {
    testDatabase = await createTestDatabase();
    admin = new pg.Client({ connectionString: testDatabase.url! });
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.end();
    await testDatabase?.close();
  });

  it('fails that transaction without an uncaught error event, and the pool serves the next one', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.prependListener('uncaughtException', onUncaught);
    try {
      const database = testDatabase.database;
      let terminate: () => void = () => {};
      const terminated = new Promise<void>((resolve) => (terminate = resolve));
      const transaction = database.transaction(async (tx) => {
        const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const pid = rows[0]!.pid;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        terminate();
        // The FATAL message arrives while no statement of this transaction is running.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await tx.query('SELECT 1');
      });
      await terminated;
      await expect(transaction).rejects.toThrow();
      const { rows } = await database.query<{ one: number }>('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
      expect(await database.transaction(async (tx) => (await tx.query<{ two: number }>('SELECT 2 AS two')).rows)).toEqual([{ two: 2 }]);
      expect(uncaught).toEqual([]);
    } finally {
      process.removeListener('uncaughtException', onUncaught);
    }
  });
});
