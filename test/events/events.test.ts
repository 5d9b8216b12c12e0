import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { testWriteRoutes } from '../support/test-routes.ts';
import { applyTransition, TransitionTable } from '../../src/events/transition.ts';
import { computePreviousAttributes } from '../../src/events/envelope.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import { InvariantViolation } from '../../src/platform/assert.ts';
import { getJob } from '../../src/jobs/index.ts';
import { LIST_EVENTS_STATEMENTS } from '../../src/events/repository.ts';

const URL = '/v1/pay/test-writes';
let app: TestApp;

beforeAll(async () => {
  app = await createTestApp({ extra_modules: [testWriteRoutes()] });
});
afterAll(async () => {
  await app.close();
});

async function write(key: string, credentials = app.sandbox) {
  const response = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 100 }, idempotency_key: key, credentials });
  expect(response.statusCode).toBe(201);
  return response;
}

interface ListBody {
  object: string;
  data: Array<Record<string, unknown> & { sequence: number; id: string }>;
  has_more: boolean;
  next_cursor: string | null;
}

describe('event envelope', () => {
  it('has exactly the spec fields, with the request that caused it', async () => {
    const response = await write('env-1');
    const list = (await app.signed({ url: '/v1/pay/events?since_sequence=0' })).json() as ListBody;
    const event = list.data.at(-1)!;
    expect(Object.keys(event)).toEqual(['id', 'object', 'type', 'api_version', 'livemode', 'created_at', 'sequence', 'account', 'request', 'data']);
    expect(event.id).toMatch(/^evt_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(event.object).toBe('event');
    expect(event.type).toBe('test_write.created');
    expect(event.api_version).toBe('2026-08-01');
    expect(event.livemode).toBe(false);
    expect(event.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(event.account).toEqual({ merchant_id: app.sandbox.merchant_id, white_label_id: app.sandbox.white_label_id });
    expect(event.request).toEqual({ id: response.headers['request-id'], idempotency_key: 'env-1' });
    expect(event.data).toEqual({ object: response.json(), previous_attributes: null });
  });

  it('numbers events per merchant and environment, strictly increasing', async () => {
    const other = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
    await write('seq-a1', other);
    await write('seq-a2', other);
    await write('seq-live', live);
    const otherEvents = (await app.signed({ url: '/v1/pay/events', credentials: other })).json() as ListBody;
    expect(otherEvents.data.map((event) => event.sequence)).toEqual([1, 2]);
    const liveEvents = (await app.signed({ url: '/v1/pay/events', credentials: live })).json() as ListBody;
    expect(liveEvents.data.map((event) => [event.sequence, event.livemode])).toEqual([[1, true]]);
    const mine = (await app.signed({ url: '/v1/pay/events' })).json() as ListBody;
    expect(mine.data.every((event) => (event.account as { merchant_id: string }).merchant_id === app.sandbox.merchant_id)).toBe(true);
  });

  it('omits previous_attributes for immutable objects and keeps only changed keys otherwise', async () => {
    const envelope = await app.testDatabase.database.transaction((tx) =>
      app.instance.services.events.emitEvent(tx, {
        white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false,
        type: 'balance.credited', object: { id: 'btxn_x', object: 'balance_transaction' }, previous_attributes: undefined, cause: SYSTEM_CAUSE,
      }),
    );
    expect('previous_attributes' in envelope.data).toBe(false);
    expect('request' in envelope).toBe(false);
    expect(computePreviousAttributes({ version: 2, status: 'a', amount: 1, legs: [1] }, { version: 3, status: 'b', amount: 1, legs: [1, 2] })).toEqual({
      status: 'a', legs: [1], version: 2,
    });
  });
});

describe('the stored envelope', () => {
  it('is byte for byte the JSON of the returned envelope, with the number the feed handed out, even when the object holds look-alike text', async () => {
    // Object keys and values that spell the sequence slot must not be mistaken for it.
    const object = { id: 'obj_1', object: 'probe', note: '"sequence":0,', sequence: 0, nested: { sequence: 0 } };
    const emitted = [];
    for (let round = 0; round < 3; round += 1) {
      emitted.push(
        await app.testDatabase.database.transaction((tx) =>
          app.instance.services.events.emitEvent(tx, {
            white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false,
            type: 'probe.updated', object, previous_attributes: { version: 1 }, cause: SYSTEM_CAUSE,
          }),
        ),
      );
    }
    const sequences = emitted.map((envelope) => envelope.sequence);
    expect(sequences[1]).toBe(sequences[0]! + 1);
    expect(sequences[2]).toBe(sequences[0]! + 2);
    for (const envelope of emitted) {
      const { rows } = await app.testDatabase.database.query<{ text: string; sequence: number }>(
        'SELECT envelope::text AS text, sequence FROM events WHERE white_label_id = $1 AND event_id = $2',
        [app.sandbox.white_label_id, envelope.id],
      );
      expect(rows[0]?.sequence).toBe(envelope.sequence);
      expect(rows[0]?.text).toBe(JSON.stringify(envelope));
      expect((JSON.parse(rows[0]!.text) as { data: { object: unknown } }).data.object).toEqual(object);
    }
  });
});

describe('GET /v1/pay/events paging', () => {
  it('pages with since_sequence, limit and next_cursor; limit may change between pages', async () => {
    const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    for (let index = 0; index < 7; index += 1) await write(`page-${index}`, merchant);
    const first = (await app.signed({ url: '/v1/pay/events?limit=3', credentials: merchant })).json() as ListBody;
    expect(first.data.map((event) => event.sequence)).toEqual([1, 2, 3]);
    expect(first.has_more).toBe(true);
    const second = (await app.signed({ url: `/v1/pay/events?limit=2&cursor=${first.next_cursor}`, credentials: merchant })).json() as ListBody;
    expect(second.data.map((event) => event.sequence)).toEqual([4, 5]);
    const third = (await app.signed({ url: `/v1/pay/events?limit=10&cursor=${second.next_cursor}`, credentials: merchant })).json() as ListBody;
    expect(third.data.map((event) => event.sequence)).toEqual([6, 7]);
    expect(third.has_more).toBe(false);
    expect(third.next_cursor).toBeNull();
    const since = (await app.signed({ url: '/v1/pay/events?since_sequence=5', credentials: merchant })).json() as ListBody;
    expect(since.data.map((event) => event.sequence)).toEqual([6, 7]);
    const descending = (await app.signed({ url: '/v1/pay/events?order=desc&limit=2', credentials: merchant })).json() as ListBody;
    expect(descending.data.map((event) => event.sequence)).toEqual([7, 6]);
    const next = (await app.signed({ url: `/v1/pay/events?order=desc&limit=2&cursor=${descending.next_cursor}`, credentials: merchant })).json() as ListBody;
    expect(next.data.map((event) => event.sequence)).toEqual([5, 4]);
  });

  it('cursor_filter_mismatch when a filter changes mid-cursor', async () => {
    const merchant = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    for (let index = 0; index < 3; index += 1) await write(`cf-${index}`, merchant);
    const first = (await app.signed({ url: '/v1/pay/events?limit=1&type=test_write.created', credentials: merchant })).json() as ListBody;
    for (const changed of ['type=deposit.settled', 'order=desc', 'status=created', 'from=2026-01-01T00:00:00.000Z', '']) {
      const response = await app.signed({ url: `/v1/pay/events?limit=1&cursor=${first.next_cursor}${changed ? `&${changed}` : ''}`, credentials: merchant });
      expect(response.statusCode).toBe(400);
      expect(errorOf(response).code).toBe('cursor_filter_mismatch');
    }
    const same = await app.signed({ url: `/v1/pay/events?limit=5&type=test_write.created&cursor=${first.next_cursor}`, credentials: merchant });
    expect(same.statusCode).toBe(200);
  });

  it('reads a page in key order in both directions, in the generic plan a named statement can switch to', async () => {
    // With one text for both directions (ORDER BY CASE ...), the generic plan read every event after the cursor and
    // sorted them: at a third of a large brand's month, millions of rows for a page of 100. A status no event has is
    // the case the planner misjudged.
    const plans = await app.testDatabase.database.transaction(async (tx) => {
      await tx.query('SET LOCAL enable_seqscan = off');
      await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
      const found: string[] = [];
      for (const [direction, text] of Object.entries(LIST_EVENTS_STATEMENTS)) {
        await tx.query(`PREPARE feed_${direction} AS ${text}`);
        const { rows } = await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE feed_${direction}('wl', 'mch', false, 0, 10001, NULL, 'no_such_status', NULL, NULL, 101, 10000)`);
        await tx.query(`DEALLOCATE feed_${direction}`);
        found.push(rows.map((row) => row['QUERY PLAN']).join('\n'));
      }
      return found;
    });
    for (const plan of plans) {
      // The filters sit above the window's own LIMIT, which reads events_pkey in key order: a filter the planner
      // thinks rare cannot turn the page into a scan of the table (on the grown month, 21 million events).
      expect(plan).toMatch(/Subquery Scan on scan_window[\s\S]*Filter:[\s\S]*Limit[\s\S]*Index Scan (Backward )?using events_pkey/);
      expect(plan.slice(plan.indexOf('Index Scan'))).not.toContain('Filter:');
      expect(plan).not.toContain('Sort');
    }
  });

  it('rejects bad query values with validation_error', async () => {
    for (const query of ['limit=0', 'limit=501', 'since_sequence=-1', 'cursor=%%%', 'from=2026-08-01', 'order=sideways', 'unknown=1']) {
      const response = await app.signed({ url: `/v1/pay/events?${query}` });
      expect(response.statusCode, query).toBe(422);
      expect(errorOf(response).code).toBe('validation_error');
    }
  });
});

describe('GET /v1/pay/events: the scan window', () => {
  // A window of 4 sequence numbers on a feed of 10 events, one a minute: every walk crosses three windows.
  let windowed: TestApp;
  let merchant: Awaited<ReturnType<TestApp['createMerchant']>>;
  const times: string[] = [];
  beforeAll(async () => {
    windowed = await createTestApp({ extra_modules: [testWriteRoutes()], events_scan_window: 4 });
    merchant = await windowed.createMerchant({ white_label_id: windowed.sandbox.white_label_id });
    for (let index = 0; index < 10; index += 1) {
      times.push(windowed.clock.now().toISOString());
      const response = await windowed.signed({ method: 'POST', url: URL, body: { amount_minor: 100 }, idempotency_key: `window-${index}`, credentials: merchant });
      expect(response.statusCode).toBe(201);
      windowed.clock.advance(60_000);
    }
  });
  afterAll(async () => {
    await windowed.close();
  });

  /** Every page of a walk from `query`, following next_cursor until has_more is false (at most 20 pages). */
  async function walk(query: string): Promise<ListBody[]> {
    const pages: ListBody[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 20; page += 1) {
      const response = await windowed.signed({ url: `/v1/pay/events?${query}${cursor ? `&cursor=${cursor}` : ''}`, credentials: merchant });
      expect(response.statusCode).toBe(200);
      const body = response.json() as ListBody;
      pages.push(body);
      expect(body.has_more).toBe(body.next_cursor !== null);
      if (!body.has_more) return pages;
      cursor = body.next_cursor;
    }
    throw new Error(`the walk of ${query} did not end`);
  }

  const sequences = (pages: ListBody[]) => pages.flatMap((page) => page.data.map((event) => event.sequence));

  it('a filter no event matches reads the feed a window a page, with has_more until its end', async () => {
    const pages = await walk('type=deposit.settled&limit=100');
    expect(pages.map((page) => page.data.length)).toEqual([0, 0, 0]);
    expect(sequences(await walk('status=no_such_status&order=desc'))).toEqual([]);
  });

  it('a filtered walk finds exactly the matching events across windows, in both orders', async () => {
    expect(sequences(await walk(`from=${times[5]}`))).toEqual([6, 7, 8, 9, 10]);
    expect(sequences(await walk(`to=${times[3]}&order=desc`))).toEqual([3, 2, 1]);
    expect(sequences(await walk(`from=${times[2]}&to=${times[8]}&limit=2`))).toEqual([3, 4, 5, 6, 7, 8]);
    expect(sequences(await walk('since_sequence=2&order=desc&limit=3'))).toEqual([10, 9, 8, 7, 6, 5, 4, 3]);
    // since_sequence past the head, descending: an empty range, which once asked PostgreSQL for a negative LIMIT.
    expect(sequences(await walk('since_sequence=12&order=desc'))).toEqual([]);
  });

  it('without filters a page is full up to the window, and a limit over it is served a window at a time', async () => {
    const pages = await walk('limit=3');
    expect(pages.map((page) => page.data.length)).toEqual([3, 3, 3, 1]);
    expect(sequences(await walk('limit=100'))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect((await walk('limit=100')).map((page) => page.data.length)).toEqual([4, 4, 2]);
  });
});

describe('applyTransition', () => {
  type Status = 'open' | 'done' | 'void';
  const table = new TransitionTable<Status>('sample_order', ['open', 'done', 'void'], [
    { from: null, to: 'open', trigger: 'create' },
    { from: 'open', to: 'done', trigger: 'finish' },
    { from: 'open', to: 'void', trigger: 'cancel' },
  ]);

  it('checks the table, bumps version, writes the event with previous_attributes and enqueues jobs in one transaction', async () => {
    const services = app.instance.services;
    let stored = { id: 'dep_01K0SAMPLE00000000000000000', object: 'sample_order', version: 1, status: 'open' as Status, note: 'a' };
    const created = await services.database.transaction((tx) =>
      applyTransition(tx, services, {
        table, trigger: 'create', before: null, after: stored, persist: async () => true,
        event: { type: 'sample_order.created', white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false, cause: SYSTEM_CAUSE },
        jobs: [{ task: 'sample.expire', payload: { id: stored.id }, job_key: `sample:${stored.id}`, run_at: new Date('2026-08-02T00:00:00.000Z') }],
      }),
    );
    expect(created.ok).toBe(true);
    const after = { ...stored, version: 2, status: 'done' as Status, note: 'b' };
    const result = await services.database.transaction((tx) =>
      applyTransition(tx, services, {
        table, trigger: 'finish', before: stored, after, persist: async () => {
          stored = after;
          return true;
        },
        event: { type: 'sample_order.finished', white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false, cause: SYSTEM_CAUSE },
      }),
    );
    expect(result.ok).toBe(true);
    const { rows } = await services.database.query<{ envelope: { data: { previous_attributes: unknown } } }>(
      "SELECT envelope FROM events WHERE type = 'sample_order.finished'",
    );
    expect(rows[0]!.envelope.data.previous_attributes).toEqual({ status: 'open', note: 'a', version: 1 });
    const jobs = await services.database.query<{ job_id: string }>("SELECT job_id FROM jobs WHERE task = 'sample.expire'");
    expect(jobs.rows).toHaveLength(1);
    expect((await getJob(services.database, jobs.rows[0]!.job_id))?.status).toBe('pending');
  });

  it('refuses a move outside the table and reports a lost version race as a result', async () => {
    const services = app.instance.services;
    const before = { id: 'dep_01K0SAMPLE00000000000000001', object: 'sample_order', version: 2, status: 'done' as Status };
    const event = { type: 'sample_order.canceled', white_label_id: app.sandbox.white_label_id, merchant_id: app.sandbox.merchant_id, livemode: false, cause: SYSTEM_CAUSE };
    await expect(
      services.database.transaction((tx) =>
        applyTransition(tx, services, { table, trigger: 'cancel', before, after: { ...before, version: 3, status: 'void' }, persist: async () => true, event }),
      ),
    ).rejects.toBeInstanceOf(InvariantViolation);
    const open = { ...before, status: 'open' as Status };
    const lost = await services.database.transaction((tx) =>
      applyTransition(tx, services, { table, trigger: 'cancel', before: open, after: { ...open, version: 3, status: 'void' }, persist: async () => false, event }),
    );
    expect(lost).toEqual({ ok: false, reason: 'version_conflict' });
    const { rows } = await services.database.query("SELECT 1 FROM events WHERE type = 'sample_order.canceled'");
    expect(rows).toHaveLength(0);
  });
});
