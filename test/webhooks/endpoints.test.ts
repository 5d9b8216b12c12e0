import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import { createDirectWebhookBackend, createRemoteWebhookBackend, type WebhookBackend, type WebhookCliIo } from '../../src/cli/webhooks.ts';
import { apiRoutesOf } from '../../src/http/server.ts';
import { WebhookService, type EndpointView } from '../../src/webhooks/service.ts';
import { defaultAddressPolicy } from '../../src/webhooks/url-policy.ts';
import { SigningKeyService } from '../../src/webhooks/signing-keys.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { createWebhookTestApp, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';

/**
 * Webhook endpoints through the back office and the CLI: the record, the address rules on write
 * (with the production address policy), brand scoping and roles, audit rows, the public signing-key
 * list, and rotation being the platform administrator's.
 */

let h: WebhookTestApp;
let other: MerchantCredentials;
let otherOperator: string;
let operator: string;
let reviewer: string;
const actor = { actor_type: 'system' as const, actor_id: 'webhooks-endpoints-test', request_id: null };

beforeAll(async () => {
  // The production policy: public addresses only, loopback for the sandbox because the switch is on.
  h = await createWebhookTestApp();
  const tenancy = h.app.instance.services.tenancy;
  other = await h.app.createMerchant();
  otherOperator = (await tenancy.createBackofficeCredential(actor, { white_label_id: other.white_label_id, role: 'operator', name: 'other' })).token;
  operator = (await tenancy.createBackofficeCredential(actor, { white_label_id: h.app.sandbox.white_label_id, role: 'operator', name: 'op' })).token;
  reviewer = (await tenancy.createBackofficeCredential(actor, { white_label_id: h.app.sandbox.white_label_id, role: 'reviewer', name: 'rev' })).token;
});

afterAll(async () => {
  await h.close();
});

async function auditActions(target_id: string): Promise<string[]> {
  const { rows } = await h.app.testDatabase.database.query<{ action: string }>('SELECT action FROM audit_log WHERE target_id = $1 ORDER BY created_at, audit_id', [target_id]);
  return rows.map((row) => row.action);
}

describe('the first signing key', () => {
  it('signs at once on a fresh database, even with a clock that moves on every read (the system clock)', async () => {
    const services = h.app.instance.services;
    expect((await services.database.query<{ count: number }>('SELECT count(*)::int AS count FROM webhook_signing_keys')).rows[0]!.count).toBe(0);
    // It starts a second behind the app's clock, so that the key it makes is valid for the later tests.
    let ms = h.app.clock.now().getTime() - 1_000;
    const moving = { now: () => new Date((ms += 1)) };
    const keys = new SigningKeyService({ database: services.database, clock: moving, secretBox: services.secretBox, events: services.events, tenancy: services.tenancy });
    // The signer is asked for the delivery's environment; a live one is signed by the live set.
    const live = { white_label_id: h.app.sandbox.white_label_id, livemode: true };
    const signer = await keys.signer(live);
    expect(signer.kid).toMatch(/^whk_/);
    expect((await keys.signer(live)).kid).toBe(signer.kid);
  });
});

