import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type sharpModule from 'sharp';
import { prepareZXingModule, purgeZXingModule, readBarcodes, type ReaderOptions } from 'zxing-wasm/reader';
import { parseSlipPayload, type SlipReference } from './slip-payload.ts';

let sharpLoaded: Promise<typeof sharpModule> | null = null;

/**
 * sharp is loaded on the first slip decoded, not when the service starts: a process that never reads a
 * slip (an API process beside a separate worker) does not hold libvips (about 18 MB resident).
 */
function loadSharp(): Promise<typeof sharpModule> {
  sharpLoaded ??= import('sharp').then((module) => module.default);
  return sharpLoaded;
}

/**
 * Reads the mini-QR of a slip image: checks the size and the magic bytes, reads the header for the
 * pixel count, decodes PNG, JPEG or WebP with sharp (EXIF orientation applied, the long edge brought
 * down to 2,000 pixels), then asks zxing-wasm for QR codes in a fixed list of crops and scales of those
 * pixels until one of them holds a valid slip payload.
 *
 * Everything an upload can do wrong is an `unreadable` result, never an exception: the bytes come from
 * the end user's phone and are untrusted. The work is bounded by the byte limit, the pixel limit, the
 * 2,000-pixel decode size and the fixed attempt list. Neither the payload nor the image bytes are ever
 * logged or put in an error message.
 *
 * Why zxing-wasm and this attempt list: bench/qr-corpus.ts measures zxing-wasm against jsqr on the same
 * decoded pixels of a corpus of sandbox slips (PNG, JPEG 70, half size, photographed, WebP, EXIF-rotated).
 */

export type SlipImageRead =
  | { outcome: 'read'; payload: string; reference: SlipReference; attempt: string }
  | { outcome: 'unreadable'; reason: 'undecodable' | 'too_many_pixels' | 'no_qr' | 'invalid_payload' };

export type SlipUnreadableReason = Extract<SlipImageRead, { outcome: 'unreadable' }>['reason'];

/** 40 megapixels: more than any phone camera's photo; a larger header is refused before any pixel is decoded. */
export const MAX_SLIP_PIXELS = 40_000_000;
/** 8 MiB: a phone photo of a slip is a few MiB at most; larger uploads are refused without decoding. */
export const MAX_SLIP_BYTES = 8 * 1024 * 1024;
/** Decoded pixels are brought down to this long edge: a slip's QR stays well above the decoder's needs, the work stays bounded. */
export const DECODE_LONG_EDGE_PX = 2000;
/**
 * The first, cheap pass decodes to this long edge and reads the whole image once. Measured on 1 MiB phone
 * photos of slips (docs/benchmarks.md, "Slips"): decoding drops from 53.5 to 35.2 ms of CPU (JPEG
 * shrink-on-load) and zxing from 21.6 to 4.4 ms, and it read every one of them; a bank app's screenshot is
 * under it already. Only an image this pass cannot read is decoded again at DECODE_LONG_EDGE_PX for the
 * whole attempt list.
 */
export const QUICK_DECODE_LONG_EDGE_PX = 1000;
/** A slip carries one mini-QR; a few more leave room for a payment QR printed next to it. */
const MAX_SYMBOLS_PER_ATTEMPT = 4;
/** Crops smaller than this are not worth a decoder call (a QR needs at least 21 modules). */
const MINIMUM_ATTEMPT_EDGE_PX = 32;

export interface DecodedSlipImage {
  /** RGBA, 4 bytes per pixel, rows top to bottom. */
  data: Uint8ClampedArray;
  width: number;
  height: number;
}

/** A rectangle as fractions of the decoded image, and the scale applied to it. */
export interface SlipReadAttempt {
  name: string;
  left: number;
  top: number;
  width: number;
  height: number;
  scale: number;
}

function attempt(name: string, region: [left: number, top: number, width: number, height: number], scale: number): SlipReadAttempt {
  const [left, top, width, height] = region;
  return { name, left, top, width, height, scale };
}

