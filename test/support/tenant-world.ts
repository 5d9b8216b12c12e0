import crypto from 'node:crypto';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from './app.ts';
import { createTestCertificates, startScriptedReceiver, type ScriptedReceiver, type TestCertificates } from './webhook-receivers.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from './slips.ts';
import { accountOf, fundAvailable } from './withdrawals.ts';
import { TEST_POLICY_WITH_LIVE_LOOPBACK } from './webhook-receiver-harness.ts';
import type { Webhooks } from '../../src/webhooks/index.ts';
import type { Logger } from '../../src/platform/logger.ts';

/**
 * A populated service for the tenant isolation matrix and the secrets scan: two brands, a victim
 * merchant with objects in many states, attackers around it (another merchant of its brand, a
 * merchant of another brand, its own key of the other livemode) and back-office staff of both
 * brands. Everything is built through the doors users use: brands, merchants, keys and staff through
 * the back office, orders through signed merchant requests, slips through the sandbox bank and the
 * upload address, and outcomes through the real job worker and webhook dispatcher. (Funding a wallet
 * is the one direct ledger post, as in every withdrawal test: no public door puts money in.)
 */

export const STAFF_NOTE = 'ตรวจสอบรายการกับธนาคารแล้ว ข้อมูลตรงกับสลิปที่ได้รับ';
const WEBHOOK_RECEIVER_OK = { status: 200 } as const;

export interface Staff {
  /** The platform administrator (every brand). */
  admin: string;
  /** An operator and a reviewer of the victim's brand. */
  operator: string;
  reviewer: string;
  /** An operator of the other brand. */
  other_operator: string;
}

/** The victim merchant's objects, each in the state its name says (test mode). */
export interface VictimObjects {
  beneficiary_id: string;
  sender_id: string;
  sender_end_user_ref: string;
  /** awaiting_payment, with its capability and QR image link. */
  open_deposit: CreatedDeposit;
  qr_image_path: string;
  /** Settled with a same-slip overpayment: its claim and slip receipt. */
  overpaid_deposit_id: string;
  overpaid_receipt_id: string;
  claim_id: string;
  /** Settled exactly. */
  settled_deposit_id: string;
  /** In review (sender name mismatch), three of them: one per review decision. */
  review_deposit_ids: [string, string, string];
  review_receipt_id: string;
  canceled_deposit_id: string;
  /** Filled once by another merchant's deposit; its fill is disputed. */
  filled_withdrawal_id: string;
  filled_leg_ref: string;
  /** Two disputes of the victim's, one for each staff member who resolves one. */
  dispute_ids: [string, string];
  /** Open, waiting for a fill. */
  open_withdrawal_id: string;
  /** Four waiting for approval (above the brand's approval threshold): one per decision and actor. */
  approval_withdrawal_ids: [string, string, string, string];
  test_clock_id: string;
  /** One of the victim's events. */
  event_id: string;
  /** The victim's own sandbox bank accounts (one for attackers to write over, one for them to look up). */
  bank_account: { bank_code: string; account_number: string };
  second_bank_account: { bank_code: string; account_number: string };
  endpoint_id: string;
  delivery_id: string;
  /** Endpoints that exist to be deleted by the back office. */
  spare_endpoint_ids: [string, string];
}

/** Objects of the victim's brand that the back office acts on without harming the rest of the world. */
export interface BrandObjects {
  /** A merchant and a key of the victim's brand to suspend, resume and revoke. */
  spare_merchant_id: string;
  spare_api_key_ids: [string, string];
  spare_credential_ids: [string, string];
  /** A brand of its own for the brand-level actions. */
  spare_brand_id: string;
  /** Claims opened by staff, one per decision route and actor. */
  claim_ids: string[];
  /** A settled deposit of the brand (the depositor's) that no back-office action reverses: claims are opened on it. */
  claimable_deposit_id: string;
}

export interface TenantWorld {
  app: TestApp;
  webhooks: Webhooks;
  certs: TestCertificates;
  receiver: ScriptedReceiver;
  victim: MerchantCredentials;
  victim_live: MerchantCredentials;
  same_brand: MerchantCredentials;
  other_brand: MerchantCredentials;
  /** The merchant whose deposit filled the victim's withdrawal (not an attacker). */
  depositor: MerchantCredentials;
  staff: Staff;
  objects: VictimObjects;
  brand: BrandObjects;
  /**
   * Every identifier and secret that belongs to the victim: an attacker's answer must show none of them,
   * and an attacker's request must change no row that mentions one. (Values an attacker can type itself,
   * such as an account number, are not markers: its own rows may hold the same value.)
   */
  victim_markers: string[];
  close(): Promise<void>;
}

