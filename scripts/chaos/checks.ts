import crypto from 'node:crypto';
import type { Database } from '../../src/platform/db.ts';
import { SystemClock } from '../../src/platform/clock.ts';
import { EventsService } from '../../src/events/service.ts';
import { LedgerService } from '../../src/ledger/service.ts';
import type { ChaosClient, Outcome } from './client.ts';
import type { Operation, Tenants } from './load.ts';
import type { ReceiverReport } from './receiver.ts';
import { overlappingRuns, type LogFacts } from './logs.ts';
import type { Generation } from './supervisor.ts';

/**
 * The checks at the end of a chaos run. Each reads what the service exposes (HTTP: the balance, the
 * events feed, replays of acknowledged keys) or reads the database directly, and yields one row of the
 * table: what was observed and whether it passes. `info` rows describe the run and never fail it.
 */

export type Verdict = 'pass' | 'FAIL' | 'info';

export interface CheckRow {
  check: string;
  observed: string;
  result: Verdict;
}

export interface RunFacts {
  database: Database;
  client: ChaosClient;
  tenants: Tenants;
  operations: readonly Operation[];
  receiver: ReceiverReport;
  logs: LogFacts;
  generations: readonly Generation[];
  /** The PostgreSQL outage, when the run restarted it. */
  postgres_restart: { stopped_at_ms: number; started_at_ms: number } | null;
  deadlocks_before: number;
  deadlocks_after: number;
  /** The deadlocks of the run's database in the server log, by the kinds of the two statements; null when unreadable. */
  deadlock_pairs: Map<string, number> | null;
  load_started_ms: number;
  load_ended_ms: number;
  /** The database's clock just before the workers were stopped: a job due after it had no worker left to run it. */
  workers_stopped_at: Date;
}

/**
 * A job is lost only when it was due this long before the workers stopped and is still undone: a job
 * that fell due in the last seconds before the stop (a withdrawal's expiry reached while the run drained)
 * had no worker poll left to take it.
 */
const DUE_BEFORE_STOP_MARGIN_MS = 15_000;

/** A 5xx this close to the outage (before its stop, after its start) is the outage's. */
const OUTAGE_MARGIN_BEFORE_MS = 1_000;
const OUTAGE_MARGIN_AFTER_MS = 10_000;
/** A transport error this soon after its process's SIGKILL is the kill's. */
const KILL_MARGIN_MS = 2_000;
const REPLAY_CONCURRENCY = 8;

function count<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  let total = 0;
  for (const item of items) if (predicate(item)) total += 1;
  return total;
}

function verdict(ok: boolean): Verdict {
  return ok ? 'pass' : 'FAIL';
}

function sample(items: readonly string[], limit = 3): string {
  return items.length === 0 ? '' : ` (e.g. ${items.slice(0, limit).join('; ')})`;
}

function acked(operations: readonly Operation[], kind: Operation['kind']): Operation[] {
  return operations.filter((operation) => operation.kind === kind && operation.outcome.result === 'acked');
}

export function loadRows(facts: RunFacts): CheckRow[] {
  const kinds: Operation['kind'][] = ['deposit.create', 'bank.transfer', 'slip.upload', 'deposit.cancel', 'withdrawal.create', 'withdrawal.cancel', 'refund.create'];
  const parts = kinds.map((kind) => {
    const all = facts.operations.filter((operation) => operation.kind === kind);
    const refused = all.filter((operation) => operation.outcome.result === 'refused');
    const codes = new Map<string, number>();
    for (const operation of refused) codes.set(operation.outcome.code ?? String(operation.outcome.status), (codes.get(operation.outcome.code ?? String(operation.outcome.status)) ?? 0) + 1);
    const refusedText = refused.length === 0 ? '' : `, refused ${[...codes].map(([code, n]) => `${n} ${code}`).join(', ')}`;
    return `${kind} ${count(all, (operation) => operation.outcome.result === 'acked')}/${all.length}${refusedText}`;
  });
  const gaveUp = facts.operations.filter((operation) => operation.outcome.result === 'gave_up');
  const attempts = facts.client.attempts.length;
  const retried = facts.operations.reduce((sum, operation) => sum + operation.outcome.attempts - 1, 0);
  return [
    { check: 'load: operations acknowledged / sent', observed: `${parts.join('; ')}; ${attempts} HTTP attempts, ${retried} of them retries`, result: 'info' },
    {
      check: 'every client request acknowledged (retried with its Idempotency-Key)',
      observed: `${gaveUp.length} without a final answer by the deadline${sample(gaveUp.map((operation) => `${operation.kind} last ${operation.outcome.status ?? 'no answer'}`))}`,
      result: verdict(gaveUp.length === 0),
    },
  ];
}

