import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BankVerifier } from '../../src/verification/bank-port.ts';
import { createEasySlipVerifier } from '../../src/verification/easyslip-adapter.ts';
import { createRdcwVerifier } from '../../src/verification/rdcw-adapter.ts';
import { createSlipOkVerifier } from '../../src/verification/slipok-adapter.ts';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import type { FakeParty, StatefulFakeProvider } from '../support/fake-provider-bank.ts';
import { startFakeEasySlip } from '../support/fake-easyslip.ts';
import { startFakeRdcw } from '../support/fake-rdcw.ts';
import { startFakeSlipOk } from '../support/fake-slipok.ts';
import { depositPolicyBody, getDeposit, LIVE_GATEWAY, liveOrderWithSlip, runJobs, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';

/**
 * Live mode end to end through each provider adapter and its local fake: a live deposit, a slip image
 * whose mini-QR names the transfer, the real worker, and the provider's answer deciding the order. The
 * app's live verifier delegates to the adapter of the provider under test.
 */

const PRINTED_SENDER: FakeParty = { bank_code: '004', account: 'xxx-x-x0000-x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' };
const PRINTED_GATEWAY: FakeParty = { bank_code: '014', account: 'xxx-x-x8147-x', name_th: 'บริษัท สยามซอฟต์ จำกัด', name_en: 'SIAMSOFT CO., LTD.' };

interface ProviderUnderTest {
  name: string;
  start(): Promise<StatefulFakeProvider>;
  verifier(url: string): BankVerifier;
}

const PROVIDERS: ProviderUnderTest[] = [
  {
    name: 'SlipOK',
    start: () => startFakeSlipOk({ branch_id: '4242', key: 'slipok-live-key' }),
    verifier: (url) => createSlipOkVerifier({ url, branch_id: '4242', key: 'slipok-live-key', timeout_ms: 1_000 }),
  },
  {
    name: 'EasySlip',
    start: () => startFakeEasySlip('0f0e0d0c-0b0a-4908-8706-050403020100'),
    verifier: (url) => createEasySlipVerifier({ url, key: '0f0e0d0c-0b0a-4908-8706-050403020100', timeout_ms: 1_000 }),
  },
  {
    name: 'RDCW',
    start: () => startFakeRdcw({ client_id: 'rdcw-live', client_secret: 'rdcw-live-secret' }),
    verifier: (url) => createRdcwVerifier({ url, client_id: 'rdcw-live', client_secret: 'rdcw-live-secret', timeout_ms: 1_000 }),
  },
];

let app: TestApp;
let live: MerchantCredentials;
let current: BankVerifier | null = null;
const delegating: BankVerifier = {
  verifyTransfer(query) {
    if (current === null) throw new Error('no provider under test');
    return current.verifyTransfer(query);
  },
};

beforeAll(async () => {
  app = await createTestApp({ live_bank_verifier: delegating });
  live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
  const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: app.sandbox.white_label_id, mode: 'live', gateway: LIVE_GATEWAY }) });
  expect(policy.statusCode, policy.body).toBe(200);
});
afterAll(async () => {
  await app.close();
});

/** A live order of 250.00 baht and the slip image of its transfer, which the fake bank holds. */
async function liveOrderPaid(fake: StatefulFakeProvider, receiver: FakeParty): Promise<{ order: CreatedDeposit; slip: Buffer }> {
  const { order, slip, trans_ref } = await liveOrderWithSlip(app, live, '20260801004PRV');
  fake.hold({ sending_bank_code: '004', trans_ref, amount: '250.00', occurred_at: app.clock.now().toISOString(), sender: PRINTED_SENDER, receiver });
  return { order, slip };
}

describe.each(PROVIDERS)('live mode through $name', (provider) => {
  let fake: StatefulFakeProvider;

  beforeAll(async () => {
    fake = await provider.start();
    current = provider.verifier(fake.url);
  });
  afterAll(async () => {
    current = null;
    await fake.close();
  });

  it('a transfer the provider confirms settles the live order', async () => {
    fake.reset();
    const { order, slip } = await liveOrderPaid(fake, PRINTED_GATEWAY);
    expect((await uploadMultipart(app, order.slip_upload, slip)).statusCode).toBe(202);
    await runJobs(app);
    expect(await getDeposit(app, order.id, live)).toMatchObject({ status: 'settled', livemode: true, settled_via: 'auto', amount_received_minor: 25_000 });
    expect(fake.requests).toHaveLength(1);
  });

  it('a transfer to another account goes to review with RECEIVER_MISMATCH', async () => {
    fake.reset();
    // SlipOK then answers its documented wrong-receiver code 1014, with the slip.
    fake.bank.registered_receiver = PRINTED_GATEWAY.account;
    const { order, slip } = await liveOrderPaid(fake, { ...PRINTED_GATEWAY, account: 'xxx-x-x9999-x' });
    expect((await uploadMultipart(app, order.slip_upload, slip)).statusCode).toBe(202);
    await runJobs(app);
    const reviewed = await getDeposit(app, order.id, live);
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons).toEqual(expect.arrayContaining([expect.objectContaining({ code: 'RECEIVER_MISMATCH' })]));
    expect(fake.requests).toHaveLength(1);
  });

  it('a provider out of quota sends the slip to review at once with BANK_DISABLED, without waiting', async () => {
    fake.reset();
    const { order, slip } = await liveOrderPaid(fake, PRINTED_GATEWAY);
    fake.bank.mode = 'quota_exhausted';
    expect((await uploadMultipart(app, order.slip_upload, slip)).statusCode).toBe(202);
    await runJobs(app);
    const reviewed = await getDeposit(app, order.id, live);
    expect(reviewed.status).toBe('under_review');
    expect(reviewed.review?.reasons).toEqual([expect.objectContaining({ code: 'BANK_DISABLED', detail: { bank_code: '004', cause: 'verification_unavailable' } })]);
    expect(fake.requests).toHaveLength(1);
  });
});
