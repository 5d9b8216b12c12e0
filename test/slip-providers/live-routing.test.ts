import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderAdapterCache } from '../../src/slip-providers/adapters.ts';
import { BrandSlipVerifier } from '../../src/slip-providers/live-verifier.ts';
import type { BankVerifier } from '../../src/verification/bank-port.ts';
import { createSlipOkVerifier } from '../../src/verification/slipok-adapter.ts';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import type { FakeParty, StatefulFakeProvider } from '../support/fake-provider-bank.ts';
import { createDeposit, depositPolicyBody, getDeposit, LIVE_GATEWAY, liveOrderWithSlip, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { watchTransactionsAtFetch } from './support-transactions.ts';
import { EASYSLIP_CREDENTIALS, RDCW_CREDENTIALS, SLIPOK_CREDENTIALS, startFakeProviders, type FakeProviders } from './support.ts';

/**
 * Live slips through each brand's own providers, by the real worker (issue 34): the brand's primary answers;
 * its fallback is asked only when the primary could not answer, never after "no such transfer"; a brand with
 * no provider keeps the deployment's generic verifier; and a test-mode order never reaches a provider.
 */

const PRINTED_SENDER: FakeParty = { bank_code: '004', account: 'xxx-x-x0000-x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' };
const PRINTED_GATEWAY: FakeParty = { bank_code: '014', account: 'xxx-x-x8147-x', name_th: 'บริษัท สยามซอฟต์ จำกัด', name_en: 'SIAMSOFT CO., LTD.' };

let app: TestApp;
let fakes: FakeProviders;
let genericCalls = 0;
let generic: BankVerifier | null = null;
const counting: BankVerifier = {
  verifyTransfer(query) {
    genericCalls += 1;
    if (generic === null) throw new Error('no generic verifier');
    return generic.verifyTransfer(query);
  },
};

/** A new brand with a live merchant and a live deposit policy paying LIVE_GATEWAY. */
async function liveBrand(): Promise<MerchantCredentials> {
  const merchant = await app.createMerchant({ livemode: true });
  const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: merchant.white_label_id, mode: 'live', gateway: LIVE_GATEWAY }) });
  expect(policy.statusCode, policy.body).toBe(200);
  return merchant;
}

async function setProvider(white_label_id: string, slot: 'primary' | 'fallback', body: unknown): Promise<void> {
  const response = await app.backoffice({ method: 'POST', url: `/v1/bo/brands/${white_label_id}/slip-providers/${slot}`, body });
  expect(response.statusCode, response.body).toBe(200);
}

/** A live order of 250.00 baht, its slip uploaded; the transfer held by the given fakes. */
async function liveOrderUploaded(merchant: MerchantCredentials, holders: readonly StatefulFakeProvider[]): Promise<string> {
  const { order, slip, trans_ref } = await liveOrderWithSlip(app, merchant, '20260801004BRD');
  for (const fake of holders) fake.hold({ sending_bank_code: '004', trans_ref, amount: '250.00', occurred_at: app.clock.now().toISOString(), sender: PRINTED_SENDER, receiver: PRINTED_GATEWAY });
  expect((await uploadMultipart(app, order.slip_upload, slip)).statusCode).toBe(202);
  await runJobs(app);
  return order.id;
}

async function metricsText(): Promise<string> {
  return app.instance.services.metrics.registry.metrics();
}

beforeAll(async () => {
  fakes = await startFakeProviders();
  app = await createTestApp({ config: fakes.config, live_bank_verifier: counting });
  generic = createSlipOkVerifier({ url: fakes.slipok.url, ...SLIPOK_CREDENTIALS, timeout_ms: 1_000, max_attempts: 1 });
});
afterAll(async () => {
  await app.close();
  await fakes.close();
});

describe('a live slip goes to the brand’s provider', () => {
  it('a brand on SlipOK: the live deposit settles through SlipOK', async () => {
    fakes.resetAll();
    const merchant = await liveBrand();
    await setProvider(merchant.white_label_id, 'primary', { provider: 'slipok', credentials: SLIPOK_CREDENTIALS });
    const before = genericCalls;
    const id = await liveOrderUploaded(merchant, [fakes.slipok]);
    expect(await getDeposit(app, id, merchant)).toMatchObject({ status: 'settled', livemode: true, amount_received_minor: 25_000 });
    expect(fakes.slipok.requests).toHaveLength(1);
    expect(fakes.slipok.requests[0]?.headers['x-authorization']).toBe(SLIPOK_CREDENTIALS.key);
    expect(genericCalls).toBe(before);
    const metrics = await metricsText();
    expect(metrics).toContain(`slip_provider_lookups_total{provider="slipok",white_label_id="${merchant.white_label_id}",slot="primary",outcome="found",reason=""} 1`);
    expect(metrics).toContain(`slip_provider_request_duration_seconds_count{provider="slipok",white_label_id="${merchant.white_label_id}"} 1`);
  });

  it('a brand on EasySlip with RDCW as fallback: EasySlip down, the deposit settles through RDCW', async () => {
    fakes.resetAll();
    const merchant = await liveBrand();
    await setProvider(merchant.white_label_id, 'primary', { provider: 'easyslip', credentials: EASYSLIP_CREDENTIALS });
    await setProvider(merchant.white_label_id, 'fallback', { provider: 'rdcw', credentials: RDCW_CREDENTIALS });
    fakes.easyslip.bank.mode = 'bank_down';
    const watch = watchTransactionsAtFetch(app.instance.services.database);
    let id: string;
    try {
      id = await liveOrderUploaded(merchant, [fakes.easyslip, fakes.rdcw]);
    } finally {
      watch.restore();
    }
    // Both providers were asked, each with no transaction open.
    expect(watch.openAtFetch).toEqual([0, 0]);
    expect(await getDeposit(app, id, merchant)).toMatchObject({ status: 'settled', livemode: true, amount_received_minor: 25_000 });
    expect(fakes.easyslip.requests).toHaveLength(1);
    expect(fakes.rdcw.requests).toHaveLength(1);
    const metrics = await metricsText();
    expect(metrics).toContain(`slip_provider_lookups_total{provider="easyslip",white_label_id="${merchant.white_label_id}",slot="primary",outcome="unavailable",reason="http_error"} 1`);
    expect(metrics).toContain(`slip_provider_lookups_total{provider="rdcw",white_label_id="${merchant.white_label_id}",slot="fallback",outcome="found",reason=""} 1`);
  });

});

