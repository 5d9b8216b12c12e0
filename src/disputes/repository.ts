import type { Queryable } from '../platform/db.ts';

/**
 * All SQL of withdrawal disputes (migration 0013): the disputes and the evidence sent for them. Every
 * query is scoped by the brand; the merchant scope is checked by the service against the dispute's
 * withdrawing merchant.
 */

export type DisputeKind = 'non_receipt' | 'allocation_conflict';
export type DisputeStatus = 'open' | 'awaiting_decision' | 'resolved';
export type DisputeOutcome = 'withdrawer' | 'depositor';
export type EvidenceKind = 'bank_statement_line' | 'chat_transcript' | 'id_document_ref' | 'other';

export interface DisputeRow {
  /** The brand: every key of tenant data includes it. */
  white_label_id: string;
  /** `dsp_` id. */
  dispute_id: string;
  /** The environment of both orders. */
  livemode: boolean;
  /** `non_receipt` (the withdrawer opened it) or `allocation_conflict` (the slip pipeline did). */
  kind: DisputeKind;
  /** The disputed withdrawal order. */
  withdrawal_id: string;
  /** The withdrawing merchant: the only merchant told about the dispute. */
  withdrawal_merchant_id: string;
  /** The withdrawal side's fill, or for an allocation conflict its released reservation. */
  leg_ref: string;
  /** The deposit that paid (or paid late into) that leg. */
  deposit_id: string;
  /** The depositing merchant, whose money the dispute holds. */
  deposit_merchant_id: string;
  /** Allocation conflicts: the deposit's leg that a withdrawer's adjustment may cover; null otherwise. */
  deposit_leg_ref: string | null;
  /** `dispute.reason_code` (open enum): FUNDS_NOT_RECEIVED, AMOUNT_DIFFERS or ALLOCATION_CONFLICT today. */
  reason_code: string;
  /** The amount in question, in satang. */
  amount_minor: number;
  /** The withdrawer's words when it opened the dispute; null when it gave none or the system opened it. */
  note: string | null;
  /** `open` until respond_by, `awaiting_decision` after it with evidence, `resolved` at the end. */
  status: DisputeStatus;
  /** True when this dispute held the depositor's credit in clearing. */
  clearing_held: boolean;
  opened_at: Date;
  /** Evidence is due before this instant; the deadline job runs at it. */
  respond_by: Date;
  /** Evidence items received (at most MAX_EVIDENCE_PER_DISPUTE). */
  evidence_count: number;
  /** Which side the resolution was for; null until resolved. */
  outcome: DisputeOutcome | null;
  /** `operator` or `system` (the deadline job); null until resolved. */
  resolved_by: 'operator' | 'system' | null;
  /** The operator's back-office credential; null unless an operator resolved it. */
  resolver_id: string | null;
  /** The operator's internal note (at least 20 characters); never shown to a merchant. */
  resolution_note: string | null;
  resolved_at: Date | null;
  /** The withdrawer's `adjustment` debit that paid an allocation conflict resolved for the depositor. */
  adjustment_balance_transaction_id: string | null;
  /** That debit given back (an `adjustment` credit) when the deposit it covered was reversed. */
  adjustment_reversal_balance_transaction_id: string | null;
  /** The request that opened the dispute; null when the system opened it. */
  request_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface DisputeEvidenceRow {
  /** The brand. */
  white_label_id: string;
  /** `dse_` id. */
  evidence_id: string;
  /** The dispute it was sent for. */
  dispute_id: string;
  /** The withdrawing merchant that sent it. */
  merchant_id: string;
  livemode: boolean;
  /** What the reference points at (the deposit evidence endpoint's four kinds). */
  kind: EvidenceKind;
  /** A reference in the merchant's own evidence store (never a URL). */
  reference: string;
  /** Free text for the operator. */
  note: string;
  /** The request that sent it. */
  request_id: string;
  created_at: Date;
}

const DISPUTE_COLUMNS = `white_label_id, dispute_id, livemode, kind, withdrawal_id, withdrawal_merchant_id, leg_ref, deposit_id,
  deposit_merchant_id, deposit_leg_ref, reason_code, amount_minor, note, status, clearing_held, opened_at, respond_by, evidence_count,
  outcome, resolved_by, resolver_id, resolution_note, resolved_at, adjustment_balance_transaction_id,
  adjustment_reversal_balance_transaction_id, request_id, created_at, updated_at`;

const EVIDENCE_COLUMNS = 'white_label_id, evidence_id, dispute_id, merchant_id, livemode, kind, reference, note, request_id, created_at';

/** Inserts a dispute; false when its leg already has one (one dispute per fill). */
export async function insertDispute(db: Queryable, row: DisputeRow): Promise<boolean> {
  const { rows } = await db.query(
    `INSERT INTO withdrawal_disputes (${DISPUTE_COLUMNS})
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)
     ON CONFLICT (white_label_id, leg_ref) DO NOTHING
     RETURNING dispute_id`,
    [
      row.white_label_id, row.dispute_id, row.livemode, row.kind, row.withdrawal_id, row.withdrawal_merchant_id, row.leg_ref, row.deposit_id,
      row.deposit_merchant_id, row.deposit_leg_ref, row.reason_code, row.amount_minor, row.note, row.status, row.clearing_held, row.opened_at,
      row.respond_by, row.evidence_count, row.outcome, row.resolved_by, row.resolver_id, row.resolution_note, row.resolved_at,
      row.adjustment_balance_transaction_id, row.adjustment_reversal_balance_transaction_id, row.request_id, row.created_at, row.updated_at,
    ],
  );
  return rows.length === 1;
}

/**
 * Writes the mutable columns of a dispute where its stored status is still `expected_status` (the
 * caller holds the row's lock; the condition catches a programming error, not a race).
 */
export async function updateDispute(db: Queryable, row: DisputeRow, expected_status: DisputeStatus): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE withdrawal_disputes
        SET status = $4, evidence_count = $5, outcome = $6, resolved_by = $7, resolver_id = $8, resolution_note = $9, resolved_at = $10,
            adjustment_balance_transaction_id = $11, adjustment_reversal_balance_transaction_id = $12, updated_at = $13
      WHERE white_label_id = $1 AND dispute_id = $2 AND status = $3
      RETURNING dispute_id`,
    [
      row.white_label_id, row.dispute_id, expected_status, row.status, row.evidence_count, row.outcome, row.resolved_by, row.resolver_id,
      row.resolution_note, row.resolved_at, row.adjustment_balance_transaction_id, row.adjustment_reversal_balance_transaction_id, row.updated_at,
    ],
  );
  return rows.length === 1;
}

export async function findDispute(db: Queryable, white_label_id: string, dispute_id: string): Promise<DisputeRow | null> {
  const { rows } = await db.query<DisputeRow>(`SELECT ${DISPUTE_COLUMNS} FROM withdrawal_disputes WHERE white_label_id = $1 AND dispute_id = $2`, [
    white_label_id,
    dispute_id,
  ]);
  return rows[0] ?? null;
}

/** Locks a dispute for the rest of the transaction (after its deposit's locks, docs/decisions/locks.md). */
export async function lockDispute(db: Queryable, white_label_id: string, dispute_id: string): Promise<DisputeRow | null> {
  const { rows } = await db.query<DisputeRow>(`SELECT ${DISPUTE_COLUMNS} FROM withdrawal_disputes WHERE white_label_id = $1 AND dispute_id = $2 FOR UPDATE`, [
    white_label_id,
    dispute_id,
  ]);
  return rows[0] ?? null;
}

export async function findDisputeByLeg(db: Queryable, white_label_id: string, leg_ref: string): Promise<DisputeRow | null> {
  const { rows } = await db.query<DisputeRow>(`SELECT ${DISPUTE_COLUMNS} FROM withdrawal_disputes WHERE white_label_id = $1 AND leg_ref = $2`, [
    white_label_id,
    leg_ref,
  ]);
  return rows[0] ?? null;
}

/** What the order shows: its newest dispute, and whether any unresolved one holds money. */
export async function disputeStateOfWithdrawal(
  db: Queryable,
  white_label_id: string,
  withdrawal_id: string,
): Promise<{ newest: DisputeRow | null; funds_on_hold: boolean }> {
  const { rows } = await db.query<DisputeRow & { holding: boolean }>(
    `SELECT ${DISPUTE_COLUMNS},
            EXISTS (SELECT 1 FROM withdrawal_disputes h
                     WHERE h.white_label_id = $1 AND h.withdrawal_id = $2 AND h.status <> 'resolved'
                       AND (h.kind = 'allocation_conflict' OR h.clearing_held)) AS holding
       FROM withdrawal_disputes
      WHERE white_label_id = $1 AND withdrawal_id = $2
      ORDER BY opened_at DESC, dispute_id DESC LIMIT 1`,
    [white_label_id, withdrawal_id],
  );
  const row = rows[0];
  if (!row) return { newest: null, funds_on_hold: false };
  const { holding, ...newest } = row;
  return { newest, funds_on_hold: holding };
}

/** Unresolved disputes other than `except_dispute_id` that hold this deposit's credit in clearing. */
export async function countOtherHolds(db: Queryable, white_label_id: string, deposit_id: string, except_dispute_id: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*) AS count FROM withdrawal_disputes
      WHERE white_label_id = $1 AND deposit_id = $2 AND dispute_id <> $3 AND status <> 'resolved' AND clearing_held`,
    [white_label_id, deposit_id, except_dispute_id],
  );
  return Number(rows[0]?.count ?? 0);
}

