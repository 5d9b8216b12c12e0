import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import jsqr from 'jsqr';
import sharp from 'sharp';
import { renderSlipImage, type SlipImageDetails } from '../src/sandbox/slip-image.ts';
import { parseSlipPayload } from '../src/verification/slip-payload.ts';
import {
  attemptPixels,
  decodeSlipImage,
  readQrTexts,
  SLIP_READ_ATTEMPTS,
  SlipReader,
  type DecodedSlipImage,
  type SlipReadAttempt,
} from '../src/verification/slip-reader.ts';

/**
 * Chooses the slip QR reader with numbers: a corpus of sandbox slips in the variants an upload arrives
 * in (the PNG, a JPEG at quality 70, half size, "photographed", WebP, a JPEG stored rotated with EXIF
 * orientation 6), each decoded once by the reader's own decoder, then read from the SAME pixels by
 *
 * - zxing-wasm through SlipReader's attempt list (what production runs),
 * - zxing-wasm on the whole image only,
 * - jsqr on the whole image only,
 * - jsqr through the same attempt list.
 *
 * A read succeeds when a decoded text parses as the slip's own reference. Times are per image and
 * exclude decoding the file (the same for all four). Run: `npx tsx bench/qr-corpus.ts [slip_count]`;
 * with the default 50 slips it takes about 8 minutes, most of it jsqr on the stress variants.
 */

const DEFAULT_SLIP_COUNT = 50;
const BANK_CODES = ['002', '004', '006', '011', '014', '022', '024', '025', '030', '033', '034', '066', '067', '069', '070', '071', '073', '098'];
const THAI_FIRST_NAMES = ['สมชาย', 'สมหญิง', 'วิไล', 'ประยุทธ', 'กิตติ', 'ณัฐพล', 'ศิริพร', 'อรุณี', 'ธนากร', 'พิมพ์ชนก'];
const THAI_SURNAMES = ['ใจดี', 'สุขใจ', 'ชื่นสุข', 'เก่งกล้า', 'ศรีสวัสดิ์', 'ทองคำ', 'ผ่องใส', 'แก้วมณี', 'โพธิ์ทอง', 'ไชยมงคล'];
const LATIN_FIRST_NAMES = ['Somchai', 'Somying', 'Wilai', 'Prayut', 'Kitti', 'Nattapon', 'Siriporn', 'Arunee', 'Thanakorn', 'Pimchanok'];
const LATIN_SURNAMES = ['Jaidee', 'Sukjai', 'Chuensuk', 'Kengkla', 'Srisawat', 'Thongkham', 'Phongsai', 'Kaewmanee', 'Phothong', 'Chaimongkol'];
const REFERENCE_ALPHABET = Array.from('ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789');
/** jsqr is CommonJS with its function as `default`; its types describe the module object. */
const jsQR = jsqr.default;

/** mulberry32: a small seeded PRNG, so the corpus and its noise are the same on every run. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(random: () => number, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

function digits(random: () => number, count: number): string {
  let text = '';
  for (let index = 0; index < count; index += 1) text += String(Math.floor(random() * 10));
  return text;
}

/** Slip details that differ in bank, amount, reference length and names. */
export function corpusDetails(index: number): SlipImageDetails {
  const random = seededRandom(1000 + index);
  const sending_bank_code = BANK_CODES[index % BANK_CODES.length] ?? '004';
  const reference_length = 12 + Math.floor(random() * 24);
  let trans_ref = '';
  for (let position = 0; position < reference_length; position += 1) trans_ref += pick(random, REFERENCE_ALPHABET);
  const name_index = Math.floor(random() * THAI_FIRST_NAMES.length);
  const surname_index = Math.floor(random() * THAI_SURNAMES.length);
  return {
    sending_bank_code,
    trans_ref,
    amount_minor: 100 + Math.floor(random() * 5_000_000),
    fee_minor: index % 3 === 0 ? 1000 : 0,
    occurred_at: new Date(Date.UTC(2026, index % 12, 1 + (index % 28), index % 24, (index * 7) % 60)),
    sender: {
      bank_code: sending_bank_code,
      account_number: digits(random, index % 5 === 0 ? 12 : 10),
      name_th: `${THAI_FIRST_NAMES[name_index] ?? 'สมชาย'} ${THAI_SURNAMES[surname_index] ?? 'ใจดี'}`,
      name_en: index % 2 === 0 ? `${LATIN_FIRST_NAMES[name_index] ?? 'Somchai'} ${LATIN_SURNAMES[surname_index] ?? 'Jaidee'}` : null,
    },
    receiver: { bank_code: pick(random, BANK_CODES), account_number: digits(random, 10), name_th: `${pick(random, THAI_FIRST_NAMES)} ${pick(random, THAI_SURNAMES)}` },
  };
}

