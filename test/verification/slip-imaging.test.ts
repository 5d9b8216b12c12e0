import { crc32, deflateSync } from 'node:zlib';
import { performance } from 'node:perf_hooks';
import { beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import QRCode from 'qrcode';
import sharp from 'sharp';
import { encode, tag, withCrcTag } from 'promptparse';
import { anyId } from 'promptparse/generate';
import { buildSlipPayload, parseSlipPayload, type SlipReference } from '../../src/verification/slip-payload.ts';
import { decodeSlipImage, MAX_SLIP_BYTES, MAX_SLIP_PIXELS, SLIP_READ_ATTEMPTS, SlipReader, type SlipImageRead } from '../../src/verification/slip-reader.ts';
import { printedAccount, printedName } from '../../src/sandbox/printed-masks.ts';
import { InvariantViolation } from '../../src/platform/assert.ts';
import { formatSlipAmount, formatSlipDateTime, renderSlipImage } from '../../src/sandbox/slip-image.ts';
import { corpusDetails, makeVariant, seededRandom, VARIANTS } from '../../bench/qr-corpus.ts';

/** A slip payload with any tag values and a correct CRC, for payloads promptparse's generator will not make. */
function payloadWith(tags: { api_type?: string; bank?: string; trans_ref?: string; country?: string }): string {
  const merchant = encode([tag('00', tags.api_type ?? '000001'), tag('01', tags.bank ?? '004'), tag('02', tags.trans_ref ?? 'ABC123')]);
  return withCrcTag(encode([tag('00', merchant), tag('51', tags.country ?? 'TH')]), '91');
}

describe('slip payload', () => {
  const reference: SlipReference = { sending_bank_code: '004', trans_ref: '015330140523BTF06071' };

  it('round-trips build and parse', () => {
    const payload = buildSlipPayload(reference);
    expect(payload).toBe('0041000600000101030040220015330140523BTF060715102TH910415AE');
    expect(parseSlipPayload(payload)).toEqual({ ok: true, reference });
    for (const trans_ref of ['A', 'x'.repeat(50), '2025112314051234567890']) {
      expect(parseSlipPayload(buildSlipPayload({ sending_bank_code: '014', trans_ref }))).toEqual({ ok: true, reference: { sending_bank_code: '014', trans_ref } });
    }
  });

  it('refuses a wrong CRC and never pads a short one', () => {
    const payload = buildSlipPayload(reference);
    const last = payload.slice(-1);
    expect(parseSlipPayload(payload.slice(0, -1) + (last === '0' ? '1' : '0'))).toEqual({ ok: false, reason: 'bad_crc' });
    // promptparse's validator would pad a 3-character CRC; here the TLV length no longer matches.
    expect(parseSlipPayload(payload.slice(0, -1))).toEqual({ ok: false, reason: 'malformed' });
    expect(parseSlipPayload(`${payload.slice(0, -8)}91030AE`)).toEqual({ ok: false, reason: 'not_a_slip' });
    expect(parseSlipPayload(`${payload.slice(0, -4)}15AG`)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('refuses another country with a correct CRC, and a payload without tag 51', () => {
    expect(parseSlipPayload(payloadWith({ country: 'LA' }))).toEqual({ ok: false, reason: 'wrong_country' });
    const merchant = encode([tag('00', '000001'), tag('01', '004'), tag('02', 'ABC123')]);
    expect(parseSlipPayload(withCrcTag(encode([tag('00', merchant)]), '91'))).toEqual({ ok: false, reason: 'not_a_slip' });
  });

  it('refuses a PromptPay payment QR and other EMVCo payloads as not a slip', () => {
    expect(parseSlipPayload(anyId({ type: 'MSISDN', target: '0812345678', amount: 100 }))).toEqual({ ok: false, reason: 'not_a_slip' });
    expect(parseSlipPayload(payloadWith({ api_type: '000002' }))).toEqual({ ok: false, reason: 'not_a_slip' });
  });

  it('refuses text over 512 characters before looking at it', () => {
    expect(parseSlipPayload('0'.repeat(513))).toEqual({ ok: false, reason: 'too_long' });
    expect(parseSlipPayload(`${buildSlipPayload(reference)}${' '.repeat(460)}`)).toEqual({ ok: false, reason: 'too_long' });
  });

  it('refuses malformed text', () => {
    for (const text of ['', 'hello', 'https://example.com/slip', 'สวัสดี', '00AB', '0004', `${buildSlipPayload(reference)}\n`, '\u0000'.repeat(10)]) {
      expect(parseSlipPayload(text), text).toEqual({ ok: false, reason: 'malformed' });
    }
    expect(parseSlipPayload(payloadWith({ bank: '04' }))).toEqual({ ok: false, reason: 'malformed' });
    expect(parseSlipPayload(payloadWith({ bank: '0A4' }))).toEqual({ ok: false, reason: 'malformed' });
    expect(parseSlipPayload(payloadWith({ trans_ref: 'ABC-123' }))).toEqual({ ok: false, reason: 'malformed' });
    expect(parseSlipPayload(payloadWith({ trans_ref: 'ABC 123' }))).toEqual({ ok: false, reason: 'malformed' });
    expect(parseSlipPayload(payloadWith({ trans_ref: 'x'.repeat(51) }))).toEqual({ ok: false, reason: 'malformed' });
    // A duplicated tag makes the payload ambiguous.
    const merchant = encode([tag('00', '000001'), tag('01', '004'), tag('02', 'ABC123')]);
    expect(parseSlipPayload(withCrcTag(encode([tag('00', merchant), tag('51', 'TH'), tag('51', 'TH')]), '91'))).toEqual({ ok: false, reason: 'malformed' });
  });

  it('accepts a CRC written in lower case: the same 16-bit value', () => {
    // Find a reference whose CRC has hexadecimal letters; one in 16 digits is a letter, so a few tries suffice.
    let payload = '';
    for (let index = 0; index < 100 && !/[A-F]/.test(payload.slice(-4)); index += 1) payload = buildSlipPayload({ sending_bank_code: '002', trans_ref: `REF${index}` });
    expect(payload.slice(-4)).toMatch(/[A-F]/);
    const lower = payload.slice(0, -4) + payload.slice(-4).toLowerCase();
    expect(parseSlipPayload(lower)).toMatchObject({ ok: true });
  });

  it('never throws, whatever the text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 600 }), fc.string({ unit: 'binary', maxLength: 100 }), fc.stringMatching(/^[0-9]{0,120}$/)), (text) => {
        const parsed = parseSlipPayload(text);
        expect(typeof parsed.ok).toBe('boolean');
      }),
      { numRuns: 500 },
    );
  });
});

