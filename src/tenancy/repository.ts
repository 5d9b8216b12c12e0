import { PLANNED_PER_CALL, type Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { appendParts } from '../platform/read-part.ts';
import type { AccountStatus, ApiKeyRow, BackofficeCredentialRow, BrandRow, KeyStatus, MerchantRow, StaffIdentityRow } from './types.ts';
import type { AdmissionRequest, RequestAdmission } from '../http/ports.ts';

/** The most further buckets, and the most carried reads, one admission statement takes. */
const MAXIMUM_ADMISSION_PARTS = 8;

/** All SQL of the tenancy module: brands, merchants, API keys, back-office credentials, nonces, rate counters. */

export async function insertBrand(db: Queryable, brand: BrandRow): Promise<void> {
  await db.query(
    `INSERT INTO brands (white_label_id, name, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)`,
    [brand.white_label_id, brand.name, brand.status, brand.created_at, brand.updated_at],
  );
}

export async function findBrand(db: Queryable, white_label_id: string): Promise<BrandRow | null> {
  const { rows } = await db.query<BrandRow>('SELECT * FROM brands WHERE white_label_id = $1', [white_label_id]);
  return rows[0] ?? null;
}

export async function listBrands(db: Queryable, limit: number): Promise<BrandRow[]> {
  const { rows } = await db.query<BrandRow>('SELECT * FROM brands ORDER BY created_at, white_label_id LIMIT $1', [limit]);
  return rows;
}

export async function countBrands(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ count: number }>('SELECT count(*)::int AS count FROM brands');
  return rows[0]?.count ?? 0;
}

export async function setBrandStatus(db: Queryable, white_label_id: string, status: AccountStatus, now: Date): Promise<BrandRow | null> {
  const { rows } = await db.query<BrandRow>(
    'UPDATE brands SET status = $2, updated_at = $3 WHERE white_label_id = $1 RETURNING *',
    [white_label_id, status, now],
  );
  return rows[0] ?? null;
}

export async function setBrandCheckoutBaseUrl(db: Queryable, white_label_id: string, checkout_base_url: string | null, now: Date): Promise<BrandRow | null> {
  const { rows } = await db.query<BrandRow>(
    'UPDATE brands SET checkout_base_url = $2, updated_at = $3 WHERE white_label_id = $1 RETURNING *',
    [white_label_id, checkout_base_url, now],
  );
  return rows[0] ?? null;
}

export async function findBrandCheckoutBaseUrl(db: Queryable, white_label_id: string): Promise<{ checkout_base_url: string | null } | null> {
  const { rows } = await db.query<{ checkout_base_url: string | null }>('SELECT checkout_base_url FROM brands WHERE white_label_id = $1', [white_label_id]);
  return rows[0] ?? null;
}

