import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { WalletAccount } from '../../src/ledger/types.ts';
import type { Queryable } from '../../src/platform/db.ts';
import { TEST_MASTER_KEY, type TestApp, type MerchantCredentials } from './app.ts';
import { DepositService } from '../../src/deposits/service.ts';
import { deriveAccountLookupKey } from '../../src/beneficiaries/service.ts';
import { QrImageLinks } from '../../src/deposits/qr-image.ts';
import { MatchingService } from '../../src/matching/service.ts';
import { depositScenariosFor } from '../../src/sandbox/hooks.ts';

/**
 * Helpers for tests of the payout side: money into a wallet, a verified beneficiary, and a short
 * transaction on the test database.
 */

export function accountOf(credentials: MerchantCredentials, livemode = false): WalletAccount {
  return { white_label_id: credentials.white_label_id, merchant_id: credentials.merchant_id, livemode };
}

export function inTransaction<T>(app: TestApp, work: (tx: Queryable) => Promise<T>): Promise<T> {
  return app.testDatabase.database.transaction(work);
}

let fundingCounter = 0;

/** Puts `amount_minor` straight into `available` (an `adjustment` credit), as cleared money would be. */
export async function fundAvailable(app: TestApp, account: WalletAccount, amount_minor: number): Promise<void> {
  fundingCounter += 1;
  const key = `test_funding:${process.pid}:${fundingCounter}:${Date.now()}`;
  await inTransaction(app, async (tx) => {
    const posted = await app.instance.services.ledger.post(tx, {
      account,
      type: 'adjustment',
      amount_minor,
      bucket_from: null,
      bucket_to: 'available',
      movement_key: key,
      source: { type: 'test_funding', id: key },
      reason_code: 'test_funding',
      cause: SYSTEM_CAUSE,
    });
    if (!posted.ok) throw posted.error;
  });
}

/** The seeded sandbox account of สมชาย ใจดี at Bangkok Bank, which verifies by name. */
export const SOMCHAI = { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } as const;
export const SOMYING = { bank_code: '004', account_number: '0123456789', account_name_th: 'สมหญิง รักไทย' } as const;

/** Creates the beneficiary for `account` and runs its verification job, returning its verified id. */
export async function verifiedBeneficiary(app: TestApp, account: WalletAccount, details: { bank_code: string; account_number: string; account_name_th: string } = SOMCHAI): Promise<string> {
  const { beneficiary } = await inTransaction(app, (tx) => app.instance.services.beneficiaries.create(tx, account, { ...details }, SYSTEM_CAUSE));
  if (beneficiary.status === 'verified') return beneficiary.id;
  await app.instance.worker.runDueJobs();
  const verified = await app.instance.services.beneficiaries.get(app.testDatabase.database, account, beneficiary.id);
  if (verified?.status !== 'verified') throw new Error(`beneficiary ${beneficiary.id} did not verify: ${verified?.status ?? 'missing'}`);
  return beneficiary.id;
}

/**
 * The app's deposit service, but matching as in live mode: without the sandbox counterparty (which always
 * covers a test-mode amount whole), so that an amount no single withdrawal can take is split into legs.
 * It signs capabilities and advertises addresses as the app does, so its orders' slips go to the app's intake.
 */
export function depositServiceWithoutSandboxLiquidity(app: TestApp): DepositService {
  const services = app.instance.services;
  return new DepositService({
    events: services.events,
    clock: services.clock,
    secretBox: services.secretBox,
    withdrawals: services.withdrawals,
    policies: services.depositPolicies,
    account_lookup_key: deriveAccountLookupKey(TEST_MASTER_KEY),
    slip_tokens: services.slipTokens,
    qr_links: new QrImageLinks(TEST_MASTER_KEY),
    public_base_url: () => services.publicBaseUrl(),
    scenarios: depositScenariosFor,
    slip_activity: (db, white_label_id, deposit_id) => services.slipActivity.activity(db, white_label_id, deposit_id),
    review_estimate: services.reviewPace.estimate,
    checkout_links: (db, order) => services.checkoutAddresses.checkoutUrl(db, order),
    upload_base_url: () => services.uploadBaseUrl(),
    matching: new MatchingService({ withdrawals: services.withdrawals, events: services.events, liquidity: null }),
    ledger: services.ledger,
    fees: services.fees,
    claims: services.claims.registry,
  });
}
