import { ApiError } from '../platform/errors.ts';
import type { Queryable } from '../platform/db.ts';
import type { ClaimCause, ClaimStatus, DepositAccount, LateSlipClaimEvidence } from '../deposits/types.ts';

/**
 * All SQL of claims (migrations 0009, 0011 and 0014 give the meaning of every column). The review module
 * owns the table: the deposit module opens claims through the claims port (ClaimRegistry in
 * src/review/claims.ts), and every other read or change goes through the claim desk. Each query is scoped
 * by brand, and the merchant's read by merchant and environment too.
 */

/** The closed list of outcomes of a resolved claim (a rejected claim has none). */
export const CLAIM_RESOLUTION_CODES = ['refunded_to_payer', 'credited_to_merchant_outside_service', 'no_transfer_found', 'duplicate_of_other_claim', 'refunded_in_service'] as const;
export type ClaimResolutionCode = (typeof CLAIM_RESOLUTION_CODES)[number];
/** The outcome of a claim resolved by a refund of the service (migration 0036): the claim names the refund. */
export const REFUNDED_IN_SERVICE = 'refunded_in_service' satisfies ClaimResolutionCode;

export type ClaimOpenerType = 'end_user' | 'backoffice' | 'system';

export interface ClaimRow {
  /** The brand; every key of the table includes it. */
  white_label_id: string;
  /** The merchant whose order the claim is about (the depositing merchant). */
  merchant_id: string;
  /** The order's environment. */
  livemode: boolean;
  /** `clm_` + ULID. */
  claim_id: string;
  /** The order the money was meant for. */
  deposit_id: string;
  /** An excess the service verified (`same_transfer_excess`, `additional_transfer`) or a late slip a payer reports. */
  cause: ClaimCause;
  /** The excess E; for a reported transfer what the payer says they sent, or null when they did not say. */
  amount_minor: number | null;
  /** When the slip (or the report) that caused the claim arrived. */
  slip_received_at: Date;
  /** open → investigating → resolved | rejected (open may be decided at once). */
  status: ClaimStatus;
  /** What makes the claim happen once per brand: a repeat with the same key returns the first claim. */
  dedupe_key: string;
  /** What the payer, or an operator for them, said about the transfer; null for an excess the service verified. */
  evidence: LateSlipClaimEvidence | null;
  /** Who opened it: the end user at `claim_url`, a back-office credential, or the service. */
  opened_by: ClaimOpenerType;
  /** The back-office credential that opened it; null for the end user and the service. */
  opened_by_id: string | null;
  /** Increases on every change; the `claim.*` events carry it. */
  version: number;
  /** The back-office credential that started the investigation. */
  investigated_by: string | null;
  /** When the investigation started. */
  investigated_at: Date | null;
  /** The outcome of a resolved claim. */
  resolution_code: ClaimResolutionCode | null;
  /** The decider's internal note (resolved or rejected); never shown to a merchant. */
  resolution_note: string | null;
  /** The back-office credential that resolved or rejected the claim. */
  resolved_by: string | null;
  /** When it was resolved or rejected. */
  resolved_at: Date | null;
  /** The refund (a withdrawal order) that resolved it, exactly when it was resolved `refunded_in_service`. */
  refund_id: string | null;
  /** When the claim was opened. */
  created_at: Date;
  /** The last change (equal to created_at until the first decision). */
  updated_at: Date;
}

const CLAIM_COLUMNS = `white_label_id, merchant_id, livemode, claim_id, deposit_id, cause, amount_minor, slip_received_at, status, dedupe_key,
  evidence, opened_by, opened_by_id, version, investigated_by, investigated_at, resolution_code, resolution_note, resolved_by, resolved_at,
  created_at, updated_at, refund_id`;

/** Inserts a claim unless one with its `dedupe_key` exists in the brand; null when it does (nothing written). */
export async function insertClaim(db: Queryable, row: ClaimRow): Promise<ClaimRow | null> {
  const { rows } = await db.query<ClaimRow>(
    `INSERT INTO claims (${CLAIM_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
     ON CONFLICT (white_label_id, dedupe_key) DO NOTHING
     RETURNING ${CLAIM_COLUMNS}`,
    [
      row.white_label_id, row.merchant_id, row.livemode, row.claim_id, row.deposit_id, row.cause, row.amount_minor, row.slip_received_at,
      row.status, row.dedupe_key, row.evidence === null ? null : JSON.stringify(row.evidence), row.opened_by, row.opened_by_id, row.version,
      row.investigated_by, row.investigated_at, row.resolution_code, row.resolution_note, row.resolved_by, row.resolved_at, row.created_at,
      row.updated_at, row.refund_id,
    ],
  );
  return rows[0] ?? null;
}

export async function findByDedupeKey(db: Queryable, white_label_id: string, dedupe_key: string): Promise<ClaimRow | null> {
  const { rows } = await db.query<ClaimRow>(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE white_label_id = $1 AND dedupe_key = $2`, [white_label_id, dedupe_key]);
  return rows[0] ?? null;
}

export async function findClaim(db: Queryable, white_label_id: string, claim_id: string): Promise<ClaimRow | null> {
  const { rows } = await db.query<ClaimRow>(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE white_label_id = $1 AND claim_id = $2`, [white_label_id, claim_id]);
  return rows[0] ?? null;
}