export function processRows(facts: RunFacts): CheckRow[] {
  const kills = facts.generations.filter((generation) => generation.signal_sent === 'SIGKILL');
  const bySlot = new Map<string, number>();
  for (const kill of kills) bySlot.set(kill.slot, (bySlot.get(kill.slot) ?? 0) + 1);
  const restarts = facts.generations.filter((generation) => generation.generation > 1 && generation.ready_at_ms !== null);
  const readyTimes = restarts.map((generation) => (generation.ready_at_ms ?? 0) - generation.started_at_ms).sort((left, right) => left - right);
  const median = readyTimes.length > 0 ? readyTimes[Math.floor(readyTimes.length / 2)]! : 0;
  const selfExits = facts.generations.filter((generation) => generation.ended_at_ms !== null && generation.signal_sent === null);
  return [
    {
      check: 'kill -9 of a random service process, restarted at once',
      observed: `${kills.length} SIGKILLs (${[...bySlot].map(([slot, n]) => `${slot} ${n}`).join(', ')}); ${restarts.length} restarts ready, median ${(median / 1000).toFixed(1)} s to ready`,
      result: 'info',
    },
    {
      check: 'processes that exited by themselves',
      observed:
        selfExits.length === 0
          ? 'none'
          : selfExits.map((generation) => `${generation.slot}#${generation.generation} code ${generation.exit_code} (${generation.log_path})`).join('; '),
      result: 'info',
    },
  ];
}

/** Every 202 slip receipt processed exactly once, with its order's effects once. */
export async function slipRows(facts: RunFacts): Promise<CheckRow[]> {
  const { database, tenants } = facts;
  const uploads = acked(facts.operations, 'slip.upload');
  const { rows: receipts } = await database.query<{ receipt_id: string; deposit_id: string; status: string; outcome: string | null; deposit_status: string }>(
    `SELECT r.receipt_id, r.deposit_id, r.status, r.outcome, d.status AS deposit_status
       FROM slip_receipts r JOIN deposit_orders d ON d.white_label_id = r.white_label_id AND d.deposit_id = r.deposit_id
      WHERE r.white_label_id = $1`,
    [tenants.white_label_id],
  );
  const byReceipt = new Map(receipts.map((row) => [row.receipt_id, row]));
  const perDeposit = new Map<string, number>();
  for (const row of receipts) perDeposit.set(row.deposit_id, (perDeposit.get(row.deposit_id) ?? 0) + 1);
  const { rows: eventCounts } = await database.query<{ object_id: string; type: string; events: number }>(
    `SELECT object_id, type, count(*)::int AS events FROM events
      WHERE white_label_id = $1 AND type IN ('deposit.slip_received', 'deposit.settled') GROUP BY object_id, type`,
    [tenants.white_label_id],
  );
  const eventsOf = (deposit_id: string, type: string) => eventCounts.find((row) => row.object_id === deposit_id && row.type === type)?.events ?? 0;
  const { rows: credits } = await database.query<{ source_id: string; movements: number }>(
    `SELECT source_id, count(*)::int AS movements FROM balance_transactions
      WHERE white_label_id = $1 AND type = 'deposit_settled' GROUP BY source_id`,
    [tenants.white_label_id],
  );
  const creditsOf = new Map(credits.map((row) => [row.source_id, row.movements]));
  const problems: string[] = [];
  const troubled = new Set<string>();
  const outcomes = new Map<string, number>();
  for (const upload of uploads) {
    const before = problems.length;
    const receipt_id = (JSON.parse(upload.outcome.body_text) as { receipt_id: string }).receipt_id;
    const row = byReceipt.get(receipt_id);
    const deposit_id = upload.object_id ?? '';
    if (!row) {
      problems.push(`${receipt_id}: no receipt row`);
      troubled.add(deposit_id);
      continue;
    }
    outcomes.set(`${row.outcome ?? row.status} → ${row.deposit_status}`, (outcomes.get(`${row.outcome ?? row.status} → ${row.deposit_status}`) ?? 0) + 1);
    if (row.deposit_id !== deposit_id) problems.push(`${receipt_id}: belongs to ${row.deposit_id}, uploaded for ${deposit_id}`);
    if (row.status !== 'processed') problems.push(`${receipt_id}: ${row.status}, not processed`);
    if ((perDeposit.get(deposit_id) ?? 0) !== 1) problems.push(`${deposit_id}: ${perDeposit.get(deposit_id)} receipts for one upload key`);
    if (eventsOf(deposit_id, 'deposit.slip_received') !== 1) problems.push(`${deposit_id}: ${eventsOf(deposit_id, 'deposit.slip_received')} deposit.slip_received`);
    const settled = eventsOf(deposit_id, 'deposit.settled');
    if (settled > 1) problems.push(`${deposit_id}: ${settled} deposit.settled`);
    if ((creditsOf.get(deposit_id) ?? 0) !== (settled > 0 ? 1 : 0)) problems.push(`${deposit_id}: ${creditsOf.get(deposit_id) ?? 0} deposit_settled movements for ${settled} settlement(s)`);
    if (problems.length > before) troubled.add(deposit_id);
  }
  // Receipts nobody was told about: an upload whose 202 was lost to a kill and whose retry made a second receipt.
  const ackedIds = new Set(uploads.map((upload) => (JSON.parse(upload.outcome.body_text) as { receipt_id: string }).receipt_id));
  const orphans = receipts.filter((row) => !ackedIds.has(row.receipt_id) && facts.operations.some((operation) => operation.kind === 'slip.upload' && operation.object_id === row.deposit_id && operation.outcome.result === 'acked'));
  for (const orphan of orphans) problems.push(`${orphan.receipt_id}: a second receipt of ${orphan.deposit_id}`);
  return [
    {
      check: 'every 202 slip receipt processed exactly once',
      observed: `${uploads.length} receipts acknowledged; ${uploads.length - troubled.size} clean; outcomes ${[...outcomes].map(([name, n]) => `${n} ${name}`).join(', ')}; ${problems.length} problems${sample(problems)}`,
      result: verdict(problems.length === 0),
    },
  ];
}

