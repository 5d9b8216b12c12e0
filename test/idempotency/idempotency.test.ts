import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, openSecondInstance, type TestApp } from '../support/app.ts';
import { gatedControls, testWriteRoutes, type TestRouteControls } from '../support/test-routes.ts';
import { usingPostgres } from '../support/database.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { createDeposit } from '../support/slips.ts';

const URL = '/v1/pay/test-writes';
let app: TestApp;
let controls: TestRouteControls;

async function countEvents(target: TestApp = app): Promise<number> {
  const { rows } = await target.testDatabase.database.query<{ count: number }>("SELECT count(*)::int AS count FROM events WHERE type = 'test_write.created'");
  return rows[0]!.count;
}

beforeAll(async () => {
  controls = { gate: null, entered: () => {}, executions: 0 };
  app = await createTestApp({ extra_modules: [testWriteRoutes(controls)] });
});
afterAll(async () => {
  await app.close();
});

describe('idempotency: happy', () => {
  it('replays the original status and exact body with Idempotent-Replay: true and does the work once', async () => {
    const before = await countEvents();
    const first = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 500 }, idempotency_key: 'replay-1' });
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replay']).toBeUndefined();
    const second = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 500 }, idempotency_key: 'replay-1' });
    expect(second.statusCode).toBe(201);
    expect(second.headers['idempotent-replay']).toBe('true');
    expect(second.body).toBe(first.body);
    expect(await countEvents()).toBe(before + 1);
  });

  it('treats the same JSON with another key order or spacing as the same body', async () => {
    const first = await app.signed({ method: 'POST', url: URL, body: '{"amount_minor":7,"end_user_ref":"u"}', idempotency_key: 'order-1' });
    const second = await app.signed({ method: 'POST', url: URL, body: '{ "end_user_ref": "u",  "amount_minor": 7 }', idempotency_key: 'order-1' });
    expect(first.statusCode).toBe(201);
    expect(second.headers['idempotent-replay']).toBe('true');
    expect(second.body).toBe(first.body);
  });

  it('scopes keys per merchant: the same key of another merchant is a new request', async () => {
    const other = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
    await app.signed({ method: 'POST', url: URL, body: { amount_minor: 1 }, idempotency_key: 'shared-key' });
    const response = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 2 }, idempotency_key: 'shared-key', credentials: other });
    expect(response.statusCode).toBe(201);
    expect(response.headers['idempotent-replay']).toBeUndefined();
  });

  it('keeps a key 7 days, then forgets it', async () => {
    await app.signed({ method: 'POST', url: URL, body: { amount_minor: 3 }, idempotency_key: 'week-1' });
    app.clock.advance(7 * 24 * 3600 * 1000 - 1000);
    const within = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 4 }, idempotency_key: 'week-1' });
    expect(errorOf(within).code).toBe('idempotency_key_reused');
    app.clock.advance(2000);
    const after = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 4 }, idempotency_key: 'week-1' });
    expect(after.statusCode).toBe(201);
    expect(after.headers['idempotent-replay']).toBeUndefined();
    expect(await app.instance.housekeep()).toBeGreaterThanOrEqual(0);
  });
});

