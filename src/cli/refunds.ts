import { parseArgs } from 'node:util';
import { scrubText } from '../platform/logger.ts';
import type { WithdrawalView } from '../withdrawals/service.ts';
import { CliError, type CliEnvironment, type TextSink } from './backends.ts';
import { ReviewClient, operatorConnectionFor } from './reviews-client.ts';
import { printable } from './reviews-render.ts';
import { helpRows } from './help-rows.ts';
import { writeUsageError } from './usage-error.ts';

/**
 * `npm run cli -- refunds <action>`: refunds to the payer from a terminal, for operators (issue 32). Like `reviews`,
 * it talks only to the running service's back-office API, with an operator's own token (`--token-file`, else
 * PG_OPERATOR_TOKEN or DATA_DIR/operator-credentials.json), never to the database: a refund spends a merchant's
 * wallet, and the audit log names the credential that asked for it. A token is never taken on the command line.
 *
 * - `list <deposit_id>`: the deposit's refunds (GET /v1/bo/deposits/{id}/refunds).
 * - `create <deposit_id> --amount-minor <satang> --reason <code> --note <text> [--refund-note <text>]`: a refund for
 *   the deposit's merchant (POST /v1/bo/deposits/{id}/refunds).
 * - `resolve-claim <claim_id> --note <text> (--amount-minor <satang> [--reason <code>] [--refund-note <text>] |
 *   --refund <wdr_…>)`: resolves a claim `refunded_in_service` with a new refund of its deposit, or an existing one.
 *
 * Amounts are satang, as every amount of the CLI (`--amount-minor`); refunds are whole baht, which the service checks.
 * Writes are sent with one Idempotency-Key and sent once more with it when the answer is lost, so a retry never
 * refunds twice. Exit codes: 0 done, 1 the operation failed or was refused, 2 usage.
 */

const PROGRAM = 'npm run cli -- refunds';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
/** Deposit, claim, withdrawal and brand ids: checked so that a typo is a usage error and never reaches a path. */
const IDENTIFIER_PATTERN = /^[A-Za-z0-9_-]{1,100}$/;
const AMOUNT_PATTERN = /^[0-9]{1,15}$/;

export interface RefundCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Replaceable for tests; the global fetch by default. */
  fetch?: typeof fetch;
}

type ActionName = 'list' | 'create' | 'resolve-claim';

interface ActionSpec {
  action: ActionName;
  subject: 'deposit_id' | 'claim_id';
  summary: string;
  options: Readonly<Record<string, { placeholder: string; description: string; required?: boolean }>>;
}

const brandOption = { placeholder: 'wl_…', description: 'the brand (required with the platform administrator credential)' };
const tokenFileOption = { placeholder: 'path', description: 'a file holding your back-office token (bo_…), mode 0600' };
const noteOption = { placeholder: 'text', description: 'why, in at least 20 characters; internal, never shown to the merchant', required: true };
const refundNoteOption = { placeholder: 'text', description: "the refund's own note, which the merchant reads (1 to 500 characters)" };
const reasonOption = { placeholder: 'code', description: 'customer_request, canceled_purchase, duplicate_payment, overpayment, dispute_lost, claim_resolution or other' };

const ACTIONS: readonly ActionSpec[] = [
  { action: 'list', subject: 'deposit_id', summary: "A deposit's refunds, oldest first.", options: { brand: brandOption, 'token-file': tokenFileOption } },
  {
    action: 'create',
    subject: 'deposit_id',
    summary: "Refund a settled deposit to its verified sender, from its merchant's wallet.",
    options: {
      'amount-minor': { placeholder: 'satang', description: 'the amount to refund, in whole baht (a multiple of 100 satang)', required: true },
      reason: { ...reasonOption, required: true },
      note: noteOption,
      'refund-note': refundNoteOption,
      brand: brandOption,
      'token-file': tokenFileOption,
    },
  },
  {
    action: 'resolve-claim',
    subject: 'claim_id',
    summary: 'Resolve a claim refunded_in_service: with a new refund of its deposit (--amount-minor) or an existing one (--refund).',
    options: {
      note: noteOption,
      'amount-minor': { placeholder: 'satang', description: 'a new refund of this amount, in whole baht' },
      reason: { ...reasonOption, description: `${reasonOption.description} (claim_resolution by default)` },
      'refund-note': refundNoteOption,
      refund: { placeholder: 'wdr_…', description: "an existing refund of the claim's deposit, instead of a new one" },
      brand: brandOption,
      'token-file': tokenFileOption,
    },
  },
];