/** Every acknowledged write exists once and says what its answer said. */
export async function acknowledgedRows(facts: RunFacts): Promise<CheckRow[]> {
  const { database, tenants } = facts;
  const problems: string[] = [];
  const { rows: deposits } = await database.query<{ deposit_id: string; merchant_reference: string; status: string }>(
    'SELECT deposit_id, merchant_reference, status FROM deposit_orders WHERE white_label_id = $1',
    [tenants.white_label_id],
  );
  const depositById = new Map(deposits.map((row) => [row.deposit_id, row]));
  const { rows: withdrawals } = await database.query<{ withdrawal_id: string; status: string }>('SELECT withdrawal_id, status FROM withdrawal_orders WHERE white_label_id = $1', [
    tenants.white_label_id,
  ]);
  const withdrawalById = new Map(withdrawals.map((row) => [row.withdrawal_id, row]));
  const { rows: transfers } = await database.query<{ trans_ref: string }>('SELECT trans_ref FROM sandbox_bank_transfers WHERE white_label_id = $1', [tenants.white_label_id]);
  const transferRefs = new Set(transfers.map((row) => row.trans_ref));
  let checked = 0;
  for (const operation of facts.operations) {
    if (operation.outcome.result !== 'acked') continue;
    checked += 1;
    const body = JSON.parse(operation.outcome.body_text) as { id?: string; merchant_reference?: string; status?: string; trans_ref?: string };
    switch (operation.kind) {
      case 'deposit.create': {
        const row = depositById.get(body.id ?? '');
        if (!row || row.merchant_reference !== body.merchant_reference) problems.push(`deposit ${body.id} missing`);
        break;
      }
      case 'deposit.cancel':
        if (depositById.get(operation.object_id ?? '')?.status !== 'canceled') problems.push(`deposit ${operation.object_id} cancel acknowledged, now ${depositById.get(operation.object_id ?? '')?.status}`);
        break;
      case 'withdrawal.create':
        if (!withdrawalById.has(body.id ?? '')) problems.push(`withdrawal ${body.id} missing`);
        break;
      case 'withdrawal.cancel':
        if (withdrawalById.get(operation.object_id ?? '')?.status !== 'canceled') problems.push(`withdrawal ${operation.object_id} cancel acknowledged, now ${withdrawalById.get(operation.object_id ?? '')?.status}`);
        break;
      case 'bank.transfer':
        if (!transferRefs.has(body.trans_ref ?? '')) problems.push(`sandbox transfer ${body.trans_ref} missing`);
        break;
      case 'slip.upload':
        break;
      case 'refund.create':
        // A refund is a withdrawal order; refund-checks.ts checks it against its deposit.
        if (!withdrawalById.has(body.id ?? '')) problems.push(`refund ${body.id} missing`);
        break;
      default:
        problems.push(`unknown operation ${String(operation.kind)}`);
    }
  }
  // One order per merchant reference, also for creations retried after a lost answer.
  const references = new Map<string, number>();
  for (const row of deposits) references.set(row.merchant_reference, (references.get(row.merchant_reference) ?? 0) + 1);
  const doubled = [...references].filter(([, n]) => n > 1);
  for (const [reference] of doubled) problems.push(`two orders for ${reference}`);
  return [
    {
      check: 'every acknowledged write exists once, in the state its answer gave',
      observed: `${checked} acknowledged writes checked; ${problems.length} problems${sample(problems)}`,
      result: verdict(problems.length === 0),
    },
  ];
}

interface Buckets {
  available_minor: number;
  pending_clearing_minor: number;
  reserved_minor: number;
}

function sameBuckets(left: Buckets, right: Buckets): boolean {
  return left.available_minor === right.available_minor && left.pending_clearing_minor === right.pending_clearing_minor && left.reserved_minor === right.reserved_minor;
}

/** Reads a merchant's whole events feed through GET /v1/pay/events, in pages of 500. */
async function readFeed(facts: RunFacts, merchant: Tenants['merchants'][number]): Promise<{ sequence: number; id: string; type: string; data: { object: Record<string, unknown> } }[]> {
  const events: { sequence: number; id: string; type: string; data: { object: Record<string, unknown> } }[] = [];
  let since = 0;
  for (let page = 0; page < 10_000; page += 1) {
    const outcome = await facts.client.perform(
      'check GET /v1/pay/events',
      { kind: 'merchant', method: 'GET', target: `/v1/pay/events?since_sequence=${since}&limit=500`, credentials: merchant.credentials },
      { deadline_ms: Date.now() + 120_000 },
    );
    if (outcome.result !== 'acked') throw new Error(`GET /v1/pay/events answered ${outcome.status}: ${outcome.body_text.slice(0, 200)}`);
    const list = JSON.parse(outcome.body_text) as { data: { sequence: number; id: string; type: string; data: { object: Record<string, unknown> } }[]; has_more: boolean };
    events.push(...list.data);
    if (!list.has_more || list.data.length === 0) break;
    since = list.data.at(-1)!.sequence;
  }
  return events;
}

/**
 * Every wallet's buckets are the fold of its movements (LedgerService.verify, over every wallet of the
 * brand); for the run's merchants also GET /v1/pay/balance and the fold of the `balance.*` events of the
 * events feed give the same three numbers.
 */
