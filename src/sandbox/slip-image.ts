import { createRequire } from 'node:module';
import type * as CanvasModule from '@napi-rs/canvas';
import type { SKRSContext2D } from '@napi-rs/canvas';
import QRCode from 'qrcode';
import { invariant } from '../platform/assert.ts';
import { buildSlipPayload, parseSlipPayload } from '../verification/slip-payload.ts';
import { printedAccount, printedName } from './printed-masks.ts';

/**
 * A sandbox slip image: what the sandbox bank hands a sandbox payer after a transfer, drawn the way a
 * Thai mobile-banking app draws its slip (bank-coloured header, the success line, the two parties
 * masked as banks print them, the amount, the transaction reference and the mini-QR near the bottom
 * right). The mini-QR is real: it carries the slip payload of the transfer, so a sandbox slip goes
 * through exactly the pipeline a live one does. The image is returned as bytes and never written.
 */

export interface SlipImageDetails {
  sending_bank_code: string;
  trans_ref: string;
  amount_minor: number;
  fee_minor?: number;
  occurred_at: Date;
  sender: { bank_code: string; account_number: string; name_th: string; name_en?: string | null };
  receiver: { bank_code: string; account_number: string; name_th: string };
}

export interface RenderedSlipImage {
  bytes: Buffer;
  media_type: 'image/png' | 'image/jpeg';
  /** The mini-QR's payload, so a caller can check what the image carries without reading it back. */
  payload: string;
}

interface BankStyle {
  short_name: string;
  name_th: string;
  /** The bank's brand colour, for the header and its badge. */
  colour: string;
  /** Text on the brand colour: white, except on light brand colours. */
  text_colour: string;
}

/** The banks of migrations/0001_foundation.sql with their brand colours, as a slip shows them. */
const BANK_STYLES: ReadonlyMap<string, BankStyle> = new Map([
  ['002', { short_name: 'BBL', name_th: 'ธนาคารกรุงเทพ', colour: '#1E4598', text_colour: '#FFFFFF' }],
  ['004', { short_name: 'KBANK', name_th: 'ธนาคารกสิกรไทย', colour: '#138F2D', text_colour: '#FFFFFF' }],
  ['006', { short_name: 'KTB', name_th: 'ธนาคารกรุงไทย', colour: '#1BA5E1', text_colour: '#FFFFFF' }],
  ['011', { short_name: 'TTB', name_th: 'ธนาคารทหารไทยธนชาต', colour: '#0050F0', text_colour: '#FFFFFF' }],
  ['014', { short_name: 'SCB', name_th: 'ธนาคารไทยพาณิชย์', colour: '#4E2E7F', text_colour: '#FFFFFF' }],
  ['022', { short_name: 'CIMBT', name_th: 'ธนาคารซีไอเอ็มบี ไทย', colour: '#7E2F36', text_colour: '#FFFFFF' }],
  ['024', { short_name: 'UOBT', name_th: 'ธนาคารยูโอบี', colour: '#0B3979', text_colour: '#FFFFFF' }],
  ['025', { short_name: 'BAY', name_th: 'ธนาคารกรุงศรีอยุธยา', colour: '#FEC43B', text_colour: '#4A4A4A' }],
  ['030', { short_name: 'GSB', name_th: 'ธนาคารออมสิน', colour: '#EB198D', text_colour: '#FFFFFF' }],
  ['033', { short_name: 'GHB', name_th: 'ธนาคารอาคารสงเคราะห์', colour: '#F57D23', text_colour: '#FFFFFF' }],
  ['034', { short_name: 'BAAC', name_th: 'ธนาคารเพื่อการเกษตรและสหกรณ์การเกษตร', colour: '#4B9B1D', text_colour: '#FFFFFF' }],
  ['066', { short_name: 'IBANK', name_th: 'ธนาคารอิสลามแห่งประเทศไทย', colour: '#184615', text_colour: '#FFFFFF' }],
  ['067', { short_name: 'TISCO', name_th: 'ธนาคารทิสโก้', colour: '#12549F', text_colour: '#FFFFFF' }],
  ['069', { short_name: 'KKP', name_th: 'ธนาคารเกียรตินาคินภัทร', colour: '#635F98', text_colour: '#FFFFFF' }],
  ['070', { short_name: 'ICBCT', name_th: 'ธนาคารไอซีบีซี (ไทย)', colour: '#C4161C', text_colour: '#FFFFFF' }],
  ['071', { short_name: 'TCD', name_th: 'ธนาคารไทยเครดิต', colour: '#0D3B7A', text_colour: '#FFFFFF' }],
  ['073', { short_name: 'LHFG', name_th: 'ธนาคารแลนด์ แอนด์ เฮ้าส์', colour: '#6E9E3C', text_colour: '#FFFFFF' }],
  ['098', { short_name: 'SMEB', name_th: 'ธนาคารพัฒนาวิสาหกิจขนาดกลางและขนาดย่อมแห่งประเทศไทย', colour: '#0A7ABF', text_colour: '#FFFFFF' }],
]);

