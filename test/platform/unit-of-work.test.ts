import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { combineWrites, deferWrite, isUnitOfWork, type DeferredWrite } from '../../src/platform/unit-of-work.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * Deferred writes (src/platform/unit-of-work.ts) on the real engines: queued writes leave in one
 * statement, a read or a second write of a row flushes first, counts are checked at the flush and a
 * failed check rolls the whole transaction back.
 */

let testDatabase: TestDatabase;
let sent: string[] = [];

beforeAll(async () => {
  testDatabase = await createTestDatabase();
  await testDatabase.database.exec('CREATE TABLE uow_rows (id text PRIMARY KEY, value integer NOT NULL CHECK (value >= 0))');
  testDatabase.database.statement_observer = (sql) => sent.push(sql);
});
afterAll(async () => {
  await testDatabase.close();
});
beforeEach(async () => {
  await testDatabase.database.query('DELETE FROM uow_rows');
  sent = [];
});

function insert(id: string, value: number): DeferredWrite {
  return { sql: 'INSERT INTO uow_rows (id, value) VALUES ($1, $2)', params: [id, value], expected_rows: 1, rows_written: [`uow_rows:${id}`] };
}

function update(id: string, value: number, extra: Partial<DeferredWrite> = {}): DeferredWrite {
  return { sql: 'UPDATE uow_rows SET value = $2 WHERE id = $1', params: [id, value], expected_rows: 1, rows_written: [`uow_rows:${id}`], ...extra };
}

async function rows(): Promise<Record<string, number>> {
  const { rows: stored } = await testDatabase.database.query<{ id: string; value: number }>('SELECT id, value FROM uow_rows ORDER BY id');
  return Object.fromEntries(stored.map((row) => [row.id, row.value]));
}

