import crypto from 'node:crypto';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../../src/http/canonical.ts';
import { codeToStatus, isErrorCode } from '../../src/platform/errors.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { multipartBody } from '../support/slips.ts';
import { exchangeRaw, requestHead, startServiceProcess, type RawAnswer, type ServiceProcess } from '../support/service-process.ts';

/**
 * Issue 28, item 1, at the level of the process: the service started as `npm start` starts it, and
 * bodies cut at every byte offset sent to it over real sockets, in the two ways a body can be cut: a
 * `Content-Length` that ends early (the body is complete for HTTP, but its multipart or JSON is not),
 * and a connection that stops sending before the length it declared. Whatever arrives, the process
 * stays up and keeps answering, every answer it gives is a catalogue refusal, and nothing is stored.
 * (One multipart body cut before its closing boundary used to stop the whole process.)
 */

let service: ServiceProcess;
/** Further keys of the sandbox merchant: a key's write bucket holds 600 requests a minute. */
const extraKeys: MerchantCredentials[] = [];

beforeAll(async () => {
  // Shedding is not what this file tests: on a loaded machine the process would shed deposit creation (503
  // route_unavailable) before any cut body reached it.
  service = await startServiceProcess({ LOAD_SHEDDING: 'false' });
  for (let index = 0; index < 2; index += 1) {
    const created = await fetch(`http://127.0.0.1:${service.port}/v1/bo/merchants/${service.credentials.merchant_id}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${service.operator_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ mode: 'test' }),
    });
    expect(created.status).toBe(201);
    const key = (await created.json()) as { api_key: string; signing_secret: string };
    extraKeys.push({ ...service.credentials, api_key: key.api_key, signing_secret: key.signing_secret });
  }
}, 120_000);

afterAll(async () => {
  await service?.stop();
});

function url(path: string): string {
  return `http://127.0.0.1:${service.port}${path}`;
}

function signed(credentials: MerchantCredentials, method: string, target: string, body: Buffer | string, idempotency_key?: string): Record<string, string> {
  return signedHeaders({ api_key: credentials.api_key, signing_secret: credentials.signing_secret, method, target, body, idempotency_key });
}

interface Upload {
  deposit_id: string;
  path: string;
  host: string;
  token: string;
}

let depositCounter = 0;

/** A sandbox deposit created over HTTP, with its slip capability (120.00 THB: no sandbox scenario acts on it). */
async function newUpload(): Promise<Upload> {
  depositCounter += 1;
  const reference = `cut-${depositCounter}-${crypto.randomBytes(4).toString('hex')}`;
  const body = JSON.stringify({
    amount_minor: 12_000,
    currency: 'THB',
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { bank_code: '002', account_number: `77${String(depositCounter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.7', user_agent: 'cut-bodies-test' },
  });
  const response = await fetch(url('/v1/pay/deposits'), { method: 'POST', headers: signed(service.credentials, 'POST', '/v1/pay/deposits', body, reference), body });
  const text = await response.text();
  expect(response.status, text).toBe(201);
  const deposit = JSON.parse(text) as { id: string; slip_upload: { token: string; upload_url: string } };
  const address = new URL(deposit.slip_upload.upload_url);
  return { deposit_id: deposit.id, path: address.pathname, host: address.host, token: deposit.slip_upload.token };
}

/** The slip bucket counts 20 uploads a minute per capability and address: a new order every 20 cuts. */
class Uploads {
  private current: Upload | null = null;
  private used = 0;
  readonly all: Upload[] = [];

  async next(): Promise<Upload> {
    if (this.current === null || this.used >= 20) {
      this.current = await newUpload();
      this.all.push(this.current);
      this.used = 0;
    }
    this.used += 1;
    return this.current;
  }
}

function expectCatalogueRefusal(answer: RawAnswer, label: string): void {
  expect(answer.status, `${label}: ${answer.raw.slice(0, 300)}`).not.toBeNull();
  const status = answer.status as number;
  expect(status >= 400 && status < 500, `${label}: ${answer.raw.slice(0, 300)}`).toBe(true);
  const code = (JSON.parse(answer.body) as { error: { code: string } }).error.code;
  expect(isErrorCode(code), label).toBe(true);
  expect(codeToStatus(code as never), label).toBe(status);
  expect(code, label).not.toBe('rate_limited');
}

async function expectAnswering(label: string): Promise<void> {
  expect(service.alive(), `${label}\n${service.output()}`).toBe(true);
  const health = await fetch(url('/healthz'));
  expect(health.status, label).toBe(200);
}

/**
 * Sends every cut of `body` short of `complete_at` (the first length at which it is whole: a multipart
 * body is whole once its closing delimiter is in, the CRLF after it being optional): first with the
 * length of the cut, then with the whole length and the connection stopped.
 */
async function sendEveryCut(body: Buffer, complete_at: number, request: (length: number, cut: Buffer) => Promise<Buffer>, label: string): Promise<void> {
  for (let offset = 0; offset < complete_at; offset += 1) {
    const cut = body.subarray(0, offset);
    const short = await exchangeRaw(service.port, Buffer.concat([await request(offset, cut), cut]));
    expectCatalogueRefusal(short, `${label}, ${offset} of ${body.length} bytes declared and sent`);
    await exchangeRaw(service.port, Buffer.concat([await request(body.length, cut), cut]), { end_after_write: true });
    if (offset % 50 === 0) await expectAnswering(`${label} at ${offset}`);
  }
  await expectAnswering(`${label}, every offset`);
}

describe('bodies cut at every byte offset, sent to the service process', () => {
  it('a multipart slip upload and a JSON slip upload: every cut is refused from the catalogue, the process answers, nothing is stored', async () => {
    const image = await sharp({ create: { width: 2, height: 2, channels: 3, background: '#ffffff' } }).png().toBuffer();
    const multipart = multipartBody(
      [
        { name: 'file', data: image, filename: 's.png', content_type: 'image/png' },
        { name: 'payload', data: '0041000600000101030060217Q1Z2X3' },
      ],
      'XB',
    );
    const uploads = new Uploads();
    const slipHead = async (length: number, contentType: string) => {
      const upload = await uploads.next();
      return requestHead('POST', upload.path, {
        Host: upload.host,
        Authorization: `Bearer ${upload.token}`,
        'Idempotency-Key': crypto.randomUUID(),
        'Content-Type': contentType,
        'Content-Length': String(length),
      });
    };
    const closed = multipart.body.indexOf('--XB--') + '--XB--'.length;
    await sendEveryCut(multipart.body, closed, (length) => slipHead(length, multipart.content_type), 'multipart slip');
    const json = Buffer.from(JSON.stringify({ image_base64: image.toString('base64'), payload: 'ABC123' }));
    await sendEveryCut(json, json.length, (length) => slipHead(length, 'application/json'), 'JSON slip');

    // Nothing of any cut was stored: no order has a slip, and a whole upload is still taken.
    for (const upload of uploads.all) {
      const target = `/v1/pay/deposits/${upload.deposit_id}/slip`;
      const stored = await fetch(url(target), { headers: signed(service.credentials, 'GET', target, '') });
      expect(stored.status, upload.deposit_id).toBe(404);
    }
    const whole = await newUpload();
    const accepted = await exchangeRaw(
      service.port,
      Buffer.concat([
        requestHead('POST', whole.path, {
          Host: whole.host,
          Authorization: `Bearer ${whole.token}`,
          'Idempotency-Key': crypto.randomUUID(),
          'Content-Type': multipart.content_type,
          'Content-Length': String(multipart.body.length),
        }),
        multipart.body,
      ]),
    );
    expect(accepted.status, accepted.raw).toBe(202);
  }, 600_000);

  it('a signed JSON deposit creation: every cut is refused from the catalogue, the process answers, no order is created', async () => {
    const reference = `cut-json-${crypto.randomBytes(4).toString('hex')}`;
    const body = Buffer.from(
      JSON.stringify({
        amount_minor: 20_000,
        currency: 'THB',
        merchant_reference: reference,
        end_user_ref: `user-${reference}`,
        sender: { bank_code: '004', account_number: '6612345678', account_name_th: 'สมหญิง รักดี', account_name_en: 'Somying Rakdee' },
        client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.9', user_agent: 'cut-bodies-test' },
        metadata: { basket: 'a1', note: 'ทดสอบ' },
      }),
    );
    // The declared cuts are signed over the bytes they carry, so that the signature holds and the JSON is what is judged.
    const [shortKey, stoppedKey] = extraKeys as [MerchantCredentials, MerchantCredentials];
    const head = async (length: number, cut: Buffer) => {
      const sent = length === cut.length ? cut : body;
      const credentials = length === cut.length ? shortKey : stoppedKey;
      const headers = signed(credentials, 'POST', '/v1/pay/deposits', sent, crypto.randomUUID());
      return requestHead('POST', '/v1/pay/deposits', { Host: `127.0.0.1:${service.port}`, 'Content-Type': 'application/json', 'Content-Length': String(length), ...headers });
    };
    await sendEveryCut(body, body.length, head, 'JSON deposit creation');

    const target = `/v1/pay/deposits?end_user_ref=user-${reference}`;
    const listed = await fetch(url(target), { headers: signed(service.credentials, 'GET', target, '') });
    expect(listed.status).toBe(200);
    expect(((await listed.json()) as { data: unknown[] }).data).toEqual([]);
  }, 600_000);
});
