import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServiceInstance, type ServiceInstance } from '../../src/app.ts';
import { loadConfig } from '../../src/platform/config.ts';
import { createLogger } from '../../src/platform/logger.ts';
import { isDatabaseUnavailable, openDatabase } from '../../src/platform/db.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { TEST_MASTER_KEY } from '../support/app.ts';

/**
 * While PostgreSQL cannot be reached (a restart, a failover), requests answer 503 `service_unavailable`,
 * retryable with `retry_after_seconds`, never 500 `internal_error`: the chaos run saw 500s during its
 * PostgreSQL restart. The service here points at a port where nothing listens.
 */

let instance: ServiceInstance;

beforeAll(async () => {
  const database = await openDatabase({ database_url: 'postgres://postgres@127.0.0.1:9/unreachable', data_dir: null, pool_size: 2 });
  instance = createServiceInstance({
    config: loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: 'postgres://postgres@127.0.0.1:9/unreachable' }),
    database,
    logger: createLogger('silent'),
    master_key: TEST_MASTER_KEY,
  });
  await instance.app.ready();
});
afterAll(async () => {
  await instance.stop();
});

describe('the database out of reach', () => {
  it('a signed merchant request answers 503 service_unavailable, retryable, with retry_after_seconds', async () => {
    const headers = signedHeaders({
      api_key: 'sk_test_0000000000000000000000000000000000000000',
      signing_secret: 'whsec_unused',
      method: 'GET',
      target: '/v1/pay/balance',
      body: '',
      timestamp_seconds: Math.floor(Date.now() / 1000),
      nonce: 'nonce-database-unavailable',
    });
    const response = await instance.app.inject({ method: 'GET', url: '/v1/pay/balance', headers });
    expect(response.statusCode, response.body).toBe(503);
    const error = response.json<{ error: Record<string, unknown> }>().error;
    expect(error).toMatchObject({ code: 'service_unavailable', retryable: true, retry_after_seconds: 1, details: { reason: 'database_unavailable' } });
    expect(response.headers['request-id']).toBe(error.request_id);
  });

  it('tells an unavailable database from a fault of the statement', () => {
    expect(isDatabaseUnavailable(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('connection failure'), { code: '08006' }))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(Object.assign(new Error('deadlock detected'), { code: '40P01' }))).toBe(false);
    expect(isDatabaseUnavailable(Object.assign(new Error('syntax error'), { code: '42601' }))).toBe(false);
    expect(isDatabaseUnavailable('57P01')).toBe(false);
  });
});
