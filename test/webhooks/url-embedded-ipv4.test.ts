import type dns from 'node:dns';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { depositObject, newDepositId } from '../support/webhook-receiver-harness.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { Webhooks } from '../../src/webhooks/index.ts';
import type { EndpointView } from '../../src/webhooks/service.ts';

/**
 * Issue 28, item 9: IPv6 addresses that carry an internal IPv4 address are refused as webhook receivers,
 * whatever form carries it: IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765), IPv4-mapped, IPv4-compatible,
 * NAT64 (well-known and local-use), 6to4, Teredo and ISATAP, and the deprecated site-local `fec0::/10`.
 * Through POST and PATCH of an endpoint in both modes (with the production address policy and the
 * sandbox's loopback switch on), as a host name's DNS answer at write time, and as a DNS answer at
 * delivery time: the same refusal as the forms already refused, `validation_error` with
 * `address_not_allowed` on `url`, and nothing written; a delivery is never attempted.
 */

/** Host names of the tests' resolver (write time): each answers the one address it names. */
const WRITE_TIME_ANSWERS: Record<string, string[]> = { 'public.example.test': ['93.184.216.34'], 'rebind.example.test': ['93.184.216.34'] };
/** What the delivery client's lookup answers for a name (delivery time), set by the test. */
const deliveryAnswers = new Map<string, string>();

let app: TestApp;
let webhooks: Webhooks;

const resolve = async (hostname: string): Promise<string[]> => {
  if (WRITE_TIME_ANSWERS[hostname]) return WRITE_TIME_ANSWERS[hostname];
  const literal = /^to-(.+)\.example\.test$/.exec(hostname)?.[1];
  // `to-<address with - for :>.example.test` answers that address, so that any DNS answer can be tried.
  return literal ? [literal.replace(/-/g, ':')] : [];
};

const lookup = ((hostname: string, options: dns.LookupOptions, callback: (error: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void) => {
  const address = deliveryAnswers.get(hostname);
  if (!address) {
    callback(Object.assign(new Error(`no answer for ${hostname}`), { code: 'ENOTFOUND' }), []);
    return;
  }
  callback(null, [{ address, family: address.includes(':') ? 6 : 4 }]);
}) as unknown as typeof dns.lookup;

beforeAll(async () => {
  // The production policy (public addresses only; loopback for the sandbox, since the switch is on).
  app = await createTestApp({
    webhooks: { settings: { timeout_ms: 1_000, poll_interval_ms: 20, sandbox_loopback: true }, resolve, lookup },
  });
  webhooks = app.instance.services.webhooks;
});

afterAll(async () => {
  await webhooks.dispatcher.stop();
  await app.close();
});

function backoffice(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { authorization: `Bearer ${app.operator_token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  return app.instance.app.inject({ method, url, headers, payload: body === undefined ? undefined : JSON.stringify(body) });
}

async function endpointCount(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::int AS count FROM webhook_endpoints');
  return rows[0]!.count;
}

function expectAddressRefused(response: LightMyRequestResponse, label: string): void {
  expect(response.statusCode, `${label}: ${response.body}`).toBe(422);
  const error = response.json<{ error: { code: string; details: { fields: { path: string; reason: string }[] } } }>().error;
  expect(error.code, label).toBe('validation_error');
  expect(error.details.fields, label).toEqual([expect.objectContaining({ path: 'url', reason: 'address_not_allowed' })]);
}

async function created(mode: 'test' | 'live', url: string): Promise<EndpointView> {
  const response = await backoffice('POST', '/v1/bo/webhooks', { merchant_id: app.sandbox.merchant_id, mode, url });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<EndpointView>();
}

/** The issue's addresses: IPv4-translated forms of internal IPv4 addresses, and site-local. */
const ISSUE_ADDRESSES = [
  '::ffff:0:7f00:1', // translated 127.0.0.1
  '::ffff:0:a00:1', // translated 10.0.0.1
  '::ffff:0:a9fe:a9fe', // translated 169.254.169.254 (cloud metadata)
  'fec0::1', // site-local, deprecated
];

/** Every other form that carries an internal IPv4 address, in several spellings. */
const OTHER_EMBEDDED_FORMS = [
  '0:0:0:0:ffff:0:10.0.0.1', // translated, uncompressed with a dotted tail
  '::ffff:0:c0a8:101', // translated 192.168.1.1
  '::ffff:127.0.0.1', // mapped loopback (refused in live mode below; the sandbox may use loopback)
  '::ffff:a00:1', // mapped 10.0.0.1
  '::ffff:169.254.169.254', // mapped metadata
  '::a00:1', // compatible 10.0.0.1
  '::7f00:1', // compatible 127.0.0.1
  '64:ff9b::a9fe:a9fe', // NAT64 well-known, metadata
  '64:ff9b::7f00:1', // NAT64 well-known, 127.0.0.1
  '64:ff9b:1::a00:1', // NAT64 local-use
  '2002:a00:1::1', // 6to4 relay 10.0.0.1
  '2002:7f00:1::1', // 6to4 relay 127.0.0.1
  '2001:0:a9fe:a9fe::1', // Teredo server metadata
  '2001:0:808:808:0:0:f5ff:fffe', // Teredo client 10.0.0.1 (inverted)
  '2606:4700:10::5efe:a00:1', // ISATAP 10.0.0.1 under a public prefix
  '2606:4700:10::200:5efe:a9fe:a9fe', // ISATAP (global identifier) metadata
  'fe80::5efe:a00:1', // ISATAP, link-local
  'fec0:0:0:1::5efe:7f00:1', // ISATAP under site-local
];

/** The same forms carrying a public IPv4 address stay allowed: the address carried is what is judged. */
const PUBLIC_EMBEDDED_FORMS = ['::ffff:0:808:808', '64:ff9b::808:808', '2002:808:808::1', '2606:4700:10::5efe:808:808'];

describe('IPv4-translated and site-local receiver addresses (the issue)', () => {
  it('refuses them on POST in test and live mode, writing nothing', async () => {
    const before = await endpointCount();
    for (const mode of ['test', 'live'] as const) {
      for (const address of ISSUE_ADDRESSES) {
        const url = `https://[${address}]/hook`;
        expectAddressRefused(await backoffice('POST', '/v1/bo/webhooks', { merchant_id: app.sandbox.merchant_id, mode, url }), `${mode} ${url}`);
      }
    }
    expect(await endpointCount()).toBe(before);
  });

  it('refuses them on PATCH in test and live mode, leaving the endpoint as it was', async () => {
    for (const mode of ['test', 'live'] as const) {
      const endpoint = await created(mode, 'https://public.example.test/hook');
      for (const address of ISSUE_ADDRESSES) {
        const url = `https://[${address}]/hook`;
        expectAddressRefused(await backoffice('PATCH', `/v1/bo/webhooks/${endpoint.id}`, { url }), `${mode} PATCH ${url}`);
      }
      const read = await backoffice('GET', `/v1/bo/webhooks/${endpoint.id}`);
      expect(read.json()).toEqual(endpoint);
      await backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
    }
  });
});

