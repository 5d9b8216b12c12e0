import http from 'node:http';
import net from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { ensureDebianProgram } from './debian-package.ts';

/**
 * Browser tests drive Debian's chromium through playwright-core; no browser is ever downloaded. When the
 * binary is missing, scripts/ensure-chromium.sh installs it from the Debian package servers, so that
 * `npm install && npm test` on a fresh machine runs these tests too. With CI=true a chromium that cannot
 * be installed fails the tests (a green CI must mean they ran); elsewhere they are skipped with the reason.
 */

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export function ensureChromium(): string | null {
  return ensureDebianProgram({ name: 'chromium', program_path: CHROMIUM_PATH, path_variable: 'CHROMIUM_PATH', skipped_label: 'browser tests' });
}

/** Host names the browser resolves to this machine (the tests' own servers listen on 127.0.0.1). */
export const MERCHANT_HOST = 'shop.merchant.test';

/**
 * One headless chromium per test file. The flags keep it off the network it cannot reach here (without
 * them its background connections are refused by the closed network and slow everything down);
 * Playwright starts it with a fresh temporary profile (its own --user-data-dir) and removes it on close.
 */
export function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
      `--host-resolver-rules=MAP ${MERCHANT_HOST} 127.0.0.1`,
    ],
  });
}

/** A free TCP port on 127.0.0.1 (for a PUBLIC_BASE_URL that must be known before the service listens). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };

/**
 * A merchant's site on another origin: `/shop?pay=<checkout_url>` is the page with the payment link the
 * payer follows (so the checkout is opened by a cross-site navigation, as in real use), and every other
 * path is where the payer lands back (`return_url`), showing the address it was reached at.
 */
export async function startMerchantSite(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const url = new URL(request.url ?? '/', `http://${MERCHANT_HOST}`);
    const escape = (text: string) => text.replace(/[&<>"]/g, (character) => HTML_ESCAPES[character] ?? character);
    const body =
      url.pathname === '/shop'
        ? `<!doctype html><html lang="en"><head><title>Shop</title></head><body><main><h1>Shop</h1><a id="pay" href="${escape(url.searchParams.get('pay') ?? '')}">Pay now</a></main></body></html>`
        : `<!doctype html><html lang="en"><head><title>Back at the shop</title></head><body><main><h1 id="back">Back at the shop</h1><p id="where">${escape(url.pathname + url.search)}</p></main></body></html>`;
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    origin: `http://${MERCHANT_HOST}:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
