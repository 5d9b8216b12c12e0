import crypto from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiRoutesOf, type ApiRoute } from '../../src/http/server.ts';
import { codeToStatus, type ErrorCode } from '../../src/platform/errors.ts';
import type { BackofficeRole } from '../../src/platform/access.ts';
import type { MerchantCredentials } from '../support/app.ts';
import { createDeposit, depositPolicyBody, type CreatedDeposit } from '../support/slips.ts';
import { ACCESS_STATE_TABLES, changedTables, snapshotTables, tableNames, writtenRowsMentioning, type Snapshot } from '../support/table-snapshot.ts';
import { backofficeRequest, buildTenantWorld, STAFF_NOTE, type TenantWorld } from '../support/tenant-world.ts';

/**
 * The tenant isolation matrix (issue 13, item 2), walked from the route catalogue (`apiRoutesOf`), so
 * that a new route fails here until it is classified in one of the tables below.
 *
 * Merchant routes: each is tried by three attackers (another merchant of the victim's brand, a
 * merchant of another brand, and the victim's own key of the other livemode) against the victim's
 * real objects: reads (GET) and acts (POST). A route that names an object answers 404
 * `resource_not_found`; a route that names one in its body or query answers exactly as it does for
 * an id that exists nowhere; a route that names nothing answers from the caller's own scope and shows
 * none of the victim's ids. Around every refusal every table of the database is digested: nothing but
 * the caller's nonce and rate window may change.
 *
 * Back-office routes: each is tried by a reviewer, an operator and the platform administrator, by an
 * operator and a reviewer of another brand, and by an integration (`sk_`) key. The table states each
 * role's success answer and the other brand's answer; a role the table does not list must get 403
 * `scope_denied`, and the listed roles must be exactly the catalogue's.
 */

let w: TenantWorld;
let tables: string[];
let markers: string[];
/** The victim's object ids alone: its own key of the other livemode writes rows naming its merchant id. */
let objectMarkers: string[];
/** Markers of the victim's brand as a whole: another brand's staff must never see one. */
let brandMarkers: string[];
const attackerDeposits = {} as Record<'same_brand' | 'other_brand', CreatedDeposit>;
const counts = { merchant_requests: 0, backoffice_requests: 0, capability_requests: 0, public_requests: 0 };

beforeAll(async () => {
  w = await buildTenantWorld();
  tables = await tableNames(w.app.testDatabase.database);
  markers = w.victim_markers;
  objectMarkers = markers.filter((marker) => ![w.victim.merchant_id, w.victim.api_key, w.victim.signing_secret].includes(marker));
  const tenancy = w.app.instance.services.tenancy;
  const system = { actor_type: 'system' as const, actor_id: 'tenant-isolation', request_id: null };
  otherReviewer = (await tenancy.createBackofficeCredential(system, { white_label_id: w.other_brand.white_label_id, role: 'reviewer', name: 'Other reviewer' })).token;
  attackerDeposits.same_brand = await createDeposit(w.app, { amount_minor: 10_000, credentials: w.same_brand });
  attackerDeposits.other_brand = await createDeposit(w.app, { amount_minor: 10_000, credentials: w.other_brand });
  brandMarkers = [
    ...markers,
    w.victim.white_label_id,
    w.same_brand.merchant_id,
    w.depositor.merchant_id,
    w.brand.spare_merchant_id,
    ...w.brand.claim_ids,
    ...w.brand.spare_api_key_ids,
    ...w.brand.spare_credential_ids,
    ...w.objects.spare_endpoint_ids,
  ];
}, 120_000);

afterAll(async () => {
  await w?.close();
  process.stdout.write(`tenant isolation matrix: ${JSON.stringify(counts)}\n`);
});

let otherReviewer: string;

// ---------------------------------------------------------------------------------------------------
// Requests.

interface Request {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  url: string;
  body?: unknown;
}

const NOWHERE = {
  beneficiary: 'ben_01K0NOSUCHID000000000000000',
  sender: 'snd_01K0NOSUCHID000000000000000',
  deposit: 'dep_01K0NOSUCHID000000000000000',
};

function sendMerchant(credentials: MerchantCredentials, request: Request): Promise<LightMyRequestResponse> {
  counts.merchant_requests += 1;
  return w.app.signed({
    method: request.method as 'GET' | 'POST',
    url: request.url,
    body: request.body,
    idempotency_key: request.method === 'POST' ? crypto.randomUUID() : undefined,
    credentials,
  });
}

function errorCodeOf(response: LightMyRequestResponse): string | null {
  if (response.statusCode < 400) return null;
  return (JSON.parse(response.body) as { error: { code: string } }).error.code;
}

function describeAnswer(response: LightMyRequestResponse): string {
  return `${response.statusCode} ${response.body.slice(0, 300)}`;
}

function leakedMarkers(response: LightMyRequestResponse, among: readonly string[]): string[] {
  const text = response.rawPayload.toString('latin1');
  return among.filter((marker) => text.includes(marker));
}

async function snapshot(): Promise<Snapshot> {
  return snapshotTables(w.app.testDatabase.database, tables);
}

function expectNothingChanged(before: Snapshot, after: Snapshot, label: string): void {
  const changed = changedTables(before, after);
  expect.soft(changed, `${label}: tables changed by a refusal: ${changed.join(', ')}`).toEqual([]);
}

/**
 * A merchant's refusal changes nothing but the caller's own `Idempotency-Key`, which keeps the refusal (spec, Common
 * request rules 2: only a 429 leaves the key unused): the one row it may write is a record in the caller's scope.
 */
async function expectNothingChangedButCallersKey(before: Snapshot, label: string, caller: MerchantCredentials): Promise<void> {
  const after = await snapshot();
  const changed = changedTables(before, after, new Set([...ACCESS_STATE_TABLES, 'idempotency_records']));
  expect.soft(changed, `${label}: tables changed by a refusal: ${changed.join(', ')}`).toEqual([]);
  const previous = before.get('idempotency_records') ?? new Set<string>();
  const fresh = [...(after.get('idempotency_records') ?? [])].filter((version) => !previous.has(version));
  const { rows } = await w.app.testDatabase.database.query<{ merchant_id: string }>(
    'SELECT merchant_id FROM idempotency_records WHERE ctid::text || xmin::text = ANY($1::text[])',
    [fresh],
  );
  expect.soft(rows.map((row) => row.merchant_id), `${label}: idempotency records written outside the caller's scope`).toEqual(rows.map(() => caller.merchant_id));
}

