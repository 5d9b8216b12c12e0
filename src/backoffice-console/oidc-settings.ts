import type { Actor } from '../platform/access.ts';
import type { Clock } from '../platform/clock.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { ApiError } from '../platform/errors.ts';
import { formatTimestamp } from '../platform/time.ts';
import type { TenancyService } from '../tenancy/service.ts';
import * as repository from './oidc-repository.ts';
import type { OidcProviderRow, OidcStaffRole, OidcStaffRow } from './oidc-repository.ts';
import { CONSOLE_PATH } from './sessions.ts';

/**
 * A brand's OpenID Connect provider for the console, and the staff list that maps the provider's subjects to
 * people and roles (docs/decisions/backoffice-console.md, "Signing in with a brand's OpenID provider").
 *
 * The client secret goes in and never comes out: it is sealed under the master key with the brand bound as
 * additional data, and a view says only that it is set. Each entry of the staff list holds a console credential
 * issued to its person for its role when the entry is saved (tenancy's own `createBackofficeCredential`, with its
 * audit rows); a sign-in acts as that credential. Changing an entry's role issues a new credential and revokes the
 * old one, and removing the entry revokes its credential, so the person's open sessions end at once.
 */

export const OIDC_CALLBACK_PATH = `${CONSOLE_PATH}/oidc/callback`;

/** The purpose a brand's client secret is sealed with; key rotation reseals with the same. */
export function clientSecretPurpose(white_label_id: string): string {
  return `console-oidc-client-secret:${white_label_id}`;
}

export interface OidcProviderView {
  object: 'console_oidc_provider';
  white_label_id: string;
  configured: boolean;
  issuer: string | null;
  client_id: string | null;
  client_secret_set: boolean;
  /** The redirect URI to register with the provider for this client. */
  redirect_uri: string;
  updated_at: string | null;
}

export interface OidcStaffEntryView {
  object: 'console_oidc_staff_entry';
  white_label_id: string;
  subject: string;
  role: OidcStaffRole;
  staff_id: string;
  credential_id: string;
  created_at: string;
  updated_at: string;
}

export interface OidcProviderInput {
  issuer: string;
  client_id: string;
  client_secret: string;
}

export interface OidcStaffInput {
  subject: string;
  role: OidcStaffRole;
  name?: string | undefined;
  staff_id?: string | undefined;
}

export interface ConsoleOidcSettingsDependencies {
  database: Database;
  clock: Clock;
  secretBox: SecretBox;
  tenancy: Pick<TenancyService, 'audit' | 'getBrand' | 'createBackofficeCredential' | 'setBackofficeCredentialStatus' | 'activeCredentialForSession'>;
  /** The console's origin, for the redirect URI. */
  origin: () => string;
}

function fieldRefused(path: string, reason: string, hint?: string): ApiError {
  return new ApiError('validation_error', { details: { fields: [{ path, reason, ...(hint ? { hint } : {}) }] } });
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * An issuer URL the console will talk to: https, or http on this machine's loopback (a provider run beside the
 * service, as the tests do). No query or fragment (OpenID Connect Discovery 1.0, section 2).
 */
export function issuerRefusal(issuer: string): ApiError | null {
  if (!URL.canParse(issuer)) return fieldRefused('issuer', 'invalid_url');
  const url = new URL(issuer);
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') return fieldRefused('issuer', 'invalid_url', 'no query, fragment or user information');
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return null;
  return fieldRefused('issuer', 'must_be_https');
}

/** True when the issuer is plain http on the loopback (openid-client refuses such requests unless told). */
export function isLoopbackHttp(issuer: string): boolean {
  return issuer.startsWith('http:');
}

function entryView(row: OidcStaffRow): OidcStaffEntryView {
  return {
    object: 'console_oidc_staff_entry',
    white_label_id: row.white_label_id,
    subject: row.subject,
    role: row.role,
    staff_id: row.staff_id,
    credential_id: row.credential_id,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
  };
}

export class ConsoleOidcSettings {
  constructor(private readonly deps: ConsoleOidcSettingsDependencies) {}

  private async requireBrand(white_label_id: string): Promise<void> {
    if (!(await this.deps.tenancy.getBrand(white_label_id))) throw new ApiError('resource_not_found');
  }

  private providerView(white_label_id: string, row: OidcProviderRow | null): OidcProviderView {
    return {
      object: 'console_oidc_provider',
      white_label_id,
      configured: row !== null,
      issuer: row?.issuer ?? null,
      client_id: row?.client_id ?? null,
      client_secret_set: row !== null,
      redirect_uri: `${this.deps.origin()}${OIDC_CALLBACK_PATH}`,
      updated_at: row ? formatTimestamp(row.updated_at) : null,
    };
  }

  async viewProvider(white_label_id: string): Promise<OidcProviderView> {
    await this.requireBrand(white_label_id);
    return this.providerView(white_label_id, await repository.findProvider(this.deps.database, white_label_id));
  }

  /** Sets or replaces the brand's provider. The audit row names the issuer and client id, never the secret. */
  async setProvider(actor: Actor, white_label_id: string, input: OidcProviderInput): Promise<OidcProviderView> {
    const refusal = issuerRefusal(input.issuer);
    if (refusal) throw refusal;
    await this.requireBrand(white_label_id);
    // Kept exactly as given: discovery requires the provider's metadata to name the very same issuer.
    const issuer = input.issuer;
    const row = await this.deps.database.transaction(async (tx) => {
      const before = await repository.findProvider(tx, white_label_id);
      const saved = await repository.upsertProvider(tx, {
        white_label_id,
        issuer,
        client_id: input.client_id,
        client_secret_sealed: this.deps.secretBox.seal(input.client_secret, clientSecretPurpose(white_label_id)),
        updated_at: this.deps.clock.now(),
      });
      await this.deps.tenancy.audit(tx, actor, white_label_id, before ? 'console_oidc.provider_replaced' : 'console_oidc.provider_set', 'brand', white_label_id, {
        issuer,
        client_id: input.client_id,
      });
      return saved;
    });
    return this.providerView(white_label_id, row);
  }

