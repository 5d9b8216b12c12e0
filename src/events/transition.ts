import type { Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { invariant } from '../platform/assert.ts';
import { scheduleJob, type JobSpec } from '../jobs/index.ts';
import { computePreviousAttributes } from './envelope.ts';
import type { EventsService } from './service.ts';
import type { EventCause } from '../platform/cause.ts';

/**
 * The one way an order changes state. Each order type declares its transition table once; every
 * change goes through `applyTransition`, which in the caller's transaction checks the move against
 * the table, bumps `version`, persists the row with an optimistic version check, computes
 * `previous_attributes`, writes the event and enqueues the follow-up jobs. A move that is not in the
 * table is a programming error (an assertion), while a lost race is an expected outcome returned as
 * `version_conflict`.
 */
export interface TransitionRule<Status extends string> {
  /** `null` is the creation of the object. */
  from: Status | null;
  to: Status;
  trigger: string;
}

export class TransitionTable<Status extends string> {
  private readonly rules: ReadonlyMap<string, TransitionRule<Status>>;

  constructor(
    readonly object_name: string,
    readonly statuses: readonly Status[],
    rules: readonly TransitionRule<Status>[],
  ) {
    const map = new Map<string, TransitionRule<Status>>();
    for (const rule of rules) {
      invariant(rule.from === null || statuses.includes(rule.from), `${object_name}: unknown status ${String(rule.from)}`);
      invariant(statuses.includes(rule.to), `${object_name}: unknown status ${rule.to}`);
      const key = TransitionTable.key(rule.from, rule.to, rule.trigger);
      invariant(!map.has(key), `${object_name}: duplicate rule ${key}`);
      map.set(key, rule);
    }
    this.rules = map;
  }

  private static key(from: string | null, to: string, trigger: string): string {
    return `${from ?? '(none)'}|${to}|${trigger}`;
  }

  allows(from: Status | null, to: Status, trigger: string): boolean {
    return this.rules.has(TransitionTable.key(from, to, trigger));
  }

  /** Every rule, for documentation and for tests that walk the whole table. */
  list(): TransitionRule<Status>[] {
    return [...this.rules.values()];
  }
}

/** The shape every versioned order view has. */
export interface VersionedView<Status extends string> {
  id: string;
  object: string;
  version: number;
  status: Status;
  [field: string]: unknown;
}

export interface TransitionInput<Status extends string, View extends VersionedView<Status>> {
  table: TransitionTable<Status>;
  trigger: string;
  /** The view before the change; null when the object is being created. */
  before: View | null;
  /** The full view after the change, with `version` already bumped (1 on creation). */
  after: View;
  /**
   * Writes the row. For an update it must apply only where the stored version is `before.version`
   * and return false otherwise; for a creation it inserts and returns true.
   */
  persist: (tx: Queryable) => Promise<boolean>;
  event: {
    type: string;
    white_label_id: string;
    merchant_id: string;
    livemode: boolean;
    cause: EventCause;
    /** The object put in the event when it differs from `after` (e.g. with fields hidden from events). */
    object?: Record<string, unknown>;
    /** The view before, as the event shows it, when `object` is given. */
    before_object?: Record<string, unknown>;
  };
  jobs?: readonly JobSpec[];
}

export type TransitionResult<View> = { ok: true; view: View; event_id: string } | { ok: false; reason: 'version_conflict' };

export async function applyTransition<Status extends string, View extends VersionedView<Status>>(
  tx: Queryable,
  dependencies: { events: EventsService; clock: Clock },
  input: TransitionInput<Status, View>,
): Promise<TransitionResult<View>> {
  const from = input.before?.status ?? null;
  invariant(
    input.table.allows(from, input.after.status, input.trigger),
    `${input.table.object_name}: transition ${from ?? '(none)'} -> ${input.after.status} on ${input.trigger} is not in the table`,
  );
  const expectedVersion = input.before ? input.before.version + 1 : 1;
  invariant(input.after.version === expectedVersion, `${input.table.object_name}: version must move to ${expectedVersion}`);
  invariant(!input.before || input.before.id === input.after.id, 'a transition keeps the object id');

  if (!(await input.persist(tx))) return { ok: false, reason: 'version_conflict' };

  const eventObject = input.event.object ?? input.after;
  const beforeObject = input.event.before_object ?? input.before;
  const envelope = await dependencies.events.emitEvent(tx, {
    white_label_id: input.event.white_label_id,
    merchant_id: input.event.merchant_id,
    livemode: input.event.livemode,
    type: input.event.type,
    object: eventObject,
    previous_attributes: beforeObject ? computePreviousAttributes(beforeObject, eventObject) : null,
    cause: input.event.cause,
  });
  for (const job of input.jobs ?? []) await scheduleJob(tx, dependencies.clock, job);
  return { ok: true, view: input.after, event_id: envelope.id };
}
