import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart } from '../support/slips.ts';
import { accountOf, fundAvailable } from '../support/withdrawals.ts';
import { HOUR_MS } from '../../src/platform/time.ts';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import type { RefundCliIo } from '../../src/cli/refunds.ts';
import type { DepositView } from '../../src/deposits/service.ts';
import type { WithdrawalView } from '../../src/withdrawals/service.ts';
import type { BackofficeClaimView } from '../../src/review/claims.ts';

/**
 * `npm run cli -- refunds …` run in process through the real entry (`runCli`) against the service listening on a real
 * port: sandbox deposits settle from their verified sender over signed HTTP and the job worker, their credit clears on
 * the test clock, and an operator lists, opens and resolves claims with refunds from a token file of its own.
 */

const NOTE = 'ลูกค้าขอยกเลิกคำสั่งซื้อทางโทรศัพท์ ตรวจสอบแล้ว';
const system = { actor_type: 'system' as const, actor_id: 'refunds-cli-test', request_id: null };

let app: TestApp;
let baseUrl: string;
let directory: string;
let operatorToken: string;
let reviewerToken: string;
let operatorFile: string;
let reviewerFile: string;
/** Every byte the CLI printed in this file, checked at the end for any token. */
const printed: string[] = [];

function writeTokenFile(name: string, token: string): string {
  const file = path.join(directory, name);
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return file;
}