export async function insertMerchant(db: Queryable, merchant: MerchantRow): Promise<void> {
  await db.query(
    `INSERT INTO merchants (white_label_id, merchant_id, name, status, system_owned, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [merchant.white_label_id, merchant.merchant_id, merchant.name, merchant.status, merchant.system_owned, merchant.created_at, merchant.updated_at],
  );
}

/**
 * Finds a merchant that the back office may address; with a brand given, a merchant of another brand is
 * not found. The service's own merchants (`system_owned`) are never found here.
 */
export async function findMerchant(db: Queryable, merchant_id: string, white_label_id: string | null): Promise<MerchantRow | null> {
  const { rows } = await db.query<MerchantRow>(
    'SELECT * FROM merchants WHERE merchant_id = $1 AND ($2::text IS NULL OR white_label_id = $2) AND NOT system_owned',
    [merchant_id, white_label_id],
  );
  return rows[0] ?? null;
}

/** The ids of a brand's merchants that the service runs itself (at most the sandbox counterparty). */
export async function listServiceOwnedMerchantIds(db: Queryable, white_label_id: string): Promise<string[]> {
  const { rows } = await db.query<{ merchant_id: string }>('SELECT merchant_id FROM merchants WHERE white_label_id = $1 AND system_owned ORDER BY merchant_id LIMIT 10', [white_label_id]);
  return rows.map((row) => row.merchant_id);
}

export async function listMerchants(db: Queryable, white_label_id: string, limit: number): Promise<MerchantRow[]> {
  const { rows } = await db.query<MerchantRow>(
    'SELECT * FROM merchants WHERE white_label_id = $1 AND NOT system_owned ORDER BY created_at, merchant_id LIMIT $2',
    [white_label_id, limit],
  );
  return rows;
}

/** A page of a brand's merchants in id order (ids are ULIDs: creation order), after `starting_after`; the primary key serves it. */
export async function listMerchantsAfter(db: Queryable, white_label_id: string, starting_after: string | null, limit: number): Promise<MerchantRow[]> {
  const { rows } = await db.query<MerchantRow>(
    `SELECT * FROM merchants WHERE white_label_id = $1 AND NOT system_owned AND ($2::text IS NULL OR merchant_id > $2::text)
      ORDER BY merchant_id LIMIT $3`,
    [white_label_id, starting_after, limit],
  );
  return rows;
}

export async function setMerchantStatus(
  db: Queryable,
  white_label_id: string,
  merchant_id: string,
  status: AccountStatus,
  now: Date,
): Promise<MerchantRow | null> {
  const { rows } = await db.query<MerchantRow>(
    'UPDATE merchants SET status = $3, updated_at = $4 WHERE white_label_id = $1 AND merchant_id = $2 RETURNING *',
    [white_label_id, merchant_id, status, now],
  );
  return rows[0] ?? null;
}

export async function insertApiKey(db: Queryable, key: ApiKeyRow): Promise<void> {
  await db.query(
    `INSERT INTO api_keys (white_label_id, merchant_id, api_key_id, livemode, key_hash, key_last4, signing_secret_sealed,
       scopes, status, created_at, updated_at, revoked_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [
      key.white_label_id, key.merchant_id, key.api_key_id, key.livemode, key.key_hash, key.key_last4,
      key.signing_secret_sealed, key.scopes, key.status, key.created_at, key.updated_at, key.revoked_at,
    ],
  );
}

export async function findApiKeyByHash(db: Queryable, key_hash: string): Promise<ApiKeyRow | null> {
  const { rows } = await db.query<ApiKeyRow>('SELECT * FROM api_keys WHERE key_hash = $1', [key_hash]);
  return rows[0] ?? null;
}

export async function findApiKey(db: Queryable, api_key_id: string, white_label_id: string | null): Promise<ApiKeyRow | null> {
  const { rows } = await db.query<ApiKeyRow>(
    'SELECT * FROM api_keys WHERE api_key_id = $1 AND ($2::text IS NULL OR white_label_id = $2)',
    [api_key_id, white_label_id],
  );
  return rows[0] ?? null;
}

export async function listApiKeys(db: Queryable, white_label_id: string, merchant_id: string): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(
    'SELECT * FROM api_keys WHERE white_label_id = $1 AND merchant_id = $2 ORDER BY created_at, api_key_id LIMIT 1000',
    [white_label_id, merchant_id],
  );
  return rows;
}

/** A page of a merchant's keys in id order (ULIDs: creation order), after `starting_after`. */
export async function listApiKeysAfter(db: Queryable, white_label_id: string, merchant_id: string, starting_after: string | null, limit: number): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT * FROM api_keys WHERE white_label_id = $1 AND merchant_id = $2 AND ($3::text IS NULL OR api_key_id > $3::text)
      ORDER BY api_key_id LIMIT $4`,
    [white_label_id, merchant_id, starting_after, limit],
  );
  return rows;
}

/** Changes a key's status; a revoked key never changes again (the WHERE clause keeps revocation final). */
export async function setApiKeyStatus(
  db: Queryable,
  white_label_id: string,
  api_key_id: string,
  status: KeyStatus,
  now: Date,
): Promise<ApiKeyRow | null> {
  const { rows } = await db.query<ApiKeyRow>(
    `UPDATE api_keys SET status = $3::text, updated_at = $4::timestamptz,
       revoked_at = CASE WHEN $3::text = 'revoked' THEN $4::timestamptz ELSE NULL END
     WHERE white_label_id = $1 AND api_key_id = $2 AND status <> 'revoked'
     RETURNING *`,
    [white_label_id, api_key_id, status, now],
  );
  return rows[0] ?? null;
}

export async function insertBackofficeCredential(db: Queryable, credential: BackofficeCredentialRow): Promise<void> {
  await db.query(
    `INSERT INTO backoffice_credentials (white_label_id, credential_id, name, role, token_hash, status, staff_id, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      credential.white_label_id, credential.credential_id, credential.name, credential.role, credential.token_hash,
      credential.status, credential.staff_id, credential.created_at, credential.updated_at,
    ],
  );
}

