import client from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClock } from '../../src/platform/clock.ts';
import { enqueueJob } from '../../src/jobs/index.ts';
import { registerBacklogGauges } from '../../src/ops/backlog-metrics.ts';
import type { Backlog } from '../../src/platform/backlog.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs } from '../support/slips.ts';

/**
 * The queue gauges of /metrics (src/ops/backlog-metrics.ts), scraped as Prometheus scrapes them: the jobs due,
 * the webhook deliveries due and the orders in review, each with the age of its oldest item.
 */
const TOKEN = 'metrics-scraper-token-backlog-0123456789';
const BACKLOG_TASK = 'test.backlog_gauge';
let app: TestApp;
let ran = 0;

beforeAll(async () => {
  app = await createTestApp({
    config: { METRICS_TOKEN: TOKEN },
    job_handlers: { [BACKLOG_TASK]: async () => void (ran += 1) },
    webhooks: { settings: { sandbox_loopback: true } },
  });
});
afterAll(async () => {
  await app.close();
});

/** The value of one sample of the scrape, or undefined when the sample is absent. */
async function scrape(): Promise<(sample: string) => number | undefined> {
  const response = await app.instance.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } });
  expect(response.statusCode).toBe(200);
  const lines = response.body.split('\n');
  return (sample) => {
    const line = lines.find((candidate) => candidate.startsWith(`${sample} `));
    return line === undefined ? undefined : Number(line.slice(sample.length + 1));
  };
}

describe('queue gauges on /metrics', () => {
  it('show an order waiting in review by mode, and how long it has waited', async () => {
    const before = await scrape();
    expect(before('reviews_open{mode="test"}')).toBe(0);
    expect(before('reviews_open_oldest_age_seconds{mode="test"}')).toBe(0);
    expect(before('reviews_open{mode="live"}')).toBe(0);
    // The 101.00 THB sandbox scenario sends the order to review (SENDER_NAME_MISMATCH).
    const order = await createDeposit(app, { amount_minor: 10_100 });
    let reviewed_at = 0;
    for (let second = 0; second < 30 && reviewed_at === 0; second += 1) {
      app.clock.advance(1_000);
      await runJobs(app);
      if ((await getDeposit(app, order.id)).status === 'under_review') reviewed_at = app.clock.now().getTime();
    }
    expect(reviewed_at).toBeGreaterThan(0);
    app.clock.advance(300_000);
    const after = await scrape();
    expect(after('reviews_open{mode="test"}')).toBe(1);
    expect(after('reviews_open{mode="live"}')).toBe(0);
    const age = after('reviews_open_oldest_age_seconds{mode="test"}') ?? -1;
    expect(age).toBeGreaterThanOrEqual(300);
    expect(age).toBeLessThanOrEqual(301);
  });

  it('show a job due and not yet run, with its age, and nothing once the worker ran it', async () => {
    await runJobs(app);
    const ran_before = ran;
    await enqueueJob(app.testDatabase.database, app.clock, { task: BACKLOG_TASK, payload: {} });
    app.clock.advance(120_000);
    const waiting = await scrape();
    expect(waiting('jobs_due')).toBeGreaterThanOrEqual(1);
    expect(waiting('jobs_due_oldest_age_seconds')).toBe(120);
    await runJobs(app);
    expect(ran).toBe(ran_before + 1);
    const drained = await scrape();
    expect(drained('jobs_due')).toBe(0);
    expect(drained('jobs_due_oldest_age_seconds')).toBe(0);
  });

  it('show webhook deliveries due while no dispatcher runs', async () => {
    const endpoint = await app.instance.app.inject({
      method: 'POST',
      url: '/v1/bo/webhooks',
      headers: { authorization: `Bearer ${app.operator_token}`, 'content-type': 'application/json', 'idempotency-key': 'backlog-endpoint' },
      payload: { merchant_id: app.sandbox.merchant_id, mode: 'test', url: 'http://127.0.0.1:9/hooks' },
    });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    await createDeposit(app, { amount_minor: 10_000 });
    await runJobs(app);
    // Deliveries are made from the outbox by the dispatcher's fan-out; nothing sends them here.
    await app.instance.services.webhooks.dispatcher.fanOut();
    app.clock.advance(60_000);
    const due = await scrape();
    expect(due('webhook_deliveries_due')).toBeGreaterThanOrEqual(1);
    expect(due('webhook_deliveries_due_oldest_age_seconds')).toBeGreaterThanOrEqual(60);
  });
});

describe('queue gauges when the database does not answer', () => {
  it('read each queue once per scrape, and show NaN when the read fails', async () => {
    const registry = new client.Registry();
    const clock = new TestClock('2026-08-01T00:00:00.000Z');
    const reads = { jobs: 0, deliveries: 0, reviews: 0 };
    const waiting: Backlog = { count: 3, oldest_at: new Date('2026-07-31T23:59:00.000Z') };
    registerBacklogGauges(registry, clock, {
      jobs_due: async () => ((reads.jobs += 1), waiting),
      webhook_deliveries_due: async () => {
        reads.deliveries += 1;
        throw new Error('connection terminated');
      },
      reviews_open: async () => ((reads.reviews += 1), { live: waiting, test: { count: 0, oldest_at: null } }),
    });
    const text = await registry.metrics();
    expect(reads).toEqual({ jobs: 1, deliveries: 1, reviews: 1 });
    expect(text).toContain('\njobs_due 3\n');
    expect(text).toContain('\njobs_due_oldest_age_seconds 60\n');
    expect(text).toContain('reviews_open_oldest_age_seconds{mode="live"} 60');
    expect(text).toContain('reviews_open_oldest_age_seconds{mode="test"} 0');
    expect(text).toContain('\nwebhook_deliveries_due Nan\n');
    expect(text).toContain('\nwebhook_deliveries_due_oldest_age_seconds Nan\n');
    // prom-client writes NaN as "Nan", which Prometheus parses as NaN. The next scrape reads again: a reading is shared only while it is in flight.
    await registry.metrics();
    expect(reads).toEqual({ jobs: 2, deliveries: 2, reviews: 2 });
  });
});
