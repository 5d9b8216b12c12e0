import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import type { TenancyService } from '../tenancy/service.ts';
import * as repository from './sessions-repository.ts';
import type { ConsoleSession } from './sessions.ts';

/**
 * Who has a review case open (docs/decisions/backoffice-console.md, "Who is on a case"). The case page records
 * its view when it is rendered and each time it polls (every five seconds while the tab is visible); a view seen
 * within the presence window is someone on the case. The queue shows the viewers of its page's cases, the case
 * its own, so that a reviewer sees a case taken up by someone else before a decision shows it. A person is never
 * shown to themselves, also not from another of their sessions.
 */

/** Four polls missed: a page closed, a laptop shut. */
export const PRESENCE_WINDOW_MS = 20_000;
/** A case shows at most this many viewers; a queue page asks for at most this many per case. */
const VIEWERS_PER_CASE = 5;

export interface CaseViewer {
  staff_id: string;
  name: string;
  since: Date;
}

export class CasePresence {
  constructor(private readonly deps: { database: Queryable; clock: Clock; tenancy: Pick<TenancyService, 'staffNames'> }) {}

  /** The session has the case open now. */
  async record(session: ConsoleSession, deposit_id: string): Promise<void> {
    await repository.recordCaseView(this.deps.database, {
      session_id: session.session_id,
      white_label_id: session.white_label_id,
      deposit_id,
      staff_id: session.staff_id,
      now: this.deps.clock.now(),
    });
  }

  /** The other people on each of these cases now, earliest first, with their names. */
  async viewers(session: ConsoleSession, deposit_ids: readonly string[]): Promise<Map<string, CaseViewer[]>> {
    const rows = await repository.caseViewers(this.deps.database, {
      white_label_id: session.white_label_id,
      deposit_ids,
      since: new Date(this.deps.clock.now().getTime() - PRESENCE_WINDOW_MS),
      except_staff_id: session.staff_id,
      limit: deposit_ids.length * VIEWERS_PER_CASE,
    });
    const names = await this.deps.tenancy.staffNames(this.deps.database, session.white_label_id, [...new Set(rows.map((row) => row.staff_id))]);
    const byCase = new Map<string, CaseViewer[]>();
    for (const row of rows) {
      const viewers = byCase.get(row.deposit_id) ?? [];
      if (viewers.length < VIEWERS_PER_CASE) viewers.push({ staff_id: row.staff_id, name: names.get(row.staff_id) ?? row.staff_id, since: row.first_seen_at });
      byCase.set(row.deposit_id, viewers);
    }
    return byCase;
  }
}