export async function ledgerRows(facts: RunFacts, feeds: Map<string, Awaited<ReturnType<typeof readFeed>>>): Promise<CheckRow[]> {
  const { database, tenants } = facts;
  const clock = new SystemClock();
  const ledger = new LedgerService(new EventsService(clock), clock);
  const { rows: wallets } = await database.query<{ merchant_id: string; livemode: boolean }>('SELECT merchant_id, livemode FROM wallets WHERE white_label_id = $1', [tenants.white_label_id]);
  const problems: string[] = [];
  let movements = 0;
  for (const wallet of wallets) {
    const verified = await ledger.verify(database, { white_label_id: tenants.white_label_id, merchant_id: wallet.merchant_id, livemode: wallet.livemode });
    movements += verified.movements;
    if (!verified.consistent) problems.push(`${wallet.merchant_id}: wallet ${JSON.stringify(verified.wallet)} folded ${JSON.stringify(verified.folded)}`);
  }
  const merchantProblems: string[] = [];
  for (const merchant of tenants.merchants) {
    const account = { white_label_id: tenants.white_label_id, merchant_id: merchant.merchant_id, livemode: false };
    const verified = await ledger.verify(database, account);
    const balance = await facts.client.perform(
      'check GET /v1/pay/balance',
      { kind: 'merchant', method: 'GET', target: '/v1/pay/balance', credentials: merchant.credentials },
      { deadline_ms: Date.now() + 60_000 },
    );
    const answered = JSON.parse(balance.body_text) as Buckets;
    if (!sameBuckets(answered, verified.wallet)) merchantProblems.push(`${merchant.merchant_id}: GET /v1/pay/balance ${JSON.stringify(answered)} ≠ wallet`);
    const folded: Buckets = { available_minor: 0, pending_clearing_minor: 0, reserved_minor: 0 };
    const seen = new Set<string>();
    for (const event of feeds.get(merchant.merchant_id) ?? []) {
      const object = event.data.object as { object?: string; id?: string; amount_minor?: number; bucket_from?: keyof Buckets | null; bucket_to?: keyof Buckets | null };
      if (object.object !== 'balance_transaction' || !object.id || seen.has(object.id)) continue;
      seen.add(object.id);
      const amount = object.amount_minor ?? 0;
      const key = (bucket: string) => `${bucket}_minor` as keyof Buckets;
      if (object.bucket_from) folded[key(object.bucket_from)] -= amount;
      if (object.bucket_to) folded[key(object.bucket_to)] += amount;
    }
    if (!sameBuckets(folded, verified.wallet)) merchantProblems.push(`${merchant.merchant_id}: the feed's balance events fold to ${JSON.stringify(folded)}, wallet ${JSON.stringify(verified.wallet)}`);
    if (seen.size !== verified.movements) merchantProblems.push(`${merchant.merchant_id}: ${seen.size} balance events for ${verified.movements} movements`);
  }
  return [
    {
      check: "every wallet's buckets = the fold of its movements (ledger verify)",
      observed: `${wallets.length} wallets, ${movements} movements; ${problems.length} drifted${sample(problems)}`,
      result: verdict(problems.length === 0),
    },
    {
      check: 'run merchants: GET /v1/pay/balance = wallet = fold of the feed’s balance.* events',
      observed: `${tenants.merchants.length} merchants; ${merchantProblems.length} mismatches${sample(merchantProblems)}`,
      result: verdict(merchantProblems.length === 0),
    },
  ];
}

