import { invariant } from '../platform/assert.ts';
import type { SecretBox } from '../platform/crypto.ts';

/**
 * Fields an event shows its merchant but the outbox never keeps in clear: a leg's `qr_payload` (the PromptPay
 * text, which holds the payee's full account number; `deposit.matched` carries it, spec: "the only event carrying
 * payment instructions"). The stored envelope holds the value sealed (`"qr_payload":"sealed:<v1 box>"`), and every
 * reader of the outbox (webhook delivery, GET /v1/pay/events, local forwarding) opens it, so the body a merchant
 * receives is the text the event was written as, byte for byte, on every attempt (docs/decisions/events.md).
 */

const SEALED_PURPOSE = 'events.qr_payload.v1';
/** A `qr_payload` key with its JSON string value, as JSON.stringify writes it (no space after the colon). */
const CLEAR_FIELD = /"qr_payload":("(?:[^"\\]|\\.)*")/g;
/** The same key with its sealed value, as the outbox stores it. The box's text is base64url parts joined by dots. */
const SEALED_FIELD = /"qr_payload":"sealed:([A-Za-z0-9_.-]+)"/g;

export class EventFieldSealer {
  constructor(private readonly box: SecretBox | null) {}

  /** The envelope text to store: each `qr_payload` value sealed. Without a box, an envelope with one is refused. */
  seal(text: string): string {
    if (!text.includes('"qr_payload":')) return text;
    const box = this.box;
    invariant(box !== null, 'an event carrying a qr_payload needs the secret box to be stored');
    return text.replace(CLEAR_FIELD, (_field, value: string) => `"qr_payload":"sealed:${box.seal(JSON.parse(value) as string, SEALED_PURPOSE)}"`);
  }

  /**
   * The stored text with each sealed `qr_payload` sealed again under the current master key (key rotation).
   * Only the sealed values change, so the envelope opens to the same text as before, byte for byte.
   */
  reseal(text: string): string {
    if (!text.includes('"qr_payload":"sealed:')) return text;
    const box = this.box;
    invariant(box !== null, 'a stored qr_payload needs the secret box to be sealed again');
    return text.replace(SEALED_FIELD, (_field, sealed: string) => `"qr_payload":"sealed:${box.reseal(sealed, SEALED_PURPOSE)}"`);
  }

  /** The stored text as the event was written: each sealed `qr_payload` opened. */
  open(text: string): string {
    if (!text.includes('"qr_payload":"sealed:')) return text;
    const box = this.box;
    invariant(box !== null, 'a stored qr_payload needs the secret box to be read');
    return text.replace(SEALED_FIELD, (_field, sealed: string) => `"qr_payload":${JSON.stringify(box.open(sealed, SEALED_PURPOSE))}`);
  }
}
