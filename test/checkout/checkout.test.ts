import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/platform/logger.ts';
import type { CheckoutState } from '../../src/checkout/service.ts';
import type { SlipUpload } from '../../src/slip-capability/capability.ts';
import type { SandboxTransferView } from '../../src/sandbox/bank.ts';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { eventsOfMerchant, nextReference, SOMCHAI_SENDER, uploadMultipart } from '../support/slips.ts';

/**
 * The hosted checkout over HTTP (src/checkout/): `checkout_url` on the order, the exchange of the link's
 * secret for a session cookie, the page's JSON endpoints, their security headers, the capability the
 * page obtains, the sandbox's simulated transfer (and its absence in live mode), the brand's own
 * checkout origin, and logs without any secret. The browser flows are in browser.test.ts.
 */

const PUBLIC_BASE = 'http://127.0.0.1:18080';

let app: TestApp;
let live: MerchantCredentials;
const logChunks: string[] = [];

beforeAll(async () => {
  const stream = new Writable({
    write(chunk, _encoding, done) {
      logChunks.push(String(chunk));
      done();
    },
  });
  app = await createTestApp({ config: { PUBLIC_BASE_URL: PUBLIC_BASE }, logger: createLogger('info', stream) });
  live = await app.createMerchant({ white_label_id: app.sandbox.white_label_id, livemode: true });
});

afterAll(async () => {
  await app?.close();
});

type Order = { id: string; status: string; checkout_url?: string; slip_upload?: SlipUpload; [key: string]: unknown };

async function createOrder(options: { amount_minor?: number; credentials?: MerchantCredentials; return_url?: string } = {}): Promise<{ status: number; order: Order }> {
  const reference = nextReference('checkout');
  const response = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    ...(options.credentials ? { credentials: options.credentials } : {}),
    body: {
      amount_minor: options.amount_minor ?? 50_000,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: { ...SOMCHAI_SENDER, account_number: `66${crypto.randomInt(10_000_000, 99_999_999)}` },
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.9', user_agent: 'checkout-test' },
      ...(options.return_url ? { return_url: options.return_url } : {}),
    },
  });
  expect([201, 202], response.body).toContain(response.statusCode);
  return { status: response.statusCode, order: response.json<Order>() };
}

/** Splits a checkout URL into what `inject` needs: its path and its Host. */
function target(url: string): { path: string; host: string } {
  const parsed = new URL(url);
  return { path: `${parsed.pathname}${parsed.search}`, host: parsed.host };
}

function browserGet(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  const { path, host } = target(url);
  return app.instance.app.inject({ method: 'GET', url: path, headers: { host, ...headers } });
}

interface Session {
  cookie: string;
  page: string;
  set_cookie: string;
}

/** Opens `checkout_url` as a browser would: the 303 and its cookie. */
async function openLink(checkout_url: string): Promise<Session> {
  const response = await browserGet(checkout_url);
  expect(response.statusCode, response.body).toBe(303);
  const setCookie = String(response.headers['set-cookie']);
  const cookie = setCookie.split(';')[0] ?? '';
  return { cookie, page: String(response.headers.location), set_cookie: setCookie };
}

function pageRequest(session: Session, method: 'GET' | 'POST', suffix: string, options: { headers?: Record<string, string>; body?: string } = {}) {
  return app.instance.app.inject({
    method,
    url: `${session.page}${suffix}`,
    headers: { host: new URL(PUBLIC_BASE).host, cookie: session.cookie, ...options.headers },
    ...(options.body === undefined ? {} : { payload: options.body }),
  });
}

async function stateOf(session: Session): Promise<CheckoutState> {
  const response = await pageRequest(session, 'GET', '/status');
  expect(response.statusCode, response.body).toBe(200);
  return response.json<CheckoutState>();
}

