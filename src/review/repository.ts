import type { Queryable } from '../platform/db.ts';

/**
 * All SQL of the review desk: reviewer decisions, merchant evidence and force-complete requests
 * (migrations/0012_review.sql has the meaning of every column; 0027 adds the decision's staff_id). Each
 * query is scoped by brand.
 */

export type DecisionAction = 'approve' | 'reject' | 'escalate';
export type DecisionEffect = 'approval_recorded' | 'settled' | 'rejected' | 'escalated';

export interface DecisionRow {
  white_label_id: string;
  decision_id: string;
  deposit_id: string;
  merchant_id: string;
  livemode: boolean;
  /** Which review of the order the decision belongs to (its review.opened_at). */
  review_opened_at: Date;
  action: DecisionAction;
  effect: DecisionEffect;
  /**
   * The back-office credential that decided, or the system reviewer when the service decided itself (the
   * sandbox's desk, `sandbox_scenario`).
   */
  reviewer_id: string;
  /**
   * The person behind that credential (migration 0027): four eyes and escalation compare these. Null exactly
   * when reviewer_id is not a credential (a decision the service made itself has no person); the rule
   * `review_decisions_staff_iff_credential` holds the database to that.
   */
  staff_id: string | null;
  /** Internal; never shown to a merchant. */
  note: string | null;
  rejection_code: string | null;
  /** V an approval settles (or would settle) with. */
  verified_amount_minor: number | null;
  /** Where V came from: the bank's verified transfers, or the reviewer. */
  amount_source: 'bank' | 'reviewer' | null;
  idempotency_key: string | null;
  /** The order's version after the decision. */
  deposit_version: number;
  created_at: Date;
}

export interface EvidenceRow {
  white_label_id: string;
  evidence_id: string;
  deposit_id: string;
  merchant_id: string;
  livemode: boolean;
  kind: 'bank_statement_line' | 'chat_transcript' | 'id_document_ref' | 'other';
  /** A pointer into the merchant's own evidence store. */
  reference: string;
  /** Free text for the reviewer. */
  note: string;
  request_id: string;
  created_at: Date;
}

export interface ForceCompleteRow {
  white_label_id: string;
  /** The req_ id of the merchant's request. */
  request_id: string;
  deposit_id: string;
  merchant_id: string;
  livemode: boolean;
  /** What the merchant says was paid; not authoritative. */
  claimed_verified_amount_minor: number;
  /** V from the bank's verified transfers: what an approval uses. */
  derived_verified_amount_minor: number;
  note: string;
  created_at: Date;
}

const DECISION_COLUMNS = `white_label_id, decision_id, deposit_id, merchant_id, livemode, review_opened_at, action, effect, reviewer_id, note,
  rejection_code, verified_amount_minor, amount_source, idempotency_key, deposit_version, created_at, staff_id`;

function decisionOf(row: DecisionRow): DecisionRow {
  return { ...row, verified_amount_minor: row.verified_amount_minor === null ? null : Number(row.verified_amount_minor) };
}