/** A code the table does not know is still drawn: a neutral colour, the code as its name. */
function bankStyle(bank_code: string): BankStyle {
  return BANK_STYLES.get(bank_code) ?? { short_name: bank_code, name_th: `ธนาคาร ${bank_code}`, colour: '#5F6B7A', text_colour: '#FFFFFF' };
}

const FONT_FAMILY = 'Sarabun';
const FONT_FILES = ['sarabun-thai-400-normal.woff2', 'sarabun-latin-400-normal.woff2', 'sarabun-thai-700-normal.woff2', 'sarabun-latin-700-normal.woff2'];
let canvasLoaded: Promise<typeof CanvasModule> | null = null;

/**
 * The canvas library (Skia) is loaded with the first sandbox slip drawn, not when the service starts: a
 * process that never draws one does not hold it (docs/benchmarks.md, resident memory). Its fonts are
 * registered then, once.
 */
function loadCanvas(): Promise<typeof CanvasModule> {
  canvasLoaded ??= import('@napi-rs/canvas').then((canvas) => {
    registerFonts(canvas.GlobalFonts);
    return canvas;
  });
  return canvasLoaded;
}

/**
 * Registers Sarabun once per process. The Thai and the Latin subsets are separate files of one family,
 * so both are registered under the same name and a line mixing scripts is drawn in one typeface.
 * Paths are resolved through the package, so the working directory does not matter.
 */
function registerFonts(GlobalFonts: typeof CanvasModule.GlobalFonts): void {
  const require = createRequire(import.meta.url);
  for (const file of FONT_FILES) {
    const key = GlobalFonts.registerFromPath(require.resolve(`@fontsource/sarabun/files/${file}`), FONT_FAMILY);
    if (key === null) throw new Error(`the font file ${file} could not be registered`);
  }
}

const THAI_MONTHS_SHORT = ['ม.ค.', 'ก.พ.', 'มี.ค.', 'เม.ย.', 'พ.ค.', 'มิ.ย.', 'ก.ค.', 'ส.ค.', 'ก.ย.', 'ต.ค.', 'พ.ย.', 'ธ.ค.'] as const;
/** Asia/Bangkok has been UTC+07:00 without daylight saving since 1920; the offset is applied by hand so the machine's TZ never matters. */
const BANGKOK_OFFSET_MS = 7 * 60 * 60 * 1000;
/** The Buddhist era is the Gregorian year plus 543. */
const BUDDHIST_ERA_OFFSET_YEARS = 543;

/** `23 พ.ย. 69 14:05 น.`: day, Thai short month, two-digit Buddhist-era year, Bangkok time. */
export function formatSlipDateTime(occurred_at: Date): string {
  const bangkok = new Date(occurred_at.getTime() + BANGKOK_OFFSET_MS);
  const year_be = bangkok.getUTCFullYear() + BUDDHIST_ERA_OFFSET_YEARS;
  const two_digits = (value: number): string => String(value).padStart(2, '0');
  const month = THAI_MONTHS_SHORT[bangkok.getUTCMonth()] ?? '';
  return `${bangkok.getUTCDate()} ${month} ${two_digits(year_be % 100)} ${two_digits(bangkok.getUTCHours())}:${two_digits(bangkok.getUTCMinutes())} น.`;
}

/**
 * `1,000.00 บาท` from satang. Integer arithmetic only: the remainder is exact for any safe integer, and
 * the subtraction leaves an exact multiple of 100, so the division is exact too.
 */