describe('endpoint records', () => {
  it('creates, lists, reads, updates and deletes an endpoint, each change audited', async () => {
    const created = await h.createEndpoint({ url: 'https://127.0.0.1:9443/hooks?tenant=a', event_types: ['deposit.settled', 'deposit.settled', 'balance.credited'], description: 'main' }, operator);
    expect(created).toMatchObject({
      object: 'webhook_endpoint',
      merchant_id: h.app.sandbox.merchant_id,
      white_label_id: h.app.sandbox.white_label_id,
      livemode: false,
      url: 'https://127.0.0.1:9443/hooks?tenant=a',
      enabled: true,
      status: 'enabled',
      disabled_reason: null,
      event_types: ['balance.credited', 'deposit.settled'],
      description: 'main',
      version: 1,
      disabled_at: null,
    });
    expect(created.id).toMatch(/^we_[0-9A-Z]{26}$/);
    expect(created.always_delivered).toEqual(['deposit.reversed', 'withdrawal.fill_reversed', 'balance.debited', 'webhook.key.rotating', 'webhook.endpoint.disabled']);

    const listed = await h.backoffice('GET', `/v1/bo/webhooks?merchant_id=${h.app.sandbox.merchant_id}&mode=test`, undefined, reviewer);
    expect(listed.statusCode, listed.body).toBe(200);
    expect(listed.json().data.map((item: EndpointView) => item.id)).toContain(created.id);
    expect((await h.backoffice('GET', `/v1/bo/webhooks/${created.id}`, undefined, reviewer)).json()).toEqual(created);

    const patched = await h.backoffice('PATCH', `/v1/bo/webhooks/${created.id}`, { enabled: false, event_types: null }, operator);
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ enabled: false, status: 'disabled', disabled_reason: 'operator', event_types: null, version: 2 });
    const unchanged = await h.backoffice('PATCH', `/v1/bo/webhooks/${created.id}`, { enabled: false }, operator);
    expect(unchanged.json().version).toBe(2);
    const moved = await h.backoffice('PATCH', `/v1/bo/webhooks/${created.id}`, { url: 'https://127.0.0.1:9444/other', enabled: true }, operator);
    expect(moved.json()).toMatchObject({ url: 'https://127.0.0.1:9444/other', enabled: true, disabled_reason: null, version: 3 });

    const deleted = await h.backoffice('DELETE', `/v1/bo/webhooks/${created.id}`, undefined, operator);
    expect(deleted.json()).toEqual({ object: 'webhook_endpoint', id: created.id, deleted: true });
    expect((await h.backoffice('GET', `/v1/bo/webhooks/${created.id}`)).statusCode).toBe(404);
    expect((await h.backoffice('DELETE', `/v1/bo/webhooks/${created.id}`)).statusCode).toBe(404);
    expect(await auditActions(created.id)).toEqual(['webhook_endpoint.created', 'webhook_endpoint.updated', 'webhook_endpoint.updated', 'webhook_endpoint.deleted']);
    // The audit log keeps the URL's origin only: a query string might carry a merchant's secret.
    const { rows } = await h.app.testDatabase.database.query<{ details: Record<string, unknown> }>('SELECT details FROM audit_log WHERE target_id = $1', [created.id]);
    expect(JSON.stringify(rows)).not.toContain('tenant=a');
  });

  it('takes and shows the address as `deposit_url`, the spec\'s name, and still takes `url`, its earlier name', async () => {
    const post = (body: Record<string, unknown>) => h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: h.app.sandbox.merchant_id, mode: 'test', ...body });
    const created = await post({ deposit_url: 'https://127.0.0.1:9445/deposits' });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ deposit_url: 'https://127.0.0.1:9445/deposits', url: 'https://127.0.0.1:9445/deposits' });
    const id = created.json().id as string;
    const moved = await h.backoffice('PATCH', `/v1/bo/webhooks/${id}`, { deposit_url: 'https://127.0.0.1:9446/deposits' }, operator);
    expect(moved.json()).toMatchObject({ deposit_url: 'https://127.0.0.1:9446/deposits', url: 'https://127.0.0.1:9446/deposits', version: 2 });
    expect((await h.backoffice('GET', `/v1/bo/webhooks/${id}`, undefined, reviewer)).json()).toMatchObject({ deposit_url: 'https://127.0.0.1:9446/deposits' });
    // Both names at once must name one address; none at all is a missing deposit_url; a refused address is named by its field.
    const fieldsOf = (response: Awaited<ReturnType<typeof post>>): unknown => response.json().error.details.fields;
    expect(fieldsOf(await post({ deposit_url: 'https://127.0.0.1:9445/a', url: 'https://127.0.0.1:9445/b' }))).toEqual([expect.objectContaining({ path: 'deposit_url', reason: 'conflicts_with_url' })]);
    expect(fieldsOf(await post({}))).toEqual([expect.objectContaining({ path: 'deposit_url', reason: 'required' })]);
    expect(fieldsOf(await post({ mode: 'live', deposit_url: 'http://127.0.0.1:9000/hooks' }))).toEqual([expect.objectContaining({ path: 'deposit_url', reason: 'must_be_https' })]);
    const same = await post({ deposit_url: 'https://127.0.0.1:9447/x', url: 'https://127.0.0.1:9447/x' });
    expect(same.statusCode, same.body).toBe(201);
    for (const endpoint of [id, same.json().id as string]) await h.backoffice('DELETE', `/v1/bo/webhooks/${endpoint}`);
  });

  it('refuses addresses that may not receive webhooks, on write', async () => {
    const fields = async (body: Record<string, unknown>) => {
      const response = await h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: h.app.sandbox.merchant_id, mode: 'test', ...body });
      expect(response.statusCode, response.body).toBe(422);
      return response.json().error.details.fields as { path: string; reason: string }[];
    };
    expect(await fields({ mode: 'live', url: 'http://127.0.0.1:9000/hooks' })).toEqual([expect.objectContaining({ path: 'url', reason: 'must_be_https' })]);
    expect(await fields({ mode: 'live', url: 'https://127.0.0.1:9000/hooks' })).toEqual([expect.objectContaining({ path: 'url', reason: 'address_not_allowed' })]);
    expect(await fields({ mode: 'live', url: 'https://localhost:9000/hooks' })).toEqual([expect.objectContaining({ path: 'url', reason: 'address_not_allowed' })]);
    expect(await fields({ url: 'https://10.0.0.8/hooks' })).toEqual([expect.objectContaining({ reason: 'address_not_allowed' })]);
    expect(await fields({ url: 'https://169.254.169.254/latest/meta-data' })).toEqual([expect.objectContaining({ reason: 'address_not_allowed' })]);
    expect(await fields({ url: 'https://[fe80::1]/hooks' })).toEqual([expect.objectContaining({ reason: 'address_not_allowed' })]);
    expect(await fields({ url: 'https://user:secret@127.0.0.1/hooks' })).toEqual([expect.objectContaining({ reason: 'credentials_not_allowed' })]);
    expect(await fields({ url: 'http://192.0.2.10/hooks' })).toEqual([expect.objectContaining({ reason: 'must_be_https' })]);
    expect(await fields({ url: 'https://127.0.0.1/x', event_types: ['Deposit Settled'] })).toEqual([expect.objectContaining({ path: 'event_types.0', reason: 'invalid_event_type' })]);
    expect(await fields({ url: 'https://127.0.0.1/x', colour: 'red' })).toEqual([expect.objectContaining({ path: 'colour', reason: 'unknown_field' })]);
    // Plain HTTP to loopback is the sandbox's, and only with the operator's switch on (it is, here).
    const local = await h.createEndpoint({ url: 'http://127.0.0.1:9000/hooks' });
    expect(local.url).toBe('http://127.0.0.1:9000/hooks');
    await h.backoffice('DELETE', `/v1/bo/webhooks/${local.id}`);

    const services = h.app.instance.services;
    const switchedOff = new WebhookService({
      database: services.database, clock: services.clock, events: services.events, tenancy: services.tenancy,
      policy: defaultAddressPolicy({ sandbox_loopback: false }), resolve: async () => ['127.0.0.1'], sandbox_loopback: false,
    });
    for (const url of ['http://127.0.0.1:9000/hooks', 'https://127.0.0.1:9000/hooks']) {
      await expect(switchedOff.createEndpoint(actor, null, { merchant_id: h.app.sandbox.merchant_id, livemode: false, url })).rejects.toMatchObject({ code: 'validation_error' });
    }
  });

  it('caps endpoints per merchant and mode', async () => {
    const merchant = await h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id });
    const made: string[] = [];
    for (let index = 0; index < 10; index += 1) made.push((await h.createEndpoint({ merchant_id: merchant.merchant_id, url: `https://127.0.0.1:${9000 + index}/h` })).id);
    const eleventh = await h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: merchant.merchant_id, mode: 'test', url: 'https://127.0.0.1:9999/h' });
    expect(eleventh.json().error.details.fields).toEqual([expect.objectContaining({ reason: 'too_many_endpoints' })]);
    expect((await h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: merchant.merchant_id, mode: 'live', url: 'https://8.8.8.8/h' })).statusCode).toBe(201);
    await h.backoffice('DELETE', `/v1/bo/webhooks/${made[0]}`);
    expect((await h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: merchant.merchant_id, mode: 'test', url: 'https://127.0.0.1:9999/h' })).statusCode).toBe(201);
  });
});