// ---------------------------------------------------------------------------------------------------
// Merchant routes.

type Attacker = 'same_brand' | 'other_brand' | 'other_livemode';
const ATTACKERS: readonly Attacker[] = ['same_brand', 'other_brand', 'other_livemode'];

function credentialsOf(attacker: Attacker): MerchantCredentials {
  return attacker === 'same_brand' ? w.same_brand : attacker === 'other_brand' ? w.other_brand : w.victim_live;
}

/**
 * How a merchant route keeps tenants apart:
 * - `foreign_object`: its path names one of the victim's objects: 404 `resource_not_found` for every
 *   attacker, nothing changed; `exists` is the victim's own read that proves the object is real.
 * - `foreign_reference`: its body or query names one of the victim's objects: the answer is the one an
 *   id that exists nowhere gets (same status, same body), and nothing changed.
 * - `own_scope`: it names no object of anyone; it answers from the caller's own scope (2xx, or 404 for
 *   a live key on a sandbox-only route), shows none of the victim's ids, and changes no row of the
 *   victim; `victim_view` is a read of the victim's that must answer the same before and after.
 */
type MerchantRule =
  | { kind: 'foreign_object'; request: () => Request; exists: () => Request }
  | { kind: 'foreign_reference'; request: () => Request; unknown: () => Request }
  | { kind: 'own_scope'; request: () => Request; sandbox_only?: boolean; victim_view?: () => Request };

const depositEvidence = { kind: 'bank_statement_line', reference: 'STMT-0042', note: 'The statement line of the transfer' };
const getDepositOf = (id: () => string) => () => ({ method: 'GET', url: `/v1/pay/deposits/${id()}` }) as Request;
const getWithdrawalOf = (id: () => string) => () => ({ method: 'GET', url: `/v1/pay/withdrawals/${id()}` }) as Request;
const getClock = () => ({ method: 'GET', url: `/v1/test/clocks/${w.objects.test_clock_id}` }) as Request;

