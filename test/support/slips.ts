import crypto from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { DepositView } from '../../src/deposits/service.ts';
import type { SlipUpload } from '../../src/slip-capability/capability.ts';
import type { SandboxTransferView } from '../../src/sandbox/bank.ts';
import type { MerchantCredentials, TestApp } from './app.ts';
import { renderSlipImage } from '../../src/sandbox/slip-image.ts';

/**
 * Helpers for slip tests, each going through the door a user uses: a merchant creates a sandbox
 * deposit over signed HTTP, the sandbox payer transfers through POST /v1/test/bank/transfers and gets
 * the slip image, the end user uploads it to `slip_upload.upload_url` with the capability, and the real
 * job worker processes it.
 */

export type CreatedDeposit = DepositView & { slip_upload: SlipUpload };

let counter = 0;

export function nextReference(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}-${crypto.randomBytes(3).toString('hex')}`;
}

export const SOMCHAI_SENDER = { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' } as const;

/**
 * A deposit body from a fresh end user with Somchai's name and an account of its own (`account_prefix` and eight
 * random digits), so that orders made at once never share a sender; `label` names the test in the references.
 */
export function somchaiDepositBody(amount_minor: number, label: { prefix: string; account_prefix: string; ip: string }): Record<string, unknown> {
  const reference = nextReference(label.prefix);
  return {
    amount_minor,
    currency: 'THB',
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { ...SOMCHAI_SENDER, account_number: `${label.account_prefix}${crypto.randomInt(10_000_000, 99_999_999)}` },
    client: { device_fingerprint: `device-${reference}`, ip: label.ip, user_agent: `${label.prefix}-test` },
  };
}

/** A sandbox deposit matched at once (201), with its capability. */
export async function createDeposit(
  app: TestApp,
  options: { amount_minor: number; credentials?: MerchantCredentials; sender?: Record<string, string>; expires_in_seconds?: number } = { amount_minor: 10_000 },
): Promise<CreatedDeposit> {
  const reference = nextReference('slip');
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    body: {
      amount_minor: options.amount_minor,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: options.sender ?? { ...SOMCHAI_SENDER, account_number: `55${String(counter).padStart(8, '0')}` },
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.7', user_agent: 'slip-test' },
      ...(options.expires_in_seconds === undefined ? {} : { expires_in_seconds: options.expires_in_seconds }),
    },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<CreatedDeposit>();
}

/** The sandbox bank makes a transfer for the deposit and returns the slip. */
export async function sandboxTransfer(
  app: TestApp,
  deposit: { id: string },
  options: Record<string, unknown> = {},
  credentials?: MerchantCredentials,
): Promise<SandboxTransferView> {
  const response = await app.signed({
    method: 'POST',
    url: '/v1/test/bank/transfers',
    idempotency_key: crypto.randomUUID(),
    ...(credentials ? { credentials } : {}),
    body: { deposit_id: deposit.id, ...options },
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<SandboxTransferView>();
}

export function slipBytes(transfer: SandboxTransferView): Buffer {
  return Buffer.from(transfer.slip.image_base64, 'base64');
}

/** Splits an absolute upload URL into what `inject` needs: the path, and the Host header it names. */
function addressOf(upload_url: string): { url: string; host: string } {
  const parsed = new URL(upload_url);
  return { url: `${parsed.pathname}${parsed.search}`, host: parsed.host };
}

export interface MultipartPart {
  name: string;
  data: Buffer | string;
  filename?: string;
  content_type?: string;
}

export function multipartBody(parts: readonly MultipartPart[], boundary = `----slip${crypto.randomBytes(8).toString('hex')}`): { body: Buffer; content_type: string } {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename === undefined ? '' : `; filename="${part.filename}"`}`;
    const headers = [`Content-Disposition: ${disposition}`, ...(part.content_type ? [`Content-Type: ${part.content_type}`] : [])];
    chunks.push(Buffer.from(`--${boundary}\r\n${headers.join('\r\n')}\r\n\r\n`), Buffer.isBuffer(part.data) ? part.data : Buffer.from(part.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), content_type: `multipart/form-data; boundary=${boundary}` };
}

export interface UploadOptions {
  idempotency_key?: string;
  token?: string | null;
  headers?: Record<string, string>;
  /** Another address than the capability's (to prove the binding). */
  upload_url?: string;
}

/** POSTs a raw body to the upload address with the capability, as a browser or the checkout page would. */
export function postToUploadUrl(app: TestApp, upload: SlipUpload, body: Buffer | string, content_type: string, options: UploadOptions = {}): Promise<LightMyRequestResponse> {
  const address = addressOf(options.upload_url ?? upload.upload_url);
  const headers: Record<string, string> = {
    host: address.host,
    'content-type': content_type,
    'idempotency-key': options.idempotency_key ?? crypto.randomUUID(),
    ...(options.token === null ? {} : { authorization: `Bearer ${options.token ?? upload.token}` }),
    ...options.headers,
  };
  return app.instance.app.inject({ method: 'POST', url: address.url, headers, payload: body });
}

export function uploadMultipart(app: TestApp, upload: SlipUpload, image: Buffer, options: UploadOptions & { payload?: string; filename?: string; part_type?: string } = {}) {
  const parts: MultipartPart[] = [{ name: 'file', data: image, filename: options.filename ?? 'slip.png', content_type: options.part_type ?? 'image/png' }];
  if (options.payload !== undefined) parts.push({ name: 'payload', data: options.payload });
  const { body, content_type } = multipartBody(parts);
  return postToUploadUrl(app, upload, body, content_type, options);
}

