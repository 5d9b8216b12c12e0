import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { scrubText } from '../platform/logger.ts';
import { REJECTION_CODES } from '../review/catalogue.ts';
import type { ReviewDetail, ReviewQueueItem } from '../review/service.ts';
import { SLIP_MAX_BYTES } from '../slips/capability.ts';
import { CliError, loadCliConfig, networkReason, readOperatorCredentials, readServiceAnswer, type CliEnvironment, type TextSink } from './backends.ts';

/**
 * `npm run cli -- reviews <action>`: the review desk from a terminal, for reviewers. It talks only to
 * the running service's back-office API with the reviewer's own bearer token, never to the database:
 * a decision must carry the identity of the person who made it, because four eyes compares reviewers
 * and the audit log names them. The token comes from PG_REVIEWER_TOKEN or a file (`--token-file`) and
 * never from the command line, where shell history and process lists would keep it. `list` and `show`
 * also work with the operator credential (PG_OPERATOR_TOKEN or DATA_DIR/operator-credentials.json),
 * since operators may read the queue but not decide.
 *
 * Every decision is sent with a fresh Idempotency-Key; when the answer is lost on the network it is
 * sent once more with the same key, so the service replays the first decision instead of deciding
 * twice. Exit codes: 0 done, 1 the operation failed or was refused, 2 usage.
 */

const PROGRAM = 'npm run cli -- reviews';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const REQUEST_TIMEOUT_MS = 30_000;
/** The first attempt and one retry with the same Idempotency-Key; more would only hide an outage. */
const DECISION_ATTEMPTS = 2;
/** A short pause before the retry, so that a connection reset by a restarting proxy has time to clear. */
const RETRY_DELAY_MS = 500;
const PAGE_SIZE_MAX = 100;
/** `--all` stops after this many pages (5,000 reviews at the largest page), so a runaway cursor cannot loop forever. */
const MAX_PAGES = 50;
/** The shape the service accepts for a back-office token; anything else is refused before it is sent. */
const TOKEN_PATTERN = /^bo_[A-Za-z0-9_-]{16,128}$/;
/** Deposit, brand and receipt ids: checked so that a typo is a usage error and a server answer cannot name a path outside the image directory. */
const IDENTIFIER_PATTERN = /^[A-Za-z0-9_-]{1,100}$/;
/** The same rule as the queue route's `reason` filter. */
const REASON_PATTERN = /^[A-Z][A-Z_]{1,63}$/;
const IMAGE_EXTENSIONS: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

export interface ReviewCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Replaceable for tests (a lost answer, a recorded address); the global fetch by default. */
  fetch?: typeof fetch;
}

type ActionName = 'list' | 'show' | 'approve' | 'reject' | 'escalate';
type DecisionAction = 'approve' | 'reject' | 'escalate';

interface OptionSpec {
  type: 'string' | 'boolean';
  /** What the value looks like in help; absent for flags. */
  placeholder?: string;
  description: string;
  required?: boolean;
}

interface ActionSpec {
  action: ActionName;
  summary: string;
  takes_deposit: boolean;
  options: Readonly<Record<string, OptionSpec>>;
}

const brandOption: OptionSpec = { type: 'string', placeholder: 'wl_…', description: 'the brand to read (required with the platform administrator credential)' };
const noteOption = (required: boolean): OptionSpec => ({
  type: 'string',
  placeholder: 'text',
  description: 'why, in at least 20 characters; kept internal, never shown to the merchant',
  required,
});

