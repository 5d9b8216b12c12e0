import type { Database, Queryable } from '../platform/db.ts';
import type { Clock } from '../platform/clock.ts';
import type { AuditTrail } from '../platform/audit.ts';
import type { EventsService } from '../events/service.ts';
import type { LedgerService } from '../ledger/service.ts';
import type { FeeService } from '../fees/service.ts';
import type { BeneficiaryService } from '../beneficiaries/service.ts';
import type { WithdrawalScenariosFor } from './scenario-hooks.ts';
import type { WithdrawalPolicyService } from './policy.ts';

/**
 * What the withdrawal classes are built from: `WithdrawalService` is given these and hands the same to each
 * class it is made of, in its constructor.
 */
export interface WithdrawalDependencies {
  events: EventsService;
  clock: Clock;
  ledger: LedgerService;
  fees: FeeService;
  beneficiaries: BeneficiaryService;
  policies: WithdrawalPolicyService;
  /** The brand's merchants the service runs itself, whose orders the back office never reaches (tenancy). */
  service_owned_merchants: (db: Queryable, white_label_id: string) => Promise<readonly string[]>;
  /** For the back office's decisions, each with its audit row in one transaction. */
  database: Database;
  audit: AuditTrail;
  /** Where a test-mode order's sandbox scenario acts; live orders get hooks that do nothing. */
  scenarios: WithdrawalScenariosFor;
}
