import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type MerchantCredentials, type TestApp } from '../support/app.ts';
import { createDeposit, depositPolicyBody, getDeposit, runJobs, sandboxTransfer, slipBytes, uploadMultipart, type CreatedDeposit } from '../support/slips.ts';
import { Rollback, type Queryable } from '../../src/platform/db.ts';
import { readMigrations } from '../../src/platform/migrate.ts';
import { runCli, type CliIo } from '../../src/cli/commands.ts';
import { createDirectBackend, createRemoteBackend, type AdminBackend } from '../../src/cli/backends.ts';
import type { ReviewDetail, Reviewer } from '../../src/review/service.ts';
import type { BackofficeCredentialView } from '../../src/tenancy/service.ts';

/**
 * Issue 28, items 4 and 5: who may decide a review. Reviews are brought about as a merchant's real sandbox
 * order (a slip whose sender name differs, so SENDER_NAME_MISMATCH) and decided over the back-office API
 * with each reviewer's own bearer token; credentials are issued over the same API (and the CLI) by the
 * brand's operator.
 *
 *  - Item 4: the person who escalated a review may not approve or reject it; another reviewer decides, and
 *    an approval the escalating person gave before escalating stops counting toward four eyes.
 *  - Item 5: every credential is issued to a staff identity (a person), and four eyes and the escalation
 *    rule count people: one person's two credentials give one approval, and cannot escalate with one and
 *    decide with the other. The database backs this with a unique index per review per person.
 *  - A decision the service makes itself (the sandbox's desk, a `system` actor and no credential) has no
 *    person: its staff_id is null, it is nobody else's approval, and the desk approves a review once.
 */

let app: TestApp;
let counter = 0;
let reviewerA: string;
let reviewerB: string;
let reviewerC: string;
let operator: string;
let otherBrandStaffId: string;

const system = { actor_type: 'system' as const, actor_id: 'staff-identity-test', request_id: null };
const NOTE = 'ตรวจสอบสลิปกับธนาคารแล้ว ชื่อผู้โอนไม่ตรงกับชื่อที่ลงทะเบียนไว้';
/** Orders from 200 baht need two approvers in this file's brand. */
const FOUR_EYES_FROM_MINOR = 20_000;

beforeAll(async () => {
  app = await createTestApp();
  const tenancy = app.instance.services.tenancy;
  const brand = app.sandbox.white_label_id;
  const issue = async (role: 'operator' | 'reviewer', name: string) => (await tenancy.createBackofficeCredential(system, { white_label_id: brand, role, name })).token;
  reviewerA = await issue('reviewer', 'Reviewer A');
  reviewerB = await issue('reviewer', 'Reviewer B');
  reviewerC = await issue('reviewer', 'Reviewer C');
  operator = await issue('operator', 'Operator');
  const other = await app.createMerchant();
  otherBrandStaffId = (await tenancy.createBackofficeCredential(system, { white_label_id: other.white_label_id, role: 'reviewer', name: 'Other brand' })).staff_id;
  const policy = await app.backoffice({ method: 'POST', url: '/v1/bo/deposit-policy', token: operator, body: depositPolicyBody({ four_eyes_min_amount_minor: FOUR_EYES_FROM_MINOR }) });
  expect(policy.statusCode, policy.body).toBe(200);
});
afterAll(async () => {
  await app.close();
});

