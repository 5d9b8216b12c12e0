import type { PaymentClient } from './client.js';
import { assertEventEnvelope, type PaymentEvent } from './events.js';

/**
 * Reconciliation over the events feed (GET /v1/pay/events by `since_sequence`): the merchant's way to
 * catch up after downtime and to find events a webhook never brought. Every event after
 * `since_sequence` is handed to `on_event` in sequence order (feed it to `applyEvent`, which ignores what
 * was already applied), and holes in the sequence are reported.
 *
 * The spec (Events, Delivery rules): `sequence` increases per merchant; a temporary gap is normal (an
 * event whose transaction has not committed yet), and a gap older than 4 days is a real loss. A gap's
 * age is measured from the `created_at` of the first event after it: the missing events were written
 * before that one, so they are at least that old. A younger gap is `pending`, and `next_since_sequence`
 * stops just before it, so that the next run reads it again; a lost gap is reported in `lost` (ask the
 * provider, with the sequence numbers) and the next run goes past it.
 */

/** Replay window of an event sequence gap (spec, Limits): older than this, a gap is a loss. */
export const GAP_LOSS_AFTER_MS = 4 * 24 * 60 * 60 * 1000;
const MAX_PAGE_SIZE = 500;
const DEFAULT_MAX_PAGES = 100;

export interface SequenceGap {
  /** The last sequence before the gap (the run's `since_sequence` for a gap at its start). */
  after_sequence: number;
  /** The first sequence after it. */
  before_sequence: number;
  /** How many sequence numbers are missing. */
  missing: number;
  /** `created_at` of the event after the gap: the missing ones are older. */
  next_created_at: string;
  age_ms: number;
  /** Older than 4 days: a real loss. */
  lost: boolean;
}

export interface ReconcileOptions {
  client: PaymentClient;
  /** Where the previous run stopped (its `next_since_sequence`); 0 for everything. */
  since_sequence: number;
  /** Called for each event in sequence order; an error stops the run (the next starts from the same place). */
  on_event?: (event: PaymentEvent) => unknown;
  /** Events per page, 1 to 500; 500 by default. */
  page_size?: number;
  /** Pages per run (a bound on one run's work); 100 by default. `has_more` says when it stopped early. */
  max_pages?: number;
  /** The clock gap ages are measured with; Date.now by default. */
  now_ms?: () => number;
  signal?: AbortSignal;
}

export interface ReconcileResult {
  /** Events handed to `on_event`. */
  events: number;
  /** The highest sequence read, or `since_sequence` when none. */
  last_sequence: number;
  /** Where the next run starts: before the oldest gap that may still fill, else `last_sequence`. */
  next_since_sequence: number;
  /** Every gap found, pending and lost. */
  gaps: SequenceGap[];
  /** The gaps older than 4 days. */
  lost: SequenceGap[];
  /** True when the run stopped at `max_pages` with more events to read. */
  has_more: boolean;
}

export async function reconcile(options: ReconcileOptions): Promise<ReconcileResult> {
  const { client } = options;
  if (!Number.isSafeInteger(options.since_sequence) || options.since_sequence < 0) throw new RangeError('since_sequence is a non-negative integer');
  const page_size = options.page_size ?? MAX_PAGE_SIZE;
  if (!Number.isInteger(page_size) || page_size < 1 || page_size > MAX_PAGE_SIZE) throw new RangeError(`page_size is 1 to ${MAX_PAGE_SIZE}`);
  const max_pages = options.max_pages ?? DEFAULT_MAX_PAGES;
  if (!Number.isInteger(max_pages) || max_pages < 1) throw new RangeError('max_pages is a positive integer');
  const now_ms = options.now_ms ?? Date.now;

  let previous = options.since_sequence;
  let events = 0;
  let has_more = false;
  const gaps: SequenceGap[] = [];
  for (let page = 0; page < max_pages; page += 1) {
    const answer = await client.events.list({ since_sequence: previous, limit: page_size }, options.signal ? { signal: options.signal } : {});
    for (const event of answer.data) {
      assertEventEnvelope(event);
      if (event.sequence <= previous) throw new Error(`the feed went backwards: sequence ${event.sequence} after ${previous}`);
      if (event.sequence > previous + 1) {
        const age_ms = Math.max(0, now_ms() - Date.parse(event.created_at));
        gaps.push({
          after_sequence: previous,
          before_sequence: event.sequence,
          missing: event.sequence - previous - 1,
          next_created_at: event.created_at,
          age_ms,
          lost: age_ms > GAP_LOSS_AFTER_MS,
        });
      }
      await options.on_event?.(event);
      events += 1;
      previous = event.sequence;
    }
    has_more = answer.has_more;
    if (!answer.has_more) break;
  }
  const pending = gaps.find((gap) => !gap.lost);
  return {
    events,
    last_sequence: previous,
    next_since_sequence: pending ? pending.after_sequence : previous,
    gaps,
    lost: gaps.filter((gap) => gap.lost),
    has_more,
  };
}
