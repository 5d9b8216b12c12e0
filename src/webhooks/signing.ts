import crypto from 'node:crypto';

/**
 * The webhook signature scheme (spec, Authentication, "Webhooks sent to the merchant"): Ed25519 over
 * the UTF-8 text `v1.<t>.<event_id>.` followed directly by the raw body bytes, sent as
 * `X-PG-Signature: v1,kid=<kid>,t=<t>,s=<base64url signature without padding>`. Deliveries and the
 * offline test vectors (src/test-vectors) must produce identical bytes, so this file is the one
 * implementation; the tests check it against every published vector.
 */

export interface WebhookSignatureInput {
  private_key: crypto.KeyObject;
  kid: string;
  /** Unix seconds at signing time. */
  t: number;
  event_id: string;
  /** The exact bytes of the request body. */
  body: Buffer;
}

export interface WebhookSignature {
  /** base64url without padding. */
  signature: string;
  /** The X-PG-Signature header value. */
  header: string;
}

/** The bytes that are signed: `v1.<t>.<event_id>.` then the raw body. */
export function signedBytes(t: number, event_id: string, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`v1.${t}.${event_id}.`, 'utf8'), body]);
}

export function signWebhookPayload(input: WebhookSignatureInput): WebhookSignature {
  if (!Number.isSafeInteger(input.t) || input.t < 0) throw new Error('t must be non-negative unix seconds');
  // Node's base64url encoding never pads, which is what the spec asks for.
  const signature = crypto.sign(null, signedBytes(input.t, input.event_id, input.body), input.private_key).toString('base64url');
  return { signature, header: `v1,kid=${input.kid},t=${input.t},s=${signature}` };
}

/** A parsed X-PG-Signature header; null when it is malformed. Pairs are read by name, not position. */
export interface ParsedSignatureHeader {
  kid: string;
  t: number;
  s: string;
}

export function parseSignatureHeader(header: string): ParsedSignatureHeader | null {
  const parts = header.split(',').map((part) => part.trim());
  if (parts.length === 0 || !parts.includes('v1')) return null;
  const values = new Map<string, string>();
  for (const part of parts) {
    if (part === 'v1') continue;
    const index = part.indexOf('=');
    if (index <= 0) return null;
    const name = part.slice(0, index);
    // A repeated name is ambiguous (which one was signed?), so the whole header is refused.
    if (values.has(name)) return null;
    values.set(name, part.slice(index + 1));
  }
  const kid = values.get('kid');
  const tText = values.get('t');
  const s = values.get('s');
  if (!kid || !tText || !s || !/^[0-9]{1,12}$/.test(tText) || !/^[A-Za-z0-9_-]+$/.test(s)) return null;
  return { kid, t: Number(tText), s };
}

export interface GeneratedKeyPair {
  private_key_pkcs8_base64: string;
  public_key_spki_base64: string;
  raw_public_key_base64: string;
}

/** A fresh Ed25519 key pair, exported in the forms the key record and the sealed column need. */
export function generateSigningKeyPair(): GeneratedKeyPair {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ed25519');
  const spki = publicKey.export({ format: 'der', type: 'spki' });
  return {
    private_key_pkcs8_base64: privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'),
    public_key_spki_base64: spki.toString('base64'),
    raw_public_key_base64: rawPublicKeyOf(spki).toString('base64'),
  };
}

/** The 32 raw key bytes are the tail of Ed25519's 44-byte SPKI encoding. */
export function rawPublicKeyOf(spki: Buffer): Buffer {
  if (spki.length !== 44) throw new Error('an Ed25519 SPKI key is 44 bytes');
  return spki.subarray(spki.length - 32);
}

export function privateKeyFromPkcs8(base64: string): crypto.KeyObject {
  return crypto.createPrivateKey({ key: Buffer.from(base64, 'base64'), format: 'der', type: 'pkcs8' });
}