  async removeProvider(actor: Actor, white_label_id: string): Promise<OidcProviderView> {
    await this.requireBrand(white_label_id);
    await this.deps.database.transaction(async (tx) => {
      if (!(await repository.deleteProvider(tx, white_label_id))) throw new ApiError('resource_not_found');
      await this.deps.tenancy.audit(tx, actor, white_label_id, 'console_oidc.provider_removed', 'brand', white_label_id);
    });
    return this.providerView(white_label_id, null);
  }

  /** The brand's provider with its client secret opened, for a sign-in; null when the brand has none. */
  async providerForSignIn(white_label_id: string): Promise<{ issuer: string; client_id: string; client_secret: string } | null> {
    const row = await repository.findProvider(this.deps.database, white_label_id);
    if (!row) return null;
    return { issuer: row.issuer, client_id: row.client_id, client_secret: this.deps.secretBox.open(row.client_secret_sealed, clientSecretPurpose(white_label_id)) };
  }

  /** A page of the staff list in subject order; `after` is the last subject of the previous page. */
  async listStaff(white_label_id: string, after: string | null, limit: number): Promise<{ data: OidcStaffEntryView[]; last_subject: string | null; has_more: boolean }> {
    await this.requireBrand(white_label_id);
    const rows = await repository.listStaffEntries(this.deps.database, white_label_id, after, limit + 1);
    const page = rows.slice(0, limit);
    return { data: page.map(entryView), last_subject: page.at(-1)?.subject ?? null, has_more: rows.length > limit };
  }

  /**
   * Adds or changes an entry. The person is `staff_id` (a person of the brand), else the entry's person, else a
   * new person called `name`. A new credential is issued when the entry is new, its role or person changes, or
   * its credential can no longer sign in (revoked by hand); the one it replaces is revoked.
   */
  async setStaff(actor: Actor, white_label_id: string, input: OidcStaffInput): Promise<OidcStaffEntryView> {
    await this.requireBrand(white_label_id);
    const existing = await repository.findStaffEntry(this.deps.database, white_label_id, input.subject);
    const staff_id = input.staff_id ?? existing?.staff_id;
    if (staff_id === undefined && input.name === undefined) throw fieldRefused('name', 'required', 'a new person needs a name, or staff_id names one');
    const usable = existing ? await this.deps.tenancy.activeCredentialForSession(this.deps.database, existing.credential_id, white_label_id) : null;
    const keep = existing !== null && usable !== null && existing.role === input.role && existing.staff_id === staff_id;
    const credential_id = keep
      ? existing.credential_id
      : (await this.deps.tenancy.createBackofficeCredential(actor, { white_label_id, role: input.role, name: (input.name ?? `OpenID ${input.subject}`).slice(0, 200), staff_id })).id;
    const credential = await this.deps.tenancy.activeCredentialForSession(this.deps.database, credential_id, white_label_id);
    if (!credential) throw new ApiError('resource_not_found');
    const row = await this.deps.database.transaction(async (tx) => {
      const saved = await repository.upsertStaffEntry(tx, { white_label_id, subject: input.subject, role: input.role, staff_id: credential.staff_id, credential_id, updated_at: this.deps.clock.now() });
      await this.deps.tenancy.audit(tx, actor, white_label_id, existing ? 'console_oidc.staff_changed' : 'console_oidc.staff_added', 'staff_identity', saved.staff_id, {
        subject: saved.subject,
        role: saved.role,
        credential_id,
      });
      return saved;
    });
    if (existing && existing.credential_id !== credential_id) await this.revoke(actor, white_label_id, existing.credential_id);
    return entryView(row);
  }

  /** Removes an entry and revokes its credential: the person's sessions end at once. */
  async removeStaff(actor: Actor, white_label_id: string, subject: string): Promise<OidcStaffEntryView> {
    await this.requireBrand(white_label_id);
    const removed = await this.deps.database.transaction(async (tx) => {
      const row = await repository.deleteStaffEntry(tx, white_label_id, subject);
      if (!row) throw new ApiError('resource_not_found');
      await this.deps.tenancy.audit(tx, actor, white_label_id, 'console_oidc.staff_removed', 'staff_identity', row.staff_id, { subject, credential_id: row.credential_id });
      return row;
    });
    await this.revoke(actor, white_label_id, removed.credential_id);
    return entryView(removed);
  }

  /** The entry of a subject, read in the sign-in's transaction; null when the brand's list does not have it. */
  staffEntry(db: Queryable, white_label_id: string, subject: string): Promise<OidcStaffRow | null> {
    return repository.findStaffEntry(db, white_label_id, subject);
  }

  private async revoke(actor: Actor, white_label_id: string, credential_id: string): Promise<void> {
    try {
      await this.deps.tenancy.setBackofficeCredentialStatus(actor, credential_id, white_label_id, 'revoked');
    } catch (error) {
      // Revoked already (by hand): nothing is left to do.
      if (!(error instanceof ApiError) || error.code !== 'resource_not_found') throw error;
    }
  }
}
