import crypto from 'node:crypto';
import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { Actor, BackofficeRole } from '../platform/access.ts';
import { invariant } from '../platform/assert.ts';
import { constantTimeEqual, randomToken, sha256Hex } from '../platform/crypto.ts';
import { newId } from '../platform/ids.ts';
import { formatTimestamp } from '../platform/time.ts';
import type { TenancyService } from '../tenancy/service.ts';
import * as repository from './sessions-repository.ts';

/**
 * Who is signed in to the back-office console, and how they got there (docs/decisions/backoffice-console.md).
 *
 * A session acts as one back-office credential on one brand: the console's decisions are that credential's
 * decisions, made through the same service methods as the /v1/bo routes, so the audit log, four eyes (which
 * compares the credential's person) and the brand scoping are the API's own. The credential and both brands are
 * read on every page (TenancyService.activeCredentialForSession), so revoking the credential ends its sessions
 * at once, without a list of sessions to find.
 *
 * How a session starts is the only thing that differs between sign-in methods: `startSession` is the one door,
 * called today by the one-time link of `npm run cli -- bo login` and, in the next slice, by an OpenID Connect
 * sign-in that has mapped its subject to a credential.
 *
 * Tokens: the link's token (`bol_…`) and the session cookie's value (`bok_…`) are 256 random bits, kept as
 * SHA-256 digests only. The CSRF token is an HMAC of the session id under a key derived from the master key, so
 * it needs no storage, differs per session and cannot be made without the key.
 */

export const SIGN_IN_LINK_LIFETIME_MS = 10 * 60 * 1000;
export const SESSION_IDLE_LIMIT_MS = 30 * 60 * 1000;
/**
 * A page moves the idle limit on only when the last move is at least this old: a write and its commit on every page
 * a reviewer opens would be most of a page's cost, and the idle limit needs no finer grain than a minute (a session
 * ends between 29 and 30 idle minutes).
 */
export const SESSION_TOUCH_INTERVAL_MS = 60 * 1000;
export const SESSION_ABSOLUTE_LIMIT_MS = 12 * 60 * 60 * 1000;
export const SESSION_COOKIE = 'pg_bo_session';
export const CONSOLE_PATH = '/bo';

const LINK_TOKEN_PATTERN = /^bol_[A-Za-z0-9_-]{43}$/;
const SESSION_TOKEN_PATTERN = /^bok_[A-Za-z0-9_-]{43}$/;
const CSRF_KEY_PURPOSE = 'backoffice-console.csrf.v1';

/** A signed-in person, as every console page reads them. */
export interface ConsoleSession {
  session_id: string;
  white_label_id: string;
  credential_id: string;
  staff_id: string;
  staff_name: string;
  role: BackofficeRole;
  csrf_token: string;
  created_at: Date;
  expires_at: Date;
}

export interface ConsoleSessionDependencies {
  database: Database;
  clock: Clock;
  tenancy: Pick<TenancyService, 'activeCredentialForSession' | 'audit'>;
  /** The root of derived keys (src/platform/derivation-key.ts): a rotation of MASTER_KEY leaves CSRF tokens valid. */
  derivation_key: Buffer;
  /** The console's origin: BACKOFFICE_BASE_URL, else the service's own. */
  origin: () => string;
}

export class ConsoleSessions {
  private readonly csrfKey: Buffer;

  constructor(private readonly deps: ConsoleSessionDependencies) {
    invariant(deps.derivation_key.length === 32, 'the derivation key is 32 bytes');
    this.csrfKey = crypto.createHmac('sha256', deps.derivation_key).update(CSRF_KEY_PURPOSE).digest();
  }

  /** True when the console is served over https, so that its cookie is Secure. */
  secure(): boolean {
    return new URL(this.deps.origin()).protocol === 'https:';
  }

  /**
   * A one-time sign-in link for a credential on a brand: single use, ten minutes. The caller has checked that the
   * actor may hand out this credential (the route does, with the API's roles); the link is in the audit log.
   */
  async issueSignInLink(actor: Actor, target: { white_label_id: string; credential_id: string }): Promise<{ url: string; expires_at: string }> {
    const token = `bol_${randomToken(32)}`;
    const now = this.deps.clock.now();
    const expires_at = new Date(now.getTime() + SIGN_IN_LINK_LIFETIME_MS);
    await this.deps.database.transaction(async (tx) => {
      await repository.insertSignInLink(tx, {
        token_hash: sha256Hex(token),
        white_label_id: target.white_label_id,
        credential_id: target.credential_id,
        issued_by: actor.actor_id,
        created_at: now,
        expires_at,
        used_at: null,
      });
      await this.deps.tenancy.audit(tx, actor, target.white_label_id, 'console.sign_in_link_issued', 'backoffice_credential', target.credential_id, {
        expires_at: formatTimestamp(expires_at),
      });
    });
    return { url: `${this.deps.origin()}${CONSOLE_PATH}/sign-in/${token}`, expires_at: formatTimestamp(expires_at) };
  }

