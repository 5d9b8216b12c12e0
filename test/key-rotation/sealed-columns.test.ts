import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/platform/crypto.ts';
import { EventFieldSealer } from '../../src/events/sealed-fields.ts';
import { columnName, countStale } from '../../src/key-rotation/rotation.ts';
import { SEALED_COLUMNS } from '../../src/key-rotation/sealed-columns.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * The rotation's list of sealed columns is complete: every column the migrations name `*_sealed` or
 * `wrapped_key` is in it (a new sealed column that is not would stay under the old key and break the service
 * once MASTER_KEY_PREVIOUS is removed), and every listed column exists with its key columns.
 */
let testDatabase: TestDatabase;

beforeAll(async () => {
  testDatabase = await createTestDatabase();
});

afterAll(async () => {
  await testDatabase.close();
});

describe('the sealed columns of the rotation', () => {
  it('lists every column named *_sealed or wrapped_key', async () => {
    const { rows } = await testDatabase.database.query<{ name: string }>(
      `SELECT table_name || '.' || column_name AS name FROM information_schema.columns
        WHERE table_schema = current_schema() AND (column_name LIKE '%\\_sealed' OR column_name = 'wrapped_key')
          AND table_name IN (SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE')
        ORDER BY 1`,
    );
    const listed = new Set(SEALED_COLUMNS.map(columnName));
    expect(rows.map((row) => row.name).filter((name) => !listed.has(name))).toEqual([]);
    // The query does find them: each listed column of that name is among its rows.
    const named = [...listed].filter((name) => name.endsWith('_sealed') || name.endsWith('.wrapped_key'));
    expect(named.length).toBeGreaterThan(10);
    expect(rows.map((row) => row.name).sort()).toEqual(named.sort());
  });

  it('names columns and key columns that exist, and counts them on an empty database', async () => {
    for (const column of SEALED_COLUMNS) {
      const names = [column.column, ...column.key_columns, ...(column.context_columns ?? [])];
      const { rows } = await testDatabase.database.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = ANY($2)`,
        [column.table, names],
      );
      expect(rows.length, columnName(column)).toBe(names.length);
    }
    const statuses = await countStale(testDatabase.database, 'AAAAAAAAAAA');
    expect(statuses.map((status) => status.column)).toEqual(SEALED_COLUMNS.map(columnName));
    expect(statuses.every((status) => status.stale === 0)).toBe(true);
  });
});

describe('event envelopes', () => {
  it('seals each qr_payload again under the current key, and the envelope opens to the same text', () => {
    const oldKey = Buffer.alloc(32, 4);
    const newKey = Buffer.alloc(32, 5);
    const text = JSON.stringify({ type: 'deposit.matched', data: { legs: [{ qr_payload: '000201010212"x' }, { qr_payload: 'second' }] } });
    const stored = new EventFieldSealer(new SecretBox(oldKey)).seal(text);
    const ring = new SecretBox(newKey, [oldKey]);
    const resealed = new EventFieldSealer(ring).reseal(stored);
    expect(resealed).not.toBe(stored);
    expect(resealed.match(/"qr_payload":"sealed:v2\.([^.]+)\./g)?.length).toBe(2);
    expect(resealed).toContain(`sealed:v2.${ring.current_key_id}.`);
    expect(new EventFieldSealer(new SecretBox(newKey)).open(resealed)).toBe(text);
  });
});