const ACTIONS: readonly ActionSpec[] = [
  {
    action: 'list',
    summary: 'The review queue, oldest first.',
    takes_deposit: false,
    options: {
      mode: { type: 'string', placeholder: 'test|live', description: 'only test or only live orders' },
      reason: { type: 'string', placeholder: 'CODE', description: 'only orders in review for this reason, such as SENDER_NAME_MISMATCH' },
      escalated: { type: 'boolean', description: 'only escalated reviews' },
      limit: { type: 'string', placeholder: '1..100', description: 'reviews per page (20 by default, 100 with --all)' },
      all: { type: 'boolean', description: `follow the pages to the end of the queue (at most ${MAX_PAGES} pages)` },
      brand: brandOption,
    },
  },
  {
    action: 'show',
    summary: 'One order in review: status, amounts, reasons, verification, slips, approvals, evidence, decisions.',
    takes_deposit: true,
    options: {
      'save-images': { type: 'string', placeholder: 'directory', description: 'download each slip image into this directory (files <receipt_id>.<ext>, mode 0600)' },
      brand: brandOption,
    },
  },
  {
    action: 'approve',
    summary: 'Approve: settles the order, or records the first of two approvals when four eyes applies.',
    takes_deposit: true,
    options: {
      'amount-minor': { type: 'string', placeholder: 'satang', description: 'the amount you verified, when the bank verified none (the bank’s figure otherwise)' },
      note: { ...noteOption(false), description: 'an optional note; when given, at least 20 characters' },
    },
  },
  {
    action: 'reject',
    summary: 'Reject: the order ends rejected, with the chosen code’s texts for the end user.',
    takes_deposit: true,
    options: {
      code: { type: 'string', placeholder: 'CODE', description: `one of ${REJECTION_CODES.join(', ')}`, required: true },
      note: noteOption(true),
    },
  },
  {
    action: 'escalate',
    summary: 'Escalate: the order stays in review, marked escalated (its version moves).',
    takes_deposit: true,
    options: { note: noteOption(true) },
  },
];

const COMMON_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  'token-file': { type: 'string', placeholder: 'path', description: 'read the back-office token from this file instead of PG_REVIEWER_TOKEN' },
  json: { type: 'boolean', description: 'print JSON (list: one review per line); errors go to stderr as {"error":{…}}' },
  help: { type: 'boolean', description: 'show help' },
};

/** Every option of every action, so that one strict parse can find the action and refuse unknown options. */
function parserOptions(): Record<string, { type: 'string' | 'boolean'; short?: string }> {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const [name, option] of Object.entries(COMMON_OPTIONS)) options[name] = { type: option.type };
  for (const spec of ACTIONS) for (const [name, option] of Object.entries(spec.options)) options[name] = { type: option.type };
  options.help = { type: 'boolean', short: 'h' };
  return options;
}

