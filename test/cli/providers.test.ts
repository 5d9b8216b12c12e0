import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import type { ProviderCliIo } from '../../src/cli/providers.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { EASYSLIP_CREDENTIALS, RDCW_CREDENTIALS, SLIPOK_CREDENTIALS, expectNoSecret, startFakeProviders, type FakeProviders } from '../slip-providers/support.ts';

/**
 * `npm run cli -- providers …` run in process through the real entry (`runCli`) against the service listening on
 * a real port, with the platform administrator's credential, and the fake providers behind the service.
 */

let app: TestApp;
let fakes: FakeProviders;
let baseUrl: string;
let directory: string;
let brand: string;
const printed: string[] = [];

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(argv: string[], env: Record<string, string> = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIo & ProviderCliIo = {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
    env: { PG_BASE_URL: baseUrl, PG_OPERATOR_TOKEN: app.operator_token, DATA_DIR: directory, LOG_LEVEL: 'silent', ...env },
  };
  const code = await runCli(argv, io);
  printed.push(stdout, stderr);
  return { code, stdout, stderr };
}

function credentialsFile(name: string, credentials: unknown): string {
  const file = path.join(directory, name);
  fs.writeFileSync(file, JSON.stringify(credentials), { mode: 0o600 });
  return file;
}

beforeAll(async () => {
  fakes = await startFakeProviders();
  app = await createTestApp({ config: fakes.config });
  await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(app.instance.app.server.address() as { port: number }).port}`;
  directory = fs.mkdtempSync(path.join(os.tmpdir(), 'providers-cli-'));
  brand = (await app.createMerchant({ livemode: true })).white_label_id;
});
afterAll(async () => {
  await app.close();
  await fakes.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

describe('npm run cli -- providers', () => {
  it('sets the primary from a credentials file, shows it masked, and tests it', async () => {
    const set = await cli(['providers', 'set', '--brand', brand, '--slot', 'primary', '--provider', 'slipok', '--credentials-file', credentialsFile('slipok.json', SLIPOK_CREDENTIALS)]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('primary   slipok    credentials ••••AbCd');
    const shown = await cli(['providers', 'show', '--brand', brand, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ object: 'slip_provider_settings', primary: { provider: 'slipok', credential_hint: '••••AbCd' }, fallback: null });
    const tested = await cli(['providers', 'test', '--brand', brand, '--slot', 'primary']);
    expect(tested.code, tested.stderr).toBe(0);
    expect(tested.stdout).toBe('primary slipok: ok, 1000 verifications left\n');
  });

  it('sets the fallback from PG_PROVIDER_CREDENTIALS; a refused test exits 1 with its reason', async () => {
    const set = await cli(['providers', 'set', '--brand', brand, '--slot', 'fallback', '--provider', 'rdcw'], { PG_PROVIDER_CREDENTIALS: JSON.stringify(RDCW_CREDENTIALS) });
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('fallback  rdcw      credentials ••••GhIj');
    fakes.rdcw.bank.mode = 'credentials_refused';
    const tested = await cli(['providers', 'test', '--brand', brand, '--slot', 'fallback']);
    fakes.rdcw.bank.mode = 'normal';
    expect(tested.code).toBe(1);
    expect(tested.stdout).toBe('fallback rdcw: refused (credentials_refused)\n');
  });

  it('rotates the primary, and removes the fallback then the primary', async () => {
    const rotated = await cli(['providers', 'set', '--brand', brand, '--slot', 'primary', '--provider', 'easyslip', '--credentials-file', credentialsFile('easyslip.json', EASYSLIP_CREDENTIALS)]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(rotated.stdout).toContain('primary   easyslip  credentials ••••Ef01');
    const refused = await cli(['providers', 'remove', '--brand', brand, '--slot', 'primary']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error: validation_error: /);
    expect((await cli(['providers', 'remove', '--brand', brand, '--slot', 'fallback'])).code).toBe(0);
    const removed = await cli(['providers', 'remove', '--brand', brand, '--slot', 'primary']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toContain('primary   none');
  });

  it('answers the service’s refusals: bad credentials 422, another brand 404; nothing written', async () => {
    const bad = await cli(['providers', 'set', '--brand', brand, '--slot', 'primary', '--provider', 'slipok'], { PG_PROVIDER_CREDENTIALS: JSON.stringify(EASYSLIP_CREDENTIALS) });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error: validation_error: /);
    const unknown = await cli(['providers', 'show', '--brand', 'wl_01JZZZZZZZZZZZZZZZZZZZZZZZ']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^error: resource_not_found: /);
    const { rows } = await app.instance.services.database.query('SELECT 1 FROM slip_provider_settings WHERE white_label_id = $1', [brand]);
    expect(rows).toHaveLength(0);
  });

  it('refuses usage mistakes with exit 2: no brand, no credentials, a credential on the command line', async () => {
    expect((await cli(['providers', 'show'])).code).toBe(2);
    const noCredentials = await cli(['providers', 'set', '--brand', brand, '--slot', 'primary', '--provider', 'slipok']);
    expect(noCredentials.code).toBe(2);
    expect(noCredentials.stderr).toContain('--credentials-file');
    expect((await cli(['providers', 'set', '--brand', brand, '--slot', 'primary', '--provider', 'slipok', '--key', SLIPOK_CREDENTIALS.key])).code).toBe(2);
    expect((await cli(['providers', 'test', '--brand', brand, '--slot', 'secondary'])).code).toBe(2);
    const help = await cli(['providers', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('npm run cli -- providers');
  });

  it('never printed a credential', () => {
    expectNoSecret(printed.join('\n'), 'the CLI output');
  });
});