const MERCHANT_RULES: Record<string, MerchantRule> = {
  'GET /v1/pay/events': { kind: 'own_scope', request: () => ({ method: 'GET', url: '/v1/pay/events?limit=500' }) },
  'GET /v1/pay/banks': { kind: 'own_scope', request: () => ({ method: 'GET', url: '/v1/pay/banks' }) },
  'GET /v1/pay/balance': { kind: 'own_scope', request: () => ({ method: 'GET', url: '/v1/pay/balance' }) },
  'GET /v1/pay/quote': { kind: 'own_scope', request: () => ({ method: 'GET', url: '/v1/pay/quote?channel=withdrawal&amount_minor=10000' }) },
  'POST /v1/test/bank/accounts': {
    kind: 'own_scope',
    sandbox_only: true,
    request: () => ({ method: 'POST', url: '/v1/test/bank/accounts', body: { ...w.objects.bank_account, holder_name_th: 'ผู้ บุกรุก', status: 'frozen' } }),
    victim_view: () => ({ method: 'POST', url: '/v1/test/bank/accounts/lookup', body: w.objects.bank_account }),
  },
  'POST /v1/test/bank/accounts/lookup': {
    kind: 'foreign_reference',
    request: () => ({ method: 'POST', url: '/v1/test/bank/accounts/lookup', body: w.objects.second_bank_account }),
    unknown: () => ({ method: 'POST', url: '/v1/test/bank/accounts/lookup', body: { bank_code: '004', account_number: '5550009999' } }),
  },
  'POST /v1/pay/beneficiaries': {
    kind: 'own_scope',
    // The victim's payee account: the attacker gets a beneficiary of its own, never the victim's.
    request: () => ({ method: 'POST', url: '/v1/pay/beneficiaries', body: { bank_code: '002', account_number: '1234567890', account_name_th: 'สมชาย ใจดี' } }),
    victim_view: () => ({ method: 'GET', url: `/v1/pay/beneficiaries/${w.objects.beneficiary_id}` }),
  },
  'GET /v1/pay/beneficiaries/:id': {
    kind: 'foreign_object',
    request: () => ({ method: 'GET', url: `/v1/pay/beneficiaries/${w.objects.beneficiary_id}` }),
    exists: () => ({ method: 'GET', url: `/v1/pay/beneficiaries/${w.objects.beneficiary_id}` }),
  },
  'POST /v1/pay/withdrawals': {
    kind: 'foreign_reference',
    request: () => ({ method: 'POST', url: '/v1/pay/withdrawals', body: withdrawalBody(w.objects.beneficiary_id) }),
    unknown: () => ({ method: 'POST', url: '/v1/pay/withdrawals', body: withdrawalBody(NOWHERE.beneficiary) }),
  },
  'GET /v1/pay/withdrawals': { kind: 'own_scope', request: () => ({ method: 'GET', url: '/v1/pay/withdrawals?limit=100' }) },
  'GET /v1/pay/withdrawals/:id': {
    kind: 'foreign_object',
    request: getWithdrawalOf(() => w.objects.open_withdrawal_id),
    exists: getWithdrawalOf(() => w.objects.open_withdrawal_id),
  },
  'POST /v1/pay/withdrawals/:id/cancel': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/withdrawals/${w.objects.open_withdrawal_id}/cancel` }),
    exists: getWithdrawalOf(() => w.objects.open_withdrawal_id),
  },
  'GET /v1/pay/deposits': { kind: 'own_scope', request: () => ({ method: 'GET', url: '/v1/pay/deposits?limit=100' }) },
  'POST /v1/pay/deposits': {
    kind: 'foreign_reference',
    request: () => ({ method: 'POST', url: '/v1/pay/deposits', body: depositBody(w.objects.sender_id) }),
    unknown: () => ({ method: 'POST', url: '/v1/pay/deposits', body: depositBody(NOWHERE.sender) }),
  },
  'GET /v1/pay/senders': {
    kind: 'foreign_reference',
    request: () => ({ method: 'GET', url: `/v1/pay/senders?end_user_ref=${encodeURIComponent(w.objects.sender_end_user_ref)}` }),
    unknown: () => ({ method: 'GET', url: '/v1/pay/senders?end_user_ref=nobody-at-all' }),
  },
  'GET /v1/pay/deposits/:id': {
    kind: 'foreign_object',
    request: getDepositOf(() => w.objects.open_deposit.id),
    exists: getDepositOf(() => w.objects.open_deposit.id),
  },
  'POST /v1/pay/deposits/:id/slip-token': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/deposits/${w.objects.open_deposit.id}/slip-token` }),
    exists: getDepositOf(() => w.objects.open_deposit.id),
  },
  'GET /v1/pay/deposits/:id/refunds': {
    kind: 'foreign_object',
    request: () => ({ method: 'GET', url: `/v1/pay/deposits/${w.objects.settled_deposit_id}/refunds` }),
    exists: () => ({ method: 'GET', url: `/v1/pay/deposits/${w.objects.settled_deposit_id}/refunds` }),
  },
  'POST /v1/pay/deposits/:id/refunds': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/deposits/${w.objects.settled_deposit_id}/refunds`, body: { amount_minor: 10_000, reason_code: 'customer_request' } }),
    exists: getDepositOf(() => w.objects.settled_deposit_id),
  },
  'POST /v1/pay/deposits/:id/cancel': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/deposits/${w.objects.open_deposit.id}/cancel` }),
    exists: getDepositOf(() => w.objects.open_deposit.id),
  },
  'POST /v1/test/webhooks/replay-out-of-order': {
    kind: 'own_scope',
    sandbox_only: true,
    request: () => ({ method: 'POST', url: '/v1/test/webhooks/replay-out-of-order' }),
  },
  'GET /v1/pay/deposits/:id/slip': {
    kind: 'foreign_object',
    request: () => ({ method: 'GET', url: `/v1/pay/deposits/${w.objects.overpaid_deposit_id}/slip?receipt_id=${w.objects.overpaid_receipt_id}` }),
    exists: () => ({ method: 'GET', url: `/v1/pay/deposits/${w.objects.overpaid_deposit_id}/slip?receipt_id=${w.objects.overpaid_receipt_id}` }),
  },
  'POST /v1/test/bank/transfers': {
    kind: 'foreign_reference',
    request: () => ({ method: 'POST', url: '/v1/test/bank/transfers', body: { deposit_id: w.objects.open_deposit.id } }),
    unknown: () => ({ method: 'POST', url: '/v1/test/bank/transfers', body: { deposit_id: NOWHERE.deposit } }),
  },
  'POST /v1/pay/deposits/:id/evidence': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/deposits/${w.objects.review_deposit_ids[0]}/evidence`, body: depositEvidence }),
    exists: getDepositOf(() => w.objects.review_deposit_ids[0]),
  },
  'POST /v1/pay/deposits/:id/force-complete': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/deposits/${w.objects.review_deposit_ids[0]}/force-complete`, body: { verified_amount_minor: 10_000, note: STAFF_NOTE } }),
    exists: getDepositOf(() => w.objects.review_deposit_ids[0]),
  },
  'POST /v1/pay/withdrawals/:id/disputes': {
    kind: 'foreign_object',
    request: () => ({
      method: 'POST',
      url: `/v1/pay/withdrawals/${w.objects.filled_withdrawal_id}/disputes`,
      body: { leg_ref: w.objects.filled_leg_ref, reason_code: 'AMOUNT_DIFFERS' },
    }),
    exists: getWithdrawalOf(() => w.objects.filled_withdrawal_id),
  },
  'POST /v1/pay/disputes/:id/evidence': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/pay/disputes/${w.objects.dispute_ids[0]}/evidence`, body: depositEvidence }),
    // The dispute is read on its withdrawal (`dispute{}`); there is no merchant read of a dispute alone.
    exists: getWithdrawalOf(() => w.objects.filled_withdrawal_id),
  },
  'GET /v1/pay/claims/:id': {
    kind: 'foreign_object',
    request: () => ({ method: 'GET', url: `/v1/pay/claims/${w.objects.claim_id}` }),
    exists: () => ({ method: 'GET', url: `/v1/pay/claims/${w.objects.claim_id}` }),
  },
  'POST /v1/test/clocks': {
    kind: 'own_scope',
    sandbox_only: true,
    request: () => ({ method: 'POST', url: '/v1/test/clocks', body: { name: 'attacker clock' } }),
    victim_view: () => ({ method: 'GET', url: '/v1/test/clocks' }),
  },
  'GET /v1/test/clocks': { kind: 'own_scope', sandbox_only: true, request: () => ({ method: 'GET', url: '/v1/test/clocks' }) },
  'GET /v1/test/clocks/:id': { kind: 'foreign_object', request: getClock, exists: getClock },
  'POST /v1/test/clocks/:id/attach': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/test/clocks/${w.objects.test_clock_id}/attach`, body: {} }),
    exists: getClock,
  },
  'POST /v1/test/clocks/:id/detach': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/test/clocks/${w.objects.test_clock_id}/detach`, body: {} }),
    exists: getClock,
  },
  'GET /v1/test/webhooks/events/:event_id/signed-delivery': {
    kind: 'foreign_object',
    request: () => ({ method: 'GET', url: `/v1/test/webhooks/events/${w.objects.event_id}/signed-delivery` }),
    exists: () => ({ method: 'GET', url: `/v1/test/webhooks/events/${w.objects.event_id}/signed-delivery` }),
  },
  'POST /v1/test/clocks/:id/advance': {
    kind: 'foreign_object',
    request: () => ({ method: 'POST', url: `/v1/test/clocks/${w.objects.test_clock_id}/advance`, body: { frozen_time: '2026-08-01T02:00:00.000Z' } }),
    exists: getClock,
  },
};

function withdrawalBody(beneficiary_id: string) {
  return { amount_minor: 10_000, currency: 'THB', merchant_reference: `iso-${crypto.randomBytes(4).toString('hex')}`, end_user_ref: 'payee-x', beneficiary_id };
}

function depositBody(sender_id: string) {
  return {
    amount_minor: 10_000,
    currency: 'THB',
    merchant_reference: `iso-${crypto.randomBytes(4).toString('hex')}`,
    end_user_ref: w.objects.sender_end_user_ref,
    sender_id,
    client: { device_fingerprint: 'device-iso', ip: '203.0.113.9', user_agent: 'isolation-test' },
  };
}

/** An answer without what differs between two requests (request ids, timestamps of the answer). */
function comparable(response: LightMyRequestResponse): unknown {
  const body = JSON.parse(response.body) as Record<string, unknown>;
  if (response.statusCode >= 400) {
    const { request_id: _requestId, ...error } = body.error as Record<string, unknown>;
    return { status: response.statusCode, error };
  }
  return { status: response.statusCode, body };
}

function routeKey(route: ApiRoute): string {
  return `${route.method} ${route.url}`;
}

// ---------------------------------------------------------------------------------------------------
// Slip capability and public routes.

/**
 * Capability routes take no merchant key: the order's capability is the credential. Every attacker
 * holds a real capability of its own order and sends it to the victim's order's address; the victim's
 * own capability of one order is sent to another order of the victim's. Each answers 401
 * `slip_token_invalid` and changes nothing.
 */
type CapabilityHolder = 'same_brand' | 'other_brand' | 'victim_other_order';
const CAPABILITY_RULES: Record<string, { path: (deposit_id: string) => string; body: unknown }> = {
  'POST /v1/pay/deposits/:id/slip': {
    path: (id) => `/v1/pay/deposits/${id}/slip`,
    body: { trans_ref: 'ISOLATION0001', sending_bank_code: '004', occurred_at: '2026-08-01T00:00:00.000Z' },
  },
  'POST /v1/pay/deposits/:id/claims': { path: (id) => `/v1/pay/deposits/${id}/claims`, body: { note: 'a transfer made after the window' } },
};

/**
 * Public routes take no credential. `tenant_link`: a signed link to one order's image; a link of
 * another order (the attacker's own signature on the victim's ids, the victim's signature under
 * another brand) answers 404. `global`: the same document for everyone, naming no tenant.
 */
const PUBLIC_RULES: Record<string, 'tenant_link' | 'global'> = {
  'GET /v1/webhooks/test-vectors': 'global',
  'GET /v1/pay/deposits/:id/legs/:leg_ref/qr.png': 'tenant_link',
  'GET /v1/webhooks/signing-keys': 'global',
  'GET /openapi.json': 'global',
};

// ---------------------------------------------------------------------------------------------------
// Back-office routes.

type Staff = 'admin' | 'operator' | 'reviewer' | 'other_operator' | 'other_reviewer' | 'integration_key';
const ROLE_OF: Record<Exclude<Staff, 'integration_key'>, BackofficeRole> = {
  admin: 'platform_admin',
  operator: 'operator',
  reviewer: 'reviewer',
  other_operator: 'operator',
  other_reviewer: 'reviewer',
};

function tokenOf(actor: Staff): string {
  switch (actor) {
    case 'admin':
      return w.staff.admin;
    case 'operator':
      return w.staff.operator;
    case 'reviewer':
      return w.staff.reviewer;
    case 'other_operator':
      return w.staff.other_operator;
    case 'other_reviewer':
      return otherReviewer;
    case 'integration_key':
      return w.victim.api_key;
  }
}

/**
 * A back-office route's documented answers. `allowed`: the success status of each role the route
 * admits (its `roles`, in the victim's brand; the platform administrator naming the brand). Every
 * other role, and an integration key, gets 403 `scope_denied`. `other_brand`: what staff of another
 * brand whose role is admitted get: `not_found` (404 `resource_not_found`, whether they name the
 * victim's brand or act in their own with the victim's ids), or `own_brand` (a 2xx answer about their
 * own brand that shows nothing of the victim's, and 404 when they name the victim's brand).
 * `request` builds each actor's request; actors that succeed get targets of their own, so that one
 * success does not turn the next into a conflict.
 */
interface BackofficeRule {
  allowed: Partial<Record<'admin' | 'operator' | 'reviewer', number>>;
  other_brand: 'not_found' | 'own_brand';
  request: (actor: Staff) => Request;
}

const V = () => w.victim.white_label_id;
const pick = <T,>(actor: Staff, forOperator: T, forAdmin: T): T => (actor === 'admin' ? forAdmin : forOperator);
let claimReference = 0;

const BACKOFFICE_RULES: Record<string, BackofficeRule> = {
  'POST /v1/bo/brands': { allowed: { admin: 201 }, other_brand: 'not_found', request: () => ({ method: 'POST', url: '/v1/bo/brands', body: { name: 'Matrix Brand' } }) },
  'GET /v1/bo/brands': { allowed: { admin: 200 }, other_brand: 'not_found', request: () => ({ method: 'GET', url: '/v1/bo/brands' }) },
  'GET /v1/bo/brands/:brand_id': { allowed: { admin: 200, operator: 200 }, other_brand: 'not_found', request: () => ({ method: 'GET', url: `/v1/bo/brands/${V()}` }) },
  'POST /v1/bo/brands/:brand_id/suspend': {
    allowed: { admin: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/brands/${w.brand.spare_brand_id}/suspend` }),
  },
  'POST /v1/bo/brands/:brand_id/resume': {
    allowed: { admin: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/brands/${w.brand.spare_brand_id}/resume` }),
  },
  'POST /v1/bo/brands/:brand_id/checkout-base-url': {
    allowed: { admin: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/brands/${w.brand.spare_brand_id}/checkout-base-url`, body: { checkout_base_url: null } }),
  },
  // A brand's slip providers (issue 34). The routes run in this order: the operator sets the primary and the
  // administrator the fallback; each tests its own; the operator removes the fallback, then the administrator the
  // primary. The world points every provider at a closed local port, so a test is answered `unreachable` at once.
  'GET /v1/bo/brands/:brand_id/slip-providers': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/brands/${V()}/slip-providers` }),
  },
  'POST /v1/bo/brands/:brand_id/slip-providers/:slot': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/brands/${V()}/slip-providers/${pick(actor, 'primary', 'fallback')}`,
      body: pick(actor, { provider: 'slipok', credentials: { branch_id: '4242', key: 'matrix-slipok-key-0000' } }, { provider: 'rdcw', credentials: { client_id: 'matrix', client_secret: 'matrix-rdcw-secret-0000' } }),
    }),
  },
  'POST /v1/bo/brands/:brand_id/slip-providers/:slot/test': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/brands/${V()}/slip-providers/${pick(actor, 'primary', 'fallback')}/test` }),
  },
  'POST /v1/bo/brands/:brand_id/slip-providers/:slot/remove': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/brands/${V()}/slip-providers/${pick(actor, 'fallback', 'primary')}/remove` }),
  },
  // A brand's OpenID Connect provider for the console and its staff list (issue 30). The operator sets and then
  // removes its own brand's provider, the administrator the spare brand's; each adds and removes an entry of its own.
  'GET /v1/bo/brands/:brand_id/console-oidc': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/brands/${V()}/console-oidc` }),
  },
  'POST /v1/bo/brands/:brand_id/console-oidc': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/brands/${pick(actor, V(), w.brand.spare_brand_id)}/console-oidc`,
      body: { issuer: 'https://idp.matrix.test', client_id: 'matrix-console', client_secret: 'matrix-console-secret-0000' },
    }),
  },
  'POST /v1/bo/brands/:brand_id/console-oidc/remove': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/brands/${pick(actor, V(), w.brand.spare_brand_id)}/console-oidc/remove` }),
  },
  'GET /v1/bo/brands/:brand_id/console-oidc/staff': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/brands/${V()}/console-oidc/staff` }),
  },
  'POST /v1/bo/brands/:brand_id/console-oidc/staff': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/brands/${V()}/console-oidc/staff`,
      body: { subject: pick(actor, 'matrix-subject-operator', 'matrix-subject-admin'), role: 'reviewer', name: 'Matrix OpenID reviewer' },
    }),
  },
  'POST /v1/bo/brands/:brand_id/console-oidc/staff/remove': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/brands/${V()}/console-oidc/staff/remove`, body: { subject: pick(actor, 'matrix-subject-operator', 'matrix-subject-admin') } }),
  },
  'POST /v1/bo/merchants/:merchant_id/suspend': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/merchants/${w.brand.spare_merchant_id}/suspend` }),
  },
  'POST /v1/bo/merchants/:merchant_id/resume': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/merchants/${w.brand.spare_merchant_id}/resume` }),
  },
  'POST /v1/bo/api-keys/:api_key_id/suspend': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/api-keys/${pick(actor, w.brand.spare_api_key_ids[0], w.brand.spare_api_key_ids[1])}/suspend` }),
  },
  'POST /v1/bo/api-keys/:api_key_id/resume': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/api-keys/${pick(actor, w.brand.spare_api_key_ids[0], w.brand.spare_api_key_ids[1])}/resume` }),
  },
  'POST /v1/bo/api-keys/:api_key_id/revoke': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/api-keys/${pick(actor, w.brand.spare_api_key_ids[0], w.brand.spare_api_key_ids[1])}/revoke` }),
  },
  'POST /v1/bo/merchants': {
    allowed: { admin: 201, operator: 201 },
    other_brand: 'own_brand',
    request: () => ({ method: 'POST', url: '/v1/bo/merchants', body: { name: 'Matrix Merchant', white_label_id: V() } }),
  },
  'GET /v1/bo/merchants': { allowed: { admin: 200, operator: 200 }, other_brand: 'own_brand', request: () => ({ method: 'GET', url: `/v1/bo/merchants?white_label_id=${V()}` }) },
  'GET /v1/bo/merchants/:merchant_id': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/merchants/${w.victim.merchant_id}` }),
  },
  'POST /v1/bo/merchants/:merchant_id/api-keys': {
    allowed: { admin: 201, operator: 201 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/merchants/${w.brand.spare_merchant_id}/api-keys`, body: { mode: 'test' } }),
  },
  'GET /v1/bo/merchants/:merchant_id/api-keys': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/merchants/${w.victim.merchant_id}/api-keys` }),
  },
  'POST /v1/bo/credentials': {
    allowed: { admin: 201, operator: 201 },
    other_brand: 'own_brand',
    request: () => ({ method: 'POST', url: '/v1/bo/credentials', body: { name: 'Matrix reviewer', role: 'reviewer', white_label_id: V() } }),
  },
  // A one-time console sign-in link (issue 30): with a role, a new credential of the brand, as POST /v1/bo/credentials.
  'POST /v1/bo/console/sign-in-links': {
    allowed: { admin: 201, operator: 201 },
    other_brand: 'own_brand',
    request: () => ({ method: 'POST', url: '/v1/bo/console/sign-in-links', body: { white_label_id: V(), role: 'reviewer', name: 'Matrix console reviewer' } }),
  },
  'POST /v1/bo/credentials/:credential_id/revoke': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/credentials/${pick(actor, w.brand.spare_credential_ids[0], w.brand.spare_credential_ids[1])}/revoke` }),
  },
  'GET /v1/bo/wallet': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/wallet?merchant_id=${w.victim.merchant_id}&mode=test` }),
  },
  'GET /v1/bo/withdrawal-approvals': {
    allowed: { operator: 200, reviewer: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'GET', url: '/v1/bo/withdrawal-approvals?mode=test' }),
  },
  'GET /v1/bo/withdrawals/:id': {
    allowed: { operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/withdrawals/${w.objects.open_withdrawal_id}` }),
  },
  'POST /v1/bo/withdrawals/:id/approve': {
    allowed: { operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/withdrawals/${actor === 'reviewer' ? w.objects.approval_withdrawal_ids[1] : w.objects.approval_withdrawal_ids[0]}/approve`, body: {} }),
  },
  'POST /v1/bo/withdrawals/:id/reject': {
    allowed: { operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/withdrawals/${actor === 'reviewer' ? w.objects.approval_withdrawal_ids[3] : w.objects.approval_withdrawal_ids[2]}/reject`,
      body: { note: STAFF_NOTE },
    }),
  },
  'GET /v1/bo/withdrawal-policy': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'GET', url: `/v1/bo/withdrawal-policy?mode=test&white_label_id=${V()}` }),
  },
  'POST /v1/bo/withdrawal-policy': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'own_brand',
    request: () => ({
      method: 'POST',
      url: '/v1/bo/withdrawal-policy',
      body: { white_label_id: V(), mode: 'test', approval_threshold_minor: 100_000, approval_ttl_seconds: 3600, expires_in_seconds: 7200, max_splits: 5, min_amount_minor: 100, max_amount_minor: 10_000_000 },
    }),
  },
  'GET /v1/bo/deposit-policy': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'GET', url: `/v1/bo/deposit-policy?mode=test&white_label_id=${V()}` }),
  },
  'POST /v1/bo/deposit-policy': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'POST', url: '/v1/bo/deposit-policy', body: depositPolicyBody({ white_label_id: V() }) }),
  },
  'POST /v1/bo/webhooks': {
    allowed: { admin: 201, operator: 201 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: '/v1/bo/webhooks', body: { merchant_id: w.victim.merchant_id, mode: 'test', url: w.receiver.url, description: 'matrix' } }),
  },
  'GET /v1/bo/webhooks': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'GET', url: `/v1/bo/webhooks?white_label_id=${V()}` }),
  },
  'GET /v1/bo/webhooks/:endpoint_id': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/webhooks/${w.objects.endpoint_id}` }),
  },
  'PATCH /v1/bo/webhooks/:endpoint_id': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'PATCH', url: `/v1/bo/webhooks/${w.objects.endpoint_id}`, body: { description: 'renamed by the matrix' } }),
  },
  'DELETE /v1/bo/webhooks/:endpoint_id': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'DELETE', url: `/v1/bo/webhooks/${pick(actor, w.objects.spare_endpoint_ids[0], w.objects.spare_endpoint_ids[1])}` }),
  },
  'GET /v1/bo/webhooks/:endpoint_id/deliveries': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/webhooks/${w.objects.endpoint_id}/deliveries` }),
  },
  'GET /v1/bo/webhooks/:endpoint_id/deliveries/:delivery_id': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/webhooks/${w.objects.endpoint_id}/deliveries/${w.objects.delivery_id}` }),
  },
  'POST /v1/bo/webhooks/:endpoint_id/deliveries/:delivery_id/resend': {
    allowed: { admin: 202, operator: 202, reviewer: 202 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/webhooks/${w.objects.endpoint_id}/deliveries/${w.objects.delivery_id}/resend` }),
  },
  'POST /v1/bo/webhooks/:endpoint_id/replay': {
    allowed: { admin: 202, operator: 202, reviewer: 202 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/webhooks/${w.objects.endpoint_id}/replay`, body: { only_failed: false } }),
  },
  'POST /v1/bo/webhook-signing-keys/rotate': { allowed: { admin: 200 }, other_brand: 'not_found', request: () => ({ method: 'POST', url: '/v1/bo/webhook-signing-keys/rotate', body: {} }) },
  'GET /v1/bo/reviews': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'GET', url: `/v1/bo/reviews?white_label_id=${V()}` }),
  },
  'GET /v1/bo/reviews/:deposit_id': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/reviews/${w.objects.review_deposit_ids[0]}?white_label_id=${V()}` }),
  },
  'GET /v1/bo/reviews/:deposit_id/slips/:receipt_id/image': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/reviews/${w.objects.review_deposit_ids[0]}/slips/${w.objects.review_receipt_id}/image?white_label_id=${V()}` }),
  },
  'POST /v1/bo/reviews/:deposit_id/approve': {
    allowed: { reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/reviews/${w.objects.review_deposit_ids[0]}/approve`, body: {} }),
  },
  'POST /v1/bo/reviews/:deposit_id/reject': {
    allowed: { reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/reviews/${w.objects.review_deposit_ids[1]}/reject`, body: { rejection_code: 'TRANSFER_NOT_RECEIVED', note: STAFF_NOTE } }),
  },
  'POST /v1/bo/reviews/:deposit_id/escalate': {
    allowed: { reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/reviews/${w.objects.review_deposit_ids[2]}/escalate`, body: { note: STAFF_NOTE } }),
  },
  'POST /v1/bo/deposits/:id/refunds': {
    // Each staff member refunds 10.00 THB of the victim's settled deposit (12,000 satang) from its funded wallet.
    allowed: { admin: 201, operator: 201 },
    other_brand: 'not_found',
    request: () => ({
      method: 'POST',
      url: `/v1/bo/deposits/${w.objects.settled_deposit_id}/refunds`,
      body: { white_label_id: V(), amount_minor: 1_000, reason_code: 'customer_request', note: STAFF_NOTE },
    }),
  },
  'GET /v1/bo/deposits/:id/refunds': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/deposits/${w.objects.settled_deposit_id}/refunds?white_label_id=${V()}` }),
  },
  'POST /v1/bo/deposits/:id/reverse': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/deposits/${pick(actor, w.objects.settled_deposit_id, w.objects.overpaid_deposit_id)}/reverse`,
      body: { white_label_id: V(), reason_code: 'OPS_ERROR', note: STAFF_NOTE },
    }),
  },
  'GET /v1/bo/disputes': { allowed: { admin: 200, operator: 200 }, other_brand: 'own_brand', request: () => ({ method: 'GET', url: `/v1/bo/disputes?white_label_id=${V()}` }) },
  'GET /v1/bo/disputes/:id': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/disputes/${w.objects.dispute_ids[0]}?white_label_id=${V()}` }),
  },
  'POST /v1/bo/disputes/:id/resolve': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/disputes/${pick(actor, w.objects.dispute_ids[0], w.objects.dispute_ids[1])}/resolve`,
      body: { white_label_id: V(), outcome: 'depositor', note: STAFF_NOTE },
    }),
  },
  'POST /v1/bo/claims': {
    allowed: { admin: 201, operator: 201, reviewer: 201 },
    other_brand: 'not_found',
    request: () => {
      claimReference += 1;
      return {
        method: 'POST',
        url: '/v1/bo/claims',
        body: {
          white_label_id: V(),
          deposit_id: w.brand.claimable_deposit_id,
          cause: 'additional_transfer',
          amount_minor: 2_000 + claimReference * 100,
          evidence: { trans_ref: `MATRIX${claimReference}${crypto.randomBytes(3).toString('hex')}` },
        },
      };
    },
  },
  'GET /v1/bo/claims': { allowed: { admin: 200, operator: 200, reviewer: 200 }, other_brand: 'own_brand', request: () => ({ method: 'GET', url: `/v1/bo/claims?white_label_id=${V()}` }) },
  'GET /v1/bo/claims/:id': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/claims/${w.objects.claim_id}?white_label_id=${V()}` }),
  },
  'POST /v1/bo/claims/:id/investigate': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/claims/${pick(actor, w.brand.claim_ids[0], w.brand.claim_ids[1])}/investigate`, body: { white_label_id: V() } }),
  },
  'POST /v1/bo/claims/:id/resolve': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({
      method: 'POST',
      url: `/v1/bo/claims/${pick(actor, w.brand.claim_ids[2], w.brand.claim_ids[3])}/resolve`,
      body: { white_label_id: V(), resolution_code: 'no_transfer_found', note: STAFF_NOTE },
    }),
  },
  'POST /v1/bo/claims/:id/reject': {
    allowed: { admin: 200, operator: 200 },
    other_brand: 'not_found',
    request: (actor) => ({ method: 'POST', url: `/v1/bo/claims/${pick(actor, w.brand.claim_ids[4], w.brand.claim_ids[5])}/reject`, body: { white_label_id: V(), note: STAFF_NOTE } }),
  },
  'GET /v1/bo/test-clocks': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'own_brand',
    request: () => ({ method: 'GET', url: `/v1/bo/test-clocks?white_label_id=${V()}` }),
  },
  'GET /v1/bo/test-clocks/:id': {
    allowed: { admin: 200, operator: 200, reviewer: 200 },
    other_brand: 'not_found',
    request: () => ({ method: 'GET', url: `/v1/bo/test-clocks/${w.objects.test_clock_id}?white_label_id=${V()}` }),
  },
  'POST /v1/bo/test-clocks/:id/advance': {
    // The operator starts the advance (202); the administrator asking for the same target gets the
    // clock as it is (200, `Idempotent-Replay`), as the route documents.
    allowed: { admin: 200, operator: 202 },
    other_brand: 'not_found',
    request: () => ({ method: 'POST', url: `/v1/bo/test-clocks/${w.objects.test_clock_id}/advance`, body: { white_label_id: V(), frozen_time: '2026-08-01T03:00:00.000Z' } }),
  },
};

/** The request without naming a brand: another brand's staff then act in their own brand with the victim's ids. */
function withoutBrand(request: Request): Request | null {
  const url = request.url.replace(/([?&])white_label_id=[^&]*&?/, '$1').replace(/[?&]$/, '');
  const body = request.body && typeof request.body === 'object' && 'white_label_id' in request.body ? { ...(request.body as Record<string, unknown>) } : null;
  if (body) delete body.white_label_id;
  if (url === request.url && !body) return null;
  return { ...request, url, ...(body ? { body } : {}) };
}

function sendBackoffice(actor: Staff, request: Request): Promise<LightMyRequestResponse> {
  counts.backoffice_requests += 1;
  return backofficeRequest(w.app, tokenOf(actor), request.method, request.url, request.body);
}

function expectCode(response: LightMyRequestResponse, code: ErrorCode, label: string): void {
  expect.soft(response.statusCode, `${label}: ${describeAnswer(response)}`).toBe(codeToStatus(code));
  expect.soft(errorCodeOf(response), `${label}: ${describeAnswer(response)}`).toBe(code);
}

// ===================================================================================================

describe('every route is classified', () => {
  it('each table names exactly the catalogue routes of its kind', () => {
    const routes = apiRoutesOf(w.app.instance.app);
    const keysOf = (kind: ApiRoute['kind']) => routes.filter((route) => route.kind === kind).map(routeKey).sort();
    // A new route fails here until it has a row in its table; a removed one until its row goes.
    expect.soft(keysOf('merchant'), 'merchant routes in MERCHANT_RULES').toEqual(Object.keys(MERCHANT_RULES).sort());
    expect.soft(keysOf('backoffice'), 'back-office routes in BACKOFFICE_RULES').toEqual(Object.keys(BACKOFFICE_RULES).sort());
    expect.soft(keysOf('capability'), 'capability routes in CAPABILITY_RULES').toEqual(Object.keys(CAPABILITY_RULES).sort());
    expect.soft(keysOf('public'), 'public routes in PUBLIC_RULES').toEqual(Object.keys(PUBLIC_RULES).sort());
    // The roles a rule admits are the catalogue's roles: a change of either fails until both agree.
    for (const route of routes) {
      if (route.kind !== 'backoffice') continue;
      expect.soft(Object.keys(BACKOFFICE_RULES[routeKey(route)]!.allowed).map((actor) => ROLE_OF[actor as 'admin']).sort(), routeKey(route)).toEqual([...route.roles].sort());
    }
  });
});

describe('merchant routes × {same-brand merchant, other-brand merchant, other livemode}', () => {
  it('answer 404 or from the caller’s own scope, show nothing of the victim, and change none of its rows', async () => {
    const routes = apiRoutesOf(w.app.instance.app).filter((route) => route.kind === 'merchant');
    for (const route of routes) {
      const key = routeKey(route);
      const rule = MERCHANT_RULES[key]!;
      const action = route.method === 'GET' ? 'read' : 'act';
      if (rule.kind === 'foreign_object') {
        const exists = await sendMerchant(w.victim, rule.exists());
        expect.soft(exists.statusCode, `${key}: the victim's own object exists: ${describeAnswer(exists)}`).toBe(200);
      }
      const victimViewBefore = rule.kind === 'own_scope' && rule.victim_view ? await sendMerchant(w.victim, rule.victim_view()) : null;
      for (const attacker of ATTACKERS) {
        const label = `${key} (${action}) by ${attacker}`;
        const before = await snapshot();
        const answer = await sendMerchant(credentialsOf(attacker), rule.request());
        expect.soft(answer.statusCode, `${label}: ${describeAnswer(answer)}`).toBeLessThan(500);
        expect.soft(leakedMarkers(answer, markers), `${label}: the victim's ids in the answer`).toEqual([]);
        if (rule.kind === 'foreign_object') {
          expectCode(answer, 'resource_not_found', label);
          await expectNothingChangedButCallersKey(before, label, credentialsOf(attacker));
        } else if (rule.kind === 'foreign_reference') {
          const unknown = await sendMerchant(credentialsOf(attacker), rule.unknown());
          expect.soft(comparable(answer), `${label}: answered like an id that exists nowhere`).toEqual(comparable(unknown));
          expect.soft([200, 404, 422], `${label}: ${describeAnswer(answer)}`).toContain(answer.statusCode);
          await expectNothingChangedButCallersKey(before, label, credentialsOf(attacker));
        } else if (rule.sandbox_only && attacker === 'other_livemode') {
          expectCode(answer, 'resource_not_found', label);
          await expectNothingChangedButCallersKey(before, label, credentialsOf(attacker));
        } else {
          expect.soft(answer.statusCode, `${label}: answered from the caller's own scope: ${describeAnswer(answer)}`).toBeLessThan(300);
          const written = await writtenRowsMentioning(w.app.testDatabase.database, before, await snapshot(), attacker === 'other_livemode' ? objectMarkers : markers);
          expect.soft(written, `${label}: rows naming the victim's objects were written`).toEqual([]);
        }
      }
      if (victimViewBefore) {
        const after = await sendMerchant(w.victim, (rule as { victim_view: () => Request }).victim_view());
        expect.soft(after.statusCode, key).toBe(victimViewBefore.statusCode);
        expect.soft(JSON.parse(after.body), `${key}: the victim's view is unchanged`).toEqual(JSON.parse(victimViewBefore.body));
      }
    }
  }, 240_000);
});

