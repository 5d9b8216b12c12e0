import client from 'prom-client';
import type { Backlog } from '../platform/backlog.ts';
import type { Clock } from '../platform/clock.ts';

/**
 * Gauges of the service's three queues, read from the database when /metrics is scraped: the durable jobs
 * (slip verification, expiries, settlements, clearing), the webhook deliveries, and the orders waiting for a
 * reviewer (by mode: a sandbox review waiting is not a live payer waiting). Each shows how many items wait and
 * how long the oldest has waited; the age is what an alert should watch (docs/operations.md, "What to watch"),
 * because a long queue that moves is healthy and a short one that does not is not.
 *
 * The queues are the database's, not the process's: every process shows the same values, so dashboards take the
 * maximum over processes. A read that fails (the database is out of reach) shows NaN for that scrape rather than
 * a stale number or a reassuring 0; the scrape itself still answers.
 */
export interface BacklogSources {
  jobs_due(): Promise<Backlog>;
  webhook_deliveries_due(): Promise<Backlog>;
  reviews_open(): Promise<{ live: Backlog; test: Backlog }>;
}

/** One reading of a queue: its backlog under each set of label values. */
type Reading = readonly { labels: Record<string, string>; backlog: Backlog }[];

/**
 * `read`, shared by the calls made while it is in flight: the two gauges of a queue are collected at once by
 * the same scrape (prom-client collects every metric concurrently), so each scrape reads each queue once.
 */
function sharedRead(read: () => Promise<Reading>): () => Promise<Reading | null> {
  let in_flight: Promise<Reading | null> | null = null;
  return () => {
    if (in_flight === null) {
      // A failed read answers null: see the module comment.
      in_flight = read()
        .catch(() => null)
        .finally(() => {
          in_flight = null;
        });
    }
    return in_flight;
  };
}

function ageSeconds(backlog: Backlog, clock: Clock): number {
  return backlog.oldest_at === null ? 0 : Math.max(0, (clock.now().getTime() - backlog.oldest_at.getTime()) / 1000);
}

interface QueueDefinition {
  name: string;
  what: string;
  label_names: readonly string[];
  /** The label values shown as NaN when a read fails. */
  unread_labels: readonly Record<string, string>[];
  read: () => Promise<Reading>;
}

function queueGauges(registry: client.Registry, clock: Clock, queue: QueueDefinition): void {
  const reading = sharedRead(queue.read);
  const gauge = (name: string, help: string, value: (backlog: Backlog) => number) =>
    new client.Gauge({
      name,
      help,
      labelNames: queue.label_names,
      registers: [registry],
      async collect() {
        this.reset();
        const answer = await reading();
        if (answer === null) {
          for (const labels of queue.unread_labels) this.set(labels, Number.NaN);
          return;
        }
        for (const { labels, backlog } of answer) this.set(labels, value(backlog));
      },
    });
  gauge(queue.name, `${queue.what}: how many (counted up to 100000)`, (backlog) => backlog.count);
  gauge(`${queue.name}_oldest_age_seconds`, `${queue.what}: seconds since the oldest became due (0 when none waits)`, (backlog) => ageSeconds(backlog, clock));
}

/** Registers the queue gauges on the instance's registry, reading each queue through its own module. */
export function registerBacklogGauges(registry: client.Registry, clock: Clock, sources: BacklogSources): void {
  const unlabelled = (read: () => Promise<Backlog>) => async (): Promise<Reading> => [{ labels: {}, backlog: await read() }];
  queueGauges(registry, clock, { name: 'jobs_due', what: 'Durable jobs due and not yet claimed by a worker', label_names: [], unread_labels: [{}], read: unlabelled(() => sources.jobs_due()) });
  queueGauges(registry, clock, {
    name: 'webhook_deliveries_due',
    what: 'Webhook deliveries due and not yet taken by a dispatcher',
    label_names: [],
    unread_labels: [{}],
    read: unlabelled(() => sources.webhook_deliveries_due()),
  });
  queueGauges(registry, clock, {
    name: 'reviews_open',
    what: 'Deposit orders waiting in review, by mode (live, test)',
    label_names: ['mode'],
    unread_labels: [{ mode: 'live' }, { mode: 'test' }],
    read: async () => {
      const { live, test } = await sources.reviews_open();
      return [
        { labels: { mode: 'live' }, backlog: live },
        { labels: { mode: 'test' }, backlog: test },
      ];
    },
  });
}
