import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import {
  createDeposit,
  getDeposit,
  multipartBody,
  postToUploadUrl,
  runJobs,
  sandboxTransfer,
  slipBytes,
  uploadJson,
  uploadMultipart,
  type CreatedDeposit,
} from '../support/slips.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { SLIP_MAX_BYTES } from '../../src/slip-capability/capability.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import { usingPostgres } from '../support/database.ts';

/**
 * Slip intake through its own door (spec, POST /v1/pay/deposits/{id}/slip): the capability and its
 * bindings, the three body shapes and every refusal with its code and fields, idempotency by the
 * logical evidence, the three-upload limit, the rate bucket, durability before the 202 (an injected
 * storage failure and queue failure answer 503 and leave nothing), the 410 after the late-slip window
 * with a claim_url that works, the filesystem evidence store, and the merchant's read of the image.
 */

let app: TestApp;
const logLines: string[] = [];

beforeAll(async () => {
  app = await createTestApp({ logger: createLogger('info', { write: (line: string) => void logLines.push(line) }) });
});
afterAll(async () => {
  await app.close();
});

async function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

/** Rows a refused upload must not leave behind. */
async function intakeRows(): Promise<{ receipts: number; blobs: number; jobs: number; records: number }> {
  const { rows } = await app.testDatabase.database.query<{ receipts: number; blobs: number; jobs: number; records: number }>(
    `SELECT (SELECT count(*)::integer FROM slip_receipts) AS receipts, (SELECT count(*)::integer FROM slip_blobs) AS blobs,
            (SELECT count(*)::integer FROM jobs WHERE task = 'slips.process') AS jobs,
            (SELECT count(*)::integer FROM idempotency_records WHERE merchant_id LIKE 'capability:%') AS records`,
  );
  return rows[0]!;
}

/** The claims of a capability, read without verifying (to mint a variant with the service's own key). */
function claimsOf(token: string) {
  const { iss: _iss, aud: _aud, scope: _scope, jti: _jti, ...claims } = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
  return claims as Parameters<TestApp['instance']['services']['slipTokens']['mint']>[0];
}

/** The token with its signature's last character changed to another that decodes to the same bytes. */
function nonCanonical(token: string): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const signature = token.split('.')[2]!;
  const bytes = Buffer.from(signature, 'base64url');
  for (const character of alphabet) {
    const variant = `${signature.slice(0, -1)}${character}`;
    if (variant !== signature && Buffer.from(variant, 'base64url').equals(bytes)) return `${token.slice(0, -signature.length)}${variant}`;
  }
  throw new Error('a 64-byte signature always has spare bits in its last character');
}

async function pngOfSize(bytes: number): Promise<Buffer> {
  const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ffffff' } }).png().toBuffer();
  // Bytes after a PNG's IEND are ignored by decoders: the file keeps its type and reaches the size asked.
  return Buffer.concat([png, Buffer.alloc(Math.max(0, bytes - png.length))]);
}

