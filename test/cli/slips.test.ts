import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs, uploadMultipart } from '../support/slips.ts';
import { runCli } from '../../src/cli/commands.ts';

/**
 * `npm run cli -- sandbox pay` against the service listening on a real port: the sandbox bank's
 * transfer is made with the sandbox merchant's signed request, the slip image lands in a file, and with
 * `--upload` the slip goes to the order's upload address with a fresh capability, as an end user's would.
 */

let app: TestApp;
let baseUrl: string;
let directory: string;

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  app = await createTestApp({ config: { PUBLIC_BASE_URL: baseUrl } });
  await app.instance.app.listen({ port, host: '127.0.0.1' });
  // The CLI signs with the real time: the service's clock must agree with it.
  app.clock.set(new Date());
  directory = fs.mkdtempSync(path.join(os.tmpdir(), 'sandbox-cli-'));
});
afterAll(async () => {
  await app.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

async function cli(argv: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
    env: { PG_BASE_URL: baseUrl, PG_API_KEY: app.sandbox.api_key, PG_SIGNING_SECRET: app.sandbox.signing_secret, DATA_DIR: directory, ...env },
  });
  return { code, stdout, stderr };
}

describe('sandbox pay', () => {
  it('writes the slip the sandbox bank returns; uploaded by hand it settles the order', async () => {
    const order = await createDeposit(app, { amount_minor: 10_000 });
    const file = path.join(directory, 'slip.png');
    const paid = await cli(['sandbox', 'pay', '--deposit', order.id, '--out', file, '--json']);
    expect(paid.code, paid.stderr).toBe(0);
    expect(JSON.parse(paid.stdout)).toMatchObject({ deposit_id: order.id, amount_minor: 10_000, slip_file: file, trans_ref: expect.stringMatching(/^[0-9A-Z]{21}$/) });
    const image = fs.readFileSync(file);
    expect(image.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect((await uploadMultipart(app, order.slip_upload, image)).statusCode).toBe(202);
    await runJobs(app);
    expect((await getDeposit(app, order.id)).status).toBe('settled');
  });

  it('--upload sends the slip to the upload address with a fresh capability; options make the other outcomes', async () => {
    const order = await createDeposit(app, { amount_minor: 10_000 });
    const paid = await cli(['sandbox', 'pay', '--deposit', order.id, '--amount-minor', '9000', '--format', 'jpeg', '--upload', '--out', path.join(directory, 'short.jpg')]);
    expect(paid.code, paid.stderr).toBe(0);
    expect(paid.stdout).toMatch(/transferred 90\.00 THB .*\nslip written to .*short\.jpg\nuploaded: receipt rcpt_/);
    await runJobs(app);
    expect(await getDeposit(app, order.id)).toMatchObject({ status: 'settled', partial: true, amount_received_minor: 9_000 });
  });

  it('usage errors exit 2, refusals exit 1 with the error code', async () => {
    expect((await cli(['sandbox', 'pay'])).code).toBe(2);
    expect((await cli(['sandbox', 'pay', '--deposit', 'dep_x', '--sender-bank', '004'])).code).toBe(2);
    expect((await cli(['sandbox', 'refund', '--deposit', 'dep_x'])).code).toBe(2);
    const help = await cli(['sandbox', 'pay', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--receiver-account');
    const missing = await cli(['sandbox', 'pay', '--deposit', 'dep_01K0NOSUCHID0000000000000']);
    expect(missing).toMatchObject({ code: 1 });
    expect(missing.stderr).toContain('resource_not_found');
    const withoutCredentials = await cli(['sandbox', 'pay', '--deposit', 'dep_x'], { PG_API_KEY: '', PG_BASE_URL: '' });
    expect(withoutCredentials.code).toBe(1);
    expect(withoutCredentials.stderr).toContain('sandbox_credentials_missing');
  });
});
