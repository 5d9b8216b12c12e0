import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { ApiError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { randomToken, sha256Hex, type SecretBox } from '../platform/crypto.ts';
import { formatTimestamp } from '../platform/time.ts';
import * as repository from './repository.ts';
import { type AccountStatus, type ApiKeyRow, type BackofficeCredentialRow, type BrandRow, type KeyStatus, type MerchantRow, type StaffIdentityRow } from './types.ts';
import { API_KEY_SCOPES, type Actor, type ApiKeyScope, type BackofficeRole } from '../platform/access.ts';
import type { AdmissionRequest, BucketCount, CallerDirectory, RequestAdmission, ResolvedApiKey, ResolvedBackofficeCredential } from '../http/ports.ts';

/**
 * Tenancy: brands, merchants, integration keys and back-office credentials. Every administrative
 * change writes its audit row in the same transaction. Secrets are returned once, at creation, and
 * stored only as a hash (keys, tokens) or sealed under the master key (HMAC signing secrets, which
 * the service must be able to read back to verify signatures).
 */
export { AUDIT_SEARCH_MAX_ROWS, type AuditRow } from './repository.ts';

export const SIGNING_SECRET_PURPOSE = 'api_key.signing_secret';
const KEY_CACHE_LIMIT = 10_000;

export interface BrandView {
  object: 'brand';
  id: string;
  name: string;
  status: AccountStatus;
  /** Origin of the brand's hosted checkout pages; null: the deployment's default (CHECKOUT_BASE_URL). */
  checkout_base_url: string | null;
  created_at: string;
}

export interface MerchantView {
  object: 'merchant';
  id: string;
  white_label_id: string;
  name: string;
  status: AccountStatus;
  created_at: string;
}

export interface ApiKeyView {
  object: 'api_key';
  id: string;
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  key_last4: string;
  scopes: string[];
  status: KeyStatus;
  created_at: string;
  revoked_at: string | null;
}

export interface BackofficeCredentialView {
  object: 'backoffice_credential';
  id: string;
  white_label_id: string | null;
  name: string;
  role: BackofficeRole;
  status: KeyStatus;
  /** The person the credential was issued to: four eyes counts these, not credentials. */
  staff_id: string;
  created_at: string;
}

/** The immutable part of an API key that signature checks need; status is read per request. */
export function brandView(row: BrandRow): BrandView {
  return {
    object: 'brand',
    id: row.white_label_id,
    name: row.name,
    status: row.status,
    checkout_base_url: row.checkout_base_url ?? null,
    created_at: formatTimestamp(row.created_at),
  };
}

export function merchantView(row: MerchantRow): MerchantView {
  return {
    object: 'merchant',
    id: row.merchant_id,
    white_label_id: row.white_label_id,
    name: row.name,
    status: row.status,
    created_at: formatTimestamp(row.created_at),
  };
}

export function apiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    object: 'api_key',
    id: row.api_key_id,
    white_label_id: row.white_label_id,
    merchant_id: row.merchant_id,
    livemode: row.livemode,
    key_last4: row.key_last4,
    scopes: [...row.scopes],
    status: row.status,
    created_at: formatTimestamp(row.created_at),
    revoked_at: row.revoked_at ? formatTimestamp(row.revoked_at) : null,
  };
}

export function backofficeCredentialView(row: BackofficeCredentialRow): BackofficeCredentialView {
  return {
    object: 'backoffice_credential',
    id: row.credential_id,
    white_label_id: row.white_label_id,
    name: row.name,
    role: row.role,
    status: row.status,
    staff_id: row.staff_id,
    created_at: formatTimestamp(row.created_at),
  };
}

export class TenancyService implements CallerDirectory {
  private readonly keyCache = new Map<string, ResolvedApiKey>();

  constructor(
    private readonly database: Database,
    private readonly clock: Clock,
    private readonly secretBox: SecretBox,
  ) {}

  /** Writes one audit row in the caller's transaction (other modules' administrative changes too). */
  async audit(
    tx: Queryable,
    actor: Actor,
    white_label_id: string | null,
    action: string,
    target_type: string,
    target_id: string,
    details: Record<string, unknown> = {},
  ): Promise<void> {
    await repository.insertAudit(tx, {
      white_label_id,
      audit_id: newId('audit'),
      actor_type: actor.actor_type,
      actor_id: actor.actor_id,
      action,
      target_type,
      target_id,
      request_id: actor.request_id,
      details,
      created_at: this.clock.now(),
    });
  }

