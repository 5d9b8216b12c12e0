import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { newIdempotencyKey, type ChaosClient, type MerchantCredentials, type Outcome, type RequestSpec, type RetryPolicy } from './client.ts';
import { RefundStorm, type RefundAttempt } from './refunds.ts';

/**
 * The chaos run's tenants and its mixed load, all through the doors a user uses: the back office (the
 * operator credential the first start wrote) creates the merchants, their test keys and their webhook
 * endpoints; the merchants create deposits, pay them through the sandbox bank (POST
 * /v1/test/bank/transfers gives a real slip image) and upload the slip to `slip_upload.upload_url` with
 * the order's capability, cancel deposits, leave some to expire, and create and cancel withdrawals that
 * the other merchants' deposits fill. Some paid deposits are refunded once settled (refunds.ts): concurrent
 * refunds, a retry of one key sent twice at once, an over-refund and a race for the last baht.
 */

export interface ChaosMerchant {
  index: number;
  merchant_id: string;
  credentials: MerchantCredentials;
  endpoint_id: string;
  /** Set by the funding step (a verified payee of the sandbox bank). */
  beneficiary_id: string;
  /** Withdrawals (refunds among them) acknowledged and not yet canceled by the load. */
  open_withdrawals: string[];
}

export interface Tenants {
  white_label_id: string;
  operator_token: string;
  merchants: ChaosMerchant[];
  sender_banks: string[];
  /** Sender banks that also receive: a refund is paid back to the sending account, which a send-only bank cannot take. */
  refund_banks: string[];
}

/** One operation of the load and its final outcome. */
export interface Operation {
  kind: 'deposit.create' | 'bank.transfer' | 'slip.upload' | 'deposit.cancel' | 'withdrawal.create' | 'withdrawal.cancel' | 'refund.create';
  merchant: number;
  /** The order the operation created or acted on (from the answer, or the request). */
  object_id: string | null;
  /** What the deposit was created for. */
  purpose?: 'pay' | 'cancel' | 'expire' | 'refund';
  /** A refund's deposit, and which step of the refund storm sent it (refunds.ts). */
  refund?: RefundAttempt;
  outcome: Outcome;
}

export interface LoadSettings {
  load_end_ms: number;
  /** No retry starts after this (the load's end plus a grace for operations under way). */
  op_deadline_ms: number;
  flows: number;
  /** Share of slip uploads that carry the slip's mini-QR text (`payload`); the rest are read from pixels. */
  payload_share: number;
  run_tag: string;
}

const WEIGHTS: readonly [Flow, number][] = [
  ['pay', 0.37],
  ['refund', 0.08],
  ['cancel', 0.12],
  ['expire', 0.08],
  ['withdraw', 0.23],
  ['withdraw_cancel', 0.12],
];
type Flow = 'pay' | 'refund' | 'cancel' | 'expire' | 'withdraw' | 'withdraw_cancel';

/** The sandbox scenario amounts (100.00 to 116.00 THB) are avoided: they run scripted sandbox steps. */
const DEPOSIT_MIN_BAHT = 200;
const DEPOSIT_MAX_BAHT = 3_000;
const WITHDRAWAL_MIN_BAHT = 500;
const WITHDRAWAL_MAX_BAHT = 5_000;
/** The shortest transfer time the API takes; such orders expire inside the run. */
const SHORT_EXPIRY_SECONDS = 60;
const WITHDRAWAL_CANCEL_RETRY_CODES: ReadonlySet<string> = new Set(['withdrawal_has_pending_fill', 'withdrawal_state_conflict', 'alloc_state_conflict']);

function randomInt(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!;
}

function pickFlow(): Flow {
  let roll = Math.random();
  for (const [flow, weight] of WEIGHTS) {
    if (roll < weight) return flow;
    roll -= weight;
  }
  return 'pay';
}

