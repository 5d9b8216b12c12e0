import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { expect } from 'vitest';
import { createTestApp, type TestApp, type TestAppOptions, type MerchantCredentials } from './app.ts';
import { freePort } from './browser.ts';
import { runJobs, SOMCHAI_SENDER } from './slips.ts';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import { CONSOLE_CONTENT_SECURITY_POLICY } from '../../src/backoffice-console/routes.ts';
import type { DepositView } from '../../src/deposits/service.ts';

/**
 * The back-office console's doors for tests: sign-in links made by the real CLI (`bo login`) against the service
 * listening on a real port, sign-ins through the link's page over HTTP, and cases sent to review by the sandbox's
 * 101.00 THB scenario (SENDER_NAME_MISMATCH) through the job worker on the test clock.
 */

/**
 * The service listening on a free port of 127.0.0.1, its address the console's own origin (BACKOFFICE_BASE_URL),
 * which the CLI's sign-in links point at. `options` are createTestApp's; their config is kept.
 */
export async function listeningConsoleApp(options: TestAppOptions = {}): Promise<{ app: TestApp; base: string }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const app = await createTestApp({ ...options, config: { ...options.config, BACKOFFICE_BASE_URL: base } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  return { app, base };
}

/** listeningConsoleApp with a merchant of the sandbox brand (the brand the console's tests sign in to). */
export async function consoleAppWithMerchant(options: TestAppOptions = {}): Promise<{ app: TestApp; base: string; merchant: MerchantCredentials }> {
  const { app, base } = await listeningConsoleApp(options);
  return { app, base, merchant: await app.createMerchant({ white_label_id: app.sandbox.white_label_id }) };
}

export interface ConsoleLinkOptions {
  brand?: string;
  role?: 'reviewer' | 'operator';
  name?: string;
  staff?: string;
  /** The operator token the CLI calls with (PG_OPERATOR_TOKEN); the platform administrator's by default. */
  token?: string;
}

export interface ConsoleLink {
  url: string;
  expires_at: string;
  white_label_id: string;
  credential_id: string;
  staff_id: string;
  role: string;
}

/** `npm run cli -- bo login … --json`, run in process through the CLI's entry, against `base_url`. */
export async function consoleLink(app: TestApp, base_url: string, options: ConsoleLinkOptions = {}): Promise<ConsoleLink> {
  const argv = ['bo', 'login', '--json'];
  if (options.brand) argv.push('--brand', options.brand);
  if (options.role) argv.push('--role', options.role);
  if (options.name) argv.push('--name', options.name);
  if (options.staff) argv.push('--staff', options.staff);
  let stdout = '';
  let stderr = '';
  const directory = fs.mkdtempSync(`${os.tmpdir()}/console-cli-`);
  const io: CliIo = {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
    env: { PG_BASE_URL: base_url, PG_OPERATOR_TOKEN: options.token ?? app.operator_token, DATA_DIR: directory, LOG_LEVEL: 'silent' },
  };
  const code = await runCli(argv, io);
  fs.rmSync(directory, { recursive: true, force: true });
  expect(code, stderr).toBe(0);
  return JSON.parse(stdout) as ConsoleLink;
}

/** The session cookie's value in a Set-Cookie header, or null. */
export function sessionCookieOf(response: Response): string | null {
  const header = response.headers.get('set-cookie') ?? '';
  const match = /pg_bo_session=([^;]*)/.exec(header);
  return match?.[1] ? match[1] : null;
}

/** Uses a sign-in link as a browser would: its page, then the form's POST. Answers the POST's response. */
export async function useLink(url: string): Promise<Response> {
  const page = await fetch(url, { redirect: 'manual' });
  expect(page.status).toBe(200);
  const token = /name="token" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
  return fetch(new URL('/bo/sign-in', url), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ token }).toString(),
  });
}

/** Signs in with a fresh link and answers the session cookie. */
export async function signIn(app: TestApp, base_url: string, options: ConsoleLinkOptions = {}): Promise<{ cookie: string; link: ConsoleLink }> {
  const link = await consoleLink(app, base_url, options);
  const response = await useLink(link.url);
  expect(response.status).toBe(303);
  const cookie = sessionCookieOf(response);
  expect(cookie).toBeTruthy();
  return { cookie: cookie!, link };
}

/** A console GET with the session cookie. */
export function consoleGet(base_url: string, path: string, cookie: string | null): Promise<Response> {
  return fetch(`${base_url}${path}`, { redirect: 'manual', headers: cookie ? { cookie: `pg_bo_session=${cookie}` } : {} });
}

/** A console form POST with the session cookie, as the console's own page sends it; a header given as '' is left out. */
export function consolePost(base_url: string, path: string, cookie: string | null, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  const merged: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', ...(cookie ? { cookie: `pg_bo_session=${cookie}` } : {}), ...headers };
  return fetch(`${base_url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== '')),
    body: new URLSearchParams(form).toString(),
  });
}

/** The audit log's entries about one object (its target_id), oldest first. */
export async function auditTrail(app: TestApp, target_id: string): Promise<{ action: string; actor_id: string }[]> {
  const { rows } = await app.testDatabase.database.query<{ action: string; actor_id: string }>('SELECT action, actor_id FROM audit_log WHERE target_id = $1 ORDER BY created_at, audit_id', [target_id]);
  return rows;
}

/** The headers every console page answers with: its strict content security policy, and never cached. */
export function expectConsolePageHeaders(response: Response): void {
  expect(response.headers.get('content-security-policy')).toBe(CONSOLE_CONTENT_SECURITY_POLICY);
  expect(response.headers.get('cache-control')).toBe('no-store');
}

/** The CSRF token and the decision key a console page's forms carry. */
export function formTokens(html: string): { csrf_token: string; decision_key: string } {
  return {
    csrf_token: /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? '',
    decision_key: /name="decision_key" value="([^"]+)"/.exec(html)?.[1] ?? '',
  };
}

/**
 * A 101.00 THB sandbox deposit with the given merchant reference, left to the sandbox's scenario: the payer
 * transfers from another name and uploads the slip, verification sends the order to review
 * (SENDER_NAME_MISMATCH). Time passes on the test clock a second at a time while the worker runs.
 */
export async function caseInReview(app: TestApp, credentials: MerchantCredentials, merchant_reference: string): Promise<DepositView> {
  const created = await app.signed({
    method: 'POST',
    url: '/v1/pay/deposits',
    idempotency_key: crypto.randomUUID(),
    credentials,
    body: {
      amount_minor: 10_100,
      currency: 'THB',
      merchant_reference,
      end_user_ref: `user-${crypto.randomUUID().slice(0, 8)}`,
      sender: { ...SOMCHAI_SENDER, account_number: `66${crypto.randomInt(10_000_000, 99_999_999)}` },
      client: { device_fingerprint: `device-${crypto.randomUUID()}`, ip: '203.0.113.30', user_agent: 'console-test' },
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json<{ id: string }>().id;
  for (let second = 0; second < 30; second += 1) {
    app.clock.advance(1_000);
    await runJobs(app);
    const order = (await app.signed({ url: `/v1/pay/deposits/${id}`, credentials })).json<DepositView>();
    if (order.status === 'under_review') return order;
  }
  throw new Error(`order ${id} did not reach under_review`);
}