class UsageError extends Error {}

function actionUsage(spec: ActionSpec): string {
  const options = Object.entries(spec.options).map(([name, option]) => (option.required ? `--${name} <${option.placeholder}>` : `[--${name} <${option.placeholder}>]`));
  return [PROGRAM, spec.action, `<${spec.subject}>`, ...options, '[--json]'].join(' ');
}

function groupHelp(): string {
  return [
    `Usage: ${PROGRAM} <action> <id> [options]`,
    '',
    "Refunds to the payer, for operators, through the service's back-office API with your own token.",
    '',
    'Actions:',
    ...helpRows(ACTIONS.map((spec) => [spec.action, spec.summary] as const)),
    '',
    `Run '${PROGRAM} <action> --help' for the options of one action.`,
    '',
  ].join('\n');
}

function actionHelp(spec: ActionSpec): string {
  const rows = Object.entries(spec.options).map(([name, option]) => [`--${name} <${option.placeholder}>`, `${option.description}${option.required ? '' : ' (optional)'}`] as const);
  return [`Usage: ${actionUsage(spec)}`, '', spec.summary, '', 'Options:', ...helpRows([...rows, ['--json', 'print the answer as JSON']]), ''].join('\n');
}

// Checks of the values given, before anything is sent.

function checkAmount(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!AMOUNT_PATTERN.test(text) || Number(text) < 1 || !Number.isSafeInteger(Number(text))) throw new UsageError('--amount-minor must be a positive whole number of satang');
  return Number(text);
}

function checkValues(spec: ActionSpec, values: Record<string, string>): void {
  for (const [name, option] of Object.entries(spec.options)) {
    if (option.required && values[name] === undefined) throw new UsageError(`missing required option --${name} <${option.placeholder}>`);
    if (values[name] !== undefined && values[name].trim() === '') throw new UsageError(`option --${name} needs a value`);
  }
  checkAmount(values['amount-minor']);
  if (values.brand !== undefined && !IDENTIFIER_PATTERN.test(values.brand)) throw new UsageError(`'${values.brand}' is not a brand id (wl_…)`);
  if (spec.action !== 'resolve-claim') return;
  if ((values['amount-minor'] === undefined) === (values.refund === undefined)) throw new UsageError('give either --amount-minor (a new refund) or --refund (an existing one)');
  if (values.refund !== undefined && (values.reason !== undefined || values['refund-note'] !== undefined)) throw new UsageError('--reason and --refund-note describe a new refund; not with --refund');
  if (values.refund !== undefined && !IDENTIFIER_PATTERN.test(values.refund)) throw new UsageError(`'${values.refund}' is not a refund id (wdr_…)`);
}

// Requests

function brandQuery(values: Record<string, string>): string {
  return values.brand === undefined ? '' : `?white_label_id=${encodeURIComponent(values.brand)}`;
}

function createBody(values: Record<string, string>): Record<string, unknown> {
  return {
    ...(values.brand === undefined ? {} : { white_label_id: values.brand }),
    amount_minor: checkAmount(values['amount-minor']),
    reason_code: values.reason,
    note: values.note,
    ...(values['refund-note'] === undefined ? {} : { refund_note: values['refund-note'] }),
  };
}

