import type { Queryable } from '../platform/db.ts';
import type { SigningKeyRow } from './types.ts';

/**
 * The SQL of webhook signing keys (`webhook_signing_keys`), of the announcements of a new key to the
 * feeds (`webhook_key_announcements`) and of the sandbox's key rotation runs
 * (`webhook_sandbox_key_rotation_runs`). Every instant is a parameter from the injected clock, never now().
 */

/** The live key set is the platform's, stored under this brand value (migrations 0008 and 0020). */
export const PLATFORM_KEY_SCOPE = '';

/**
 * A key set: the live set is the platform's (white_label_id '', livemode true); each brand has its own
 * sandbox set (white_label_id the brand, livemode false). Generations count per set.
 */
export interface SigningKeySetKey {
  white_label_id: string;
  livemode: boolean;
}

const SIGNING_KEY_COLUMNS = 'white_label_id, livemode, kid, generation, alg, public_key_spki, raw_public_key, private_key_sealed, not_before, not_after, created_at';

/**
 * Feeds (merchant and environment) that have at least one endpoint that is not deleted, of one
 * environment, and of one brand when `white_label_id` is given: the audience of a key rotation.
 */
export async function feedsWithEndpoints(
  tx: Queryable,
  filter: { livemode: boolean; white_label_id?: string },
): Promise<{ white_label_id: string; merchant_id: string; livemode: boolean }[]> {
  const { rows } = await tx.query<{ white_label_id: string; merchant_id: string; livemode: boolean }>(
    `SELECT DISTINCT white_label_id, merchant_id, livemode FROM webhook_endpoints
      WHERE status <> 'deleted' AND livemode = $1 AND ($2::text IS NULL OR white_label_id = $2)
      ORDER BY white_label_id, merchant_id, livemode`,
    [filter.livemode, filter.white_label_id ?? null],
  );
  return rows;
}

/**
 * Serialises rotations of one key set until the transaction ends. The rotation reads the set after
 * taking it, so a second rotation sees the first one's key (committed) and answers it instead of
 * making another; the unique generation stays as the backstop.
 */
export async function lockSigningKeySet(tx: Queryable, set: SigningKeySetKey): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`webhook_signing_keys:${set.livemode ? 'live' : 'test'}:${set.white_label_id}`]);
}

/**
 * The keys of one set still trusted at `trusted_at` (no `not_after`, or a later one), oldest first.
 * The newest key of a set never has a `not_after`, so the newest generation is always among them.
 */
export async function listSigningKeys(db: Queryable, set: SigningKeySetKey, trusted_at: Date): Promise<SigningKeyRow[]> {
  const { rows } = await db.query<SigningKeyRow>(
    `SELECT ${SIGNING_KEY_COLUMNS}
       FROM webhook_signing_keys
      WHERE white_label_id = $1 AND livemode = $2 AND (not_after IS NULL OR not_after > $3)
      ORDER BY generation`,
    [set.white_label_id, set.livemode, trusted_at],
  );
  return rows;
}

/** The keys of every set still trusted at `trusted_at`: the live set first, then each brand's sandbox set, oldest first within a set. */
export async function listTrustedSigningKeys(db: Queryable, trusted_at: Date): Promise<SigningKeyRow[]> {
  const { rows } = await db.query<SigningKeyRow>(
    `SELECT ${SIGNING_KEY_COLUMNS}
       FROM webhook_signing_keys
      WHERE not_after IS NULL OR not_after > $1
      ORDER BY livemode DESC, white_label_id, generation`,
    [trusted_at],
  );
  return rows;
}

/** One key of a set, trusted or not. */
export async function findSigningKey(db: Queryable, set: SigningKeySetKey, kid: string): Promise<SigningKeyRow | null> {
  const { rows } = await db.query<SigningKeyRow>(
    `SELECT ${SIGNING_KEY_COLUMNS} FROM webhook_signing_keys WHERE white_label_id = $1 AND livemode = $2 AND kid = $3`,
    [set.white_label_id, set.livemode, kid],
  );
  return rows[0] ?? null;
}

/** The highest generation a set ever had (0 for a set with no key yet), retired keys included. */
export async function highestSigningKeyGeneration(db: Queryable, set: SigningKeySetKey): Promise<number> {
  const { rows } = await db.query<{ generation: number | null }>(
    'SELECT max(generation) AS generation FROM webhook_signing_keys WHERE white_label_id = $1 AND livemode = $2',
    [set.white_label_id, set.livemode],
  );
  return rows[0]?.generation ?? 0;
}