/**
 * The attempts, in order; the first that yields a valid slip payload wins. Chosen by measurement
 * (bench/qr-corpus.ts and its stress variants, 24 slips each): zxing's own detector (tryHarder, with its
 * internal downscaled pass) reads every PNG, JPEG 70, half-size, photographed, WebP and EXIF-rotated
 * slip on the whole image, so the whole image comes first. What it missed were slips scaled down to a
 * quarter (6 of 24; the QR's modules under 2 pixels) and slips small inside a larger photo (2 of 24):
 *
 * - the bottom-right quarter read 5 of those 8 for about 1 ms: Thai banks print the mini-QR in the lower
 *   right of the slip, and the crop removes the text that confuses the finder-pattern search;
 * - the same quarter at 2x read all 8 (upscaling gives tiny modules enough pixels to binarize);
 * - the bottom half read the slips small inside a photo, the centre at 2x read every one of those;
 * - the right half and the whole image at half size are cheap insurance for layouts with the QR higher
 *   up and for very large, noisy photos whose modules are wider than the binarizer's window.
 *
 * Crops that never read anything alone (the bottom-left quarter, the centre at 1x) were dropped. The
 * list is fixed: an image without a QR costs at most these seven decoder calls, about 30 ms for a
 * 720x1280 slip and 130 ms for a 2,000-pixel photo.
 */
export const SLIP_READ_ATTEMPTS: readonly SlipReadAttempt[] = [
  attempt('whole', [0, 0, 1, 1], 1),
  attempt('bottom_right_quarter', [0.5, 0.5, 0.5, 0.5], 1),
  attempt('bottom_right_quarter_2x', [0.5, 0.5, 0.5, 0.5], 2),
  attempt('bottom_half', [0, 0.5, 1, 0.5], 1),
  attempt('centre_2x', [0.25, 0.25, 0.5, 0.5], 2),
  attempt('right_half', [0.5, 0, 0.5, 1], 1),
  attempt('whole_half', [0, 0, 1, 1], 0.5),
];

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const JPEG_SIGNATURE = Buffer.from([0xff, 0xd8, 0xff]);

/**
 * Only PNG, JPEG and WebP are decoded. sharp would also decode TIFF, GIF, SVG, HEIF and more; the
 * magic bytes are checked first so that none of those decoders ever sees an upload.
 */