function declaredSender() {
  counter += 1;
  return { bank_code: '004', account_number: `82${String(counter).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' };
}

type Order = CreatedDeposit & { owner: MerchantCredentials };

/** A real order in review: its slip shows another sender name than the one declared (SENDER_NAME_MISMATCH). */
async function orderInReview(amount_minor = 10_000): Promise<Order> {
  const owner = await app.createMerchant({ white_label_id: app.sandbox.white_label_id });
  const declared = declaredSender();
  const order = await createDeposit(app, { amount_minor, credentials: owner, sender: declared });
  const sender = { ...declared, account_name_th: 'วิภาวรรณ ศรีสุข', account_name_en: 'Wipawan Srisuk' };
  const transfer = await sandboxTransfer(app, order, { sender }, owner);
  const uploaded = await uploadMultipart(app, order.slip_upload, slipBytes(transfer));
  expect(uploaded.statusCode, uploaded.body).toBe(202);
  await runJobs(app);
  const reviewed = await getDeposit(app, order.id, owner);
  expect(reviewed).toMatchObject({ status: 'under_review', review: { four_eyes_required: amount_minor >= FOUR_EYES_FROM_MINOR } });
  return { ...order, owner };
}

function decide(token: string, deposit_id: string, action: 'approve' | 'reject' | 'escalate', body: Record<string, unknown> = {}) {
  return app.backoffice({ method: 'POST', url: `/v1/bo/reviews/${deposit_id}/${action}`, token, body });
}

const REJECT = { rejection_code: 'SENDER_NOT_ACCOUNT_HOLDER', note: NOTE };

async function detailOf(deposit_id: string): Promise<ReviewDetail> {
  const response = await app.backoffice({ url: `/v1/bo/reviews/${deposit_id}`, token: reviewerC });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<ReviewDetail>();
}

/** What a refused decision must leave as it was: the order, its decisions, its audit rows and its events. */
async function stateOf(order: Order) {
  const database = app.testDatabase.database;
  const view = await getDeposit(app, order.id, order.owner);
  const count = async (sql: string) => Number((await database.query<{ count: string }>(sql, [order.id])).rows[0]?.count);
  return {
    status: view.status,
    version: view.version,
    review: view.review,
    decisions: await count('SELECT count(*) AS count FROM review_decisions WHERE deposit_id = $1'),
    audit: await count('SELECT count(*) AS count FROM audit_log WHERE target_id = $1'),
    events: await count('SELECT count(*) AS count FROM events WHERE object_id = $1'),
  };
}

/** Issues a credential over the back-office API as the brand's operator. */
function issueCredential(body: Record<string, unknown>, token = operator) {
  return app.backoffice({ method: 'POST', url: '/v1/bo/credentials', token, body });
}

async function issuedCredential(body: Record<string, unknown>): Promise<BackofficeCredentialView & { token: string }> {
  const response = await issueCredential(body);
  expect(response.statusCode, response.body).toBe(201);
  return response.json<BackofficeCredentialView & { token: string }>();
}

/** Two reviewer credentials of one person: the second names the person of the first. */
async function onePersonTwoCredentials(name: string) {
  const first = await issuedCredential({ name: `${name} (desk)`, role: 'reviewer' });
  const second = await issuedCredential({ name: `${name} (laptop)`, role: 'reviewer', staff_id: first.staff_id });
  return { first, second };
}


/** Writes a copy of an order's first decision under another reviewer and person, straight to the table (to prove its rules). */
function copyFirstDecision(deposit_id: string, reviewer_id: string, staff_id: string | null) {
  return app.testDatabase.database.query(
    `INSERT INTO review_decisions (white_label_id, decision_id, deposit_id, merchant_id, livemode, review_opened_at, action, effect, reviewer_id, staff_id,
       note, rejection_code, verified_amount_minor, amount_source, idempotency_key, deposit_version, created_at)
     SELECT white_label_id, $2, deposit_id, merchant_id, livemode, review_opened_at, action, effect, $3, $4,
       note, rejection_code, verified_amount_minor, amount_source, NULL, deposit_version, created_at
       FROM review_decisions WHERE deposit_id = $1 ORDER BY created_at LIMIT 1`,
    [deposit_id, `rvd_${crypto.randomBytes(8).toString('hex')}`, reviewer_id, staff_id],
  );
}

describe('escalation changes who may decide (issue 28, item 4)', () => {
  it('the reviewer who escalated may neither approve nor reject it, and nothing changes; another reviewer decides', async () => {
    const order = await orderInReview();
    expect((await decide(reviewerA, order.id, 'escalate', { note: NOTE })).statusCode).toBe(200);
    const escalated = await stateOf(order);
    expect(escalated).toMatchObject({ status: 'under_review', review: { escalated: true }, decisions: 1 });

    const approve = await decide(reviewerA, order.id, 'approve');
    expect(approve.statusCode).toBe(409);
    expect(errorOf(approve)).toMatchObject({ code: 'escalation_same_reviewer', retryable: false });
    expect(errorOf(await decide(reviewerA, order.id, 'reject', REJECT))).toMatchObject({ code: 'escalation_same_reviewer' });
    expect(await stateOf(order)).toEqual(escalated);

    const approved = await decide(reviewerB, order.id, 'approve');
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json()).toMatchObject({ effect: 'settled' });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'settled', settled_via: 'review' });
  });

  it('another reviewer may reject an escalated review alone', async () => {
    const order = await orderInReview();
    expect((await decide(reviewerA, order.id, 'escalate', { note: NOTE })).statusCode).toBe(200);
    expect(errorOf(await decide(reviewerA, order.id, 'reject', REJECT))).toMatchObject({ code: 'escalation_same_reviewer' });
    const rejected = await decide(reviewerB, order.id, 'reject', REJECT);
    expect(rejected.statusCode, rejected.body).toBe(200);
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'rejected', rejection: { code: 'SENDER_NOT_ACCOUNT_HOLDER' } });
  });

  it('with four eyes, an approval given before escalating stops counting: two other reviewers must approve', async () => {
    const order = await orderInReview(FOUR_EYES_FROM_MINOR);
    expect((await decide(reviewerA, order.id, 'approve')).json()).toMatchObject({ effect: 'approval_recorded' });
    expect((await decide(reviewerA, order.id, 'escalate', { note: NOTE })).statusCode).toBe(200);
    const detail = await detailOf(order.id);
    expect(detail).toMatchObject({ approvals_required: 2, approvals: [] });
    expect(detail.decisions.map((decision) => decision.effect)).toEqual(['approval_recorded', 'escalated']);

    const second = await decide(reviewerB, order.id, 'approve');
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json()).toMatchObject({ effect: 'approval_recorded', review: { approvals: [{ staff_id: expect.stringMatching(/^stf_/) }] } });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'under_review' });
    const third = await decide(reviewerC, order.id, 'approve');
    expect(third.statusCode, third.body).toBe(200);
    expect(third.json()).toMatchObject({ effect: 'settled' });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'settled', settled_via: 'review' });
  });
});

describe('four eyes counts people, not credentials (issue 28, item 5)', () => {
  it('a credential is issued to a new person by default, or to the person its creation names (of the same brand only)', async () => {
    const first = await issuedCredential({ name: 'Kanya S.', role: 'reviewer' });
    expect(first).toMatchObject({ object: 'backoffice_credential', role: 'reviewer', white_label_id: app.sandbox.white_label_id, staff_id: expect.stringMatching(/^stf_[0-9A-Z]{26}$/) });
    const second = await issuedCredential({ name: 'Kanya S. (operator)', role: 'operator', staff_id: first.staff_id });
    expect(second.staff_id).toBe(first.staff_id);
    expect(second.id).not.toBe(first.id);
    const stranger = await issuedCredential({ name: 'Kanya S.', role: 'reviewer' });
    expect(stranger.staff_id).not.toBe(first.staff_id);
    // The platform administrator issues to a person of the brand it names, the same way.
    const byAdmin = await issueCredential({ name: 'Kanya S. (admin-issued)', role: 'reviewer', white_label_id: app.sandbox.white_label_id, staff_id: first.staff_id }, app.operator_token);
    expect(byAdmin.statusCode, byAdmin.body).toBe(201);
    expect(byAdmin.json<BackofficeCredentialView>().staff_id).toBe(first.staff_id);

    const counts = async () => {
      const { rows } = await app.testDatabase.database.query<{ credentials: string; staff: string; audit: string }>(
        `SELECT (SELECT count(*) FROM backoffice_credentials) AS credentials, (SELECT count(*) FROM staff_identities) AS staff, (SELECT count(*) FROM audit_log) AS audit`,
      );
      return rows[0];
    };
    const before = await counts();
    // A person of another brand, the platform's own administrator, an unknown person, a malformed id: refused, nothing written.
    const { rows: platformStaff } = await app.testDatabase.database.query<{ staff_id: string }>('SELECT staff_id FROM staff_identities WHERE white_label_id IS NULL');
    for (const staff_id of [otherBrandStaffId, platformStaff[0]?.staff_id, `stf_${'0'.repeat(26)}`]) {
      expect(errorOf(await issueCredential({ name: 'Borrowed person', role: 'reviewer', staff_id }))).toMatchObject({ code: 'resource_not_found' });
    }
    expect(errorOf(await issueCredential({ name: 'Malformed person', role: 'reviewer', staff_id: 'somchai' }))).toMatchObject({
      code: 'validation_error',
      details: { fields: [{ path: 'staff_id' }] },
    });
    expect(await counts()).toEqual(before);
  });

  it('one person through two credentials cannot give both approvals of a four-eyes review', async () => {
    const person = await onePersonTwoCredentials('Anan P.');
    const order = await orderInReview(FOUR_EYES_FROM_MINOR);
    const first = await decide(person.first.token, order.id, 'approve');
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ effect: 'approval_recorded', review: { approvals: [{ reviewer_id: person.first.id, staff_id: person.first.staff_id }] } });
    const recorded = await stateOf(order);

    const again = await decide(person.second.token, order.id, 'approve');
    expect(again.statusCode).toBe(409);
    expect(errorOf(again)).toMatchObject({ code: 'four_eyes_same_reviewer' });
    expect(await stateOf(order)).toEqual(recorded);

    const other = await decide(reviewerB, order.id, 'approve');
    expect(other.statusCode, other.body).toBe(200);
    expect(other.json()).toMatchObject({ effect: 'settled' });
    const { rows } = await app.testDatabase.database.query<{ details: { approver_staff_ids: string[] } }>(
      "SELECT details FROM audit_log WHERE target_id = $1 AND action = 'review.approved'",
      [order.id],
    );
    expect(rows[0]?.details.approver_staff_ids).toHaveLength(2);
    expect(rows[0]?.details.approver_staff_ids[0]).toBe(person.first.staff_id);
    expect(rows[0]?.details.approver_staff_ids[1]).not.toBe(person.first.staff_id);
  });

  it('one person cannot escalate through one credential and then approve or reject through another', async () => {
    const person = await onePersonTwoCredentials('Busaba K.');
    const order = await orderInReview();
    expect((await decide(person.first.token, order.id, 'escalate', { note: NOTE })).statusCode).toBe(200);
    const escalated = await stateOf(order);
    expect(errorOf(await decide(person.second.token, order.id, 'approve'))).toMatchObject({ code: 'escalation_same_reviewer' });
    expect(errorOf(await decide(person.second.token, order.id, 'reject', REJECT))).toMatchObject({ code: 'escalation_same_reviewer' });
    expect(await stateOf(order)).toEqual(escalated);
    expect((await decide(reviewerB, order.id, 'approve')).json()).toMatchObject({ effect: 'settled' });
  });

  it('the database refuses a second approval by one person, and a decision naming another person than its credential’s', async () => {
    const person = await onePersonTwoCredentials('Chai W.');
    const order = await orderInReview(FOUR_EYES_FROM_MINOR);
    expect((await decide(person.first.token, order.id, 'approve')).json()).toMatchObject({ effect: 'approval_recorded' });
    const database = app.testDatabase.database;
    const copyOfFirstApproval = (reviewer_id: string, staff_id: string) => copyFirstDecision(order.id, reviewer_id, staff_id);
    await expect(copyOfFirstApproval(person.second.id, person.first.staff_id)).rejects.toThrow(/review_decisions_one_approval_per_staff/);
    const other = await issuedCredential({ name: 'Someone else', role: 'reviewer' });
    await expect(copyOfFirstApproval(person.second.id, other.staff_id)).rejects.toThrow(/review_decisions_staff_of_credential/);
    const { rows } = await database.query<{ count: string }>('SELECT count(*) AS count FROM review_decisions WHERE deposit_id = $1', [order.id]);
    expect(Number(rows[0]?.count)).toBe(1);
  });

  it('the CLI names the person with --staff, on the database and through the API alike', async () => {
    await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.instance.app.server.address() as { port: number };
    const backends: AdminBackend[] = [
      createDirectBackend({ tenancy: app.instance.services.tenancy }),
      createRemoteBackend({ base_url: `http://127.0.0.1:${address.port}`, token: app.operator_token }),
    ];
    const cli = async (argv: string[], backend: AdminBackend) => {
      let stdout = '';
      let stderr = '';
      const io: CliIo = { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: (text: string) => (stderr += text) }, env: {}, openBackend: async () => backend };
      return { code: await runCli(argv, io), stdout, stderr };
    };
    const brand = app.sandbox.white_label_id;
    for (const backend of backends) {
      const created = await cli(['credentials', 'create', '--brand', brand, '--role', 'reviewer', '--name', `Dao ${backend.kind}`, '--json'], backend);
      expect(created.code, created.stderr).toBe(0);
      const person = JSON.parse(created.stdout) as BackofficeCredentialView;
      expect(person.staff_id).toMatch(/^stf_/);
      const again = await cli(['credentials', 'create', '--brand', brand, '--role', 'reviewer', '--name', `Dao ${backend.kind} 2`, '--staff', person.staff_id, '--json'], backend);
      expect(again.code, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ staff_id: person.staff_id });
      const foreign = await cli(['credentials', 'create', '--brand', brand, '--role', 'reviewer', '--name', 'Borrowed', '--staff', otherBrandStaffId], backend);
      expect(foreign.code).toBe(1);
      expect(foreign.stderr).toContain('resource_not_found');
    }
    const help = await cli(['credentials', 'create', '--help'], backends[0]!);
    expect(help.stdout).toContain('--staff <stf_…>');
  });
});