describe('the receipt', () => {
  it('202 with receipt_id, status accepted and received_at; no-store; the slip_upload rate bucket', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const transfer = await sandboxTransfer(app, order);
    const response = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
    expect(response.statusCode, response.body).toBe(202);
    expect(response.json()).toEqual({ receipt_id: expect.stringMatching(/^rcpt_[0-9A-Z]{26}$/), status: 'accepted', received_at: app.clock.now().toISOString(), livemode: false });
    expect(response.headers).toMatchObject({
      'cache-control': 'no-store',
      'ratelimit-limit': '20',
      'ratelimit-remaining': '19',
      'ratelimit-policy': '20;w=60',
      'x-ratelimit-scope': 'user',
      'retry-after': '0',
    });
    // A 202 is not a verification result: the order has not moved yet.
    expect((await getDeposit(app, order.id)).status).toBe('awaiting_payment');
  });

  it('the file type comes from the magic bytes, not the file name or the part type', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const png = slipBytes(await sandboxTransfer(app, order));
    const response = await uploadMultipart(app, order.slip_upload, png, { filename: 'photo.jpg', part_type: 'image/jpeg' });
    expect(response.statusCode).toBe(202);
    const { rows } = await app.testDatabase.database.query<{ media_type: string; size_bytes: number }>('SELECT media_type, size_bytes FROM slip_receipts WHERE deposit_id = $1', [order.id]);
    expect(rows).toEqual([{ media_type: 'image/png', size_bytes: png.length }]);
  });

  it('the evidence is encrypted at rest, with a manifest that matches it', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const png = slipBytes(await sandboxTransfer(app, order));
    const receipt = (await uploadMultipart(app, order.slip_upload, png)).json<{ receipt_id: string }>();
    const { rows } = await app.testDatabase.database.query<{ ciphertext: Uint8Array; image_sha256: string; blob_store: string; wrapped_key: string }>(
      'SELECT b.ciphertext, r.image_sha256, r.blob_store, r.wrapped_key FROM slip_blobs b JOIN slip_receipts r ON r.white_label_id = b.white_label_id AND r.receipt_id = b.blob_key WHERE r.receipt_id = $1',
      [receipt.receipt_id],
    );
    const stored = Buffer.from(rows[0]!.ciphertext);
    expect(rows[0]).toMatchObject({ image_sha256: crypto.createHash('sha256').update(png).digest('hex'), blob_store: 'postgres', wrapped_key: expect.stringMatching(/^v2\./) });
    expect(stored.length).toBe(png.length + 28);
    expect(stored.includes(png.subarray(0, 16))).toBe(false);
    expect(stored.includes(png.subarray(1000, 1064))).toBe(false);
  });
});

describe('idempotency by the logical evidence', () => {
  it('the same image and fields under the same key replay the receipt, whatever the boundary, key order, base64 breaks or shape', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const transfer = await sandboxTransfer(app, order);
    const image = slipBytes(transfer);
    const key = crypto.randomUUID();
    const first = await uploadMultipart(app, order.slip_upload, image, { idempotency_key: key, payload: transfer.slip.payload });
    expect(first.statusCode).toBe(202);
    expect(first.headers['idempotent-replay']).toBeUndefined();
    const replays = [
      await uploadMultipart(app, order.slip_upload, image, { idempotency_key: key, payload: transfer.slip.payload, filename: 'other-name.png' }),
      // Keys in another order, and the base64 broken into lines (a JSON string carries them escaped).
      await uploadJson(app, order.slip_upload, `{"payload":${JSON.stringify(transfer.slip.payload)},"image_base64":${JSON.stringify(transfer.slip.image_base64.replace(/(.{64})/g, '$1\n'))}}`, { idempotency_key: key }),
      await uploadJson(app, order.slip_upload, { image_base64: `data:image/png;base64,${transfer.slip.image_base64}`, payload: transfer.slip.payload }, { idempotency_key: key }),
    ];
    for (const replay of replays) {
      expect(replay.statusCode, replay.body).toBe(202);
      expect(replay.headers['idempotent-replay']).toBe('true');
      expect(replay.body).toBe(first.body);
    }
    const other = await uploadMultipart(app, order.slip_upload, image, { idempotency_key: key });
    expect(other.statusCode).toBe(409);
    expect(errorOf(other)).toMatchObject({ code: 'idempotency_key_reused', details: { original_request_id: first.headers['request-id'] } });
    const { rows } = await app.testDatabase.database.query('SELECT receipt_id FROM slip_receipts WHERE deposit_id = $1', [order.id]);
    expect(rows).toHaveLength(1);
  });

  it.runIf(usingPostgres)('two uploads with one key at once store one receipt', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const image = slipBytes(await sandboxTransfer(app, order));
    const key = crypto.randomUUID();
    const answers = await Promise.all([0, 1, 2, 3].map(() => uploadMultipart(app, order.slip_upload, image, { idempotency_key: key })));
    for (const answer of answers) expect([202, 409]).toContain(answer.statusCode);
    for (const answer of answers.filter((candidate) => candidate.statusCode === 409)) expect(errorOf(answer).code).toBe('idempotency_in_flight');
    const { rows } = await app.testDatabase.database.query('SELECT receipt_id FROM slip_receipts WHERE deposit_id = $1', [order.id]);
    expect(rows).toHaveLength(1);
  });
});