/** The withdrawal identity, its legs, its refund at close and its ledger movements, on every order of the brand. */
export async function withdrawalRows(facts: RunFacts): Promise<CheckRow[]> {
  const { database, tenants } = facts;
  const { rows: orders } = await database.query<{
    withdrawal_id: string;
    status: string;
    amount_total_minor: number;
    fee_total_minor: number;
    fee_recognized_minor: number;
    filled_minor: number;
    reserved_minor: number;
    remaining_minor: number;
    refunded_minor: number | null;
    settled_splits: number;
  }>(
    `SELECT withdrawal_id, status, amount_total_minor, fee_total_minor, fee_recognized_minor, filled_minor, reserved_minor,
            remaining_minor, refunded_minor, settled_splits
       FROM withdrawal_orders WHERE white_label_id = $1`,
    [tenants.white_label_id],
  );
  const { rows: legs } = await database.query<{ withdrawal_id: string; status: string; legs: number; amount_minor: number }>(
    `SELECT withdrawal_id, status, count(*)::int AS legs, sum(amount_minor)::bigint AS amount_minor
       FROM withdrawal_legs WHERE white_label_id = $1 GROUP BY withdrawal_id, status`,
    [tenants.white_label_id],
  );
  const { rows: moves } = await database.query<{ source_id: string; type: string; movements: number; amount_minor: number }>(
    // A reversed fill's credits into available (a closed order's) are counted apart: they are part of its refund.
    `SELECT source_id, CASE WHEN type = 'reversal' AND bucket_to = 'available' THEN 'reversal_into_available' ELSE type END AS type,
            count(*)::int AS movements, sum(amount_minor)::bigint AS amount_minor
       FROM balance_transactions WHERE white_label_id = $1 AND source_type = 'withdrawal_order' GROUP BY 1, 2`,
    [tenants.white_label_id],
  );
  const legOf = (id: string, status: string) => legs.find((row) => row.withdrawal_id === id && row.status === status) ?? { legs: 0, amount_minor: 0 };
  const moveOf = (id: string, type: string) => moves.find((row) => row.source_id === id && row.type === type) ?? { movements: 0, amount_minor: 0 };
  const closed = new Set(['settled', 'expired', 'canceled', 'rejected']);
  const problems: string[] = [];
  const statuses = new Map<string, number>();
  for (const order of orders) {
    const id = order.withdrawal_id;
    statuses.set(order.status, (statuses.get(order.status) ?? 0) + 1);
    const fail = (what: string) => problems.push(`${id} (${order.status}): ${what}`);
    if (!closed.has(order.status) && order.amount_total_minor !== order.filled_minor + order.reserved_minor + order.remaining_minor) fail('total ≠ filled + reserved + remaining');
    if (legOf(id, 'filled').amount_minor !== order.filled_minor) fail(`filled ${order.filled_minor} ≠ its filled legs ${legOf(id, 'filled').amount_minor}`);
    if (legOf(id, 'reserved').amount_minor !== order.reserved_minor) fail(`reserved ${order.reserved_minor} ≠ its reserved legs ${legOf(id, 'reserved').amount_minor}`);
    if (legOf(id, 'filled').legs !== order.settled_splits) fail(`settled_splits ${order.settled_splits} ≠ ${legOf(id, 'filled').legs} filled legs`);
    const reserve = moveOf(id, 'withdrawal_reserved');
    if (reserve.movements !== 1 || reserve.amount_minor !== order.amount_total_minor + order.fee_total_minor) fail(`withdrawal_reserved ${reserve.movements}× ${reserve.amount_minor}`);
    if (moveOf(id, 'withdrawal_settled').amount_minor !== order.filled_minor) fail(`withdrawal_settled movements ${moveOf(id, 'withdrawal_settled').amount_minor} ≠ filled`);
    if (moveOf(id, 'fee').amount_minor !== order.fee_recognized_minor) fail(`fee movements ${moveOf(id, 'fee').amount_minor} ≠ fee recognised`);
    const release = moveOf(id, 'withdrawal_released');
    if (closed.has(order.status)) {
      // Refund rules: a closed order has nothing open and returned exactly what it never paid, with the fee it did
      // not use (refunded_minor, spec: "Amount returned to the balance"): its release, plus any fill reversed after.
      if (order.reserved_minor !== 0 || order.remaining_minor !== 0) fail(`closed with reserved ${order.reserved_minor}, remaining ${order.remaining_minor}`);
      const refunded = order.refunded_minor ?? 0;
      if (order.amount_total_minor + order.fee_total_minor !== order.filled_minor + order.fee_recognized_minor + refunded) fail(`refunded ${refunded} ≠ locked − paid − fee earned`);
      const owed = refunded - moveOf(id, 'reversal_into_available').amount_minor;
      if (release.amount_minor !== owed || release.movements > 1) fail(`withdrawal_released ${release.movements}× ${release.amount_minor}, owed ${owed}`);
    } else {
      if (order.refunded_minor !== null) fail('refunded while open');
      if (release.movements !== 0) fail('released while open');
    }
  }
  // The two sides of every leg agree: what the deposit side reserved, released or filled, the withdrawal side did too.
  const { rows: pairs } = await database.query<{ deposit_status: string; withdrawal_status: string | null; legs: number }>(
    `SELECT d.status AS deposit_status, w.status AS withdrawal_status, count(*)::int AS legs
       FROM deposit_legs d LEFT JOIN withdrawal_legs w ON w.white_label_id = d.white_label_id AND w.leg_ref = d.withdrawal_leg_ref
      WHERE d.white_label_id = $1 AND d.destination = 'withdrawal' GROUP BY 1, 2`,
    [tenants.white_label_id],
  );
  const mismatched = pairs.filter((pair) => pair.deposit_status !== pair.withdrawal_status);
  for (const pair of mismatched) problems.push(`${pair.legs} deposit legs ${pair.deposit_status} with withdrawal legs ${pair.withdrawal_status}`);
  return [
    {
      check: 'withdrawal identity, legs, refund at close and ledger movements on every order',
      observed: `${orders.length} orders (${[...statuses].map(([status, n]) => `${n} ${status}`).join(', ')}); ${pairs.reduce((sum, pair) => sum + pair.legs, 0)} leg pairs; ${problems.length} problems${sample(problems)}`,
      result: verdict(problems.length === 0),
    },
  ];
}

/**
 * Every event of the run's merchants reached the receiver at least once (and its delivery row says
 * succeeded), with the bytes the outbox stored; no event id came twice with different bytes; the feed
 * has every event once, in sequence without gaps; no two events of one object share a version.
 */