describe('scoping and roles', () => {
  it("answers 404 for another brand's endpoints and merchants, and keeps roles", async () => {
    const ours = await h.createEndpoint({ url: 'https://127.0.0.1:9500/h' });
    const foreign = await h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: other.merchant_id, mode: 'test', url: 'https://127.0.0.1:9501/h' });
    expect(foreign.statusCode).toBe(201);
    const theirs = foreign.json() as EndpointView;
    expect(theirs.white_label_id).toBe(other.white_label_id);

    for (const [method, url, body] of [
      ['GET', `/v1/bo/webhooks/${ours.id}`, undefined],
      ['PATCH', `/v1/bo/webhooks/${ours.id}`, { enabled: false }],
      ['DELETE', `/v1/bo/webhooks/${ours.id}`, undefined],
      ['GET', `/v1/bo/webhooks/${ours.id}/deliveries`, undefined],
      ['POST', `/v1/bo/webhooks/${ours.id}/replay`, {}],
      ['POST', `/v1/bo/webhooks/${ours.id}/deliveries/whd_01K0NOSUCHID0000000000000/resend`, undefined],
      ['GET', `/v1/bo/webhooks?merchant_id=${h.app.sandbox.merchant_id}`, undefined],
      ['POST', '/v1/bo/webhooks', { merchant_id: h.app.sandbox.merchant_id, mode: 'test', url: 'https://127.0.0.1:9502/h' }],
    ] as const) {
      const response = await h.backoffice(method, url, body, otherOperator);
      expect(response.statusCode, `${method} ${url}`).toBe(404);
      expect(response.json().error.code).toBe('resource_not_found');
    }
    expect((await h.backoffice('GET', `/v1/bo/webhooks/${ours.id}`)).statusCode).toBe(200);
    expect((await h.backoffice('GET', `/v1/bo/webhooks/${theirs.id}`, undefined, otherOperator)).statusCode).toBe(200);
    // The operator's own list shows only its brand, and an administrator must name a brand.
    expect((await h.backoffice('GET', '/v1/bo/webhooks', undefined, otherOperator)).json().data.map((item: EndpointView) => item.id)).toEqual([theirs.id]);
    expect((await h.backoffice('GET', '/v1/bo/webhooks')).json().error.details.fields).toEqual([{ path: 'white_label_id', reason: 'required' }]);

    const refused = await h.backoffice('POST', '/v1/bo/webhooks', { merchant_id: h.app.sandbox.merchant_id, mode: 'test', url: 'https://127.0.0.1:9503/h' }, reviewer);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('scope_denied');
    expect((await h.backoffice('POST', '/v1/bo/webhook-signing-keys/rotate', {}, operator)).json().error.code).toBe('scope_denied');
    expect((await h.backoffice('POST', '/v1/bo/webhooks/not-an-id/replay', {}, reviewer)).statusCode).toBe(404);
  });

  it('registers every webhook route in the catalogue with its guard', () => {
    const routes = apiRoutesOf(h.app.instance.app).filter((route) => route.url.includes('webhook'));
    expect(routes.map((route) => `${route.method} ${route.url} ${route.kind}`).sort()).toEqual([
      'DELETE /v1/bo/webhooks/:endpoint_id backoffice',
      'GET /v1/bo/webhooks backoffice',
      'GET /v1/bo/webhooks/:endpoint_id backoffice',
      'GET /v1/bo/webhooks/:endpoint_id/deliveries backoffice',
      'GET /v1/bo/webhooks/:endpoint_id/deliveries/:delivery_id backoffice',
      'GET /v1/test/webhooks/events/:event_id/signed-delivery merchant',
      'GET /v1/webhooks/signing-keys public',
      'GET /v1/webhooks/test-vectors public',
      'PATCH /v1/bo/webhooks/:endpoint_id backoffice',
      'POST /v1/bo/webhook-signing-keys/rotate backoffice',
      'POST /v1/bo/webhooks backoffice',
      'POST /v1/bo/webhooks/:endpoint_id/deliveries/:delivery_id/resend backoffice',
      'POST /v1/bo/webhooks/:endpoint_id/replay backoffice',
      'POST /v1/test/webhooks/replay-out-of-order merchant',
    ]);
  });
});