function expectSecurityHeaders(response: LightMyRequestResponse, cache: 'no-store' | 'immutable' = 'no-store'): void {
  const csp = String(response.headers['content-security-policy']);
  expect(csp).toContain("default-src 'none'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).not.toContain('unsafe-inline');
  expect(csp).not.toContain('unsafe-eval');
  expect(response.headers['x-frame-options']).toBe('DENY');
  expect(response.headers['referrer-policy']).toBe('no-referrer');
  expect(response.headers['x-content-type-options']).toBe('nosniff');
  if (cache === 'no-store') expect(response.headers['cache-control']).toBe('no-store');
  else expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
}

describe('checkout_url on the order', () => {
  it('is on the 201 answer, on the order as read, stable and per order, and never in an event or a list', async () => {
    const { status, order } = await createOrder();
    expect(status).toBe(201);
    const url = order.checkout_url;
    expect(url).toMatch(new RegExp(`^${PUBLIC_BASE}/checkout/${app.sandbox.white_label_id}/${order.id}/cs_[A-Za-z0-9_-]{43}$`));
    // Placed after expires_at, as the spec's field table lists it.
    const keys = Object.keys(order);
    expect(keys.indexOf('checkout_url')).toBe(keys.indexOf('expires_at') + 1);
    const read = await app.signed({ url: `/v1/pay/deposits/${order.id}` });
    expect(read.json<Order>().checkout_url).toBe(url);
    const again = await app.signed({ url: `/v1/pay/deposits/${order.id}` });
    expect(again.json<Order>().checkout_url).toBe(url);
    const other = await createOrder();
    expect(other.order.checkout_url).not.toBe(url);
    const secret = url!.split('/').at(-1)!;
    expect(other.order.checkout_url).not.toContain(secret);

    const listed = await app.signed({ url: '/v1/pay/deposits?limit=5' });
    expect(listed.body).not.toContain('checkout_url');
    const events = await eventsOfMerchant(app, app.sandbox.merchant_id);
    expect(JSON.stringify(events)).not.toContain(secret);
    expect(JSON.stringify(events)).not.toContain('checkout_url');
    // Not in any stored row either: the secret is derived, never stored (the stored idempotent answers are sealed).
    const { rows } = await app.testDatabase.database.query<{ hit: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM deposit_orders WHERE row_to_json(deposit_orders)::text LIKE '%' || $1 || '%')
           OR EXISTS (SELECT 1 FROM idempotency_records WHERE response_body LIKE '%' || $1 || '%') AS hit`,
      [secret],
    );
    expect(rows[0]?.hit).toBe(false);
  });

  it('is on the 202 answer of an order waiting for liquidity, and on the order after deposit.matched', async () => {
    // Sandbox scenario 105.00 THB: 25 seconds without a destination.
    const { status, order } = await createOrder({ amount_minor: 10_500 });
    expect(status).toBe(202);
    expect(order.status).toBe('awaiting_liquidity');
    expect(order.checkout_url).toMatch(/\/checkout\/wl_[0-9A-Z]+\/dep_[0-9A-Z]+\/cs_/);
    const session = await openLink(order.checkout_url!);
    const waiting = await stateOf(session);
    expect(waiting.status).toBe('awaiting_liquidity');
    expect(waiting.legs).toEqual([]);
    expect(waiting.can_upload).toBe(false);
    const capability = await pageRequest(session, 'POST', '/slip-upload', { headers: { 'sec-fetch-site': 'same-origin' } });
    expect(capability.statusCode).toBe(409);
    expect(errorOf(capability).code).toBe('deposit_not_payable');

    app.clock.advance(25_000);
    await app.instance.worker.runDueJobs();
    const matched = await app.signed({ url: `/v1/pay/deposits/${order.id}` });
    expect(matched.json<Order>().status).toBe('awaiting_payment');
    expect(matched.json<Order>().checkout_url).toBe(order.checkout_url);
    const paying = await stateOf(session);
    expect(paying.status).toBe('awaiting_payment');
    expect(paying.legs.length).toBeGreaterThan(0);
    expect(paying.legs[0]?.qr_image_url).toMatch(/\/qr\.png\?/);
    expect(paying.can_upload).toBe(true);
  });
});

describe('the link and the session', () => {
  it('exchanges the secret for an HttpOnly SameSite=Strict cookie scoped to the order and redirects to an address without it', async () => {
    const { order } = await createOrder();
    const response = await browserGet(`${order.checkout_url}?lang=en`);
    expect(response.statusCode).toBe(303);
    expectSecurityHeaders(response);
    const location = String(response.headers.location);
    expect(location).toBe(`/checkout/${app.sandbox.white_label_id}/${order.id}?lang=en`);
    expect(location).not.toContain('cs_');
    const cookie = String(response.headers['set-cookie']);
    expect(cookie).toMatch(/^pg_checkout=v1\.mch_[0-9A-Z]+\.t\.\d+\.[A-Za-z0-9_-]{43}; /);
    expect(cookie).toContain(`Path=/checkout/${app.sandbox.white_label_id}/${order.id};`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).toContain('Max-Age=86400');
    // The page is served over plain http in this test, where a Secure cookie would be dropped.
    expect(cookie).not.toContain('Secure');
    // The cookie is not the link's secret: holding one does not give the other.
    expect(cookie).not.toContain(order.checkout_url!.split('/').at(-1)!);
  });

  it('answers 404 for a wrong secret, an unknown order, another order or another brand, and 404 JSON without a session', async () => {
    const { order } = await createOrder();
    const other = await createOrder();
    const url = order.checkout_url!;
    const secret = url.split('/').at(-1)!;
    const flipped = `${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
    const otherBrand = await app.createMerchant();
    for (const wrong of [
      url.replace(secret, flipped),
      url.replace(secret, `${secret}x`),
      url.replace(secret, secret.slice(0, -1)),
      url.replace(secret, 'status2'),
      url.replace(order.id, other.order.id),
      url.replace(order.id, 'dep_01J00000000000000000000000'),
      url.replace(app.sandbox.white_label_id, otherBrand.white_label_id),
    ]) {
      const response = await browserGet(wrong);
      expect(response.statusCode, wrong).toBe(404);
      expect(response.headers['set-cookie']).toBeUndefined();
      expect(response.headers['content-type']).toContain('text/html');
      expectSecurityHeaders(response);
    }

    const session = await openLink(url);
    const none = await app.instance.app.inject({ method: 'GET', url: `${session.page}/status`, headers: { host: '127.0.0.1:18080' } });
    expect(none.statusCode).toBe(404);
    expect(errorOf(none).code).toBe('resource_not_found');
    expectSecurityHeaders(none);
    // A session of one order opens no other order, even when sent to the other's address.
    const otherSession = await openLink(other.order.checkout_url!);
    const crossed = await pageRequest({ ...otherSession, cookie: session.cookie }, 'GET', '/status');
    expect(crossed.statusCode).toBe(404);
    const forged = await pageRequest({ ...session, cookie: session.cookie.replace(/.$/, (character) => (character === 'A' ? 'B' : 'A')) }, 'GET', '/status');
    expect(forged.statusCode).toBe(404);
    // A session ends after a day on the service's clock.
    app.clock.advance(24 * 60 * 60 * 1000 + 1000);
    const ended = await pageRequest(session, 'GET', '/status');
    expect(ended.statusCode).toBe(404);
  });

  it('serves the page shell with no order data, Thai first, English on request, scripts only from files', async () => {
    const { order } = await createOrder();
    const session = await openLink(order.checkout_url!);
    const page = await pageRequest(session, 'GET', '');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expectSecurityHeaders(page);
    expect(page.body).toContain('<html lang="th">');
    expect(page.body).not.toContain(order.id);
    expect(page.body).toMatch(/<script src="\/checkout\/assets\/checkout\.[0-9a-f]{16}\.js" defer><\/script>/);
    // The only other script element is inert JSON (the texts), which a CSP without 'unsafe-inline' allows.
    const scripts = page.body.match(/<script[^>]*>/g) ?? [];
    expect(scripts).toEqual([expect.stringMatching(/src=/), '<script type="application/json" id="checkout-texts">']);
    expect(page.body).toContain('accept="image/*,image/jpeg,image/png,image/webp"');
    const english = await pageRequest(session, 'GET', '?lang=en');
    expect(english.body).toContain('<html lang="en">');
    expect(english.body).toContain('Upload the transfer slip');

    const asset = page.body.match(/\/checkout\/assets\/checkout\.[0-9a-f]{16}\.js/)?.[0] ?? '';
    const script = await app.instance.app.inject({ method: 'GET', url: asset });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expectSecurityHeaders(script, 'immutable');
    expect(script.body).not.toContain('innerHTML');
    const css = page.body.match(/\/checkout\/assets\/checkout\.[0-9a-f]{16}\.css/)?.[0] ?? '';
    const stylesheet = await app.instance.app.inject({ method: 'GET', url: css });
    expect(stylesheet.statusCode).toBe(200);
    const font = stylesheet.body.match(/\/checkout\/assets\/sarabun-thai-400\.[0-9a-f]{16}\.woff2/)?.[0] ?? '';
    expect((await app.instance.app.inject({ method: 'GET', url: font })).headers['content-type']).toBe('font/woff2');
    const unknown = await app.instance.app.inject({ method: 'GET', url: '/checkout/assets/checkout.0000000000000000.js' });
    expect(unknown.statusCode).toBe(404);
    expectSecurityHeaders(unknown);
    const malformed = await app.instance.app.inject({ method: 'GET', url: '/checkout/not-a-brand/dep_X' });
    expect(malformed.statusCode).toBe(404);
    expectSecurityHeaders(malformed);
  });
});

describe('the page endpoints', () => {
  it('shows the order to the payer without account numbers, QR payloads or merchant data', async () => {
    const { order } = await createOrder({ return_url: 'https://shop.example.com/return?order=42' });
    const session = await openLink(order.checkout_url!);
    const response = await pageRequest(session, 'GET', '/status');
    expectSecurityHeaders(response);
    expect(response.headers['ratelimit-policy']).toBe('120;w=60');
    const state = response.json<CheckoutState>();
    expect(state).toMatchObject({
      object: 'checkout',
      deposit_id: order.id,
      livemode: false,
      status: 'awaiting_payment',
      amount_minor: 50_000,
      currency: 'THB',
      server_time: app.clock.now().toISOString(),
      can_upload: true,
      can_simulate: true,
      return_url: 'https://shop.example.com/return?order=42',
      slips: { uploaded: 0, processing: false, uploads_left: 3 },
      sender: { bank_code: '002', bank_name_th: 'ธนาคารกรุงเทพ', account_name_th_masked: 'สม*** ใจ***' },
    });
    expect(state.sender.account_number_masked).toMatch(/^\*{6}\d{4}$/);
    expect(state.legs[0]?.receiver.account_number_masked).toMatch(/^\*{6}\d{4}$/);
    expect(response.body).not.toContain('qr_payload');
    expect(response.body).not.toContain('merchant_reference');
    expect(response.body).not.toContain('end_user_ref');
    expect(response.body).not.toContain(SOMCHAI_SENDER.account_name_th);
  });

  it('hands the capability over in a no-store body to a same-origin request only, and the intake takes it', async () => {
    const { order } = await createOrder();
    const session = await openLink(order.checkout_url!);
    const crossSite = await pageRequest(session, 'POST', '/slip-upload', { headers: { 'sec-fetch-site': 'cross-site' } });
    expect(crossSite.statusCode).toBe(403);
    expect(errorOf(crossSite).code).toBe('scope_denied');
    const otherOrigin = await pageRequest(session, 'POST', '/slip-upload', { headers: { origin: 'https://evil.example' } });
    expect(otherOrigin.statusCode).toBe(403);
    const withBody = await pageRequest(session, 'POST', '/slip-upload', { headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
    expect(withBody.statusCode).toBe(422);

    const response = await pageRequest(session, 'POST', '/slip-upload', { headers: { 'sec-fetch-site': 'same-origin', origin: PUBLIC_BASE } });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['cache-control']).toBe('no-store');
    const capability = response.json<SlipUpload>();
    expect(capability).toMatchObject({ upload_url: `${PUBLIC_BASE}/v1/pay/deposits/${order.id}/slip`, max_bytes: 4_194_304, content_types: ['image/jpeg', 'image/png', 'image/webp', 'application/json'] });

    // The sandbox bank's slip, uploaded with the page's capability through the ordinary intake.
    const simulated = await pageRequest(session, 'POST', '/sandbox-transfer', {
      headers: { 'idempotency-key': 'sim-1', 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({}),
    });
    expect(simulated.statusCode, simulated.body).toBe(201);
    const transfer = simulated.json<SandboxTransferView>();
    expect(transfer.deposit_id).toBe(order.id);
    const upload = await uploadMultipart(app, capability, Buffer.from(transfer.slip.image_base64, 'base64'));
    expect(upload.statusCode, upload.body).toBe(202);
    const processing = await stateOf(session);
    expect(processing.slips).toEqual({ uploaded: 1, processing: true, uploads_left: 2 });
    expect(processing.can_upload).toBe(false);
    expect(processing.can_simulate).toBe(false);
    await app.instance.worker.runDueJobs();
    const settled = await stateOf(session);
    expect(settled.status).toBe('settled');
    expect(settled.settlement).toEqual({ amount_received_minor: 50_000, partial: false });
    expect(settled.legs.every((leg) => leg.qr_image_url === null)).toBe(true);
  });

  it('simulates a transfer once per Idempotency-Key, refuses bad input with the spec codes, and only while the order awaits payment', async () => {
    const { order } = await createOrder();
    const session = await openLink(order.checkout_url!);
    const post = (headers: Record<string, string>, body?: string) => pageRequest(session, 'POST', '/sandbox-transfer', { headers: { 'sec-fetch-site': 'same-origin', ...headers }, ...(body === undefined ? {} : { body }) });
    expect(errorOf(await post({})).code).toBe('idempotency_key_required');
    expect(errorOf(await post({ 'idempotency-key': 'k1', 'content-type': 'text/plain' }, 'x')).code).toBe('unsupported_media_type');
    expect(errorOf(await post({ 'idempotency-key': 'k1', 'content-type': 'application/json' }, '{')).code).toBe('malformed_json');
    const unknownField = await post({ 'idempotency-key': 'k1', 'content-type': 'application/json' }, JSON.stringify({ amount_minor: 1 }));
    expect(unknownField.statusCode).toBe(422);
    expect(errorOf(unknownField).details.fields).toEqual([{ path: 'amount_minor', reason: 'unknown_field' }]);
    const unknownLeg = await post({ 'idempotency-key': 'k1', 'content-type': 'application/json' }, JSON.stringify({ leg_ref: 'dleg_nope' }));
    expect(errorOf(unknownLeg).details.fields).toEqual([{ path: 'leg_ref', reason: 'unknown_leg' }]);
    const { rows: before } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::int AS count FROM sandbox_bank_transfers WHERE deposit_id = $1', [order.id]);
    expect(before[0]?.count).toBe(0);

    const first = await post({ 'idempotency-key': 'k2' });
    expect(first.statusCode).toBe(201);
    const replay = await post({ 'idempotency-key': 'k2' });
    expect(replay.statusCode).toBe(201);
    expect(replay.headers['idempotent-replay']).toBe('true');
    expect(replay.json<SandboxTransferView>().trans_ref).toBe(first.json<SandboxTransferView>().trans_ref);
    const { rows: after } = await app.testDatabase.database.query<{ count: number }>('SELECT count(*)::int AS count FROM sandbox_bank_transfers WHERE deposit_id = $1', [order.id]);
    expect(after[0]?.count).toBe(1);

    const canceled = await app.signed({ method: 'POST', url: `/v1/pay/deposits/${order.id}/cancel`, idempotency_key: crypto.randomUUID() });
    expect(canceled.statusCode).toBe(200);
    const refused = await post({ 'idempotency-key': 'k3' });
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused)).toMatchObject({ code: 'deposit_not_payable', details: { status: 'canceled' } });
  });

  it('gives a live order the same page without the sandbox: no button, and 404 for the simulated transfer', async () => {
    const { status, order } = await createOrder({ credentials: live });
    expect(status).toBe(202);
    const session = await openLink(order.checkout_url!);
    expect(session.set_cookie).toMatch(/^pg_checkout=v1\.mch_[0-9A-Z]+\.l\./);
    const state = await stateOf(session);
    expect(state.livemode).toBe(true);
    expect(state.can_simulate).toBe(false);
    const simulated = await pageRequest(session, 'POST', '/sandbox-transfer', { headers: { 'idempotency-key': 'live-1', 'sec-fetch-site': 'same-origin' } });
    expect(simulated.statusCode).toBe(404);
    expect(errorOf(simulated).code).toBe('resource_not_found');
  });
});

/** The page's cancel, same-origin unless the headers say otherwise. */
function cancel(session: Session, headers: Record<string, string> = {}, body?: string) {
  return pageRequest(session, 'POST', '/cancel', { headers: { 'sec-fetch-site': 'same-origin', ...headers }, ...(body === undefined ? {} : { body }) });
}

describe("the payer's cancel", () => {
  it('cancels an order awaiting payment as end_user with end_user_request, once per key, and refuses bad requests changing nothing', async () => {
    const { status, order } = await createOrder();
    expect(status).toBe(201);
    const session = await openLink(order.checkout_url!);
    expect((await stateOf(session)).can_cancel).toBe(true);

    expect((await cancel(session, { 'sec-fetch-site': 'cross-site', 'idempotency-key': 'c0' })).statusCode).toBe(403);
    expect(errorOf(await cancel(session)).code).toBe('idempotency_key_required');
    const withBody = await cancel(session, { 'idempotency-key': 'c0', 'content-type': 'application/json' }, '{"reason":"x"}');
    expect(withBody.statusCode).toBe(422);
    const noCookie = await pageRequest({ ...session, cookie: '' }, 'POST', '/cancel', { headers: { 'sec-fetch-site': 'same-origin', 'idempotency-key': 'c0' } });
    expect(noCookie.statusCode).toBe(404);
    // Another order's session does not open this order's path.
    const other = await openLink((await createOrder()).order.checkout_url!);
    const foreign = await app.instance.app.inject({
      method: 'POST',
      url: `${session.page}/cancel`,
      headers: { host: new URL(PUBLIC_BASE).host, cookie: other.cookie, 'sec-fetch-site': 'same-origin', 'idempotency-key': 'c0' },
    });
    expect(foreign.statusCode).toBe(404);
    expect((await app.signed({ url: `/v1/pay/deposits/${order.id}` })).json<Order>().status).toBe('awaiting_payment');

    const canceled = await cancel(session, { 'idempotency-key': 'c1' });
    expect(canceled.statusCode, canceled.body).toBe(200);
    expectSecurityHeaders(canceled);
    const state = canceled.json<CheckoutState>();
    expect(state).toMatchObject({ object: 'checkout', status: 'canceled', can_cancel: false, can_upload: true });
    expect(state.late_slip_accepted_until).not.toBeNull();

    const read = (await app.signed({ url: `/v1/pay/deposits/${order.id}` })).json<Order>();
    expect(read).toMatchObject({ status: 'canceled', canceled_by: 'end_user', cancel_reason_code: 'end_user_request', is_terminal: false });
    expect(read.late_slip_accepted_until).toBe(state.late_slip_accepted_until);
    const events = (await eventsOfMerchant(app, app.sandbox.merchant_id)).filter((event) => event.data.object.id === order.id && event.type === 'deposit.canceled');
    expect(events).toHaveLength(1);
    expect(events[0]?.data.object).toMatchObject({ canceled_by: 'end_user', cancel_reason_code: 'end_user_request' });
    expect((events[0] as unknown as { request?: { id: string } }).request?.id).toBe(canceled.headers['request-id']);

    const replay = await cancel(session, { 'idempotency-key': 'c1' });
    expect(replay.statusCode).toBe(200);
    expect(replay.headers['idempotent-replay']).toBe('true');
    const again = await cancel(session, { 'idempotency-key': 'c2' });
    expect(again.statusCode).toBe(409);
    expect(errorOf(again)).toMatchObject({ code: 'deposit_not_cancelable', details: { status: 'canceled' } });
    expect((await eventsOfMerchant(app, app.sandbox.merchant_id)).filter((event) => event.data.object.id === order.id && event.type === 'deposit.canceled')).toHaveLength(1);
  });

  it('refuses once a slip exists, and for an order still waiting for liquidity', async () => {
    const { order } = await createOrder();
    const session = await openLink(order.checkout_url!);
    const capability = (await pageRequest(session, 'POST', '/slip-upload', { headers: { 'sec-fetch-site': 'same-origin' } })).json<SlipUpload>();
    const transfer = (await pageRequest(session, 'POST', '/sandbox-transfer', { headers: { 'idempotency-key': 'slip-first', 'sec-fetch-site': 'same-origin' } })).json<SandboxTransferView>();
    expect((await uploadMultipart(app, capability, Buffer.from(transfer.slip.image_base64, 'base64'))).statusCode).toBe(202);
    expect((await stateOf(session)).can_cancel).toBe(false);
    const refused = await cancel(session, { 'idempotency-key': 'after-slip' });
    expect(refused.statusCode).toBe(409);
    expect(errorOf(refused)).toMatchObject({ code: 'deposit_not_cancelable', details: { reason: 'slip_received' } });

    const waiting = await createOrder({ credentials: live });
    expect(waiting.status).toBe(202);
    const waitingSession = await openLink(waiting.order.checkout_url!);
    expect((await stateOf(waitingSession)).can_cancel).toBe(false);
    const notYet = await cancel(waitingSession, { 'idempotency-key': 'waiting' });
    expect(notYet.statusCode).toBe(409);
    expect(errorOf(notYet)).toMatchObject({ code: 'deposit_not_cancelable', details: { status: 'awaiting_liquidity' } });
    expect((await app.signed({ url: `/v1/pay/deposits/${waiting.order.id}`, credentials: live })).json<Order>().status).toBe('awaiting_liquidity');
  });
});

describe("a brand's checkout origin", () => {
  it('is set by the platform administrator, checked, audited, and used by every order of the brand', async () => {
    const brand = app.sandbox.white_label_id;
    const set = (body: unknown, token?: string) => app.backoffice({ method: 'POST', url: `/v1/bo/brands/${brand}/checkout-base-url`, body, ...(token ? { token } : {}) });
    for (const bad of ['http://pay.example.com', 'https://pay.example.com/path', 'https://user:pw@pay.example.com', 'https://pay.example.com/?a=1', 'ftp://pay.example.com', 'javascript:alert(1)']) {
      const refused = await set({ checkout_base_url: bad });
      expect(refused.statusCode, bad).toBe(422);
      expect(errorOf(refused).details.fields).toEqual([expect.objectContaining({ path: 'checkout_base_url', reason: 'invalid_format' })]);
    }
    const operator = await app.instance.services.tenancy.createBackofficeCredential(
      { actor_type: 'system', actor_id: 'test', request_id: null },
      { white_label_id: brand, name: 'Brand operator', role: 'operator' },
    );
    expect((await set({ checkout_base_url: 'https://pay.brand.example' }, operator.token)).statusCode).toBe(403);

    const accepted = await set({ checkout_base_url: 'https://pay.brand.example/' });
    expect(accepted.statusCode, accepted.body).toBe(200);
    expect(accepted.json<{ checkout_base_url: string }>().checkout_base_url).toBe('https://pay.brand.example');
    const { order } = await createOrder();
    expect(order.checkout_url).toMatch(new RegExp(`^https://pay\\.brand\\.example/checkout/${brand}/${order.id}/cs_`));
    // The brand's host points at this service: the link opens here, with a Secure cookie on https.
    const opened = await openLink(order.checkout_url!);
    expect(opened.set_cookie).toContain('Secure');
    const { rows } = await app.testDatabase.database.query<{ action: string }>("SELECT action FROM audit_log WHERE action = 'brand.checkout_base_url_set'");
    expect(rows.length).toBeGreaterThan(0);

    const cleared = await set({ checkout_base_url: null });
    expect(cleared.json<{ checkout_base_url: string | null }>().checkout_base_url).toBeNull();
    const read = await app.signed({ url: `/v1/pay/deposits/${order.id}` });
    expect(read.json<Order>().checkout_url).toMatch(new RegExp(`^${PUBLIC_BASE}/checkout/`));
    expect(read.json<Order>().checkout_url!.split('/').at(-1)).toBe(order.checkout_url!.split('/').at(-1));
  });
});

describe('uploads from another origin', () => {
  it('answers the browser preflight of the upload address and marks its answers readable by any origin', async () => {
    const { order } = await createOrder();
    const preflight = await app.instance.app.inject({
      method: 'OPTIONS',
      url: `/v1/pay/deposits/${order.id}/slip`,
      headers: { origin: 'https://pay.brand.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,idempotency-key' },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('*');
    expect(preflight.headers['access-control-allow-methods']).toBe('POST');
    expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('idempotency-key');
    expect(preflight.headers['access-control-allow-credentials']).toBeUndefined();
    const refused = await app.instance.app.inject({ method: 'POST', url: `/v1/pay/deposits/${order.id}/slip`, headers: { origin: 'https://pay.brand.example' } });
    expect(refused.statusCode).toBe(401);
    expect(refused.headers['access-control-allow-origin']).toBe('*');
    expect(String(refused.headers['access-control-expose-headers'])).toContain('Retry-After');
  });
});

describe('logs', () => {
  it('never carry the link secret, the session cookie or the capability', async () => {
    const { order } = await createOrder();
    const secret = order.checkout_url!.split('/').at(-1)!;
    const session = await openLink(order.checkout_url!);
    await browserGet(order.checkout_url!.replace(secret, `${secret.slice(0, -2)}zz`));
    await browserGet(`${order.checkout_url}/extra`);
    await pageRequest(session, 'GET', '');
    await pageRequest(session, 'GET', '/status');
    const capability = await pageRequest(session, 'POST', '/slip-upload', { headers: { 'sec-fetch-site': 'same-origin' } });
    const token = capability.json<SlipUpload>().token;
    const text = logChunks.join('');
    expect(text).toContain('/checkout/:white_label_id/:deposit_id/:secret');
    expect(text).toContain('/checkout/:white_label_id/:deposit_id/status');
    expect(text).not.toContain(secret);
    expect(text).not.toContain(secret.slice(3, 23));
    expect(text).not.toContain(session.cookie.split('=')[1]!.split('.').at(-1)!);
    expect(text).not.toContain(token.split('.')[2]!);
    expect(text).not.toContain('cs_');
  });
});