/** A multipart/form-data body with a fixed boundary, so that a retry sends the very same bytes. */
export function multipart(parts: readonly { name: string; data: Buffer | string; filename?: string; content_type?: string }[]): { body: Buffer; content_type: string } {
  const boundary = `----chaos${crypto.randomBytes(12).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename === undefined ? '' : `; filename="${part.filename}"`}`;
    const headers = [`Content-Disposition: ${disposition}`, ...(part.content_type ? [`Content-Type: ${part.content_type}`] : [])];
    chunks.push(Buffer.from(`--${boundary}\r\n${headers.join('\r\n')}\r\n\r\n`), Buffer.isBuffer(part.data) ? part.data : Buffer.from(part.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), content_type: `multipart/form-data; boundary=${boundary}` };
}

function parse<T>(text: string): T {
  return JSON.parse(text) as T;
}

/** The operator's back-office calls of the set-up (no kills run yet; a retry is still safe to send). */
async function backoffice<T>(client: ChaosClient, token: string, method: 'GET' | 'POST', target: string, body: unknown): Promise<T> {
  const spec: RequestSpec = { kind: 'backoffice', method, target, token, ...(body === undefined ? {} : { body: JSON.stringify(body) }) };
  const outcome = await client.perform(`setup ${method} ${target}`, spec, { deadline_ms: Date.now() + 60_000 });
  if (outcome.result !== 'acked') throw new Error(`set-up ${method} ${target} answered ${outcome.status}: ${outcome.body_text.slice(0, 300)}`);
  return parse<T>(outcome.body_text);
}

/**
 * Merchants, keys and webhook endpoints through the back office, and the brand's test withdrawal policy:
 * no approval step, and a 5-minute matching window (the policy's shortest), so that withdrawals expire,
 * releasing their reserved legs, within a run of several minutes.
 */
export async function setUpTenants(input: {
  client: ChaosClient;
  data_directory: string;
  merchants: number;
  receiver_url: string;
  run_tag: string;
}): Promise<Tenants> {
  const operator = parse<{ token: string }>(fs.readFileSync(path.join(input.data_directory, 'operator-credentials.json'), 'utf8'));
  const sandbox = parse<{ white_label_id: string } & MerchantCredentials>(fs.readFileSync(path.join(input.data_directory, 'sandbox-credentials.json'), 'utf8'));
  const white_label_id = sandbox.white_label_id;
  await backoffice(input.client, operator.token, 'POST', '/v1/bo/withdrawal-policy', {
    white_label_id,
    mode: 'test',
    approval_threshold_minor: null,
    approval_ttl_seconds: 3600,
    expires_in_seconds: 300,
    max_splits: 10,
    min_amount_minor: 100,
    max_amount_minor: 100_000_000,
  });
  const merchants: ChaosMerchant[] = [];
  for (let index = 0; index < input.merchants; index += 1) {
    const merchant = await backoffice<{ id: string }>(input.client, operator.token, 'POST', '/v1/bo/merchants', { white_label_id, name: `Chaos ${input.run_tag} ${index + 1}` });
    // The endpoint comes before any event of the merchant, so that every one of its events is delivered.
    const endpoint = await backoffice<{ id: string }>(input.client, operator.token, 'POST', '/v1/bo/webhooks', {
      merchant_id: merchant.id,
      mode: 'test',
      url: `${input.receiver_url}/hooks/${index + 1}`,
    });
    const key = await backoffice<MerchantCredentials>(input.client, operator.token, 'POST', `/v1/bo/merchants/${merchant.id}/api-keys`, { mode: 'test' });
    merchants.push({
      index,
      merchant_id: merchant.id,
      credentials: { api_key: key.api_key, signing_secret: key.signing_secret },
      endpoint_id: endpoint.id,
      beneficiary_id: '',
      open_withdrawals: [],
    });
  }
  const banks = await input.client.perform(
    'setup GET /v1/pay/banks',
    { kind: 'merchant', method: 'GET', target: '/v1/pay/banks', credentials: merchants[0]!.credentials },
    { deadline_ms: Date.now() + 60_000 },
  );
  const list = parse<{ data: { bank_code: string; available: boolean; side: string[] }[] }>(banks.body_text).data;
  const sender_banks = list.filter((bank) => bank.available && bank.side.includes('sender')).map((bank) => bank.bank_code).slice(0, 6);
  if (sender_banks.length === 0) throw new Error('no bank is available on the sender side');
  const refund_banks = list.filter((bank) => bank.available && bank.side.includes('sender') && bank.side.includes('receiver')).map((bank) => bank.bank_code).slice(0, 6);
  if (refund_banks.length === 0) throw new Error('no bank is available on both sides');
  return { white_label_id, operator_token: operator.token, merchants, sender_banks, refund_banks };
}