export const VARIANTS = ['png', 'jpeg70', 'half', 'photographed', 'webp', 'exif_rotated'] as const;
export type Variant = (typeof VARIANTS)[number];

/**
 * A phone photo of a screen or a print: turned 3 degrees on a light background, slightly blurred, with
 * Gaussian sensor noise (sigma 10 grey levels) from a seeded generator, saved as a camera JPEG.
 */
export async function photographed(png: Buffer, seed: number): Promise<Buffer> {
  const { data, info } = await sharp(png)
    .rotate(3, { background: '#E6E1D8' })
    .extend({ top: 40, bottom: 40, left: 40, right: 40, background: '#E6E1D8' })
    .blur(0.9)
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return sharp(addNoise(data, 10, seed), { raw: { width: info.width, height: info.height, channels: info.channels } }).jpeg({ quality: 85 }).toBuffer();
}

/** Gaussian noise of `sigma` grey levels on every channel, from a seeded generator. */
export function addNoise(pixels: Buffer, sigma: number, seed: number): Buffer {
  const random = seededRandom(seed);
  const noisy = Buffer.alloc(pixels.length);
  for (let index = 0; index < pixels.length; index += 1) {
    // Box–Muller: two uniform numbers give one standard normal number.
    const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    noisy[index] = Math.max(0, Math.min(255, Math.round((pixels[index] ?? 0) + sigma * normal)));
  }
  return noisy;
}

export async function makeVariant(png: Buffer, variant: Variant, seed: number): Promise<Buffer> {
  switch (variant) {
    case 'png':
      return png;
    case 'jpeg70':
      return sharp(png).jpeg({ quality: 70 }).toBuffer();
    case 'half': {
      const metadata = await sharp(png).metadata();
      return sharp(png).resize({ width: Math.round((metadata.width ?? 720) / 2) }).png().toBuffer();
    }
    case 'photographed':
      return photographed(png, seed);
    case 'webp':
      return sharp(png).webp({ quality: 80 }).toBuffer();
    case 'exif_rotated':
      // Orientation 6 means "turn 90 degrees clockwise to display": the stored pixels are turned the other way.
      return sharp(png).rotate(-90).jpeg({ quality: 90 }).withMetadata({ orientation: 6 }).toBuffer();
  }
}

/**
 * Harder than anything the tests require, to show what the crops of the attempt list are for: a slip
 * scaled to a quarter (a screenshot shared at thumbnail size, the QR's modules under 2 pixels), and a
 * slip 200 pixels wide in the middle of a 1500x2000 noisy photo.
 */
export const STRESS_VARIANTS = ['quarter', 'small_in_photo'] as const;
export type StressVariant = (typeof STRESS_VARIANTS)[number];

export async function makeStressVariant(png: Buffer, variant: StressVariant, seed: number): Promise<Buffer> {
  if (variant === 'quarter') return sharp(png).resize({ width: 180 }).png().toBuffer();
  const slip = await sharp(png).resize({ width: 200 }).toBuffer();
  const { data, info } = await sharp({ create: { width: 1500, height: 2000, channels: 3, background: '#8A7A68' } })
    .composite([{ input: slip, left: 650, top: 800 }])
    .blur(0.7)
    .raw()
    .toBuffer({ resolveWithObject: true });
  return sharp(addNoise(data, 10, seed), { raw: { width: info.width, height: info.height, channels: info.channels } }).jpeg({ quality: 80 }).toBuffer();
}

type Decoder = (image: DecodedSlipImage) => Promise<string[]>;

const zxingDecoder: Decoder = readQrTexts;
const jsqrDecoder: Decoder = async (image) => {
  const found = jsQR(image.data, image.width, image.height, { inversionAttempts: 'dontInvert' });
  return found === null ? [] : [found.data];
};

/** Runs a decoder through attempts until one yields the expected reference; returns the attempt's name or null. */
async function readWith(decoder: Decoder, image: DecodedSlipImage, attempts: readonly SlipReadAttempt[], expected_trans_ref: string): Promise<string | null> {
  for (const read_attempt of attempts) {
    const pixels = await attemptPixels(image, read_attempt);
    if (pixels === null) continue;
    for (const text of await decoder(pixels)) {
      const parsed = parseSlipPayload(text);
      if (parsed.ok && parsed.reference.trans_ref === expected_trans_ref) return read_attempt.name;
    }
  }
  return null;
}

interface Tally {
  successes: number;
  total: number;
  times_ms: number[];
  attempts: Map<string, number>;
}

function newTally(): Tally {
  return { successes: 0, total: 0, times_ms: [], attempts: new Map() };
}

function percentile(values: number[], fraction: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)] ?? 0;
}

