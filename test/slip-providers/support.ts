import { Writable } from 'node:stream';
import { expect } from 'vitest';
import type { TestApp } from '../support/app.ts';
import type { StatefulFakeProvider } from '../support/fake-provider-bank.ts';
import { startFakeEasySlip } from '../support/fake-easyslip.ts';
import { startFakeRdcw } from '../support/fake-rdcw.ts';
import { startFakeSlipOk } from '../support/fake-slipok.ts';

/**
 * The three fake providers (test/support) with the credentials a brand sets for them, the configuration that
 * points the service at them, and a log sink that keeps every line, so that a test can look for a credential
 * in everything the service wrote.
 */

export const SLIPOK_CREDENTIALS = { branch_id: '4242', key: 'slipok-brand-key-0123456789-AbCd' };
export const EASYSLIP_CREDENTIALS = { key: '0f0e0d0c-0b0a-4908-8706-05040302Ef01' };
export const RDCW_CREDENTIALS = { client_id: 'rdcw-brand-client-7777', client_secret: 'rdcw-brand-secret-0123456789-GhIj' };
/** The credentials' values that must never come back: every one of them (the branch id is only digits of a route). */
export const SECRET_VALUES = [SLIPOK_CREDENTIALS.key, EASYSLIP_CREDENTIALS.key, RDCW_CREDENTIALS.client_id, RDCW_CREDENTIALS.client_secret];

export interface FakeProviders {
  slipok: StatefulFakeProvider;
  easyslip: StatefulFakeProvider;
  rdcw: StatefulFakeProvider;
  /** The service's configuration for them: each URL, one attempt (no backoff waits in tests), a short timeout. */
  config: Record<string, string>;
  resetAll(): void;
  close(): Promise<void>;
}

export async function startFakeProviders(): Promise<FakeProviders> {
  const slipok = await startFakeSlipOk(SLIPOK_CREDENTIALS);
  const easyslip = await startFakeEasySlip(EASYSLIP_CREDENTIALS.key);
  const rdcw = await startFakeRdcw(RDCW_CREDENTIALS);
  const config: Record<string, string> = {};
  for (const [name, fake] of [['SLIPOK', slipok], ['EASYSLIP', easyslip], ['RDCW', rdcw]] as const) {
    config[`SLIP_PROVIDER_${name}_URL`] = fake.url;
    config[`SLIP_PROVIDER_${name}_MAX_ATTEMPTS`] = '1';
    config[`SLIP_PROVIDER_${name}_TIMEOUT_MS`] = '1000';
  }
  return {
    slipok,
    easyslip,
    rdcw,
    config,
    resetAll() {
      slipok.reset();
      easyslip.reset();
      rdcw.reset();
    },
    async close() {
      await Promise.all([slipok.close(), easyslip.close(), rdcw.close()]);
    },
  };
}

/** A writable stream that keeps every log line. */
export function logCapture(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, text: () => chunks.join('') };
}

/** Fails when any credential value appears in the text. */
export function expectNoSecret(text: string, where: string): void {
  for (const secret of SECRET_VALUES) expect(text.includes(secret), `${where} holds a credential`).toBe(false);
}

/** A back-office credential of a brand with a role, and its token. */
export async function credentialOf(app: TestApp, white_label_id: string, role: 'operator' | 'reviewer'): Promise<string> {
  const response = await app.backoffice({ method: 'POST', url: '/v1/bo/credentials', body: { white_label_id, role, name: `${role} of ${white_label_id}` } });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<{ token: string }>().token;
}