describe('limits', () => {
  it('at most 3 uploads per order: the fourth is 409 slip_limit_reached, and nothing is stored but the refusal under its key', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    for (let upload = 0; upload < 3; upload += 1) {
      const response = await uploadJson(app, order.slip_upload, { trans_ref: `REF${upload}`, sending_bank_code: '004', occurred_at: app.clock.now().toISOString() });
      expect(response.statusCode).toBe(202);
    }
    const before = await intakeRows();
    const fourth = await uploadJson(app, order.slip_upload, { trans_ref: 'REF4', sending_bank_code: '004', occurred_at: app.clock.now().toISOString() });
    expect(fourth.statusCode).toBe(409);
    expect(errorOf(fourth)).toMatchObject({ code: 'slip_limit_reached', details: { deposit_id: order.id, max_uploads: 3 } });
    // No receipt, blob or job; the refusal is the key's answer (spec, Common request rules 2).
    expect(await intakeRows()).toEqual({ ...before, records: before.records + 1 });
  });

  it.runIf(usingPostgres)('concurrent uploads to one order with different keys never pass the limit', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const answers = await Promise.all(
      [0, 1, 2, 3, 4, 5].map((index) => uploadJson(app, order.slip_upload, { trans_ref: `RACE${index}`, sending_bank_code: '004', occurred_at: app.clock.now().toISOString() })),
    );
    expect(answers.filter((answer) => answer.statusCode === 202)).toHaveLength(3);
    for (const answer of answers.filter((candidate) => candidate.statusCode !== 202)) expect(errorOf(answer).code).toBe('slip_limit_reached');
  });

  it('the slip_upload bucket: 20 per minute for one end user and IP, then 429 rate_limited', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    app.clock.advance(60_000 - (app.clock.now().getTime() % 60_000));
    for (let request = 0; request < 20; request += 1) {
      const refused = await uploadJson(app, order.slip_upload, '{"not json');
      expect(refused.statusCode).toBe(400);
    }
    const limited = await uploadJson(app, order.slip_upload, '{"not json');
    expect(limited.statusCode).toBe(429);
    expect(errorOf(limited)).toMatchObject({ code: 'rate_limited', details: { bucket: 'slip_upload', scope: 'user' } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    app.clock.advance(60_000);
  });
});

