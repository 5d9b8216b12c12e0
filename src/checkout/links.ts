import crypto from 'node:crypto';
import { invariant } from '../platform/assert.ts';
import { constantTimeEqual } from '../platform/crypto.ts';

/**
 * The secrets of the hosted checkout (docs/drafts/checkout.md, "The link and the session").
 *
 * `checkout_url` is `{origin}/checkout/{white_label_id}/{deposit_id}/{secret}`. The secret is an
 * HMAC-SHA256 of the brand and deposit ids under a key derived from the master key: the same on every
 * read of one order, different for every order, and impossible to compute from anything in the database
 * (deposit ids are in logs and webhooks; the key is not). Nothing is stored, so there is nothing to leak
 * from a table either.
 *
 * Opening the link exchanges the secret for a session cookie scoped to the order's checkout path and
 * redirects to the address without the secret. The cookie's value is a second HMAC, under another derived
 * key, over the order's full scope (brand, merchant, environment, deposit) and an expiry: a cookie cannot
 * be turned back into a link, carries its own end, and names the merchant and environment so that every
 * read the page makes is scoped by brand, merchant and livemode without looking the order up first.
 *
 * Every comparison is constant time with the lengths checked first, and every value's shape is checked
 * before any HMAC work.
 */

const LINK_KEY_PURPOSE = 'checkout.link_secret.v1';
const SESSION_KEY_PURPOSE = 'checkout.session.v1';
/** The link secret: a recognisable prefix (so that log scrubbing can find it) and 256 bits of HMAC. */
export const LINK_SECRET_PREFIX = 'cs_';
const LINK_SECRET_PATTERN = /^cs_[A-Za-z0-9_-]{43}$/;
/** The session cookie: one name; its Path (the order's checkout path) keeps two orders' cookies apart. */
export const SESSION_COOKIE = 'pg_checkout';
/** A session lasts a day from the opening of the link; opening the link again starts a new one. */
export const SESSION_LIFETIME_SECONDS = 24 * 60 * 60;
/**
 * The cookie as `session` writes it: the end in canonical decimal (no leading zero) and the MAC in unpadded
 * base64url of its exact length. The MAC covers the end's text, so a second spelling could only come from
 * the key's holder; it is refused anyway, so that every signed value of the service has one spelling.
 */
const SESSION_PATTERN = /^v1\.(mch_[0-9A-Za-z]{1,64})\.([tl])\.(0|[1-9][0-9]{0,11})\.([A-Za-z0-9_-]{43})$/;
const ID_PATTERNS = { white_label_id: /^wl_[0-9A-Za-z]{1,64}$/, deposit_id: /^dep_[0-9A-Za-z]{1,64}$/ } as const;

/** The order a checkout belongs to, in full scope. */
export interface CheckoutScope {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  deposit_id: string;
}

function derive(master_key: Buffer, purpose: string): Buffer {
  return crypto.createHmac('sha256', master_key).update(purpose).digest();
}

function mac(key: Buffer, parts: readonly string[]): string {
  return crypto.createHmac('sha256', key).update(parts.join('\n')).digest('base64url');
}

/** True when both ids have the shape of a brand id and a deposit id (anything else names no checkout). */
export function isCheckoutPath(white_label_id: string, deposit_id: string): boolean {
  return ID_PATTERNS.white_label_id.test(white_label_id) && ID_PATTERNS.deposit_id.test(deposit_id);
}

/** The path of an order's checkout page, which is also the Path of its session cookie. */
export function checkoutPath(white_label_id: string, deposit_id: string): string {
  invariant(isCheckoutPath(white_label_id, deposit_id), 'a checkout path is made of a brand id and a deposit id');
  return `/checkout/${white_label_id}/${deposit_id}`;
}

/**
 * A checkout origin: http(s), a host, no credentials, no path, query or fragment. https everywhere, and
 * plain http only for a loopback host (development and tests), since the page hands out a capability.
 * Returns the normalised origin, or null when the text is not one.
 */
export function checkoutOrigin(text: string): string | null {
  if (!URL.canParse(text)) return null;
  const url = new URL(text);
  if (url.username || url.password || url.search || url.hash || url.pathname !== '/') return null;
  if (url.protocol === 'https:') return url.origin;
  const loopback = url.hostname === 'localhost' || url.hostname === '127.0.0.1' || url.hostname === '[::1]';
  return url.protocol === 'http:' && loopback ? url.origin : null;
}

export class CheckoutLinks {
  private readonly linkKey: Buffer;
  private readonly sessionKey: Buffer;

  constructor(master_key: Buffer) {
    invariant(master_key.length === 32, 'the master key is 32 bytes');
    this.linkKey = derive(master_key, LINK_KEY_PURPOSE);
    this.sessionKey = derive(master_key, SESSION_KEY_PURPOSE);
  }

  /** The secret of one order's link (stable: the same ids always give the same secret). */
  secret(white_label_id: string, deposit_id: string): string {
    return `${LINK_SECRET_PREFIX}${mac(this.linkKey, ['link', white_label_id, deposit_id])}`;
  }

  /** The order's `checkout_url` on the given origin. */
  url(origin: string, white_label_id: string, deposit_id: string): string {
    return `${origin}${checkoutPath(white_label_id, deposit_id)}/${this.secret(white_label_id, deposit_id)}`;
  }

  /** True when `presented` is this order's link secret. */
  verifySecret(white_label_id: string, deposit_id: string, presented: string): boolean {
    if (!isCheckoutPath(white_label_id, deposit_id) || !LINK_SECRET_PATTERN.test(presented)) return false;
    return constantTimeEqual(this.secret(white_label_id, deposit_id), presented);
  }

  /** A session cookie value for the order, valid until `expires_at_seconds` (service clock). */
  session(scope: CheckoutScope, expires_at_seconds: number): string {
    invariant(Number.isSafeInteger(expires_at_seconds) && expires_at_seconds > 0, 'a session ends at a whole second');
    const mode = scope.livemode ? 'l' : 't';
    return `v1.${scope.merchant_id}.${mode}.${expires_at_seconds}.${mac(this.sessionKey, ['session', scope.white_label_id, scope.deposit_id, scope.merchant_id, mode, String(expires_at_seconds)])}`;
  }

  /**
   * The order a session cookie opens, when it is this service's for exactly this brand and deposit and
   * has not ended at `now`; null otherwise.
   */
  openSession(white_label_id: string, deposit_id: string, value: string, now: Date): CheckoutScope | null {
    if (!isCheckoutPath(white_label_id, deposit_id)) return null;
    const match = SESSION_PATTERN.exec(value);
    if (!match) return null;
    const [, merchant_id, mode, expires, presented] = match as unknown as [string, string, 't' | 'l', string, string];
    const expected = mac(this.sessionKey, ['session', white_label_id, deposit_id, merchant_id, mode, expires]);
    if (!constantTimeEqual(expected, presented)) return null;
    if (Number(expires) * 1000 <= now.getTime()) return null;
    return { white_label_id, merchant_id, livemode: mode === 'l', deposit_id };
  }
}

/** Every value of one cookie name in a Cookie header (a browser may send several with different paths). */
export function cookieValues(header: string | undefined, name: string): string[] {
  if (typeof header !== 'string' || header.length > 8192) return [];
  const values: string[] = [];
  for (const part of header.split(';')) {
    const index = part.indexOf('=');
    if (index === -1) continue;
    if (part.slice(0, index).trim() === name) values.push(part.slice(index + 1).trim());
  }
  return values;
}