describe('printed masks', () => {
  it('masks account numbers the way Thai banks print them', () => {
    expect(printedAccount('1234567890')).toBe('xxx-x-x6789-x');
    expect(printedAccount('123-4-56789-0')).toBe('xxx-x-x6789-x');
    expect(printedAccount('0123456789')).toBe('xxx-x-x5678-x');
    expect(printedAccount('123456789012')).toBe('xxx-xxx-x8901-x');
    expect(printedAccount('12345678')).toBe('xx-x4567-x');
    expect(printedAccount('123456')).toBe('x2345-x');
    expect(printedAccount('12345')).toBe('xxxxx');
    expect(printedAccount('')).toBe('');
  });

  it('prints Thai names with the first grapheme cluster of the surname', () => {
    expect(printedName('สมชาย ใจดี', { honorific: 'นาย' })).toBe('นาย สมชาย ใ');
    // A consonant with a vowel mark, and one with a vowel and a tone mark, stay whole.
    expect(printedName('วิไล สุขใจ', { honorific: 'นางสาว' })).toBe('นางสาว วิไล สุ');
    expect(printedName('ณัฐพล ชื่นสุข')).toBe('ณัฐพล ชื่');
    expect(printedName('ศิริพร น้ำทิพย์', { honorific: 'นาง' })).toBe('นาง ศิริพร น้ำ');
    expect(printedName('  กิตติ   ศรี  สวัสดิ์  ')).toBe('กิตติ ส');
    expect(printedName('สมชาย')).toBe('สมชาย');
    // A title already in the name is the honorific; an explicit one replaces it; null prints none.
    expect(printedName('นางสาว วิไล ชื่นสุข')).toBe('นางสาว วิไล ชื่');
    expect(printedName('นางสาว วิไล ชื่นสุข', { honorific: null })).toBe('วิไล ชื่');
  });

  it('prints English names in upper case', () => {
    expect(printedName('Somchai Jaidee', { honorific: 'MR.' })).toBe('MR. SOMCHAI J');
    expect(printedName('Wilai Sukjai', { honorific: 'MS.' })).toBe('MS. WILAI S');
    expect(printedName('Mrs. Siriporn Thongkham')).toBe('MRS. SIRIPORN T');
  });
});