class UsageError extends Error {
  constructor(
    message: string,
    readonly action: ActionName | null,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

// Help

function optionLabel(name: string, option: OptionSpec): string {
  return option.placeholder === undefined ? `--${name}` : `--${name} <${option.placeholder}>`;
}

function formatRows(rows: readonly (readonly [string, string])[]): string[] {
  const width = Math.max(0, ...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`);
}

function actionUsage(spec: ActionSpec): string {
  const parts = Object.entries(spec.options).map(([name, option]) => (option.required ? optionLabel(name, option) : `[${optionLabel(name, option)}]`));
  return [PROGRAM, spec.action, ...(spec.takes_deposit ? ['<deposit_id>'] : []), ...parts, '[--token-file <path>]', '[--json]'].join(' ');
}

const CREDENTIALS_HELP = [
  'Credentials: the service address is PG_BASE_URL, else base_url in DATA_DIR/operator-credentials.json.',
  'The token is your own reviewer credential: PG_REVIEWER_TOKEN, or --token-file <path> (a file holding',
  'only the token, readable by you alone). A token is never taken on the command line. list and show also',
  'accept the operator credential (PG_OPERATOR_TOKEN or the operator credentials file); the platform',
  'administrator then names the brand with --brand wl_…. Decisions need a reviewer credential.',
];

function groupHelp(): string {
  return [
    `Usage: ${PROGRAM} <action> [<deposit_id>] [options]`,
    '',
    'The review desk for reviewers, over the running service’s back-office API.',
    '',
    'Actions:',
    ...formatRows(ACTIONS.map((spec) => [spec.action, spec.summary] as const)),
    '',
    ...CREDENTIALS_HELP,
    '',
    `Run '${PROGRAM} <action> --help' for the options of one action. Exit codes: 0 done, 1 failed or refused, 2 usage.`,
    '',
  ].join('\n');
}

function actionHelp(spec: ActionSpec): string {
  const rows = [...Object.entries(spec.options), ...Object.entries(COMMON_OPTIONS)].map(
    ([name, option]) => [optionLabel(name, option), `${option.description}${option.required ? ' (required)' : ''}`] as const,
  );
  return [`Usage: ${actionUsage(spec)}`, '', spec.summary, '', 'Options:', ...formatRows(rows), '', ...CREDENTIALS_HELP, ''].join('\n');
}

// Output for people

const SPOOFING_CHARACTERS = /[\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from the service as one terminal-safe line: merchants write evidence notes and references, and
 * a control character or a bidirectional override in them could rewrite what the reviewer's terminal
 * shows. JSON output needs none of this, because JSON escapes control characters itself.
 */
function printable(value: unknown): string {
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

function queueTable(items: readonly ReviewQueueItem[]): string {
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
function detailText(detail: ReviewDetail, saved: ReadonlyMap<string, string>): string {
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

interface DecisionAnswer {
  object: 'review_decision';
  decision_id: string | null;
  effect: 'approval_recorded' | 'settled' | 'rejected' | 'escalated';
  replayed: boolean;
  review: ReviewDetail;
}

function decisionText(action: DecisionAction, answer: DecisionAnswer, retried: boolean): string {
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

// Credentials

const operatorFileSchema = z.object({ base_url: z.string().min(1).optional() });

/** The operator credentials file's base_url, read the way readOperatorCredentials reads it. */
function baseUrlFromOperatorFile(env: CliEnvironment): string | undefined {
  const filePath = path.join(path.resolve(loadCliConfig(env).data_dir), 'operator-credentials.json');
  let text: string;
  try {
    text = fs.readFileSync(filePath, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new CliError('operator_credentials_unreadable', `cannot read ${filePath} (${code ?? 'error'})`);
  }
  let parsed: ReturnType<typeof operatorFileSchema.safeParse>;
  try {
    parsed = operatorFileSchema.safeParse(JSON.parse(text));
  } catch {
    throw new CliError('operator_credentials_unreadable', `${filePath} is not valid JSON`);
  }
  if (!parsed.success) throw new CliError('operator_credentials_unreadable', `${filePath} does not hold a base_url`);
  return parsed.data.base_url;
}

/** A token file's content; its permissions are checked because a token readable by others is shared. */
function readTokenFile(filePath: string, stderr: TextSink): string {
  let text: string;
  try {
    const stat = fs.statSync(filePath);
    if (!stat.isFile()) throw new CliError('token_file_unreadable', `${filePath} is not a file`);
    // Windows has no POSIX modes to speak of; elsewhere a group- or world-readable token is worth a warning.
    if (process.platform !== 'win32' && (stat.mode & 0o077) !== 0) {
      stderr.write(`warning: ${filePath} is readable by other users; run chmod 600 on it\n`);
    }
    text = fs.readFileSync(filePath, 'utf8');
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError('token_file_unreadable', `cannot read ${filePath} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return text.trim();
}

interface Connection {
  base_url: string;
  token: string;
}

/**
 * The service address and the token to call it with. The reviewer's token comes first (the file,
 * then the environment); reads may fall back to the operator credential, decisions may not, because a
 * decision made with a shared operator credential would name no reviewer.
 */
function connectionFor(env: CliEnvironment, tokenFile: string | undefined, readOnly: boolean, stderr: TextSink): Connection {
  let token: string | null = null;
  let source = '';
  if (tokenFile !== undefined) {
    token = readTokenFile(tokenFile, stderr);
    source = tokenFile;
  } else if (env.PG_REVIEWER_TOKEN) {
    token = env.PG_REVIEWER_TOKEN.trim();
    source = 'PG_REVIEWER_TOKEN';
  }
  let connection: Connection;
  if (token !== null) {
    const baseUrl = env.PG_BASE_URL || baseUrlFromOperatorFile(env);
    if (!baseUrl) {
      throw new CliError('service_address_missing', 'no service address: set PG_BASE_URL, or start the service once to write DATA_DIR/operator-credentials.json');
    }
    // Only the source is named: the token itself never appears in an error.
    if (!TOKEN_PATTERN.test(token)) throw new CliError('token_invalid', `${source} does not hold a back-office token (bo_…)`);
    connection = { base_url: baseUrl, token };
  } else if (readOnly) {
    try {
      connection = readOperatorCredentials(loadCliConfig(env), env);
    } catch (error) {
      if (error instanceof CliError && error.code === 'operator_credentials_missing') {
        throw new CliError('reviewer_token_missing', 'no back-office token: set PG_REVIEWER_TOKEN or pass --token-file <path> (or PG_OPERATOR_TOKEN to read the queue)');
      }
      throw error;
    }
    if (!TOKEN_PATTERN.test(connection.token)) throw new CliError('token_invalid', 'the operator credential is not a back-office token (bo_…)');
  } else {
    throw new CliError('reviewer_token_missing', 'decisions need your reviewer credential: set PG_REVIEWER_TOKEN or pass --token-file <path>');
  }
  let parsed: URL;
  try {
    parsed = new URL(connection.base_url);
  } catch {
    throw new CliError('invalid_configuration', 'the service address is not a URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new CliError('invalid_configuration', 'the service address must be http or https');
  return { base_url: connection.base_url.replace(/\/+$/, ''), token: connection.token };
}

// HTTP

/** The request never got an answer (refused, reset, timed out, cut off mid-body). */
class NetworkFailure extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'NetworkFailure';
  }
}

class ReviewClient {
  private readonly fetchFunction: typeof fetch;

  constructor(
    private readonly connection: Connection,
    fetchFunction: typeof fetch | undefined,
  ) {
    this.fetchFunction = fetchFunction ?? fetch;
  }

  get base_url(): string {
    return this.connection.base_url;
  }

  /** One request; the answer's body is read here so that a connection cut mid-body counts as no answer. */
  private async exchange(url: string, init: { method: 'GET' | 'POST'; accept: string; body?: unknown; idempotency_key?: string }): Promise<{ response: Response; bytes: Buffer }> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.connection.token}`, accept: init.accept };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.idempotency_key !== undefined) headers['idempotency-key'] = init.idempotency_key;
    try {
      const response = await this.fetchFunction(url, {
        method: init.method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        // A redirect could carry the token to another address; the reviewer should fix PG_BASE_URL instead.
        redirect: 'error',
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const declared = Number(response.headers.get('content-length') ?? '0');
      if (declared > SLIP_MAX_BYTES * 2) {
        await response.body?.cancel();
        throw new CliError('unexpected_response', `the service answered ${declared} bytes, more than any review answer holds`);
      }
      return { response, bytes: Buffer.from(await response.arrayBuffer()) };
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw new NetworkFailure(networkReason(error));
    }
  }

  private unreachable(failure: NetworkFailure): CliError {
    return new CliError('service_unreachable', `could not reach the service at ${this.base_url} (${failure.reason})`);
  }

  /**
   * A JSON answer, or the CliError its error body names. The body was already read (see `exchange`),
   * so it is wrapped in a Response again for readServiceAnswer, the one reading of service answers.
   */
  private async answerOf<Body>(exchanged: { response: Response; bytes: Buffer }): Promise<Body> {
    const { response, bytes } = exchanged;
    return readServiceAnswer<Body>(new Response(bytes.length === 0 ? null : new Uint8Array(bytes), { status: response.status, headers: response.headers }));
  }

  async get<Body>(pathname: string): Promise<Body> {
    try {
      return await this.answerOf<Body>(await this.exchange(`${this.base_url}${pathname}`, { method: 'GET', accept: 'application/json' }));
    } catch (error) {
      throw error instanceof NetworkFailure ? this.unreachable(error) : error;
    }
  }

  /**
   * A decision, with one Idempotency-Key for all its attempts: when the first answer is lost, the
   * retry either decides (the first never arrived) or gets the first decision back, replayed.
   */
  async decide(deposit_id: string, action: DecisionAction, body: Record<string, unknown>, stderr: TextSink): Promise<{ answer: DecisionAnswer; retried: boolean }> {
    const idempotencyKey = crypto.randomUUID();
    const url = `${this.base_url}/v1/bo/reviews/${encodeURIComponent(deposit_id)}/${action}`;
    let lastFailure: NetworkFailure | null = null;
    for (let attempt = 1; attempt <= DECISION_ATTEMPTS; attempt += 1) {
      try {
        const answer = await this.answerOf<DecisionAnswer>(await this.exchange(url, { method: 'POST', accept: 'application/json', body, idempotency_key: idempotencyKey }));
        return { answer, retried: attempt > 1 };
      } catch (error) {
        if (!(error instanceof NetworkFailure)) throw error;
        lastFailure = error;
        if (attempt < DECISION_ATTEMPTS) {
          stderr.write(`warning: no answer from the service (${error.reason}); sending the same decision again with the same Idempotency-Key\n`);
          await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
        }
      }
    }
    throw new CliError(
      'service_unreachable',
      `could not reach the service at ${this.base_url} (${lastFailure?.reason ?? 'no answer'}); the decision may or may not have been recorded: ` +
        `check with '${PROGRAM} show ${deposit_id}' before deciding again`,
    );
  }

  /**
   * A slip image through its `image_url`. The link is the service's own (PUBLIC_BASE_URL), which may be
   * another origin than the address the reviewer configured; the token is only ever sent to the
   * configured origin, so a link elsewhere is followed by its path on the configured address.
   */
  async image(deposit_id: string, receipt_id: string, image_url: string): Promise<{ bytes: Buffer; media_type: string }> {
    let link: URL;
    try {
      link = new URL(image_url);
    } catch {
      throw new CliError('unexpected_response', `the image link of ${receipt_id} is not a URL`);
    }
    const expectedPath = `/v1/bo/reviews/${encodeURIComponent(deposit_id)}/slips/${encodeURIComponent(receipt_id)}/image`;
    if (!link.pathname.endsWith(expectedPath)) throw new CliError('unexpected_response', `the image link of ${receipt_id} does not name that slip`);
    const url = link.origin === new URL(this.base_url).origin ? link.href : `${this.base_url}${expectedPath}${link.search}`;
    let exchanged: { response: Response; bytes: Buffer };
    try {
      exchanged = await this.exchange(url, { method: 'GET', accept: 'image/*' });
    } catch (error) {
      throw error instanceof NetworkFailure ? this.unreachable(error) : error;
    }
    if (!exchanged.response.ok) await this.answerOf<never>(exchanged);
    const media_type = (exchanged.response.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    if (!media_type.startsWith('image/')) throw new CliError('unexpected_response', `the image of ${receipt_id} came back as ${media_type || 'no media type'}`);
    if (exchanged.bytes.length === 0 || exchanged.bytes.length > SLIP_MAX_BYTES) throw new CliError('unexpected_response', `the image of ${receipt_id} has an impossible size`);
    return { bytes: exchanged.bytes, media_type };
  }
}

/** Writes a file readable by its owner only, atomically, without following a link planted at the name. */
function writePrivateFile(directory: string, name: string, bytes: Buffer): string {
  const target = path.join(directory, name);
  const temporary = path.join(directory, `.${name}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.part`);
  try {
    fs.writeFileSync(temporary, bytes, { mode: 0o600, flag: 'wx' });
    fs.renameSync(temporary, target);
  } catch (error) {
    fs.rmSync(temporary, { force: true });
    throw new CliError('image_not_saved', `cannot write ${target} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return target;
}

// Actions

type Values = Readonly<Record<string, string | undefined>>;

interface Invocation {
  spec: ActionSpec;
  deposit_id: string | null;
  values: Values;
  flags: ReadonlySet<string>;
  json: boolean;
}

function queuePath(values: Values, flags: ReadonlySet<string>): { pathname: string; query: URLSearchParams } {
  const query = new URLSearchParams();
  if (values.brand !== undefined) query.set('white_label_id', values.brand);
  if (values.mode !== undefined) query.set('mode', values.mode);
  if (values.reason !== undefined) query.set('reason', values.reason);
  if (flags.has('escalated')) query.set('escalated', 'true');
  query.set('limit', values.limit ?? (flags.has('all') ? String(PAGE_SIZE_MAX) : '20'));
  return { pathname: '/v1/bo/reviews', query };
}

async function listReviews(client: ReviewClient, invocation: Invocation, io: ReviewCliIo): Promise<void> {
  const { pathname, query } = queuePath(invocation.values, invocation.flags);
  const followAll = invocation.flags.has('all');
  const items: ReviewQueueItem[] = [];
  let more = false;
  for (let page = 0; page < MAX_PAGES; page += 1) {
    const body = await client.get<{ data?: unknown; has_more?: unknown; next_cursor?: unknown }>(`${pathname}?${query.toString()}`);
    if (!Array.isArray(body.data)) throw new CliError('unexpected_response', 'the service answered a list without data');
    items.push(...(body.data as ReviewQueueItem[]));
    more = body.has_more === true && typeof body.next_cursor === 'string';
    if (!more || !followAll) break;
    query.set('cursor', body.next_cursor as string);
  }
  if (invocation.json) {
    io.stdout.write(items.map((item) => `${JSON.stringify(item)}\n`).join(''));
  } else {
    io.stdout.write(queueTable(items));
  }
  // Where the list stops short is said on stderr, so that stdout holds only the reviews.
  if (more && followAll) io.stderr.write(`notice: stopped after ${MAX_PAGES} pages; more reviews wait in the queue (narrow it with --mode or --reason)\n`);
  else if (more) io.stderr.write('notice: more reviews wait in the queue; add --all to list them all\n');
}

async function showReview(client: ReviewClient, invocation: Invocation, io: ReviewCliIo): Promise<number> {
  const deposit_id = invocation.deposit_id ?? '';
  const query = invocation.values.brand === undefined ? '' : `?white_label_id=${encodeURIComponent(invocation.values.brand)}`;
  const detail = await client.get<ReviewDetail>(`/v1/bo/reviews/${encodeURIComponent(deposit_id)}${query}`);
  if (!Array.isArray(detail.slips) || typeof detail.deposit !== 'object' || detail.deposit === null) {
    throw new CliError('unexpected_response', 'the service answered a review without its order and slips');
  }
  const saved = new Map<string, string>();
  const failures: CliError[] = [];
  const directory = invocation.values['save-images'];
  if (directory !== undefined) {
    try {
      fs.mkdirSync(directory, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new CliError('image_not_saved', `cannot create ${directory} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    for (const slip of detail.slips) {
      if (slip.image_url === null) continue;
      if (!IDENTIFIER_PATTERN.test(slip.receipt_id)) {
        failures.push(new CliError('unexpected_response', 'a slip has a receipt id that cannot name a file'));
        continue;
      }
      try {
        const image = await client.image(deposit_id, slip.receipt_id, slip.image_url);
        const extension = IMAGE_EXTENSIONS[slip.media_type ?? image.media_type] ?? IMAGE_EXTENSIONS[image.media_type] ?? 'bin';
        saved.set(slip.receipt_id, writePrivateFile(directory, `${slip.receipt_id}.${extension}`, image.bytes));
      } catch (error) {
        if (!(error instanceof CliError)) throw error;
        failures.push(error);
      }
    }
  }
  if (invocation.json) {
    const output = directory === undefined ? detail : { ...detail, saved_images: [...saved].map(([receipt_id, file]) => ({ receipt_id, file })) };
    io.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
  } else {
    io.stdout.write(detailText(detail, saved));
  }
  // The detail is printed even when an image could not be saved: the reviewer still reads the order.
  for (const failure of failures) writeFailure(io, failure, invocation.json);
  return failures.length === 0 ? EXIT_OK : EXIT_FAILED;
}

function decisionBody(invocation: Invocation): Record<string, unknown> {
  const { values } = invocation;
  switch (invocation.spec.action) {
    case 'approve':
      return {
        ...(values['amount-minor'] === undefined ? {} : { verified_amount_minor: Number(values['amount-minor']) }),
        ...(values.note === undefined ? {} : { note: values.note }),
      };
    case 'reject':
      return { rejection_code: values.code, note: values.note };
    case 'escalate':
      return { note: values.note };
    default:
      throw new Error(`${invocation.spec.action} is not a decision`);
  }
}

// Parsing and the entry point

function validate(spec: ActionSpec, values: Values): void {
  for (const [name, option] of Object.entries(spec.options)) {
    if (option.required && values[name] === undefined) throw new UsageError(`missing required option ${optionLabel(name, option)}`, spec.action);
  }
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined && value.trim().length === 0 && name !== 'note') throw new UsageError(`option --${name} needs a value`, spec.action);
  }
  if (values.mode !== undefined && values.mode !== 'test' && values.mode !== 'live') throw new UsageError('--mode must be test or live', spec.action);
  if (values.reason !== undefined && !REASON_PATTERN.test(values.reason)) throw new UsageError('--reason must be a review reason code such as SENDER_NAME_MISMATCH', spec.action);
  if (values.limit !== undefined && (!/^[0-9]{1,3}$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > PAGE_SIZE_MAX)) {
    throw new UsageError(`--limit must be a whole number from 1 to ${PAGE_SIZE_MAX}`, spec.action);
  }
  if (values.brand !== undefined && !IDENTIFIER_PATTERN.test(values.brand)) throw new UsageError('--brand must be a brand id (wl_…)', spec.action);
  const amount = values['amount-minor'];
  if (amount !== undefined && (!/^[0-9]{1,15}$/.test(amount) || Number(amount) < 1 || !Number.isSafeInteger(Number(amount)))) {
    throw new UsageError('--amount-minor must be a positive whole number of satang', spec.action);
  }
  if (values.code !== undefined && !(REJECTION_CODES as readonly string[]).includes(values.code)) {
    throw new UsageError(`--code must be one of ${REJECTION_CODES.join(', ')}`, spec.action);
  }
}

interface Failure {
  code: string;
  message: string;
  details: Record<string, unknown>;
}

function failureOf(error: unknown): Failure {
  if (error instanceof CliError) return { code: error.code, message: scrubText(error.message), details: error.details };
  return { code: 'unexpected_error', message: scrubText(error instanceof Error ? error.message : String(error)), details: {} };
}

function writeFailure(io: ReviewCliIo, error: unknown, json: boolean): void {
  const failure = failureOf(error);
  if (json) {
    const body: Record<string, unknown> = { code: failure.code, message: failure.message };
    if (Object.keys(failure.details).length > 0) body.details = failure.details;
    io.stderr.write(`${JSON.stringify({ error: body })}\n`);
    return;
  }
  const lines = [`error: ${failure.code}: ${failure.message}`];
  const fields = failure.details.fields;
  if (Array.isArray(fields)) {
    for (const field of fields.slice(0, 20)) {
      const problem = field as { path?: unknown; reason?: unknown; hint?: unknown };
      lines.push(`  ${printable(problem.path)}: ${printable(problem.reason)}${problem.hint === undefined ? '' : ` (${printable(problem.hint)})`}`);
      // The queue and the detail need a brand when the credential is the platform administrator's.
      if (problem.path === 'white_label_id' && problem.reason === 'required') lines.push('  the platform administrator credential reads one brand at a time: add --brand wl_…');
    }
  }
  if (failure.details.status !== undefined) lines.push(`  the order is ${printable(failure.details.status)}`);
  io.stderr.write(`${lines.join('\n')}\n`);
}

/** Runs `reviews <action> …` (argv still starts with the word `reviews`) and answers the exit code. */
export async function runReviewCli(argv: readonly string[], io: ReviewCliIo): Promise<number> {
  const json = argv.includes('--json');
  const usage = (message: string, action: ActionName | null) => {
    const text = scrubText(message);
    if (json) io.stderr.write(`${JSON.stringify({ error: { code: 'usage_error', message: text } })}\n`);
    else io.stderr.write(`error: ${text}\nRun '${PROGRAM}${action === null ? '' : ` ${action}`} --help' for usage.\n`);
    return EXIT_USAGE;
  };
  // A token typed on the command line is refused by name, with the safe ways to give it.
  if (argv.some((word) => word === '--token' || word.startsWith('--token='))) {
    return usage('a token is never taken on the command line (shell history and process lists keep it): set PG_REVIEWER_TOKEN or use --token-file <path>', null);
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options: parserOptions(), strict: true, allowPositionals: true });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error), null);
  }
  // `help reviews <action>` is the same as `reviews <action> --help`.
  const askedForHelp = parsed.values.help === true || parsed.positionals[0] === 'help';
  const words = parsed.positionals[0] === 'help' ? parsed.positionals.slice(1) : parsed.positionals;
  const [, actionWord, ...rest] = words;
  if (actionWord === undefined || actionWord === 'help') {
    // `reviews help` asks for the same help as `reviews --help`.
    const wantsHelp = askedForHelp || actionWord === 'help';
    (wantsHelp ? io.stdout : io.stderr).write(groupHelp());
    return wantsHelp ? EXIT_OK : EXIT_USAGE;
  }
  const spec = ACTIONS.find((candidate) => candidate.action === actionWord);
  if (!spec) return usage(`unknown action '${actionWord}'`, null);
  if (askedForHelp) {
    io.stdout.write(actionHelp(spec));
    return EXIT_OK;
  }

  const values: Record<string, string | undefined> = {};
  const flags = new Set<string>();
  for (const [name, value] of Object.entries(parsed.values)) {
    if (!(name in spec.options) && !(name in COMMON_OPTIONS)) return usage(`option --${name} does not apply to '${spec.action}'`, spec.action);
    if (typeof value === 'string') values[name] = value;
    else if (value === true) flags.add(name);
  }
  let deposit_id: string | null = null;
  if (spec.takes_deposit) {
    const [first, extra] = rest;
    if (first === undefined) return usage(`missing <deposit_id>: ${actionUsage(spec)}`, spec.action);
    if (extra !== undefined) return usage(`unexpected argument '${extra}'`, spec.action);
    if (!IDENTIFIER_PATTERN.test(first)) return usage(`'${first}' is not a deposit id (dep_…)`, spec.action);
    deposit_id = first;
  } else if (rest[0] !== undefined) {
    return usage(`unexpected argument '${rest[0]}'`, spec.action);
  }
  try {
    validate(spec, values);
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message, error.action);
    throw error;
  }

  const invocation: Invocation = { spec, deposit_id, values, flags, json };
  try {
    const readOnly = spec.action === 'list' || spec.action === 'show';
    const client = new ReviewClient(connectionFor(io.env, values['token-file'], readOnly, io.stderr), io.fetch);
    if (spec.action === 'list') {
      await listReviews(client, invocation, io);
      return EXIT_OK;
    }
    if (spec.action === 'show') return await showReview(client, invocation, io);
    const action = spec.action;
    const { answer, retried } = await client.decide(deposit_id ?? '', action, decisionBody(invocation), io.stderr);
    if (typeof answer.review !== 'object' || answer.review === null || typeof answer.review.deposit !== 'object') {
      throw new CliError('unexpected_response', 'the service answered a decision without the review');
    }
    io.stdout.write(json ? `${JSON.stringify(answer, null, 2)}\n` : decisionText(action, answer, retried));
    return EXIT_OK;
  } catch (error) {
    writeFailure(io, error, json);
    return EXIT_FAILED;
  }
}
