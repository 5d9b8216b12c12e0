import type { CheckRow, RunFacts } from './checks.ts';
import type { Operation } from './load.ts';

/**
 * The refund checks at the end of a chaos run (issue 32), read from the database like the other checks:
 *
 * - within the credit: for every deposit of the brand with refunds, the refunds' claim (a live refund's whole
 *   amount, a closed one's paid amount) never exceeds its `amount_received_minor` and equals its allowance row's
 *   `committed_minor` (the row's cap is the amount received, its count the refunds);
 * - every refund folds: its reservation is what it paid, the fee it earned and what it returned (or, while live,
 *   still holds), per its own movements;
 * - every acknowledged refund exists exactly once, as a refund of the deposit it was sent for; one key answered one
 *   refund; every refund row of the load's deposits was acknowledged;
 * - the storm's races ended as they must: every over-refund refused, exactly one winner per race for the last baht.
 */

interface RefundRow {
  withdrawal_id: string;
  refund_of_deposit_id: string;
  status: string;
  amount_total_minor: number;
  fee_total_minor: number;
  filled_minor: number;
  fee_recognized_minor: number;
  refund_reason_code: string | null;
  replacement_of_withdrawal_id: string | null;
}

interface DepositRow {
  deposit_id: string;
  amount_received_minor: number | null;
  cap: number | null;
  committed: number | null;
  refund_count: number | null;
}

const CLOSED = new Set(['settled', 'expired', 'canceled', 'rejected']);

function sample(items: readonly string[], limit = 3): string {
  return items.length === 0 ? '' : ` (e.g. ${items.slice(0, limit).join('; ')})`;
}

async function refundsOfBrand(facts: RunFacts): Promise<RefundRow[]> {
  const { rows } = await facts.database.query<RefundRow>(
    `SELECT withdrawal_id, refund_of_deposit_id, status, amount_total_minor::int, fee_total_minor::int, filled_minor::int, fee_recognized_minor::int,
            refund_reason_code, replacement_of_withdrawal_id
       FROM withdrawal_orders WHERE white_label_id = $1 AND refund_of_deposit_id IS NOT NULL`,
    [facts.tenants.white_label_id],
  );
  return rows;
}

/** The refunds' claim on every refunded deposit against its credit and its allowance row. */
export async function refundCreditRows(facts: RunFacts, refunds: readonly RefundRow[]): Promise<CheckRow[]> {
  const { rows: deposits } = await facts.database.query<DepositRow>(
    `SELECT d.deposit_id, d.amount_received_minor::int AS amount_received_minor, a.refundable_cap_minor::int AS cap,
            a.committed_minor::int AS committed, a.refund_count AS refund_count
       FROM deposit_orders d LEFT JOIN withdrawal_refund_allowances a ON a.white_label_id = d.white_label_id AND a.deposit_id = d.deposit_id
      WHERE d.white_label_id = $1 AND (a.deposit_id IS NOT NULL OR d.deposit_id = ANY($2::text[]))`,
    [facts.tenants.white_label_id, [...new Set(refunds.map((refund) => refund.refund_of_deposit_id))]],
  );
  const problems: string[] = [];
  let full = 0;
  for (const deposit of deposits) {
    const own = refunds.filter((refund) => refund.refund_of_deposit_id === deposit.deposit_id);
    const claim = own.reduce((sum, refund) => sum + (CLOSED.has(refund.status) ? refund.filled_minor : refund.amount_total_minor), 0);
    const received = deposit.amount_received_minor ?? 0;
    const fail = (what: string) => problems.push(`${deposit.deposit_id}: ${what}`);
    if (claim > received) fail(`refunds claim ${claim} > received ${received}`);
    if (deposit.committed !== claim) fail(`allowance committed ${deposit.committed ?? 'no row'} ≠ refunds' claim ${claim}`);
    if (deposit.cap !== received) fail(`allowance cap ${deposit.cap ?? 'no row'} ≠ received ${received}`);
    const opened = own.filter((refund) => refund.replacement_of_withdrawal_id === null).length;
    if (deposit.refund_count !== opened) fail(`allowance count ${deposit.refund_count ?? 'no row'} ≠ ${opened} refunds`);
    if (claim === received) full += 1;
  }
  return [
    {
      check: "refunds never exceed their deposit's credit, and the claim = the allowance's committed_minor",
      observed: `${deposits.length} refunded deposits (${full} refunded in full), ${refunds.length} refunds; ${problems.length} problems${sample(problems)}`,
      result: problems.length === 0 && deposits.length > 0 ? 'pass' : 'FAIL',
    },
  ];
}