export function formatSlipAmount(amount_minor: number): string {
  invariant(Number.isSafeInteger(amount_minor), 'the amount is a safe integer number of satang');
  const magnitude = Math.abs(amount_minor);
  const satang = magnitude % 100;
  const baht = (magnitude - satang) / 100;
  const grouped = String(baht).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${amount_minor < 0 ? '-' : ''}${grouped}.${String(satang).padStart(2, '0')} บาท`;
}

const WIDTH_PX = 720;
const HEIGHT_PX = 1280;
const CARD_LEFT_PX = 30;
const CARD_RIGHT_PX = WIDTH_PX - 30;
const CARD_TOP_PX = 160;
const CARD_BOTTOM_PX = 1265;
const CONTENT_LEFT_PX = 60;
const CONTENT_RIGHT_PX = WIDTH_PX - 60;
const QR_TARGET_PX = 260;
/** The QR standard's quiet zone: four modules of white around the symbol. */
const QR_QUIET_ZONE_MODULES = 4;
const QR_RIGHT_PX = CONTENT_RIGHT_PX + 6;
const QR_TOP_PX = 972;
const MINIMUM_FONT_PX = 14;
const TEXT_COLOUR = '#1F2937';
const MUTED_COLOUR = '#6B7280';
const DIVIDER_COLOUR = '#E5E7EB';
const SUCCESS_COLOUR = '#16A34A';

function font(weight: 400 | 700, size_px: number): string {
  return `${weight === 700 ? 'bold ' : ''}${size_px}px ${FONT_FAMILY}`;
}

/** Draws text at the largest size up to `size_px` that fits `max_width_px`; at most one try per pixel of size. */
function drawFittedText(context: SKRSContext2D, text: string, x: number, y: number, max_width_px: number, weight: 400 | 700, size_px: number): void {
  let size = size_px;
  for (let turn = 0; turn < size_px && size > MINIMUM_FONT_PX; turn += 1) {
    context.font = font(weight, size);
    if (context.measureText(text).width <= max_width_px) break;
    size -= 1;
  }
  context.font = font(weight, size);
  context.fillText(text, x, y, max_width_px);
}

function roundedRectangle(context: SKRSContext2D, left: number, top: number, right: number, bottom: number, radius: number): void {
  context.beginPath();
  context.roundRect(left, top, right - left, bottom - top, radius);
  context.fill();
}

/** A round badge with the bank's short name, standing in for its logo. */
function drawBankBadge(context: SKRSContext2D, style: BankStyle, centre_x: number, centre_y: number, radius: number): void {
  context.fillStyle = style.colour;
  context.beginPath();
  context.arc(centre_x, centre_y, radius, 0, Math.PI * 2);
  context.fill();
  context.fillStyle = style.text_colour;
  context.textAlign = 'center';
  context.textBaseline = 'middle';
  drawFittedText(context, style.short_name, centre_x, centre_y + 1, radius * 1.6, 700, Math.round(radius * 0.62));
  context.textAlign = 'left';
  context.textBaseline = 'alphabetic';
}

interface PartyLines {
  label: string;
  bank_code: string;
  name_lines: string[];
  account_number: string;
}

/** One party: a label, the bank badge, the printed name (Thai, then English when given), the bank and the masked account. */
function drawParty(context: SKRSContext2D, party: PartyLines, top_px: number): void {
  const style = bankStyle(party.bank_code);
  context.fillStyle = MUTED_COLOUR;
  context.font = font(400, 24);
  context.fillText(party.label, CONTENT_LEFT_PX, top_px);
  drawBankBadge(context, style, CONTENT_LEFT_PX + 36, top_px + 62, 34);
  const text_left = CONTENT_LEFT_PX + 92;
  const text_width = CONTENT_RIGHT_PX - text_left;
  let baseline = top_px + 48;
  for (const [index, line] of party.name_lines.entries()) {
    context.fillStyle = TEXT_COLOUR;
    drawFittedText(context, line, text_left, baseline, text_width, index === 0 ? 700 : 400, index === 0 ? 30 : 22);
    baseline += index === 0 ? 32 : 28;
  }
  context.fillStyle = MUTED_COLOUR;
  drawFittedText(context, style.name_th, text_left, baseline, text_width, 400, 22);
  baseline += 30;
  context.fillStyle = TEXT_COLOUR;
  context.font = font(400, 24);
  context.fillText(printedAccount(party.account_number), text_left, baseline);
}

function drawDivider(context: SKRSContext2D, y: number): void {
  context.fillStyle = DIVIDER_COLOUR;
  context.fillRect(CONTENT_LEFT_PX, y, CONTENT_RIGHT_PX - CONTENT_LEFT_PX, 2);
}

/** A label on the left and its value on the right of the same line. */
function drawLabelledValue(context: SKRSContext2D, label: string, value: string, y: number, value_size_px: number): void {
  context.fillStyle = MUTED_COLOUR;
  context.font = font(400, 24);
  context.fillText(label, CONTENT_LEFT_PX, y);
  context.fillStyle = TEXT_COLOUR;
  context.font = font(700, value_size_px);
  context.textAlign = 'right';
  context.fillText(value, CONTENT_RIGHT_PX, y);
  context.textAlign = 'left';
}

/**
 * The mini-QR drawn module by module at a whole number of pixels per module, so its edges are sharp:
 * error correction M, a quiet zone of four modules, about 220–260 pixels wide. Returns where it went.
 */
function drawMiniQr(context: SKRSContext2D, payload: string): { left_px: number; size_px: number } {
  const symbol = QRCode.create(payload, { errorCorrectionLevel: 'M' });
  const module_count = symbol.modules.size;
  const module_px = Math.max(4, Math.floor(QR_TARGET_PX / (module_count + 2 * QR_QUIET_ZONE_MODULES)));
  const size_px = module_px * (module_count + 2 * QR_QUIET_ZONE_MODULES);
  const left_px = QR_RIGHT_PX - size_px;
  context.fillStyle = '#FFFFFF';
  context.fillRect(left_px, QR_TOP_PX, size_px, size_px);
  context.fillStyle = '#000000';
  const origin_x = left_px + QR_QUIET_ZONE_MODULES * module_px;
  const origin_y = QR_TOP_PX + QR_QUIET_ZONE_MODULES * module_px;
  for (let row = 0; row < module_count; row += 1) {
    for (let column = 0; column < module_count; column += 1) {
      if (symbol.modules.get(row, column)) context.fillRect(origin_x + column * module_px, origin_y + row * module_px, module_px, module_px);
    }
  }
  return { left_px, size_px };
}

function drawSuccessMark(context: SKRSContext2D, centre_x: number, centre_y: number): void {
  context.fillStyle = SUCCESS_COLOUR;
  context.beginPath();
  context.arc(centre_x, centre_y, 36, 0, Math.PI * 2);
  context.fill();
  context.strokeStyle = '#FFFFFF';
  context.lineWidth = 7;
  context.lineCap = 'round';
  context.lineJoin = 'round';
  context.beginPath();
  context.moveTo(centre_x - 16, centre_y + 1);
  context.lineTo(centre_x - 4, centre_y + 13);
  context.lineTo(centre_x + 17, centre_y - 11);
  context.stroke();
}

function drawDownArrow(context: SKRSContext2D, centre_x: number, top_px: number): void {
  context.strokeStyle = '#9CA3AF';
  context.lineWidth = 3;
  context.lineCap = 'round';
  context.beginPath();
  context.moveTo(centre_x, top_px);
  context.lineTo(centre_x, top_px + 30);
  context.moveTo(centre_x - 9, top_px + 21);
  context.lineTo(centre_x, top_px + 30);
  context.lineTo(centre_x + 9, top_px + 21);
  context.stroke();
}

export async function renderSlipImage(
  details: SlipImageDetails,
  options?: { format?: 'png' | 'jpeg'; jpeg_quality?: number },
): Promise<RenderedSlipImage> {
  const { createCanvas } = await loadCanvas();
  const payload = buildSlipPayload({ sending_bank_code: details.sending_bank_code, trans_ref: details.trans_ref });
  // The sandbox bank makes its own references; one that its own reader would refuse is a programming error.
  invariant(parseSlipPayload(payload).ok, 'the slip reference is a 3-digit bank code and 1-50 ASCII letters and digits');
  invariant(Number.isSafeInteger(details.amount_minor) && details.amount_minor > 0, 'amount_minor is a positive safe integer');
  invariant(details.fee_minor === undefined || (Number.isSafeInteger(details.fee_minor) && details.fee_minor >= 0), 'fee_minor is a non-negative safe integer');
  invariant(Number.isFinite(details.occurred_at.getTime()), 'occurred_at is a valid date');
  const sending_style = bankStyle(details.sending_bank_code);
  const canvas = createCanvas(WIDTH_PX, HEIGHT_PX);
  const context = canvas.getContext('2d');

  context.fillStyle = '#EEF1F5';
  context.fillRect(0, 0, WIDTH_PX, HEIGHT_PX);
  context.fillStyle = sending_style.colour;
  context.fillRect(0, 0, WIDTH_PX, CARD_TOP_PX + 60);
  drawBankBadge(context, { ...sending_style, colour: '#FFFFFF', text_colour: sending_style.colour === '#FEC43B' ? '#4A4A4A' : sending_style.colour }, 82, 82, 42);
  context.fillStyle = sending_style.text_colour;
  drawFittedText(context, sending_style.name_th, 142, 94, WIDTH_PX - 142 - 30, 700, 34);

  context.fillStyle = '#FFFFFF';
  roundedRectangle(context, CARD_LEFT_PX, CARD_TOP_PX, CARD_RIGHT_PX, CARD_BOTTOM_PX, 24);

  drawSuccessMark(context, WIDTH_PX / 2, 232);
  context.textAlign = 'center';
  context.fillStyle = TEXT_COLOUR;
  context.font = font(700, 40);
  context.fillText('โอนเงินสำเร็จ', WIDTH_PX / 2, 318);
  context.fillStyle = MUTED_COLOUR;
  context.font = font(400, 26);
  context.fillText(formatSlipDateTime(details.occurred_at), WIDTH_PX / 2, 362);
  context.textAlign = 'left';
  drawDivider(context, 392);

  const sender_names = [printedName(details.sender.name_th)];
  if (details.sender.name_en != null && details.sender.name_en.trim() !== '') sender_names.push(printedName(details.sender.name_en));
  drawParty(context, { label: 'จาก', bank_code: details.sender.bank_code, name_lines: sender_names, account_number: details.sender.account_number }, 430);
  drawDownArrow(context, CONTENT_LEFT_PX + 36, 592);
  drawParty(context, { label: 'ไปยัง', bank_code: details.receiver.bank_code, name_lines: [printedName(details.receiver.name_th)], account_number: details.receiver.account_number }, 650);
  drawDivider(context, 788);

  drawLabelledValue(context, 'จำนวน:', formatSlipAmount(details.amount_minor), 838, 38);
  drawLabelledValue(context, 'ค่าธรรมเนียม:', formatSlipAmount(details.fee_minor ?? 0), 882, 26);
  context.fillStyle = MUTED_COLOUR;
  context.font = font(400, 24);
  context.fillText('เลขที่รายการ:', CONTENT_LEFT_PX, 924);
  context.fillStyle = TEXT_COLOUR;
  drawFittedText(context, details.trans_ref, CONTENT_LEFT_PX, 954, CONTENT_RIGHT_PX - CONTENT_LEFT_PX, 700, 24);

  const qr = drawMiniQr(context, payload);
  context.fillStyle = MUTED_COLOUR;
  context.textAlign = 'center';
  context.font = font(400, 20);
  context.fillText('สแกนตรวจสอบสลิป', qr.left_px + qr.size_px / 2, QR_TOP_PX + qr.size_px + 24);
  context.textAlign = 'left';
  const note_width = qr.left_px - CONTENT_LEFT_PX - 20;
  context.fillStyle = MUTED_COLOUR;
  drawFittedText(context, 'ผู้รับเงินสามารถสแกนคิวอาร์โค้ดนี้', CONTENT_LEFT_PX, 1070, note_width, 400, 20);
  drawFittedText(context, 'เพื่อตรวจสอบสถานะการโอนเงิน', CONTENT_LEFT_PX, 1098, note_width, 400, 20);
  context.fillStyle = sending_style.colour;
  drawFittedText(context, sending_style.short_name, CONTENT_LEFT_PX, 1190, note_width, 700, 44);

  if (options?.format === 'jpeg') {
    const quality = options.jpeg_quality ?? 90;
    invariant(Number.isInteger(quality) && quality >= 1 && quality <= 100, 'jpeg_quality is an integer from 1 to 100');
    return { bytes: await canvas.encode('jpeg', quality), media_type: 'image/jpeg', payload };
  }
  return { bytes: await canvas.encode('png'), media_type: 'image/png', payload };
}