/**
 * Inserts a key unless its generation is taken in its set (a concurrent first use or rotation won), and
 * says whether this insert won. The unique generation is what makes two rotations at once produce one key.
 */
export async function insertSigningKey(tx: Queryable, row: SigningKeyRow): Promise<boolean> {
  const { rows } = await tx.query<{ kid: string }>(
    `INSERT INTO webhook_signing_keys (${SIGNING_KEY_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
     ON CONFLICT (white_label_id, livemode, generation) DO NOTHING
     RETURNING kid`,
    [
      row.white_label_id, row.livemode, row.kid, row.generation, row.alg, row.public_key_spki, row.raw_public_key, row.private_key_sealed,
      row.not_before, row.not_after, row.created_at,
    ],
  );
  return rows.length === 1;
}

/**
 * Sets the end of trust of every key of the set except `keep_kid` to `not_after`, unless it already
 * ends earlier: a rotation never lengthens the trust of a key an earlier rotation retired.
 */
export async function retireSigningKeys(tx: Queryable, set: SigningKeySetKey, keep_kid: string, not_after: Date): Promise<string[]> {
  const { rows } = await tx.query<{ kid: string }>(
    `UPDATE webhook_signing_keys SET not_after = $4
      WHERE white_label_id = $1 AND livemode = $2 AND kid <> $3 AND (not_after IS NULL OR not_after > $4)
     RETURNING kid`,
    [set.white_label_id, set.livemode, keep_kid, not_after],
  );
  return rows.map((row) => row.kid);
}

/** One row of webhook_key_announcements: a feed told about a new key. */
export interface KeyAnnouncementRow {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  kid: string;
  event_id: string;
  created_at: Date;
}

export async function insertKeyAnnouncements(tx: Queryable, rows: readonly KeyAnnouncementRow[]): Promise<void> {
  if (rows.length === 0) return;
  // One statement for the whole audience; instants travel as ISO text inside the array parameter.
  await tx.query(
    `INSERT INTO webhook_key_announcements (white_label_id, merchant_id, livemode, kid, event_id, created_at)
     SELECT white_label_id, merchant_id, livemode, kid, event_id, created_at::timestamptz
       FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::text[], $6::text[])
         AS announced (white_label_id, merchant_id, livemode, kid, event_id, created_at)`,
    [
      rows.map((row) => row.white_label_id), rows.map((row) => row.merchant_id), rows.map((row) => row.livemode),
      rows.map((row) => row.kid), rows.map((row) => row.event_id), rows.map((row) => row.created_at.toISOString()),
    ],
  );
}

/** Whether a feed was already told about this key. */
export async function wasKeyAnnouncedTo(
  db: Queryable,
  feed: { white_label_id: string; merchant_id: string; livemode: boolean },
  kid: string,
): Promise<boolean> {
  const { rows } = await db.query<{ told: boolean }>(
    `SELECT true AS told FROM webhook_key_announcements
      WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = $3 AND kid = $4`,
    [feed.white_label_id, feed.merchant_id, feed.livemode, kid],
  );
  return rows.length > 0;
}

/** One row of webhook_sandbox_key_rotation_runs. */
export interface SandboxRotationRunRow {
  white_label_id: string;
  merchant_id: string;
  scenario_run_id: string;
  request_id: string | null;
  kid: string;
  previous_kid: string | null;
  rotated: boolean;
  created_at: Date;
}

export async function findSandboxRotationRun(
  db: Queryable,
  white_label_id: string,
  merchant_id: string,
  scenario_run_id: string,
): Promise<SandboxRotationRunRow | null> {
  const { rows } = await db.query<SandboxRotationRunRow>(
    `SELECT white_label_id, merchant_id, scenario_run_id, request_id, kid, previous_kid, rotated, created_at
       FROM webhook_sandbox_key_rotation_runs
      WHERE white_label_id = $1 AND merchant_id = $2 AND scenario_run_id = $3`,
    [white_label_id, merchant_id, scenario_run_id],
  );
  return rows[0] ?? null;
}

export async function insertSandboxRotationRun(tx: Queryable, row: SandboxRotationRunRow): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_sandbox_key_rotation_runs (white_label_id, merchant_id, scenario_run_id, request_id, kid, previous_kid, rotated, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [row.white_label_id, row.merchant_id, row.scenario_run_id, row.request_id, row.kid, row.previous_kid, row.rotated, row.created_at],
  );
}