function resolveBody(values: Record<string, string>): Record<string, unknown> {
  const refund =
    values.refund !== undefined
      ? { refund_id: values.refund }
      : {
          refund: {
            amount_minor: checkAmount(values['amount-minor']),
            ...(values.reason === undefined ? {} : { reason_code: values.reason }),
            ...(values['refund-note'] === undefined ? {} : { note: values['refund-note'] }),
          },
        };
  return { ...(values.brand === undefined ? {} : { white_label_id: values.brand }), resolution_code: 'refunded_in_service', note: values.note, ...refund };
}

// Output for people

function baht(amount_minor: unknown): string {
  return typeof amount_minor === 'number' ? `${(amount_minor / 100).toFixed(2)} THB` : '-';
}

function refundTable(refunds: readonly WithdrawalView[]): string {
  if (refunds.length === 0) return 'No refunds.\n';
  const columns = ['ID', 'STATUS', 'AMOUNT', 'FILLED', 'REASON', 'CREATED_AT'];
  const rows = refunds.map((refund) => [refund.id, refund.status, baht(refund.amount_total_minor), baht(refund.filled_minor), refund.refund_reason_code ?? '-', refund.created_at].map(printable));
  const widths = columns.map((column, index) => Math.max(column.length, ...rows.map((row) => row[index]?.length ?? 0)));
  const line = (cells: readonly string[]) => cells.map((cell, index) => (index === cells.length - 1 ? cell : cell.padEnd(widths[index] ?? 0))).join('  ');
  return [line(columns), ...rows.map(line)].join('\n') + '\n';
}

function refundText(refund: WithdrawalView, replayed: boolean): string {
  const heading = replayed ? `refund ${printable(refund.id)} (made before with this request; nothing new)` : `refund ${printable(refund.id)} opened`;
  return [
    heading,
    `  deposit     ${printable(refund.refund_of_deposit_id)}`,
    `  status      ${printable(refund.status)}`,
    `  amount      ${baht(refund.amount_total_minor)} (fee ${baht(refund.fee_total_minor)}, reserved from the merchant's wallet ${baht(refund.total_locked_minor)})`,
    `  reason      ${printable(refund.refund_reason_code)}`,
    '',
  ].join('\n');
}

function claimText(claim: { id?: unknown; status?: unknown; resolution_code?: unknown; refund_id?: unknown; deposit_id?: unknown }): string {
  return [`claim ${printable(claim.id)} ${printable(claim.status)} (${printable(claim.resolution_code)})`, `  deposit     ${printable(claim.deposit_id)}`, `  refund      ${printable(claim.refund_id)}`, ''].join('\n');
}

// Running one action

interface Invocation {
  spec: ActionSpec;
  subject: string;
  values: Record<string, string>;
  json: boolean;
}

async function run(client: ReviewClient, invocation: Invocation, io: RefundCliIo): Promise<void> {
  const { spec, subject, values, json } = invocation;
  const path = `/v1/bo/deposits/${encodeURIComponent(subject)}/refunds`;
  if (spec.action === 'list') {
    const body = await client.get<{ data?: unknown }>(`${path}${brandQuery(values)}`);
    if (!Array.isArray(body.data)) throw new CliError('unexpected_response', 'the service answered a list without data');
    io.stdout.write(json ? `${JSON.stringify(body.data, null, 2)}\n` : refundTable(body.data as WithdrawalView[]));
    return;
  }
  if (spec.action === 'create') {
    const check = `check with '${PROGRAM} list ${subject}' before refunding again`;
    const { answer } = await client.postOnce<WithdrawalView>(path, createBody(values), io.stderr, { what: 'refund', check });
    io.stdout.write(json ? `${JSON.stringify(answer, null, 2)}\n` : refundText(answer, false));
    return;
  }
  const check = `read the claim (GET /v1/bo/claims/${subject}) before resolving it again`;
  const { answer } = await client.postOnce<Record<string, unknown>>(`/v1/bo/claims/${encodeURIComponent(subject)}/resolve`, resolveBody(values), io.stderr, { what: 'resolution', check });
  io.stdout.write(json ? `${JSON.stringify(answer, null, 2)}\n` : claimText(answer));
}

