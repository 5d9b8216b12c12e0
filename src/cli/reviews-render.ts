import type { ReviewDetail, ReviewQueueItem } from '../review/service.ts';
import type { DecisionAction } from './reviews-arguments.ts';
import type { DecisionAnswer } from './reviews-client.ts';

/**
 * What `npm run cli -- reviews` prints for people: the queue as a table, one review in detail, and a
 * decision's outcome. With --json the commands print the service's answers instead (reviews.ts).
 */

const SPOOFING_CHARACTERS = /[\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from the service as one terminal-safe line: merchants write evidence notes and references, and
 * a control character or a bidirectional override in them could rewrite what the reviewer's terminal
 * shows. JSON output needs none of this, because JSON escapes control characters itself.
 */
export function printable(value: unknown): string {
  if (value === null || value === undefined) return '-';
  // The point of this expression is to match control characters, which the lint rule forbids by default.
  // eslint-disable-next-line no-control-regex
  return String(value).replace(/[\t\n\r]+/g, ' ').replace(/[\u0000-\u001f\u007f-\u009f]/g, '?').replace(SPOOFING_CHARACTERS, '?');
}

/** Satang as baht with two decimals and thousands separators, in integer arithmetic (no float rounding). */
function formatBaht(amount_minor: number): string {
  const sign = amount_minor < 0 ? '-' : '';
  const absolute = Math.abs(amount_minor);
  const whole = Math.trunc(absolute / 100)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}${whole}.${String(absolute % 100).padStart(2, '0')}`;
}

function yesNo(value: unknown): string {
  return value === true ? 'yes' : value === false ? 'NO' : '-';
}

function renderTable(header: readonly string[], rows: readonly (readonly string[])[], rightAligned: ReadonlySet<number>): string {
  const widths = header.map((title, index) => Math.max(title.length, ...rows.map((row) => row[index]?.length ?? 0)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, index) => {
        if (index === cells.length - 1) return cell;
        const width = widths[index] ?? 0;
        return rightAligned.has(index) ? cell.padStart(width) : cell.padEnd(width);
      })
      .join('  ');
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

export function queueTable(items: readonly ReviewQueueItem[]): string {
  if (items.length === 0) return 'No orders in review.\n';
  const rows = items.map((item) => [
    printable(item.deposit_id),
    item.livemode ? 'live' : 'test',
    printable(item.opened_at),
    formatBaht(item.amount_minor),
    item.reasons.length === 0 ? '-' : item.reasons.map(printable).join(','),
    item.four_eyes_required ? 'yes' : 'no',
    item.escalated ? 'yes' : 'no',
    printable(item.estimated_resolution_bucket),
  ]);
  const header = ['DEPOSIT', 'MODE', 'OPENED_AT', 'AMOUNT_THB', 'REASONS', 'FOUR_EYES', 'ESCALATED', 'BUCKET'];
  return `${renderTable(header, rows, new Set([3]))}${items.length} ${items.length === 1 ? 'review' : 'reviews'}.\n`;
}

const VERIFICATION_FIELDS = ['amount_exact', 'within_time_window', 'sender_bank_match', 'sender_account_match', 'sender_name_match', 'receiver_match'] as const;

type Party = { bank_code: string; account_number_masked: string; name_th: string | null; name_en: string | null };

function partyText(party: Party): string {
  const names = [party.name_th, party.name_en].filter((name) => name !== null && name !== '').map(printable);
  return `bank ${printable(party.bank_code)}  account ${printable(party.account_number_masked)}  ${names.length === 0 ? '-' : names.join(' / ')}`;
}

/**
 * One slip's own checks in a line: which of the six booleans failed and the reasons it gave, or null
 * when the slip was never compared with a bank transfer. An order with several slips needs this beside
 * the order's booleans, which describe the slips together.
 */
function slipChecks(verification: Record<string, unknown> | null): string | null {
  const booleans = verification?.booleans;
  if (typeof booleans !== 'object' || booleans === null) return null;
  const values = booleans as Record<string, unknown>;
  const failed = VERIFICATION_FIELDS.filter((name) => values[name] === false);
  const reasons = Array.isArray(verification?.reasons) ? verification.reasons.map(printable) : [];
  const summary = failed.length === 0 ? 'all six passed' : `failed ${failed.join(', ')}`;
  return reasons.length === 0 ? summary : `${summary}; reasons ${reasons.join(', ')}`;
}

/** The review detail as a reviewer reads it; `saved` maps receipt ids to the files their images went to. */
export function detailText(detail: ReviewDetail, saved: ReadonlyMap<string, string>): string {
  const deposit = detail.deposit;
  const lines: string[] = [];
  const field = (name: string, value: string) => lines.push(`${name.padEnd(16)}${value}`);
  field('deposit', `${printable(detail.deposit_id)} (${detail.livemode ? 'live' : 'test'})`);
  field('merchant', printable(detail.merchant_id));
  field('status', `${printable(deposit.status)} (version ${deposit.version})`);
  field('amount', `${formatBaht(deposit.amount_minor)} THB ordered; the bank verified ${formatBaht(detail.bank_verified_amount_minor)} THB`);
  field('declared sender', `bank ${printable(deposit.sender.bank_code)}  account ${printable(deposit.sender.account_number_masked)}  ${printable(deposit.sender.account_name_th_masked)}`);
  if (deposit.settled_at !== undefined) {
    field('settled', `${printable(deposit.settled_at)} via ${printable(deposit.settled_via)}; credited ${formatBaht(deposit.credited_amount_minor ?? 0)} THB${deposit.partial ? ' (partial)' : ''}`);
  }
  if (deposit.rejection) field('rejection', `${printable(deposit.rejection.code)}: ${printable(deposit.rejection.display_en)}`);
  const review = deposit.review;
  if (review) {
    field('review opened', printable(review.opened_at));
    field('escalated', review.escalated ? 'yes' : 'no');
    field('four eyes', review.four_eyes_required ? 'yes' : 'no');
    field('estimate', printable(review.estimated_resolution_bucket));
    if (review.reasons.length === 0) field('reasons', '-');
    for (const [index, reason] of review.reasons.entries()) {
      field(index === 0 ? 'reasons' : '', `${printable(reason.code)}: ${printable(reason.display_en)} (actionable by ${printable(reason.actionable_by)})`);
    }
  }
  lines.push('', 'verification');
  if (deposit.verification) {
    for (const name of VERIFICATION_FIELDS) lines.push(`  ${name.padEnd(22)}${yesNo(deposit.verification[name])}`);
  } else {
    lines.push('  none: no slip of this order was verified with the bank');
  }

  lines.push('', `approvals       ${detail.approvals.length} of ${detail.approvals_required} required`);
  for (const approval of detail.approvals) {
    const amount = approval.verified_amount_minor === null ? '-' : `${formatBaht(approval.verified_amount_minor)} THB`;
    lines.push(`  ${printable(approval.created_at)}  ${printable(approval.reviewer_id)}  ${amount} (${printable(approval.amount_source)})`);
  }

  lines.push('', `slips           ${detail.slips.length}`);
  for (const slip of detail.slips) {
    lines.push(`  ${printable(slip.receipt_id)}  received ${printable(slip.received_at)}  ${printable(slip.shape)} ${printable(slip.media_type)}  outcome ${printable(slip.outcome)}`);
    const transfer = slip.bank_transfer;
    if (transfer) {
      lines.push(`    bank transfer  ${formatBaht(transfer.amount_minor)} THB at ${printable(transfer.occurred_at)}, reference ${printable(transfer.trans_ref)} from bank ${printable(transfer.sending_bank_code)}`);
      lines.push(`    sender         ${partyText(transfer.sender)}`);
      lines.push(`    receiver       ${partyText(transfer.receiver)}`);
    } else {
      lines.push('    bank transfer  none found');
    }
    const checks = slipChecks(slip.verification);
    if (checks !== null) lines.push(`    checks         ${checks}`);
    const file = saved.get(slip.receipt_id);
    if (file !== undefined) lines.push(`    image          saved to ${printable(file)}`);
    else if (slip.image_url === null) lines.push('    image          none (the slip was sent without one)');
  }

  lines.push('', `evidence        ${detail.evidence.length}`);
  for (const item of detail.evidence) {
    lines.push(`  ${printable(item.created_at)}  ${printable(item.kind)}  reference ${printable(item.reference)}  note ${printable(item.note)}`);
  }
  if (detail.force_complete_requests.length > 0) {
    lines.push('', `force-complete  ${detail.force_complete_requests.length}`);
    for (const item of detail.force_complete_requests) {
      lines.push(
        `  ${printable(item.created_at)}  claimed ${formatBaht(item.claimed_verified_amount_minor)} THB, bank verified ${formatBaht(item.derived_verified_amount_minor)} THB  note ${printable(item.note)}`,
      );
    }
  }

  lines.push('', `decisions       ${detail.decisions.length}`);
  for (const decision of detail.decisions) {
    const extras = [
      decision.rejection_code === null ? null : `code ${printable(decision.rejection_code)}`,
      decision.verified_amount_minor === null ? null : `${formatBaht(decision.verified_amount_minor)} THB (${printable(decision.amount_source)})`,
      decision.note === null ? null : `note ${printable(decision.note)}`,
    ].filter((part): part is string => part !== null);
    lines.push(`  ${printable(decision.created_at)}  ${printable(decision.action)} -> ${printable(decision.effect)}  by ${printable(decision.reviewer_id)}${extras.length > 0 ? `  ${extras.join('  ')}` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

export function decisionText(action: DecisionAction, answer: DecisionAnswer, retried: boolean): string {
  const deposit = answer.review.deposit;
  const replayed = retried
    ? ' (replayed: the first attempt, whose answer was lost, had recorded it; nothing was decided twice)'
    : ' (replayed: the service had already recorded this decision; nothing changed)';
  const lines = [`${action} ${printable(deposit.id)}: ${printable(answer.effect)}${answer.replayed ? replayed : ''}`];
  if (answer.effect === 'approval_recorded') {
    lines.push(`approvals ${answer.review.approvals.length} of ${answer.review.approvals_required}: another reviewer must approve before the order settles`);
  }
  lines.push(`order ${printable(deposit.id)} is ${printable(deposit.status)} (version ${deposit.version})`);
  if (deposit.status === 'settled' && deposit.credited_amount_minor !== undefined) {
    lines.push(`credited ${formatBaht(deposit.credited_amount_minor)} THB of ${formatBaht(deposit.amount_minor)} THB ordered, settled via ${printable(deposit.settled_via)}`);
  }
  if (deposit.rejection) lines.push(`rejection ${printable(deposit.rejection.code)}: ${printable(deposit.rejection.display_en)}`);
  if (answer.decision_id !== null) lines.push(`decision ${printable(answer.decision_id)}`);
  return `${lines.join('\n')}\n`;
}