export async function eventRows(facts: RunFacts, feeds: Map<string, Awaited<ReturnType<typeof readFeed>>>): Promise<CheckRow[]> {
  const { database, tenants, receiver } = facts;
  const merchantIds = tenants.merchants.map((merchant) => merchant.merchant_id);
  const { rows: events } = await database.query<{ event_id: string; merchant_id: string; sequence: number; object_id: string | null; version: string | null; envelope_text: string; delivery_status: string | null }>(
    `SELECT e.event_id, e.merchant_id, e.sequence, e.object_id, e.envelope->'data'->'object'->>'version' AS version,
            e.envelope::text AS envelope_text, d.status AS delivery_status
       FROM events e
       LEFT JOIN webhook_deliveries d ON d.white_label_id = e.white_label_id AND d.event_id = e.event_id
      WHERE e.white_label_id = $1 AND e.livemode = false AND e.merchant_id = ANY($2::text[])`,
    [tenants.white_label_id, merchantIds],
  );
  const received = new Map(receiver.events.map((record) => [record.event_id, record]));
  const missing: string[] = [];
  const undelivered: string[] = [];
  const otherBytes: string[] = [];
  for (const event of events) {
    const record = received.get(event.event_id);
    if (!record) missing.push(event.event_id);
    else if (record.sha256 !== crypto.createHash('sha256').update(event.envelope_text).digest('hex')) otherBytes.push(event.event_id);
    if (event.delivery_status !== 'succeeded') undelivered.push(`${event.event_id} ${event.delivery_status ?? 'no delivery'}`);
  }
  const conflicts = receiver.events.filter((record) => record.conflicting > 0);
  const duplicates = receiver.events.reduce((sum, record) => sum + record.acknowledged - 1, 0);
  const feedProblems: string[] = [];
  for (const merchant of tenants.merchants) {
    const feed = feeds.get(merchant.merchant_id) ?? [];
    const stored = events.filter((event) => event.merchant_id === merchant.merchant_id);
    const sequences = feed.map((event) => event.sequence);
    const contiguous = sequences.every((sequence, index) => sequence === index + 1);
    if (!contiguous) feedProblems.push(`${merchant.merchant_id}: sequences not 1..${sequences.length}`);
    if (feed.length !== stored.length) feedProblems.push(`${merchant.merchant_id}: feed ${feed.length} events, stored ${stored.length}`);
  }
  const versions = new Map<string, number>();
  for (const event of events) {
    if (event.object_id === null || event.version === null) continue;
    const key = `${event.object_id}@${event.version}`;
    versions.set(key, (versions.get(key) ?? 0) + 1);
  }
  const sharedVersions = [...versions].filter(([, n]) => n > 1).map(([key]) => key);
  return [
    {
      check: 'webhooks: every event delivered at least once, with the stored bytes',
      observed:
        `${events.length} events of the run's merchants; receiver acknowledged ${events.length - missing.length}, missing ${missing.length}${sample(missing)}; ` +
        `delivery rows not succeeded ${undelivered.length}${sample(undelivered)}; other bytes than stored ${otherBytes.length}; ` +
        `receiver: ${receiver.deliveries} deliveries, ${receiver.answered_500} answered 500, ${receiver.hung} hung, ${duplicates} duplicates, ` +
        `${receiver.unknown_kid} refused for a kid not fetched yet, ${receiver.signature_failures} bad signatures, ${receiver.envelope_mismatches + receiver.malformed} malformed`,
      result: verdict(missing.length === 0 && undelivered.length === 0 && otherBytes.length === 0 && receiver.signature_failures === 0 && receiver.envelope_mismatches === 0 && receiver.malformed === 0),
    },
    {
      check: "webhooks: the receiver's dedupe saw no event id twice with different bytes",
      observed: `${conflicts.length} event ids with different bytes${sample(conflicts.map((record) => record.event_id))}`,
      result: verdict(conflicts.length === 0),
    },
    {
      check: 'events feed (GET /v1/pay/events): every event once, sequences without gaps; one event per object version',
      observed: `${tenants.merchants.length} feeds; ${feedProblems.length} problems${sample(feedProblems)}; ${sharedVersions.length} shared versions${sample(sharedVersions)}`,
      result: verdict(feedProblems.length === 0 && sharedVersions.length === 0),
    },
  ];
}

export async function readFeeds(facts: RunFacts): Promise<Map<string, Awaited<ReturnType<typeof readFeed>>>> {
  const feeds = new Map<string, Awaited<ReturnType<typeof readFeed>>>();
  for (const merchant of facts.tenants.merchants) feeds.set(merchant.merchant_id, await readFeed(facts, merchant));
  return feeds;
}

/** No job ran twice at once (handler start/end lines of every worker, and the lease fencing); no job lost. */
export async function jobRows(facts: RunFacts): Promise<CheckRow[]> {
  const { database } = facts;
  const overlaps = overlappingRuns(facts.logs.runs);
  const { rows: statuses } = await database.query<{ status: string; jobs: number; taken_over: number }>(
    'SELECT status, count(*)::int AS jobs, count(*) FILTER (WHERE attempts > 1)::int AS taken_over FROM jobs GROUP BY status',
  );
  const { rows: failed } = await database.query<{ task: string; last_error: string | null; jobs: number }>(
    "SELECT task, last_error, count(*)::int AS jobs FROM jobs WHERE status = 'failed' GROUP BY task, last_error",
  );
  const dueBefore = new Date(facts.workers_stopped_at.getTime() - DUE_BEFORE_STOP_MARGIN_MS);
  const { rows: stuck } = await database.query<{ task: string; status: string; jobs: number }>(
    `SELECT task, status, count(*)::int AS jobs FROM jobs
      WHERE test_clock_id IS NULL AND ((status = 'pending' AND run_at <= $1) OR status = 'running') GROUP BY task, status`,
    [dueBefore],
  );
  const killedRuns = count(facts.logs.runs, (run) => run.ended_by === 'kill');
  const openRuns = count(facts.logs.runs, (run) => run.ended_by === 'open');
  const takenOver = statuses.reduce((sum, row) => sum + row.taken_over, 0);
  const failures = [...facts.logs.job_failures].map(([message, n]) => `${n}× ${message}`);
  return [
    {
      check: 'no job ran twice at once (handler start/end of every worker; attempt/lease fencing)',
      observed:
        `${facts.logs.runs.length} handler runs logged (${killedRuns} cut by a kill, ${openRuns} still open); ${overlaps.length} overlapping pairs` +
        `${sample(overlaps.map(([left, right]) => `${left.job_id} ${left.worker} & ${right.worker}`))}; ${takenOver} jobs needed more than one attempt`,
      result: verdict(overlaps.length === 0 && facts.logs.runs.length > 0),
    },
    {
      check: 'no job lost: none failed for good, none due (15 s before the workers stopped) and left undone',
      observed: `jobs ${statuses.map((row) => `${row.jobs} ${row.status}`).join(', ')}; failed ${failed.map((row) => `${row.jobs}× ${row.task}: ${row.last_error ?? ''}`).join('; ') || 'none'}; due and undone ${stuck.map((row) => `${row.jobs} ${row.task} ${row.status}`).join(', ') || 'none'}`,
      result: verdict(failed.length === 0 && stuck.length === 0),
    },
    { check: 'job handler failures that were retried', observed: failures.length === 0 ? 'none' : failures.slice(0, 5).join('; '), result: 'info' },
  ];
}