export function backofficeRequest(app: TestApp, token: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const all: Record<string, string> = { authorization: `Bearer ${token}`, ...headers };
  if (body !== undefined) all['content-type'] = 'application/json';
  return app.instance.app.inject({ method: method as 'GET', url, headers: all, payload: body === undefined ? undefined : JSON.stringify(body) });
}

function expectStatus(response: LightMyRequestResponse, status: number, label: string): void {
  expect(response.statusCode, `${label}: ${response.body.slice(0, 400)}`).toBe(status);
}

export async function signedPost(app: TestApp, credentials: MerchantCredentials, url: string, body?: unknown): Promise<LightMyRequestResponse> {
  return app.signed({ method: 'POST', url, body, idempotency_key: crypto.randomUUID(), credentials });
}

async function created<T>(response: Promise<LightMyRequestResponse>, status: number, label: string): Promise<T> {
  const answer = await response;
  expectStatus(answer, status, label);
  return answer.json<T>();
}

let referenceCounter = 0;
function reference(prefix: string): string {
  referenceCounter += 1;
  return `${prefix}-${referenceCounter}-${crypto.randomBytes(3).toString('hex')}`;
}

/** One request as it was sent through the in-process server, and its answer. */
export interface Exchange {
  request: InjectOptions;
  response: LightMyRequestResponse;
}

export interface TenantWorldOptions {
  logger?: Logger;
  /** Called with every request sent through the world's server and its answer (the secrets scan reads them all). */
  on_exchange?: (exchange: Exchange) => void;
}

/** The discard port on this machine, where nothing listens: a request to it is refused at once. */
const CLOSED_PORT_URL = 'http://127.0.0.1:9';

