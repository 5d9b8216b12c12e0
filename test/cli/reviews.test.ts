import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import type { ReviewCliIo } from '../../src/cli/reviews.ts';
import type { ReviewDetail, ReviewQueueItem } from '../../src/review/service.ts';

/**
 * `npm run cli -- reviews …` run in process through the real entry (`runCli`) against the service
 * listening on a real port. Orders reach review through the real slip path (a sandbox transfer from
 * another sender name, the end user's upload, the job worker); reviewers use their own back-office
 * credentials from a token file. The service's public address (PUBLIC_BASE_URL) is deliberately
 * another origin than the one the CLI is given, so the slip image links prove that the token is only
 * ever sent to the configured address.
 */

const PUBLIC_BASE_URL = 'https://review-desk.example';
const NOTE = 'ตรวจสอบสลิปกับธนาคารแล้ว ชื่อผู้โอนเป็นคู่สมรสของผู้ใช้';
const system = { actor_type: 'system' as const, actor_id: 'reviews-cli-test', request_id: null };

let app: TestApp;
let baseUrl: string;
let directory: string;
let reviewerToken: string;
let secondReviewerToken: string;
let brandOperatorToken: string;
let reviewerFile: string;
let secondReviewerFile: string;
let brandOperatorFile: string;
let counter = 0;
/** Every byte the CLI printed in this file, checked at the end for any token. */
const printed: string[] = [];
/** Every address the CLI requested. */
const requested: string[] = [];

const recordingFetch: typeof fetch = (input, init) => {
  requested.push(input instanceof Request ? input.url : String(input));
  return fetch(input, init);
};

function writeTokenFile(name: string, token: string, mode = 0o600): string {
  const file = path.join(directory, name);
  fs.writeFileSync(file, `${token}\n`, { mode });
  fs.chmodSync(file, mode);
  return file;
}

beforeAll(async () => {
  app = await createTestApp({ config: { PUBLIC_BASE_URL } });
  await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.instance.app.server.address() as { port: number };
  baseUrl = `http://127.0.0.1:${address.port}`;
  directory = fs.mkdtempSync(path.join(os.tmpdir(), 'reviews-cli-'));
  const tenancy = app.instance.services.tenancy;
  const brand = app.sandbox.white_label_id;
  reviewerToken = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer A' })).token;
  secondReviewerToken = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'reviewer', name: 'Reviewer B' })).token;
  brandOperatorToken = (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role: 'operator', name: 'Operator' })).token;
  reviewerFile = writeTokenFile('reviewer-a.token', reviewerToken);
  secondReviewerFile = writeTokenFile('reviewer-b.token', secondReviewerToken);
  brandOperatorFile = writeTokenFile('operator.token', brandOperatorToken);
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
  const io: CliIo & ReviewCliIo = {
    stdout: { write: (text: string) => ((stdout += text), true) },
    stderr: { write: (text: string) => ((stderr += text), true) },
    // An empty data directory: no operator credentials file unless a test sets the environment.
    env: { PG_BASE_URL: baseUrl, DATA_DIR: directory, LOG_LEVEL: 'silent', ...options.env },
    fetch: options.fetch ?? recordingFetch,
  };
  const code = await runCli(argv, io);
  printed.push(stdout, stderr);
  return { code, stdout, stderr };
}

async function merchant(): Promise<MerchantCredentials> {
  return app.createMerchant({ white_label_id: app.sandbox.white_label_id });
}

type Order = CreatedDeposit & { owner: MerchantCredentials; image: Buffer };

