import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/commands.ts';
import { HOUR_MS, MINUTE_MS, SECOND_MS } from '../../src/platform/time.ts';
import type { TestClockView } from '../../src/test-clocks/service.ts';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs } from '../support/slips.ts';

/**
 * `npm run cli -- clock …` against the service listening on a real port, signed with a sandbox merchant's
 * test key as a merchant's own scripts would be. The CLI signs with the real time, so the service's
 * clock is set to it; test clocks are then frozen apart from it.
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
  app.clock.set(new Date(Math.floor(Date.now() / SECOND_MS) * SECOND_MS));
  directory = fs.mkdtempSync(path.join(os.tmpdir(), 'clock-cli-'));
  // The brand's sandbox counterparty (shared by every merchant) is opened by the first deposit that needs
  // it, with its own jobs; opened here in real time, it keeps them off the clocks of the tests below.
  await createDeposit(app, { amount_minor: 15_000 });
});

afterAll(async () => {
  await app.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

async function cli(argv: string[], options: { credentials?: MerchantCredentials; env?: Record<string, string>; fetch?: typeof fetch } = {}) {
  const credentials = options.credentials ?? app.sandbox;
  let stdout = '';
  let stderr = '';
  const code = await runCli(argv, {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
    env: { PG_BASE_URL: baseUrl, PG_API_KEY: credentials.api_key, PG_SIGNING_SECRET: credentials.signing_secret, DATA_DIR: directory, ...options.env },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  } as Parameters<typeof runCli>[1]);
  return { code, stdout, stderr };
}

const iso = (instant: number): string => new Date(instant).toISOString();

/** Waits (real time, at most 10 s) for the background worker to make `done` true. */
async function until(done: () => Promise<boolean>): Promise<void> {
  for (let wait = 0; wait < 100; wait += 1) {
    if (await done()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the background worker did not get there within 10 s');
}

async function sandboxMerchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

describe('clock', () => {
  it('creates, lists, shows, attaches, advances and detaches a clock from the terminal', async () => {
    const merchant = await sandboxMerchant();
    const frozen = app.clock.now().getTime() + 3 * HOUR_MS;
    const created = await cli(['clock', 'create', '--name', 'CLI rehearsal', '--frozen-time', iso(frozen), '--json'], { credentials: merchant });
    expect(created.code, created.stderr).toBe(0);
    const clock = JSON.parse(created.stdout) as TestClockView;
    expect(clock).toMatchObject({ object: 'test_clock', name: 'CLI rehearsal', frozen_time: iso(frozen), status: 'ready', attached: false });

    const listed = await cli(['clock', 'list'], { credentials: merchant });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^ID +FROZEN_TIME +STATUS +ATTACHED +NAME\\n${clock.id} +${iso(frozen).replace(/\./g, '\\.')} +ready +no +CLI rehearsal\\n$`));

    const attached = await cli(['clock', 'attach', clock.id], { credentials: merchant });
    expect(attached.code, attached.stderr).toBe(0);
    expect(attached.stdout).toContain('attached     yes');
    // The merchant's sandbox now works at the clock's time.
    const deposit = await createDeposit(app, { amount_minor: 15_000, credentials: merchant });
    expect(deposit.created_at).toBe(iso(frozen));

    const advancing = await cli(['clock', 'advance', clock.id, '--by', '20m', '--json'], { credentials: merchant });
    expect(advancing.code, advancing.stderr).toBe(0);
    expect(JSON.parse(advancing.stdout)).toMatchObject({ status: 'advancing', status_details: { advancing: { target_frozen_time: iso(frozen + 20 * MINUTE_MS) } } });
    await runJobs(app);
    const shown = await cli(['clock', 'show', clock.id], { credentials: merchant });
    expect(shown.stdout).toContain(`frozen_time  ${iso(frozen + 20 * MINUTE_MS)}`);
    expect(shown.stdout).toContain(`last advance ${iso(frozen + 20 * MINUTE_MS)}: reached ${iso(frozen + 20 * MINUTE_MS)}, 1 job runs, completed`);
    expect((await getDeposit(app, deposit.id, merchant)).status).toBe('expired');

    const detached = await cli(['clock', 'detach', clock.id, '--json'], { credentials: merchant });
    expect(JSON.parse(detached.stdout)).toMatchObject({ attached: false });
  });

  it('waits for an advance run by the background worker with --wait', async () => {
    const merchant = await sandboxMerchant();
    const created = JSON.parse((await cli(['clock', 'create', '--json'], { credentials: merchant })).stdout) as TestClockView;
    const target = iso(new Date(created.frozen_time).getTime() + 2 * HOUR_MS);
    app.instance.worker.start();
    try {
      const waited = await cli(['clock', 'advance', created.id, '--to', target, '--wait', '--timeout', '60', '--json'], { credentials: merchant });
      expect(waited.code, waited.stderr).toBe(0);
      expect(JSON.parse(waited.stdout)).toMatchObject({ status: 'ready', frozen_time: target, last_advance: { outcome: 'completed' } });
    } finally {
      await app.instance.worker.stop();
    }
  });

  it('replays a write whose answer was lost with the same Idempotency-Key: one clock, not two', async () => {
    const merchant = await sandboxMerchant();
    const keys: string[] = [];
    let lost = false;
    const losingFetch: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      keys.push(String((init?.headers as Record<string, string>)['idempotency-key']));
      if (!lost) {
        lost = true;
        await response.text();
        throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
      }
      return response;
    };
    const created = await cli(['clock', 'create', '--name', 'Once', '--json'], { credentials: merchant, fetch: losingFetch });
    expect(created.code, created.stderr).toBe(0);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(keys[1]);
    const listed = await cli(['clock', 'list', '--json'], { credentials: merchant });
    expect((JSON.parse(listed.stdout) as TestClockView[]).map((clock) => clock.name)).toEqual(['Once']);
  });

  it('reports refusals with the service’s code and fields (exit 1) and usage errors with exit 2', async () => {
    const merchant = await sandboxMerchant();
    const clock = JSON.parse((await cli(['clock', 'create', '--json'], { credentials: merchant })).stdout) as TestClockView;
    const backwards = await cli(['clock', 'advance', clock.id, '--to', iso(new Date(clock.frozen_time).getTime() - MINUTE_MS)], { credentials: merchant });
    expect(backwards.code).toBe(1);
    expect(backwards.stderr).toMatch(/^error: validation_error: .*\n {2}frozen_time: must_be_after_frozen_time \(later than /);
    const unknown = await cli(['clock', 'show', 'clock_01K0NOSUCHCLOCK0000000000', '--json'], { credentials: merchant });
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ error: { code: 'resource_not_found' } });
    const live = await app.instance.services.tenancy.createApiKey(
      { actor_type: 'system', actor_id: 'test', request_id: null },
      { merchant_id: merchant.merchant_id, scope_white_label_id: merchant.white_label_id, livemode: true },
    );
    const withLiveKey = await cli(['clock', 'list'], { env: { PG_API_KEY: live.api_key, PG_SIGNING_SECRET: live.signing_secret } });
    expect(withLiveKey.code).toBe(1);
    expect(withLiveKey.stderr).toContain('resource_not_found');

    for (const argv of [
      ['clock'],
      ['clock', 'rewind', clock.id],
      ['clock', 'show'],
      ['clock', 'show', 'dep_01K0NOTACLOCK000000000000'],
      ['clock', 'advance', clock.id],
      ['clock', 'advance', clock.id, '--to', iso(Date.now()), '--by', '1h'],
      ['clock', 'advance', clock.id, '--by', '0m'],
      ['clock', 'advance', clock.id, '--by', '1 hour'],
      ['clock', 'advance', clock.id, '--by', '1h', '--timeout', '5'],
      ['clock', 'create', '--frozen-time', '2026-08-01'],
      ['clock', 'create', '--to', iso(Date.now())],
      ['clock', 'list', '--limit', '0'],
    ]) {
      const result = await cli(argv, { credentials: merchant });
      expect(result.code, argv.join(' ')).toBe(2);
    }
    const help = await cli(['clock', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('advance <clock_id> (--to TIMESTAMP | --by SPAN)');
    // Nothing was changed by any of it.
    expect(JSON.parse((await cli(['clock', 'show', clock.id, '--json'], { credentials: merchant })).stdout)).toEqual(clock);
  });
  // Last in the file: it moves the service's time past the wall clock that the CLI signs with.
  it('keeps the background worker in real time after a wake from work under a clock', async () => {
    // A slip accepted for an order of a clock wakes the worker from inside the clock's scope; the
    // worker's next polls must still run real-time jobs at the real time.
    const merchant = await sandboxMerchant();
    const frozen = app.clock.now().getTime() - 2 * 24 * HOUR_MS;
    const clock = JSON.parse((await cli(['clock', 'create', '--frozen-time', iso(frozen), '--json'], { credentials: merchant })).stdout) as TestClockView;
    expect((await cli(['clock', 'attach', clock.id], { credentials: merchant })).code).toBe(0);
    const onClock = await createDeposit(app, { amount_minor: 20_000, credentials: merchant });
    const neighbour = await sandboxMerchant();
    const realTime = await createDeposit(app, { amount_minor: 15_000, credentials: neighbour });
    const expiresAt = new Date(realTime.expires_at).getTime();
    app.instance.worker.start();
    try {
      const paid = await cli(['sandbox', 'pay', '--deposit', onClock.id, '--upload', '--out', path.join(directory, 'clock-slip.png')], { credentials: merchant });
      expect(paid.code, paid.stderr).toBe(0);
      app.clock.set(new Date(expiresAt + SECOND_MS));
      await until(async () => (await getDeposit(app, realTime.id, neighbour)).status === 'expired');
      const { rows } = await app.testDatabase.database.query<{ created_at: Date; test_clock_id: string | null }>(
        `SELECT created_at, test_clock_id FROM events WHERE object_id = $1 AND type = 'deposit.expired'`,
        [realTime.id],
      );
      expect(rows.map((row) => [row.created_at.toISOString(), row.test_clock_id])).toEqual([[iso(expiresAt + SECOND_MS), null]]);
      // The clock's order is untouched by the real-time worker: its slip waits for the clock.
      expect((await getDeposit(app, onClock.id, merchant)).status).toBe('awaiting_payment');

      // The service's time is now ahead of the wall clock the CLI signs with, so the merchant asks directly.
      const advance = await app.signed({
        method: 'POST',
        url: `/v1/test/clocks/${clock.id}/advance`,
        idempotency_key: 'clock-cli-last-advance',
        credentials: merchant,
        body: { frozen_time: iso(frozen + MINUTE_MS) },
      });
      expect(advance.statusCode, advance.body).toBe(202);
      await until(async () => (await app.signed({ url: `/v1/test/clocks/${clock.id}`, credentials: merchant })).json().status === 'ready');
      expect(await getDeposit(app, onClock.id, merchant)).toMatchObject({ status: 'settled', settled_at: iso(frozen) });
    } finally {
      await app.instance.worker.stop();
    }
  });
});