describe('slip text formats', () => {
  it('formats satang exactly', () => {
    expect(formatSlipAmount(100_000)).toBe('1,000.00 บาท');
    expect(formatSlipAmount(5)).toBe('0.05 บาท');
    expect(formatSlipAmount(123_456_789)).toBe('1,234,567.89 บาท');
    expect(formatSlipAmount(Number.MAX_SAFE_INTEGER)).toBe('90,071,992,547,409.91 บาท');
  });

  it('prints Bangkok time with the Buddhist-era year', () => {
    expect(formatSlipDateTime(new Date('2026-11-23T07:05:00Z'))).toBe('23 พ.ย. 69 14:05 น.');
    // 17:30 UTC on 31 December is already the next year in Bangkok.
    expect(formatSlipDateTime(new Date('2026-12-31T17:30:00Z'))).toBe('1 ม.ค. 70 00:30 น.');
  });
});

const reader = new SlipReader();

function expectRead(result: SlipImageRead, expected: SlipReference, label: string): void {
  expect(result.outcome, label).toBe('read');
  if (result.outcome === 'read') expect(result.reference, label).toEqual(expected);
}

describe('slip reader on the sandbox corpus', () => {
  const SLIP_COUNT = 12;
  const corpus: { reference: SlipReference; variants: Map<string, Buffer> }[] = [];

  beforeAll(async () => {
    await reader.warmUp();
    for (let index = 0; index < SLIP_COUNT; index += 1) {
      const details = corpusDetails(index);
      const rendered = await renderSlipImage(details);
      const variants = new Map<string, Buffer>();
      for (const variant of VARIANTS) variants.set(variant, await makeVariant(rendered.bytes, variant, 7000 + index));
      corpus.push({ reference: { sending_bank_code: details.sending_bank_code, trans_ref: details.trans_ref }, variants });
    }
  });

  it('renders distinct slips of different banks', () => {
    expect(new Set(corpus.map((slip) => slip.reference.sending_bank_code)).size).toBe(SLIP_COUNT);
    expect(new Set(corpus.map((slip) => slip.reference.trans_ref)).size).toBe(SLIP_COUNT);
  });

  for (const variant of VARIANTS) {
    it(`reads every slip as ${variant}`, async () => {
      for (const [index, slip] of corpus.entries()) {
        const bytes = slip.variants.get(variant);
        if (bytes === undefined) throw new Error('the corpus lacks a variant');
        expectRead(await reader.read(bytes), slip.reference, `${variant} #${index}`);
      }
    });
  }

  it('stores the EXIF variant rotated and decodes it upright', async () => {
    const bytes = corpus[0]?.variants.get('exif_rotated');
    if (bytes === undefined) throw new Error('the corpus lacks a variant');
    const metadata = await sharp(bytes).metadata();
    expect({ orientation: metadata.orientation, width: metadata.width, height: metadata.height }).toEqual({ orientation: 6, width: 1280, height: 720 });
    const decoded = await decodeSlipImage(bytes);
    expect(decoded.ok && { width: decoded.image.width, height: decoded.image.height }).toEqual({ width: 720, height: 1280 });
  });

  it('reads concurrently with separate readers', async () => {
    const results = await Promise.all(corpus.map((slip) => new SlipReader().read(slip.variants.get('jpeg70') ?? Buffer.alloc(0))));
    for (const [index, result] of results.entries()) expectRead(result, corpus[index]?.reference ?? { sending_bank_code: '', trans_ref: '' }, `concurrent #${index}`);
  });

  it('renders JPEG on request and keeps the attempt list bounded', async () => {
    const rendered = await renderSlipImage(corpusDetails(0), { format: 'jpeg', jpeg_quality: 80 });
    expect(rendered.media_type).toBe('image/jpeg');
    expect(rendered.bytes.subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    expect(rendered.payload).toBe(buildSlipPayload({ sending_bank_code: corpusDetails(0).sending_bank_code, trans_ref: corpusDetails(0).trans_ref }));
    expect(SLIP_READ_ATTEMPTS.length).toBeLessThanOrEqual(8);
  });

  it('reads greyscale and transparent images', async () => {
    const slip = corpus[2];
    const png = slip?.variants.get('png');
    if (slip === undefined || png === undefined) throw new Error('the corpus lacks a variant');
    expectRead(await reader.read(await sharp(png).greyscale().png().toBuffer()), slip.reference, 'greyscale');
    const payload = buildSlipPayload(slip.reference);
    const transparent = await QRCode.toBuffer(payload, { type: 'png', errorCorrectionLevel: 'M', margin: 4, width: 300, color: { dark: '#000000FF', light: '#00000000' } });
    expect((await sharp(transparent).metadata()).hasAlpha).toBe(true);
    expectRead(await reader.read(transparent), slip.reference, 'transparent');
  });

  it('draws a bank the table does not know, and refuses a reference no slip can carry', async () => {
    const details = { ...corpusDetails(1), sending_bank_code: '999', trans_ref: 'UNKNOWNBANK42' };
    expectRead(await reader.read((await renderSlipImage(details)).bytes), { sending_bank_code: '999', trans_ref: 'UNKNOWNBANK42' }, 'unknown bank');
    await expect(renderSlipImage({ ...details, trans_ref: 'NOT-ALLOWED' })).rejects.toThrow(InvariantViolation);
    await expect(renderSlipImage({ ...details, sending_bank_code: '4' })).rejects.toThrow(InvariantViolation);
    await expect(renderSlipImage({ ...details, amount_minor: 10.5 })).rejects.toThrow(InvariantViolation);
  });
});

/** A PNG chunk: length, type, data, CRC-32 over type and data. */
function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, checksum]);
}