  async createBrand(actor: Actor, input: { name: string }): Promise<BrandView> {
    const now = this.clock.now();
    const row: BrandRow = { white_label_id: newId('brand'), name: input.name, status: 'active', checkout_base_url: null, created_at: now, updated_at: now };
    await this.database.transaction(async (tx) => {
      await repository.insertBrand(tx, row);
      await this.audit(tx, actor, row.white_label_id, 'brand.created', 'brand', row.white_label_id, { name: row.name });
    });
    return brandView(row);
  }

  async getBrand(white_label_id: string): Promise<BrandView | null> {
    const row = await repository.findBrand(this.database, white_label_id);
    return row ? brandView(row) : null;
  }

  async listBrands(): Promise<BrandView[]> {
    return (await repository.listBrands(this.database, 1000)).map(brandView);
  }

  async hasAnyBrand(): Promise<boolean> {
    return (await repository.countBrands(this.database)) > 0;
  }

  async setBrandStatus(actor: Actor, white_label_id: string, status: AccountStatus): Promise<BrandView> {
    const row = await this.database.transaction(async (tx) => {
      const updated = await repository.setBrandStatus(tx, white_label_id, status, this.clock.now());
      if (!updated) return null;
      await this.audit(tx, actor, white_label_id, status === 'suspended' ? 'brand.suspended' : 'brand.resumed', 'brand', white_label_id);
      return updated;
    });
    if (!row) throw new ApiError('resource_not_found');
    return brandView(row);
  }

  /**
   * Sets (or with null clears) the origin on which the brand's hosted checkout pages are served. The
   * caller has checked the value's shape (src/checkout/links.ts); the audit row records old and new.
   */
  async setBrandCheckoutBaseUrl(actor: Actor, white_label_id: string, checkout_base_url: string | null): Promise<BrandView> {
    const row = await this.database.transaction(async (tx) => {
      const before = await repository.findBrand(tx, white_label_id);
      if (!before) return null;
      const updated = await repository.setBrandCheckoutBaseUrl(tx, white_label_id, checkout_base_url, this.clock.now());
      if (!updated) return null;
      await this.audit(tx, actor, white_label_id, 'brand.checkout_base_url_set', 'brand', white_label_id, {
        from: before.checkout_base_url ?? null,
        to: checkout_base_url,
      });
      return updated;
    });
    if (!row) throw new ApiError('resource_not_found');
    return brandView(row);
  }

  /** The brand's checkout origin (null: the deployment default), read in the caller's transaction; null when no such brand. */
  async brandCheckoutBaseUrl(db: Queryable, white_label_id: string): Promise<{ checkout_base_url: string | null } | null> {
    return repository.findBrandCheckoutBaseUrl(db, white_label_id);
  }

  async createMerchant(actor: Actor, input: { white_label_id: string; name: string }): Promise<MerchantView> {
    const created = await this.database.transaction((tx) => this.createMerchantIn(tx, actor, input));
    if (!created) throw new ApiError('resource_not_found');
    return created;
  }

  /**
   * The merchants of a brand that the service runs itself (`system_owned`: the sandbox counterparty).
   * Back-office routes of other modules answer 404 for their orders, as tenancy's own lookups do.
   */
  serviceOwnedMerchantIds(db: Queryable, white_label_id: string): Promise<string[]> {
    return repository.listServiceOwnedMerchantIds(db, white_label_id);
  }

  /**
   * Creates a merchant with its audit row in the caller's transaction; null when the brand does not exist.
   * `system_owned` marks a merchant the service runs itself (the sandbox counterparty): no operator can
   * address it afterwards.
   */
  async createMerchantIn(tx: Queryable, actor: Actor, input: { white_label_id: string; name: string; system_owned?: boolean }): Promise<MerchantView | null> {
    const now = this.clock.now();
    const row: MerchantRow = {
      white_label_id: input.white_label_id,
      merchant_id: newId('merchant'),
      name: input.name,
      status: 'active',
      system_owned: input.system_owned ?? false,
      created_at: now,
      updated_at: now,
    };
    if (!(await repository.findBrand(tx, input.white_label_id))) return null;
    await repository.insertMerchant(tx, row);
    await this.audit(tx, actor, row.white_label_id, 'merchant.created', 'merchant', row.merchant_id, { name: row.name });
    return merchantView(row);
  }