export async function insertStaffIdentity(db: Queryable, staff: StaffIdentityRow): Promise<void> {
  await db.query('INSERT INTO staff_identities (white_label_id, staff_id, name, created_at) VALUES ($1, $2, $3, $4)', [
    staff.white_label_id,
    staff.staff_id,
    staff.name,
    staff.created_at,
  ]);
}

/**
 * A person of one brand (or, with a null brand, of the platform staff). A person of another brand, or a
 * platform person asked for with a brand, is not found: a credential is issued to a person of its own brand.
 */
export async function findStaffIdentity(db: Queryable, staff_id: string, white_label_id: string | null): Promise<StaffIdentityRow | null> {
  const { rows } = await db.query<StaffIdentityRow>(
    'SELECT white_label_id, staff_id, name, created_at FROM staff_identities WHERE staff_id = $1 AND white_label_id IS NOT DISTINCT FROM $2::text',
    [staff_id, white_label_id],
  );
  return rows[0] ?? null;
}

/** The person behind a credential of a brand; null when the credential is not of that brand. */
export async function findStaffOfCredential(db: Queryable, white_label_id: string, credential_id: string): Promise<string | null> {
  const { rows } = await db.query<{ staff_id: string }>('SELECT staff_id FROM backoffice_credentials WHERE white_label_id = $1 AND credential_id = $2', [
    white_label_id,
    credential_id,
  ]);
  return rows[0]?.staff_id ?? null;
}

export interface BackofficeCredentialWithBrand extends BackofficeCredentialRow {
  brand_status: AccountStatus | null;
}

export async function findBackofficeCredentialByHash(db: Queryable, token_hash: string): Promise<BackofficeCredentialWithBrand | null> {
  const { rows } = await db.query<BackofficeCredentialWithBrand>(
    `SELECT c.*, b.status AS brand_status
       FROM backoffice_credentials c LEFT JOIN brands b ON b.white_label_id = c.white_label_id
      WHERE c.token_hash = $1`,
    [token_hash],
  );
  return rows[0] ?? null;
}

/** The names of the people with these staff ids, of the brand or of the platform staff. */
export async function findStaffNames(db: Queryable, white_label_id: string, staff_ids: readonly string[]): Promise<{ staff_id: string; name: string }[]> {
  const { rows } = await db.query<{ staff_id: string; name: string }>(
    'SELECT staff_id, name FROM staff_identities WHERE staff_id = ANY($2::text[]) AND (white_label_id = $1 OR white_label_id IS NULL)',
    [white_label_id, [...staff_ids]],
  );
  return rows;
}

/** A credential as a console session acts with it: its person's name, and the status of its brand and of the brand acted on. */
export interface SessionCredentialRow {
  credential_id: string;
  white_label_id: string | null;
  role: BackofficeCredentialRow['role'];
  status: KeyStatus;
  staff_id: string;
  staff_name: string;
  credential_brand_status: AccountStatus | null;
  acting_brand_status: AccountStatus | null;
}

export async function findSessionCredential(db: Queryable, credential_id: string, acting_white_label_id: string): Promise<SessionCredentialRow | null> {
  const { rows } = await db.query<SessionCredentialRow>(
    `SELECT c.credential_id, c.white_label_id, c.role, c.status, c.staff_id, s.name AS staff_name,
            cb.status AS credential_brand_status, ab.status AS acting_brand_status
       FROM backoffice_credentials c
       JOIN staff_identities s ON s.staff_id = c.staff_id
       LEFT JOIN brands cb ON cb.white_label_id = c.white_label_id
       LEFT JOIN brands ab ON ab.white_label_id = $2
      WHERE c.credential_id = $1`,
    [credential_id, acting_white_label_id],
  );
  return rows[0] ?? null;
}

export async function setBackofficeCredentialStatus(
  db: Queryable,
  credential_id: string,
  white_label_id: string | null,
  status: KeyStatus,
  now: Date,
): Promise<BackofficeCredentialRow | null> {
  const { rows } = await db.query<BackofficeCredentialRow>(
    `UPDATE backoffice_credentials SET status = $3, updated_at = $4
      WHERE credential_id = $1 AND ($2::text IS NULL OR white_label_id = $2) AND status <> 'revoked'
      RETURNING *`,
    [credential_id, white_label_id, status, now],
  );
  return rows[0] ?? null;
}

export interface AuditRow {
  white_label_id: string | null;
  audit_id: string;
  actor_type: string;
  actor_id: string;
  action: string;
  target_type: string;
  target_id: string;
  request_id: string | null;
  details: Record<string, unknown>;
  created_at: Date;
}

