import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/commands.ts';
import { parseSignatureHeader, signedBytes } from '../../src/webhooks/signing.ts';
import type { SignedDeliveryView } from '../../src/webhooks/local-forwarding.ts';
import type { SigningKeyRecord } from '../../src/webhooks/signing-keys.ts';
import { fetchKeysFrom, ReferenceReceiver, SigningKeyCache } from '../../examples/webhook-receiver/receiver.ts';
import { createWebhookTestApp, type WebhookTestApp } from '../support/webhook-receiver-harness.ts';
import { answer, startScriptedReceiver, type ScriptedReceiver } from '../support/webhook-receivers.ts';
import { createDeposit } from '../support/slips.ts';

/**
 * `npm run cli -- listen --forward-to …` against the service listening on a real port and real local
 * receivers: the CLI follows the sandbox merchant's events feed, gets each event's signed delivery from
 * the service, and posts it to the local URL, where the reference receiver (written from the spec alone)
 * verifies it with the public signing keys. A real delivery of the same event, made by the dispatcher to
 * a registered endpoint, carries the same bytes and the same headers.
 */

let h: WebhookTestApp;
let baseUrl: string;
let directory: string;
let reference: ReferenceReceiver;
let local: ScriptedReceiver;

beforeAll(async () => {
  h = await createWebhookTestApp();
  await h.app.instance.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(h.app.instance.app.server.address() as { port: number }).port}`;
  // The CLI signs with the real time: the service's clock must agree with it.
  h.app.clock.set(new Date());
  directory = fs.mkdtempSync(path.join(os.tmpdir(), 'listen-cli-'));
  reference = new ReferenceReceiver({ livemode: false, keys: new SigningKeyCache(fetchKeysFrom(`${baseUrl}/v1/webhooks/signing-keys`), () => Date.now()) });
  local = await startScriptedReceiver({ tls: null, behaviour: () => ({ handle: (body, headers) => reference.handle(body, headers) }) });
});
afterAll(async () => {
  await local.close();
  await h.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

function io(env: Record<string, string> = {}, signal?: AbortSignal) {
  const output = { stdout: '', stderr: '' };
  return {
    output,
    io: {
      stdout: { write: (text: string) => ((output.stdout += text), true) },
      stderr: { write: (text: string) => ((output.stderr += text), true) },
      env: { PG_BASE_URL: baseUrl, PG_API_KEY: h.app.sandbox.api_key, PG_SIGNING_SECRET: h.app.sandbox.signing_secret, DATA_DIR: directory, ...env },
      ...(signal ? { signal } : {}),
    },
  };
}

async function cli(argv: string[], env: Record<string, string> = {}) {
  const run = io(env);
  const code = await runCli(argv, run.io);
  return { code, ...run.output };
}

async function feed(): Promise<{ id: string; type: string; sequence: number }[]> {
  const response = await h.app.signed({ url: '/v1/pay/events?since_sequence=0&limit=500' });
  expect(response.statusCode).toBe(200);
  return response.json<{ data: { id: string; type: string; sequence: number }[] }>().data;
}

async function waitUntil(check: () => boolean, what: string, timeout_ms = 10_000): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('listen', () => {
  it('forwards every event with the bytes and headers of a real delivery; the receiver verifies them with the public keys', async () => {
    // A real endpoint, so that the dispatcher delivers the same event for comparison.
    const real = await startScriptedReceiver({ tls: null, behaviour: () => answer(200) });
    try {
      await h.createEndpoint({ url: real.url });
      const order = await createDeposit(h.app, { amount_minor: 10_000 });
      await h.webhooks.dispatcher.runUntilIdle();
      const events = await feed();
      expect(events.map((event) => event.type)).toContain('deposit.created');

      const before = local.requests.length;
      const run = await cli(['listen', '--forward-to', local.url, '--since-sequence', '0', '--max-events', String(events.length), '--json']);
      expect(run.code, run.stderr).toBe(0);
      const lines = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as { event_id: string; type: string; sequence: number; status: number | null; error: string | null });
      expect(lines.map((line) => line.event_id)).toEqual(events.map((event) => event.id));
      // The reference receiver answered 200 to each: signature, window, id and livemode all checked.
      expect(lines.every((line) => line.status === 200 && line.error === null)).toBe(true);
      expect(reference.store.object('deposit_order', order.id)).toMatchObject({ id: order.id, status: order.status });

      const created = events.find((event) => event.type === 'deposit.created' && local.requests.slice(before).some((request) => request.headers['x-pg-event-id'] === event.id));
      const forwarded = local.requests.slice(before).find((request) => request.headers['x-pg-event-id'] === created?.id);
      const delivered = real.requests.find((request) => request.headers['x-pg-event-id'] === created?.id);
      expect(forwarded && delivered).toBeTruthy();
      // Same bytes, same header names; the values differ only where a delivery's own identity is.
      expect(forwarded!.body.equals(delivered!.body)).toBe(true);
      const names = (headers: Record<string, unknown>) => Object.keys(headers).filter((name) => name.startsWith('x-pg-') || name === 'content-type' || name === 'user-agent').sort();
      expect(names(forwarded!.headers)).toEqual(names(delivered!.headers));
      for (const name of ['content-type', 'user-agent', 'x-pg-event-id', 'x-pg-api-version', 'x-pg-livemode', 'x-pg-event-type', 'x-pg-attempt', 'x-pg-resend']) {
        expect(forwarded!.headers[name], name).toBe(delivered!.headers[name]);
      }
      expect(forwarded!.headers['x-pg-endpoint-id']).toBe('local_forwarding');
      expect(forwarded!.headers['x-pg-delivery-id']).toMatch(/^whd_/);
      expect(parseSignatureHeader(String(forwarded!.headers['x-pg-signature']))?.kid).toBe(parseSignatureHeader(String(delivered!.headers['x-pg-signature']))?.kid);

      // --events forwards only the types named.
      const onlyCreated = await cli(['listen', '--forward-to', local.url, '--since-sequence', '0', '--events', 'deposit.created', '--max-events', '1', '--json']);
      expect(onlyCreated.code, onlyCreated.stderr).toBe(0);
      expect(JSON.parse(onlyCreated.stdout.trim())).toMatchObject({ type: 'deposit.created', status: 200 });
    } finally {
      await real.close();
    }
  });

  it('starts after the newest event, prints one line per event with the receiver’s answer, and stops on a signal', async () => {
    const controller = new AbortController();
    const run = io({}, controller.signal);
    const stopped = runCli(['listen', '--forward-to', local.url, '--interval-ms', '200'], run.io);
    await waitUntil(() => run.output.stderr.includes('Ready.'), 'the ready line');
    const before = local.requests.length;
    local.behaviour = () => answer(500);
    try {
      const order = await createDeposit(h.app, { amount_minor: 10_000 });
      await waitUntil(() => run.output.stdout.includes(order.id) || local.requests.length > before, 'a forwarded event');
      await waitUntil(() => run.output.stdout.split('\n').length > 1, 'the line');
    } finally {
      local.behaviour = () => ({ handle: (body, headers) => reference.handle(body, headers) });
      controller.abort();
    }
    expect(await stopped).toBe(0);
    const lines = run.output.stdout.trim().split('\n');
    // Only the new event: nothing older was forwarded again.
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT[0-9:.]+Z {2}deposit\.created {2}evt_[0-9A-Z]{26} {2}seq \d+ {2}<- 500 {2}\(\d+ ms\)$/);
    expect(local.requests.length).toBe(before + 1);
  });

  it('reports a receiver that does not answer on the event’s line and goes on', async () => {
    const closed = await startScriptedReceiver({ tls: null, behaviour: () => answer(200) });
    const url = closed.url;
    await closed.close();
    const events = await feed();
    const run = await cli(['listen', '--forward-to', url, '--since-sequence', String(events.length - 2), '--max-events', '2', '--json']);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as { status: number | null; error: string | null });
    expect(lines).toEqual([expect.objectContaining({ status: null, error: 'ECONNREFUSED' }), expect.objectContaining({ status: null, error: 'ECONNREFUSED' })]);
  });

  it('usage errors exit 2; a live key, missing credentials or a refused key exit 1', async () => {
    expect((await cli(['listen'])).code).toBe(2);
    expect((await cli(['listen', '--forward-to', 'ftp://localhost/hooks'])).code).toBe(2);
    expect((await cli(['listen', '--forward-to', local.url, '--interval-ms', '5'])).code).toBe(2);
    expect((await cli(['listen', '--forward-to', local.url, 'extra'])).code).toBe(2);
    const help = await cli(['listen', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--forward-to');
    const live = await h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id, livemode: true });
    const liveRun = await cli(['listen', '--forward-to', local.url], { PG_API_KEY: live.api_key, PG_SIGNING_SECRET: live.signing_secret });
    expect(liveRun.code).toBe(1);
    expect(liveRun.stderr).toContain('not_a_sandbox_key');
    const missing = await cli(['listen', '--forward-to', local.url], { PG_API_KEY: '', PG_BASE_URL: '' });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('sandbox_credentials_missing');
    const wrongSecret = await cli(['listen', '--forward-to', local.url], { PG_SIGNING_SECRET: 'sig_test_not_the_secret' });
    expect(wrongSecret.code).toBe(1);
    expect(wrongSecret.stderr).toContain('signature_invalid');
  });
});

describe('GET /v1/test/webhooks/events/{id}/signed-delivery', () => {
  it('signs the stored event now with the brand’s sandbox key; other tenants’ events, live keys and malformed ids are 404', async () => {
    const order = await createDeposit(h.app, { amount_minor: 10_000 });
    const event = (await feed()).filter((item) => item.type === 'deposit.created').at(-1)!;
    const response = await h.app.signed({ url: `/v1/test/webhooks/events/${event.id}/signed-delivery` });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    const delivery = response.json<SignedDeliveryView>();
    expect(delivery).toMatchObject({ object: 'webhook_signed_delivery', event_id: event.id, event_type: 'deposit.created', sequence: event.sequence, livemode: false });
    const body = Buffer.from(delivery.body_base64, 'base64');
    expect(JSON.parse(body.toString('utf8'))).toMatchObject({ id: event.id, data: { object: { id: order.id } } });
    const signature = parseSignatureHeader(delivery.headers['x-pg-signature']!)!;
    expect(signature.kid).toBe(delivery.kid);
    expect(signature.t).toBe(Math.floor(h.app.clock.now().getTime() / 1000));
    const keys = (await h.app.instance.app.inject({ url: '/v1/webhooks/signing-keys' })).json<{ keys: SigningKeyRecord[] }>().keys;
    const key = keys.find((item) => item.kid === signature.kid)!;
    const publicKey = crypto.createPublicKey({ key: Buffer.from(key.public_key, 'base64'), format: 'der', type: 'spki' });
    expect(crypto.verify(null, signedBytes(signature.t, event.id, body), publicKey, Buffer.from(signature.s, 'base64url'))).toBe(true);

    const other = await h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id });
    expect((await h.app.signed({ url: `/v1/test/webhooks/events/${event.id}/signed-delivery`, credentials: other })).statusCode).toBe(404);
    const live = await h.app.createMerchant({ white_label_id: h.app.sandbox.white_label_id, livemode: true });
    expect((await h.app.signed({ url: `/v1/test/webhooks/events/${event.id}/signed-delivery`, credentials: live })).statusCode).toBe(404);
    expect((await h.app.signed({ url: '/v1/test/webhooks/events/evt_nope/signed-delivery' })).statusCode).toBe(404);
  });
});
