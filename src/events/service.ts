import { activeTestClock, type Clock } from '../platform/clock.ts';
import type { Queryable } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { invariant } from '../platform/assert.ts';
import { formatTimestamp } from '../platform/time.ts';
import type { EventEnvelope } from './envelope.ts';
import type { EventCause } from '../platform/cause.ts';
import { isUnitOfWork, TransactionFacts } from '../platform/unit-of-work.ts';
import type { ReadPart } from '../platform/read-part.ts';
import * as repository from './repository.ts';
import type { SecretBox } from '../platform/crypto.ts';
import { EventFieldSealer } from './sealed-fields.ts';

/**
 * A feed's last sequence, which a transaction remembers while it holds the feed's lock (src/platform/unit-of-work.ts
 * `TransactionFacts`, by `feedKey`): its events are then numbered without asking the database.
 */
const LOCKED_FEEDS = new TransactionFacts<number>('events.locked_feeds');

function feedKey(white_label_id: string, merchant_id: string, livemode: boolean): string {
  return `event_feed:${white_label_id}:${merchant_id}:${livemode}`;
}

/** Where the sequence number sits in a draft envelope's text (the draft carries 0). */
const SEQUENCE_SLOT = '"sequence":0,';

/**
 * The outbox. `emitEvent` is called inside the transaction that changes the state it reports, so an
 * event exists exactly when its change committed. Delivery (webhooks) reads the outbox afterwards.
 */


export interface EmitEventInput {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  type: string;
  /** The full business object at this moment; it must carry `object` and usually `id`. */
  object: Record<string, unknown>;
  /**
   * `null` on `*.created`, an object of changed keys otherwise, and `undefined` for immutable objects
   * (balance_transaction), whose events carry no `previous_attributes` key at all.
   */
  previous_attributes: Record<string, unknown> | null | undefined;
  cause: EventCause;
}

export type EventObserver = (envelope: EventEnvelope) => void;

/**
 * The most events one page of a feed reads, whatever its filters. A filter no index serves (`status`, `from`,
 * `to`, or a type that is rare) would otherwise read the whole feed for one page: on a month of a large brand,
 * `?from=<yesterday>` read 6.8 million events in 47 s before it found the first (docs/decisions/events.md).
 */
export const DEFAULT_EVENTS_SCAN_WINDOW = 10_000;

/** A page of a feed: its events, and where the next page starts when the scan window ended it short. */
export interface EventPage {
  events: EventEnvelope[];
  /** The cursor position of the next page (after it ascending, before it descending); null when the page was not cut short. */
  resume_at: number | null;
}

export class EventsService {
  private readonly observers: EventObserver[] = [];

  private readonly sealer: EventFieldSealer;

  private readonly scanWindow: number;

  /** `secret_box` seals the fields the outbox never keeps in clear (src/events/sealed-fields.ts). */
  constructor(
    private readonly clock: Clock,
    secret_box: SecretBox | null = null,
    options: { scan_window?: number | undefined } = {},
  ) {
    this.sealer = new EventFieldSealer(secret_box);
    this.scanWindow = options.scan_window ?? DEFAULT_EVENTS_SCAN_WINDOW;
    invariant(Number.isInteger(this.scanWindow) && this.scanWindow > 0, 'the scan window is a positive integer');
  }

  /** A stored envelope's text as its event was written (sealed fields opened): the body every delivery sends. */
  openStoredText(text: string): string {
    return this.sealer.open(text);
  }

  /** Observers are told after a write is issued (metrics); they must not do I/O. */
  observe(observer: EventObserver): void {
    this.observers.push(observer);
  }

  /**
   * Locks the feeds of these merchants in one fixed order (merchant id). A transaction that will write
   * events for several merchants calls this before anything else it locks, so that two such
   * transactions over the same merchants queue instead of deadlocking.
   */
  async lockFeeds(tx: Queryable, white_label_id: string, merchant_ids: readonly string[], livemode: boolean): Promise<void> {
    await this.lockFeedsAndRead(tx, white_label_id, merchant_ids, livemode, []);
  }

  /** True when this transaction holds the merchant's feed (locked by `lockFeeds`, held until it ends). */
  holdsFeed(tx: Queryable, white_label_id: string, merchant_id: string, livemode: boolean): boolean {
    return LOCKED_FEEDS.has(tx, feedKey(white_label_id, merchant_id, livemode));
  }

