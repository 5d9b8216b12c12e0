import crypto from 'node:crypto';
import { assertEventEnvelope, type PaymentEvent } from './events.js';
import type { WebhookSigningKey } from './resources.js';

/**
 * Webhook verification (spec, Authentication, "Webhooks sent to the merchant"), over the raw request
 * bytes, before anything is parsed:
 *
 *  1. `X-PG-Signature: v1,kid=<kid>,t=<unix seconds>,s=<base64url, no padding>` is read as name=value
 *     pairs, never by position; a repeated name, a missing one or an oversized header is refused.
 *  2. `t` must be within 300 seconds of the receiver's clock.
 *  3. The key named by `kid` comes from GET /v1/webhooks/signing-keys, cached at most 24 hours; an
 *     unknown `kid` refetches the list once, at most once every 10 seconds and one fetch at a time, so
 *     forged kids cannot make the receiver hammer the service.
 *  4. Ed25519 over the UTF-8 text `v1.<t>.<X-PG-Event-Id>.` followed directly by the body bytes. The
 *     signature must decode to exactly 64 bytes first; the comparison is the Ed25519 verification itself.
 *  5. Only then is the body parsed: its `id` must equal X-PG-Event-Id, and its `livemode` the receiver's
 *     environment.
 * Any failure is a `WebhookVerificationError` with a stable `reason`; answer it with 400 (the delivery
 * counts as failed and is retried), never with 2xx.
 */

export const SIGNATURE_TOLERANCE_SECONDS = 300;
export const KEY_CACHE_MAX_AGE_MS = 24 * 60 * 60 * 1000;
export const UNKNOWN_KID_REFETCH_INTERVAL_MS = 10 * 1000;
/** The signature header is about 130 characters; anything far longer is not ours. */
const MAX_SIGNATURE_HEADER_LENGTH = 1024;
const MAX_EVENT_ID_LENGTH = 255;
const ED25519_SIGNATURE_BYTES = 64;

export type WebhookFailureReason =
  | 'signature_missing'
  | 'signature_malformed'
  | 'timestamp_out_of_window'
  | 'unknown_kid'
  | 'signature_invalid'
  | 'malformed_json'
  | 'malformed_event'
  | 'event_id_mismatch'
  | 'livemode_mismatch';

export class WebhookVerificationError extends Error {
  readonly reason: WebhookFailureReason;
  constructor(reason: WebhookFailureReason, message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}

export interface ParsedSignatureHeader {
  kid: string;
  t: number;
  s: string;
}

/** `v1,kid=…,t=…,s=…` read as name=value pairs; null when malformed, repeated or oversized. */
export function parseSignatureHeader(header: string): ParsedSignatureHeader | null {
  if (header.length === 0 || header.length > MAX_SIGNATURE_HEADER_LENGTH) return null;
  const parts = header.split(',').map((part) => part.trim());
  if (!parts.includes('v1')) return null;
  const values = new Map<string, string>();
  for (const part of parts) {
    if (part === 'v1') continue;
    const index = part.indexOf('=');
    if (index <= 0) return null;
    const name = part.slice(0, index);
    // Which of two values was signed? A repeated name is refused rather than guessed.
    if (values.has(name)) return null;
    values.set(name, part.slice(index + 1));
  }
  const kid = values.get('kid');
  const t = values.get('t');
  const s = values.get('s');
  if (!kid || !t || !s || !/^[0-9]{1,12}$/.test(t) || !/^[A-Za-z0-9_-]+$/.test(s)) return null;
  return { kid, t: Number(t), s };
}

/** The bytes that are signed: `v1.<t>.<event_id>.` then the raw body. */
export function signedPayload(t: number, event_id: string, body: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from(`v1.${t}.${event_id}.`, 'utf8'), body]);
}

export type FetchSigningKeys = () => Promise<WebhookSigningKey[]>;

/** GET {base_url}/v1/webhooks/signing-keys with the global fetch (no credentials: the list is public). */
export function signingKeysFrom(base_url: string, options: { timeout_ms?: number; fetch?: typeof fetch } = {}): FetchSigningKeys {
  const url = `${base_url.replace(/\/+$/, '')}/v1/webhooks/signing-keys`;
  const fetchFunction = options.fetch ?? fetch;
  return async () => {
    const response = await fetchFunction(url, { redirect: 'error', signal: AbortSignal.timeout(options.timeout_ms ?? 10_000), headers: { accept: 'application/json' } });
    if (!response.ok) throw new Error(`the signing keys answered HTTP ${response.status}`);
    const body = (await response.json()) as { keys?: unknown };
    if (!Array.isArray(body.keys)) throw new Error('the signing keys answer has no keys');
    return body.keys as WebhookSigningKey[];
  };
}

interface CachedKey {
  key: crypto.KeyObject;
  not_after_ms: number | null;
}

/** The public signing keys: cached at most 24 hours, refetched once (throttled) on an unknown kid. */
export class SigningKeyCache {
  private keys = new Map<string, CachedKey>();
  private fetched_at_ms: number | null = null;
  private last_unknown_refetch_ms: number | null = null;
  private inFlight: Promise<void> | null = null;
  /** How many times the list was fetched (for logs and tests). */
  fetches = 0;

  constructor(
    private readonly fetchKeys: FetchSigningKeys,
    private readonly now_ms: () => number = Date.now,
  ) {}