  async getMerchant(merchant_id: string, white_label_id: string | null): Promise<MerchantView | null> {
    const row = await repository.findMerchant(this.database, merchant_id, white_label_id);
    return row ? merchantView(row) : null;
  }

  async listMerchants(white_label_id: string): Promise<MerchantView[]> {
    return (await repository.listMerchants(this.database, white_label_id, 1000)).map(merchantView);
  }

  /** A page of a brand's merchants, in creation order, after `starting_after` (the console's cursor). */
  async listMerchantsPage(white_label_id: string, starting_after: string | null, limit: number): Promise<{ data: MerchantView[]; has_more: boolean }> {
    const rows = await repository.listMerchantsAfter(this.database, white_label_id, starting_after, limit + 1);
    return { data: rows.slice(0, limit).map(merchantView), has_more: rows.length > limit };
  }

  async setMerchantStatus(actor: Actor, merchant_id: string, scope_white_label_id: string | null, status: AccountStatus): Promise<MerchantView> {
    const row = await this.database.transaction(async (tx) => {
      const merchant = await repository.findMerchant(tx, merchant_id, scope_white_label_id);
      if (!merchant) return null;
      const updated = await repository.setMerchantStatus(tx, merchant.white_label_id, merchant_id, status, this.clock.now());
      if (!updated) return null;
      await this.audit(tx, actor, merchant.white_label_id, status === 'suspended' ? 'merchant.suspended' : 'merchant.resumed', 'merchant', merchant_id);
      return updated;
    });
    if (!row) throw new ApiError('resource_not_found');
    return merchantView(row);
  }

  /** Creates a key; the API key and signing secret are in this answer and never again. */
  async createApiKey(
    actor: Actor,
    input: { merchant_id: string; scope_white_label_id: string | null; livemode: boolean; scopes?: readonly string[] },
  ): Promise<ApiKeyView & { api_key: string; signing_secret: string }> {
    const scopes = [...new Set(input.scopes ?? API_KEY_SCOPES)];
    for (const scope of scopes) {
      if (!(API_KEY_SCOPES as readonly string[]).includes(scope)) {
        throw new ApiError('validation_error', { details: { fields: [{ path: 'scopes', reason: 'unknown_scope' }] } });
      }
    }
    const environment = input.livemode ? 'live' : 'test';
    const apiKey = `sk_${environment}_${randomToken(32)}`;
    const signingSecret = `sig_${environment}_${randomToken(32)}`;
    const now = this.clock.now();
    const result = await this.database.transaction(async (tx) => {
      const merchant = await repository.findMerchant(tx, input.merchant_id, input.scope_white_label_id);
      if (!merchant) return null;
      const row: ApiKeyRow = {
        white_label_id: merchant.white_label_id,
        merchant_id: merchant.merchant_id,
        api_key_id: newId('api_key'),
        livemode: input.livemode,
        key_hash: sha256Hex(apiKey),
        key_last4: apiKey.slice(-4),
        signing_secret_sealed: this.secretBox.seal(signingSecret, SIGNING_SECRET_PURPOSE),
        scopes: scopes as ApiKeyScope[],
        status: 'active',
        created_at: now,
        updated_at: now,
        revoked_at: null,
      };
      await repository.insertApiKey(tx, row);
      await this.audit(tx, actor, row.white_label_id, 'api_key.created', 'api_key', row.api_key_id, {
        livemode: row.livemode,
        scopes: row.scopes,
      });
      return row;
    });
    if (!result) throw new ApiError('resource_not_found');
    return { ...apiKeyView(result), api_key: apiKey, signing_secret: signingSecret };
  }

  async listApiKeys(merchant_id: string, scope_white_label_id: string | null): Promise<ApiKeyView[]> {
    const merchant = await repository.findMerchant(this.database, merchant_id, scope_white_label_id);
    if (!merchant) throw new ApiError('resource_not_found');
    return (await repository.listApiKeys(this.database, merchant.white_label_id, merchant_id)).map(apiKeyView);
  }

