import crypto from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, TEST_MASTER_KEY, type TestApp } from '../support/app.ts';
import { createDeposit, type CreatedDeposit } from '../support/slips.ts';

/**
 * Issue 28, item 7: a signed link the service hands out has one spelling, the one the service writes. For
 * the QR image link that is the signature in unpadded base64url of exactly 22 characters and `expires` in
 * decimal without a leading zero; any other spelling answers as a forged link does (404
 * `resource_not_found`, counted in the caller's address bucket, not the link's). The checkout link and its
 * session cookie are held to the same rule: the secret and the MAC as written, the cookie's end canonical.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** The same bytes with other unused low bits in the last character (`unused_bits` of them). */
function otherLowBits(text: string, unused_bits: number): string[] {
  const index = BASE64URL.indexOf(text.at(-1)!);
  const spellings: string[] = [];
  for (let bits = 1; bits < 1 << unused_bits; bits += 1) spellings.push(`${text.slice(0, -1)}${BASE64URL[index ^ bits]}`);
  return spellings;
}

function toStandardBase64(text: string): string {
  return text.replace(/-/g, '+').replace(/_/g, '/');
}

/** A sandbox deposit whose value picked by `pick` contains `-` or `_`, so that a `+/` spelling differs from it. */
async function depositWhere(pick: (deposit: CreatedDeposit) => string): Promise<CreatedDeposit> {
  for (let attempt = 0; attempt < 40; attempt += 1) {
    const deposit = await createDeposit(app, { amount_minor: 20_000 + attempt * 100 });
    if (/[-_]/.test(pick(deposit))) return deposit;
  }
  throw new Error('no deposit had a - or _ in its signed value');
}

function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}

function get(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return app.instance.app.inject({ method: 'GET', url, headers, remoteAddress: '198.51.100.77' });
}

describe('the QR image link', () => {
  let deposit: CreatedDeposit;
  let link: URL;
  let forged: LightMyRequestResponse;

  /** The link with one query value replaced by `value`, sent exactly as given (no encoding added). */
  function withValue(name: 'signature' | 'expires', value: string): string {
    const original = encodeURIComponent(link.searchParams.get(name)!);
    return pathOf(link.href).replace(`${name}=${original}`, `${name}=${value}`);
  }

  function expectLikeForged(response: LightMyRequestResponse, label: string): void {
    expect(response.statusCode, `${label}: ${response.body}`).toBe(forged.statusCode);
    expect(errorOf(response).code, label).toBe(errorOf(forged).code);
    expect(response.headers['x-ratelimit-scope'], label).toBe(forged.headers['x-ratelimit-scope']);
    expect(response.headers['content-type'], label).toBe(forged.headers['content-type']);
  }

  beforeAll(async () => {
    deposit = await depositWhere((candidate) => new URL(candidate.legs[0]!.qr_image_url!).searchParams.get('signature')!);
    link = new URL(deposit.legs[0]!.qr_image_url!);
    forged = await get(withValue('signature', 'AAAAAAAAAAAAAAAAAAAAAA'));
  });

  it('is written canonically and serves the image as written; a forged one is 404 in the address bucket', async () => {
    expect(link.searchParams.get('signature')).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(link.searchParams.get('expires')).toMatch(/^[1-9][0-9]*$/);
    const image = await get(pathOf(link.href));
    expect(image.statusCode, image.body).toBe(200);
    expect(image.headers['content-type']).toBe('image/png');
    expect(forged.statusCode).toBe(404);
    expect(errorOf(forged).code).toBe('resource_not_found');
    expect(forged.headers['x-ratelimit-scope']).toBe('ip');
  });

  it('refuses `expires` with leading zeros as an invalid link, and the link as written still works after', async () => {
    const expires = link.searchParams.get('expires')!;
    for (const spelling of [`0${expires}`, `00${expires}`, `000000000000`.slice(expires.length) + expires]) {
      if (spelling === expires) continue;
      expectLikeForged(await get(withValue('expires', spelling)), `expires=${spelling}`);
    }
    expect((await get(pathOf(link.href))).statusCode).toBe(200);
  });

  it('refuses every other spelling of the signature: standard base64, padding, other unused bits', async () => {
    const signature = link.searchParams.get('signature')!;
    const spellings = [
      encodeURIComponent(toStandardBase64(signature)),
      toStandardBase64(signature),
      encodeURIComponent(`${signature}==`),
      `${signature}%3D`,
      ...otherLowBits(signature, 4).map(encodeURIComponent),
    ];
    for (const spelling of spellings) expectLikeForged(await get(withValue('signature', spelling)), `signature=${spelling}`);
    expect((await get(pathOf(link.href))).statusCode).toBe(200);
  });
});

