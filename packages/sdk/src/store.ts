import type { PaymentEvent } from './events.js';

/**
 * The receiver rules of the spec (Events, "Delivery rules"): delivery is at least once and in no
 * guaranteed order, so a merchant
 *  - answers 200 and does nothing for an event id it has already processed (keep ids at least 31 days);
 *  - applies `data.object` only when its `version` is higher than the stored one, with an atomic
 *    conditional update; a stale event gets 200 and no effect;
 *  - applies an immutable object (a balance_transaction: no `version`) once per object id, and
 *    accumulates those, never overwriting totals with `balance_after`.
 *
 * `applyEvent` does this over an `EventStore`, the merchant's storage. Its steps are idempotent, in this
 * order: (1) a seen event id is a duplicate; (2) the object is written only if newer; (3) the id is marked
 * seen. A crash between (2) and (3) means the redelivery finds the object already at that version (stale,
 * no effect) and marks it then; marking first would lose the update instead. Run the three in one
 * database transaction where you can; with SQL the conditional write is
 *
 *   INSERT INTO objects (kind, id, version, body) VALUES ($1, $2, $3, $4)
 *   ON CONFLICT (kind, id) DO UPDATE SET version = excluded.version, body = excluded.body
 *   WHERE objects.version < excluded.version
 *
 * (a row counted means applied), and the seen ids are a table with the event id as primary key.
 */

export type ApplyOutcome = 'applied' | 'stale' | 'duplicate';

/** What the store compares: the object's kind (`data.object.object`), id, and version (null when immutable). */
export interface ObjectKey {
  kind: string;
  id: string;
}

export interface EventStore {
  /** True when this event id was processed before. */
  hasSeen(event_id: string): Promise<boolean>;
  /**
   * Writes the object when none is stored or the stored version is lower; for an immutable object
   * (version null), only when none is stored. Answers whether it wrote. Must be atomic per key.
   */
  putIfNewer(key: ObjectKey, version: number | null, object: Record<string, unknown>): Promise<boolean>;
  /** Records the event id as processed. */
  markSeen(event_id: string, seen_at_ms: number): Promise<void>;
}

/** The object an event carries, as the store keys it; null when it has no id (nothing to apply). */
export function objectKeyOf(event: PaymentEvent): { key: ObjectKey; version: number | null } | null {
  const object = event.data.object as Record<string, unknown>;
  if (typeof object.id !== 'string' || typeof object.object !== 'string') return null;
  const version = typeof object.version === 'number' && Number.isSafeInteger(object.version) ? object.version : null;
  return { key: { kind: object.object, id: object.id }, version };
}

/** Applies a verified event to the store by the spec's receiver rules (see the file comment). */
export async function applyEvent(store: EventStore, event: PaymentEvent, now_ms: number = Date.now()): Promise<ApplyOutcome> {
  if (await store.hasSeen(event.id)) return 'duplicate';
  const target = objectKeyOf(event);
  const written = target === null ? true : await store.putIfNewer(target.key, target.version, event.data.object as Record<string, unknown>);
  await store.markSeen(event.id, now_ms);
  return written ? 'applied' : 'stale';
}

export interface StoredObject {
  version: number | null;
  object: Record<string, unknown>;
}

/** Seen ids kept at least this long (spec: 31 days recommended). */
export const SEEN_RETENTION_MS = 31 * 24 * 60 * 60 * 1000;

/**
 * An in-memory EventStore for tests, examples and single-process tools. It is atomic within one process
 * (each method runs to completion without awaiting); a server with several processes needs a database.
 * Seen ids older than 31 days are dropped, and at most `max_seen` are kept (the oldest go first).
 */
export class MemoryEventStore implements EventStore {
  private readonly seen = new Map<string, number>();
  private readonly objects = new Map<string, StoredObject>();

  constructor(private readonly options: { max_seen?: number; now_ms?: () => number } = {}) {}

  async hasSeen(event_id: string): Promise<boolean> {
    return this.seen.has(event_id);
  }

  async putIfNewer(key: ObjectKey, version: number | null, object: Record<string, unknown>): Promise<boolean> {
    const name = `${key.kind}:${key.id}`;
    const stored = this.objects.get(name);
    if (stored !== undefined) {
      if (version === null || stored.version === null || version <= stored.version) return false;
    }
    this.objects.set(name, { version, object });
    return true;
  }

  async markSeen(event_id: string, seen_at_ms: number): Promise<void> {
    this.seen.set(event_id, seen_at_ms);
    const now = this.options.now_ms?.() ?? seen_at_ms;
    const max = this.options.max_seen ?? 1_000_000;
    // The map keeps insertion order, so the oldest entries come first.
    for (const [id, at] of this.seen) {
      if (this.seen.size <= max && now - at <= SEEN_RETENTION_MS) break;
      this.seen.delete(id);
    }
  }

  /** The stored object of a kind and id, as the merchant's database would hold it. */
  get<Shape extends Record<string, unknown> = Record<string, unknown>>(kind: string, id: string): Shape | null {
    return (this.objects.get(`${kind}:${id}`)?.object as Shape | undefined) ?? null;
  }

  /** Every stored object of a kind. */
  all(kind: string): Record<string, unknown>[] {
    return [...this.objects.entries()].filter(([name]) => name.startsWith(`${kind}:`)).map(([, stored]) => stored.object);
  }
}