describe('idempotency: stored answers are sealed', () => {
  it('a deposit answer (slip token, QR payload, receiver account) rests sealed and still replays byte for byte', async () => {
    const key = `sealed-${Date.now()}`;
    const deposit = await createDeposit(app, { amount_minor: 10_000 });
    const { rows: legs } = await app.testDatabase.database.query<{ withdrawal_leg_ref: string }>('SELECT withdrawal_leg_ref FROM deposit_legs WHERE deposit_id = $1', [deposit.id]);
    const payee = await app.instance.services.withdrawals.destinationOf(app.testDatabase.database, app.sandbox.white_label_id, legs[0]!.withdrawal_leg_ref);
    // Secrets of the deposit just made: none of them may be readable in any stored answer.
    const secrets = [deposit.slip_upload.token, deposit.legs[0]!.qr_payload!, payee!.account_number];
    const { rows } = await app.testDatabase.database.query<{ text: string }>('SELECT response_body AS text FROM idempotency_records');
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.text.startsWith('v2.')).toBe(true);
      for (const secret of secrets) expect(row.text).not.toContain(secret);
    }

    const first = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 700 }, idempotency_key: key });
    const replay = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 700 }, idempotency_key: key });
    expect(replay.headers['idempotent-replay']).toBe('true');
    expect(replay.body).toBe(first.body);
    // A record stored before sealing (plain JSON) still replays until it expires.
    await app.testDatabase.database.query('UPDATE idempotency_records SET response_body = $1 WHERE idempotency_key = $2', [first.body, key]);
    const legacy = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 700 }, idempotency_key: key });
    expect(legacy.body).toBe(first.body);
    // A sealed answer moved under another key does not open: it is bound to its own record.
    const other = `${key}-moved`;
    await app.signed({ method: 'POST', url: URL, body: { amount_minor: 701 }, idempotency_key: other });
    const { rows: sealed } = await app.testDatabase.database.query<{ text: string }>('SELECT response_body AS text FROM idempotency_records WHERE idempotency_key = $1', [other]);
    await app.testDatabase.database.query('UPDATE idempotency_records SET response_body = $1 WHERE idempotency_key = $2', [sealed[0]!.text, key]);
    expect((await app.signed({ method: 'POST', url: URL, body: { amount_minor: 700 }, idempotency_key: key })).statusCode).toBe(500);
  });
});

/** The same body under the same key gets the first refusal back, byte for byte (its request id included), as a replay. */
async function expectRefusalReplayed(first: Awaited<ReturnType<TestApp['signed']>>, body: unknown, idempotency_key: string): Promise<void> {
  const again = await app.signed({ method: 'POST', url: URL, body, idempotency_key });
  expect(again.statusCode).toBe(first.statusCode);
  expect(again.headers['idempotent-replay']).toBe('true');
  expect(again.body).toBe(first.body);
}

