import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isIdOfKind, newId } from '../../src/platform/ids.ts';
import { formatTimestamp, parseTimestamp } from '../../src/platform/time.ts';
import { constantTimeEqual, SecretBox } from '../../src/platform/crypto.ts';
import { canonicalString, sortQuery } from '../../src/http/canonical.ts';
import { openDatabase, PLANNED_PER_CALL } from '../../src/platform/db.ts';
import { createTestDatabase, usingPostgres } from '../support/database.ts';
import { migrate, MIGRATIONS_DIRECTORY } from '../../src/platform/migrate.ts';
import { TestClock } from '../../src/platform/clock.ts';

describe('ids', () => {
  it('are prefix + ULID, unique and increasing within a process', () => {
    const ids = Array.from({ length: 5000 }, () => newId('deposit'));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => isIdOfKind(id, 'deposit'))).toBe(true);
    expect([...ids].sort()).toEqual(ids);
    expect(isIdOfKind('dep_short', 'deposit')).toBe(false);
    expect(isIdOfKind(newId('withdrawal'), 'deposit')).toBe(false);
  });
});

describe('timestamps', () => {
  it('format with exactly three millisecond digits and Z', () => {
    expect(formatTimestamp(new Date('2026-08-01T07:00:00+07:00'))).toBe('2026-08-01T00:00:00.000Z');
    fc.assert(
      fc.property(fc.date({ min: new Date('1970-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }), (date) => {
        const text = formatTimestamp(date);
        expect(text).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        expect(parseTimestamp(text)?.getTime()).toBe(date.getTime());
      }),
    );
  });

  it('parse only real instants of the wire shape from 1970 on', () => {
    for (const text of ['2026-02-30T00:00:00.000Z', '2026-08-01T24:00:00.000Z', '2026-08-01T00:00:00Z', '2026-08-01T00:00:00.000+07:00', '1969-12-31T23:59:59.999Z', '0001-01-01T00:00:00.000Z']) {
      expect(parseTimestamp(text), text).toBeNull();
    }
    expect(parseTimestamp('2028-02-29T12:00:00.000Z')).not.toBeNull();
  });

  it('the test clock only moves forward when told', () => {
    const clock = new TestClock('2026-08-01T00:00:00.000Z');
    expect(clock.advance(1500).toISOString()).toBe('2026-08-01T00:00:01.500Z');
    expect(() => clock.advance(-1)).toThrow();
  });
});

describe('secret box and comparisons', () => {
  const box = new SecretBox(Buffer.alloc(32, 3));

  it('round-trips and binds the purpose', () => {
    const sealed = box.seal('sig_test_abc', 'api_key.signing_secret');
    expect(sealed).not.toContain('sig_test_abc');
    expect(box.open(sealed, 'api_key.signing_secret')).toBe('sig_test_abc');
    expect(() => box.open(sealed, 'another.column')).toThrow();
    const parts = sealed.split('.');
    parts[3] = Buffer.from('tampered').toString('base64url');
    expect(() => box.open(parts.join('.'), 'api_key.signing_secret')).toThrow();
    expect(() => new SecretBox(Buffer.alloc(16))).toThrow();
  });

  it('compares in constant time with lengths first', () => {
    expect(constantTimeEqual('v1=abc', 'v1=abc')).toBe(true);
    expect(constantTimeEqual('v1=abc', 'v1=abd')).toBe(false);
    expect(constantTimeEqual('v1=abc', 'v1=abcd')).toBe(false);
  });
});

describe('canonical string', () => {
  it('sorts raw query parts by code unit without decoding', () => {
    expect(sortQuery('b=2&a=1&a=0&&c=%20')).toBe('a=0&a=1&b=2&c=%20');
    expect(sortQuery('')).toBe('');
  });

  it('has nine newline-terminated lines in the spec order', () => {
    const text = canonicalString({
      timestamp: '1', nonce: 'n', method: 'post', path: '/p', query: 'b=1&a=2', body: '', idempotency_key: '', api_version: '2026-08-01',
    });
    expect(text.split('\n')).toEqual(['v1', '1', 'n', 'POST', '/p', 'a=2&b=1', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', '', '2026-08-01', '']);
  });
});

describe('migrations', () => {
  it('refuse to start when an applied migration was edited', async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'migrations-'));
    for (const file of fs.readdirSync(MIGRATIONS_DIRECTORY)) fs.copyFileSync(path.join(MIGRATIONS_DIRECTORY, file), path.join(directory, file));
    const database = await openDatabase({ database_url: null, data_dir: null });
    try {
      expect((await migrate(database, directory)).length).toBeGreaterThan(0);
      expect(await migrate(database, directory)).toEqual([]);
      const first = fs.readdirSync(directory).sort()[0]!;
      fs.appendFileSync(path.join(directory, first), '\n-- edited\n');
      await expect(migrate(database, directory)).rejects.toThrow(/was edited/);
    } finally {
      await database.close();
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe('statements', () => {
  it('are prepared once per connection, except those marked to be planned per call, which still bind their parameters', async () => {
    const test = await createTestDatabase();
    try {
      const counts = await test.database.transaction(async (tx) => {
        const marked = await tx.query<{ doubled: number }>(`${PLANNED_PER_CALL} SELECT $1::integer * 2 AS doubled /* per-call probe */`, [21]);
        const named = await tx.query<{ tripled: number }>('SELECT $1::integer * 3 AS tripled /* named probe */', [5]);
        expect(marked.rows).toEqual([{ doubled: 42 }]);
        expect(named.rows).toEqual([{ tripled: 15 }]);
        if (!usingPostgres) return null;
        // One connection for the whole transaction: its prepared statements are the ones it was sent.
        const { rows } = await tx.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%probe%' AND statement NOT LIKE '%pg_prepared_statements%'");
        return rows.map((row) => row.statement);
      });
      if (usingPostgres) {
        expect(counts).toHaveLength(1);
        expect(counts?.[0]).toContain('named probe');
      }
    } finally {
      await test.close();
    }
  });
});