function looksLikeSupportedImage(bytes: Buffer): boolean {
  if (bytes.length >= 8 && bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return true;
  if (bytes.length >= 3 && bytes.subarray(0, 3).equals(JPEG_SIGNATURE)) return true;
  return bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP';
}

const SUPPORTED_FORMATS: ReadonlySet<string> = new Set(['png', 'jpeg', 'webp']);

/**
 * Decodes the bytes to RGBA pixels, or names why not. The pixel count is read from the header and
 * checked before any pixel is decoded; `limitInputPixels` makes sharp enforce the same limit itself.
 * `failOn: 'error'` refuses corrupt and truncated files (measured: a JPEG or WebP cut anywhere, a PNG cut
 * inside its pixel data; a PNG missing only its end chunk has all its pixels and decodes) but lets
 * through the warnings some phone cameras' JPEGs raise (extraneous bytes before a marker), which sharp's
 * default `'warning'` would refuse although their pixels are fine.
 */
export async function decodeSlipImage(
  bytes: Buffer,
  long_edge_px: number = DECODE_LONG_EDGE_PX,
): Promise<{ ok: true; image: DecodedSlipImage } | { ok: false; reason: 'undecodable' | 'too_many_pixels' }> {
  if (!Buffer.isBuffer(bytes) || bytes.length === 0 || bytes.length > MAX_SLIP_BYTES) return { ok: false, reason: 'undecodable' };
  if (!looksLikeSupportedImage(bytes)) return { ok: false, reason: 'undecodable' };
  const input_options = { limitInputPixels: MAX_SLIP_PIXELS, failOn: 'error', pages: 1 } as const;
  // Loaded outside the try: a sharp that cannot load is a broken installation, not an undecodable slip.
  const sharp = await loadSharp();
  try {
    // The header alone: sharp reads the dimensions without decoding pixels, whatever the limit says.
    const metadata = await sharp(bytes, { ...input_options, limitInputPixels: false }).metadata();
    if (metadata.format === undefined || !SUPPORTED_FORMATS.has(metadata.format)) return { ok: false, reason: 'undecodable' };
    const width = metadata.width ?? 0;
    const height = metadata.height ?? 0;
    if (width <= 0 || height <= 0) return { ok: false, reason: 'undecodable' };
    if (width * height > MAX_SLIP_PIXELS) return { ok: false, reason: 'too_many_pixels' };
    const { data, info } = await sharp(bytes, input_options)
      .autoOrient()
      .resize({ width: long_edge_px, height: long_edge_px, fit: 'inside', withoutEnlargement: true })
      // Transparent pixels become white, as a viewer shows them: a QR drawn on a transparent background stays readable.
      .flatten({ background: '#FFFFFF' })
      .toColourspace('srgb')
      .ensureAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 4 || data.length !== info.width * info.height * 4) return { ok: false, reason: 'undecodable' };
    return { ok: true, image: { data: new Uint8ClampedArray(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height } };
  } catch {
    // A truncated or corrupt file, a format sharp cannot read, or sharp's own pixel limit: all the same to the caller.
    return { ok: false, reason: 'undecodable' };
  }
}

/** The pixels of one attempt: the crop of the decoded image at the attempt's scale, or null when it would be too small. */
export async function attemptPixels(image: DecodedSlipImage, read_attempt: SlipReadAttempt): Promise<DecodedSlipImage | null> {
  const left = Math.floor(read_attempt.left * image.width);
  const top = Math.floor(read_attempt.top * image.height);
  const width = Math.min(image.width - left, Math.round(read_attempt.width * image.width));
  const height = Math.min(image.height - top, Math.round(read_attempt.height * image.height));
  const scaled_width = Math.round(width * read_attempt.scale);
  const scaled_height = Math.round(height * read_attempt.scale);
  if (Math.min(scaled_width, scaled_height) < MINIMUM_ATTEMPT_EDGE_PX) return null;
  if (left === 0 && top === 0 && width === image.width && height === image.height && read_attempt.scale === 1) return image;
  const source = Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength);
  let pipeline = (await loadSharp())(source, { raw: { width: image.width, height: image.height, channels: 4 } }).extract({ left, top, width, height });
  if (read_attempt.scale !== 1) pipeline = pipeline.resize({ width: scaled_width, height: scaled_height, fit: 'fill', kernel: read_attempt.scale > 1 ? 'cubic' : 'lanczos3' });
  const { data, info } = await pipeline.raw().toBuffer({ resolveWithObject: true });
  return { data: new Uint8ClampedArray(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
}

const READER_OPTIONS: ReaderOptions = {
  formats: ['QRCode'],
  tryHarder: true,
  tryRotate: true,
  tryInvert: false,
  tryDownscale: true,
  maxNumberOfSymbols: MAX_SYMBOLS_PER_ATTEMPT,
};

/**
 * The zxing module, instantiated once per process from the wasm file inside the package. Without the
 * bytes, zxing-wasm would fetch the file from a CDN, which production and CI cannot reach. A failed
 * instantiation is forgotten so that the next read tries again.
 */
let zxing_overrides: { wasmBinary: ArrayBuffer } | null = null;
let zxing_ready: Promise<void> | null = null;

function ensureZxing(): Promise<void> {
  zxing_ready ??= (async () => {
    const wasm_path = createRequire(import.meta.url).resolve('zxing-wasm/reader/zxing_reader.wasm');
    const wasm_bytes = await readFile(wasm_path);
    zxing_overrides = { wasmBinary: wasm_bytes.buffer.slice(wasm_bytes.byteOffset, wasm_bytes.byteOffset + wasm_bytes.byteLength) };
    await prepareZXingModule({ overrides: zxing_overrides, fireImmediately: true });
  })().catch((error: unknown) => {
    zxing_ready = null;
    throw error;
  });
  return zxing_ready;
}

/** After a wasm abort the module is unusable; dropping it makes the next read instantiate a fresh one. */
function discardZxing(): void {
  zxing_ready = null;
  purgeZXingModule();
}

/**
 * The texts of the valid QR codes zxing finds in the pixels, at most MAX_SYMBOLS_PER_ATTEMPT. Throws
 * only when the decoder itself fails (the wasm module cannot be instantiated, or it aborted).
 */
export async function readQrTexts(image: DecodedSlipImage): Promise<string[]> {
  await ensureZxing();
  // Re-stating the same overrides costs nothing; it guarantees that a module re-created after a
  // concurrent discard gets the local wasm bytes and never reaches for the CDN.
  if (zxing_overrides !== null) prepareZXingModule({ overrides: zxing_overrides, fireImmediately: false });
  const results = await readBarcodes(image, READER_OPTIONS);
  return results.filter((result) => result.isValid).map((result) => result.text);
}

export class SlipReader {
  /** Instantiates the decoder now instead of on the first read (start-up), and throws if it cannot be. */
  async warmUp(): Promise<void> {
    await ensureZxing();
  }

  /**
   * Safe to call concurrently: the decoder calls run one at a time on the event loop, the wasm module is
   * shared. A decoder that cannot be instantiated is the deployment's fault, not the image's: it throws
   * (the slip's job retries later) rather than calling every slip unreadable.
   */
  async read(bytes: Buffer): Promise<SlipImageRead> {
    await ensureZxing();
    const quick = await decodeSlipImage(bytes, QUICK_DECODE_LONG_EDGE_PX);
    if (!quick.ok) return { outcome: 'unreadable', reason: quick.reason };
    const first = await this.readAttempts(quick.image, SLIP_READ_ATTEMPTS.slice(0, 1));
    if (first.read) return first.read;
    // An image no larger than the quick pass's edge was decoded whole already: decoding it again gains nothing.
    const unresized = Math.max(quick.image.width, quick.image.height) < QUICK_DECODE_LONG_EDGE_PX;
    const full = unresized ? quick : await decodeSlipImage(bytes);
    if (!full.ok) return { outcome: 'unreadable', reason: full.reason };
    const rest = await this.readAttempts(full.image, unresized ? SLIP_READ_ATTEMPTS.slice(1) : SLIP_READ_ATTEMPTS);
    if (rest.read) return rest.read;
    if (rest.undecodable) return { outcome: 'unreadable', reason: 'undecodable' };
    return { outcome: 'unreadable', reason: first.saw_invalid_payload || rest.saw_invalid_payload ? 'invalid_payload' : 'no_qr' };
  }

  /** The attempts in order, until one holds a valid slip payload. */
  private async readAttempts(
    image: DecodedSlipImage,
    attempts: readonly SlipReadAttempt[],
  ): Promise<{ read: SlipImageRead | null; saw_invalid_payload: boolean; undecodable: boolean }> {
    let saw_invalid_payload = false;
    for (const read_attempt of attempts) {
      let pixels: DecodedSlipImage | null;
      try {
        pixels = await attemptPixels(image, read_attempt);
      } catch {
        return { read: null, saw_invalid_payload, undecodable: true };
      }
      if (pixels === null) continue;
      const texts = await this.decode(pixels);
      if (texts === null) return { read: null, saw_invalid_payload, undecodable: true };
      for (const text of texts) {
        const parsed = parseSlipPayload(text);
        if (parsed.ok) return { read: { outcome: 'read', payload: text, reference: parsed.reference, attempt: read_attempt.name }, saw_invalid_payload, undecodable: false };
        saw_invalid_payload = true;
      }
    }
    return { read: null, saw_invalid_payload, undecodable: false };
  }

  /**
   * One decoder call. After a wasm abort the module is unusable: it is replaced and the call made once
   * more, so that only an image that aborts a fresh decoder too is called undecodable (null).
   */
  private async decode(pixels: DecodedSlipImage): Promise<string[] | null> {
    for (let attempt_number = 0; attempt_number < 2; attempt_number += 1) {
      try {
        return await readQrTexts(pixels);
      } catch {
        discardZxing();
        await ensureZxing();
      }
    }
    return null;
  }
}