  /**
   * Uses a sign-in link: answers the new session and its cookie value, or null when the link is unknown, used or
   * expired, or its credential can no longer sign in (all the same to the person holding it).
   */
  async signInWithLink(token: string, request_id: string): Promise<{ session: ConsoleSession; cookie_value: string } | null> {
    if (!LINK_TOKEN_PATTERN.test(token)) return null;
    return this.deps.database.transaction(async (tx) => {
      const link = await repository.useSignInLink(tx, sha256Hex(token), this.deps.clock.now());
      if (!link) return null;
      return this.startSession(tx, { white_label_id: link.white_label_id, credential_id: link.credential_id, method: 'link', request_id });
    });
  }

  /**
   * Starts a session for a credential on a brand, in the caller's transaction, with its audit row: the one door of
   * every sign-in method. Null when the credential may not sign in (not active, or either brand not active).
   */
  async startSession(
    tx: Queryable,
    input: { white_label_id: string; credential_id: string; method: repository.SignInMethod; request_id: string },
  ): Promise<{ session: ConsoleSession; cookie_value: string } | null> {
    const credential = await this.deps.tenancy.activeCredentialForSession(tx, input.credential_id, input.white_label_id);
    if (!credential) return null;
    const cookie_value = `bok_${randomToken(32)}`;
    const now = this.deps.clock.now();
    const row: repository.SessionRow = {
      session_id: newId('console_session'),
      token_hash: sha256Hex(cookie_value),
      white_label_id: input.white_label_id,
      credential_id: input.credential_id,
      sign_in_method: input.method,
      created_at: now,
      last_seen_at: now,
      expires_at: new Date(now.getTime() + SESSION_ABSOLUTE_LIMIT_MS),
      ended_at: null,
      ended_reason: null,
    };
    await repository.insertSession(tx, row);
    await this.deps.tenancy.audit(tx, this.actorOf(row.credential_id, input.request_id), row.white_label_id, 'console.signed_in', 'console_session', row.session_id, {
      method: input.method,
      staff_id: credential.staff_id,
      role: credential.role,
    });
    return { session: this.sessionOf(row, credential), cookie_value };
  }

  /**
   * The live session of a cookie value, or null. A session past its idle or absolute limit, or whose credential
   * or brand is no longer active, is ended here (with its reason) and answers null. `touch` moves the idle limit
   * on: true for what a person asks for, false for the queue's polling, which would otherwise keep an unattended
   * screen signed in for ever.
   */
  async open(cookie_values: readonly string[], touch: boolean): Promise<ConsoleSession | null> {
    const value = cookie_values.find((candidate) => SESSION_TOKEN_PATTERN.test(candidate));
    if (value === undefined) return null;
    const row = await repository.findSessionByTokenHash(this.deps.database, sha256Hex(value));
    if (!row || row.ended_at !== null) return null;
    const now = this.deps.clock.now();
    const ending = this.endReason(row, now);
    if (ending) {
      await repository.endSession(this.deps.database, row.session_id, now, ending);
      return null;
    }
    const credential = await this.deps.tenancy.activeCredentialForSession(this.deps.database, row.credential_id, row.white_label_id);
    if (!credential) {
      await repository.endSession(this.deps.database, row.session_id, now, 'credential_inactive');
      return null;
    }
    if (touch && now.getTime() - row.last_seen_at.getTime() >= SESSION_TOUCH_INTERVAL_MS) await repository.touchSession(this.deps.database, row.session_id, now);
    return this.sessionOf(row, credential);
  }

  /** Signs out: the session ends at once, with its audit row. */
  async signOut(session: ConsoleSession, request_id: string): Promise<void> {
    await this.deps.database.transaction(async (tx) => {
      const ended = await repository.endSession(tx, session.session_id, this.deps.clock.now(), 'signed_out');
      if (!ended) return;
      await this.deps.tenancy.audit(tx, this.actorOf(session.credential_id, request_id), session.white_label_id, 'console.signed_out', 'console_session', session.session_id);
    });
  }

  /** True when the presented CSRF token is this session's. */
  verifyCsrf(session: ConsoleSession, presented: unknown): boolean {
    return typeof presented === 'string' && constantTimeEqual(session.csrf_token, presented);
  }

  /** Removes links and sessions that ended more than a day ago (housekeeping). */
  purgeExpired(limit: number): Promise<number> {
    return repository.purgeExpired(this.deps.database, new Date(this.deps.clock.now().getTime() - 24 * 60 * 60 * 1000), limit);
  }

  /** The actor of what a session does: its credential, as an API request with the same credential would be. */
  actorOf(credential_id: string, request_id: string): Actor {
    return { actor_type: 'backoffice_credential', actor_id: credential_id, request_id };
  }

  private endReason(row: repository.SessionRow, now: Date): repository.SessionEndReason | null {
    if (now.getTime() >= row.expires_at.getTime()) return 'expired';
    if (now.getTime() - row.last_seen_at.getTime() >= SESSION_IDLE_LIMIT_MS) return 'idle';
    return null;
  }

  private sessionOf(row: repository.SessionRow, credential: { role: BackofficeRole; staff_id: string; staff_name: string }): ConsoleSession {
    return {
      session_id: row.session_id,
      white_label_id: row.white_label_id,
      credential_id: row.credential_id,
      staff_id: credential.staff_id,
      staff_name: credential.staff_name,
      role: credential.role,
      csrf_token: crypto.createHmac('sha256', this.csrfKey).update(row.session_id).digest('base64url'),
      created_at: row.created_at,
      expires_at: row.expires_at,
    };
  }
}