export async function insertDecision(db: Queryable, row: DecisionRow): Promise<void> {
  await db.query(
    `INSERT INTO review_decisions (${DECISION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
    [
      row.white_label_id, row.decision_id, row.deposit_id, row.merchant_id, row.livemode, row.review_opened_at, row.action, row.effect, row.reviewer_id,
      row.note, row.rejection_code, row.verified_amount_minor, row.amount_source, row.idempotency_key, row.deposit_version, row.created_at, row.staff_id,
    ],
  );
}

/** Every decision on an order, oldest first (the history a reviewer reads). */
export async function listDecisions(db: Queryable, white_label_id: string, deposit_id: string): Promise<DecisionRow[]> {
  const { rows } = await db.query<DecisionRow>(`SELECT ${DECISION_COLUMNS} FROM review_decisions WHERE white_label_id = $1 AND deposit_id = $2 ORDER BY created_at, decision_id LIMIT 200`, [
    white_label_id,
    deposit_id,
  ]);
  return rows.map(decisionOf);
}

/** The decision a reviewer made with an Idempotency-Key, if any: a retried request replays it. */
export async function findDecisionByKey(db: Queryable, white_label_id: string, reviewer_id: string, idempotency_key: string): Promise<DecisionRow | null> {
  const { rows } = await db.query<DecisionRow>(`SELECT ${DECISION_COLUMNS} FROM review_decisions WHERE white_label_id = $1 AND reviewer_id = $2 AND idempotency_key = $3`, [
    white_label_id,
    reviewer_id,
    idempotency_key,
  ]);
  return rows[0] ? decisionOf(rows[0]) : null;
}

/** Reviews of a brand and environment that ended (settled or rejected by a reviewer) since a time. */
export async function countReviewsEndedSince(db: Queryable, white_label_id: string, livemode: boolean, since: Date): Promise<number> {
  const { rows } = await db.query<{ count: string | number }>(
    `SELECT count(*) AS count FROM review_decisions
      WHERE white_label_id = $1 AND livemode = $2 AND effect IN ('settled', 'rejected') AND created_at >= $3`,
    [white_label_id, livemode, since],
  );
  return Number(rows[0]?.count ?? 0);
}

const EVIDENCE_COLUMNS = 'white_label_id, evidence_id, deposit_id, merchant_id, livemode, kind, reference, note, request_id, created_at';

export async function insertEvidence(db: Queryable, row: EvidenceRow): Promise<void> {
  await db.query(`INSERT INTO deposit_evidence (${EVIDENCE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, [
    row.white_label_id, row.evidence_id, row.deposit_id, row.merchant_id, row.livemode, row.kind, row.reference, row.note, row.request_id, row.created_at,
  ]);
}

export async function listEvidence(db: Queryable, white_label_id: string, deposit_id: string): Promise<EvidenceRow[]> {
  const { rows } = await db.query<EvidenceRow>(`SELECT ${EVIDENCE_COLUMNS} FROM deposit_evidence WHERE white_label_id = $1 AND deposit_id = $2 ORDER BY created_at, evidence_id LIMIT 100`, [
    white_label_id,
    deposit_id,
  ]);
  return rows;
}

const FORCE_COMPLETE_COLUMNS = `white_label_id, request_id, deposit_id, merchant_id, livemode, claimed_verified_amount_minor, derived_verified_amount_minor,
  note, created_at`;

export async function insertForceComplete(db: Queryable, row: ForceCompleteRow): Promise<void> {
  await db.query(`INSERT INTO force_complete_requests (${FORCE_COMPLETE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, [
    row.white_label_id, row.request_id, row.deposit_id, row.merchant_id, row.livemode, row.claimed_verified_amount_minor, row.derived_verified_amount_minor,
    row.note, row.created_at,
  ]);
}

export async function listForceCompletes(db: Queryable, white_label_id: string, deposit_id: string): Promise<ForceCompleteRow[]> {
  const { rows } = await db.query<ForceCompleteRow>(
    `SELECT ${FORCE_COMPLETE_COLUMNS} FROM force_complete_requests WHERE white_label_id = $1 AND deposit_id = $2 ORDER BY created_at, request_id LIMIT 100`,
    [white_label_id, deposit_id],
  );
  return rows.map((row) => ({ ...row, claimed_verified_amount_minor: Number(row.claimed_verified_amount_minor), derived_verified_amount_minor: Number(row.derived_verified_amount_minor) }));
}

/** How many evidence items and force-complete requests an order has (each is capped). */
export async function countAttachments(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ evidence: number; force_completes: number }> {
  const { rows } = await db.query<{ evidence: string | number; force_completes: string | number }>(
    `SELECT (SELECT count(*) FROM deposit_evidence WHERE white_label_id = $1 AND deposit_id = $2) AS evidence,
            (SELECT count(*) FROM force_complete_requests WHERE white_label_id = $1 AND deposit_id = $2) AS force_completes`,
    [white_label_id, deposit_id],
  );
  return { evidence: Number(rows[0]?.evidence ?? 0), force_completes: Number(rows[0]?.force_completes ?? 0) };
}