  /** A page of a merchant's keys, without secrets, after `starting_after`; another brand's merchant is not found. */
  async listApiKeysPage(
    merchant_id: string,
    scope_white_label_id: string | null,
    starting_after: string | null,
    limit: number,
  ): Promise<{ data: ApiKeyView[]; has_more: boolean }> {
    const merchant = await repository.findMerchant(this.database, merchant_id, scope_white_label_id);
    if (!merchant) throw new ApiError('resource_not_found');
    const rows = await repository.listApiKeysAfter(this.database, merchant.white_label_id, merchant_id, starting_after, limit + 1);
    return { data: rows.slice(0, limit).map(apiKeyView), has_more: rows.length > limit };
  }

  /**
   * Revokes, suspends or resumes a key; the change applies to the next request. Revocation is final:
   * revoking again answers the key as it is, while suspending or resuming a revoked key is 409
   * `api_key_already_revoked` (an answer of 200 with `status: revoked` would read as success).
   */
  async setApiKeyStatus(actor: Actor, api_key_id: string, scope_white_label_id: string | null, status: KeyStatus): Promise<ApiKeyView> {
    const row = await this.database.transaction(async (tx) => {
      const key = await repository.findApiKey(tx, api_key_id, scope_white_label_id);
      if (!key) return { found: false as const };
      if (key.status === 'revoked') {
        if (status !== 'revoked') throw new ApiError('api_key_already_revoked', { details: { api_key_id } });
        return { found: true as const, row: key };
      }
      const updated = await repository.setApiKeyStatus(tx, key.white_label_id, api_key_id, status, this.clock.now());
      if (!updated) return { found: true as const, row: key };
      const action = status === 'revoked' ? 'api_key.revoked' : status === 'suspended' ? 'api_key.suspended' : 'api_key.resumed';
      await this.audit(tx, actor, key.white_label_id, action, 'api_key', api_key_id);
      return { found: true as const, row: updated };
    });
    if (!row.found) throw new ApiError('resource_not_found');
    return apiKeyView(row.row);
  }

  /**
   * Issues a credential to a person. `staff_id` names a person of the credential's brand who holds a
   * credential already (a second credential of the same person, or a replacement); without it the
   * credential is issued to a new person, named by the credential's name, created in the same
   * transaction with its own audit row. A person of another brand, or none, is `resource_not_found`
   * and nothing is written.
   */
  async createBackofficeCredential(
    actor: Actor,
    input: { white_label_id: string | null; role: BackofficeRole; name: string; staff_id?: string },
  ): Promise<BackofficeCredentialView & { token: string }> {
    const token = `bo_${randomToken(32)}`;
    const now = this.clock.now();
    const created = await this.database.transaction(async (tx) => {
      if (input.white_label_id && !(await repository.findBrand(tx, input.white_label_id))) return null;
      const staff = await this.staffToIssueTo(tx, actor, input, now);
      if (!staff) return null;
      const row: BackofficeCredentialRow = {
        white_label_id: input.white_label_id,
        credential_id: newId('backoffice_credential'),
        name: input.name,
        role: input.role,
        token_hash: sha256Hex(token),
        status: 'active',
        staff_id: staff.staff_id,
        created_at: now,
        updated_at: now,
      };
      await repository.insertBackofficeCredential(tx, row);
      await this.audit(tx, actor, row.white_label_id, 'backoffice_credential.created', 'backoffice_credential', row.credential_id, {
        role: row.role,
        staff_id: row.staff_id,
      });
      return row;
    });
    if (!created) throw new ApiError('resource_not_found');
    return { ...backofficeCredentialView(created), token };
  }

  /** The person a new credential is issued to: the one named (of the same brand), or a new one. */
  private async staffToIssueTo(
    tx: Queryable,
    actor: Actor,
    input: { white_label_id: string | null; name: string; staff_id?: string },
    now: Date,
  ): Promise<StaffIdentityRow | null> {
    if (input.staff_id !== undefined) return repository.findStaffIdentity(tx, input.staff_id, input.white_label_id);
    const staff: StaffIdentityRow = { white_label_id: input.white_label_id, staff_id: newId('staff_identity'), name: input.name, created_at: now };
    await repository.insertStaffIdentity(tx, staff);
    await this.audit(tx, actor, staff.white_label_id, 'staff_identity.created', 'staff_identity', staff.staff_id, { name: staff.name });
    return staff;
  }

  /**
   * The person behind a back-office credential of a brand (read in the caller's transaction), for rules
   * that compare people rather than credentials; null when the credential is not of that brand.
   */
  staffOfCredential(db: Queryable, white_label_id: string, credential_id: string): Promise<string | null> {
    return repository.findStaffOfCredential(db, white_label_id, credential_id);
  }