describe('decisions the service makes itself have no person', () => {
  /** The sandbox's own desk, as src/sandbox/scenarios.ts decides: a system actor, not a credential. */
  const sandboxDesk = (): Reviewer => ({
    actor: { actor_type: 'system', actor_id: 'sandbox_scenario', request_id: null },
    reviewer_id: 'sandbox_scenario',
    request_id: `req_${crypto.randomBytes(8).toString('hex')}`,
    idempotency_key: null,
  });
  const approve = { action: 'approve', note: null, verified_amount_minor: null } as const;

  it('the desk approves a four-eyes review once, with a null staff_id, and a person gives the other approval', async () => {
    const order = await orderInReview(FOUR_EYES_FROM_MINOR);
    const review = app.instance.services.review;
    const brand = app.sandbox.white_label_id;
    expect(await review.decide(brand, order.id, sandboxDesk(), approve)).toMatchObject({ ok: true, value: { effect: 'approval_recorded' } });
    const recorded = await stateOf(order);
    // The desk is one approver: its second approval is not a second pair of eyes, and changes nothing.
    expect(await review.decide(brand, order.id, sandboxDesk(), approve)).toMatchObject({ ok: false, error: { code: 'four_eyes_same_reviewer' } });
    expect(await stateOf(order)).toEqual(recorded);
    expect((await detailOf(order.id)).approvals).toEqual([expect.objectContaining({ reviewer_id: 'sandbox_scenario', staff_id: null })]);

    const person = await decide(reviewerA, order.id, 'approve');
    expect(person.statusCode, person.body).toBe(200);
    expect(person.json()).toMatchObject({ effect: 'settled' });
    expect(await getDeposit(app, order.id, order.owner)).toMatchObject({ status: 'settled', settled_via: 'review' });
    const detail = await detailOf(order.id);
    expect(detail.decisions.map((decision) => [decision.reviewer_id === 'sandbox_scenario', decision.staff_id])).toEqual([
      [true, null],
      [false, expect.stringMatching(/^stf_/)],
    ]);
    const { rows } = await app.testDatabase.database.query<{ details: { approver_staff_ids: (string | null)[] } }>(
      "SELECT details FROM audit_log WHERE target_id = $1 AND action = 'review.approved'",
      [order.id],
    );
    expect(rows[0]?.details.approver_staff_ids).toEqual([null, detail.decisions[1]?.staff_id]);
  });

  it('the database holds staff_id null exactly when the reviewer is not a credential, and one approval of the desk per review', async () => {
    const person = await issuedCredential({ name: 'Duangjai R.', role: 'reviewer' });
    const order = await orderInReview(FOUR_EYES_FROM_MINOR);
    const review = app.instance.services.review;
    expect(await review.decide(app.sandbox.white_label_id, order.id, sandboxDesk(), approve)).toMatchObject({ ok: true, value: { effect: 'approval_recorded' } });
    const database = app.testDatabase.database;
    const copyOfFirstApproval = (reviewer_id: string, staff_id: string | null) => copyFirstDecision(order.id, reviewer_id, staff_id);
    // A credential's decision always names its person; the service's own decision never names one.
    await expect(copyOfFirstApproval(person.id, null)).rejects.toThrow(/violates check constraint "review_decisions_staff_iff_credential"/);
    await expect(copyOfFirstApproval('sandbox_scenario', person.staff_id)).rejects.toThrow(/violates check constraint "review_decisions_staff_iff_credential"/);
    // Four eyes in the database for the desk too: it approves one review once.
    await expect(copyOfFirstApproval('sandbox_scenario', null)).rejects.toThrow(/review_decisions_one_approval_per_system_reviewer/);
    const { rows } = await database.query<{ count: string }>('SELECT count(*) AS count FROM review_decisions WHERE deposit_id = $1', [order.id]);
    expect(Number(rows[0]?.count)).toBe(1);
    // A person's approval beside the desk's is another approver's, as the service counts it.
    await copyOfFirstApproval(person.id, person.staff_id);
  });
});