beforeAll(async () => {
  app = await createTestApp();
  await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
  baseUrl = `http://127.0.0.1:${(app.instance.app.server.address() as { port: number }).port}`;
  directory = fs.mkdtempSync(path.join(os.tmpdir(), 'refunds-cli-'));
  const tenancy = app.instance.services.tenancy;
  const brand = app.sandbox.white_label_id;
  operatorToken = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Refund operator' })).token;
  reviewerToken = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer' })).token;
  operatorFile = writeTokenFile('operator.token', operatorToken);
  reviewerFile = writeTokenFile('reviewer.token', reviewerToken);
});
afterAll(async () => {
  await app.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(argv: string[], options: { env?: Record<string, string>; fetch?: typeof fetch } = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIo & RefundCliIo = {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
    // An empty data directory: no operator credentials file unless a test sets the environment.
    env: { PG_BASE_URL: baseUrl, DATA_DIR: directory, LOG_LEVEL: 'silent', ...options.env },
    ...(options.fetch ? { fetch: options.fetch } : {}),
  };
  const code = await runCli(argv, io);
  printed.push(stdout, stderr);
  return { code, stdout, stderr };
}

async function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

/** A settled deposit (paid `paid_minor`), its credit cleared, and other cleared money for the refund's fee. */
async function clearedDeposit(owner: MerchantCredentials, amount_minor: number, paid_minor = amount_minor): Promise<DepositView> {
  const order = await createDeposit(app, { amount_minor, credentials: owner });
  const response = await uploadMultipart(app, order.slip_upload, slipBytes(await sandboxTransfer(app, order, { amount_minor: paid_minor }, owner)));
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  app.clock.advance(72 * HOUR_MS + 1);
  await runJobs(app);
  await fundAvailable(app, accountOf(owner), 20_000);
  const settled = await getDeposit(app, order.id, owner);
  expect(settled.status).toBe('settled');
  return settled;
}

async function refundsOf(owner: MerchantCredentials, deposit_id: string): Promise<WithdrawalView[]> {
  return (await app.signed({ url: `/v1/pay/deposits/${deposit_id}/refunds`, credentials: owner })).json<{ data: WithdrawalView[] }>().data;
}

describe('refunds create and list', () => {
  it('create opens the refund for the merchant, written in the audit log under the operator; list shows it, as a table and as JSON', async () => {
    const owner = await merchant();
    const deposit = await clearedDeposit(owner, 100_000);
    const created = await cli(['refunds', 'create', deposit.id, '--amount-minor', '30000', '--reason', 'customer_request', '--note', NOTE, '--refund-note', 'ยกเลิกคำสั่งซื้อ', '--token-file', operatorFile]);
    expect(created.code, created.stderr).toBe(0);
    const [refund] = await refundsOf(owner, deposit.id);
    expect(refund).toMatchObject({ amount_total_minor: 30_000, refund_reason_code: 'customer_request', refund_note: 'ยกเลิกคำสั่งซื้อ' });
    expect(created.stdout).toContain(`refund ${refund!.id} opened`);
    expect(created.stdout).toMatch(/amount\s+300\.00 THB \(fee \d+\.\d\d THB, reserved from the merchant's wallet \d+\.\d\d THB\)/);
    const { rows } = await app.testDatabase.database.query<{ action: string; actor_type: string }>('SELECT action, actor_type FROM audit_log WHERE target_id = $1', [refund!.id]);
    expect(rows).toEqual([{ action: 'refund.created', actor_type: 'backoffice_credential' }]);

    const table = await cli(['refunds', 'list', deposit.id, '--token-file', reviewerFile]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^ID\s+STATUS\s+AMOUNT\s+FILLED\s+REASON\s+CREATED_AT\n/);
    expect(table.stdout).toMatch(new RegExp(`${refund!.id}\\s+open\\s+300\\.00 THB\\s+0\\.00 THB\\s+customer_request\\s+\\S+Z\\n`));
    const json = await cli(['refunds', 'list', deposit.id, '--json'], { env: { PG_OPERATOR_TOKEN: operatorToken } });
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as WithdrawalView[]).map((item) => item.id)).toEqual([refund!.id]);
    const empty = await cli(['refunds', 'list', (await clearedDeposit(owner, 20_000)).id, '--token-file', operatorFile]);
    expect(empty).toMatchObject({ code: 0, stdout: 'No refunds.\n' });
  });

  it('an answer lost on the network is asked again with the same Idempotency-Key: one refund, the first one', async () => {
    const owner = await merchant();
    const deposit = await clearedDeposit(owner, 100_000);
    let lost = 0;
    const losingFetch: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (init?.method === 'POST' && lost === 0) {
        lost += 1;
        await response.arrayBuffer();
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) });
      }
      return response;
    };
    const created = await cli(['refunds', 'create', deposit.id, '--amount-minor', '20000', '--reason', 'duplicate_payment', '--note', NOTE, '--token-file', operatorFile, '--json'], { fetch: losingFetch });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr).toContain('sending the same refund again with the same Idempotency-Key');
    const refunds = await refundsOf(owner, deposit.id);
    expect(refunds).toHaveLength(1);
    expect(JSON.parse(created.stdout)).toMatchObject({ id: refunds[0]!.id, object: 'withdrawal_order', refund_of_deposit_id: deposit.id });
  });
});