/** A valid single-colour PNG of any size, built by hand: 1-bit greyscale, so even 50 megapixels are a few kB. */
function singleColourPng(width: number, height: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([1, 0, 0, 0, 0], 8); // bit depth 1, greyscale, deflate, no filter, no interlace
  const row_bytes = 1 + Math.ceil(width / 8);
  const rows = Buffer.alloc(row_bytes * height, 0xff);
  for (let row = 0; row < height; row += 1) rows[row * row_bytes] = 0; // filter type 0 on each row
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), pngChunk('IHDR', header), pngChunk('IDAT', deflateSync(rows)), pngChunk('IEND', Buffer.alloc(0))]);
}

/** A minimal ZIP archive with one stored file, built by hand: local header, data, central directory, end record. */
function zipArchive(name: string, content: Buffer): Buffer {
  const name_bytes = Buffer.from(name, 'latin1');
  const checksum = crc32(content);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt32LE(checksum, 14);
  local.writeUInt32LE(content.length, 18);
  local.writeUInt32LE(content.length, 22);
  local.writeUInt16LE(name_bytes.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE(20, 4);
  central.writeUInt16LE(20, 6);
  central.writeUInt32LE(checksum, 16);
  central.writeUInt32LE(content.length, 20);
  central.writeUInt32LE(content.length, 24);
  central.writeUInt16LE(name_bytes.length, 28);
  const central_offset = local.length + name_bytes.length + content.length;
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length + name_bytes.length, 12);
  end.writeUInt32LE(central_offset, 16);
  return Buffer.concat([local, name_bytes, content, central, name_bytes, end]);
}

/** A sandbox slip whose mini-QR is replaced by another QR (or by white when `payload` is null). */
async function slipWithQr(payload: string | null): Promise<Buffer> {
  const rendered = await renderSlipImage(corpusDetails(3));
  // The mini-QR sits at most 260 pixels wide with its right edge at x = 666 and its top at y = 972.
  const cover = payload === null
    ? await sharp({ create: { width: 270, height: 270, channels: 3, background: '#FFFFFF' } }).png().toBuffer()
    : await QRCode.toBuffer(payload, { type: 'png', errorCorrectionLevel: 'M', margin: 4, width: 270 });
  return sharp(rendered.bytes).composite([{ input: cover, left: 400, top: 968 }]).png().toBuffer();
}