describe('capability and public routes', () => {
  it('a capability of another order, brand or merchant answers slip_token_invalid at the victim’s address and changes nothing', async () => {
    const victimAddress = new URL(w.objects.open_deposit.slip_upload.upload_url);
    const holders: Record<CapabilityHolder, string> = {
      same_brand: attackerDeposits.same_brand.slip_upload.token,
      other_brand: attackerDeposits.other_brand.slip_upload.token,
      victim_other_order: w.objects.open_deposit.slip_upload.token,
    };
    for (const route of apiRoutesOf(w.app.instance.app).filter((item) => item.kind === 'capability')) {
      const key = routeKey(route);
      const rule = CAPABILITY_RULES[key]!;
      for (const [holder, token] of Object.entries(holders) as [CapabilityHolder, string][]) {
        // The victim's own capability is for its open order; it is tried on another order of the victim's.
        const target = holder === 'victim_other_order' ? w.objects.review_deposit_ids[0] : w.objects.open_deposit.id;
        const label = `${key} with the capability of ${holder}`;
        const before = await snapshot();
        counts.capability_requests += 1;
        const answer = await w.app.instance.app.inject({
          method: 'POST',
          url: rule.path(target),
          headers: { host: victimAddress.host, authorization: `Bearer ${token}`, 'idempotency-key': crypto.randomUUID(), 'content-type': 'application/json' },
          payload: JSON.stringify(rule.body),
        });
        expectCode(answer, 'slip_token_invalid', label);
        expectNothingChanged(before, await snapshot(), label);
      }
    }
  }, 60_000);

  it('a QR image link answers only for the order, leg and brand it was signed for', async () => {
    for (const route of apiRoutesOf(w.app.instance.app).filter((item) => item.kind === 'public')) {
      const key = routeKey(route);
      if (PUBLIC_RULES[key] === 'global') {
        counts.public_requests += 1;
        const answer = await w.app.instance.app.inject({ method: 'GET', url: route.url });
        expect.soft(answer.statusCode, key).toBe(200);
        expect.soft(leakedMarkers(answer, brandMarkers), key).toEqual([]);
        continue;
      }
      const own = w.objects.qr_image_path;
      counts.public_requests += 1;
      expect.soft((await w.app.instance.app.inject({ method: 'GET', url: own })).statusCode, 'the victim’s own link works').toBe(200);
      const attackerLink = new URL(attackerDeposits.same_brand.legs![0]!.qr_image_url!);
      const victimLink = new URL(`http://x${own}`);
      const forged = [
        // The attacker's own signature, on the victim's order and leg.
        `${victimLink.pathname}${attackerLink.search}`,
        // The victim's signature under another brand.
        `${victimLink.pathname}${victimLink.search.replace(/wl=[^&]+/, `wl=${w.other_brand.white_label_id}`)}`,
        // The victim's signature for another order (the attacker's, same leg path shape).
        `${attackerLink.pathname}${victimLink.search}`,
      ];
      for (const url of forged) {
        const before = await snapshot();
        counts.public_requests += 1;
        const answer = await w.app.instance.app.inject({ method: 'GET', url });
        expectCode(answer, 'resource_not_found', `${key}: ${url}`);
        expectNothingChanged(before, await snapshot(), key);
      }
    }
  }, 60_000);
});