export class Load {
  readonly operations: Operation[] = [];
  private counter = 0;
  private readonly refunds: RefundStorm;

  constructor(
    private readonly client: ChaosClient,
    private readonly tenants: Tenants,
    private readonly settings: LoadSettings,
  ) {
    this.refunds = new RefundStorm(client, settings.op_deadline_ms, (operation) => this.record(operation));
  }

  private policy(extra: Partial<RetryPolicy> = {}): RetryPolicy {
    return { deadline_ms: this.settings.op_deadline_ms, ...extra };
  }

  private reference(kind: string): string {
    this.counter += 1;
    return `${kind}-${this.settings.run_tag}-${this.counter}`;
  }

  private record(operation: Operation): Operation {
    this.operations.push(operation);
    return operation;
  }

  async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.settings.flows }, () => this.flow()));
  }

  private async flow(): Promise<void> {
    while (Date.now() < this.settings.load_end_ms) {
      const merchant = pick(this.tenants.merchants);
      const flow = pickFlow();
      if (flow === 'pay') await this.pay(merchant);
      else if (flow === 'refund') await this.payThenRefund(merchant);
      else if (flow === 'cancel') await this.createThenCancel(merchant);
      else if (flow === 'expire') await this.createDeposit(merchant, 'expire');
      else if (flow === 'withdraw') await this.withdraw(merchant);
      else await this.cancelWithdrawal(merchant);
    }
  }

  private async createDeposit(merchant: ChaosMerchant, purpose: 'pay' | 'cancel' | 'expire' | 'refund'): Promise<{ id: string; slip_upload?: { token: string; upload_url: string } } | null> {
    const reference = this.reference('dep');
    const accountNumber = `9${String(randomInt(0, 999_999_999)).padStart(9, '0')}`;
    const body = JSON.stringify({
      amount_minor: randomInt(DEPOSIT_MIN_BAHT, DEPOSIT_MAX_BAHT) * 100,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: { bank_code: pick(purpose === 'refund' ? this.tenants.refund_banks : this.tenants.sender_banks), account_number: accountNumber, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' },
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.7', user_agent: 'chaos-driver' },
      ...(purpose === 'expire' ? { expires_in_seconds: SHORT_EXPIRY_SECONDS } : {}),
    });
    const outcome = await this.client.perform(
      'deposit.create',
      { kind: 'merchant', method: 'POST', target: '/v1/pay/deposits', body, idempotency_key: newIdempotencyKey('dep'), credentials: merchant.credentials },
      this.policy(),
    );
    const created = outcome.result === 'acked' ? parse<{ id: string; slip_upload?: { token: string; upload_url: string } }>(outcome.body_text) : null;
    this.record({ kind: 'deposit.create', merchant: merchant.index, object_id: created?.id ?? null, purpose, outcome });
    return created;
  }

  /** Pays a deposit, waits for it to settle, then refunds it in a storm of concurrent and conflicting refunds. */
  private async payThenRefund(merchant: ChaosMerchant): Promise<void> {
    const deposit_id = await this.pay(merchant, 'refund');
    if (deposit_id === null) return;
    const refunds = await this.refunds.refund(merchant, deposit_id);
    // Only now may the cancel flow pick the refunds: a cancel during the storm would free room and blur its race.
    merchant.open_withdrawals.push(...refunds);
  }

  /** Creates a deposit and pays it; the deposit's id once its slip upload is acknowledged, else null. */
  private async pay(merchant: ChaosMerchant, purpose: 'pay' | 'refund' = 'pay'): Promise<string | null> {
    const deposit = await this.createDeposit(merchant, purpose);
    // A 202 (awaiting liquidity) has no slip capability yet; such an order is left to its liquidity wait.
    if (!deposit?.slip_upload) return null;
    const transferBody = JSON.stringify({ deposit_id: deposit.id });
    const transfer = await this.client.perform(
      'bank.transfer',
      { kind: 'merchant', method: 'POST', target: '/v1/test/bank/transfers', body: transferBody, idempotency_key: newIdempotencyKey('trf'), credentials: merchant.credentials },
      this.policy(),
    );
    this.record({ kind: 'bank.transfer', merchant: merchant.index, object_id: deposit.id, outcome: transfer });
    if (transfer.result !== 'acked') return null;
    const slip = parse<{ slip: { media_type: string; image_base64: string; payload: string } }>(transfer.body_text).slip;
    const parts: { name: string; data: Buffer | string; filename?: string; content_type?: string }[] = [
      { name: 'file', data: Buffer.from(slip.image_base64, 'base64'), filename: slip.media_type === 'image/png' ? 'slip.png' : 'slip.jpg', content_type: slip.media_type },
    ];
    if (Math.random() < this.settings.payload_share) parts.push({ name: 'payload', data: slip.payload });
    const { body, content_type } = multipart(parts);
    const upload = await this.client.perform(
      'slip.upload',
      { kind: 'capability', upload_url: deposit.slip_upload.upload_url, token: deposit.slip_upload.token, idempotency_key: newIdempotencyKey('slip'), body, content_type },
      this.policy(),
    );
    this.record({ kind: 'slip.upload', merchant: merchant.index, object_id: deposit.id, outcome: upload });
    return upload.result === 'acked' ? deposit.id : null;
  }

  private async createThenCancel(merchant: ChaosMerchant): Promise<void> {
    const deposit = await this.createDeposit(merchant, 'cancel');
    if (!deposit) return;
    const outcome = await this.client.perform(
      'deposit.cancel',
      { kind: 'merchant', method: 'POST', target: `/v1/pay/deposits/${deposit.id}/cancel`, idempotency_key: newIdempotencyKey('dcx'), credentials: merchant.credentials },
      this.policy(),
    );
    this.record({ kind: 'deposit.cancel', merchant: merchant.index, object_id: deposit.id, outcome });
  }

  private async withdraw(merchant: ChaosMerchant): Promise<void> {
    const reference = this.reference('wdr');
    const body = JSON.stringify({
      amount_minor: randomInt(WITHDRAWAL_MIN_BAHT, WITHDRAWAL_MAX_BAHT) * 100,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `payee-${reference}`,
      beneficiary_id: merchant.beneficiary_id,
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.8', user_agent: 'chaos-driver' },
    });
    const outcome = await this.client.perform(
      'withdrawal.create',
      { kind: 'merchant', method: 'POST', target: '/v1/pay/withdrawals', body, idempotency_key: newIdempotencyKey('wdr'), credentials: merchant.credentials },
      this.policy(),
    );
    const created = outcome.result === 'acked' ? parse<{ id: string }>(outcome.body_text) : null;
    if (created) merchant.open_withdrawals.push(created.id);
    this.record({ kind: 'withdrawal.create', merchant: merchant.index, object_id: created?.id ?? null, outcome });
  }

  private async cancelWithdrawal(merchant: ChaosMerchant): Promise<void> {
    if (merchant.open_withdrawals.length === 0) return this.withdraw(merchant);
    const index = Math.floor(Math.random() * merchant.open_withdrawals.length);
    const withdrawal_id = merchant.open_withdrawals[index]!;
    merchant.open_withdrawals.splice(index, 1);
    const outcome = await this.client.perform(
      'withdrawal.cancel',
      { kind: 'merchant', method: 'POST', target: `/v1/pay/withdrawals/${withdrawal_id}/cancel`, idempotency_key: newIdempotencyKey('wcx'), credentials: merchant.credentials },
      this.policy({ business_retry_codes: WITHDRAWAL_CANCEL_RETRY_CODES, max_business_retries: 3 }),
    );
    this.record({ kind: 'withdrawal.cancel', merchant: merchant.index, object_id: withdrawal_id, outcome });
  }
}