describe('slip reader on hostile input', () => {
  let slip_png: Buffer;
  let slip_jpeg: Buffer;
  const zip = zipArchive('slip.txt', Buffer.from('not an image'));

  beforeAll(async () => {
    slip_png = (await renderSlipImage(corpusDetails(5))).bytes;
    slip_jpeg = (await renderSlipImage(corpusDetails(5), { format: 'jpeg' })).bytes;
  });

  async function expectUnreadable(bytes: Buffer, reason: string): Promise<void> {
    await expect(reader.read(bytes)).resolves.toEqual({ outcome: 'unreadable', reason });
  }

  it('refuses bytes that are not a supported image', async () => {
    await expectUnreadable(Buffer.alloc(0), 'undecodable');
    const random = seededRandom(42);
    await expectUnreadable(Buffer.from(Array.from({ length: 4096 }, () => Math.floor(random() * 256))), 'undecodable');
    await expectUnreadable(zip, 'undecodable');
    // A ZIP with a PNG inside: the bytes start as a ZIP, so they are not an image.
    await expectUnreadable(zipArchive('slip.png', slip_png), 'undecodable');
    await expectUnreadable(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'), 'undecodable');
    await expectUnreadable(await sharp(slip_png).gif().toBuffer(), 'undecodable');
    await expectUnreadable(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), 'undecodable');
  });

  it('refuses truncated files', async () => {
    await expectUnreadable(slip_png.subarray(0, Math.floor(slip_png.length / 2)), 'undecodable');
    await expectUnreadable(slip_png.subarray(0, 40), 'undecodable');
    await expectUnreadable(slip_jpeg.subarray(0, Math.floor(slip_jpeg.length / 2)), 'undecodable');
    await expectUnreadable(slip_jpeg.subarray(0, 200), 'undecodable');
  });

  it('refuses more than 8 MiB without decoding', async () => {
    const oversized = Buffer.alloc(MAX_SLIP_BYTES + 1);
    slip_png.copy(oversized);
    await expectUnreadable(oversized, 'undecodable');
  });

  it('refuses a 50-megapixel image from its header, quickly', async () => {
    const huge = singleColourPng(8000, 6300);
    expect(8000 * 6300).toBeGreaterThan(MAX_SLIP_PIXELS);
    const started = performance.now();
    await expectUnreadable(huge, 'too_many_pixels');
    expect(performance.now() - started).toBeLessThan(500);
    // Just under the limit the same kind of image is decoded (and holds no QR).
    await expectUnreadable(singleColourPng(400, 300), 'no_qr');
  });

  it('reads the image part of a polyglot and ignores what follows it', async () => {
    // The decoders stop at the image's end marker; the reader only ever looks at pixels, so bytes after
    // them cannot change what is read. Whether to keep such a file is the intake's decision, not the reader's.
    await expectUnreadable(Buffer.concat([singleColourPng(200, 200), zip]), 'no_qr');
    expectRead(await reader.read(Buffer.concat([slip_jpeg, zip])), { sending_bank_code: corpusDetails(5).sending_bank_code, trans_ref: corpusDetails(5).trans_ref }, 'jpeg + zip');
    expectRead(await reader.read(Buffer.concat([slip_png, zip])), { sending_bank_code: corpusDetails(5).sending_bank_code, trans_ref: corpusDetails(5).trans_ref }, 'png + zip');
  });

  it('reports QR codes that are not valid slip payloads as invalid_payload', async () => {
    const good = buildSlipPayload({ sending_bank_code: '004', trans_ref: 'ABCDEF123456' });
    const bad_crc = good.slice(0, -1) + (good.endsWith('0') ? '1' : '0');
    await expectUnreadable(await slipWithQr(bad_crc), 'invalid_payload');
    await expectUnreadable(await slipWithQr(payloadWith({ country: 'LA' })), 'invalid_payload');
    await expectUnreadable(await slipWithQr(anyId({ type: 'MSISDN', target: '0812345678', amount: 1000 })), 'invalid_payload');
    // The same picture with a valid slip QR is read, so the refusals above are about the payload.
    expectRead(await reader.read(await slipWithQr(good)), { sending_bank_code: '004', trans_ref: 'ABCDEF123456' }, 'replaced QR');
  });

  it('reports an image without a QR as no_qr', async () => {
    await expectUnreadable(await slipWithQr(null), 'no_qr');
  });
});
