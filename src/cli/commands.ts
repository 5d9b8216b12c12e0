import { parseArgs } from 'node:util';
import { ApiError } from '../platform/errors.ts';
import { scrubText } from '../platform/logger.ts';
import { API_KEY_SCOPES, type ApiKeyScope } from '../platform/access.ts';
import {
  CliError,
  connectBackend,
  type AdminBackend,
  type BackendPreference,
  type CliEnvironment,
  type TextSink,
} from './backends.ts';
import { runWebhookCli, type WebhookCliIo } from './webhooks.ts';
import { runSandboxCli } from './sandbox.ts';
import { runClockCli, type ClockCliIo } from './clocks.ts';
import { runReviewCli, type ReviewCliIo } from './reviews.ts';
import { runProviderCli, type ProviderCliIo } from './providers.ts';
import { runListenCli, type ListenCliIo } from './listen.ts';
import { runRefundCli, type RefundCliIo } from './refunds.ts';
import { runMasterKeyCli } from './master-key.ts';
import { runConsoleLoginCli, type ConsoleLoginCliIo } from './console-login.ts';
import { helpRows } from './help-rows.ts';
import { writeUsageError as writeUsageText } from './usage-error.ts';

/**
 * The admin CLI's command table, argument parsing and output. `runCli` never throws and never prints a
 * stack trace: usage problems exit 2, failed operations exit 1 with the error code and message, and
 * secrets appear only in the answers of `keys create` and `credentials create`, which exist to show them.
 */

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

const PROGRAM = 'npm run cli --';

export interface CliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Opens the backend; tests inject one built on their own service or listening server. */
  openBackend?: (preference: BackendPreference) => Promise<AdminBackend>;
}

interface OptionSpec {
  /** What the value looks like in help, such as `wl_…` or `test|live`. */
  placeholder: string;
  description: string;
  required: boolean;
  /** The closed set of accepted values, checked before any backend is opened. */
  choices?: readonly string[];
}

type OptionValues = Readonly<Record<string, string | undefined>>;

/** What a command prints: the data (JSON mode prints it as is) and the human-readable text. */
interface CommandOutput {
  data: unknown;
  text: string;
  /** A reminder for a human, printed on stderr so that stdout holds only the answer. */
  notice?: string;
}

interface CommandSpec {
  group: string;
  action: string;
  summary: string;
  options: Readonly<Record<string, OptionSpec>>;
  run(backend: AdminBackend, values: OptionValues): Promise<CommandOutput>;
}

