import crypto from 'node:crypto';
import * as client from 'openid-client';
import type { Clock } from '../platform/clock.ts';
import type { Database } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import { invariant } from '../platform/assert.ts';
import type { TenancyService } from '../tenancy/service.ts';
import { isLoopbackHttp, OIDC_CALLBACK_PATH, type ConsoleOidcSettings } from './oidc-settings.ts';
import type { ConsoleSession, ConsoleSessions } from './sessions.ts';

/**
 * Signing in with a brand's OpenID Connect provider: authorization code with PKCE (S256), `state` and `nonce`,
 * through `openid-client` (docs/decisions/backoffice-console.md).
 *
 * Nothing of an attempt is stored on the server: its brand, state, nonce, code verifier, language and expiry
 * travel in a cookie (`pg_bo_oidc`, HttpOnly, Path=/bo/oidc, ten minutes) sealed with AES-256-GCM under a key
 * derived from the derivation root, so that it can be neither read nor made without the key. The callback opens
 * it, `openid-client` checks the state, exchanges the code with the verifier and validates the ID token (issuer,
 * audience, signature, expiry, nonce); then the subject is looked up in the brand's staff list and, when it is
 * there, `ConsoleSessions.startSession` starts a session of the entry's credential with `method: 'oidc'` and
 * writes the sign-in's audit row. A subject not on the list is refused, and that refusal is audited as well.
 */

export const OIDC_ATTEMPT_COOKIE = 'pg_bo_oidc';
export const OIDC_ATTEMPT_LIFETIME_MS = 10 * 60 * 1000;
const ATTEMPT_KEY_PURPOSE = 'backoffice-console.oidc-attempt.v1';
/** Seconds the provider has to answer discovery and the token request. */
const PROVIDER_TIMEOUT_SECONDS = 10;

interface Attempt {
  white_label_id: string;
  state: string;
  nonce: string;
  code_verifier: string;
  language: 'th' | 'en';
  expires_at: number;
}

export type OidcCompletion =
  | { outcome: 'signed_in'; session: ConsoleSession; cookie_value: string; language: 'th' | 'en' }
  /** The attempt cookie is missing, damaged or expired, or the provider's answer failed a check (state included). */
  | { outcome: 'refused'; language: 'th' | 'en' | null }
  /** The provider could not be reached, or the brand no longer has one. */
  | { outcome: 'provider_unavailable'; language: 'th' | 'en' }
  /** A valid ID token whose subject is not on the brand's list. */
  | { outcome: 'unmapped'; language: 'th' | 'en' }
  /** The subject is on the list but its credential cannot sign in (revoked by hand, or the brand suspended). */
  | { outcome: 'credential_inactive'; language: 'th' | 'en' };

export interface ConsoleOidcSignInDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  settings: ConsoleOidcSettings;
  sessions: ConsoleSessions;
  tenancy: Pick<TenancyService, 'audit'>;
  derivation_key: Buffer;
  origin: () => string;
}

export class ConsoleOidcSignIn {
  private readonly attemptKey: Buffer;

  constructor(private readonly deps: ConsoleOidcSignInDependencies) {
    invariant(deps.derivation_key.length === 32, 'the derivation key is 32 bytes');
    this.attemptKey = crypto.createHmac('sha256', deps.derivation_key).update(ATTEMPT_KEY_PURPOSE).digest();
  }