describe('the fallback is asked only when the primary cannot answer', () => {
  it('a primary out of quota: the fallback answers, and the alert is counted', async () => {
    fakes.resetAll();
    const merchant = await liveBrand();
    await setProvider(merchant.white_label_id, 'primary', { provider: 'slipok', credentials: SLIPOK_CREDENTIALS });
    await setProvider(merchant.white_label_id, 'fallback', { provider: 'rdcw', credentials: RDCW_CREDENTIALS });
    fakes.slipok.bank.mode = 'quota_exhausted';
    const id = await liveOrderUploaded(merchant, [fakes.slipok, fakes.rdcw]);
    expect(await getDeposit(app, id, merchant)).toMatchObject({ status: 'settled' });
    expect(fakes.rdcw.requests).toHaveLength(1);
    const metrics = await metricsText();
    expect(metrics).toContain(`slip_provider_alerts_total{provider="slipok",white_label_id="${merchant.white_label_id}",reason="quota_exhausted"} 1`);
    expect(metrics).toContain(`slip_provider_remaining_quota{provider="slipok",white_label_id="${merchant.white_label_id}",slot="primary"} 0`);
  });

  it('"no such transfer" from the primary is final: the fallback is not asked', async () => {
    fakes.resetAll();
    const merchant = await liveBrand();
    await setProvider(merchant.white_label_id, 'primary', { provider: 'slipok', credentials: SLIPOK_CREDENTIALS });
    await setProvider(merchant.white_label_id, 'fallback', { provider: 'rdcw', credentials: RDCW_CREDENTIALS });
    // Only the fallback's bank holds the transfer: asking it would find it, which is exactly what must not happen.
    const id = await liveOrderUploaded(merchant, [fakes.rdcw]);
    const deposit = await getDeposit(app, id, merchant);
    expect(deposit.status).not.toBe('settled');
    expect(deposit.amount_received_minor ?? 0).toBe(0);
    expect(fakes.slipok.requests).toHaveLength(1);
    expect(fakes.rdcw.requests).toHaveLength(0);
    expect(await metricsText()).toContain(`slip_provider_lookups_total{provider="slipok",white_label_id="${merchant.white_label_id}",slot="primary",outcome="not_found",reason=""} 1`);
  });

});

describe('a brand without a provider', () => {
  it('keeps the deployment’s generic verifier', async () => {
    fakes.resetAll();
    const merchant = await liveBrand();
    const before = genericCalls;
    const id = await liveOrderUploaded(merchant, [fakes.slipok]);
    expect(await getDeposit(app, id, merchant)).toMatchObject({ status: 'settled' });
    expect(genericCalls).toBe(before + 1);
  });
});

describe('test mode never reaches a provider', () => {
  it('a test-mode slip of a brand with a live provider settles on the sandbox bank', async () => {
    fakes.resetAll();
    await setProvider(app.sandbox.white_label_id, 'primary', { provider: 'slipok', credentials: SLIPOK_CREDENTIALS });
    await setProvider(app.sandbox.white_label_id, 'fallback', { provider: 'rdcw', credentials: RDCW_CREDENTIALS });
    const before = genericCalls;
    const order = await createDeposit(app, { amount_minor: 10_000 });
    const transfer = await sandboxTransfer(app, order);
    expect((await uploadMultipart(app, order.slip_upload, slipBytes(transfer))).statusCode).toBe(202);
    await runJobs(app);
    expect(await getDeposit(app, order.id)).toMatchObject({ status: 'settled', livemode: false });
    expect(fakes.slipok.requests).toHaveLength(0);
    expect(fakes.rdcw.requests).toHaveLength(0);
    expect(fakes.easyslip.requests).toHaveLength(0);
    expect(genericCalls).toBe(before);
  });

  it('the live verifier refuses a test-mode query outright', async () => {
    const services = app.instance.services;
    const live = new BrandSlipVerifier({
      database: services.database,
      metrics: services.metrics,
      adapters: new ProviderAdapterCache({ secretBox: services.secretBox, logger: services.logger, metrics: services.metrics, providers: services.config.slip_providers }),
      generic: counting,
    });
    await expect(live.verifyTransfer({ white_label_id: app.sandbox.white_label_id, livemode: false, sending_bank_code: '004', trans_ref: 'X1' })).rejects.toThrow(/live transfers only/);
    expect(fakes.slipok.requests).toHaveLength(0);
  });
});