describe('idempotency: errors', () => {
  it('idempotency_key_reused with original_request_id for another body', async () => {
    const first = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 10 }, idempotency_key: 'reuse-1' });
    const second = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 11 }, idempotency_key: 'reuse-1' });
    expect(second.statusCode).toBe(409);
    const error = errorOf(second);
    expect(error.code).toBe('idempotency_key_reused');
    expect(error.retryable).toBe(false);
    expect(error.details).toEqual({ original_request_id: first.headers['request-id'] });
  });

  it('a refusal no retry can turn is the key\'s answer: replayed to the same body, 409 to another; it writes nothing', async () => {
    const before = await countEvents();
    // Refused by its command, after its write: the write rolls back, the refusal stays with the key.
    const refused = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 12, fail_with: 'final_refusal' }, idempotency_key: 'final-refusal' });
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused).code).toBe('merchant_reference_in_use');
    expect(await countEvents()).toBe(before);
    await expectRefusalReplayed(refused, { amount_minor: 12, fail_with: 'final_refusal' }, 'final-refusal');
    const other = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 12 }, idempotency_key: 'final-refusal' });
    expect(other.statusCode).toBe(409);
    expect(errorOf(other).code).toBe('idempotency_key_reused');
    expect(errorOf(other).details).toEqual({ original_request_id: refused.headers['request-id'] });
    expect(await countEvents()).toBe(before);
  });

  it('a body refused before its command runs is the key\'s answer too, a body that is not JSON included', async () => {
    const before = await countEvents();
    const invalid = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 1.5 }, idempotency_key: 'invalid-body' });
    expect(invalid.statusCode).toBe(422);
    expect(errorOf(invalid).code).toBe('validation_error');
    await expectRefusalReplayed(invalid, { amount_minor: 1.5 }, 'invalid-body');
    // The corrected body under the same key is another request: it gets the conflict, and a new key succeeds.
    const corrected = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 2 }, idempotency_key: 'invalid-body' });
    expect(corrected.statusCode).toBe(409);
    expect(errorOf(corrected).code).toBe('idempotency_key_reused');
    const malformed = await app.signed({ method: 'POST', url: URL, body: '{"amount_minor": ', idempotency_key: 'malformed-body' });
    expect(malformed.statusCode).toBe(400);
    const otherMalformed = await app.signed({ method: 'POST', url: URL, body: '{"amount_minor": 3', idempotency_key: 'malformed-body' });
    expect(otherMalformed.statusCode).toBe(409);
    expect(errorOf(otherMalformed).code).toBe('idempotency_key_reused');
    expect(await countEvents()).toBe(before);
  });

  it('an answer a retry may get past consumes nothing: after a 500 or a state conflict the same key succeeds', async () => {
    const before = await countEvents();
    const failing = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 9, fail_with: 'plain_error' }, idempotency_key: 'after-error' });
    expect(failing.statusCode).toBe(500);
    expect(errorOf(failing).code).toBe('internal_error');
    expect(failing.body).not.toContain('boom');
    expect(failing.body).not.toContain('sk_test_');
    const conflict = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 9, fail_with: 'retryable_refusal' }, idempotency_key: 'after-error' });
    expect(conflict.statusCode).toBe(409);
    expect(errorOf(conflict).retryable).toBe(true);
    expect(await countEvents()).toBe(before);
    const valid = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 9 }, idempotency_key: 'after-error' });
    expect(valid.statusCode).toBe(201);
    expect(valid.headers['idempotent-replay']).toBeUndefined();
    expect(await countEvents()).toBe(before + 1);
  });

  // On PGlite every query waits for the open transaction, so a concurrent request cannot observe the
  // first one running: it waits, then replays. On PostgreSQL it answers idempotency_in_flight.
  it('an error marked commit_writes keeps its writes, is not stored, and a retry with the key runs anew', async () => {
    const before = await countEvents();
    const refused = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 77, fail_with: 'committed_conflict' }, idempotency_key: 'keeps-writes' });
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused).code).toBe('beneficiary_not_verified');
    expect(await countEvents()).toBe(before + 1);
    const { rows } = await app.testDatabase.database.query("SELECT 1 FROM idempotency_records WHERE idempotency_key = 'keeps-writes'");
    expect(rows).toHaveLength(0);
    const again = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 77, fail_with: 'committed_conflict' }, idempotency_key: 'keeps-writes' });
    expect(again.headers['idempotent-replay']).toBeUndefined();
    expect(await countEvents()).toBe(before + 2);
  });

  it.skipIf(usingPostgres)('PGlite: a concurrent duplicate waits for the first and replays it', async () => {
    const gated = gatedControls();
    const local = await createTestApp({ extra_modules: [testWriteRoutes(gated)] });
    try {
      const first = local.signed({ method: 'POST', url: URL, body: { amount_minor: 20 }, idempotency_key: 'flight-p' });
      await gated.waitEntered();
      const second = local.signed({ method: 'POST', url: URL, body: { amount_minor: 20 }, idempotency_key: 'flight-p' });
      gated.open();
      const [firstResponse, secondResponse] = await Promise.all([first, second]);
      expect(firstResponse.statusCode).toBe(201);
      expect(secondResponse.statusCode).toBe(201);
      expect(secondResponse.headers['idempotent-replay']).toBe('true');
      expect(gated.executions).toBe(1);
    } finally {
      await local.close();
    }
  });

  it.skipIf(!usingPostgres)('idempotency_in_flight with retry_after_seconds 1 while the first request runs', async () => {
    const gated = gatedControls();
    const local = await createTestApp({ extra_modules: [testWriteRoutes(gated)] });
    try {
      const first = local.signed({ method: 'POST', url: URL, body: { amount_minor: 20 }, idempotency_key: 'flight-1' });
      await gated.waitEntered();
      const second = await local.signed({ method: 'POST', url: URL, body: { amount_minor: 20 }, idempotency_key: 'flight-1' });
      expect(second.statusCode).toBe(409);
      expect(errorOf(second).code).toBe('idempotency_in_flight');
      expect(errorOf(second).retry_after_seconds).toBe(1);
      expect(errorOf(second).retryable).toBe(true);
      gated.open();
      expect((await first).statusCode).toBe(201);
      const third = await local.signed({ method: 'POST', url: URL, body: { amount_minor: 20 }, idempotency_key: 'flight-1' });
      expect(third.headers['idempotent-replay']).toBe('true');
      expect(gated.executions).toBe(1);
    } finally {
      await local.close();
    }
  });

  it('a 429 never consumes the key', async () => {
    const client = { device_fingerprint: 'dev-429', ip: '203.0.113.9', user_agent: 'test' };
    for (let index = 0; index < 10; index += 1) {
      const ok = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 1, end_user_ref: 'limited', client }, idempotency_key: `fill-${index}` });
      expect(ok.statusCode).toBe(201);
    }
    const limited = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 2, end_user_ref: 'limited', client }, idempotency_key: 'k-429' });
    expect(limited.statusCode).toBe(429);
    app.clock.advance(61_000);
    const later = await app.signed({ method: 'POST', url: URL, body: { amount_minor: 2, end_user_ref: 'limited', client }, idempotency_key: 'k-429' });
    expect(later.statusCode).toBe(201);
    expect(later.headers['idempotent-replay']).toBeUndefined();
  });
});