describe('every IPv6 form that carries an IPv4 address', () => {
  it('refuses each that carries an internal address, as a literal and as a DNS answer, in both modes', async () => {
    const before = await endpointCount();
    for (const mode of ['test', 'live'] as const) {
      for (const address of [...ISSUE_ADDRESSES, ...OTHER_EMBEDDED_FORMS]) {
        // The sandbox may use this machine's loopback through the one form the host itself answers.
        if (mode === 'test' && address === '::ffff:127.0.0.1') continue;
        for (const url of [`https://[${address}]/hook`, `https://to-${address.replace(/:/g, '-')}.example.test/hook`]) {
          expectAddressRefused(await backoffice('POST', '/v1/bo/webhooks', { merchant_id: app.sandbox.merchant_id, mode, url }), `${mode} ${url}`);
        }
      }
    }
    expect(await endpointCount()).toBe(before);
  });

  it('allows the same forms when the IPv4 address they carry is public', async () => {
    for (const address of PUBLIC_EMBEDDED_FORMS) {
      const endpoint = await created('live', `https://[${address}]/hook`);
      await backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
    }
  });
});

describe('the DNS answer at delivery time', () => {
  it('refuses to connect when the name now resolves to an internal address in a translated or ISATAP form', async () => {
    // The name resolved to a public address when the endpoint was written; it answers otherwise now.
    const endpoint = await created('live', 'https://rebind.example.test/hook');
    for (const address of ['::ffff:0:a9fe:a9fe', '::ffff:0:7f00:1', 'fec0::1', '2606:4700:10::5efe:a00:1']) {
      deliveryAnswers.set('rebind.example.test', address);
      const event = await app.instance.services.database.transaction((tx) =>
        app.instance.services.events.emitEvent(tx, {
          white_label_id: app.sandbox.white_label_id,
          merchant_id: app.sandbox.merchant_id,
          livemode: true,
          type: 'deposit.created',
          object: depositObject(newDepositId(), 1, 'awaiting_payment'),
          previous_attributes: null,
          cause: SYSTEM_CAUSE,
        }),
      );
      await webhooks.dispatcher.runUntilIdle();
      const listed = await backoffice('GET', `/v1/bo/webhooks/${endpoint.id}/deliveries`);
      expect(listed.statusCode, listed.body).toBe(200);
      const deliveries = listed.json<{ data: { event_id: string; attempt_count: number; last_error: string | null; last_http_status: number | null }[] }>().data;
      const delivery = deliveries.find((candidate) => candidate.event_id === event.id);
      expect(delivery, address).toMatchObject({ attempt_count: 1, last_error: 'address_not_allowed', last_http_status: null });
    }
    await backoffice('DELETE', `/v1/bo/webhooks/${endpoint.id}`);
  });
});