export async function buildTenantWorld(options: TenantWorldOptions = {}): Promise<TenantWorld> {
  const certs = createTestCertificates();
  const app = await createTestApp({
    ...(options.logger ? { logger: options.logger } : {}),
    // These tests check each answer exactly; load shedding (its own test) would turn a slow CI machine's
    // requests into 503s that say nothing about isolation, input handling or secrets.
    // Slip providers point at a closed local port: a connection test is answered at once, and nothing leaves the machine.
    config: { LOAD_SHEDDING: 'false', SLIP_PROVIDER_SLIPOK_URL: CLOSED_PORT_URL, SLIP_PROVIDER_EASYSLIP_URL: CLOSED_PORT_URL, SLIP_PROVIDER_RDCW_URL: CLOSED_PORT_URL },
    webhooks: {
        settings: { timeout_ms: 5_000, poll_interval_ms: 20, endpoint_concurrency: 4, max_in_flight: 32, sandbox_loopback: true, extra_ca_pem: [certs.ca_pem] },
        policy: TEST_POLICY_WITH_LIVE_LOOPBACK,
        // No name is looked up outside this machine, whatever address a test writes: names other than
        // localhost do not resolve.
        resolve: async (hostname) => {
          if (hostname === 'localhost') return ['127.0.0.1'];
          throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
        },
      },
  });
  const onExchange = options.on_exchange;
  if (onExchange) {
    // Every helper (signed requests, uploads, the back office) sends through `inject`, so this sees them all.
    const server = app.instance.app as unknown as { inject: (request: InjectOptions) => Promise<LightMyRequestResponse> };
    const inject = server.inject.bind(server);
    server.inject = async (request: InjectOptions) => {
      const response = await inject(request);
      onExchange({ request, response });
      return response;
    };
  }
  const webhooks = app.instance.services.webhooks;
  const receiver = await startScriptedReceiver({ tls: certs.leaf, behaviour: () => WEBHOOK_RECEIVER_OK });
  const admin = app.operator_token;
  const bo = (token: string, method: string, url: string, body?: unknown) => backofficeRequest(app, token, method, url, body);

  // Brands, merchants, keys and staff through the back office.
  const victimBrand = (await created<{ id: string }>(bo(admin, 'POST', '/v1/bo/brands', { name: 'Victim Brand' }), 201, 'victim brand')).id;
  const otherBrand = (await created<{ id: string }>(bo(admin, 'POST', '/v1/bo/brands', { name: 'Other Brand' }), 201, 'other brand')).id;
  const staffOf = async (white_label_id: string, role: 'operator' | 'reviewer') =>
    (await created<{ token: string }>(bo(admin, 'POST', '/v1/bo/credentials', { white_label_id, role, name: `${role} of ${white_label_id}` }), 201, 'staff')).token;
  const staff: Staff = {
    admin,
    operator: await staffOf(victimBrand, 'operator'),
    reviewer: await staffOf(victimBrand, 'reviewer'),
    other_operator: await staffOf(otherBrand, 'operator'),
  };
  const merchantIn = async (white_label_id: string, name: string) =>
    (await created<{ id: string }>(bo(admin, 'POST', '/v1/bo/merchants', { white_label_id, name }), 201, 'merchant')).id;
  const keyOf = async (white_label_id: string, merchant_id: string, mode: 'test' | 'live'): Promise<MerchantCredentials> => {
    const key = await created<{ id: string; api_key: string; signing_secret: string }>(
      bo(staff.admin, 'POST', `/v1/bo/merchants/${merchant_id}/api-keys`, { mode }),
      201,
      'api key',
    );
    return { white_label_id, merchant_id, api_key: key.api_key, signing_secret: key.signing_secret };
  };
  const victimId = await merchantIn(victimBrand, 'Victim Merchant');
  const victim = await keyOf(victimBrand, victimId, 'test');
  const victim_live = await keyOf(victimBrand, victimId, 'live');
  const same_brand = await keyOf(victimBrand, await merchantIn(victimBrand, 'Same Brand Merchant'), 'test');
  const depositor = await keyOf(victimBrand, await merchantIn(victimBrand, 'Depositor Merchant'), 'test');
  const other_brand = await keyOf(otherBrand, await merchantIn(otherBrand, 'Other Brand Merchant'), 'test');

  // A verified beneficiary and money in the victim's wallet.
  const beneficiary = await created<{ id: string }>(
    signedPost(app, victim, '/v1/pay/beneficiaries', { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' }),
    201,
    'beneficiary',
  );
  await runJobs(app);
  await fundAvailable(app, accountOf(victim), 2_000_000);
  const withdraw = (amount_minor: number) =>
    created<{ id: string; status: string }>(
      signedPost(app, victim, '/v1/pay/withdrawals', { amount_minor, currency: 'THB', merchant_reference: reference('wd'), end_user_ref: 'payee-1', beneficiary_id: beneficiary.id }),
      201,
      'withdrawal',
    );

  // Two withdrawals, each filled by a deposit of the depositor (the only order of the brand that can take
  // it), then disputed: one dispute for each staff member who resolves one.
  const filledWithdrawals: { id: string; leg_ref: string; dispute_id: string; deposit_id: string }[] = [];
  for (const amount_minor of [12_000, 13_000]) {
    const filled = await withdraw(amount_minor);
    const fillingDeposit = await createDeposit(app, { amount_minor, credentials: depositor });
    expectStatus(await uploadMultipart(app, fillingDeposit.slip_upload, slipBytes(await sandboxTransfer(app, fillingDeposit, {}, depositor))), 202, 'filling slip');
    await runJobs(app);
    const filledView = (await app.signed({ url: `/v1/pay/withdrawals/${filled.id}`, credentials: victim })).json<{ status: string; fills: { leg_ref: string }[] }>();
    expect(filledView.status).toBe('settled');
    const leg_ref = filledView.fills[0]!.leg_ref;
    const disputed = await created<{ dispute: { id: string } }>(
      signedPost(app, victim, `/v1/pay/withdrawals/${filled.id}/disputes`, { leg_ref, reason_code: 'FUNDS_NOT_RECEIVED', note: 'Payee reports nothing arrived' }),
      201,
      'dispute',
    );
    filledWithdrawals.push({ id: filled.id, leg_ref, dispute_id: disputed.dispute.id, deposit_id: fillingDeposit.id });
  }

  // The victim's deposits, in several states.
  let senderCounter = 0;
  const declaredSender = () => {
    senderCounter += 1;
    return { bank_code: '004', account_number: `77${String(senderCounter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
  };
  const open_deposit = await createDeposit(app, { amount_minor: 10_000, credentials: victim, sender: declaredSender() });
  const overpaid = await createDeposit(app, { amount_minor: 11_600, credentials: victim, sender: declaredSender() });
  expectStatus(await uploadMultipart(app, overpaid.slip_upload, slipBytes(await sandboxTransfer(app, overpaid, { amount_minor: 12_100 }, victim))), 202, 'overpaid slip');
  const settled = await createDeposit(app, { amount_minor: 12_000, credentials: victim, sender: declaredSender() });
  expectStatus(await uploadMultipart(app, settled.slip_upload, slipBytes(await sandboxTransfer(app, settled, {}, victim))), 202, 'settled slip');
  const review: CreatedDeposit[] = [];
  for (let index = 0; index < 3; index += 1) {
    const declared = declaredSender();
    const order = await createDeposit(app, { amount_minor: 10_000 + (index + 1) * 1_000, credentials: victim, sender: declared });
    const transfer = await sandboxTransfer(app, order, { sender: { ...declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } }, victim);
    expectStatus(await uploadMultipart(app, order.slip_upload, slipBytes(transfer)), 202, 'review slip');
    review.push(order);
  }
  const canceled = await createDeposit(app, { amount_minor: 15_000, credentials: victim, sender: declaredSender() });
  expectStatus(await signedPost(app, victim, `/v1/pay/deposits/${canceled.id}/cancel`), 200, 'cancel');
  await runJobs(app);
  const overpaidView = await getDeposit(app, overpaid.id, victim);
  expect(overpaidView.status).toBe('settled');
  expect((await getDeposit(app, settled.id, victim)).status).toBe('settled');
  for (const order of review) expect((await getDeposit(app, order.id, victim)).status).toBe('under_review');
  const receiptOf = async (deposit_id: string) =>
    (await app.testDatabase.database.query<{ receipt_id: string }>('SELECT receipt_id FROM slip_receipts WHERE deposit_id = $1 ORDER BY received_at LIMIT 1', [deposit_id])).rows[0]!.receipt_id;

  // The registered sender of the settled order's end user.
  const senders = (await app.signed({ url: `/v1/pay/senders?end_user_ref=${encodeURIComponent(settled.end_user_ref)}`, credentials: victim })).json<{ data: { id: string }[] }>();
  expect(senders.data.length, 'a settled order registers its sender').toBeGreaterThan(0);

  // Withdrawals: one open, two waiting for approval above the brand's threshold.
  const open_withdrawal = await withdraw(50_000);
  expectStatus(
    await bo(staff.operator, 'POST', '/v1/bo/withdrawal-policy', {
      mode: 'test',
      approval_threshold_minor: 100_000,
      approval_ttl_seconds: 3600,
      expires_in_seconds: 7200,
      max_splits: 5,
      min_amount_minor: 100,
      max_amount_minor: 10_000_000,
    }),
    200,
    'withdrawal policy',
  );
  const approvals = [await withdraw(150_000), await withdraw(160_000), await withdraw(170_000), await withdraw(180_000)];
  for (const order of approvals) expect(order.status).toBe('pending_approval');

  // Sandbox objects of the victim: a test clock and a test bank account.
  const clock = await created<{ id: string }>(signedPost(app, victim, '/v1/test/clocks', { name: 'victim clock' }), 201, 'test clock');
  const bank_account = { bank_code: '004', account_number: '5550001111' };
  const second_bank_account = { bank_code: '004', account_number: '5550002222' };
  for (const account of [bank_account, second_bank_account]) {
    await created(signedPost(app, victim, '/v1/test/bank/accounts', { ...account, holder_name_th: 'บัญชี ทดสอบ' }), 201, 'test bank account');
  }

  // A webhook endpoint of the victim with a delivered event, and two spare endpoints.
  const endpointFor = async (description: string) =>
    (await created<{ id: string }>(bo(staff.operator, 'POST', '/v1/bo/webhooks', { merchant_id: victim.merchant_id, mode: 'test', url: receiver.url, description }), 201, 'endpoint')).id;
  const endpoint_id = await endpointFor('victim endpoint');
  const spare_endpoint_ids: [string, string] = [await endpointFor('spare one'), await endpointFor('spare two')];
  // An event after the endpoint exists, so that it has a delivery.
  expectStatus(await signedPost(app, victim, `/v1/pay/deposits/${open_deposit.id}/slip-token`), 200, 'slip token');
  const extra = await createDeposit(app, { amount_minor: 16_000, credentials: victim, sender: declaredSender() });
  expectStatus(await signedPost(app, victim, `/v1/pay/deposits/${extra.id}/cancel`), 200, 'cancel');
  await webhooks.dispatcher.runUntilIdle();
  const deliveries = (await bo(staff.operator, 'GET', `/v1/bo/webhooks/${endpoint_id}/deliveries`)).json<{ data: { id: string }[] }>();
  expect(deliveries.data.length, 'the endpoint has deliveries').toBeGreaterThan(0);

  // Spare objects for the back office's state-changing routes.
  const spare_brand_id = (await created<{ id: string }>(bo(admin, 'POST', '/v1/bo/brands', { name: 'Spare Brand' }), 201, 'spare brand')).id;
  const spare_merchant_id = await merchantIn(victimBrand, 'Spare Merchant');
  const spareKey = async () => (await created<{ id: string }>(bo(staff.operator, 'POST', `/v1/bo/merchants/${spare_merchant_id}/api-keys`, { mode: 'test' }), 201, 'spare key')).id;
  const spareCredential = async () =>
    (await created<{ id: string }>(bo(staff.operator, 'POST', '/v1/bo/credentials', { role: 'reviewer', name: 'Spare reviewer' }), 201, 'spare credential')).id;
  const claim_ids: string[] = [];
  for (let index = 0; index < 6; index += 1) {
    const opened = await created<{ id: string }>(
      bo(staff.operator, 'POST', '/v1/bo/claims', {
        deposit_id: settled.id,
        cause: 'additional_transfer',
        amount_minor: 1_000 + index * 100,
        evidence: { trans_ref: `CLAIMREF${index}${crypto.randomBytes(3).toString('hex')}`, note: 'Payer says a second transfer was made' },
      }),
      201,
      'claim',
    );
    claim_ids.push(opened.id);
  }

  const victimEvents = (await app.signed({ url: '/v1/pay/events?limit=1', credentials: victim })).json<{ data: { id: string }[] }>();
  const objects: VictimObjects = {
    beneficiary_id: beneficiary.id,
    sender_id: senders.data[0]!.id,
    sender_end_user_ref: settled.end_user_ref,
    open_deposit,
    qr_image_path: new URL(open_deposit.legs![0]!.qr_image_url!).pathname + new URL(open_deposit.legs![0]!.qr_image_url!).search,
    overpaid_deposit_id: overpaid.id,
    overpaid_receipt_id: await receiptOf(overpaid.id),
    claim_id: overpaidView.overpayment!.claim_id,
    settled_deposit_id: settled.id,
    review_deposit_ids: [review[0]!.id, review[1]!.id, review[2]!.id],
    review_receipt_id: await receiptOf(review[0]!.id),
    canceled_deposit_id: canceled.id,
    filled_withdrawal_id: filledWithdrawals[0]!.id,
    filled_leg_ref: filledWithdrawals[0]!.leg_ref,
    dispute_ids: [filledWithdrawals[0]!.dispute_id, filledWithdrawals[1]!.dispute_id],
    open_withdrawal_id: open_withdrawal.id,
    approval_withdrawal_ids: [approvals[0]!.id, approvals[1]!.id, approvals[2]!.id, approvals[3]!.id],
    test_clock_id: clock.id,
    event_id: victimEvents.data[0]!.id,
    bank_account,
    second_bank_account,
    endpoint_id,
    delivery_id: deliveries.data[0]!.id,
    spare_endpoint_ids,
  };
  const brand: BrandObjects = {
    spare_merchant_id,
    spare_api_key_ids: [await spareKey(), await spareKey()],
    spare_credential_ids: [await spareCredential(), await spareCredential()],
    spare_brand_id,
    claim_ids,
    claimable_deposit_id: filledWithdrawals[1]!.deposit_id,
  };
  const victim_markers = [
    victim.merchant_id,
    victim.api_key,
    victim.signing_secret,
    objects.beneficiary_id,
    objects.sender_id,
    objects.open_deposit.id,
    objects.open_deposit.slip_upload.token,
    objects.overpaid_deposit_id,
    objects.overpaid_receipt_id,
    objects.claim_id,
    objects.settled_deposit_id,
    ...objects.review_deposit_ids,
    objects.review_receipt_id,
    objects.canceled_deposit_id,
    objects.filled_withdrawal_id,
    objects.filled_leg_ref,
    ...objects.dispute_ids,
    objects.open_withdrawal_id,
    ...objects.approval_withdrawal_ids,
    objects.test_clock_id,
    objects.event_id,
    objects.endpoint_id,
    objects.delivery_id,
  ];
  return {
    app,
    webhooks,
    certs,
    receiver,
    victim,
    victim_live,
    same_brand,
    other_brand,
    depositor,
    staff,
    objects,
    brand,
    victim_markers,
    async close() {
      await webhooks.dispatcher.stop();
      await receiver.close();
      await app.close();
      certs.remove();
    },
  };
}