  /** The key named `kid`, or null when the service does not list it (even after one throttled refetch). */
  async key(kid: string): Promise<crypto.KeyObject | null> {
    const now = this.now_ms();
    if (this.fetched_at_ms === null || now - this.fetched_at_ms >= KEY_CACHE_MAX_AGE_MS || now < this.fetched_at_ms) await this.refresh();
    const known = this.usable(kid, now);
    if (known) return known;
    if (this.last_unknown_refetch_ms !== null && now - this.last_unknown_refetch_ms < UNKNOWN_KID_REFETCH_INTERVAL_MS && now >= this.last_unknown_refetch_ms) return null;
    this.last_unknown_refetch_ms = now;
    await this.refresh();
    return this.usable(kid, now);
  }

  /** A listed key past its `not_after` is no longer trusted, even from a cache younger than a day. */
  private usable(kid: string, now: number): crypto.KeyObject | null {
    const cached = this.keys.get(kid);
    if (!cached) return null;
    if (cached.not_after_ms !== null && now > cached.not_after_ms + SIGNATURE_TOLERANCE_SECONDS * 1000) return null;
    return cached.key;
  }

  private refresh(): Promise<void> {
    // Concurrent verifications share one fetch.
    this.inFlight ??= (async () => {
      try {
        const listed = await this.fetchKeys();
        const keys = new Map<string, CachedKey>();
        for (const entry of listed) {
          if (entry.alg !== 'Ed25519' || entry.format !== 'spki_der_base64' || typeof entry.kid !== 'string') continue;
          const not_after_ms = entry.not_after === null ? null : Date.parse(entry.not_after);
          keys.set(entry.kid, {
            key: crypto.createPublicKey({ key: Buffer.from(entry.public_key, 'base64'), format: 'der', type: 'spki' }),
            not_after_ms: not_after_ms === null || Number.isNaN(not_after_ms) ? null : not_after_ms,
          });
        }
        this.keys = keys;
        this.fetched_at_ms = this.now_ms();
        this.fetches += 1;
      } finally {
        this.inFlight = null;
      }
    })();
    return this.inFlight;
  }
}

export interface WebhookVerifierOptions {
  /** The environment this receiver serves: false for the sandbox. Events of the other are refused. */
  livemode: boolean;
  /** The keys: a cache (share one per process), or where to fetch them (a cache is made). */
  keys: SigningKeyCache | FetchSigningKeys;
  /** The receiver's clock in milliseconds; Date.now by default. */
  now_ms?: () => number;
}

/** Header lookup over Node's IncomingHttpHeaders, a fetch Headers, or a plain record. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function headerOf(headers: HeaderSource, name: string): string | null {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name);
  const record = headers as Record<string, string | string[] | undefined>;
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  return typeof value === 'string' ? value : null;
}

export class WebhookVerifier {
  readonly keys: SigningKeyCache;
  private readonly now_ms: () => number;

  constructor(private readonly options: WebhookVerifierOptions) {
    this.now_ms = options.now_ms ?? Date.now;
    this.keys = options.keys instanceof SigningKeyCache ? options.keys : new SigningKeyCache(options.keys, this.now_ms);
  }

  /**
   * Verifies one delivery from its raw body bytes and headers and returns the event. Throws
   * WebhookVerificationError on any failure. Pass the bytes exactly as received: a body that was
   * parsed and serialised again no longer verifies.
   */
  async verify(raw_body: Uint8Array, headers: HeaderSource): Promise<PaymentEvent> {
    const header = headerOf(headers, 'x-pg-signature');
    const event_id = headerOf(headers, 'x-pg-event-id');
    if (header === null || event_id === null) throw new WebhookVerificationError('signature_missing', 'X-PG-Signature and X-PG-Event-Id are required');
    if (event_id.length === 0 || event_id.length > MAX_EVENT_ID_LENGTH) throw new WebhookVerificationError('signature_malformed', 'X-PG-Event-Id is empty or too long');
    const signature = parseSignatureHeader(header);
    if (!signature) throw new WebhookVerificationError('signature_malformed', 'X-PG-Signature is not v1,kid=…,t=…,s=…');
    const now_seconds = Math.floor(this.now_ms() / 1000);
    if (Math.abs(now_seconds - signature.t) > SIGNATURE_TOLERANCE_SECONDS) {
      throw new WebhookVerificationError('timestamp_out_of_window', `t is more than ${SIGNATURE_TOLERANCE_SECONDS} seconds from this receiver's clock`);
    }
    const bytes = Buffer.from(signature.s, 'base64url');
    // Length first: a well-formed Ed25519 signature is exactly 64 bytes, whatever the text looked like.
    if (bytes.length !== ED25519_SIGNATURE_BYTES || bytes.toString('base64url') !== signature.s) {
      throw new WebhookVerificationError('signature_malformed', 'the signature is not 64 bytes of unpadded base64url');
    }
    const key = await this.keys.key(signature.kid);
    if (!key) throw new WebhookVerificationError('unknown_kid', 'no published signing key has this kid');
    if (!crypto.verify(null, signedPayload(signature.t, event_id, raw_body), key, bytes)) {
      throw new WebhookVerificationError('signature_invalid', 'the signature does not match the body');
    }
    return this.parse(raw_body, event_id);
  }

  /** Parses verified bytes and checks what the signature cannot: the id and the environment. */
  private parse(raw_body: Uint8Array, event_id: string): PaymentEvent {
    let decoded: unknown;
    try {
      decoded = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(raw_body));
    } catch {
      throw new WebhookVerificationError('malformed_json', 'the body is not UTF-8 JSON');
    }
    try {
      assertEventEnvelope(decoded);
    } catch (error) {
      throw new WebhookVerificationError('malformed_event', error instanceof Error ? error.message : 'not an event');
    }
    if (decoded.id !== event_id) throw new WebhookVerificationError('event_id_mismatch', 'the body id is not X-PG-Event-Id');
    if (decoded.livemode !== this.options.livemode) throw new WebhookVerificationError('livemode_mismatch', 'the event belongs to the other environment');
    return decoded;
  }
}