/** The allocation-conflict dispute whose withdrawer's adjustment paid this deposit leg and still stands. */
export async function findStandingCover(db: Queryable, white_label_id: string, deposit_id: string, deposit_leg_ref: string): Promise<DisputeRow | null> {
  const { rows } = await db.query<DisputeRow>(
    `SELECT ${DISPUTE_COLUMNS} FROM withdrawal_disputes
      WHERE white_label_id = $1 AND deposit_id = $2 AND deposit_leg_ref = $3 AND kind = 'allocation_conflict'
        AND adjustment_balance_transaction_id IS NOT NULL AND adjustment_reversal_balance_transaction_id IS NULL`,
    [white_label_id, deposit_id, deposit_leg_ref],
  );
  return rows[0] ?? null;
}

export interface DisputeListFilters {
  status: DisputeStatus | null;
  livemode: boolean | null;
  newest_first: boolean;
  /** The (opened_at, dispute_id) of the last dispute of the previous page, in the list's own direction. */
  after: { opened_at: Date; dispute_id: string } | null;
  limit: number;
}

/**
 * A brand's disputes by opening time, oldest or newest first, keyset-paged on (opened_at, dispute_id): the index
 * withdrawal_disputes_by_status serves a status filter, withdrawal_disputes_desk (migration 0044) the rest.
 */