  /**
   * `lockFeeds`, and reads another module owns sent in the same statement (src/platform/read-part.ts),
   * answered in their order. A plain read waits for no lock, so it changes nothing in the lock order.
   */
  async lockFeedsAndRead<Carried>(tx: Queryable, white_label_id: string, merchant_ids: readonly string[], livemode: boolean, carried: readonly ReadPart<Carried>[]): Promise<Carried[]> {
    // Feeds this transaction locked already stay locked until it ends: asking again would change nothing.
    const missing = merchant_ids.filter((merchant_id) => !LOCKED_FEEDS.has(tx, feedKey(white_label_id, merchant_id, livemode)));
    if (missing.length === 0 && carried.length === 0) return [];
    const locked = await repository.lockFeeds(tx, white_label_id, missing, livemode, carried);
    for (const feed of locked.feeds) LOCKED_FEEDS.set(tx, feedKey(white_label_id, feed.merchant_id, livemode), feed.last_sequence);
    return locked.carried;
  }

  /**
   * The next sequence of a feed in this transaction, when the transaction can number its own events:
   * the feed is locked (by `lockFeeds`, or here on its first event) and stays locked until the
   * transaction ends, so no one else can take a number in between. Null outside a transaction.
   */
  private async nextSequence(tx: Queryable, white_label_id: string, merchant_id: string, livemode: boolean): Promise<number | null> {
    if (!isUnitOfWork(tx)) return null;
    const key = feedKey(white_label_id, merchant_id, livemode);
    let last = LOCKED_FEEDS.get(tx, key);
    if (last === undefined) {
      await this.lockFeeds(tx, white_label_id, [merchant_id], livemode);
      last = LOCKED_FEEDS.get(tx, key);
    }
    invariant(last !== undefined && Number.isSafeInteger(last) && last >= 0, 'a locked feed has a last sequence');
    LOCKED_FEEDS.set(tx, key, last + 1);
    return last + 1;
  }

  async emitEvent(tx: Queryable, input: EmitEventInput): Promise<EventEnvelope> {
    invariant(typeof input.object.object === 'string', 'an event object needs its `object` name');
    invariant(input.type.includes('.'), 'an event type is namespaced, e.g. deposit.created');
    if (input.type.endsWith('.created')) {
      invariant(input.previous_attributes === null, '*.created events carry previous_attributes null');
    }
    if (input.previous_attributes) {
      invariant('version' in input.previous_attributes, 'previous_attributes carries the old version');
    }
    const createdAt = this.clock.now();
    // Under a test clock, the clock's own merchant's events carry it, so that their webhooks are due by
    // the clock's time. Another merchant's event written by the same work (a withdrawal this deposit
    // fills) is delivered in real time: no merchant's webhooks wait on another merchant's clock.
    const scope = activeTestClock();
    const testClockId =
      scope && !input.livemode && scope.white_label_id === input.white_label_id && scope.merchant_id === input.merchant_id ? scope.test_clock_id : null;
    const request: EventEnvelope['request'] = {};
    if (input.cause.request_id) request.id = input.cause.request_id;
    if (input.cause.idempotency_key) request.idempotency_key = input.cause.idempotency_key;
    const data: EventEnvelope['data'] = { object: input.object };
    if (input.previous_attributes !== undefined) data.previous_attributes = input.previous_attributes;
    const draft: EventEnvelope = {
      id: newId('event'),
      object: 'event',
      type: input.type,
      api_version: input.cause.api_version,
      livemode: input.livemode,
      created_at: formatTimestamp(createdAt),
      sequence: 0,
      account: { merchant_id: input.merchant_id, white_label_id: input.white_label_id },
      ...(request.id || request.idempotency_key ? { request } : {}),
      data,
    };
    // The sequence is handed out by the same statement that stores the event, so the stored text is
    // split where the number goes. The keys before it are ids, names and a timestamp: the first
    // `"sequence":0,` in the text is the envelope's own.
    const text = this.sealer.seal(JSON.stringify(draft));
    const slot = text.indexOf(SEQUENCE_SLOT);
    invariant(slot > 0, 'an envelope has a top-level sequence');
    const row: repository.NewEventRow = {
      white_label_id: input.white_label_id,
      merchant_id: input.merchant_id,
      livemode: input.livemode,
      event_id: draft.id,
      type: input.type,
      object_type: String(input.object.object),
      object_id: typeof input.object.id === 'string' ? input.object.id : null,
      object_status: typeof input.object.status === 'string' ? input.object.status : null,
      created_at: createdAt,
      test_clock_id: testClockId,
      envelope_before_sequence: text.slice(0, slot + '"sequence":'.length),
      envelope_after_sequence: text.slice(slot + SEQUENCE_SLOT.length - 1),
    };
    // In a transaction the event is numbered here and written with the transaction's next statement;
    // elsewhere one statement takes the number and writes the event.
    const known = await this.nextSequence(tx, input.white_label_id, input.merchant_id, input.livemode);
    let sequence: number;
    if (known === null) {
      sequence = await repository.insertEventWithNextSequence(tx, row);
    } else {
      sequence = known;
      await repository.deferEventWithSequence(tx, row, sequence);
    }
    invariant(Number.isSafeInteger(sequence) && sequence > 0, 'a feed hands out positive sequence numbers');
    const envelope: EventEnvelope = { ...draft, sequence };
    for (const observer of this.observers) observer(envelope);
    return envelope;
  }

