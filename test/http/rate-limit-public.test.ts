import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { createDeposit } from '../support/slips.ts';
import { BUCKETS } from '../../src/http/rate-limit.ts';
import { loadConfig } from '../../src/platform/config.ts';

/**
 * Public traffic and its buckets: a signed link (a leg's QR image) counts in a bucket of its own once its
 * signature verifies, so junk from the same address cannot deny end users their QR; the client address of
 * the `public` bucket comes from X-Forwarded-For only when the request arrives from a configured proxy.
 */

let app: TestApp;
let behindProxy: TestApp;

beforeAll(async () => {
  app = await createTestApp();
  behindProxy = await createTestApp({ config: { TRUSTED_PROXIES: '10.0.0.0/8, ::1' } });
});
afterAll(async () => {
  await app.close();
  await behindProxy.close();
});

function startOfNextWindow(target: TestApp): void {
  const now = target.clock.now().getTime();
  target.clock.set(new Date(Math.ceil((now + 1) / 60_000) * 60_000));
}

/** Junk from one address until its `public` bucket is spent. */
async function exhaustPublicBucket(target: TestApp, headers: Record<string, string>, remoteAddress: string): Promise<void> {
  for (let index = 0; index <= BUCKETS.public.limit; index += 1) {
    await target.instance.app.inject({ method: 'GET', url: `/v1/pay/deposits/dep_junk${index}/legs/dleg_x/qr.png?wl=x&expires=1&signature=x`, headers, remoteAddress });
  }
}

function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}

describe('signed public links have their own bucket', () => {
  it('junk from an address that spends its public bucket does not stop a valid QR link from that address', async () => {
    startOfNextWindow(app);
    const created = await createDeposit(app, { amount_minor: 12_300 });
    const link = pathOf(created.legs[0]!.qr_image_url!);
    await exhaustPublicBucket(app, {}, '203.0.113.50');
    const junk = await app.instance.app.inject({ method: 'GET', url: '/v1/pay/deposits/dep_more/legs/dleg_x/qr.png?wl=x&expires=1&signature=x', remoteAddress: '203.0.113.50' });
    expect(junk.statusCode).toBe(429);
    expect(errorOf(junk).details).toMatchObject({ bucket: 'public', scope: 'ip' });

    const image = await app.instance.app.inject({ method: 'GET', url: link, remoteAddress: '203.0.113.50' });
    expect(image.statusCode).toBe(200);
    expect(image.headers['content-type']).toBe('image/png');
    expect(image.headers['x-ratelimit-scope']).toBe('link');
    expect(image.headers['ratelimit-policy']).toBe(`${BUCKETS.public_link.limit};w=60`);
  });

  it('a forged signature for a real link counts in the caller’s address bucket, never in the link’s', async () => {
    startOfNextWindow(app);
    const created = await createDeposit(app, { amount_minor: 12_400 });
    const link = pathOf(created.legs[0]!.qr_image_url!);
    const forged = link.replace(/signature=[^&]+/, 'signature=AAAAAAAAAAAAAAAAAAAAAA');
    for (let index = 0; index <= BUCKETS.public_link.limit + 5; index += 1) {
      const answer = await app.instance.app.inject({ method: 'GET', url: forged, remoteAddress: '198.51.100.20' });
      expect(answer.statusCode).toBe(404);
      expect(answer.headers['x-ratelimit-scope']).toBe('ip');
    }
    const image = await app.instance.app.inject({ method: 'GET', url: link, remoteAddress: '198.51.100.21' });
    expect(image.statusCode).toBe(200);
    expect(Number(image.headers['ratelimit-remaining'])).toBe(BUCKETS.public_link.limit - 1);
  });

  it('one link is limited on its own: past its bucket it answers 429 for that link only', async () => {
    startOfNextWindow(app);
    const first = await createDeposit(app, { amount_minor: 12_500 });
    const second = await createDeposit(app, { amount_minor: 12_600 });
    const link = pathOf(first.legs[0]!.qr_image_url!);
    for (let index = 0; index < BUCKETS.public_link.limit; index += 1) {
      expect((await app.instance.app.inject({ method: 'GET', url: link, remoteAddress: `192.0.2.${index % 250}` })).statusCode).toBe(200);
    }
    const over = await app.instance.app.inject({ method: 'GET', url: link, remoteAddress: '192.0.2.251' });
    expect(over.statusCode).toBe(429);
    expect(errorOf(over).details).toMatchObject({ bucket: 'public_link', scope: 'link' });
    expect((await app.instance.app.inject({ method: 'GET', url: pathOf(second.legs[0]!.qr_image_url!), remoteAddress: '192.0.2.251' })).statusCode).toBe(200);
    // Sixty QR images are rendered: generous time for a busy machine.
  }, 120_000);
});

describe('the client address and trusted proxies', () => {
  it('without TRUSTED_PROXIES, X-Forwarded-For is ignored: a client cannot pick the address it is counted under', async () => {
    startOfNextWindow(app);
    await exhaustPublicBucket(app, { 'x-forwarded-for': '203.0.113.99' }, '198.51.100.77');
    // Every junk request counted under the socket's address, whatever the header said.
    const fromOtherHeader = await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors', headers: { 'x-forwarded-for': '203.0.113.100' }, remoteAddress: '198.51.100.77' });
    expect(fromOtherHeader.statusCode).toBe(429);
    const otherSocket = await app.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors', headers: { 'x-forwarded-for': '203.0.113.99' }, remoteAddress: '198.51.100.78' });
    expect(otherSocket.statusCode).toBe(200);
  });

  it('behind a configured proxy, each client named in X-Forwarded-For has its own bucket; a spoofed header from outside the proxy is ignored', async () => {
    startOfNextWindow(behindProxy);
    // Through the proxy (10.1.2.3): the client 203.0.113.1 spends its bucket.
    await exhaustPublicBucket(behindProxy, { 'x-forwarded-for': '203.0.113.1' }, '10.1.2.3');
    const spent = await behindProxy.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors', headers: { 'x-forwarded-for': '203.0.113.1' }, remoteAddress: '10.1.2.3' });
    expect(spent.statusCode).toBe(429);
    // Another client behind the same proxy is unaffected.
    const neighbour = await behindProxy.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors', headers: { 'x-forwarded-for': '203.0.113.2' }, remoteAddress: '10.1.2.3' });
    expect(neighbour.statusCode).toBe(200);
    // A client forging the header itself, from outside the proxy list, is counted under its own address.
    const forged = await behindProxy.instance.app.inject({ method: 'GET', url: '/v1/webhooks/test-vectors', headers: { 'x-forwarded-for': '203.0.113.2' }, remoteAddress: '198.51.100.5' });
    expect(forged.statusCode).toBe(200);
    const { rows } = await behindProxy.testDatabase.database.query<{ subject: string }>(`SELECT subject FROM rate_limit_counters WHERE bucket = 'public' AND subject = '198.51.100.5'`);
    expect(rows).toHaveLength(1);
  });

  it('refuses a malformed TRUSTED_PROXIES in the configuration', () => {
    for (const value of ['10.0.0.0/8, not-an-address', '10.0.0.0/33', '::1/129', '10.0.0.1/8/1']) {
      expect(() => loadConfig({ TRUSTED_PROXIES: value })).toThrow(/TRUSTED_PROXIES/);
    }
    expect(loadConfig({ TRUSTED_PROXIES: ' 10.0.0.0/8 , ::1 ' }).trusted_proxies).toEqual(['10.0.0.0/8', '::1']);
  });
});