  /**
   * One page of a brand's audit log, newest first (the console's audit log page). `who` is an actor id as the
   * rows name it (a credential, `cli`, a system actor) or a person (`stf_…`), whose credentials it stands for.
   * The caller asks for one row more than its page to learn whether another follows.
   */
  async auditLog(db: Queryable, white_label_id: string, who: string | null, filters: Omit<repository.AuditSearchFilters, 'actor_ids'>): Promise<repository.AuditRow[]> {
    let actor_ids: string[] | null = null;
    if (who !== null) actor_ids = who.startsWith('stf_') ? await repository.credentialIdsOfStaff(db, white_label_id, who) : [who];
    if (actor_ids !== null && actor_ids.length === 0) return [];
    return repository.searchAudit(db, white_label_id, { ...filters, actor_ids });
  }

  /** Who holds each of these credentials of the brand (or of the platform): the person's id and name, by credential. */
  async credentialHolders(db: Queryable, white_label_id: string, credential_ids: readonly string[]): Promise<Map<string, { staff_id: string; name: string }>> {
    if (credential_ids.length === 0) return new Map();
    const rows = await repository.holdersOfCredentials(db, white_label_id, [...new Set(credential_ids)]);
    return new Map(rows.map((row) => [row.credential_id, { staff_id: row.staff_id, name: row.name }]));
  }

  /** The names of the brand's (or the platform's) people among these staff ids, for pages that show who decided. */
  async staffNames(db: Queryable, white_label_id: string, staff_ids: readonly string[]): Promise<Map<string, string>> {
    if (staff_ids.length === 0) return new Map();
    const rows = await repository.findStaffNames(db, white_label_id, [...new Set(staff_ids)]);
    return new Map(rows.map((row) => [row.staff_id, row.name]));
  }

  /**
   * A back-office credential as a console session acts with it on a brand (src/backoffice-console/): read on every
   * page, so that revoking or suspending the credential, or suspending either brand, ends the session at once.
   * Null when no such credential exists, when it is not active, when its brand or the brand acted on is not
   * active, or when a brand credential would act on another brand.
   */
  async activeCredentialForSession(
    db: Queryable,
    credential_id: string,
    acting_white_label_id: string,
  ): Promise<{ credential_id: string; role: BackofficeRole; staff_id: string; staff_name: string; white_label_id: string } | null> {
    const row = await repository.findSessionCredential(db, credential_id, acting_white_label_id);
    if (!row || row.status !== 'active' || row.acting_brand_status !== 'active') return null;
    if (row.white_label_id !== null && (row.white_label_id !== acting_white_label_id || row.credential_brand_status !== 'active')) return null;
    return { credential_id: row.credential_id, role: row.role, staff_id: row.staff_id, staff_name: row.staff_name, white_label_id: acting_white_label_id };
  }

  async setBackofficeCredentialStatus(
    actor: Actor,
    credential_id: string,
    scope_white_label_id: string | null,
    status: KeyStatus,
  ): Promise<BackofficeCredentialView> {
    const row = await this.database.transaction(async (tx) => {
      const updated = await repository.setBackofficeCredentialStatus(tx, credential_id, scope_white_label_id, status, this.clock.now());
      if (!updated) return null;
      await this.audit(tx, actor, updated.white_label_id, `backoffice_credential.${status}`, 'backoffice_credential', credential_id);
      return updated;
    });
    if (!row) throw new ApiError('resource_not_found');
    return backofficeCredentialView(row);
  }