describe('refunds refused', () => {
  it('refusals: the refund rules answer with their figures, a reviewer is refused, usage errors exit 2 before anything is sent', async () => {
    const owner = await merchant();
    const deposit = await clearedDeposit(owner, 50_000);
    const over = await cli(['refunds', 'create', deposit.id, '--amount-minor', '60000', '--reason', 'other', '--note', NOTE, '--token-file', operatorFile]);
    expect(over.code).toBe(1);
    expect(over.stderr).toMatch(/^error: refund_exceeds_refundable: /);
    expect(over.stderr).toContain('refundable_minor: 50000');
    const overJson = await cli(['refunds', 'create', deposit.id, '--amount-minor', '60000', '--reason', 'other', '--note', NOTE, '--token-file', operatorFile, '--json']);
    expect(JSON.parse(overJson.stderr)).toMatchObject({ error: { code: 'refund_exceeds_refundable', details: { refundable_minor: 50_000 } } });
    const byReviewer = await cli(['refunds', 'create', deposit.id, '--amount-minor', '10000', '--reason', 'other', '--note', NOTE, '--token-file', reviewerFile]);
    expect(byReviewer.code).toBe(1);
    expect(byReviewer.stderr).toMatch(/^error: scope_denied: /);
    expect(await refundsOf(owner, deposit.id)).toEqual([]);

    for (const argv of [
      ['refunds', 'create', deposit.id, '--amount-minor', '10000', '--reason', 'other', '--token-file', operatorFile],
      ['refunds', 'create', deposit.id, '--amount-minor', '100.00', '--reason', 'other', '--note', NOTE, '--token-file', operatorFile],
      ['refunds', 'create', '--amount-minor', '10000', '--reason', 'other', '--note', NOTE, '--token-file', operatorFile],
      ['refunds', 'list', deposit.id, '--token', operatorToken],
      ['refunds', 'resolve-claim', 'clm_x', '--note', NOTE, '--amount-minor', '10000', '--refund', 'wdr_x'],
      ['refunds', 'refund-everything', deposit.id],
    ]) {
      const run = await cli(argv);
      expect(run.code, argv.join(' ')).toBe(2);
      expect(run.stderr, argv.join(' ')).toMatch(/^error: /);
    }
    const help = await cli(['refunds', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('resolve-claim');
    expect((await cli(['refunds', 'create', '--help'])).stdout).toContain('--amount-minor <satang>');
  });
});

describe('refunds resolve-claim', () => {
  it('resolves a claim refunded_in_service with a new refund of its deposit, or names an existing one', async () => {
    const owner = await merchant();
    const deposit = await clearedDeposit(owner, 100_000, 110_000);
    const claim_id = deposit.overpayment!.claim_id;
    const resolved = await cli(['refunds', 'resolve-claim', claim_id, '--amount-minor', '10000', '--note', NOTE, '--token-file', operatorFile]);
    expect(resolved.code, resolved.stderr).toBe(0);
    const claim = (await app.backoffice({ url: `/v1/bo/claims/${claim_id}`, token: reviewerToken })).json<BackofficeClaimView>();
    expect(claim).toMatchObject({ status: 'resolved', resolution_code: 'refunded_in_service', refund_id: expect.stringMatching(/^wdr_/) });
    expect(resolved.stdout).toContain(`claim ${claim_id} resolved (refunded_in_service)`);
    expect(resolved.stdout).toMatch(new RegExp(`refund\\s+${claim.refund_id}\\n`));
    expect((await refundsOf(owner, deposit.id)).map((refund) => [refund.id, refund.refund_reason_code])).toEqual([[claim.refund_id, 'claim_resolution']]);

    // A second claim of the same deposit, linked to a refund the operator opened: the claim names it.
    const reported = await app.backoffice({
      method: 'POST',
      url: '/v1/bo/claims',
      token: operatorToken,
      body: { deposit_id: deposit.id, cause: 'additional_transfer', amount_minor: 5_000, evidence: { trans_ref: 'CLIREPORT001' } },
    });
    expect(reported.statusCode, reported.body).toBe(201);
    const opened = await cli(['refunds', 'create', deposit.id, '--amount-minor', '5000', '--reason', 'overpayment', '--note', NOTE, '--token-file', operatorFile, '--json']);
    const refund = JSON.parse(opened.stdout) as WithdrawalView;
    const linked = await cli(['refunds', 'resolve-claim', reported.json<BackofficeClaimView>().id, '--refund', refund.id, '--note', NOTE, '--token-file', operatorFile, '--json']);
    expect(linked.code, linked.stderr).toBe(0);
    expect(JSON.parse(linked.stdout)).toMatchObject({ status: 'resolved', resolution_code: 'refunded_in_service', refund_id: refund.id });
  });

  it('never prints a token', () => {
    const everything = printed.join('');
    for (const token of [operatorToken, reviewerToken]) expect(everything).not.toContain(token);
  });
});
