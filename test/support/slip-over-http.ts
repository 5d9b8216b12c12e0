import crypto from 'node:crypto';
import { signedHeaders } from '../../src/http/canonical.ts';
import type { SlipUpload } from '../../src/slip-capability/capability.ts';
import type { MerchantCredentials } from './app.ts';
import { multipartBody, somchaiDepositBody } from './slips.ts';

/**
 * A sandbox payment through a running service over a real socket, as a merchant and its payer make it:
 * a signed POST /v1/pay/deposits, the sandbox bank's transfer (POST /v1/test/bank/transfers), and the slip
 * (the bank app's PNG with its mini-QR text) posted to the order's `slip_upload.upload_url`.
 */

async function signedPost(base_url: string, credentials: MerchantCredentials, target: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const text = JSON.stringify(body);
  const headers = signedHeaders({ api_key: credentials.api_key, signing_secret: credentials.signing_secret, method: 'POST', target, body: text, idempotency_key: crypto.randomUUID() });
  const response = await fetch(`${base_url}${target}`, { method: 'POST', headers, body: text });
  const answer = await response.text();
  if (response.status !== 201) throw new Error(`POST ${target} answered ${response.status}: ${answer}`);
  return JSON.parse(answer) as Record<string, unknown>;
}

export interface PaidOrder {
  deposit_id: string;
  upload: SlipUpload;
  slip: { image: Buffer; payload: string };
}

/** A deposit matched at once, and the sandbox bank's transfer for it with its slip. */
export async function payOverHttp(base_url: string, credentials: MerchantCredentials, label: string): Promise<PaidOrder> {
  const deposit = await signedPost(base_url, credentials, '/v1/pay/deposits', somchaiDepositBody(50_000, { prefix: label, account_prefix: '66', ip: '203.0.113.9' }));
  const transfer = (await signedPost(base_url, credentials, '/v1/test/bank/transfers', { deposit_id: deposit.id })) as { slip: { image_base64: string; payload: string } };
  return {
    deposit_id: deposit.id as string,
    upload: deposit.slip_upload as SlipUpload,
    slip: { image: Buffer.from(transfer.slip.image_base64, 'base64'), payload: transfer.slip.payload },
  };
}

/** Posts the order's slip to its upload address (with the payload the client read, so no pixels need decoding); the status. */
export async function uploadSlipOverHttp(order: PaidOrder): Promise<number> {
  const { body, content_type } = multipartBody([
    { name: 'file', data: order.slip.image, filename: 'slip.png', content_type: 'image/png' },
    { name: 'payload', data: order.slip.payload },
  ]);
  const response = await fetch(order.upload.upload_url, {
    method: 'POST',
    headers: { 'content-type': content_type, 'idempotency-key': crypto.randomUUID(), authorization: `Bearer ${order.upload.token}` },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}
