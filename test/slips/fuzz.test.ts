import crypto from 'node:crypto';
import { deflateSync } from 'node:zlib';
import fc from 'fast-check';
import QRCode from 'qrcode';
import sharp from 'sharp';
import { encode, tag, withCrcTag } from 'promptparse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, multipartBody, postToUploadUrl, runJobs, sandboxTransfer, slipBytes, uploadJson, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';
import { codeToStatus, isErrorCode } from '../../src/platform/errors.ts';

/**
 * Hostile and random uploads through the door (issue 10, "Bad input and safety"): whatever arrives, the
 * intake never answers 5xx and every refusal is a catalogue code with its status; whatever it accepted,
 * the consumer never crashes or fails its job, and every slip ends in one of the documented outcomes.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

/** The documented final statuses of an order after a slip (spec, "How the result arrives after a 202"). */
const OUTCOME_STATUSES = ['settled', 'under_review', 'awaiting_payment', 'expired'];

function expectCatalogueAnswer(response: { statusCode: number; body: string }, label: string): void {
  expect(response.statusCode, `${label}: ${response.body}`).toBeLessThan(500);
  if (response.statusCode < 400) return;
  const error = (JSON.parse(response.body) as { error: { code: string } }).error;
  expect(isErrorCode(error.code), label).toBe(true);
  expect(codeToStatus(error.code as never), label).toBe(response.statusCode);
}

/** Every slip job finished without a failure, and every receipt was processed. */
async function expectConsumerHealthy(): Promise<void> {
  const { rows } = await app.testDatabase.database.query<{ failures: number; unprocessed: number }>(
    `SELECT (SELECT count(*)::integer FROM jobs WHERE task = 'slips.process' AND (status = 'failed' OR last_error IS NOT NULL)) AS failures,
            (SELECT count(*)::integer FROM slip_receipts WHERE status <> 'processed') AS unprocessed`,
  );
  expect(rows[0]).toEqual({ failures: 0, unprocessed: 0 });
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

function crc32(data: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of data) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit += 1) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** A valid greyscale PNG of any size whose file stays small: one colour compresses to almost nothing. */
function hugePng(width: number, height: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.writeUInt8(8, 8);
  const row = Buffer.alloc(width + 1, 0xff);
  row[0] = 0;
  const raw = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), pngChunk('IHDR', header), pngChunk('IDAT', deflateSync(raw)), pngChunk('IEND', Buffer.alloc(0))]);
}

/** A minimal stored (uncompressed) zip archive holding one file. */
function zipArchive(content: Buffer): Buffer {
  const name = Buffer.from('slip.png');
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt32LE(crc32(content), 14);
  local.writeUInt32LE(content.length, 18);
  local.writeUInt32LE(content.length, 22);
  local.writeUInt16LE(name.length, 26);
  return Buffer.concat([local, name, content]);
}

/** An image with a QR carrying any text (a slip payload with a bad CRC, another country, a payment QR). */
async function imageWithQr(text: string): Promise<Buffer> {
  const qr = await QRCode.toBuffer(text, { errorCorrectionLevel: 'M', margin: 2, width: 260 });
  return sharp({ create: { width: 720, height: 1280, channels: 3, background: '#ffffff' } })
    .composite([{ input: qr, left: 420, top: 960 }])
    .png()
    .toBuffer();
}

function payloadWith(country: string, corruptCrc: boolean): string {
  const merchant = encode([tag('00', '000001'), tag('01', '004'), tag('02', 'FUZZ123456')]);
  const payload = withCrcTag(encode([tag('00', merchant), tag('51', country)]), '91');
  return corruptCrc ? `${payload.slice(0, -4)}${payload.slice(-4) === '0000' ? '0001' : '0000'}` : payload;
}