/** Reserved = paid + fee recognised + returned, per the refund's own movements (returned = still held while live). */
export async function refundLedgerRows(facts: RunFacts, refunds: readonly RefundRow[]): Promise<CheckRow[]> {
  const { rows: moves } = await facts.database.query<{ source_id: string; type: string; amount_minor: number }>(
    `SELECT source_id, type, sum(amount_minor)::int AS amount_minor FROM balance_transactions
      WHERE white_label_id = $1 AND source_type = 'withdrawal_order' AND source_id = ANY($2::text[]) GROUP BY 1, 2`,
    [facts.tenants.white_label_id, refunds.map((refund) => refund.withdrawal_id)],
  );
  const moved = new Map(moves.map((row) => [`${row.source_id} ${row.type}`, row.amount_minor]));
  const amountOf = (id: string, type: string) => moved.get(`${id} ${type}`) ?? 0;
  const problems: string[] = [];
  for (const refund of refunds) {
    const id = refund.withdrawal_id;
    const reserved = amountOf(id, 'withdrawal_reserved');
    const paid = amountOf(id, 'withdrawal_settled');
    const fee = amountOf(id, 'fee');
    const returned = amountOf(id, 'withdrawal_released') + amountOf(id, 'reversal');
    const held = CLOSED.has(refund.status) ? 0 : refund.amount_total_minor - refund.filled_minor + refund.fee_total_minor - refund.fee_recognized_minor;
    if (reserved !== refund.amount_total_minor + refund.fee_total_minor) problems.push(`${id}: reserved ${reserved} ≠ amount + fee`);
    if (reserved !== paid + fee + returned + held) problems.push(`${id} (${refund.status}): reserved ${reserved} ≠ paid ${paid} + fee ${fee} + returned ${returned} + held ${held}`);
    if (paid !== refund.filled_minor) problems.push(`${id}: paid ${paid} ≠ filled ${refund.filled_minor}`);
  }
  return [
    {
      check: "every refund's ledger folds: reserved = paid + fee recognised + returned (+ still held while live)",
      observed: `${refunds.length} refunds (${refunds.filter((refund) => CLOSED.has(refund.status)).length} closed); ${problems.length} problems${sample(problems)}`,
      result: problems.length === 0 ? 'pass' : 'FAIL',
    },
  ];
}

function keyOf(operation: Operation): string {
  const spec = operation.outcome.spec;
  return spec.kind === 'merchant' ? (spec.idempotency_key ?? '') : '';
}

