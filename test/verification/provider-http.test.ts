import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listBanks } from '../../src/banks/repository.ts';
import { bangkokTimeOf, bankCodeOfShortName, namesOfDisplay, numericAmountSchema } from '../../src/verification/provider-http.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

/**
 * The shared pieces of the provider adapters that the contract tests reach only through examples: bank
 * short names against the banks table, JSON-number amounts, slip dates in Bangkok time, display names.
 */

describe('bank short names', () => {
  let testDatabase: TestDatabase;
  beforeAll(async () => {
    testDatabase = await createTestDatabase();
  });
  afterAll(async () => {
    await testDatabase.close();
  });

  it('map every bank of the banks table, and only those, to its Bank of Thailand code', async () => {
    const banks = await listBanks(testDatabase.database);
    expect(banks.length).toBeGreaterThan(0);
    for (const bank of banks) {
      expect(bankCodeOfShortName(bank.short_name)).toBe(bank.bank_code);
      expect(bankCodeOfShortName(` ${bank.short_name.toLowerCase()} `)).toBe(bank.bank_code);
    }
    expect(bankCodeOfShortName('PROMPTPAY')).toBeNull();
    expect(bankCodeOfShortName('')).toBeNull();
  });
});

describe('amounts as JSON numbers', () => {
  it.each([
    [1000, 100_000],
    [1500.5, 150_050],
    [0.01, 1],
    [0.1, 10],
    [123456.78, 12_345_678],
    [999999999999.99, 99_999_999_999_999],
  ])('%d baht is %d satang', (amount, satang) => {
    expect(numericAmountSchema.parse(amount)).toBe(satang);
  });

  it.each([[0], [-1], [10.005], [0.1 + 0.2], [1e21], [Number.NaN], [Number.POSITIVE_INFINITY]])('%d is malformed', (amount) => {
    expect(numericAmountSchema.safeParse(amount).success).toBe(false);
  });
});

describe('slip dates', () => {
  it('are Bangkok time, UTC+7', () => {
    expect(bangkokTimeOf('20260801', '06:30:15')?.toISOString()).toBe('2026-07-31T23:30:15.000Z');
  });

  it.each([
    ['20260230', '10:00:00'],
    ['2026081', '10:00:00'],
    ['20260801', '24:00:00'],
    ['20260801', '10:00'],
  ])('refuse %s %s', (date, time) => {
    expect(bangkokTimeOf(date, time)).toBeNull();
  });
});

describe('display names', () => {
  it('take a Thai display name as the Thai name and keep the English name', () => {
    expect(namesOfDisplay('นาย กสิกร ร', 'Mr. Kasikorn R')).toEqual({ name_th: 'นาย กสิกร ร', name_en: 'Mr. Kasikorn R' });
  });

  it('take a Latin display name as the English name only when there is no English name', () => {
    expect(namesOfDisplay('MR. KASIKORN R', null)).toEqual({ name_th: null, name_en: 'MR. KASIKORN R' });
    expect(namesOfDisplay('MR. KASIKORN R', 'Mr. Kasikorn R')).toEqual({ name_th: null, name_en: 'Mr. Kasikorn R' });
    expect(namesOfDisplay(null, null)).toEqual({ name_th: null, name_en: null });
  });
});
