import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.ts';
import { loadWebhookSettings, sandboxLoopbackOf } from '../../src/webhooks/settings.ts';
import type { DeliveryView } from '../../src/webhooks/service.ts';
import { MemoryReceiverStore, ReferenceReceiver, SigningKeyCache, type PublishedKey } from '../../examples/webhook-receiver/receiver.ts';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { usingPostgres } from '../support/database.ts';
import { startScriptedReceiver, type ScriptedReceiver } from '../support/webhook-receivers.ts';
import { createDeposit } from '../support/slips.ts';

/**
 * The development-mode loopback rule: on the embedded PGlite database with NODE_ENV not production, a
 * sandbox endpoint may point at this machine's loopback over plain HTTP (or HTTPS) without any flag, and
 * the service says so in its log; on PostgreSQL it takes the operator's WEBHOOK_SANDBOX_LOOPBACK, and
 * production refuses it whatever the flag. Live endpoints never may. The suite runs this file on both
 * engines, so each run proves the rule of its own engine through the back office and the dispatcher.
 */

let app: TestApp;
const logLines: string[] = [];
let receiver: ScriptedReceiver;

beforeAll(async () => {
  app = await createTestApp({ logger: createLogger('warn', { write: (line: string) => void logLines.push(line) }) });
  // The reference receiver, with the service's published keys, checks what arrives.
  const keys = new SigningKeyCache(async () => {
    const response = await app.instance.app.inject({ url: '/v1/webhooks/signing-keys' });
    return response.json<{ keys: PublishedKey[] }>();
  }, () => app.clock.now().getTime());
  const reference = new ReferenceReceiver({ livemode: false, keys, store: new MemoryReceiverStore(), now_ms: () => app.clock.now().getTime() });
  receiver = await startScriptedReceiver({ tls: null, behaviour: () => ({ handle: (body, headers) => reference.handle(body, headers) }) });
});
afterAll(async () => {
  await receiver.close();
  await app.instance.services.webhooks.dispatcher.stop();
  await app.close();
});

function createEndpoint(body: Record<string, unknown>) {
  return app.backoffice({ method: 'POST', url: '/v1/bo/webhooks', body: { merchant_id: app.sandbox.merchant_id, mode: 'test', ...body } });
}

describe('sandbox endpoints on loopback', () => {
  it.runIf(!usingPostgres)('embedded development mode: accepted over plain HTTP without a flag, with a warning in the log, and delivered', async () => {
    const created = await createEndpoint({ url: `${receiver.url}?token=secret-in-path` });
    expect(created.statusCode, created.body).toBe(201);
    const warning = logLines.map((line) => JSON.parse(line) as { level: string; msg: string; url_origin?: string }).find((entry) => entry.msg.includes('targets loopback'));
    expect(warning).toMatchObject({ level: 'warn', url_origin: new URL(receiver.url).origin });
    // The log keeps the origin only: the path and query may carry a merchant's secret.
    expect(logLines.join('\n')).not.toContain('secret-in-path');

    await createDeposit(app, { amount_minor: 10_000 });
    const webhooks = app.instance.services.webhooks;
    await webhooks.dispatcher.runUntilIdle();
    expect(receiver.requests.length).toBeGreaterThanOrEqual(1);
    const deliveries = await app.backoffice({ url: `/v1/bo/webhooks/${created.json<{ id: string }>().id}/deliveries` });
    const data = deliveries.json<{ data: DeliveryView[] }>().data;
    expect(data.length).toBeGreaterThanOrEqual(1);
    // The reference receiver verified the signature and answered 200.
    expect(data.every((delivery) => delivery.status === 'succeeded' && delivery.last_http_status === 200)).toBe(true);
  });

  it.runIf(usingPostgres)('PostgreSQL: refused without the operator flag', async () => {
    const refused = await createEndpoint({ url: receiver.url });
    expect(refused.statusCode).toBe(422);
    expect(errorOf(refused).details.fields).toEqual([expect.objectContaining({ path: 'url', reason: 'must_be_https' })]);
  });

  it('live endpoints never target loopback, on either engine', async () => {
    const plain = await createEndpoint({ mode: 'live', url: receiver.url });
    expect(errorOf(plain).details.fields).toEqual([expect.objectContaining({ reason: 'must_be_https' })]);
    const secure = await createEndpoint({ mode: 'live', url: 'https://127.0.0.1:9443/hooks' });
    expect(errorOf(secure).details.fields).toEqual([expect.objectContaining({ reason: 'address_not_allowed' })]);
  });

  it('production refuses loopback on the embedded database too, through the back office', async () => {
    const production = await createTestApp({ webhooks: { environment: { NODE_ENV: 'production' } } });
    try {
      expect(production.instance.services.webhooks.settings.sandbox_loopback).toBe(false);
      const refused = await production.backoffice({ method: 'POST', url: '/v1/bo/webhooks', body: { merchant_id: production.sandbox.merchant_id, mode: 'test', url: receiver.url } });
      expect(refused.statusCode).toBe(422);
      expect(errorOf(refused).details.fields).toEqual([expect.objectContaining({ path: 'url', reason: 'must_be_https' })]);
    } finally {
      await production.close();
    }
  });
});

describe('the rule', () => {
  it('defaults by mode; the operator flag decides outside production; production with the flag does not start', () => {
    const embedded = { embedded_database: true };
    const server = { embedded_database: false };
    expect(sandboxLoopbackOf(undefined, false, embedded)).toBe(true);
    expect(sandboxLoopbackOf(undefined, false, server)).toBe(false);
    expect(sandboxLoopbackOf(undefined, true, embedded)).toBe(false);
    expect(sandboxLoopbackOf(false, false, embedded)).toBe(false);
    expect(sandboxLoopbackOf(true, false, server)).toBe(true);
    expect(sandboxLoopbackOf(false, true, server)).toBe(false);
    expect(() => sandboxLoopbackOf(true, true, embedded)).toThrow(/WEBHOOK_SANDBOX_LOOPBACK cannot be true with NODE_ENV=production/);
    expect(loadWebhookSettings({}, embedded).sandbox_loopback).toBe(true);
    expect(loadWebhookSettings({ NODE_ENV: 'production' }, embedded).sandbox_loopback).toBe(false);
    expect(() => loadWebhookSettings({ NODE_ENV: 'production', WEBHOOK_SANDBOX_LOOPBACK: 'true' }, server)).toThrow(/invalid configuration/);
  });
});