describe('the public signing-key list', () => {
  it('needs no authentication and lists every field of the record', async () => {
    const response = await h.app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/signing-keys' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('public, max-age=10');
    const { keys } = response.json() as { keys: Record<string, unknown>[] };
    expect(keys).toHaveLength(1);
    expect(keys[0]).toEqual({
      kid: expect.stringMatching(/^whk_/),
      alg: 'Ed25519',
      public_key: expect.stringMatching(/^MCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=$/),
      format: 'spki_der_base64',
      raw_public_key: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/),
      status: 'active',
      not_before: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      not_after: null,
    });
  });
});

describe('the CLI', () => {
  let baseUrl: string;

  beforeAll(async () => {
    await h.app.instance.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(h.app.instance.app.server.address() as { port: number }).port}`;
  });

  async function cli(argv: string[], backend: WebhookBackend): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const io: CliIo & WebhookCliIo = {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env: {},
      openWebhookBackend: async () => backend,
    };
    const code = await runCli(argv, io);
    return { code, stdout, stderr };
  }

  const direct = () => createDirectWebhookBackend({ webhooks: h.webhooks, tenancy: h.app.instance.services.tenancy });
  const remote = () => createRemoteWebhookBackend({ base_url: baseUrl, token: h.app.operator_token });

  it('adds, lists, updates and deletes endpoints the same way directly and through the API', async () => {
    for (const backend of [direct(), remote()]) {
      const added = await cli(['webhooks', 'add', '--merchant', h.app.sandbox.merchant_id, '--url', 'https://127.0.0.1:9600/h', '--event-types', 'deposit.settled', '--json'], backend);
      expect(added.stderr).toBe('');
      expect(added.code).toBe(0);
      const endpoint = JSON.parse(added.stdout) as EndpointView;
      expect(endpoint).toMatchObject({ livemode: false, event_types: ['deposit.settled'], enabled: true });

      const listed = await cli(['webhooks', 'list', '--merchant', h.app.sandbox.merchant_id, '--json'], backend);
      expect((JSON.parse(listed.stdout) as EndpointView[]).map((item) => item.id)).toContain(endpoint.id);
      const table = await cli(['webhooks', 'list', '--merchant', h.app.sandbox.merchant_id], backend);
      expect(table.stdout).toContain('ID');
      expect(table.stdout).toContain(endpoint.id);

      const updated = await cli(['webhooks', 'update', '--endpoint', endpoint.id, '--enabled', 'false', '--event-types', 'all', '--json'], backend);
      expect(JSON.parse(updated.stdout)).toMatchObject({ enabled: false, event_types: null });
      const deliveries = await cli(['webhooks', 'deliveries', '--endpoint', endpoint.id, '--json'], backend);
      expect(JSON.parse(deliveries.stdout)).toEqual([]);
      const deleted = await cli(['webhooks', 'delete', '--endpoint', endpoint.id, '--json'], backend);
      expect(JSON.parse(deleted.stdout)).toMatchObject({ deleted: true });
      const missing = await cli(['webhooks', 'get', '--endpoint', endpoint.id, '--json'], backend);
      expect(missing.code).toBe(1);
      expect(JSON.parse(missing.stderr).error.code).toBe('resource_not_found');

      const refused = await cli(['webhooks', 'add', '--merchant', h.app.sandbox.merchant_id, '--mode', 'live', '--url', 'http://127.0.0.1/h'], backend);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('validation_error');
      expect(refused.stderr).toContain('url: must_be_https');
    }
  });

  it('lists and rotates the signing keys', async () => {
    const keys = await cli(['webhooks', 'signing-keys', '--json'], remote());
    expect((JSON.parse(keys.stdout) as unknown[]).length).toBeGreaterThanOrEqual(1);
    const rotated = await cli(['webhooks', 'rotate-key', '--overlap-hours', '48', '--json'], direct());
    expect(JSON.parse(rotated.stdout)).toMatchObject({ rotated: true, new_key: { status: 'next' } });
    const { rows } = await h.app.testDatabase.database.query<{ actor_type: string }>("SELECT actor_type FROM audit_log WHERE action = 'webhook_signing_key.rotated'");
    expect(rows.map((row) => row.actor_type)).toEqual(['cli']);
  });

  it('reports usage mistakes with exit 2', async () => {
    expect((await cli(['webhooks', 'add', '--url', 'https://x'], direct())).code).toBe(2);
    expect((await cli(['webhooks', 'nope'], direct())).code).toBe(2);
    expect((await cli(['webhooks', 'rotate-key', '--overlap-hours', '0'], direct())).code).toBe(2);
    const help = await cli(['webhooks', '--help'], direct());
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('rotate-key');
    expect((await cli(['--help'], direct())).stdout).toContain('webhooks --help');
  });
});