export async function insertAudit(db: Queryable, row: AuditRow): Promise<void> {
  await db.query(
    `INSERT INTO audit_log (white_label_id, audit_id, actor_type, actor_id, action, target_type, target_id, request_id, details, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      row.white_label_id, row.audit_id, row.actor_type, row.actor_id, row.action, row.target_type, row.target_id,
      row.request_id, JSON.stringify(row.details), row.created_at,
    ],
  );
}

/**
 * The key's backoff (src/http/rate-limit.ts, KEY_BACKOFF) as a counter row of its own (bucket $12, the key id as
 * subject): `window_started_at` is when the backoff started and `request_count` the requests since then. The row
 * is written only by a request of a key already in backoff (`held`), or whose key bucket's count passed $13; a
 * backoff over ($14 is the earliest start still running) or one sent more than $15 requests starts again now.
 * Housekeeping deletes the row with the stale rate counters.
 */
const BACKOFF_UPSERT = `INSERT INTO rate_limit_counters AS c (white_label_id, bucket, subject, window_started_at, request_count)
       SELECT $1, $12, $3, $6, 0 FROM counter WHERE counter.request_count > $13 OR EXISTS (SELECT 1 FROM held)
       ON CONFLICT (white_label_id, bucket, subject) DO UPDATE SET
         request_count = CASE WHEN c.window_started_at <= $14 OR c.request_count >= $15 THEN 0 ELSE c.request_count + 1 END,
         window_started_at = CASE WHEN c.window_started_at <= $14 OR c.request_count >= $15 THEN EXCLUDED.window_started_at ELSE c.window_started_at END
       RETURNING window_started_at`;

/**
 * The hot path of every signed request, in one statement and one round trip: records the nonce
 * (reusable only after its 10-minute expiry), counts the request in its fixed-window rate bucket, and
 * reads the current status of the key, merchant and brand so that a revocation or suspension applies
 * to the very next request. Data-modifying CTEs all run even when the outer SELECT does not read them.
 *
 * The same statement counts the request's further buckets (an end user's, a merchant's), but only for a
 * request that is admitted: fresh nonce, key chain active, scope granted and the key's own bucket not
 * exceeded, exactly as when they were counted after it; and it carries other modules' reads that every
 * request needs (the sandbox's attached test clock).
 */
export async function admitSignedRequest(
  db: Queryable,
  input: AdmissionRequest,
): Promise<RequestAdmission | null> {
  invariant(input.extra_buckets.length <= MAXIMUM_ADMISSION_PARTS && input.attachments.length <= MAXIMUM_ADMISSION_PARTS, 'an admission carries a few buckets and reads');
  const params: unknown[] = [
    input.white_label_id, input.merchant_id, input.api_key_id, input.nonce, input.nonce_expires_at, input.now,
    input.bucket, input.subject, input.window_started_at, input.key_limit, input.scope_granted,
    input.backoff.bucket, input.backoff.start_above_count, new Date(input.now.getTime() - input.backoff.seconds * 1000), input.backoff.tolerated,
  ];
  const extras = input.extra_buckets.map((extra, index) => {
    params.push(extra.bucket, extra.subject, extra.window_started_at);
    const [bucket, subject, window] = [params.length - 2, params.length - 1, params.length];
    return `, extra${index} AS (
       INSERT INTO rate_limit_counters AS c (white_label_id, bucket, subject, window_started_at, request_count)
       SELECT $1, $${bucket}, $${subject}, $${window}, 1 FROM admitted
       ON CONFLICT (white_label_id, bucket, subject) DO UPDATE SET
         request_count = CASE WHEN c.window_started_at = EXCLUDED.window_started_at THEN c.request_count + 1 ELSE 1 END,
         window_started_at = EXCLUDED.window_started_at
       RETURNING request_count, window_started_at
     )`;
  });
  const extraColumns = input.extra_buckets.map(
    (_, index) => `, (SELECT json_build_object('request_count', request_count, 'window_started_at', window_started_at) FROM extra${index}) AS extra${index}`,
  );
  const attachmentColumns = appendParts(input.attachments, params).map((sql, index) => `, ${sql} AS attachment${index}`);
  const { rows } = await db.query<Omit<RequestAdmission, 'extra_counts' | 'attachments'> & Record<string, unknown>>(
    `WITH nonce AS (
       INSERT INTO request_nonces AS n (white_label_id, api_key_id, nonce, expires_at)
       VALUES ($1, $3, $4, $5)
       ON CONFLICT (white_label_id, api_key_id, nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at
         WHERE n.expires_at <= $6
       RETURNING 1
     ), counter AS (
       INSERT INTO rate_limit_counters AS c (white_label_id, bucket, subject, window_started_at, request_count)
       VALUES ($1, $7, $8, $9, 1)
       ON CONFLICT (white_label_id, bucket, subject) DO UPDATE SET
         request_count = CASE WHEN c.window_started_at = EXCLUDED.window_started_at THEN c.request_count + 1 ELSE 1 END,
         window_started_at = EXCLUDED.window_started_at
       RETURNING request_count, window_started_at
     ), chain AS (
       SELECT k.status AS key_status, m.status AS merchant_status, b.status AS brand_status
         FROM api_keys k
         JOIN merchants m ON m.white_label_id = k.white_label_id AND m.merchant_id = k.merchant_id
         JOIN brands b ON b.white_label_id = k.white_label_id
        WHERE k.white_label_id = $1 AND k.merchant_id = $2 AND k.api_key_id = $3
     ), held AS (
       SELECT 1 FROM rate_limit_counters
        WHERE white_label_id = $1 AND bucket = $12 AND subject = $3 AND window_started_at > $14
     ), backoff AS (
       ${BACKOFF_UPSERT}
     ), admitted AS (
       SELECT 1 FROM chain, counter
        WHERE chain.key_status = 'active' AND chain.merchant_status = 'active' AND chain.brand_status = 'active'
          AND EXISTS (SELECT 1 FROM nonce) AND counter.request_count <= $10 AND $11::boolean AND NOT EXISTS (SELECT 1 FROM held)
     )${extras.join('')}
     SELECT chain.key_status, chain.merchant_status, chain.brand_status,
            EXISTS (SELECT 1 FROM nonce) AS nonce_fresh, counter.request_count, counter.window_started_at,
            (SELECT window_started_at FROM backoff) AS backoff_started_at${extraColumns.join('')}${attachmentColumns.join('')}
       FROM chain CROSS JOIN counter`,
    params,
  );
  const row = rows[0];
  if (!row) return null;
  return {
    key_status: row.key_status,
    merchant_status: row.merchant_status,
    brand_status: row.brand_status,
    nonce_fresh: row.nonce_fresh,
    request_count: row.request_count,
    window_started_at: row.window_started_at,
    backoff_started_at: row.backoff_started_at === null ? null : new Date(row.backoff_started_at as Date | string),
    extra_counts: input.extra_buckets.map((_, index) => {
      const counted = row[`extra${index}`] as { request_count: number; window_started_at: string } | null;
      return counted ? { request_count: Number(counted.request_count), window_started_at: new Date(counted.window_started_at) } : null;
    }),
    attachments: input.attachments.map((part, index) => part.parse(row[`attachment${index}`] ?? null)),
  };
}

/** Counts one request in a fixed-window bucket and returns the count in the current window. */
export async function countInBucket(
  db: Queryable,
  input: { white_label_id: string; bucket: string; subject: string; window_started_at: Date },
): Promise<{ request_count: number; window_started_at: Date }> {
  const { rows } = await db.query<{ request_count: number; window_started_at: Date }>(
    `INSERT INTO rate_limit_counters AS c (white_label_id, bucket, subject, window_started_at, request_count)
     VALUES ($1, $2, $3, $4, 1)
     ON CONFLICT (white_label_id, bucket, subject) DO UPDATE SET
       request_count = CASE WHEN c.window_started_at = EXCLUDED.window_started_at THEN c.request_count + 1 ELSE 1 END,
       window_started_at = EXCLUDED.window_started_at
     RETURNING request_count, window_started_at`,
    [input.white_label_id, input.bucket, input.subject, input.window_started_at],
  );
  const row = rows[0];
  if (!row) throw new Error('rate counter upsert returned no row');
  return row;
}

/** Housekeeping: expired nonces and counters of windows long past. Bounded per call. */
export async function purgeExpiredAccessState(db: Queryable, now: Date, stale_window_before: Date, limit: number): Promise<number> {
  const nonces = await db.query(
    `DELETE FROM request_nonces WHERE ctid IN (SELECT ctid FROM request_nonces WHERE expires_at <= $1 LIMIT $2)`,
    [now, limit],
  );
  const counters = await db.query(
    `DELETE FROM rate_limit_counters WHERE ctid IN (SELECT ctid FROM rate_limit_counters WHERE window_started_at < $1 LIMIT $2)`,
    [stale_window_before, limit],
  );
  return nonces.rowCount + counters.rowCount;
}

/** The filters of the audit log page (`searchAudit`); null leaves a filter out. */
export interface AuditSearchFilters {
  /** The acting credentials (or system actors) named by who; at most `AUDIT_SEARCH_MAX_ACTORS`. */
  actor_ids: readonly string[] | null;
  action: string | null;
  target_type: string | null;
  target_id: string | null;
  /** Inclusive lower bound on `created_at`. */
  created_from: Date | null;
  /** Exclusive upper bound on `created_at`. */
  created_to: Date | null;
  /** The (created_at, audit_id) of the last row of the previous page; pages run newest first. */
  after: { created_at: Date; audit_id: string } | null;
  /** Rows to read: a page and one more. */
  limit: number;
}

export const AUDIT_SEARCH_MAX_ROWS = 101;
export const AUDIT_SEARCH_MAX_ACTORS = 100;

/**
 * One page of a brand's audit rows, newest first. Only the filters that are set are named, and the statement is
 * planned per call, so that each shape takes the index of migration 0046 that leads with its filter (actor,
 * action, target type and id; audit_log_target for an id alone; the brand's time index otherwise).
 */
export async function searchAudit(db: Queryable, white_label_id: string, filters: AuditSearchFilters): Promise<AuditRow[]> {
  invariant(Number.isSafeInteger(filters.limit) && filters.limit >= 1 && filters.limit <= AUDIT_SEARCH_MAX_ROWS, 'an audit page is bounded');
  invariant(filters.actor_ids === null || filters.actor_ids.length <= AUDIT_SEARCH_MAX_ACTORS, 'who names a bounded set of actors');
  const params: unknown[] = [white_label_id];
  const conditions = ['white_label_id = $1'];
  const add = (condition: (position: number) => string, value: unknown) => {
    params.push(value);
    conditions.push(condition(params.length));
  };
  if (filters.actor_ids !== null) add((at) => `actor_id = ANY($${at}::text[])`, [...filters.actor_ids]);
  if (filters.action !== null) add((at) => `action = $${at}::text`, filters.action);
  if (filters.target_type !== null) add((at) => `target_type = $${at}::text`, filters.target_type);
  if (filters.target_id !== null) add((at) => `target_id = $${at}::text`, filters.target_id);
  if (filters.created_from !== null) add((at) => `created_at >= $${at}::timestamptz`, filters.created_from);
  if (filters.created_to !== null) add((at) => `created_at < $${at}::timestamptz`, filters.created_to);
  if (filters.after !== null) {
    params.push(filters.after.created_at, filters.after.audit_id);
    conditions.push(`(created_at, audit_id) < ($${params.length - 1}::timestamptz, $${params.length}::text)`);
  }
  params.push(filters.limit);
  const { rows } = await db.query<AuditRow>(
    `${PLANNED_PER_CALL} SELECT white_label_id, audit_id, actor_type, actor_id, action, target_type, target_id, request_id, details, created_at
       FROM audit_log WHERE ${conditions.join(' AND ')}
      ORDER BY created_at DESC, audit_id DESC LIMIT $${params.length}`,
    params,
  );
  return rows;
}

/** The credentials issued to a person of the brand (or a platform person), at most `AUDIT_SEARCH_MAX_ACTORS`. */
export async function credentialIdsOfStaff(db: Queryable, white_label_id: string, staff_id: string): Promise<string[]> {
  const { rows } = await db.query<{ credential_id: string }>(
    'SELECT credential_id FROM backoffice_credentials WHERE staff_id = $1 AND (white_label_id = $2 OR white_label_id IS NULL) ORDER BY credential_id LIMIT $3',
    [staff_id, white_label_id, AUDIT_SEARCH_MAX_ACTORS],
  );
  return rows.map((row) => row.credential_id);
}

/** Who holds each of these credentials (of the brand, or platform ones): the person's id and name. */
export async function holdersOfCredentials(db: Queryable, white_label_id: string, credential_ids: readonly string[]): Promise<{ credential_id: string; staff_id: string; name: string }[]> {
  const { rows } = await db.query<{ credential_id: string; staff_id: string; name: string }>(
    `SELECT c.credential_id, c.staff_id, s.name FROM backoffice_credentials c JOIN staff_identities s ON s.staff_id = c.staff_id
      WHERE c.credential_id = ANY($2::text[]) AND (c.white_label_id = $1 OR c.white_label_id IS NULL)`,
    [white_label_id, [...credential_ids]],
  );
  return rows;
}
