import type { Queryable } from '../platform/db.ts';

/** All SQL of the slip-providers module: one table, `slip_provider_settings` (migration 0037). */

export type ProviderName = 'slipok' | 'easyslip' | 'rdcw';
export type ProviderSlot = 'primary' | 'fallback';

export interface ProviderSettingRow {
  white_label_id: string;
  livemode: boolean;
  slot: ProviderSlot;
  provider: ProviderName;
  credentials_sealed: string;
  credential_hint: string;
  /** bigint, read as text by the driver; compared and cached as text. */
  credentials_version: string;
  credentials_set_at: Date;
  created_at: Date;
  updated_at: Date;
}

/** At most two rows a brand and mode: the limit is the table's key, stated here so that no read is unbounded. */
const SLOTS_PER_BRAND = 2;

export async function settingsOfBrand(db: Queryable, white_label_id: string, livemode: boolean, lock = false): Promise<ProviderSettingRow[]> {
  const { rows } = await db.query<ProviderSettingRow>(
    `SELECT white_label_id, livemode, slot, provider, credentials_sealed, credential_hint, credentials_version::text AS credentials_version,
            credentials_set_at, created_at, updated_at
       FROM slip_provider_settings
      WHERE white_label_id = $1 AND livemode = $2
      ORDER BY slot DESC
      LIMIT ${SLOTS_PER_BRAND}${lock ? ' FOR UPDATE' : ''}`,
    [white_label_id, livemode],
  );
  return rows;
}

/** Sets a slot's provider and credentials; a new credentials version every time (rotation included). */
export async function upsertSetting(
  db: Queryable,
  row: { white_label_id: string; livemode: boolean; slot: ProviderSlot; provider: ProviderName; credentials_sealed: string; credential_hint: string; now: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO slip_provider_settings (white_label_id, livemode, slot, provider, credentials_sealed, credential_hint, credentials_set_at, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $7)
     ON CONFLICT (white_label_id, livemode, slot) DO UPDATE
        SET provider = EXCLUDED.provider,
            credentials_sealed = EXCLUDED.credentials_sealed,
            credential_hint = EXCLUDED.credential_hint,
            credentials_version = nextval('slip_provider_credentials_version'),
            credentials_set_at = EXCLUDED.credentials_set_at,
            updated_at = EXCLUDED.updated_at`,
    [row.white_label_id, row.livemode, row.slot, row.provider, row.credentials_sealed, row.credential_hint, row.now],
  );
}

export async function deleteSetting(db: Queryable, white_label_id: string, livemode: boolean, slot: ProviderSlot): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM slip_provider_settings WHERE white_label_id = $1 AND livemode = $2 AND slot = $3', [white_label_id, livemode, slot]);
  return rowCount > 0;
}
