import type { Queryable } from '../platform/db.ts';

/** The console's sign-in links, sessions (migration 0041) and case views (migration 0043): SQL only. */

export interface SignInLinkRow {
  token_hash: string;
  white_label_id: string;
  credential_id: string;
  issued_by: string;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}

export type SignInMethod = 'link' | 'oidc';
export type SessionEndReason = 'signed_out' | 'idle' | 'expired' | 'credential_inactive';

export interface SessionRow {
  session_id: string;
  token_hash: string;
  white_label_id: string;
  credential_id: string;
  sign_in_method: SignInMethod;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
  ended_at: Date | null;
  ended_reason: SessionEndReason | null;
}

const SESSION_COLUMNS = 'session_id, token_hash, white_label_id, credential_id, sign_in_method, created_at, last_seen_at, expires_at, ended_at, ended_reason';

export async function insertSignInLink(db: Queryable, row: SignInLinkRow): Promise<void> {
  await db.query(
    `INSERT INTO console_sign_in_links (token_hash, white_label_id, credential_id, issued_by, created_at, expires_at, used_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [row.token_hash, row.white_label_id, row.credential_id, row.issued_by, row.created_at, row.expires_at, row.used_at],
  );
}

/**
 * Marks a link used and answers it, when it exists, is unused and has not expired at `now`. One statement, so
 * that two sign-ins with the same link cannot both succeed: the second finds `used_at` set.
 */
export async function useSignInLink(db: Queryable, token_hash: string, now: Date): Promise<SignInLinkRow | null> {
  const { rows } = await db.query<SignInLinkRow>(
    `UPDATE console_sign_in_links SET used_at = $2
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2
      RETURNING token_hash, white_label_id, credential_id, issued_by, created_at, expires_at, used_at`,
    [token_hash, now],
  );
  return rows[0] ?? null;
}

export async function insertSession(db: Queryable, row: SessionRow): Promise<void> {
  await db.query(
    `INSERT INTO console_sessions (${SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [row.session_id, row.token_hash, row.white_label_id, row.credential_id, row.sign_in_method, row.created_at, row.last_seen_at, row.expires_at, row.ended_at, row.ended_reason],
  );
}

export async function findSessionByTokenHash(db: Queryable, token_hash: string): Promise<SessionRow | null> {
  const { rows } = await db.query<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM console_sessions WHERE token_hash = $1`, [token_hash]);
  return rows[0] ?? null;
}

/** Moves the idle limit of a live session on (a page the person asked for; never the queue's polling). */
export async function touchSession(db: Queryable, session_id: string, now: Date): Promise<void> {
  await db.query('UPDATE console_sessions SET last_seen_at = $2 WHERE session_id = $1 AND ended_at IS NULL AND last_seen_at < $2', [session_id, now]);
}

/** Ends a session once; answers false when it had ended already. */
export async function endSession(db: Queryable, session_id: string, now: Date, reason: SessionEndReason): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE console_sessions SET ended_at = $2, ended_reason = $3 WHERE session_id = $1 AND ended_at IS NULL', [session_id, now, reason]);
  return (rowCount ?? 0) > 0;
}

/** Removes links and sessions whose absolute end is older than `before` (housekeeping). */
export async function purgeExpired(db: Queryable, before: Date, limit: number): Promise<number> {
  const links = await db.query(
    'DELETE FROM console_sign_in_links WHERE token_hash IN (SELECT token_hash FROM console_sign_in_links WHERE expires_at < $1 LIMIT $2)',
    [before, limit],
  );
  const sessions = await db.query('DELETE FROM console_sessions WHERE session_id IN (SELECT session_id FROM console_sessions WHERE expires_at < $1 LIMIT $2)', [before, limit]);
  const views = await db.query(
    'DELETE FROM console_case_views WHERE (session_id, deposit_id) IN (SELECT session_id, deposit_id FROM console_case_views WHERE last_seen_at < $1 LIMIT $2)',
    [before, limit],
  );
  return (links.rowCount ?? 0) + (sessions.rowCount ?? 0) + (views.rowCount ?? 0);
}

export interface CaseViewRow {
  deposit_id: string;
  staff_id: string;
  first_seen_at: Date;
}

/** Records that a session has a case open now: its first sight is kept, its last moves on. */
export async function recordCaseView(db: Queryable, row: { session_id: string; white_label_id: string; deposit_id: string; staff_id: string; now: Date }): Promise<void> {
  await db.query(
    `INSERT INTO console_case_views (session_id, white_label_id, deposit_id, staff_id, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $4, $5, $5)
     ON CONFLICT (session_id, deposit_id) DO UPDATE SET last_seen_at = excluded.last_seen_at`,
    [row.session_id, row.white_label_id, row.deposit_id, row.staff_id, row.now],
  );
}

/**
 * Who else has these cases open: views seen since `since` by another person than `except_staff_id`, one per
 * person and case (the earliest first sight), at most `limit` rows (a page's cases times a few viewers each).
 */
export async function caseViewers(
  db: Queryable,
  input: { white_label_id: string; deposit_ids: readonly string[]; since: Date; except_staff_id: string; limit: number },
): Promise<CaseViewRow[]> {
  if (input.deposit_ids.length === 0) return [];
  const { rows } = await db.query<CaseViewRow>(
    `SELECT deposit_id, staff_id, min(first_seen_at) AS first_seen_at FROM console_case_views
      WHERE white_label_id = $1 AND deposit_id = ANY($2::text[]) AND last_seen_at >= $3 AND staff_id <> $4
      GROUP BY deposit_id, staff_id ORDER BY deposit_id, min(first_seen_at), staff_id LIMIT $5`,
    [input.white_label_id, input.deposit_ids, input.since, input.except_staff_id, input.limit],
  );
  return rows;
}