describe('back-office routes × {reviewer, operator, platform admin, other brand’s operator and reviewer, sk_ key}', () => {
  it('each gets the documented answer; a refusal changes nothing; another brand sees nothing of the victim’s', async () => {
    const routes = apiRoutesOf(w.app.instance.app).filter((route): route is Extract<ApiRoute, { kind: 'backoffice' }> => route.kind === 'backoffice');
    const refusedFirst: Staff[] = ['integration_key', 'other_operator', 'other_reviewer', 'reviewer', 'operator', 'admin'];
    for (const route of routes) {
      const key = routeKey(route);
      const rule = BACKOFFICE_RULES[key]!;
      const successes: Staff[] = [];
      const before = await snapshot();
      for (const actor of refusedFirst) {
        const label = `${key} as ${actor}`;
        const request = rule.request(actor);
        if (actor === 'integration_key') {
          expectCode(await sendBackoffice(actor, request), 'scope_denied', label);
          continue;
        }
        const role = ROLE_OF[actor];
        const admitted = route.roles.includes(role);
        if (!admitted) {
          expectCode(await sendBackoffice(actor, request), 'scope_denied', label);
          continue;
        }
        if (actor === 'other_operator' || actor === 'other_reviewer') {
          const variants = [request, withoutBrand(request)].filter((item): item is Request => item !== null);
          for (const variant of variants) {
            const answer = await sendBackoffice(actor, variant);
            const namesVictimBrand = variant.url.includes(V()) || JSON.stringify(variant.body ?? {}).includes(V());
            if (rule.other_brand === 'own_brand' && !namesVictimBrand) {
              expect.soft(answer.statusCode, `${label} in its own brand: ${describeAnswer(answer)}`).toBeLessThan(300);
              expect.soft(leakedMarkers(answer, brandMarkers), `${label}: the victim brand's ids in the answer`).toEqual([]);
            } else {
              expectCode(answer, 'resource_not_found', `${label} ${variant.method} ${variant.url}`);
            }
          }
          continue;
        }
        successes.push(actor);
      }
      // Every refusal above changed nothing; another brand's own-brand answers may write only their own rows.
      const afterRefusals = await snapshot();
      if (rule.other_brand === 'not_found') expectNothingChanged(before, afterRefusals, key);
      else expect.soft(await writtenRowsMentioning(w.app.testDatabase.database, before, afterRefusals, brandMarkers), `${key}: rows of the victim's brand written`).toEqual([]);
      for (const actor of successes) {
        const expected = rule.allowed[actor as 'admin' | 'operator' | 'reviewer'];
        const answer = await sendBackoffice(actor, rule.request(actor));
        expect.soft(answer.statusCode, `${key} as ${actor}: ${describeAnswer(answer)}`).toBe(expected);
      }
    }
  }, 240_000);
});