/**
 * No 5xx except while its process was being killed (a killed process answers nothing: its clients see
 * a reset) or while PostgreSQL was down. Deadlocks (40P01) are reported on their own row, and any
 * deadlock fails the run: every path takes its locks in the one order of src/platform/lock-order.ts.
 */
export function errorRows(facts: RunFacts): CheckRow[] {
  const outage = facts.postgres_restart;
  const inOutage = (start: number, end: number) =>
    outage !== null && end >= outage.stopped_at_ms - OUTAGE_MARGIN_BEFORE_MS && start <= outage.started_at_ms + OUTAGE_MARGIN_AFTER_MS;
  const killedDuring = (pid: number | null, start: number, end: number) =>
    facts.generations.some((generation) => generation.pid === pid && generation.signal_sent === 'SIGKILL' && (generation.signal_sent_at_ms ?? 0) <= end + KILL_MARGIN_MS && (generation.ended_at_ms ?? Infinity) >= start);
  const server = facts.client.attempts.filter((attempt) => attempt.status !== null && attempt.status >= 500);
  const transport = facts.client.attempts.filter((attempt) => attempt.status === null);
  let byKill = 0;
  let byOutage = 0;
  const deadlocks: string[] = [];
  const unexplained: string[] = [];
  const killSamples: string[] = [];
  const shed = new Map<string, number>();
  for (const attempt of server) {
    const message = attempt.request_id ? facts.logs.request_errors.get(attempt.request_id) : undefined;
    // The outage comes before shedding: a process that cannot reach the database answers 503
    // `service_unavailable` too (src/platform/db.ts), and inside the outage that is what it was.
    if (message && /deadlock detected/i.test(message)) deadlocks.push(`${attempt.op} ${attempt.request_id}`);
    else if (inOutage(attempt.started_ms, attempt.ended_ms)) byOutage += 1;
    else if (attempt.status === 503 && (attempt.code === 'route_unavailable' || attempt.code === 'service_unavailable')) {
      // Load shedding (spec, Errors rule 2): a designed, retryable answer of an overloaded process.
      const key = `${attempt.op} ${attempt.code}`;
      shed.set(key, (shed.get(key) ?? 0) + 1);
    } else if (killedDuring(attempt.pid, attempt.started_ms, attempt.ended_ms)) {
      byKill += 1;
      killSamples.push(`${attempt.op} ${attempt.status} ${attempt.code ?? ''}: ${message ?? 'no log line'}`);
    } else unexplained.push(`${attempt.op} ${attempt.status} ${attempt.code ?? ''} ${attempt.request_id ?? ''}: ${message ?? 'no log line'}`);
  }
  const transportByKill = count(transport, (attempt) => killedDuring(attempt.pid, attempt.started_ms, attempt.ended_ms) || attempt.pid === null);
  const transportByOutage = count(transport, (attempt) => !killedDuring(attempt.pid, attempt.started_ms, attempt.ended_ms) && inOutage(attempt.started_ms, attempt.ended_ms));
  const transportOther = transport.length - transportByKill - transportByOutage;
  const deadlockJobs = count(facts.logs.deadlock_lines, (line) => line.request_id === null);
  const deadlockRequests = count(facts.logs.deadlock_lines, (line) => line.request_id !== null);
  const places = new Map<string, number>();
  for (const line of facts.logs.deadlock_lines) {
    const place = `${line.task ?? 'request'}: ${line.waited_in}`;
    places.set(place, (places.get(place) ?? 0) + 1);
  }
  const pairs = facts.deadlock_pairs;
  const deadlockCount = facts.deadlocks_after - facts.deadlocks_before;
  return [
    {
      check: 'no 5xx except while its process was killed or PostgreSQL was down',
      observed:
        `${server.length} answers ≥ 500 of ${facts.client.attempts.length} attempts: ${byKill} around a kill${sample(killSamples, 2)}, ${byOutage} in the PostgreSQL outage, ` +
        `${[...shed.values()].reduce((sum, n) => sum + n, 0)} shed (503${shed.size > 0 ? `: ${[...shed].map(([key, n]) => `${n} ${key}`).join(', ')}` : ''}), ` +
        `${deadlocks.length} deadlocks (40P01, counted below), ${unexplained.length} unexplained${sample(unexplained)}; ` +
        `${transport.length} attempts without an answer (${transportByKill} to a process being killed, ${transportByOutage} in the outage, ${transportOther} other)`,
      result: verdict(unexplained.length === 0),
    },
    {
      check: 'no deadlock (40P01): every path takes its locks in the one lock order',
      observed:
        `pg_stat_database.deadlocks +${facts.deadlocks_after - facts.deadlocks_before}; ` +
        `server log: ${pairs === null ? 'not readable here' : [...pairs].map(([pair, n]) => `${n}× ${pair}`).join(', ') || 'none'}; ` +
        `victims: ${deadlockRequests} requests (answered 500, retried), ${deadlockJobs} job runs (retried); waited in ${[...places].map(([place, n]) => `${n}× ${place}`).join(', ') || 'nothing'}`,
      result: verdict(deadlockCount === 0 && deadlocks.length === 0 && facts.logs.deadlock_lines.length === 0),
    },
  ];
}