describe('refusals: the spec code and fields, and nothing stored', () => {
  let order: CreatedDeposit;
  let image: Buffer;
  beforeAll(async () => {
    order = await createDeposit(app, { amount_minor: 12_000 });
    image = slipBytes(await sandboxTransfer(app, order));
  });
  // Each test sends many refused uploads for one end user: a fresh minute keeps them under the rate bucket.
  beforeEach(() => {
    app.clock.advance(60_000);
  });

  async function expectRefused(response: Awaited<ReturnType<typeof uploadJson>>, status: number, code: string, fields?: { path: string; reason: string }[]) {
    expect(response.statusCode, response.body).toBe(status);
    const error = errorOf(response);
    expect(error.code).toBe(code);
    if (fields) expect(error.details.fields).toEqual(fields.map((field) => expect.objectContaining(field)));
  }

  it('media types: other than multipart or JSON is 400 unsupported_media_type', async () => {
    const before = await intakeRows();
    await expectRefused(await postToUploadUrl(app, order.slip_upload, image, 'image/png'), 400, 'unsupported_media_type');
    await expectRefused(await postToUploadUrl(app, order.slip_upload, 'x', 'text/plain'), 400, 'unsupported_media_type');
    await expectRefused(await postToUploadUrl(app, order.slip_upload, image, 'application/octet-stream'), 400, 'unsupported_media_type');
    expect(await intakeRows()).toEqual(before);
  });

  it('JSON bodies', async () => {
    const before = await intakeRows();
    await expectRefused(await uploadJson(app, order.slip_upload, '{"image_base64":'), 400, 'malformed_json');
    await expectRefused(await uploadJson(app, order.slip_upload, '[]'), 422, 'validation_error', [{ path: '$', reason: 'must_be_object' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, {}), 422, 'validation_error', [{ path: 'image_base64', reason: 'required' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, { image_base64: 'AAAA', extra: 1 }), 422, 'validation_error', [{ path: 'extra', reason: 'unknown_field' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, { image_base64: 'iVBOR*w0KGgo=' }), 422, 'validation_error', [{ path: 'image_base64', reason: 'invalid_base64' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, { image_base64: 'R0lGODlhAQABAAAAACw=' }), 422, 'validation_error', [{ path: 'image_base64', reason: 'unsupported_type' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, { image_base64: '' }), 422, 'validation_error', [{ path: 'image_base64', reason: 'empty' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, { image_base64: image.toString('base64'), payload: 'x'.repeat(600) }), 422, 'validation_error', [{ path: 'payload', reason: 'invalid_format' }]);
    await expectRefused(await uploadJson(app, order.slip_upload, { trans_ref: 'ABC' }), 422, 'validation_error', [
      { path: 'sending_bank_code', reason: 'required' },
      { path: 'occurred_at', reason: 'required' },
    ]);
    await expectRefused(await uploadJson(app, order.slip_upload, { trans_ref: 'ABC', sending_bank_code: '999', occurred_at: app.clock.now().toISOString() }), 422, 'validation_error', [
      { path: 'sending_bank_code', reason: 'unknown_bank' },
    ]);
    await expectRefused(await uploadJson(app, order.slip_upload, { trans_ref: 'A-B', sending_bank_code: '4', occurred_at: '2026-08-01T07:00:00+07:00' }), 422, 'validation_error', [
      { path: 'trans_ref', reason: 'invalid_format' },
      { path: 'sending_bank_code', reason: 'unknown_bank' },
      { path: 'occurred_at', reason: 'invalid_timestamp' },
    ]);
    expect(await intakeRows()).toEqual(before);
  });

  it('multipart bodies', async () => {
    const before = await intakeRows();
    const send = (parts: Parameters<typeof multipartBody>[0]) => {
      const { body, content_type } = multipartBody(parts);
      return postToUploadUrl(app, order.slip_upload, body, content_type);
    };
    await expectRefused(await send([{ name: 'payload', data: 'abc' }]), 422, 'validation_error', [{ path: 'file', reason: 'required' }]);
    await expectRefused(await send([{ name: 'image', data: image, filename: 'a.png' }]), 422, 'validation_error', [{ path: 'image', reason: 'unknown_field' }]);
    await expectRefused(await send([{ name: 'file', data: image, filename: 'a.png' }, { name: 'file', data: image, filename: 'b.png' }]), 422, 'validation_error');
    await expectRefused(await send([{ name: 'file', data: Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n'), filename: 'slip.png' }]), 422, 'validation_error', [{ path: 'file', reason: 'unsupported_type' }]);
    await expectRefused(await send([{ name: 'file', data: Buffer.alloc(0), filename: 'slip.png' }]), 422, 'validation_error', [{ path: 'file', reason: 'empty' }]);
    await expectRefused(await send([{ name: 'file', data: await pngOfSize(SLIP_MAX_BYTES + 1), filename: 'big.png' }]), 422, 'validation_error', [{ path: 'file', reason: 'too_large' }]);
    await expectRefused(await postToUploadUrl(app, order.slip_upload, Buffer.from('--x\r\nnot a part'), 'multipart/form-data; boundary=x'), 422, 'validation_error', [
      { path: '$', reason: 'malformed_multipart' },
    ]);
    await expectRefused(await postToUploadUrl(app, order.slip_upload, image, 'multipart/form-data'), 422, 'validation_error', [{ path: '$', reason: 'malformed_multipart' }]);
    expect(await intakeRows()).toEqual(before);
  });

  it('max_bytes counts decoded bytes: exactly 4 MiB is taken as base64 and as a file; the body limit above it is 422', async () => {
    const fresh = await createDeposit(app, { amount_minor: 12_000 });
    const exact = await pngOfSize(SLIP_MAX_BYTES);
    expect((await uploadJson(app, fresh.slip_upload, { image_base64: exact.toString('base64') })).statusCode).toBe(202);
    expect((await uploadMultipart(app, fresh.slip_upload, exact)).statusCode).toBe(202);
    await expectRefused(await postToUploadUrl(app, fresh.slip_upload, Buffer.alloc(6 * 1024 * 1024, 0x41), 'application/json'), 422, 'validation_error', [
      { path: '$', reason: 'too_large' },
    ]);
  });
});

describe('the capability', () => {
  let order: CreatedDeposit;
  let image: Buffer;
  beforeAll(async () => {
    order = await createDeposit(app, { amount_minor: 12_000 });
    image = slipBytes(await sandboxTransfer(app, order));
  });

  it('refuses merchant credentials at the upload address: 403 scope_denied', async () => {
    const withKey = await uploadMultipart(app, order.slip_upload, image, { headers: { authorization: `Bearer ${app.sandbox.api_key}` } });
    expect(withKey.statusCode).toBe(403);
    expect(errorOf(withKey)).toMatchObject({ code: 'scope_denied', details: { reason: 'merchant_credentials_not_accepted' } });
    for (const header of ['PG-Timestamp', 'PG-Nonce', 'PG-Version', 'PG-Signature']) {
      const withHeader = await uploadMultipart(app, order.slip_upload, image, { headers: { [header]: 'v1=abc' } });
      expect(withHeader.statusCode, header).toBe(403);
      expect(errorOf(withHeader).code).toBe('scope_denied');
    }
  });

  it('checks every binding: token, deposit, the exact address, expiry; Idempotency-Key required', async () => {
    const other = await createDeposit(app, { amount_minor: 12_000 });
    const cases: { label: string; response: Awaited<ReturnType<typeof uploadJson>>; code: string }[] = [
      { label: 'no token', response: await uploadMultipart(app, order.slip_upload, image, { token: null }), code: 'slip_token_invalid' },
      { label: 'garbage', response: await uploadMultipart(app, order.slip_upload, image, { token: 'not-a-token' }), code: 'slip_token_invalid' },
      { label: 'another order', response: await uploadMultipart(app, order.slip_upload, image, { token: other.slip_upload.token }), code: 'slip_token_invalid' },
      { label: 'a query added', response: await uploadMultipart(app, order.slip_upload, image, { upload_url: `${order.slip_upload.upload_url}?x=1` }), code: 'slip_token_invalid' },
      { label: 'another host', response: await uploadMultipart(app, order.slip_upload, image, { headers: { host: 'evil.example' } }), code: 'slip_token_invalid' },
      {
        label: 'a capability of the same order bound to another reservation (hold_until)',
        response: await uploadMultipart(app, order.slip_upload, image, {
          token: app.instance.services.slipTokens.mint({ ...claimsOf(order.slip_upload.token), hold_until: claimsOf(order.slip_upload.token).hold_until + 60 }),
        }),
        code: 'slip_token_invalid',
      },
      {
        label: 'a capability of an API version the service does not speak',
        response: await uploadMultipart(app, order.slip_upload, image, {
          token: app.instance.services.slipTokens.mint({ ...claimsOf(order.slip_upload.token), api_version: '1999-01-01' }),
        }),
        code: 'slip_token_invalid',
      },
      {
        // The same signature bytes spelled with other unused low bits in its last character.
        label: 'a non-canonical base64url spelling of the real signature',
        response: await uploadMultipart(app, order.slip_upload, image, { token: nonCanonical(order.slip_upload.token) }),
        code: 'slip_token_invalid',
      },
      {
        label: 'a forged signature',
        response: await uploadMultipart(app, order.slip_upload, image, { token: `${order.slip_upload.token.slice(0, -4)}AAAA` }),
        code: 'slip_token_invalid',
      },
    ];
    for (const { label, response, code } of cases) {
      expect(response.statusCode, label).toBe(401);
      expect(errorOf(response).code, label).toBe(code);
    }
    const { body, content_type } = multipartBody([{ name: 'file', data: image, filename: 'a.png' }]);
    const withoutKey = await app.instance.app.inject({
      method: 'POST',
      url: new URL(order.slip_upload.upload_url).pathname,
      headers: { host: new URL(order.slip_upload.upload_url).host, authorization: `Bearer ${order.slip_upload.token}`, 'content-type': content_type },
      payload: body,
    });
    expect(withoutKey.statusCode).toBe(400);
    expect(errorOf(withoutKey).code).toBe('idempotency_key_required');
  });

  it('keeps working after the merchant is suspended and its key revoked (the consumer re-checks the order)', async () => {
    const owner = await merchant();
    const mine = await createDeposit(app, { amount_minor: 12_000, credentials: owner });
    const slip = slipBytes(await sandboxTransfer(app, mine, {}, owner));
    const actor = { actor_type: 'system' as const, actor_id: 'slip-test', request_id: null };
    await app.instance.services.tenancy.setMerchantStatus(actor, owner.merchant_id, null, 'suspended');
    const { rows } = await app.testDatabase.database.query<{ api_key_id: string }>('SELECT api_key_id FROM api_keys WHERE merchant_id = $1', [owner.merchant_id]);
    await app.instance.services.tenancy.setApiKeyStatus(actor, rows[0]!.api_key_id, null, 'revoked');
    expect((await uploadMultipart(app, mine.slip_upload, slip)).statusCode).toBe(202);
    await runJobs(app);
    const { rows: orders } = await app.testDatabase.database.query<{ status: string }>('SELECT status FROM deposit_orders WHERE deposit_id = $1', [mine.id]);
    expect(orders[0]?.status).toBe('settled');
  });
});

describe('after the late-slip window', () => {
  it('410 late_slip_window_closed with deposit_id, late_slip_accepted_until and a claim_url that opens a claim', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const transfer = await sandboxTransfer(app, order);
    app.clock.advance(15 * 60_000);
    await runJobs(app);
    expect(await getDeposit(app, order.id)).toMatchObject({ status: 'expired', late_slip_accepted_until: new Date(Date.parse(order.expires_at) + 24 * HOUR_MS).toISOString() });
    // Inside the window, the claim address says to upload instead.
    const early = await postToUploadUrl(app, order.slip_upload, JSON.stringify({ note: 'I paid on time' }), 'application/json', {
      upload_url: order.slip_upload.upload_url.replace(/\/slip$/, '/claims'),
    });
    expect(early.statusCode).toBe(409);
    expect(errorOf(early)).toMatchObject({ code: 'late_slip_window_open', details: { status: 'expired' } });

    app.clock.advance(24 * HOUR_MS);
    const before = await intakeRows();
    const closed = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
    expect(closed.statusCode).toBe(410);
    const error = errorOf(closed);
    expect(error).toMatchObject({
      code: 'late_slip_window_closed',
      details: { deposit_id: order.id, late_slip_accepted_until: new Date(Date.parse(order.expires_at) + 24 * HOUR_MS).toISOString(), claim_url: expect.any(String) },
    });
    expect(await intakeRows()).toEqual({ ...before, records: before.records + 1 });
    // The order turns terminal when the close job runs at the window's end (deposit.closed), not by the clock alone.
    await runJobs(app);
    expect((await getDeposit(app, order.id)).is_terminal).toBe(true);

    const claimUrl = String(error.details.claim_url);
    expect(claimUrl).toBe(`${new URL(order.slip_upload.upload_url).origin}/v1/pay/deposits/${order.id}/claims`);
    const key = crypto.randomUUID();
    const claimBody = JSON.stringify({ trans_ref: transfer.trans_ref, sending_bank_code: transfer.sending_bank_code, amount_minor: 12_000, note: 'โอนแล้วแต่ส่งสลิปไม่ทัน' });
    const claim = await postToUploadUrl(app, order.slip_upload, claimBody, 'application/json', { upload_url: claimUrl, idempotency_key: key });
    expect(claim.statusCode, claim.body).toBe(201);
    expect(claim.json()).toEqual({
      id: expect.stringMatching(/^clm_/),
      object: 'claim',
      deposit_id: order.id,
      cause: 'late_slip',
      status: 'open',
      amount_minor: 12_000,
      created_at: app.clock.now().toISOString(),
      livemode: false,
    });
    const replay = await postToUploadUrl(app, order.slip_upload, claimBody, 'application/json', { upload_url: claimUrl, idempotency_key: key });
    expect(replay.body).toBe(claim.body);
    expect(replay.headers['idempotent-replay']).toBe('true');
    const merchantKey = await postToUploadUrl(app, order.slip_upload, claimBody, 'application/json', { upload_url: claimUrl, headers: { authorization: `Bearer ${app.sandbox.api_key}` } });
    expect(errorOf(merchantKey).code).toBe('scope_denied');

    // A week after the window the capability itself has expired.
    app.clock.advance(7 * 24 * HOUR_MS);
    const expired = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
    expect(expired.statusCode).toBe(401);
    expect(errorOf(expired).code).toBe('slip_token_expired');
  });
});

describe('GET /v1/pay/deposits/{id}/slip', () => {
  it("returns the stored image bytes with their type and no-store; another tenant's id is 404", async () => {
    const owner = await merchant();
    const order = await createDeposit(app, { amount_minor: 12_000, credentials: owner });
    const png = slipBytes(await sandboxTransfer(app, order, {}, owner));
    expect((await uploadMultipart(app, order.slip_upload, png)).statusCode).toBe(202);
    const read = await app.signed({ url: `/v1/pay/deposits/${order.id}/slip`, credentials: owner });
    expect(read.statusCode).toBe(200);
    expect(read.headers).toMatchObject({ 'content-type': 'image/png', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    expect(read.rawPayload.equals(png)).toBe(true);
    for (const stranger of [await merchant(), await app.createMerchant()]) {
      const refused = await app.signed({ url: `/v1/pay/deposits/${order.id}/slip`, credentials: stranger });
      expect(refused.statusCode).toBe(404);
      expect(errorOf(refused).code).toBe('resource_not_found');
    }
    const referenceOnly = await createDeposit(app, { amount_minor: 12_000, credentials: owner });
    await uploadJson(app, referenceOnly.slip_upload, { trans_ref: 'ABC123', sending_bank_code: '004', occurred_at: app.clock.now().toISOString() });
    expect((await app.signed({ url: `/v1/pay/deposits/${referenceOnly.id}/slip`, credentials: owner })).statusCode).toBe(404);
  });
});

describe('durable before 202', () => {
  async function withTrigger<T>(table: string, condition: string, work: () => Promise<T>): Promise<T> {
    const database = app.testDatabase.database;
    await database.exec(`
      CREATE OR REPLACE FUNCTION slip_test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF ${condition} THEN RAISE EXCEPTION 'injected fault'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER slip_test_fault BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION slip_test_fault();`);
    try {
      return await work();
    } finally {
      await database.exec(`DROP TRIGGER slip_test_fault ON ${table}; DROP FUNCTION slip_test_fault();`);
    }
  }

  for (const fault of [
    { name: 'a storage failure', table: 'slip_blobs', condition: 'true' },
    { name: 'a queue failure', table: 'jobs', condition: "NEW.task = 'slips.process'" },
  ]) {
    it(`${fault.name} answers 503 slip_intake_unavailable and leaves no half-stored receipt; the retry with the same key succeeds`, async () => {
      const order = await createDeposit(app, { amount_minor: 12_000 });
      const image = slipBytes(await sandboxTransfer(app, order));
      const key = crypto.randomUUID();
      const before = await intakeRows();
      const failed = await withTrigger(fault.table, fault.condition, () => uploadMultipart(app, order.slip_upload, image, { idempotency_key: key }));
      expect(failed.statusCode).toBe(503);
      expect(errorOf(failed)).toMatchObject({ code: 'slip_intake_unavailable', retryable: true, retry_after_seconds: 1 });
      expect(await intakeRows()).toEqual(before);
      const retried = await uploadMultipart(app, order.slip_upload, image, { idempotency_key: key });
      expect(retried.statusCode).toBe(202);
      await runJobs(app);
      expect((await getDeposit(app, order.id)).status).toBe('settled');
    });
  }

  it('a blob that does not read back as written answers 503 (the read-back check)', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const image = slipBytes(await sandboxTransfer(app, order));
    const database = app.testDatabase.database;
    await database.exec(`
      CREATE OR REPLACE FUNCTION slip_test_corrupt() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN NEW.ciphertext := overlay(NEW.ciphertext PLACING '\\x00'::bytea FROM 40 FOR 1); RETURN NEW; END $$;
      CREATE TRIGGER slip_test_corrupt BEFORE INSERT ON slip_blobs FOR EACH ROW EXECUTE FUNCTION slip_test_corrupt();`);
    try {
      const before = await intakeRows();
      const failed = await uploadMultipart(app, order.slip_upload, image);
      expect(errorOf(failed).code).toBe('slip_intake_unavailable');
      expect(await intakeRows()).toEqual(before);
    } finally {
      await database.exec('DROP TRIGGER slip_test_corrupt ON slip_blobs; DROP FUNCTION slip_test_corrupt();');
    }
  });
});

describe('the filesystem evidence store', () => {
  it('keeps only ciphertext on disk, and the pipeline and the image read work from it; a broken directory is 503', async () => {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'slips-'));
    const fsApp = await createTestApp({ config: { SLIP_EVIDENCE_STORE: 'filesystem', SLIP_EVIDENCE_DIR: directory } });
    try {
      const order = await createDeposit(fsApp, { amount_minor: 12_000 });
      const png = slipBytes(await sandboxTransfer(fsApp, order));
      const receipt = (await uploadMultipart(fsApp, order.slip_upload, png)).json<{ receipt_id: string }>();
      const file = path.join(directory, fsApp.sandbox.white_label_id, `${receipt.receipt_id}.blob`);
      const stored = fs.readFileSync(file);
      expect(stored.length).toBe(png.length + 28);
      expect(stored.includes(png.subarray(0, 16))).toBe(false);
      expect((fs.statSync(file).mode & 0o777).toString(8)).toBe('600');
      const { rows } = await fsApp.testDatabase.database.query<{ count: number }>('SELECT count(*)::integer AS count FROM slip_blobs');
      expect(rows[0]?.count).toBe(0);
      await fsApp.instance.worker.runDueJobs();
      expect((await getDeposit(fsApp, order.id)).status).toBe('settled');
      expect((await fsApp.signed({ url: `/v1/pay/deposits/${order.id}/slip` })).rawPayload.equals(png)).toBe(true);

      // The brand's folder replaced by a file: nothing can be stored, and nothing is half-stored.
      const broken = await createDeposit(fsApp, { amount_minor: 12_000 });
      fs.rmSync(path.join(directory, fsApp.sandbox.white_label_id), { recursive: true });
      fs.writeFileSync(path.join(directory, fsApp.sandbox.white_label_id), 'not a directory');
      const failed = await uploadMultipart(fsApp, broken.slip_upload, png);
      expect(failed.statusCode).toBe(503);
      expect(errorOf(failed).code).toBe('slip_intake_unavailable');
      const { rows: receipts } = await fsApp.testDatabase.database.query('SELECT 1 FROM slip_receipts WHERE deposit_id = $1', [broken.id]);
      expect(receipts).toHaveLength(0);
    } finally {
      await fsApp.close();
      fs.rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe('secrets', () => {
  it('no log line carries a capability, a slip payload, a transaction reference or an account number', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const transfer = await sandboxTransfer(app, order);
    await uploadMultipart(app, order.slip_upload, slipBytes(transfer), { payload: transfer.slip.payload });
    await uploadJson(app, order.slip_upload, { trans_ref: transfer.trans_ref, sending_bank_code: '004', occurred_at: 'not a time' });
    await runJobs(app);
    const text = logLines.join('\n');
    expect(logLines.length).toBeGreaterThan(0);
    for (const secret of [order.slip_upload.token, transfer.slip.payload, transfer.trans_ref, transfer.slip.image_base64.slice(100, 160), '1234567890']) {
      expect(text).not.toContain(secret);
    }
    const { rows } = await app.testDatabase.database.query<{ text: string }>('SELECT envelope::text AS text FROM events WHERE object_id = $1', [order.id]);
    for (const row of rows) for (const secret of [order.slip_upload.token, transfer.slip.payload, transfer.trans_ref]) expect(row.text).not.toContain(secret);
  });
});