  /**
   * Starts a sign-in: the provider's authorization URL and the attempt cookie's value. `not_configured` when the
   * brand has no provider (or does not exist), `provider_unavailable` when discovery fails.
   */
  async begin(white_label_id: string, language: 'th' | 'en'): Promise<{ authorization_url: string; cookie_value: string } | 'not_configured' | 'provider_unavailable'> {
    const provider = await this.deps.settings.providerForSignIn(white_label_id);
    if (!provider) return 'not_configured';
    const configuration = await this.discover(provider);
    if (!configuration) return 'provider_unavailable';
    const attempt: Attempt = {
      white_label_id,
      state: client.randomState(),
      nonce: client.randomNonce(),
      code_verifier: client.randomPKCECodeVerifier(),
      language,
      expires_at: this.deps.clock.now().getTime() + OIDC_ATTEMPT_LIFETIME_MS,
    };
    const authorization_url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: this.redirectUri(),
      scope: 'openid',
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(attempt.code_verifier),
      code_challenge_method: 'S256',
      state: attempt.state,
      nonce: attempt.nonce,
      ui_locales: language,
    });
    return { authorization_url: authorization_url.href, cookie_value: this.sealAttempt(attempt) };
  }

  /** Completes a sign-in at the callback: `query` is the callback's query string as it came. */
  async complete(cookie_values: readonly string[], query: string, request_id: string): Promise<OidcCompletion> {
    const attempt = cookie_values.map((value) => this.openAttempt(value)).find((candidate) => candidate !== null) ?? null;
    if (!attempt) return { outcome: 'refused', language: null };
    const { language } = attempt;
    const provider = await this.deps.settings.providerForSignIn(attempt.white_label_id);
    const configuration = provider ? await this.discover(provider) : null;
    if (!configuration) return { outcome: 'provider_unavailable', language };
    const subject = await this.subjectOf(configuration, attempt, query);
    if (subject === null) return { outcome: 'refused', language };
    return this.deps.database.transaction(async (tx): Promise<OidcCompletion> => {
      const entry = await this.deps.settings.staffEntry(tx, attempt.white_label_id, subject);
      if (!entry) {
        const actor = { actor_type: 'system' as const, actor_id: 'console-oidc', request_id };
        await this.deps.tenancy.audit(tx, actor, attempt.white_label_id, 'console.oidc_sign_in_refused', 'brand', attempt.white_label_id, { subject, reason: 'subject_not_listed' });
        return { outcome: 'unmapped', language };
      }
      const started = await this.deps.sessions.startSession(tx, { white_label_id: attempt.white_label_id, credential_id: entry.credential_id, method: 'oidc', request_id });
      if (!started) return { outcome: 'credential_inactive', language };
      return { outcome: 'signed_in', session: started.session, cookie_value: started.cookie_value, language };
    });
  }

  /** The ID token's subject after every check `openid-client` makes, or null when one fails. */
  private async subjectOf(configuration: client.Configuration, attempt: Attempt, query: string): Promise<string | null> {
    try {
      const tokens = await client.authorizationCodeGrant(configuration, new URL(`${this.redirectUri()}${query}`), {
        pkceCodeVerifier: attempt.code_verifier,
        expectedState: attempt.state,
        expectedNonce: attempt.nonce,
        idTokenExpected: true,
      });
      const subject = tokens.claims()?.sub;
      return typeof subject === 'string' && subject.length >= 1 && subject.length <= 255 ? subject : null;
    } catch (error) {
      // The reason only (a code and a message from openid-client), never the query: it carries the code.
      const reason = error instanceof Error ? { name: error.name, code: (error as { code?: unknown }).code, message: error.message } : { name: 'unknown' };
      this.deps.logger.warn({ white_label_id: attempt.white_label_id, reason }, 'console OpenID sign-in refused');
      return null;
    }
  }

  private async discover(provider: { issuer: string; client_id: string; client_secret: string }): Promise<client.Configuration | null> {
    try {
      return await client.discovery(new URL(provider.issuer), provider.client_id, { redirect_uris: [this.redirectUri()] }, client.ClientSecretBasic(provider.client_secret), {
        timeout: PROVIDER_TIMEOUT_SECONDS,
        ...(isLoopbackHttp(provider.issuer) ? { execute: [client.allowInsecureRequests] } : {}),
      });
    } catch (error) {
      this.deps.logger.warn({ issuer: provider.issuer, reason: error instanceof Error ? error.message : 'unknown' }, 'console OpenID discovery failed');
      return null;
    }
  }

  private redirectUri(): string {
    return `${this.deps.origin()}${OIDC_CALLBACK_PATH}`;
  }

  private sealAttempt(attempt: Attempt): string {
    const iv = crypto.randomBytes(12);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.attemptKey, iv);
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify(attempt), 'utf8'), cipher.final()]);
    return [iv, cipher.getAuthTag(), ciphertext].map((part) => part.toString('base64url')).join('.');
  }

  /** The attempt a cookie value carries, or null when it is not one of ours, was altered, or has expired. */
  private openAttempt(value: string): Attempt | null {
    const parts = value.split('.');
    if (parts.length !== 3 || value.length > 2048) return null;
    try {
      const [iv, tag, ciphertext] = parts.map((part) => Buffer.from(part, 'base64url')) as [Buffer, Buffer, Buffer];
      const decipher = crypto.createDecipheriv('aes-256-gcm', this.attemptKey, iv);
      decipher.setAuthTag(tag);
      const attempt = JSON.parse(Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8')) as Attempt;
      return attempt.expires_at > this.deps.clock.now().getTime() ? attempt : null;
    } catch {
      // Altered, or sealed under another key: not an attempt of this service.
      return null;
    }
  }
}
