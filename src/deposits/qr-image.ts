import QRCode from 'qrcode';
import { invariant } from '../platform/assert.ts';
import { constantTimeEqual, hmacSha256Hex } from '../platform/crypto.ts';

/**
 * `qr_image_url`: a link to a PNG of a leg's PromptPay QR that the end user's browser can load without
 * the merchant's credentials. The link carries no payload and no account number, only ids, an expiry
 * and an HMAC over them (a key derived from the master key), so it cannot be made for another leg or
 * kept beyond the leg's deadline. The image is rendered on each request and never stored.
 */

const LINK_KEY_PURPOSE = 'deposits.qr_image_link.v1';
/** 128 bits of HMAC, base64url: long enough to be unguessable, short enough for a URL. */
const SIGNATURE_BYTES = 16;
const SIGNATURE_PATTERN = /^[A-Za-z0-9_-]{22}$/;
/**
 * `expires` as the link is written: decimal digits without a leading zero, at most 12 (the route's limit).
 * The signature covers the number, so `0123` would otherwise verify as `123`: one link, two spellings.
 */
const EXPIRES_PATTERN = /^(?:0|[1-9][0-9]{0,11})$/;

export interface QrLinkTarget {
  white_label_id: string;
  deposit_id: string;
  leg_ref: string;
  /** Unix seconds after which the link answers 404. */
  expires: number;
}

export class QrImageLinks {
  private readonly key: Buffer;

  constructor(master_key: Buffer) {
    invariant(master_key.length === 32, 'the master key is 32 bytes');
    this.key = Buffer.from(hmacSha256Hex(master_key, LINK_KEY_PURPOSE), 'hex');
  }

  private sign(target: QrLinkTarget): string {
    const mac = Buffer.from(hmacSha256Hex(this.key, `${target.white_label_id}\n${target.deposit_id}\n${target.leg_ref}\n${target.expires}`), 'hex');
    return mac.subarray(0, SIGNATURE_BYTES).toString('base64url');
  }

  url(base_url: string, target: QrLinkTarget): string {
    const query = new URLSearchParams({ wl: target.white_label_id, expires: String(target.expires), signature: this.sign(target) });
    return `${base_url}/v1/pay/deposits/${target.deposit_id}/legs/${target.leg_ref}/qr.png?${query.toString()}`;
  }

  /**
   * True when the link is spelled exactly as `url` writes it (the signature in unpadded base64url of its
   * exact length, `expires` in canonical decimal), the signature is this service's for exactly these ids
   * and expiry, and the link has not expired. Any other spelling is an invalid link, not a second name
   * for a valid one: the comparison is of the whole text, so the signature's unused low bits count too.
   */
  verify(target: Omit<QrLinkTarget, 'expires'> & { expires: string }, signature: string, now: Date): boolean {
    if (!SIGNATURE_PATTERN.test(signature) || !EXPIRES_PATTERN.test(target.expires)) return false;
    const expires = Number(target.expires);
    if (!Number.isSafeInteger(expires) || expires * 1000 <= now.getTime()) return false;
    return constantTimeEqual(this.sign({ ...target, expires }), signature);
  }
}

/** The PNG of a QR payload: error correction M, a quiet zone of 4 modules, 480 pixels wide. */
export async function renderQrPng(payload: string): Promise<Buffer> {
  return QRCode.toBuffer(payload, { type: 'png', errorCorrectionLevel: 'M', margin: 4, width: 480 });
}