/** Applies the numbered migrations from `first` to `last` into a schema of its own, inside the caller's transaction. */
async function migrateSchema(tx: Queryable, schema: string, first: number, last: number): Promise<number[]> {
  if (first === 1) await tx.exec(`CREATE SCHEMA ${schema}`);
  await tx.exec(`SET LOCAL search_path = ${schema}, pg_catalog`);
  const applied: number[] = [];
  for (const migration of readMigrations()) {
    if (migration.version < first || migration.version > last) continue;
    await tx.exec(migration.sql);
    applied.push(migration.version);
  }
  return applied;
}

describe('migration 0027 on a database that holds credentials and decisions', () => {
  it('gives each credential a person of its own, each credential’s decision its person and the sandbox’s decisions none, then counts approvals by person', async () => {
    const ulid = (letter: string) => `01K${letter.repeat(23)}`;
    const result = await app.testDatabase.database
      .transaction(async (tx) => {
        await migrateSchema(tx, 'staff_before', 1, 26);
        await tx.exec(`
          INSERT INTO brands (white_label_id, name, status, created_at, updated_at) VALUES ('wl_staff', 'Staff brand', 'active', '2026-08-01T00:00:00Z', '2026-08-01T00:00:00Z');
          INSERT INTO backoffice_credentials (white_label_id, credential_id, name, role, token_hash, status, created_at, updated_at) VALUES
            (NULL, 'boc_${ulid('A')}', 'Platform administrator', 'platform_admin', '${'a'.repeat(64)}', 'active', '2026-08-01T00:00:00Z', '2026-08-01T00:00:00Z'),
            ('wl_staff', 'boc_${ulid('B')}', 'Reviewer B', 'reviewer', '${'b'.repeat(64)}', 'active', '2026-08-02T00:00:00Z', '2026-08-02T00:00:00Z'),
            ('wl_staff', 'boc_${ulid('C')}', 'Reviewer C', 'reviewer', '${'c'.repeat(64)}', 'revoked', '2026-08-03T00:00:00Z', '2026-08-03T00:00:00Z');`);
        // A decision on an order: the order's reference is left out of this scratch schema, which only the decision needs.
        const { rows: references } = await tx.query<{ name: string }>(
          `SELECT k.conname AS name FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'staff_before' AND c.relname = 'review_decisions' AND k.contype = 'f'`,
        );
        for (const reference of references) await tx.exec(`ALTER TABLE review_decisions DROP CONSTRAINT ${reference.name}`);
        await tx.exec(`
          INSERT INTO review_decisions (white_label_id, decision_id, deposit_id, merchant_id, livemode, review_opened_at, action, effect, reviewer_id,
            note, rejection_code, verified_amount_minor, amount_source, idempotency_key, deposit_version, created_at)
          VALUES ('wl_staff', 'rvd_${ulid('D')}', 'dep_${ulid('E')}', 'mch_${ulid('F')}', false, '2026-08-04T00:00:00Z', 'approve', 'approval_recorded',
            'boc_${ulid('C')}', NULL, NULL, 25000, 'bank', NULL, 3, '2026-08-04T00:01:00Z'),
          -- Scenario 102.00 THB: the sandbox's own desk (a system actor, no credential) approved a late slip.
            ('wl_staff', 'rvd_${ulid('J')}', 'dep_${ulid('K')}', 'mch_${ulid('F')}', false, '2026-08-04T00:00:00Z', 'approve', 'settled',
            'sandbox_scenario', NULL, NULL, 10200, 'bank', NULL, 4, '2026-08-04T00:02:00Z');`);
        const applied = await migrateSchema(tx, 'staff_before', 27, 27);
        const staff = await tx.query('SELECT white_label_id, staff_id, name, created_at FROM staff_identities ORDER BY staff_id');
        const credentials = await tx.query('SELECT credential_id, staff_id FROM backoffice_credentials ORDER BY credential_id');
        const decisions = await tx.query('SELECT reviewer_id, staff_id FROM review_decisions ORDER BY decision_id');
        // The same person approving the same review again through another credential is refused by the new index.
        await tx.exec(`INSERT INTO backoffice_credentials (white_label_id, credential_id, name, role, token_hash, status, staff_id, created_at, updated_at)
          VALUES ('wl_staff', 'boc_${ulid('G')}', 'Reviewer C again', 'reviewer', '${'d'.repeat(64)}', 'active', 'stf_${ulid('C')}', '2026-08-05T00:00:00Z', '2026-08-05T00:00:00Z')`);
        const second = await tx
          .query(
            `INSERT INTO review_decisions (white_label_id, decision_id, deposit_id, merchant_id, livemode, review_opened_at, action, effect, reviewer_id, staff_id,
               verified_amount_minor, amount_source, deposit_version, created_at)
             VALUES ('wl_staff', 'rvd_${ulid('H')}', 'dep_${ulid('E')}', 'mch_${ulid('F')}', false, '2026-08-04T00:00:00Z', 'approve', 'settled',
               'boc_${ulid('G')}', 'stf_${ulid('C')}', 25000, 'bank', 4, '2026-08-05T00:01:00Z')`,
          )
          .then(
            () => 'inserted',
            (error: unknown) => (error instanceof Error ? error.message : String(error)),
          );
        throw new Rollback({ applied, staff: staff.rows, credentials: credentials.rows, decisions: decisions.rows, second });
      })
      .catch((error: unknown) => {
        if (error instanceof Rollback) return error.value as Record<string, unknown>;
        throw error;
      });
    expect(result.applied).toEqual([27]);
    expect(result.staff).toEqual([
      { white_label_id: null, staff_id: `stf_${ulid('A')}`, name: 'Platform administrator', created_at: new Date('2026-08-01T00:00:00Z') },
      { white_label_id: 'wl_staff', staff_id: `stf_${ulid('B')}`, name: 'Reviewer B', created_at: new Date('2026-08-02T00:00:00Z') },
      { white_label_id: 'wl_staff', staff_id: `stf_${ulid('C')}`, name: 'Reviewer C', created_at: new Date('2026-08-03T00:00:00Z') },
    ]);
    expect(result.credentials).toEqual(['A', 'B', 'C'].map((letter) => ({ credential_id: `boc_${ulid(letter)}`, staff_id: `stf_${ulid(letter)}` })));
    expect(result.decisions).toEqual([
      { reviewer_id: `boc_${ulid('C')}`, staff_id: `stf_${ulid('C')}` },
      { reviewer_id: 'sandbox_scenario', staff_id: null },
    ]);
    expect(result.second).toMatch(/review_decisions_one_approval_per_staff/);
  });
});