describe('deferred writes', () => {
  it('sends the writes of a transaction as one statement before COMMIT', async () => {
    await testDatabase.database.transaction(async (tx) => {
      expect(isUnitOfWork(tx)).toBe(true);
      for (const id of ['a', 'b', 'c']) await deferWrite(tx, insert(id, 1));
      expect(sent).toEqual([]);
    });
    // One round trip: BEGIN, the writes as one statement, COMMIT.
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^BEGIN;\nWITH w0 AS \(INSERT INTO uow_rows .*VALUES \(\$1, \$2\) RETURNING 1\), w1 AS \(.*\(\$3, \$4\) RETURNING 1\), w2 AS/);
    expect(sent[0]).toMatch(/;\nCOMMIT$/);
    expect(await rows()).toEqual({ a: 1, b: 1, c: 1 });
  });

  it('sends BEGIN with the first statement and nothing at all for a transaction that sent nothing', async () => {
    await testDatabase.database.transaction(async (tx) => {
      await tx.query('SELECT 1');
      await tx.query('SELECT 2');
    });
    expect(sent).toEqual(['BEGIN;\nSELECT 1', 'SELECT 2', 'COMMIT']);
    sent = [];
    expect(await testDatabase.database.transaction(async () => 'nothing sent')).toBe('nothing sent');
    expect(sent).toEqual([]);
  });

  it('flushes before a read, so that the read sees the writes, in the same round trip', async () => {
    const seen = await testDatabase.database.transaction(async (tx) => {
      await deferWrite(tx, insert('a', 5));
      const { rows: read } = await tx.query<{ value: number }>('SELECT value FROM uow_rows WHERE id = $1', ['a']);
      return read[0]?.value;
    });
    expect(seen).toBe(5);
    expect(sent.filter((sql) => sql.includes('INSERT'))).toHaveLength(1);
    // BEGIN, the queued write (checking its own count) and the read in one round trip, then COMMIT alone.
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/^BEGIN;\nWITH w0 AS \(INSERT INTO uow_rows .* SELECT deferred_write_check\(0, .*;\nSELECT value FROM uow_rows WHERE id = \$1$/);
    expect(sent[1]).toBe('COMMIT');
  });

  it('starts a new statement when a row is written twice: an insert then its update both apply, in order', async () => {
    await testDatabase.database.transaction(async (tx) => {
      await deferWrite(tx, insert('a', 1));
      await deferWrite(tx, insert('b', 1));
      await deferWrite(tx, update('a', 2));
      await deferWrite(tx, update('a', 3));
    });
    // [insert a, insert b], [update a → 2] and [update a → 3], three statements sent with BEGIN and COMMIT in one round trip.
    expect(sent).toHaveLength(1);
    expect(sent[0]!.split(';\n').map((statement) => statement.slice(0, 18))).toEqual(['BEGIN', 'WITH w0 AS (INSERT', 'WITH w0 AS (UPDATE', 'WITH w0 AS (UPDATE', 'COMMIT']);
    expect(await rows()).toEqual({ a: 3, b: 1 });
  });

  it('sends every statement of the queue ahead of a read in its round trip; a count that differs in an earlier one throws its write’s own error', async () => {
    const seen = await testDatabase.database.transaction(async (tx) => {
      await deferWrite(tx, insert('a', 1));
      await deferWrite(tx, update('a', 2));
      const { rows: read } = await tx.query<{ value: number }>('SELECT value FROM uow_rows WHERE id = $1', ['a']);
      return read[0]?.value;
    });
    expect(seen).toBe(2);
    expect(sent).toHaveLength(2);
    expect(sent[0]!.split(';\n')).toHaveLength(4);
    expect(sent[0]).toMatch(/^BEGIN;\nWITH w0 AS \(INSERT .*deferred_write_check\(0, .*;\nWITH w0 AS \(UPDATE .*deferred_write_check\(1, .*;\nSELECT value/);

    // The failing write is the second of the queue, in its first statement; the statement behind it and the read are refused.
    class Taken extends Error {}
    sent = [];
    await expect(
      testDatabase.database.transaction(async (tx) => {
        await deferWrite(tx, insert('b', 1));
        await deferWrite(tx, { ...update('missing', 1), on_unexpected_rows: (changed) => new Taken(`changed ${changed}`) });
        await deferWrite(tx, update('b', 2));
        await tx.query('SELECT 1');
      }),
    ).rejects.toThrow(Taken);
    expect(sent).toHaveLength(2);
    expect(sent.at(-1)).toBe('ROLLBACK');
    // With COMMIT: the same, and the COMMIT becomes a rollback.
    sent = [];
    await expect(
      testDatabase.database.transaction(async (tx) => {
        await deferWrite(tx, insert('b', 1));
        await deferWrite(tx, update('b', 2));
        await deferWrite(tx, { ...update('missing', 1), on_unexpected_rows: (changed) => new Taken(`changed ${changed}`) });
      }),
    ).rejects.toThrow(Taken);
    expect(sent).toHaveLength(1);
    expect(await rows()).toEqual({ a: 2 });
  });

  it('keeps only the last write of a `replaces` key in a batch', async () => {
    await testDatabase.database.query('INSERT INTO uow_rows (id, value) VALUES ($1, 0)', ['counter']);
    sent = [];
    await testDatabase.database.transaction(async (tx) => {
      for (let value = 1; value <= 5; value += 1) await deferWrite(tx, update('counter', value, { rows_written: [], replaces: 'counter' }));
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatch(/^BEGIN;\nWITH w0 AS \(UPDATE uow_rows SET value = \$2 WHERE id = \$1 RETURNING 1\) SELECT deferred_write_check\(0, .*;\nCOMMIT$/);
    expect(await rows()).toEqual({ counter: 5 });
  });

  it('throws the write’s own error when its count differs, and rolls every write of the transaction back', async () => {
    class Taken extends Error {}
    await expect(
      testDatabase.database.transaction(async (tx) => {
        await deferWrite(tx, insert('a', 1));
        await deferWrite(tx, { ...update('missing', 1), on_unexpected_rows: (changed) => new Taken(`changed ${changed}`) });
      }),
    ).rejects.toThrow(Taken);
    // The last batch checked its counts itself and failed, so the COMMIT sent with it rolled back: no ROLLBACK follows.
    expect(sent).toHaveLength(1);
    expect(await rows()).toEqual({});
  });

  it('checks the counts of a batch sent with a read in the batch itself: the read is refused, the write’s own error thrown, and all rolls back', async () => {
    class Taken extends Error {}
    let caught: unknown = null;
    await expect(
      testDatabase.database.transaction(async (tx) => {
        await deferWrite(tx, insert('a', 1));
        await deferWrite(tx, { ...update('missing', 1), on_unexpected_rows: (changed) => new Taken(`changed ${changed}`) });
        try {
          await tx.query('SELECT 1');
        } catch (error) {
          caught = error;
          throw error;
        }
      }),
    ).rejects.toThrow(Taken);
    expect(caught).toBeInstanceOf(Taken);
    expect((caught as Error).message).toBe('changed 0');
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(/;\nSELECT 1$/);
    expect(sent.at(-1)).toBe('ROLLBACK');
    expect(await rows()).toEqual({});
  });

  it('a write that fails its constraint with a read behind it throws its own error, not the read’s refusal', async () => {
    await expect(
      testDatabase.database.transaction(async (tx) => {
        await deferWrite(tx, insert('a', -1));
        await tx.query('SELECT 1');
      }),
    ).rejects.toThrow(/check constraint/);
    expect(await rows()).toEqual({});
  });

  it('reports a count differing without an error of its own as a broken invariant; a constraint error surfaces at the flush', async () => {
    await expect(testDatabase.database.transaction((tx) => deferWrite(tx, update('missing', 1)))).rejects.toThrow(/changed 0 rows instead of 1/);
    await expect(
      testDatabase.database.transaction(async (tx) => {
        await deferWrite(tx, insert('a', 1));
        await deferWrite(tx, insert('b', -1));
      }),
    ).rejects.toThrow(/check constraint/);
    expect(await rows()).toEqual({});
  });

  it('runs at once outside a transaction, with the same checks', async () => {
    await deferWrite(testDatabase.database, insert('a', 1));
    expect(sent).toEqual(['INSERT INTO uow_rows (id, value) VALUES ($1, $2)']);
    await expect(deferWrite(testDatabase.database, update('missing', 1))).rejects.toThrow(/changed 0 rows/);
    expect(await rows()).toEqual({ a: 1 });
  });

  it('refuses a write it cannot combine safely', () => {
    expect(() => combineWrites([])).toThrow();
    const refused = [
      'SELECT 1',
      'WITH x AS (SELECT 1) INSERT INTO uow_rows SELECT * FROM x',
      'INSERT INTO uow_rows (id, value) VALUES ($1, $2) RETURNING id',
      "INSERT INTO uow_rows (id, value) VALUES ($$a$$, $1)",
    ];
    for (const sql of refused) {
      expect(() => combineWrites([{ sql, params: ['a', 1] }]), sql).toThrow();
    }
    expect(() => combineWrites([{ sql: 'INSERT INTO uow_rows (id, value) VALUES ($1, $3)', params: ['a', 1] }])).toThrow(/a value for each placeholder/);
  });
});
