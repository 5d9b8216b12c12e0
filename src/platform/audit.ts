import type { Actor } from './access.ts';
import type { Queryable } from './db.ts';

/**
 * The audit log, as modules write to it: an administrative change and its audit row go in one
 * transaction, so the log holds a change exactly when it committed. The tenancy module keeps the log
 * and implements this; a module that makes back-office changes is given it in its constructor.
 */
export interface AuditTrail {
  audit(tx: Queryable, actor: Actor, white_label_id: string | null, action: string, target_type: string, target_id: string, details?: Record<string, unknown>): Promise<void>;
}
