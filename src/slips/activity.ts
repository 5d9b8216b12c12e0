import type { Queryable } from '../platform/db.ts';
import * as repository from './repository.ts';

/**
 * What slip intake holds of an order: how many receipts it has, and how many are not processed yet. The
 * deposit service asks it before a cancel (an order with a slip cannot be canceled) and at expiry (a slip
 * being processed decides first). It reads only the receipts, so it is built before the deposit service,
 * which the rest of slip intake calls.
 */
export class SlipActivity {
  activity(db: Queryable, white_label_id: string, deposit_id: string): Promise<{ total: number; unprocessed: number }> {
    return repository.receiptCounts(db, white_label_id, deposit_id);
  }
}