describe.skipIf(!usingPostgres)('idempotency across processes (PostgreSQL)', () => {
  it('a second process answers idempotency_in_flight while the first holds the key', async () => {
    const gated = gatedControls();
    const first = await createTestApp({ extra_modules: [testWriteRoutes(gated)] });
    const secondControls = { gate: null, entered: () => {}, executions: 0 };
    const second = await openSecondInstance(first, [testWriteRoutes(secondControls)]);
    try {
      const pending = first.signed({ method: 'POST', url: URL, body: { amount_minor: 30 }, idempotency_key: 'cross-1' });
      await gated.waitEntered();
      const payload = JSON.stringify({ amount_minor: 30 });
      const inject = () =>
        second.app.inject({
          method: 'POST',
          url: URL,
          payload,
          headers: signedHeaders({
            api_key: first.sandbox.api_key, signing_secret: first.sandbox.signing_secret, method: 'POST', target: URL,
            body: payload, idempotency_key: 'cross-1', timestamp_seconds: Math.floor(first.clock.now().getTime() / 1000),
          }),
        });
      const concurrent = await inject();
      expect(errorOf(concurrent).code).toBe('idempotency_in_flight');
      gated.open();
      expect((await pending).statusCode).toBe(201);
      const replay = await inject();
      expect(replay.statusCode).toBe(201);
      expect(replay.headers['idempotent-replay']).toBe('true');
      expect(gated.executions + secondControls.executions).toBe(1);
    } finally {
      await second.stop();
      await first.close();
    }
  });

  it('25 concurrent identical requests in one process execute exactly once', async () => {
    const local = await createTestApp({ extra_modules: [testWriteRoutes()] });
    try {
      const responses = await Promise.all(
        Array.from({ length: 25 }, () => local.signed({ method: 'POST', url: URL, body: { amount_minor: 40 }, idempotency_key: 'storm-1' })),
      );
      const codes = responses.map((response) => (response.statusCode === 201 ? '201' : errorOf(response).code));
      expect(codes.every((code) => code === '201' || code === 'idempotency_in_flight')).toBe(true);
      expect(await countEvents(local)).toBe(1);
      const originals = responses.filter((response) => response.statusCode === 201 && !response.headers['idempotent-replay']);
      expect(originals).toHaveLength(1);
    } finally {
      await local.close();
    }
  });
});