export function uploadJson(app: TestApp, upload: SlipUpload, json: unknown, options: UploadOptions = {}) {
  return postToUploadUrl(app, upload, typeof json === 'string' ? json : JSON.stringify(json), 'application/json', options);
}

/** Runs every due job with the real worker (slip processing, then anything it enqueued). */
export async function runJobs(app: TestApp): Promise<number> {
  return app.instance.worker.runDueJobs();
}

export async function getDeposit(app: TestApp, id: string, credentials?: MerchantCredentials): Promise<DepositView> {
  const response = await app.signed({ url: `/v1/pay/deposits/${id}`, ...(credentials ? { credentials } : {}) });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<DepositView>();
}

/** The event types of one object, in feed order. */
export async function eventTypesOf(app: TestApp, object_id: string): Promise<string[]> {
  const { rows } = await app.testDatabase.database.query<{ type: string }>('SELECT type FROM events WHERE object_id = $1 ORDER BY created_at, sequence', [object_id]);
  return rows.map((row) => row.type);
}

/** Every event envelope of a merchant, in feed order. */
export async function eventsOfMerchant(app: TestApp, merchant_id: string): Promise<{ type: string; data: { object: Record<string, unknown> } }[]> {
  const { rows } = await app.testDatabase.database.query<{ text: string }>('SELECT envelope::text AS text FROM events WHERE merchant_id = $1 ORDER BY sequence', [merchant_id]);
  return rows.map((row) => JSON.parse(row.text) as { type: string; data: { object: Record<string, unknown> } });
}

/** A whole deposit policy for POST /v1/bo/deposit-policy: the defaults, with the fields a test changes. */
export function depositPolicyBody(overrides: Record<string, unknown>): Record<string, unknown> {
  return {
    mode: 'test',
    min_amount_minor: 10_000,
    max_amount_minor: 5_000_000,
    default_expires_in_seconds: 900,
    max_expires_in_seconds: 3600,
    max_legs: 3,
    liquidity_wait_seconds: 300,
    gateway: null,
    ...overrides,
  };
}

/** The withdrawal a deposit's first leg pays, as the withdrawal side keeps it, with that leg's status. */
export async function withdrawalOf(app: TestApp, order: { id: string }) {
  const { rows } = await app.testDatabase.database.query<{ withdrawal_id: string; filled_minor: string; remaining_minor: string; reserved_minor: string; leg_status: string }>(
    `SELECT w.withdrawal_id, w.filled_minor, w.remaining_minor, w.reserved_minor, l.status AS leg_status
       FROM deposit_legs d JOIN withdrawal_orders w ON w.white_label_id = d.white_label_id AND w.withdrawal_id = d.withdrawal_id
       JOIN withdrawal_legs l ON l.white_label_id = d.white_label_id AND l.leg_ref = d.withdrawal_leg_ref
      WHERE d.deposit_id = $1 ORDER BY d.sequence LIMIT 1`,
    [order.id],
  );
  const row = rows[0];
  if (!row) throw new Error('no withdrawal leg');
  return { withdrawal_id: row.withdrawal_id, filled_minor: Number(row.filled_minor), remaining_minor: Number(row.remaining_minor), reserved_minor: Number(row.reserved_minor), leg_status: row.leg_status };
}

/** The brand's external gateway account in the live-mode tests, and the live sender paying into it. */
export const LIVE_GATEWAY = { bank_code: '014', account_number: '3692581470', account_name_th: 'บริษัท สยามซอฟต์ จำกัด' } as const;
export const LIVE_SENDER = { bank_code: '004', account_number: '7400000001', account_name_th: 'สมชาย ใจดี' } as const;

/**
 * A live order of 250.00 baht from LIVE_SENDER, paid through the brand's gateway (the brand's deposit
 * policy must be live with LIVE_GATEWAY), and the slip image of its transfer: a fresh reference of
 * `trans_ref_prefix` followed by six hexadecimal digits, at the clock's time.
 */
export async function liveOrderWithSlip(app: TestApp, credentials: MerchantCredentials, trans_ref_prefix: string): Promise<{ order: CreatedDeposit; slip: Buffer; trans_ref: string }> {
  const reference = crypto.randomUUID().slice(0, 20);
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    credentials,
    body: { amount_minor: 25_000, currency: 'THB', merchant_reference: reference, end_user_ref: `u-${reference}`, sender: LIVE_SENDER },
  });
  expect(response.statusCode, response.body).toBe(201);
  const order = response.json<CreatedDeposit>();
  expect(order).toMatchObject({ livemode: true, liquidity_source: 'external_gateway' });
  const trans_ref = `${trans_ref_prefix}${crypto.randomBytes(3).toString('hex').toUpperCase()}`;
  const slip = await renderSlipImage({
    sending_bank_code: LIVE_SENDER.bank_code,
    trans_ref,
    amount_minor: 25_000,
    occurred_at: app.clock.now(),
    sender: { bank_code: LIVE_SENDER.bank_code, account_number: LIVE_SENDER.account_number, name_th: LIVE_SENDER.account_name_th },
    receiver: { bank_code: LIVE_GATEWAY.bank_code, account_number: LIVE_GATEWAY.account_number, name_th: LIVE_GATEWAY.account_name_th },
  });
  return { order, slip: slip.bytes, trans_ref };
}
