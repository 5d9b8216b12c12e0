import type { ServiceInstance } from '../src/app.ts';
import type { Database } from '../src/platform/db.ts';
import type { WalletAccount } from '../src/ledger/types.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';

/** Set-up shared by the benchmarks that need withdrawing merchants (bench/deposits.ts, bench/slips.ts). */

/** The seeded sandbox-bank account of สมชาย ใจดี: a payee that verifies in-line in test mode. */
const SOMCHAI = { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } as const;

/**
 * Funds a test-mode merchant's available balance with an `adjustment` credit and gives it a payee verified
 * in-line against the sandbox bank, in one transaction; returns the payee's beneficiary id.
 */
export async function fundWithdrawer(instance: ServiceInstance, database: Database, account: WalletAccount, funding_minor: number): Promise<string> {
  const { ledger, beneficiaries } = instance.services;
  const beneficiary = await database.transaction(async (tx) => {
    const movementKey = `bench_funding:${account.merchant_id}`;
    const posted = await ledger.post(tx, {
      account,
      type: 'adjustment',
      amount_minor: funding_minor,
      bucket_from: null,
      bucket_to: 'available',
      movement_key: movementKey,
      source: { type: 'bench_funding', id: movementKey },
      reason_code: 'bench_funding',
      cause: SYSTEM_CAUSE,
    });
    if (!posted.ok) throw posted.error;
    return beneficiaries.createVerifiedInSandbox(tx, account, { ...SOMCHAI });
  });
  if (beneficiary.status !== 'verified') throw new Error(`beneficiary ${beneficiary.id} is ${beneficiary.status}, not verified`);
  return beneficiary.id;
}
