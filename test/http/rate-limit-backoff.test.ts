import crypto from 'node:crypto';
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { testWriteRoutes } from '../support/test-routes.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { KEY_BACKOFF } from '../../src/http/rate-limit.ts';

/**
 * "Tight retry loops on 429 put the whole key into backoff" (spec, Errors, Rules 1), through a real socket:
 * the rule of docs/decisions/rate-limits.md, "Backoff of a key".
 */

const WRITES = '/v1/pay/test-writes';
let app: TestApp;
let port: number;

beforeAll(async () => {
  app = await createTestApp({ extra_modules: [testWriteRoutes()], config: { LOAD_SHEDDING: 'false', WORKER_ENABLED: 'false' } });
  await app.instance.listen();
  port = (app.instance.app.server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await app.close();
});

interface Answer {
  status: number;
  retry_after: number;
  body: { error?: { code: string; details: Record<string, unknown>; retry_after_seconds: number | null } };
}

/** One signed request over HTTP to the listening app, timed by the app's test clock. */
async function send(credentials: MerchantCredentials, method: 'GET' | 'POST', counter: number): Promise<Answer> {
  const target = method === 'GET' ? '/v1/pay/balance' : WRITES;
  const body = method === 'POST' ? JSON.stringify({ amount_minor: 1, end_user_ref: `u-${counter % 100}`, client: { device_fingerprint: 'd', ip: '198.51.100.1', user_agent: 'ua' } }) : undefined;
  const headers = signedHeaders({
    api_key: credentials.api_key,
    signing_secret: credentials.signing_secret,
    method,
    target,
    ...(body === undefined ? {} : { body, idempotency_key: `loop-${crypto.randomUUID()}` }),
    timestamp_seconds: Math.floor(app.clock.now().getTime() / 1000),
  });
  const response = await fetch(`http://127.0.0.1:${port}${target}`, { method, headers, ...(body === undefined ? {} : { body }) });
  return { status: response.status, retry_after: Number(response.headers.get('retry-after')), body: (await response.json()) as Answer['body'] };
}

/** Sends `count` requests, `parallel` at a time, and returns their answers in order. */
async function burst(credentials: MerchantCredentials, method: 'GET' | 'POST', count: number, parallel = 8): Promise<Answer[]> {
  const answers: Answer[] = [];
  for (let start = 0; start < count; start += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - start) }, (_, offset) => send(credentials, method, start + offset));
    answers.push(...(await Promise.all(batch)));
  }
  return answers;
}

describe('a key that loops on 429 is put into backoff', () => {
  it('refuses every bucket of that key until the backoff ends, restarts it when the loop goes on, and leaves other keys alone', async () => {
    // The start of a window, so that the 600 writes fit into one.
    const now = app.clock.now().getTime();
    app.clock.set(new Date(Math.ceil((now + 1) / 60_000) * 60_000));
    const looping = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    const other = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });

    const admitted = await burst(looping, 'POST', 600);
    expect(admitted.every((answer) => answer.status === 201)).toBe(true);
    app.clock.advance(50_000);

    // Refusals up to the threshold are the bucket's own: its window ends in 10 seconds.
    const refused = await burst(looping, 'POST', KEY_BACKOFF.refusals_before_backoff);
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(answer.body.error?.details).toEqual({ bucket: 'pay_write', scope: 'api_key' });
      expect(answer.retry_after).toBe(10);
    }
    // One more and the key is in backoff for 60 seconds, in its read bucket too.
    const tripped = await send(looping, 'POST', 0);
    expect(tripped.status).toBe(429);
    expect(tripped.body.error?.details).toEqual({ bucket: 'key_backoff', scope: 'api_key' });
    expect(tripped.retry_after).toBe(KEY_BACKOFF.seconds);
    expect(tripped.body.error?.retry_after_seconds).toBe(KEY_BACKOFF.seconds);
    const read = await send(looping, 'GET', 0);
    expect(read.status).toBe(429);
    expect(read.body.error?.details).toEqual({ bucket: 'key_backoff', scope: 'api_key' });

    // Another key of the same brand is unaffected, for writes and reads.
    expect((await send(other, 'POST', 0)).status).toBe(201);
    expect((await send(other, 'GET', 0)).status).toBe(200);

    // The pay_write window has turned, but the backoff goes on: 45 seconds left.
    app.clock.advance(15_000);
    const still = await send(looping, 'POST', 1);
    expect(still.status).toBe(429);
    expect(still.body.error?.details).toEqual({ bucket: 'key_backoff', scope: 'api_key' });
    expect(still.retry_after).toBe(45);

    // A loop during the backoff: past the tolerated requests, the backoff starts again from the latest.
    const during = await burst(looping, 'GET', KEY_BACKOFF.tolerated_during_backoff);
    expect(during.map((answer) => answer.status)).toEqual(during.map(() => 429));
    expect(during.at(-1)?.retry_after).toBe(KEY_BACKOFF.seconds);

    // When the first backoff would have ended, the restarted one still holds; after it, the key is admitted.
    app.clock.advance(46_000);
    expect((await send(looping, 'GET', 0)).status).toBe(429);
    app.clock.advance(15_000);
    expect((await send(looping, 'POST', 2)).status).toBe(201);
    expect((await send(looping, 'GET', 0)).status).toBe(200);

    // The key's state is one counter row, however many requests it sent.
    const { rows } = await app.testDatabase.database.query<{ count: number }>(
      "SELECT count(*)::integer AS count FROM rate_limit_counters WHERE bucket = 'key_backoff'",
    );
    expect(Number(rows[0]?.count)).toBe(1);
  });
});