describe('the checkout link and its session', () => {
  /** The session cookie's MAC, computed as the service does, under the tests' master key. */
  function sessionMac(parts: string[]): string {
    const key = crypto.createHmac('sha256', TEST_MASTER_KEY).update('checkout.session.v1').digest();
    return crypto.createHmac('sha256', key).update(['session', ...parts].join('\n')).digest('base64url');
  }

  function browserGet(url: string, cookie?: string): Promise<LightMyRequestResponse> {
    const parsed = new URL(url, app.instance.services.publicBaseUrl());
    return get(`${parsed.pathname}${parsed.search}`, { host: parsed.host, ...(cookie ? { cookie } : {}) });
  }

  it('opens only with the secret as written: standard base64, padding and other unused bits are a wrong secret', async () => {
    const deposit = await depositWhere((candidate) => candidate.checkout_url!.split('/').at(-1)!);
    const url = deposit.checkout_url!;
    const secret = url.split('/').at(-1)!;
    expect(secret).toMatch(/^cs_[A-Za-z0-9_-]{43}$/);
    const wrong = await browserGet(url.replace(secret, `cs_${'A'.repeat(43)}`));
    expect(wrong.statusCode).toBe(404);
    for (const spelling of [encodeURIComponent(toStandardBase64(secret)), `${secret}%3D`, ...otherLowBits(secret, 2)]) {
      const response = await browserGet(url.replace(secret, spelling));
      expect(response.statusCode, spelling).toBe(404);
      expect(response.headers['content-type']).toBe(wrong.headers['content-type']);
      expect(response.headers['set-cookie'], spelling).toBeUndefined();
    }
    expect((await browserGet(url)).statusCode).toBe(303);
  });

  it('reads the session only as written: an end with a leading zero is no session, even under a valid MAC', async () => {
    const deposit = await createDeposit(app, { amount_minor: 24_300 });
    const opened = await browserGet(deposit.checkout_url!);
    expect(opened.statusCode, opened.body).toBe(303);
    const cookie = String(opened.headers['set-cookie']).split(';')[0]!;
    const page = String(opened.headers.location);
    expect((await browserGet(`${page}/status`, cookie)).statusCode).toBe(200);
    const [, merchant_id, mode, expires, mac] = /^pg_checkout=v1\.([^.]+)\.([tl])\.([0-9]+)\.([A-Za-z0-9_-]+)$/.exec(cookie)!;
    const [white_label_id, deposit_id] = page.split('/').slice(2, 4) as [string, string];
    // The MAC is recomputed with the tests' key, so that only the spelling of the end is wrong.
    expect(sessionMac([white_label_id, deposit_id, merchant_id!, mode!, expires!])).toBe(mac);
    const padded = `0${expires}`;
    const leadingZero = `pg_checkout=v1.${merchant_id}.${mode}.${padded}.${sessionMac([white_label_id, deposit_id, merchant_id!, mode!, padded])}`;
    const refused = await browserGet(`${page}/status`, leadingZero);
    expect(refused.statusCode, refused.body).toBe(404);
    expect(errorOf(refused).code).toBe('resource_not_found');
    for (const spelling of otherLowBits(mac!, 2)) {
      expect((await browserGet(`${page}/status`, cookie.replace(mac!, spelling))).statusCode, spelling).toBe(404);
    }
    expect((await browserGet(`${page}/status`, cookie)).statusCode).toBe(200);
  });
});
