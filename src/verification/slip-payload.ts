import { checksum } from 'promptparse';
import { slipVerify } from 'promptparse/generate';

/**
 * The payload of a Thai bank slip's mini-QR: EMVCo TLV with tag 00 (sub-tags 00 `000001`, 01 the
 * sending bank's code, 02 the transaction reference), tag 51 the country (`TH`) and tag 91 the CRC
 * (CRC-16/CCITT-FALSE over everything before its value, `9104` included).
 *
 * Generation goes through promptparse. Parsing does not: promptparse's validator auto-fixes short CRCs,
 * ignores tag 51 and decodes lengths with `parseInt`, which accepts text that is not TLV at all. The
 * parser here walks the TLV itself with every length checked, so a payload either has exactly the
 * expected shape or is refused with a reason. Only the two values the bank is asked about come out.
 */

export interface SlipReference {
  /** Bank of Thailand code of the bank that sent the transfer, three digits. */
  sending_bank_code: string;
  /** The sending bank's transaction reference, 1–50 ASCII letters and digits. */
  trans_ref: string;
}

export type SlipPayloadParse =
  | { ok: true; reference: SlipReference }
  | { ok: false; reason: 'too_long' | 'malformed' | 'bad_crc' | 'not_a_slip' | 'wrong_country' };

/** Real slip payloads are about 60 characters; 512 leaves room for unknown extra tags and bounds the work. */
export const MAX_SLIP_PAYLOAD_LENGTH = 512;

const SLIP_API_TYPE = '000001';
const SLIP_COUNTRY = 'TH';
const CRC_TAG = '91';
const BANK_CODE_PATTERN = /^[0-9]{3}$/;
const TRANS_REF_PATTERN = /^[A-Za-z0-9]{1,50}$/;
/** Space to tilde: what a QR scanner returns for an ASCII payload, without control characters. */
const PRINTABLE_ASCII_PATTERN = /^[\x20-\x7E]*$/;
const TLV_HEADER_PATTERN = /^[0-9]{4}$/;
/** The CRC's value is four hexadecimal digits; see `parseSlipPayload` on letter case. */
const CRC_VALUE_PATTERN = /^[0-9A-Fa-f]{4}$/;

export function buildSlipPayload(reference: SlipReference): string {
  return slipVerify({ sendingBank: reference.sending_bank_code, transRef: reference.trans_ref });
}

interface TlvField {
  id: string;
  value: string;
}

/**
 * Splits TLV text into fields, or null when it is not exactly a sequence of `id(2) length(2) value`
 * with decimal ids and lengths and the last value ending at the end of the text. Each field consumes
 * at least four characters, so the loop ends within `text.length / 4` turns.
 */
function splitTlv(text: string): TlvField[] | null {
  const fields: TlvField[] = [];
  let position = 0;
  const maximum_fields = Math.ceil(text.length / 4);
  for (let turn = 0; turn < maximum_fields && position < text.length; turn += 1) {
    const header = text.slice(position, position + 4);
    if (!TLV_HEADER_PATTERN.test(header)) return null;
    const length = Number(header.slice(2, 4));
    const value_start = position + 4;
    if (value_start + length > text.length) return null;
    fields.push({ id: header.slice(0, 2), value: text.slice(value_start, value_start + length) });
    position = value_start + length;
  }
  return position === text.length && fields.length > 0 ? fields : null;
}

/** Fields by id, or null when an id appears twice: a duplicated tag makes the payload ambiguous. */
function indexFields(fields: TlvField[]): Map<string, string> | null {
  const by_id = new Map<string, string>();
  for (const field of fields) {
    if (by_id.has(field.id)) return null;
    by_id.set(field.id, field.value);
  }
  return by_id;
}

/**
 * Parses a scanned mini-QR strictly. The checks run in this order, and the first that fails names the
 * reason:
 *
 * - `too_long`: more than 512 characters (checked before anything else looks at the text);
 * - `malformed`: not printable ASCII, not well-formed TLV, a duplicated tag, a CRC value that is not
 *   four hexadecimal digits, or a slip whose bank code or transaction reference has the wrong form;
 * - `not_a_slip`: well-formed TLV whose last tag is not the 4-character CRC tag 91 (a PromptPay QR
 *   ends in tag 63), or whose tag 00 does not hold sub-tag 00 `000001`, or that has no tag 51;
 * - `bad_crc`: the CRC does not match, compared exactly: a short CRC is not padded;
 * - `wrong_country`: tag 51 is present and is not `TH`.
 *
 * Letter case of the CRC: the CRC is a 16-bit number and its hexadecimal digits carry the same value in
 * either case, so `9104abcd` is accepted like `9104ABCD` (as promptparse's strict parse does). Nothing
 * else is lenient. Extra tags other than 00, 51 and 91 are tolerated, as EMVCo allows; extra sub-tags
 * of tag 00 too. The function never throws.
 */
export function parseSlipPayload(text: string): SlipPayloadParse {
  if (typeof text !== 'string') return { ok: false, reason: 'malformed' };
  if (text.length > MAX_SLIP_PAYLOAD_LENGTH) return { ok: false, reason: 'too_long' };
  if (!PRINTABLE_ASCII_PATTERN.test(text)) return { ok: false, reason: 'malformed' };

  const fields = splitTlv(text);
  if (fields === null) return { ok: false, reason: 'malformed' };
  const by_id = indexFields(fields);
  if (by_id === null) return { ok: false, reason: 'malformed' };

  const last = fields[fields.length - 1];
  if (last === undefined || last.id !== CRC_TAG || last.value.length !== 4) return { ok: false, reason: 'not_a_slip' };
  if (!CRC_VALUE_PATTERN.test(last.value)) return { ok: false, reason: 'malformed' };
  const expected_crc = checksum(text.slice(0, -4), true);
  if (last.value.toUpperCase() !== expected_crc) return { ok: false, reason: 'bad_crc' };

  const merchant_information = by_id.get('00');
  const sub_fields = merchant_information === undefined ? null : splitTlv(merchant_information);
  const sub_by_id = sub_fields === null ? null : indexFields(sub_fields);
  if (sub_by_id === null || sub_by_id.get('00') !== SLIP_API_TYPE) return { ok: false, reason: 'not_a_slip' };

  const country = by_id.get('51');
  if (country === undefined) return { ok: false, reason: 'not_a_slip' };
  if (country !== SLIP_COUNTRY) return { ok: false, reason: 'wrong_country' };

  const sending_bank_code = sub_by_id.get('01');
  const trans_ref = sub_by_id.get('02');
  if (sending_bank_code === undefined || !BANK_CODE_PATTERN.test(sending_bank_code)) return { ok: false, reason: 'malformed' };
  if (trans_ref === undefined || !TRANS_REF_PATTERN.test(trans_ref)) return { ok: false, reason: 'malformed' };
  return { ok: true, reference: { sending_bank_code, trans_ref } };
}