  /**
   * One key of an object as its event of `version` showed it, for a transition whose `previous_attributes` must
   * name a key the stored row cannot give back (a value computed when the event was written); null when no event
   * of that version is stored or it had no such key.
   */
  async objectKeyAtVersion(db: Queryable, white_label_id: string, object_id: string, version: number, key: string): Promise<unknown> {
    return (await repository.objectKeyAtVersion(db, white_label_id, object_id, version, key)).value;
  }

  /** The sandbox test clock an object was created under (src/test-clocks/), or null. */
  testClockOfObject(db: Queryable, white_label_id: string, object_id: string): Promise<string | null> {
    return repository.testClockOfObject(db, white_label_id, object_id);
  }

  /**
   * One event of a feed with its envelope text exactly as stored, which is the body every webhook
   * delivery of it sends byte for byte; null when the feed has no such event.
   */
  async findEventText(db: Queryable, feed: { white_label_id: string; merchant_id: string; livemode: boolean }, event_id: string): Promise<repository.StoredEventText | null> {
    const stored = await repository.findEventText(db, feed, event_id);
    return stored ? { ...stored, text: this.sealer.open(stored.text) } : null;
  }

  /**
   * The events written about one object of a brand (an order), oldest first and at most `limit`: the back office's
   * timeline. Types, statuses and times only, so no sealed envelope is opened for it.
   */
  timelineOfObject(db: Queryable, white_label_id: string, object_id: string, limit: number): Promise<repository.TimelineEventRow[]> {
    return repository.timelineOfObject(db, white_label_id, object_id, limit);
  }

  /**
   * A page of a feed: up to `limit` events within the filter's bounds, reading no more than the scan window of
   * sequence numbers (a feed's numbers have no gaps, so that is at most that many events). A page the window cut
   * short, with the feed going on past it, says where the next one starts (`resume_at`); it may hold no event.
   */
  async listEvents(db: Queryable, filter: repository.EventListFilter): Promise<EventPage> {
    const range = await this.windowOf(db, filter);
    const rows = await repository.listEvents(db, filter, range);
    // The driver parsed the stored json; its compact text is the stored text, so it opens as a delivery's body does.
    const events = rows.map((row) => JSON.parse(this.sealer.open(JSON.stringify(row.envelope))) as EventEnvelope);
    return { events, resume_at: rows.length < filter.limit ? await this.resumeAt(db, filter, range) : null };
  }

  /** The sequence range a page reads (both bounds exclusive): the scan window from the cursor, within the filter's bounds. */
  private async windowOf(db: Queryable, filter: repository.EventListFilter): Promise<repository.EventRange> {
    if (filter.descending) {
      const before = filter.before_sequence ?? (await repository.feedHead(db, filter.white_label_id, filter.merchant_id, filter.livemode)) + 1;
      return { after_sequence: Math.max(filter.after_sequence, before - this.scanWindow - 1), before_sequence: before };
    }
    const windowEnd = filter.after_sequence + this.scanWindow + 1;
    return { after_sequence: filter.after_sequence, before_sequence: filter.before_sequence === null ? windowEnd : Math.min(filter.before_sequence, windowEnd) };
  }

  /** Where a short page's next page starts: past the window's end when the feed goes on beyond it, else null. */
  private async resumeAt(db: Queryable, filter: repository.EventListFilter, range: repository.EventRange): Promise<number | null> {
    if (filter.descending) return range.after_sequence > filter.after_sequence ? range.after_sequence + 1 : null;
    const windowEnd = range.before_sequence - 1;
    if (filter.before_sequence !== null && range.before_sequence >= filter.before_sequence) return null;
    return windowEnd < (await repository.feedHead(db, filter.white_label_id, filter.merchant_id, filter.livemode)) ? windowEnd : null;
  }
}