describe('hostile files, from the upload to the consumer', () => {
  it('each ends in its documented outcome; no 5xx, no failed job', async () => {
    const order = await createDeposit(app, { amount_minor: 10_000 });
    const slip = slipBytes(await sandboxTransfer(app, order));
    const jpeg = await sharp(slip).jpeg({ quality: 80 }).toBuffer();
    // What each hostile file does at the door (202 or the 422 reason) and, once accepted, to the order.
    type Hostile = { label: string; bytes: (target: CreatedDeposit) => Promise<Buffer> | Buffer; intake: 202 | string; settles?: boolean };
    const cases: Hostile[] = [
      { label: 'zero bytes', bytes: () => Buffer.alloc(0), intake: 'empty' },
      { label: 'a zip archive', bytes: () => zipArchive(slip), intake: 'unsupported_type' },
      { label: 'an SVG', bytes: () => Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'), intake: 'unsupported_type' },
      { label: 'a GIF', bytes: () => Buffer.from('R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==', 'base64'), intake: 'unsupported_type' },
      { label: 'random bytes', bytes: () => crypto.randomBytes(5000), intake: 'unsupported_type' },
      { label: 'a truncated PNG', bytes: () => slip.subarray(0, Math.floor(slip.length * 0.6)), intake: 202 },
      { label: 'a truncated JPEG', bytes: () => jpeg.subarray(0, Math.floor(jpeg.length * 0.5)), intake: 202 },
      // file-type looks past the signature: eight bytes of PNG magic alone do not make a PNG.
      { label: 'PNG magic then junk', bytes: () => Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), crypto.randomBytes(3000)]), intake: 'unsupported_type' },
      { label: 'a PNG with corrupt image data', bytes: () => Buffer.concat([slip.subarray(0, 2000), crypto.randomBytes(4000), slip.subarray(6000)]), intake: 202 },
      { label: 'a 50-megapixel image', bytes: () => hugePng(8000, 6250), intake: 202 },
      { label: 'a QR with a bad CRC', bytes: () => imageWithQr(payloadWith('TH', true)), intake: 202 },
      { label: "a QR with another country's tag", bytes: () => imageWithQr(payloadWith('LA', false)), intake: 202 },
      { label: 'a payment QR instead of a slip QR', bytes: () => imageWithQr('00020101021129370016A000000677010111011300668123456785802TH53037646304FFFF'), intake: 202 },
      {
        label: "a polyglot: the order's real slip with a zip appended (the image part is read)",
        bytes: async (target) => Buffer.concat([slipBytes(await sandboxTransfer(app, target)), zipArchive(Buffer.from('payload'))]),
        intake: 202,
        settles: true,
      },
    ];
    for (const hostile of cases) {
      const target = hostile.intake === 202 ? await createDeposit(app, { amount_minor: 10_000 }) : order;
      const started = performance.now();
      const response = await uploadMultipart(app, target.slip_upload, await hostile.bytes(target));
      expectCatalogueAnswer(response, hostile.label);
      if (hostile.intake !== 202) {
        expect(response.statusCode, hostile.label).toBe(422);
        expect(JSON.parse(response.body).error.details.fields[0].reason, hostile.label).toBe(hostile.intake);
        continue;
      }
      expect(response.statusCode, `${hostile.label}: ${response.body}`).toBe(202);
      await runJobs(app);
      // Unreadable: deposit.slip_rejected and back to awaiting payment, the money not rejected.
      expect((await getDeposit(app, target.id)).status, hostile.label).toBe(hostile.settles ? 'settled' : 'awaiting_payment');
      // Nothing here may make the consumer work long: the pixel limit is checked from the header.
      expect(performance.now() - started, hostile.label).toBeLessThan(15_000);
    }
    await expectConsumerHealthy();
  });

  it('base64 with junk is refused at the door', async () => {
    const order = await createDeposit(app, { amount_minor: 10_000 });
    for (const junk of ['iVBORw0KGgo!!!!', 'data:image/png;base64,@@@@', '====', 'iVBORw0KGgo=AAAA', '\u0000AAAA']) {
      const response = await uploadJson(app, order.slip_upload, { image_base64: junk });
      expectCatalogueAnswer(response, junk);
      expect(response.statusCode).toBe(422);
    }
  });
});

describe('generated bodies', () => {
  it('never 5xx, every refusal a catalogue code, and every accepted slip processed without a failure', async () => {
    const orders: CreatedDeposit[] = [];
    for (let index = 0; index < 4; index += 1) orders.push(await createDeposit(app, { amount_minor: 10_000 + index * 100 }));
    const pngHeader = Buffer.from('89504e470d0a1a0a', 'hex');
    const jpegHeader = Buffer.from('ffd8ffe000104a464946', 'hex');
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 2048 }).map((array) => Buffer.from(array)),
      fc.uint8Array({ maxLength: 2048 }).map((array) => Buffer.concat([pngHeader, Buffer.from(array)])),
      fc.uint8Array({ maxLength: 2048 }).map((array) => Buffer.concat([jpegHeader, Buffer.from(array)])),
    );
    const text = fc.oneof(fc.string({ maxLength: 80 }), fc.constantFrom('', '004', 'ABC123', '2026-08-01T00:00:00.000Z', '\u0000', 'ไทย', '{}'));
    const jsonValue = fc.oneof(text, fc.integer(), fc.constant(null), fc.boolean(), bytes.map((buffer) => buffer.toString('base64')));
    const jsonBody = fc
      .dictionary(fc.constantFrom('image_base64', 'payload', 'trans_ref', 'sending_bank_code', 'occurred_at', 'file', '__proto__', 'extra'), jsonValue, { maxKeys: 4 })
      .map((object) => ({ body: Buffer.from(JSON.stringify(object)), content_type: 'application/json' }));
    const multipart = fc
      .array(fc.record({ name: fc.constantFrom('file', 'payload', 'other'), data: bytes, filename: fc.option(fc.constantFrom('slip.png', 'x.jpg', '../../etc/passwd'), { nil: undefined }) }), { maxLength: 4 })
      .map((parts) => multipartBody(parts.map((part) => ({ name: part.name, data: part.data, ...(part.filename ? { filename: part.filename } : {}) }))));
    const raw = fc.record({
      body: bytes,
      content_type: fc.constantFrom('application/json', 'multipart/form-data', 'multipart/form-data; boundary=zz', 'image/png', 'text/plain', 'application/x-www-form-urlencoded', ''),
    });
    let sent = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(jsonBody, multipart, raw), fc.nat({ max: 3 }), async (request, orderIndex) => {
        sent += 1;
        const response = await postToUploadUrl(app, orders[orderIndex]!.slip_upload, request.body, request.content_type);
        expectCatalogueAnswer(response, `${request.content_type} ${request.body.subarray(0, 60).toString('hex')}`);
        // A new minute every 15 requests keeps each end user's slip_upload bucket (20 a minute) from answering 429.
        if (sent % 15 === 0) app.clock.advance(60_000);
      }),
      { numRuns: 300, seed: 20261123 },
    );
    await runJobs(app);
    await expectConsumerHealthy();
    for (const order of orders) expect(OUTCOME_STATUSES).toContain((await getDeposit(app, order.id)).status);
  });
});
