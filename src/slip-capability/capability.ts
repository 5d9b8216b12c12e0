import crypto from 'node:crypto';
import { invariant } from '../platform/assert.ts';
import { hmacSha256Hex } from '../platform/crypto.ts';
import { formatTimestamp } from '../platform/time.ts';
import { SUPPORTED_API_VERSIONS } from '../platform/cause.ts';

/**
 * The slip upload capability (spec, slip_upload): a compact JWS signed with Ed25519 (`alg` EdDSA),
 * audience `pg-slip-ingest`, scope `slip:write`, bound to the brand, livemode, deposit id, the full
 * upload URL (`htu`), a `rate_subject`, the API version and the reservation's `hold_until`. Minting
 * and verification are side by side so that every binding the minter writes is one the verifier checks.
 *
 * The signing key is derived from the master key (HMAC-SHA256 over a fixed purpose string gives the
 * 32-byte Ed25519 seed), so every process signs and verifies alike with nothing more stored; rotating
 * the master key rotates it. The token is a bearer secret: it is returned in the create and slip-token
 * responses only, never in GET, events, logs or a URL.
 */

export const SLIP_TOKEN_AUDIENCE = 'pg-slip-ingest';
export const SLIP_TOKEN_SCOPE = 'slip:write';
export const SLIP_MAX_BYTES = 4_194_304;
export const SLIP_CONTENT_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'application/json'] as const;
/** Tokens longer than this are refused before any parsing or signature work. */
export const SLIP_TOKEN_MAX_LENGTH = 4096;
/**
 * How long a capability outlives the late-slip window: an upload in this week answers 410
 * `late_slip_window_closed` with a `claim_url`, and that claim is opened with the same capability.
 * Without it an upload after the window would only learn that its token expired.
 */
export const SLIP_CLAIM_PERIOD_MS = 7 * 24 * 60 * 60 * 1000;

/** The upload address of an order: `slip_upload.upload_url` and the token's `htu`. */
export function slipUploadUrl(upload_base_url: string, deposit_id: string): string {
  return `${upload_base_url}/v1/pay/deposits/${deposit_id}/slip`;
}

/** Where a late slip opens a claim (`details.claim_url` of a 410): the order's upload address's sibling. */
export function claimUrl(upload_base_url: string, deposit_id: string): string {
  return `${upload_base_url}/v1/pay/deposits/${deposit_id}/claims`;
}

const SEED_PURPOSE = 'deposits.slip_token.ed25519.v1';
const RATE_SUBJECT_PURPOSE = 'deposits.slip_token.rate_subject.v1';
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface SlipTokenClaims {
  iss: 'pg';
  aud: typeof SLIP_TOKEN_AUDIENCE;
  scope: typeof SLIP_TOKEN_SCOPE;
  /** Brand. */
  wl: string;
  livemode: boolean;
  /** Deposit id. */
  dep: string;
  /** The exact upload URL the token is valid for. */
  htu: string;
  rate_subject: string;
  api_version: string;
  /** Until when the destination is reserved (unix seconds). */
  hold_until: number;
  iat: number;
  exp: number;
  jti: string;
}

export type SlipTokenFailure =
  | 'malformed'
  | 'unknown_key'
  | 'bad_signature'
  | 'wrong_audience'
  | 'wrong_scope'
  | 'expired'
  | 'not_yet_valid'
  | 'wrong_url'
  | 'wrong_deposit'
  | 'wrong_issuer'
  | 'wrong_version';

export interface SlipUpload {
  token: string;
  expires_at: string;
  upload_url: string;
  max_bytes: number;
  content_types: string[];
}

function base64url(buffer: Buffer): string {
  return buffer.toString('base64url');
}

export class SlipTokenSigner {
  /** Longer bearer tokens are refused before any work (the HTTP layer's capability port). */
  readonly max_token_length = SLIP_TOKEN_MAX_LENGTH;
  private readonly privateKey: crypto.KeyObject;
  private readonly publicKey: crypto.KeyObject;
  private readonly rateSubjectKey: Buffer;
  readonly kid: string;

  constructor(master_key: Buffer) {
    invariant(master_key.length === 32, 'the master key is 32 bytes');
    const seed = Buffer.from(hmacSha256Hex(master_key, SEED_PURPOSE), 'hex');
    this.rateSubjectKey = Buffer.from(hmacSha256Hex(master_key, RATE_SUBJECT_PURPOSE), 'hex');
    this.privateKey = crypto.createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' });
    this.publicKey = crypto.createPublicKey(this.privateKey);
    const raw = this.publicKey.export({ format: 'der', type: 'spki' }).subarray(-32);
    this.kid = `slip_${crypto.createHash('sha256').update(raw).digest('hex').slice(0, 16)}`;
  }