  /**
   * Creates the sandbox brand, merchant, test key and the platform administrator credential when the
   * database has no brand yet; returns null when it already had one. One transaction, under an
   * advisory lock on PostgreSQL, so that two processes starting together create one sandbox.
   */
  async bootstrapSandbox(): Promise<{
    white_label_id: string;
    merchant_id: string;
    api_key: string;
    signing_secret: string;
    operator_token: string;
    operator_credential_id: string;
  } | null> {
    const actor: Actor = { actor_type: 'system', actor_id: 'first-start', request_id: null };
    const apiKey = `sk_test_${randomToken(32)}`;
    const signingSecret = `sig_test_${randomToken(32)}`;
    const operatorToken = `bo_${randomToken(32)}`;
    const now = this.clock.now();
    return this.database.transaction(async (tx) => {
      if (this.database.engine === 'postgres') await tx.query('SELECT pg_advisory_xact_lock(7413902002)');
      if ((await repository.countBrands(tx)) > 0) return null;
      const brand: BrandRow = { white_label_id: newId('brand'), name: 'Sandbox Brand', status: 'active', checkout_base_url: null, created_at: now, updated_at: now };
      const merchant: MerchantRow = {
        white_label_id: brand.white_label_id, merchant_id: newId('merchant'), name: 'Sandbox Merchant', status: 'active', system_owned: false,
        created_at: now, updated_at: now,
      };
      const key: ApiKeyRow = {
        white_label_id: brand.white_label_id, merchant_id: merchant.merchant_id, api_key_id: newId('api_key'), livemode: false,
        key_hash: sha256Hex(apiKey), key_last4: apiKey.slice(-4),
        signing_secret_sealed: this.secretBox.seal(signingSecret, SIGNING_SECRET_PURPOSE),
        scopes: [...API_KEY_SCOPES], status: 'active', created_at: now, updated_at: now, revoked_at: null,
      };
      // The platform administrator is a person of the platform staff (no brand), as every credential's holder is a person.
      const administrator: StaffIdentityRow = { white_label_id: null, staff_id: newId('staff_identity'), name: 'First-start platform administrator', created_at: now };
      const operator: BackofficeCredentialRow = {
        white_label_id: null, credential_id: newId('backoffice_credential'), name: administrator.name,
        role: 'platform_admin', token_hash: sha256Hex(operatorToken), status: 'active', staff_id: administrator.staff_id, created_at: now, updated_at: now,
      };
      await repository.insertBrand(tx, brand);
      await repository.insertMerchant(tx, merchant);
      await repository.insertApiKey(tx, key);
      await repository.insertStaffIdentity(tx, administrator);
      await repository.insertBackofficeCredential(tx, operator);
      await this.audit(tx, actor, brand.white_label_id, 'sandbox.bootstrapped', 'brand', brand.white_label_id, {
        merchant_id: merchant.merchant_id, api_key_id: key.api_key_id, credential_id: operator.credential_id, staff_id: administrator.staff_id,
      });
      return {
        white_label_id: brand.white_label_id,
        merchant_id: merchant.merchant_id,
        api_key: apiKey,
        signing_secret: signingSecret,
        operator_token: operatorToken,
        operator_credential_id: operator.credential_id,
      };
    });
  }

  /**
   * Finds the immutable facts of an API key by its text. Cached by hash in a bounded map: the
   * mapping from key text to key id and secret never changes, while status is read on every request.
   */
  async resolveApiKey(apiKey: string): Promise<ResolvedApiKey | null> {
    const keyHash = sha256Hex(apiKey);
    const cached = this.keyCache.get(keyHash);
    if (cached) return cached;
    const row = await repository.findApiKeyByHash(this.database, keyHash);
    if (!row) return null;
    const resolved: ResolvedApiKey = {
      white_label_id: row.white_label_id,
      merchant_id: row.merchant_id,
      api_key_id: row.api_key_id,
      livemode: row.livemode,
      scopes: new Set(row.scopes),
      signing_secret: this.secretBox.open(row.signing_secret_sealed, SIGNING_SECRET_PURPOSE),
    };
    if (this.keyCache.size >= KEY_CACHE_LIMIT) {
      const oldest = this.keyCache.keys().next().value;
      if (oldest !== undefined) this.keyCache.delete(oldest);
    }
    this.keyCache.set(keyHash, resolved);
    return resolved;
  }

  async resolveBackofficeToken(token: string): Promise<ResolvedBackofficeCredential | null> {
    const row = await repository.findBackofficeCredentialByHash(this.database, sha256Hex(token));
    if (!row) return null;
    return {
      credential_id: row.credential_id,
      white_label_id: row.white_label_id,
      role: row.role,
      status: row.status,
      brand_status: row.brand_status,
    };
  }

  admitSignedRequest(input: AdmissionRequest): Promise<RequestAdmission | null> {
    return repository.admitSignedRequest(this.database, input);
  }

  countInBucket(input: Parameters<typeof repository.countInBucket>[1]): Promise<BucketCount> {
    return repository.countInBucket(this.database, input);
  }

  purgeExpiredAccessState(now: Date, stale_window_before: Date, limit: number): Promise<number> {
    return repository.purgeExpiredAccessState(this.database, now, stale_window_before, limit);
  }
}