/** After the run every acknowledged Idempotency-Key replays its original answer: status, bytes and Idempotent-Replay. */
export async function replayRows(facts: RunFacts): Promise<CheckRow[]> {
  const replayable = facts.operations.filter((operation) => operation.outcome.result === 'acked' && operation.outcome.spec.kind !== 'backoffice');
  const problems: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < replayable.length) {
      const operation = replayable[next++]!;
      const original: Outcome = operation.outcome;
      const replay = await facts.client.perform(`replay ${operation.kind}`, original.spec, { deadline_ms: Date.now() + 120_000 });
      if (replay.status !== original.status || replay.body_text !== original.body_text) {
        problems.push(`${operation.kind} ${operation.object_id}: ${original.status} → ${replay.status} ${replay.body_text === original.body_text ? '' : 'other body'}`);
      } else if (replay.headers['idempotent-replay'] !== 'true') {
        problems.push(`${operation.kind} ${operation.object_id}: no Idempotent-Replay header`);
      }
    }
  };
  await Promise.all(Array.from({ length: REPLAY_CONCURRENCY }, () => worker()));
  return [
    {
      check: 'every acknowledged Idempotency-Key replays its original answer (status, bytes, Idempotent-Replay: true)',
      observed: `${replayable.length} keys replayed; ${problems.length} differ${sample(problems)}`,
      result: verdict(problems.length === 0),
    },
  ];
}

/**
 * With a PostgreSQL restart, or a failover (the outage runs from the primary's kill to the standby's
 * promotion): every process reconnected (each API process answered, each worker ran a job, after it).
 */
export function restartRows(facts: RunFacts, failover = false): CheckRow[] {
  const outage = facts.postgres_restart;
  if (outage === null) return [];
  const after = outage.started_at_ms;
  const apiSlots = [...new Set(facts.generations.filter((generation) => generation.role === 'api').map((generation) => generation.slot))];
  const workerSlots = [...new Set(facts.generations.filter((generation) => generation.role === 'worker').map((generation) => generation.slot))];
  // A process that lived through the outage (started before it, still alive after it) must have reconnected.
  const survivors = facts.generations.filter((generation) => generation.started_at_ms < outage.stopped_at_ms && (generation.ended_at_ms ?? Infinity) > after + OUTAGE_MARGIN_AFTER_MS);
  const notReconnected: string[] = [];
  for (const generation of survivors) {
    const served =
      generation.role === 'api'
        ? facts.client.attempts.some((attempt) => attempt.pid === generation.pid && attempt.started_ms > after && attempt.status !== null && attempt.status < 500)
        : facts.logs.runs.some((run) => run.worker === `${generation.slot}#${generation.generation}` && run.started_ms > after);
    if (!served) notReconnected.push(`${generation.slot}#${generation.generation}`);
  }
  return [
    {
      check: failover ? 'PostgreSQL failed over mid-run (primary killed, standby promoted): the processes reconnect to the new primary' : 'PostgreSQL restarted (fast shutdown) mid-run: the processes reconnect',
      observed:
        `down ${((outage.started_at_ms - outage.stopped_at_ms) / 1000).toFixed(1)} s at +${((outage.stopped_at_ms - facts.load_started_ms) / 1000).toFixed(0)} s; ` +
        `${survivors.length} of the ${apiSlots.length + workerSlots.length} processes lived through it (${survivors.map((generation) => `${generation.slot}#${generation.generation}`).join(', ') || 'none'}); ${notReconnected.length} did not serve again${sample(notReconnected)}`,
      // Without a survivor of each role the run proved nothing about reconnecting.
      result: verdict(notReconnected.length === 0 && survivors.some((generation) => generation.role === 'api') && survivors.some((generation) => generation.role === 'worker')),
    },
  ];
}

export function stopRows(stopped: readonly (Generation | null)[]): CheckRow[] {
  const unclean = stopped.filter((generation) => generation === null || generation.exit_code !== 0);
  return [
    {
      check: 'graceful stop at the end: SIGTERM to each PID (the direct start command) exits 0',
      observed: `${stopped.length - unclean.length}/${stopped.length} exited 0${sample(unclean.map((generation) => (generation ? `${generation.slot} code ${generation.exit_code} signal ${generation.exit_signal}` : 'not running')))}`,
      result: verdict(unclean.length === 0),
    },
  ];
}