/** Every acknowledged refund exists once, for its deposit; one key, one answer; no refund of the load unacknowledged. */
export function refundAcknowledgedRows(facts: RunFacts, refunds: readonly RefundRow[]): CheckRow[] {
  const sent = facts.operations.filter((operation) => operation.kind === 'refund.create');
  const byId = new Map(refunds.map((refund) => [refund.withdrawal_id, refund]));
  const problems: string[] = [];
  const answers = new Map<string, string>();
  for (const operation of sent) {
    const answer = operation.outcome.result === 'acked' ? `refund ${operation.object_id}` : `${operation.outcome.result} ${operation.outcome.code ?? operation.outcome.status}`;
    const earlier = answers.get(keyOf(operation));
    if (earlier !== undefined && earlier !== answer) problems.push(`key ${keyOf(operation)}: ${earlier} and ${answer}`);
    answers.set(keyOf(operation), answer);
    if (operation.outcome.result !== 'acked') continue;
    const row = byId.get(operation.object_id ?? '');
    if (!row) problems.push(`refund ${operation.object_id} acknowledged, missing`);
    else if (row.refund_of_deposit_id !== operation.refund?.deposit_id) problems.push(`refund ${row.withdrawal_id} of ${row.refund_of_deposit_id}, sent for ${operation.refund?.deposit_id}`);
  }
  const acknowledged = new Set(sent.filter((operation) => operation.outcome.result === 'acked').map((operation) => operation.object_id));
  const loadDeposits = new Set(sent.map((operation) => operation.refund?.deposit_id));
  const unanswered = new Set(sent.filter((operation) => operation.outcome.result === 'gave_up').map((operation) => operation.refund?.deposit_id));
  for (const refund of refunds) {
    const ours = loadDeposits.has(refund.refund_of_deposit_id) && refund.replacement_of_withdrawal_id === null;
    if (ours && !acknowledged.has(refund.withdrawal_id) && !unanswered.has(refund.refund_of_deposit_id)) problems.push(`refund ${refund.withdrawal_id} never acknowledged`);
  }
  return [
    {
      check: 'every acknowledged refund exists exactly once, of its deposit; one Idempotency-Key, one answer',
      observed: `${sent.length} refund requests, ${acknowledged.size} refunds acknowledged, ${answers.size} keys; ${problems.length} problems${sample(problems)}`,
      result: problems.length === 0 ? 'pass' : 'FAIL',
    },
  ];
}

/** Every over-refund refused with what is left; exactly one winner of each race for the last baht. */
export function refundRaceRows(facts: RunFacts): CheckRow[] {
  const sent = facts.operations.filter((operation) => operation.kind === 'refund.create');
  const problems: string[] = [];
  const overs = sent.filter((operation) => operation.refund?.step === 'over_refund');
  for (const operation of overs) {
    if (operation.outcome.code !== 'refund_exceeds_refundable') problems.push(`over-refund of ${operation.refund?.deposit_id}: ${operation.outcome.result} ${operation.outcome.code ?? operation.outcome.status}`);
  }
  const races = new Map<string, Operation[]>();
  for (const operation of sent.filter((candidate) => candidate.refund?.step === 'last_baht')) {
    const deposit_id = operation.refund!.deposit_id;
    races.set(deposit_id, [...(races.get(deposit_id) ?? []), operation]);
  }
  for (const [deposit_id, contenders] of races) {
    const won = contenders.filter((operation) => operation.outcome.result === 'acked').length;
    const lost = contenders.filter((operation) => operation.outcome.code === 'refund_exceeds_refundable' && (JSON.parse(operation.outcome.body_text) as { error: { details: { refundable_minor: number } } }).error.details.refundable_minor === 0).length;
    if (won !== 1 || lost !== 1) problems.push(`race for the last baht of ${deposit_id}: ${won} won, ${lost} lost with 0 left`);
  }
  const codes = new Map<string, number>();
  for (const operation of sent) {
    const name = `${operation.refund?.step} ${operation.outcome.result === 'acked' ? '201' : (operation.outcome.code ?? operation.outcome.result)}`;
    codes.set(name, (codes.get(name) ?? 0) + 1);
  }
  return [
    { check: 'refund storm: answers by step', observed: [...codes].map(([name, n]) => `${n} ${name}`).join(', ') || 'none', result: 'info' },
    {
      check: 'every over-refund refused (422 refund_exceeds_refundable); each race for the last baht has exactly one winner',
      observed: `${overs.length} over-refunds, ${races.size} races; ${problems.length} problems${sample(problems)}`,
      result: problems.length === 0 && races.size > 0 ? 'pass' : 'FAIL',
    },
  ];
}

export async function refundRows(facts: RunFacts): Promise<CheckRow[]> {
  const refunds = await refundsOfBrand(facts);
  return [...(await refundCreditRows(facts, refunds)), ...(await refundLedgerRows(facts, refunds)), ...refundAcknowledgedRows(facts, refunds), ...refundRaceRows(facts)];
}