export async function listDisputes(db: Queryable, white_label_id: string, filters: DisputeListFilters): Promise<DisputeRow[]> {
  const direction = filters.newest_first ? 'DESC' : 'ASC';
  const beyond = filters.newest_first ? '<' : '>';
  const { rows } = await db.query<DisputeRow>(
    `SELECT ${DISPUTE_COLUMNS} FROM withdrawal_disputes
      WHERE white_label_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::boolean IS NULL OR livemode = $3)
        AND ($5::timestamptz IS NULL OR (opened_at, dispute_id) ${beyond} ($5::timestamptz, $6::text))
      ORDER BY opened_at ${direction}, dispute_id ${direction} LIMIT $4`,
    [white_label_id, filters.status, filters.livemode, filters.limit, filters.after?.opened_at ?? null, filters.after?.dispute_id ?? null],
  );
  return rows;
}

export async function insertEvidence(db: Queryable, row: DisputeEvidenceRow): Promise<void> {
  await db.query(`INSERT INTO withdrawal_dispute_evidence (${EVIDENCE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, [
    row.white_label_id, row.evidence_id, row.dispute_id, row.merchant_id, row.livemode, row.kind, row.reference, row.note, row.request_id, row.created_at,
  ]);
}

export async function listEvidence(db: Queryable, white_label_id: string, dispute_id: string): Promise<DisputeEvidenceRow[]> {
  const { rows } = await db.query<DisputeEvidenceRow>(
    `SELECT ${EVIDENCE_COLUMNS} FROM withdrawal_dispute_evidence WHERE white_label_id = $1 AND dispute_id = $2 ORDER BY created_at, evidence_id`,
    [white_label_id, dispute_id],
  );
  return rows;
}

/** Which of these deposits have a dispute not yet resolved. */
export async function ordersWithOpenDisputes(db: Queryable, orders: readonly { white_label_id: string; deposit_id: string }[]): Promise<{ white_label_id: string; deposit_id: string }[]> {
  if (orders.length === 0) return [];
  const { rows } = await db.query<{ white_label_id: string; deposit_id: string }>(
    `SELECT DISTINCT t.white_label_id, t.deposit_id FROM withdrawal_disputes t
       JOIN unnest($1::text[], $2::text[]) AS k(white_label_id, deposit_id) ON t.white_label_id = k.white_label_id AND t.deposit_id = k.deposit_id
      WHERE t.status <> 'resolved'`,
    [orders.map((order) => order.white_label_id), orders.map((order) => order.deposit_id)],
  );
  return rows;
}