function mean(values: number[]): number {
  return values.length === 0 ? 0 : values.reduce((sum, value) => sum + value, 0) / values.length;
}

const ALL_VARIANTS: readonly (Variant | StressVariant)[] = [...VARIANTS, ...STRESS_VARIANTS];

function isStress(variant: Variant | StressVariant): variant is StressVariant {
  return (STRESS_VARIANTS as readonly string[]).includes(variant);
}

async function main(): Promise<void> {
  const slip_count = Number(process.argv[2] ?? DEFAULT_SLIP_COUNT);
  if (!Number.isInteger(slip_count) || slip_count < 1 || slip_count > 1000) throw new Error('slip_count is an integer from 1 to 1000');
  const whole_only = SLIP_READ_ATTEMPTS.slice(0, 1);
  const readers: { name: string; decoder: Decoder; attempts: readonly SlipReadAttempt[] }[] = [
    { name: 'zxing, attempt list', decoder: zxingDecoder, attempts: SLIP_READ_ATTEMPTS },
    { name: 'zxing, whole image', decoder: zxingDecoder, attempts: whole_only },
    { name: 'jsqr, whole image', decoder: jsqrDecoder, attempts: whole_only },
    { name: 'jsqr, attempt list', decoder: jsqrDecoder, attempts: SLIP_READ_ATTEMPTS },
  ];
  const tallies = new Map<string, Tally>();
  const decode_times_ms: number[] = [];
  const end_to_end_times_ms: number[] = [];
  let end_to_end_failures = 0;
  const slip_reader = new SlipReader();
  await slip_reader.warmUp();

  for (let index = 0; index < slip_count; index += 1) {
    const details = corpusDetails(index);
    const rendered = await renderSlipImage(details);
    for (const variant of ALL_VARIANTS) {
      const bytes = isStress(variant) ? await makeStressVariant(rendered.bytes, variant, 9000 + index) : await makeVariant(rendered.bytes, variant, 7000 + index);
      const decode_started = performance.now();
      const decoded = await decodeSlipImage(bytes);
      decode_times_ms.push(performance.now() - decode_started);
      if (!decoded.ok) throw new Error(`variant ${variant} of slip ${index} did not decode: ${decoded.reason}`);
      for (const reader of readers) {
        const key = `${reader.name}\u0000${variant}`;
        const tally = tallies.get(key) ?? newTally();
        tallies.set(key, tally);
        const started = performance.now();
        const attempt_name = await readWith(reader.decoder, decoded.image, reader.attempts, details.trans_ref);
        tally.times_ms.push(performance.now() - started);
        tally.total += 1;
        if (attempt_name !== null) {
          tally.successes += 1;
          tally.attempts.set(attempt_name, (tally.attempts.get(attempt_name) ?? 0) + 1);
        }
      }
      const end_to_end_started = performance.now();
      const read = await slip_reader.read(bytes);
      end_to_end_times_ms.push(performance.now() - end_to_end_started);
      if (read.outcome !== 'read' || read.reference.trans_ref !== details.trans_ref) end_to_end_failures += 1;
    }
  }

  console.log(`Corpus: ${slip_count} slips x ${ALL_VARIANTS.length} variants (the last ${STRESS_VARIANTS.length} are stress variants); times per image, excluding the file decode.\n`);
  console.log('| reader | variant | read | mean ms | p95 ms | winning attempts |');
  console.log('|---|---|---|---|---|---|');
  for (const reader of readers) {
    for (const variant of ALL_VARIANTS) {
      const tally = tallies.get(`${reader.name}\u0000${variant}`) ?? newTally();
      const attempts = [...tally.attempts.entries()].map(([name, count]) => `${name} ${count}`).join(', ');
      const rate = ((100 * tally.successes) / Math.max(1, tally.total)).toFixed(0);
      console.log(`| ${reader.name} | ${variant} | ${tally.successes}/${tally.total} (${rate}%) | ${mean(tally.times_ms).toFixed(1)} | ${percentile(tally.times_ms, 0.95).toFixed(1)} | ${attempts} |`);
    }
  }
  console.log(`\nFile decode (sharp, header check + orientation + raw RGBA): mean ${mean(decode_times_ms).toFixed(1)} ms, p95 ${percentile(decode_times_ms, 0.95).toFixed(1)} ms.`);
  console.log(`SlipReader.read end to end: ${end_to_end_times_ms.length - end_to_end_failures}/${end_to_end_times_ms.length} read, mean ${mean(end_to_end_times_ms).toFixed(1)} ms, p95 ${percentile(end_to_end_times_ms, 0.95).toFixed(1)} ms.`);
}

// Only when run as a script: test/verification/slip-imaging.test.ts imports the corpus builders from here.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