  /** The end user's rate identity for slip uploads: opaque, stable per merchant and user, reveals neither. */
  rateSubject(merchant_id: string, end_user_ref: string): string {
    return `rs_${hmacSha256Hex(this.rateSubjectKey, `${merchant_id}:${end_user_ref}`).slice(0, 32)}`;
  }

  mint(claims: Omit<SlipTokenClaims, 'iss' | 'aud' | 'scope' | 'jti'>): string {
    invariant(claims.exp > claims.iat, 'a token expires after it is issued');
    const header = { alg: 'EdDSA', typ: 'pg-slip+jwt', kid: this.kid };
    const payload: SlipTokenClaims = { iss: 'pg', aud: SLIP_TOKEN_AUDIENCE, scope: SLIP_TOKEN_SCOPE, ...claims, jti: crypto.randomBytes(16).toString('base64url') };
    const signingInput = `${base64url(Buffer.from(JSON.stringify(header)))}.${base64url(Buffer.from(JSON.stringify(payload)))}`;
    const signature = crypto.sign(null, Buffer.from(signingInput), this.privateKey);
    return `${signingInput}.${base64url(signature)}`;
  }

  /**
   * Verifies a token for an upload to `url` (the request's full URL) at `now`. The length and shape
   * are checked before any signature work; the signature before any claim is trusted.
   */
  verify(token: string, expected: { url: string; deposit_id: string; now: Date }): { ok: true; claims: SlipTokenClaims } | { ok: false; reason: SlipTokenFailure } {
    if (token.length === 0 || token.length > SLIP_TOKEN_MAX_LENGTH) return { ok: false, reason: 'malformed' };
    const parts = token.split('.');
    if (parts.length !== 3 || parts.some((part) => !/^[A-Za-z0-9_-]+$/.test(part))) return { ok: false, reason: 'malformed' };
    // Only the canonical encoding: base64url leaves unused low bits in a part's last character, and a
    // variant that decodes to the same bytes would make one token readable as several strings.
    if (parts.some((part) => Buffer.from(part, 'base64url').toString('base64url') !== part)) return { ok: false, reason: 'malformed' };
    const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
    let header: { alg?: unknown; kid?: unknown };
    let claims: SlipTokenClaims;
    try {
      header = JSON.parse(Buffer.from(headerPart, 'base64url').toString('utf8')) as { alg?: unknown; kid?: unknown };
      claims = JSON.parse(Buffer.from(payloadPart, 'base64url').toString('utf8')) as SlipTokenClaims;
    } catch {
      return { ok: false, reason: 'malformed' };
    }
    if (header.alg !== 'EdDSA') return { ok: false, reason: 'malformed' };
    if (header.kid !== this.kid) return { ok: false, reason: 'unknown_key' };
    const signature = Buffer.from(signaturePart, 'base64url');
    if (signature.length !== 64) return { ok: false, reason: 'bad_signature' };
    if (!crypto.verify(null, Buffer.from(`${headerPart}.${payloadPart}`), this.publicKey, signature)) return { ok: false, reason: 'bad_signature' };
    if (claims.iss !== 'pg') return { ok: false, reason: 'wrong_issuer' };
    if (claims.aud !== SLIP_TOKEN_AUDIENCE) return { ok: false, reason: 'wrong_audience' };
    // Every binding has its type, so that the caller compares like with like (brand, environment, reservation).
    if (typeof claims.wl !== 'string' || typeof claims.livemode !== 'boolean' || typeof claims.rate_subject !== 'string' || !Number.isSafeInteger(claims.hold_until)) {
      return { ok: false, reason: 'malformed' };
    }
    if (typeof claims.api_version !== 'string' || !SUPPORTED_API_VERSIONS.includes(claims.api_version)) return { ok: false, reason: 'wrong_version' };
    if (claims.scope !== SLIP_TOKEN_SCOPE) return { ok: false, reason: 'wrong_scope' };
    const nowSeconds = Math.floor(expected.now.getTime() / 1000);
    if (typeof claims.exp !== 'number' || nowSeconds >= claims.exp) return { ok: false, reason: 'expired' };
    if (typeof claims.iat !== 'number' || claims.iat > nowSeconds + 300) return { ok: false, reason: 'not_yet_valid' };
    if (claims.htu !== expected.url) return { ok: false, reason: 'wrong_url' };
    if (claims.dep !== expected.deposit_id) return { ok: false, reason: 'wrong_deposit' };
    return { ok: true, claims };
  }
}

/** The `slip_upload` object of a create or slip-token response. */
export function slipUploadOf(token: string, claims: Pick<SlipTokenClaims, 'exp' | 'htu'>): SlipUpload {
  return {
    token,
    expires_at: formatTimestamp(new Date(claims.exp * 1000)),
    upload_url: claims.htu,
    max_bytes: SLIP_MAX_BYTES,
    content_types: [...SLIP_CONTENT_TYPES],
  };
}
