import type { Database } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { HOUR_MS } from '../platform/time.ts';
import type { JobHandler, JobSpec } from '../jobs/index.ts';
import type { WithdrawalService } from './service.ts';
import type { WithdrawalLegRow, WithdrawalRow } from './types.ts';

/**
 * The deadlines of withdrawal orders and their fills, each a durable job: the order's expiry, its approval
 * deadline, and the assumed receipt of a fill; and the handlers that run them.
 */

export const EXPIRE_WITHDRAWAL_TASK = 'withdrawals.expire';
export const APPROVAL_TTL_TASK = 'withdrawals.approval_ttl';
export const AUTO_CONFIRM_FILL_TASK = 'withdrawals.auto_confirm_fill';
/** Receipt of a fill is assumed this long after it settles unless the withdrawer disputes it (spec, Limits). */
export const FILL_AUTO_CONFIRM_MS = 3 * HOUR_MS;

/** A deadline of one thing: one pending job per task and id (`job_key`), with ids only in its payload. */
function deadlineJob(task: string, white_label_id: string, target: { withdrawal_id: string } | { leg_ref: string }, run_at: Date): JobSpec {
  const id = 'withdrawal_id' in target ? target.withdrawal_id : target.leg_ref;
  return { task, payload: { white_label_id, ...target }, run_at, job_key: `${task}:${id}`, white_label_id };
}

export function expireJob(row: WithdrawalRow): JobSpec {
  return deadlineJob(EXPIRE_WITHDRAWAL_TASK, row.white_label_id, { withdrawal_id: row.withdrawal_id }, row.expires_at);
}

export function approvalTtlJob(row: WithdrawalRow): JobSpec {
  invariant(row.approval_expires_at, 'an approval deadline exists while pending');
  return deadlineJob(APPROVAL_TTL_TASK, row.white_label_id, { withdrawal_id: row.withdrawal_id }, row.approval_expires_at);
}

export function autoConfirmJob(leg: WithdrawalLegRow): JobSpec {
  invariant(leg.auto_confirm_at, 'a fill has its auto-confirm time');
  return deadlineJob(AUTO_CONFIRM_FILL_TASK, leg.white_label_id, { leg_ref: leg.leg_ref }, leg.auto_confirm_at);
}

/**
 * The job handlers of withdrawal deadlines. Each runs one short transaction and is a no-op when the
 * order or fill has moved on (a late, repeated or stale job changes nothing).
 */
export function createWithdrawalJobHandlers(database: Database, withdrawals: WithdrawalService): Record<string, JobHandler> {
  const target = (payload: Record<string, unknown>) => ({ white_label_id: String(payload.white_label_id), id: String(payload.withdrawal_id ?? payload.leg_ref) });
  return {
    [EXPIRE_WITHDRAWAL_TASK]: async (job) => {
      const { white_label_id, id } = target(job.payload);
      await database.transaction((tx) => withdrawals.expire(tx, white_label_id, id));
    },
    [APPROVAL_TTL_TASK]: async (job) => {
      const { white_label_id, id } = target(job.payload);
      await database.transaction((tx) => withdrawals.expireApproval(tx, white_label_id, id));
    },
    [AUTO_CONFIRM_FILL_TASK]: async (job) => {
      const { white_label_id, id } = target(job.payload);
      await database.transaction((tx) => withdrawals.autoConfirmFill(tx, white_label_id, id));
    },
  };
}
