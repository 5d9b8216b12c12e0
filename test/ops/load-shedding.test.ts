import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { createDeposit, nextReference, sandboxTransfer, slipBytes, SOMCHAI_SENDER, uploadMultipart } from '../support/slips.ts';
import { levelOf } from '../../src/ops/load-shedding.ts';

/**
 * Load shedding through the doors merchants and end users use, driven by the two measured signals: the
 * event loop's delay and the database's connection wait. Overloaded, the service refuses new deposits
 * first (503 route_unavailable with retry_after_seconds) and keeps accepting slips; reads go last; when
 * the pressure is gone, creation works again.
 */

let app: TestApp;

beforeAll(async () => {
  // Thresholds low enough for a test to reach: 50 ms of event-loop delay, 100 ms of connection wait.
  app = await createTestApp({ config: { LOAD_SHED_EVENT_LOOP_DELAY_MS: '50', LOAD_SHED_DATABASE_WAIT_MS: '100' } });
});
afterAll(async () => {
  app.instance.services.loadShedder.stop();
  await app.close();
});

function depositRequest() {
  const reference = nextReference('shed');
  return app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    body: {
      amount_minor: 20_000,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: { ...SOMCHAI_SENDER, account_number: `88${crypto.randomInt(10_000_000, 99_999_999)}` },
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.8', user_agent: 'shed-test' },
    },
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('levels', () => {
  it('pressure 1 sheds new deposits, 2 other writes, 4 reads', () => {
    expect([0, 0.99, 1, 1.99, 2, 3.99, 4, 10].map(levelOf)).toEqual([0, 0, 1, 1, 2, 2, 3, 3]);
  });
});

describe('overloaded by event-loop delay', () => {
  it('sheds deposit creation with 503 route_unavailable while slips are still accepted (202); recovers when the delay is gone', async () => {
    const before = await createDeposit(app, { amount_minor: 20_000 });
    const transfer = await sandboxTransfer(app, before);
    const shedder = app.instance.services.loadShedder;
    shedder.start();
    // The overload: the event loop is busy 120 ms of every 130 ms, as a process out of CPU would be.
    // Timers then run about 120 ms late (p90), which is 2.4 times the threshold.
    const blocker = setInterval(() => {
      const until = performance.now() + 120;
      while (performance.now() < until) {
        // Busy: this is the overload being measured.
      }
    }, 10);
    try {
      // Let the monitor read at least two full intervals of the overload.
      await sleep(1_800);
      expect(shedder.reading().level).toBeGreaterThanOrEqual(1);
      expect(shedder.reading().level).toBeLessThan(3);

      const shed = await depositRequest();
      expect(shed.statusCode, shed.body).toBe(503);
      expect(errorOf(shed)).toMatchObject({ code: 'route_unavailable', retryable: true });
      expect(errorOf(shed).retry_after_seconds).toBeGreaterThan(0);

      // The end user's slip is never shed.
      const upload = await uploadMultipart(app, before.slip_upload, slipBytes(transfer), { payload: transfer.slip.payload });
      expect(upload.statusCode, upload.body).toBe(202);
      // Status reads are shed last.
      expect((await app.signed({ url: `/v1/pay/deposits/${before.id}` })).statusCode).toBe(200);
    } finally {
      clearInterval(blocker);
    }
    // Once an interval passes without the overload the level is back to 0 (on a busy machine that may
    // take a few intervals) and creation works.
    for (let waited_ms = 0; shedder.reading().level !== 0; waited_ms += 250) {
      if (waited_ms > 10_000) throw new Error(`still shedding at level ${shedder.reading().level}: ${JSON.stringify(shedder.reading())}`);
      await sleep(250);
    }
    const created = await depositRequest();
    expect(created.statusCode, created.body).toBe(201);
    const metrics = await app.instance.services.metrics.registry.getSingleMetricAsString('http_requests_shed_total');
    expect(metrics).toMatch(/load_class="new_deposit"} [1-9]/);
    shedder.stop();
  });
});

describe('overloaded by database connection waits', () => {
  it('a measured wait of several thresholds sheds deposits and other writes, not slips or reads; the next quiet reading lifts it', async () => {
    const before = await createDeposit(app, { amount_minor: 20_000 });
    const transfer = await sandboxTransfer(app, before);
    const database = app.testDatabase.database;
    const shedder = app.instance.services.loadShedder;
    database.acquire_wait?.takeLongestMs();
    // Every connection is held for 350 ms (PGlite has one; the PostgreSQL test pool has 20), and one more
    // transaction queues behind them: it waits about 350 ms for a connection, 3.5 thresholds.
    async function saturate(): Promise<void> {
      const holders = Array.from({ length: database.engine === 'pglite' ? 1 : 20 }, () => database.transaction(() => sleep(350)));
      await sleep(20);
      const queued = database.transaction(async (tx) => tx.query('SELECT 1'));
      await Promise.all([...holders, queued]);
    }
    // One saturated interval is not enough: a level needs two in a row.
    await saturate();
    expect(shedder.sample()).toMatchObject({ level: 0 });
    await saturate();
    const reading = shedder.sample();
    expect(reading.database_wait_ms).toBeGreaterThanOrEqual(250);
    expect(reading.level).toBe(2);

    const shed = await depositRequest();
    expect(shed.statusCode).toBe(503);
    expect(errorOf(shed).code).toBe('route_unavailable');
    const otherWrite = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${before.id}/slip-token`, idempotency_key: crypto.randomUUID() });
    expect(otherWrite.statusCode).toBe(503);
    expect(errorOf(otherWrite)).toMatchObject({ code: 'service_unavailable', retryable: true });
    const upload = await uploadMultipart(app, before.slip_upload, slipBytes(transfer), { payload: transfer.slip.payload });
    expect(upload.statusCode, upload.body).toBe(202);
    expect((await app.signed({ url: `/v1/pay/deposits/${before.id}` })).statusCode).toBe(200);
    // The back office is never shed: the people resolving the incident need it.
    expect((await app.backoffice({ url: '/v1/bo/brands' })).statusCode).toBe(200);

    // A reading with no wait in it lifts the shedding.
    database.acquire_wait?.takeLongestMs();
    expect(shedder.sample().level).toBe(0);
    expect((await depositRequest()).statusCode).toBe(201);
  });
});
