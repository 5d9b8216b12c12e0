import type { Queryable } from '../platform/db.ts';

/** A brand's OpenID Connect provider for the console and its staff list (migration 0047): SQL only. */

export interface OidcProviderRow {
  white_label_id: string;
  issuer: string;
  client_id: string;
  client_secret_sealed: string;
  created_at: Date;
  updated_at: Date;
}

export type OidcStaffRole = 'reviewer' | 'operator';

export interface OidcStaffRow {
  white_label_id: string;
  subject: string;
  role: OidcStaffRole;
  staff_id: string;
  credential_id: string;
  created_at: Date;
  updated_at: Date;
}

const PROVIDER_COLUMNS = 'white_label_id, issuer, client_id, client_secret_sealed, created_at, updated_at';
const STAFF_COLUMNS = 'white_label_id, subject, role, staff_id, credential_id, created_at, updated_at';

export async function findProvider(db: Queryable, white_label_id: string): Promise<OidcProviderRow | null> {
  const { rows } = await db.query<OidcProviderRow>(`SELECT ${PROVIDER_COLUMNS} FROM console_oidc_providers WHERE white_label_id = $1`, [white_label_id]);
  return rows[0] ?? null;
}

/** Sets or replaces the brand's provider; `created_at` of an existing row is kept. */
export async function upsertProvider(db: Queryable, row: Omit<OidcProviderRow, 'created_at'>): Promise<OidcProviderRow> {
  const { rows } = await db.query<OidcProviderRow>(
    `INSERT INTO console_oidc_providers (${PROVIDER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $5)
     ON CONFLICT (white_label_id) DO UPDATE SET issuer = EXCLUDED.issuer, client_id = EXCLUDED.client_id,
       client_secret_sealed = EXCLUDED.client_secret_sealed, updated_at = EXCLUDED.updated_at
     RETURNING ${PROVIDER_COLUMNS}`,
    [row.white_label_id, row.issuer, row.client_id, row.client_secret_sealed, row.updated_at],
  );
  return rows[0]!;
}

export async function deleteProvider(db: Queryable, white_label_id: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM console_oidc_providers WHERE white_label_id = $1', [white_label_id]);
  return (rowCount ?? 0) > 0;
}

/** One entry of the staff list, locked for update when `lock` (a change of the entry). */
export async function findStaffEntry(db: Queryable, white_label_id: string, subject: string, lock = false): Promise<OidcStaffRow | null> {
  const { rows } = await db.query<OidcStaffRow>(
    `SELECT ${STAFF_COLUMNS} FROM console_oidc_staff WHERE white_label_id = $1 AND subject = $2${lock ? ' FOR UPDATE' : ''}`,
    [white_label_id, subject],
  );
  return rows[0] ?? null;
}

export async function upsertStaffEntry(db: Queryable, row: Omit<OidcStaffRow, 'created_at'>): Promise<OidcStaffRow> {
  const { rows } = await db.query<OidcStaffRow>(
    `INSERT INTO console_oidc_staff (${STAFF_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $6)
     ON CONFLICT (white_label_id, subject) DO UPDATE SET role = EXCLUDED.role, staff_id = EXCLUDED.staff_id,
       credential_id = EXCLUDED.credential_id, updated_at = EXCLUDED.updated_at
     RETURNING ${STAFF_COLUMNS}`,
    [row.white_label_id, row.subject, row.role, row.staff_id, row.credential_id, row.updated_at],
  );
  return rows[0]!;
}

export async function deleteStaffEntry(db: Queryable, white_label_id: string, subject: string): Promise<OidcStaffRow | null> {
  const { rows } = await db.query<OidcStaffRow>(`DELETE FROM console_oidc_staff WHERE white_label_id = $1 AND subject = $2 RETURNING ${STAFF_COLUMNS}`, [white_label_id, subject]);
  return rows[0] ?? null;
}

/** A page of the brand's staff list in subject order, after `after` (exclusive); the primary key serves it. */
export async function listStaffEntries(db: Queryable, white_label_id: string, after: string | null, limit: number): Promise<OidcStaffRow[]> {
  const { rows } = await db.query<OidcStaffRow>(
    `SELECT ${STAFF_COLUMNS} FROM console_oidc_staff WHERE white_label_id = $1 AND ($2::text IS NULL OR subject > $2) ORDER BY subject LIMIT $3`,
    [white_label_id, after, limit],
  );
  return rows;
}