function writeFailure(io: RefundCliIo, error: unknown, json: boolean): void {
  const failure = error instanceof CliError ? error : new CliError('unexpected_error', error instanceof Error ? error.message : String(error));
  const message = scrubText(failure.message);
  if (json) {
    const body: Record<string, unknown> = { code: failure.code, message };
    if (Object.keys(failure.details).length > 0) body.details = failure.details;
    io.stderr.write(`${JSON.stringify({ error: body })}\n`);
    return;
  }
  const lines = [`error: ${failure.code}: ${message}`];
  const fields = failure.details.fields;
  if (Array.isArray(fields)) for (const field of fields.slice(0, 20)) lines.push(`  ${printable((field as { path?: unknown }).path)}: ${printable((field as { reason?: unknown }).reason)}`);
  // The refund's own figures, when the service gives them: what is left to refund, what the wallet has.
  for (const name of ['status', 'refundable_minor', 'available_minor', 'required_minor', 'reason']) {
    if (failure.details[name] !== undefined) lines.push(`  ${name}: ${printable(failure.details[name])}`);
  }
  io.stderr.write(`${lines.join('\n')}\n`);
}

function parserOptions(): Record<string, { type: 'string' | 'boolean' }> {
  const options: Record<string, { type: 'string' | 'boolean' }> = { json: { type: 'boolean' }, help: { type: 'boolean' } };
  for (const spec of ACTIONS) for (const name of Object.keys(spec.options)) options[name] = { type: 'string' };
  return options;
}

/** Reads the words after `refunds`: the action, its id and its options, or the usage problem. */
function parseInvocation(argv: readonly string[]): { help: string } | { invocation: Invocation } {
  if (argv.some((word) => word === '--token' || word.startsWith('--token='))) {
    throw new UsageError('a token is never taken on the command line (shell history and process lists keep it): use --token-file <path> or PG_OPERATOR_TOKEN');
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options: parserOptions(), strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const words = parsed.positionals[0] === 'help' ? parsed.positionals.slice(1) : parsed.positionals;
  const [, actionWord, subject, extra] = words;
  const askedForHelp = parsed.values.help === true || parsed.positionals[0] === 'help';
  if (actionWord === undefined) {
    if (askedForHelp) return { help: groupHelp() };
    throw new UsageError(`missing action: ${ACTIONS.map((spec) => spec.action).join(', ')}`);
  }
  const spec = ACTIONS.find((candidate) => candidate.action === actionWord);
  if (!spec) throw new UsageError(`unknown action '${actionWord}'`);
  if (askedForHelp) return { help: actionHelp(spec) };
  const values: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed.values)) {
    if (name === 'json') continue;
    if (!(name in spec.options)) throw new UsageError(`option --${name} does not apply to '${spec.action}'`);
    if (typeof value === 'string') values[name] = value;
  }
  if (subject === undefined) throw new UsageError(`missing <${spec.subject}>: ${actionUsage(spec)}`);
  if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
  if (!IDENTIFIER_PATTERN.test(subject)) throw new UsageError(`'${subject}' is not an id`);
  checkValues(spec, values);
  return { invocation: { spec, subject, values, json: parsed.values.json === true } };
}

/** Runs `refunds <action> …` (argv still starts with the word `refunds`) and answers the exit code. */
export async function runRefundCli(argv: readonly string[], io: RefundCliIo): Promise<number> {
  const json = argv.includes('--json');
  let parsed: ReturnType<typeof parseInvocation>;
  try {
    parsed = parseInvocation(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const text = scrubText(error.message);
    writeUsageError(io.stderr, PROGRAM, text, json);
    return EXIT_USAGE;
  }
  if ('help' in parsed) {
    io.stdout.write(parsed.help);
    return EXIT_OK;
  }
  try {
    const client = new ReviewClient(operatorConnectionFor(io.env, parsed.invocation.values['token-file'], io.stderr), io.fetch);
    await run(client, parsed.invocation, io);
    return EXIT_OK;
  } catch (error) {
    writeFailure(io, error, parsed.invocation.json);
    return EXIT_FAILED;
  }
}