/** The claim a refund resolved, if any (index claims_refund: one at most). */
export async function findClaimByRefund(db: Queryable, white_label_id: string, refund_id: string): Promise<ClaimRow | null> {
  const { rows } = await db.query<ClaimRow>(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE white_label_id = $1 AND refund_id = $2`, [white_label_id, refund_id]);
  return rows[0] ?? null;
}

/** Locks a claim for a decision: two deciders queue on the row, and the second reads what the first wrote. */
export async function lockClaim(tx: Queryable, white_label_id: string, claim_id: string): Promise<ClaimRow | null> {
  const { rows } = await tx.query<ClaimRow>(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE white_label_id = $1 AND claim_id = $2 FOR UPDATE`, [white_label_id, claim_id]);
  return rows[0] ?? null;
}

/** A merchant's own claim in its environment; another tenant's id reads as nothing. */
export async function findMerchantClaim(db: Queryable, account: DepositAccount, claim_id: string): Promise<ClaimRow | null> {
  const { rows } = await db.query<ClaimRow>(`SELECT ${CLAIM_COLUMNS} FROM claims WHERE white_label_id = $1 AND claim_id = $2 AND merchant_id = $3 AND livemode = $4`, [
    account.white_label_id,
    claim_id,
    account.merchant_id,
    account.livemode,
  ]);
  return rows[0] ?? null;
}

export interface ClaimListFilters {
  livemode: boolean | null;
  status: ClaimStatus | null;
  cause: ClaimCause | null;
  deposit_id: string | null;
  /** The (created_at, claim_id) of the last claim of the previous page. */
  after: { created_at: Date; claim_id: string } | null;
  limit: number;
}

/** A page of a brand's claims, oldest first, keyset-paged on (created_at, claim_id) (index claims_desk). */
export async function listClaims(db: Queryable, white_label_id: string, filters: ClaimListFilters): Promise<ClaimRow[]> {
  const { rows } = await db.query<ClaimRow>(
    `SELECT ${CLAIM_COLUMNS} FROM claims
      WHERE white_label_id = $1
        AND ($2::boolean IS NULL OR livemode = $2::boolean) AND ($3::text IS NULL OR status = $3::text)
        AND ($4::text IS NULL OR cause = $4::text) AND ($5::text IS NULL OR deposit_id = $5::text)
        AND ($6::timestamptz IS NULL OR (created_at, claim_id) > ($6::timestamptz, $7::text))
      ORDER BY created_at, claim_id LIMIT $8`,
    [white_label_id, filters.livemode, filters.status, filters.cause, filters.deposit_id, filters.after?.created_at ?? null, filters.after?.claim_id ?? null, filters.limit],
  );
  return rows;
}

/**
 * Writes a decision's new state over the version it was read at. False when the claim moved meanwhile
 * (callers hold the row lock, so that is an invariant violation rather than a race).
 */
export async function updateClaimDecision(tx: Queryable, row: ClaimRow, expected_version: number): Promise<boolean> {
  const { rows } = await tx
    .query(
    `UPDATE claims SET status = $3, version = $4, investigated_by = $5, investigated_at = $6, resolution_code = $7, resolution_note = $8,
            resolved_by = $9, resolved_at = $10, updated_at = $11, refund_id = $13
      WHERE white_label_id = $1 AND claim_id = $2 AND version = $12
      RETURNING claim_id`,
    [
      row.white_label_id, row.claim_id, row.status, row.version, row.investigated_by, row.investigated_at, row.resolution_code, row.resolution_note,
      row.resolved_by, row.resolved_at, row.updated_at, expected_version, row.refund_id,
    ],
    )
    .catch((error: unknown) => {
      // Two decisions that linked one refund to two claims at once: the check before found none, the index refuses the
      // second. It is the same refusal as the check's, and the transaction rolls back with it.
      if (isUniqueViolationOf(error, 'claims_refund')) {
        throw new ApiError('claim_refund_unusable', { details: { refund_id: row.refund_id, deposit_id: row.deposit_id, reason: 'resolves_another_claim' } });
      }
      throw error;
    });
  return rows.length === 1;
}

function isUniqueViolationOf(error: unknown, constraint: string): boolean {
  const fields = error as { code?: unknown; constraint?: unknown } | null;
  return typeof fields === 'object' && fields !== null && fields.code === '23505' && fields.constraint === constraint;
}

/** Which of these orders have a claim not yet decided (open or investigating). */
export async function ordersWithOpenClaims(db: Queryable, orders: readonly { white_label_id: string; deposit_id: string }[]): Promise<{ white_label_id: string; deposit_id: string }[]> {
  if (orders.length === 0) return [];
  const { rows } = await db.query<{ white_label_id: string; deposit_id: string }>(
    `SELECT DISTINCT t.white_label_id, t.deposit_id FROM claims t
       JOIN unnest($1::text[], $2::text[]) AS k(white_label_id, deposit_id) ON t.white_label_id = k.white_label_id AND t.deposit_id = k.deposit_id
      WHERE t.status IN ('open', 'investigating')`,
    [orders.map((order) => order.white_label_id), orders.map((order) => order.deposit_id)],
  );
  return rows;
}