class UsageError extends Error {
  constructor(
    message: string,
    readonly helpHint: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Reads an option that the parser already checked as required; a missing one is a table bug. */
function required(values: OptionValues, name: string): string {
  const value = values[name];
  if (value === undefined) throw new Error(`option --${name} was not validated as required`);
  return value;
}

function parseScopes(text: string | undefined): ApiKeyScope[] | undefined {
  if (text === undefined) return undefined;
  const names = [...new Set(text.split(',').map((name) => name.trim()).filter((name) => name.length > 0))];
  if (names.length === 0) throw new UsageError('--scopes needs at least one scope', 'keys create');
  const allowed = API_KEY_SCOPES as readonly string[];
  const unknown = names.filter((name) => !allowed.includes(name));
  if (unknown.length > 0) {
    throw new UsageError(`unknown scope ${unknown.join(', ')}; the scopes are ${API_KEY_SCOPES.join(', ')}`, 'keys create');
  }
  return names as ApiKeyScope[];
}

// Rendering for humans: one object as aligned `field  value` lines, a list as a table.

function displayValue(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.map(displayValue).join(',');
  return String(value);
}

function renderRecord(record: object): string {
  const entries = Object.entries(record).filter(([field]) => field !== 'object');
  const width = Math.max(0, ...entries.map(([field]) => field.length));
  return entries.map(([field, value]) => `${field.padEnd(width)}  ${displayValue(value)}`).join('\n') + '\n';
}

function renderTable(rows: readonly object[], columns: readonly string[], emptyText: string): string {
  if (rows.length === 0) return `${emptyText}\n`;
  const cells = rows.map((row) => columns.map((column) => displayValue((row as Record<string, unknown>)[column])));
  const widths = columns.map((column, index) => Math.max(column.length, ...cells.map((line) => line[index]?.length ?? 0)));
  const formatLine = (line: readonly string[]) =>
    line.map((cell, index) => (index === line.length - 1 ? cell : cell.padEnd(widths[index] ?? 0))).join('  ');
  return [formatLine(columns.map((column) => column.toUpperCase())), ...cells.map(formatLine)].join('\n') + '\n';
}

function one(data: object): CommandOutput {
  return { data, text: renderRecord(data) };
}

function many(data: readonly object[], columns: readonly string[], emptyText: string): CommandOutput {
  return { data, text: renderTable(data, columns, emptyText) };
}

const BRAND_COLUMNS = ['id', 'name', 'status', 'created_at'];
const MERCHANT_COLUMNS = ['id', 'white_label_id', 'name', 'status', 'created_at'];
const KEY_COLUMNS = ['id', 'livemode', 'key_last4', 'scopes', 'status', 'created_at', 'revoked_at'];

const brandOption: OptionSpec = { placeholder: 'wl_…', description: 'the brand id', required: true };
const merchantOption: OptionSpec = { placeholder: 'mch_…', description: 'the merchant id', required: true };
const keyOption: OptionSpec = { placeholder: 'key_…', description: 'the API key id', required: true };
const nameOption: OptionSpec = { placeholder: 'name', description: 'a display name, 1 to 200 characters', required: true };

export const COMMANDS: readonly CommandSpec[] = [
  {
    group: 'brands',
    action: 'create',
    summary: 'Create a brand (white label).',
    options: { name: nameOption },
    run: async (backend, values) => one(await backend.createBrand({ name: required(values, 'name') })),
  },
  {
    group: 'brands',
    action: 'list',
    summary: 'List brands.',
    options: {},
    run: async (backend) => many(await backend.listBrands(), BRAND_COLUMNS, 'No brands.'),
  },
  {
    group: 'brands',
    action: 'suspend',
    summary: 'Suspend a brand: every merchant and key under it stops working.',
    options: { brand: brandOption },
    run: async (backend, values) => one(await backend.setBrandStatus(required(values, 'brand'), 'suspended')),
  },
  {
    group: 'brands',
    action: 'resume',
    summary: 'Resume a suspended brand.',
    options: { brand: brandOption },
    run: async (backend, values) => one(await backend.setBrandStatus(required(values, 'brand'), 'active')),
  },
  {
    group: 'merchants',
    action: 'create',
    summary: 'Create a merchant in a brand.',
    options: { brand: brandOption, name: nameOption },
    run: async (backend, values) =>
      one(await backend.createMerchant({ white_label_id: required(values, 'brand'), name: required(values, 'name') })),
  },
  {
    group: 'merchants',
    action: 'list',
    summary: "List a brand's merchants.",
    options: { brand: brandOption },
    run: async (backend, values) => many(await backend.listMerchants(required(values, 'brand')), MERCHANT_COLUMNS, 'No merchants.'),
  },
  {
    group: 'merchants',
    action: 'suspend',
    summary: 'Suspend a merchant: its keys answer tenant_suspended.',
    options: { merchant: merchantOption },
    run: async (backend, values) => one(await backend.setMerchantStatus(required(values, 'merchant'), 'suspended')),
  },
  {
    group: 'merchants',
    action: 'resume',
    summary: 'Resume a suspended merchant.',
    options: { merchant: merchantOption },
    run: async (backend, values) => one(await backend.setMerchantStatus(required(values, 'merchant'), 'active')),
  },
  {
    group: 'keys',
    action: 'create',
    summary: 'Create an API key; prints the key and its signing secret once.',
    options: {
      merchant: merchantOption,
      mode: { placeholder: 'test|live', description: 'the environment of the key', required: true, choices: ['test', 'live'] },
      scopes: {
        placeholder: API_KEY_SCOPES.join(','),
        description: 'comma-separated scopes (all of them by default)',
        required: false,
      },
    },
    async run(backend, values) {
      const mode = required(values, 'mode') === 'live' ? 'live' : 'test';
      const created = await backend.createApiKey({ merchant_id: required(values, 'merchant'), mode, scopes: parseScopes(values.scopes) });
      return {
        data: created,
        text: renderRecord(created),
        notice: 'Store api_key and signing_secret now: they are shown once and cannot be read again.\n',
      };
    },
  },
  {
    group: 'keys',
    action: 'list',
    summary: "List a merchant's API keys (never their secrets).",
    options: { merchant: merchantOption },
    run: async (backend, values) => many(await backend.listApiKeys(required(values, 'merchant')), KEY_COLUMNS, 'No API keys.'),
  },
  {
    group: 'keys',
    action: 'revoke',
    summary: 'Revoke an API key for good; the next request with it answers api_key_revoked.',
    options: { key: keyOption },
    run: async (backend, values) => one(await backend.setApiKeyStatus(required(values, 'key'), 'revoked')),
  },
  {
    group: 'keys',
    action: 'suspend',
    summary: 'Suspend an API key until it is resumed.',
    options: { key: keyOption },
    run: async (backend, values) => one(await backend.setApiKeyStatus(required(values, 'key'), 'suspended')),
  },
  {
    group: 'keys',
    action: 'resume',
    summary: 'Resume a suspended API key.',
    options: { key: keyOption },
    run: async (backend, values) => one(await backend.setApiKeyStatus(required(values, 'key'), 'active')),
  },
  {
    group: 'credentials',
    action: 'create',
    summary: 'Create a back-office credential for a brand; prints its token once.',
    options: {
      brand: brandOption,
      role: { placeholder: 'operator|reviewer', description: 'what the credential may do', required: true, choices: ['operator', 'reviewer'] },
      name: nameOption,
      staff: {
        placeholder: 'stf_…',
        description: 'the person who holds a credential already (staff_id); without it the credential goes to a new person',
        required: false,
      },
    },
    async run(backend, values) {
      const role = required(values, 'role') === 'reviewer' ? 'reviewer' : 'operator';
      const created = await backend.createCredential({
        white_label_id: required(values, 'brand'),
        role,
        name: required(values, 'name'),
        ...(values.staff === undefined ? {} : { staff_id: values.staff }),
      });
      return {
        data: created,
        text: renderRecord(created),
        notice: 'Store the token now: it is shown once and cannot be read again.\n',
      };
    },
  },
  {
    group: 'credentials',
    action: 'revoke',
    summary: 'Revoke a back-office credential for good.',
    options: { credential: { placeholder: 'boc_…', description: 'the credential id', required: true } },
    run: async (backend, values) => one(await backend.revokeCredential(required(values, 'credential'))),
  },
];

const GROUPS = [...new Set(COMMANDS.map((command) => command.group))];

const GLOBAL_OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  remote: { type: 'boolean' },
  direct: { type: 'boolean' },
} as const;

type ParseOptions = Record<string, { type: 'string' | 'boolean'; short?: string }>;

/** Every option of every command, so the first, tolerant pass can tell values from positionals. */
function allOptions(): ParseOptions {
  const options: ParseOptions = { ...GLOBAL_OPTIONS };
  for (const command of COMMANDS) for (const name of Object.keys(command.options)) options[name] = { type: 'string' };
  return options;
}

function commandOptions(command: CommandSpec): ParseOptions {
  const options: ParseOptions = { ...GLOBAL_OPTIONS };
  for (const name of Object.keys(command.options)) options[name] = { type: 'string' };
  return options;
}

const GLOBAL_OPTION_HELP = [
  ['--json', 'print machine-readable JSON (errors go to stderr as {"error":{code,message}})'],
  ['--direct', 'use the database directly (refused while the service holds the embedded database)'],
  ['--remote', "use the running service's back-office API"],
  ['--help', 'show help'],
] as const;

function formatOptionRows(rows: readonly (readonly [string, string])[]): string {
  return helpRows(rows).join('\n');
}

function commandsHelp(commands: readonly CommandSpec[]): string {
  return formatOptionRows(commands.map((command) => [`${command.group} ${command.action}`, command.summary]));
}

function globalHelp(): string {
  return [
    `Usage: ${PROGRAM} <group> <action> [options]`,
    '',
    'Administers brands, merchants, API keys and back-office credentials.',
    '',
    'Commands:',
    commandsHelp(COMMANDS),
    '',
    'Options of every command:',
    formatOptionRows(GLOBAL_OPTION_HELP),
    '',
    'Backend: with DATABASE_URL, or when no running service holds the PGlite directory DATA_DIR, the CLI',
    'opens the database itself. While the service holds DATA_DIR, it calls the service with the operator',
    'credential in DATA_DIR/operator-credentials.json (PG_BASE_URL and PG_OPERATOR_TOKEN override it).',
    '',
    `Run '${PROGRAM} <group> <action> --help' for the options of one command.`,
    `Webhook endpoints, deliveries and signing keys: '${PROGRAM} webhooks --help'.`,
    `A sandbox payer's transfer and its slip image: '${PROGRAM} sandbox pay --help'.`,
    `The sandbox's test clocks (create, list, show, attach, detach, advance): '${PROGRAM} clock --help'.`,
    `The review desk for reviewers (list, show, approve, reject, escalate): '${PROGRAM} reviews --help'.`,
    `A brand's live slip providers (show, set, test, remove): '${PROGRAM} providers --help'.`,
    `Refunds to the payer for operators (list, create, resolve-claim): '${PROGRAM} refunds --help'.`,
    `Rotating MASTER_KEY over stored values (status, rotate): '${PROGRAM} master-key --help'.`,
    `A one-time sign-in link to the back-office console (/bo/): '${PROGRAM} bo login --help'.`,
    `Sandbox webhooks on this machine, signed like real deliveries: '${PROGRAM} listen --forward-to http://localhost:3000/hooks'.`,
    '',
  ].join('\n');
}

function groupHelp(group: string): string {
  return [
    `Usage: ${PROGRAM} ${group} <action> [options]`,
    '',
    'Commands:',
    commandsHelp(COMMANDS.filter((command) => command.group === group)),
    '',
    `Run '${PROGRAM} ${group} <action> --help' for the options of one command.`,
    '',
  ].join('\n');
}

function commandUsage(command: CommandSpec): string {
  const parts = Object.entries(command.options).map(([name, option]) =>
    option.required ? `--${name} <${option.placeholder}>` : `[--${name} <${option.placeholder}>]`,
  );
  return [PROGRAM, command.group, command.action, ...parts, '[--json]'].join(' ');
}

function commandHelp(command: CommandSpec): string {
  const optionRows = Object.entries(command.options).map(
    ([name, option]) => [`--${name} <${option.placeholder}>`, `${option.description}${option.required ? '' : ' (optional)'}`] as const,
  );
  return [
    `Usage: ${commandUsage(command)}`,
    '',
    command.summary,
    '',
    ...(optionRows.length > 0 ? ['Options:', formatOptionRows(optionRows), ''] : []),
    'Options of every command:',
    formatOptionRows(GLOBAL_OPTION_HELP),
    '',
  ].join('\n');
}

interface Failure {
  code: string;
  message: string;
  details: Record<string, unknown>;
}

/** Turns any thrown value into code and message; unknown errors keep their message only, scrubbed. */
function failureOf(error: unknown): Failure {
  if (error instanceof ApiError || error instanceof CliError) {
    return { code: error.code, message: scrubText(error.message), details: error.details };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { code: 'unexpected_error', message: scrubText(message), details: {} };
}

function writeFailure(io: CliIo, failure: Failure, json: boolean): void {
  if (json) {
    const error: Record<string, unknown> = { code: failure.code, message: failure.message };
    if (Object.keys(failure.details).length > 0) error.details = failure.details;
    io.stderr.write(`${JSON.stringify({ error })}\n`);
    return;
  }
  const lines = [`error: ${failure.code}: ${failure.message}`];
  const fields = failure.details.fields;
  if (Array.isArray(fields)) {
    for (const field of fields.slice(0, 50)) {
      const problem = field as { path?: unknown; reason?: unknown };
      lines.push(`  ${String(problem.path)}: ${String(problem.reason)}`);
    }
  }
  io.stderr.write(`${lines.join('\n')}\n`);
}

function writeUsageError(io: CliIo, message: string, helpTarget: string, json: boolean): number {
  writeUsageText(io.stderr, helpTarget ? `${PROGRAM} ${helpTarget}` : PROGRAM, scrubText(message), json);
  return EXIT_USAGE;
}

/** A first pass that never fails: it finds the command words and the global flags among everything. */
function tolerantParse(argv: readonly string[]): { positionals: string[]; help: boolean; json: boolean } {
  try {
    const parsed = parseArgs({ args: [...argv], options: allOptions(), strict: false, allowPositionals: true });
    return { positionals: parsed.positionals, help: parsed.values.help === true, json: parsed.values.json === true };
  } catch {
    return { positionals: argv.filter((word) => !word.startsWith('-')), help: false, json: false };
  }
}

function parseCommandOptions(command: CommandSpec, argv: readonly string[]): Record<string, string | boolean | undefined> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options: commandOptions(command), strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error), `${command.group} ${command.action}`);
  }
  const extra = parsed.positionals.slice(2);
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`, `${command.group} ${command.action}`);
  return parsed.values as Record<string, string | boolean | undefined>;
}

function validateOptions(command: CommandSpec, values: Record<string, string | boolean | undefined>): OptionValues {
  const helpTarget = `${command.group} ${command.action}`;
  const result: Record<string, string | undefined> = {};
  for (const [name, option] of Object.entries(command.options)) {
    const value = values[name];
    if (typeof value !== 'string') {
      if (option.required) throw new UsageError(`missing required option --${name} <${option.placeholder}>`, helpTarget);
      continue;
    }
    if (value.trim().length === 0) throw new UsageError(`option --${name} needs a value`, helpTarget);
    if (option.choices && !option.choices.includes(value)) {
      throw new UsageError(`option --${name} must be one of ${option.choices.join(', ')}`, helpTarget);
    }
    result[name] = value;
  }
  if (values.remote === true && values.direct === true) throw new UsageError('--remote and --direct exclude each other', helpTarget);
  // Scopes are checked here too, so that a typo is a usage error before any backend is opened.
  if (command.group === 'keys' && command.action === 'create') parseScopes(result.scopes);
  return result;
}

/**
 * Runs one CLI invocation and answers its exit code. Tests call it in process with their own streams,
 * environment and, through `io.openBackend`, a backend built on their own service or server.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const first = tolerantParse(argv);
  const [groupWord, actionWord] = first.positionals[0] === 'help' ? first.positionals.slice(1) : first.positionals;
  const askedForHelp = first.help || first.positionals[0] === 'help';

  if (groupWord === 'webhooks') return runWebhookCli(argv, io as CliIo & WebhookCliIo);
  if (groupWord === 'sandbox') return runSandboxCli(argv, io);
  if (groupWord === 'clock') return runClockCli(argv, io as CliIo & ClockCliIo);
  if (groupWord === 'reviews') return runReviewCli(argv, io as CliIo & ReviewCliIo);
  if (groupWord === 'providers') return runProviderCli(argv, io as CliIo & ProviderCliIo);
  if (groupWord === 'listen') return runListenCli(argv, io as CliIo & ListenCliIo);
  if (groupWord === 'refunds') return runRefundCli(argv, io as CliIo & RefundCliIo);
  if (groupWord === 'master-key') return runMasterKeyCli(argv, io);
  if (groupWord === 'bo') return runConsoleLoginCli(argv, io as CliIo & ConsoleLoginCliIo);
  if (groupWord === undefined) {
    if (askedForHelp) {
      io.stdout.write(globalHelp());
      return EXIT_OK;
    }
    io.stderr.write(globalHelp());
    return EXIT_USAGE;
  }
  if (!GROUPS.includes(groupWord)) return writeUsageError(io, `unknown command '${groupWord}'`, '', first.json);
  if (actionWord === undefined) {
    if (askedForHelp) {
      io.stdout.write(groupHelp(groupWord));
      return EXIT_OK;
    }
    io.stderr.write(groupHelp(groupWord));
    return EXIT_USAGE;
  }
  const command = COMMANDS.find((candidate) => candidate.group === groupWord && candidate.action === actionWord);
  if (!command) return writeUsageError(io, `unknown command '${groupWord} ${actionWord}'`, groupWord, first.json);
  if (askedForHelp) {
    io.stdout.write(commandHelp(command));
    return EXIT_OK;
  }

  let values: OptionValues;
  let parsedFlags: Record<string, string | boolean | undefined>;
  try {
    parsedFlags = parseCommandOptions(command, argv);
    values = validateOptions(command, parsedFlags);
  } catch (error) {
    if (error instanceof UsageError) return writeUsageError(io, error.message, error.helpHint, first.json);
    throw error;
  }
  const json = parsedFlags.json === true;
  const preference: BackendPreference = parsedFlags.remote === true ? 'remote' : parsedFlags.direct === true ? 'direct' : 'auto';

  let backend: AdminBackend | null = null;
  try {
    backend = io.openBackend ? await io.openBackend(preference) : await connectBackend(io.env, preference, io.stderr);
    const output = await command.run(backend, values);
    if (json) {
      io.stdout.write(`${JSON.stringify(output.data, null, 2)}\n`);
    } else {
      io.stdout.write(output.text);
      if (output.notice) io.stderr.write(output.notice);
    }
    return EXIT_OK;
  } catch (error) {
    if (error instanceof UsageError) return writeUsageError(io, error.message, error.helpHint, json);
    writeFailure(io, failureOf(error), json);
    return EXIT_FAILED;
  } finally {
    if (backend) {
      try {
        await backend.close();
      } catch (error) {
        // The answer is already printed; a failed close is reported but does not change the outcome.
        io.stderr.write(`warning: closing the backend failed: ${failureOf(error).message}\n`);
      }
    }
  }
}