/** A real order in review: its slip shows another sender name than the declared one (SENDER_NAME_MISMATCH). */
async function orderInReview(): Promise<Order> {
  counter += 1;
  const owner = await merchant();
  const declared = { bank_code: '004', account_number: `83${String(counter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
  const order = await createDeposit(app, { amount_minor: 12_345_00, credentials: owner, sender: declared });
  const transfer = await sandboxTransfer(app, order, { sender: { ...declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' } }, owner);
  const image = slipBytes(transfer);
  const response = await uploadMultipart(app, order.slip_upload, image);
  expect(response.statusCode, response.body).toBe(202);
  await runJobs(app);
  expect((await getDeposit(app, order.id, owner)).status).toBe('under_review');
  return { ...order, owner, image };
}

async function decisionCount(deposit_id: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*) AS count FROM review_decisions WHERE deposit_id = $1', [deposit_id]);
  return Number(rows[0]?.count);
}

describe('reviews list and show', () => {
  it('list: the order in review in a table, as JSON lines, filtered, and every page with --all', async () => {
    const order = await orderInReview();
    const table = await cli(['reviews', 'list', '--token-file', reviewerFile]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^DEPOSIT\s+MODE\s+OPENED_AT\s+AMOUNT_THB\s+REASONS\s+FOUR_EYES\s+ESCALATED\s+BUCKET\n/);
    const line = table.stdout.split('\n').find((text) => text.startsWith(order.id));
    expect(line).toMatch(/test\s+\S+Z\s+12,345\.00\s+SENDER_NAME_MISMATCH\s+no\s+no\s+(under_15m|under_1h|under_4h|extended)$/);

    const lines = await cli(['reviews', 'list', '--json', '--reason', 'SENDER_NAME_MISMATCH', '--mode', 'test'], { env: { PG_REVIEWER_TOKEN: reviewerToken } });
    expect(lines.code, lines.stderr).toBe(0);
    const items = lines.stdout.trim().split('\n').map((text) => JSON.parse(text) as ReviewQueueItem);
    expect(items.find((item) => item.deposit_id === order.id)).toMatchObject({ object: 'review', amount_minor: 12_345_00, reasons: ['SENDER_NAME_MISMATCH'], escalated: false });

    const none = await cli(['reviews', 'list', '--escalated', '--reason', 'NO_SLIP_IMAGE', '--token-file', reviewerFile]);
    expect(none).toMatchObject({ code: 0, stdout: 'No orders in review.\n' });

    // One review per page: the first page says more wait; --all walks them all in queue order.
    await orderInReview();
    const first = await cli(['reviews', 'list', '--limit', '1', '--json', '--token-file', reviewerFile]);
    expect(first.stdout.trim().split('\n')).toHaveLength(1);
    expect(first.stderr).toContain('add --all');
    const all = await cli(['reviews', 'list', '--limit', '1', '--all', '--json', '--token-file', reviewerFile]);
    expect(all.code, all.stderr).toBe(0);
    const walked = all.stdout.trim().split('\n').map((text) => (JSON.parse(text) as ReviewQueueItem).deposit_id);
    const direct = await app.backoffice({ url: '/v1/bo/reviews?limit=100', token: reviewerToken });
    expect(walked).toEqual(direct.json<{ data: ReviewQueueItem[] }>().data.map((item) => item.deposit_id));
    expect(walked.length).toBeGreaterThanOrEqual(2);
  });

  it('show: the order in readable form, and --save-images writes the uploaded slip (0600) through the configured address', async () => {
    const order = await orderInReview();
    const imagesDirectory = path.join(directory, 'images');
    requested.length = 0;
    const shown = await cli(['reviews', 'show', order.id, '--save-images', imagesDirectory, '--token-file', reviewerFile]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`deposit         ${order.id} (test)`);
    expect(shown.stdout).toMatch(/status\s+under_review \(version \d+\)/);
    expect(shown.stdout).toContain('12,345.00 THB ordered; the bank verified 12,345.00 THB');
    expect(shown.stdout).toMatch(/reasons\s+SENDER_NAME_MISMATCH: /);
    expect(shown.stdout).toMatch(/sender_name_match\s+NO\n/);
    expect(shown.stdout).toMatch(/amount_exact\s+yes\n/);
    expect(shown.stdout).toMatch(/bank transfer\s+12,345\.00 THB at /);
    expect(shown.stdout).toMatch(/sender\s+bank 004\s+account x+\S{4}\s+วิภาวรรณ ศ/);
    expect(shown.stdout).toMatch(/declared sender bank 004\s+account \*+\d{4}\s+สม\*\*\* ใจ\*\*\*\n/);
    expect(shown.stdout).toContain('checks         failed sender_name_match; reasons SENDER_NAME_MISMATCH');
    expect(shown.stdout).toContain('approvals       0 of 1 required');
    expect(shown.stdout).toContain('decisions       0');

    const detail = (await app.backoffice({ url: `/v1/bo/reviews/${order.id}`, token: reviewerToken })).json<ReviewDetail>();
    const receipt = detail.slips[0]?.receipt_id ?? '';
    expect(detail.slips[0]?.image_url?.startsWith(PUBLIC_BASE_URL)).toBe(true);
    const file = path.join(imagesDirectory, `${receipt}.png`);
    expect(shown.stdout).toContain(`image          saved to ${file}`);
    expect(Buffer.compare(fs.readFileSync(file), order.image)).toBe(0);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // The link named the public origin; the token went only to the address the reviewer configured.
    expect(requested.length).toBe(2);
    expect(requested.every((url) => url.startsWith(`${baseUrl}/`))).toBe(true);

    const asJson = await cli(['reviews', 'show', order.id, '--json', '--token-file', reviewerFile]);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ object: 'review_detail', deposit_id: order.id, deposit: { status: 'under_review' } });
    const missing = await cli(['reviews', 'show', 'dep_01K0NOSUCHORDER0000000000', '--token-file', reviewerFile]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: resource_not_found: /);
  });

  it('list and show take the operator credential; the platform administrator names the brand', async () => {
    const order = await orderInReview();
    const operator = await cli(['reviews', 'show', order.id, '--token-file', brandOperatorFile]);
    expect(operator.code, operator.stderr).toBe(0);
    const admin = { PG_OPERATOR_TOKEN: app.operator_token };
    const withoutBrand = await cli(['reviews', 'list'], { env: admin });
    expect(withoutBrand.code).toBe(1);
    expect(withoutBrand.stderr).toContain('error: validation_error:');
    expect(withoutBrand.stderr).toContain('add --brand wl_…');
    const withBrand = await cli(['reviews', 'list', '--brand', app.sandbox.white_label_id, '--json'], { env: admin });
    expect(withBrand.code, withBrand.stderr).toBe(0);
    expect(withBrand.stdout).toContain(order.id);
    const imagesDirectory = path.join(directory, 'admin-images');
    const adminShow = await cli(['reviews', 'show', order.id, '--brand', app.sandbox.white_label_id, '--save-images', imagesDirectory], { env: admin });
    expect(adminShow.code, adminShow.stderr).toBe(0);
    expect(fs.readdirSync(imagesDirectory)).toHaveLength(1);
  });
});

describe('reviews decisions', () => {
  it('approve settles the order', async () => {
    const order = await orderInReview();
    const approved = await cli(['reviews', 'approve', order.id, '--note', NOTE, '--token-file', reviewerFile]);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(new RegExp(`^approve ${order.id}: settled\\n`));
    expect(approved.stdout).toMatch(/is settled \(version \d+\)/);
    expect(approved.stdout).toMatch(/decision \S+/);
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'settled', settled_via: 'review', transferred_amount_minor: 12_345_00 });
    // Another reviewer deciding on the settled order is refused, with the order's status.
    const late = await cli(['reviews', 'reject', order.id, '--code', 'SLIP_NOT_GENUINE', '--note', NOTE, '--token-file', secondReviewerFile]);
    expect(late.code).toBe(1);
    expect(late.stderr).toMatch(/^error: review_already_decided: .*\n {2}the order is settled\n$/);
  });

  it('reject: a short note is refused with review_note_required; a proper one rejects', async () => {
    const order = await orderInReview();
    const before = await getDeposit(app, order.id, order.owner);
    const short = await cli(['reviews', 'reject', order.id, '--code', 'SENDER_NOT_ACCOUNT_HOLDER', '--note', 'too short', '--token-file', reviewerFile]);
    expect(short.code).toBe(1);
    expect(short.stdout).toBe('');
    expect(short.stderr).toMatch(/^error: review_note_required: /);
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'under_review', version: before.version });
    const rejected = await cli(['reviews', 'reject', order.id, '--code', 'SENDER_NOT_ACCOUNT_HOLDER', '--note', NOTE, '--token-file', reviewerFile, '--json']);
    expect(rejected.code, rejected.stderr).toBe(0);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ object: 'review_decision', effect: 'rejected', replayed: false, review: { deposit: { status: 'rejected' } } });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'rejected', rejection: { code: 'SENDER_NOT_ACCOUNT_HOLDER' } });
  });

  it('escalate moves the version and keeps the order in review', async () => {
    const order = await orderInReview();
    const before = await getDeposit(app, order.id, order.owner);
    const escalated = await cli(['reviews', 'escalate', order.id, '--note', NOTE], { env: { PG_REVIEWER_TOKEN: reviewerToken } });
    expect(escalated.code, escalated.stderr).toBe(0);
    expect(escalated.stdout).toContain(`escalate ${order.id}: escalated`);
    expect(escalated.stdout).toContain(`is under_review (version ${before.version + 1})`);
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'under_review', version: before.version + 1, review: { escalated: true } });
    const listed = await cli(['reviews', 'list', '--escalated', '--json', '--token-file', reviewerFile]);
    expect(listed.stdout).toContain(order.id);
  });

  it('a lost answer is retried once with the same Idempotency-Key: the service replays, nothing is decided twice', async () => {
    const order = await orderInReview();
    const keys: string[] = [];
    let dropped = false;
    const losingFetch: typeof fetch = async (input, init) => {
      if (init?.method !== 'POST') return fetch(input, init);
      keys.push(new Headers(init.headers).get('idempotency-key') ?? '');
      const response = await fetch(input, init);
      if (dropped) return response;
      // The service decided and answered; the answer is lost on the way back, as on a reset connection.
      dropped = true;
      await response.arrayBuffer();
      throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
    };
    const approved = await cli(['reviews', 'approve', order.id, '--token-file', reviewerFile], { fetch: losingFetch });
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).toContain('warning: no answer from the service (ECONNRESET)');
    expect(approved.stdout).toContain('settled (replayed: the first attempt, whose answer was lost, had recorded it');
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(await decisionCount(order.id)).toBe(1);
    expect((await getDeposit(app, order.id, order.owner)).status).toBe('settled');
  });

  it('refusals exit 1: an operator token cannot decide (scope_denied), and decisions need a reviewer token', async () => {
    const order = await orderInReview();
    const operator = await cli(['reviews', 'approve', order.id, '--token-file', brandOperatorFile]);
    expect(operator.code).toBe(1);
    expect(operator.stderr).toMatch(/^error: scope_denied: /);
    const admin = await cli(['reviews', 'approve', order.id], { env: { PG_OPERATOR_TOKEN: app.operator_token } });
    expect(admin.code).toBe(1);
    expect(admin.stderr).toMatch(/^error: reviewer_token_missing: /);
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'under_review' });
    expect(await decisionCount(order.id)).toBe(0);

    const badFile = writeTokenFile('not-a-token', 'sk_test_notabackofficetoken');
    const bad = await cli(['reviews', 'list', '--token-file', badFile]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(`error: token_invalid: ${badFile} does not hold a back-office token (bo_…)\n`);
    const absent = await cli(['reviews', 'list', '--token-file', path.join(directory, 'absent.token')]);
    expect(absent.code).toBe(1);
    expect(absent.stderr).toContain('token_file_unreadable');
    const shared = writeTokenFile('shared.token', reviewerToken, 0o644);
    const warned = await cli(['reviews', 'list', '--token-file', shared]);
    expect(warned.code).toBe(0);
    expect(warned.stderr).toContain('is readable by other users');
    const unreachable = await cli(['reviews', 'escalate', order.id, '--note', NOTE, '--token-file', reviewerFile], { env: { PG_BASE_URL: 'http://127.0.0.1:9' } });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain('warning: no answer from the service');
    expect(unreachable.stderr).toMatch(/error: service_unreachable: .*the decision may or may not have been recorded/);
  });
});

describe('usage', () => {
  it('usage errors exit 2 with usage text and contact no service', async () => {
    requested.length = 0;
    const cases: string[][] = [
      ['reviews'],
      ['reviews', 'undo', 'dep_x'],
      ['reviews', 'approve'],
      ['reviews', 'approve', 'dep_a', 'dep_b'],
      ['reviews', 'approve', 'dep/../x'],
      ['reviews', 'reject', 'dep_x', '--note', NOTE],
      ['reviews', 'reject', 'dep_x', '--code', 'NOT_A_CODE', '--note', NOTE],
      ['reviews', 'escalate', 'dep_x'],
      ['reviews', 'approve', 'dep_x', '--amount-minor', '12.5'],
      ['reviews', 'approve', 'dep_x', '--save-images', directory],
      ['reviews', 'list', '--limit', '0'],
      ['reviews', 'list', '--limit', '101'],
      ['reviews', 'list', '--mode', 'prod'],
      ['reviews', 'list', '--reason', 'lowercase'],
      ['reviews', 'list', 'extra'],
      ['reviews', 'list', '--colour', 'red'],
      ['reviews', 'list', '--token', reviewerToken],
      ['reviews', 'list', `--token=${reviewerToken}`],
    ];
    for (const argv of cases) {
      const result = await cli(argv, { env: { PG_REVIEWER_TOKEN: reviewerToken } });
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stdout, argv.join(' ')).toBe('');
      expect(result.stderr, argv.join(' ')).toMatch(/^(error: |Usage: )/);
    }
    expect(requested).toEqual([]);
    const json = await cli(['reviews', 'list', '--limit', '0', '--json']);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'usage_error' } });

    const help = await cli(['reviews', '--help']);
    expect(help.code).toBe(0);
    for (const action of ['list', 'show', 'approve', 'reject', 'escalate']) expect(help.stdout).toContain(`  ${action}`);
    const rejectHelp = await cli(['help', 'reviews', 'reject']);
    expect(rejectHelp.code).toBe(0);
    expect(rejectHelp.stdout).toContain('--code <CODE>');
    expect(rejectHelp.stdout).toContain('SENDER_NOT_ACCOUNT_HOLDER');
    const global = await cli(['--help']);
    expect(global.stdout).toContain('reviews --help');
  });

  it('no token appears in any output of this file', () => {
    const output = printed.join('\n');
    expect(output.length).toBeGreaterThan(0);
    for (const token of [reviewerToken, secondReviewerToken, brandOperatorToken, app.operator_token]) {
      expect(output).not.toContain(token);
      expect(output).not.toContain(token.slice(3, 20));
    }
  });
});
