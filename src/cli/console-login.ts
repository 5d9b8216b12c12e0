import { parseArgs } from 'node:util';
import { scrubText } from '../platform/logger.ts';
import { CliError, type CliEnvironment, type TextSink } from './backends.ts';
import { ReviewClient, operatorConnectionFor } from './reviews-client.ts';
import { helpRows } from './help-rows.ts';
import { writeUsageError } from './usage-error.ts';

/**
 * `npm run cli -- bo login`: a one-time sign-in link to the back-office console (issue 30), for the embedded
 * default and the first administrator, who have no OpenID provider. Like `refunds`, it talks only to the running
 * service's back-office API (POST /v1/bo/console/sign-in-links) with an operator's token (`--token-file`, else
 * PG_OPERATOR_TOKEN or DATA_DIR/operator-credentials.json): the link is the service's to make, and the audit log
 * names the credential that asked for it.
 *
 * Without `--role`, the link signs in as that credential itself. With `--role reviewer|operator`, a new credential
 * of that role is issued in the brand, to the person `--staff` names or to a new person called `--name`, and the
 * link signs in as it. The link is printed on stdout (with `--json`, `{"url": …, …}`); it is single use and valid
 * for 10 minutes, and is a secret until then. Exit codes: 0 done, 1 refused or failed, 2 usage.
 */

const PROGRAM = 'npm run cli -- bo login';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

export interface ConsoleLoginCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Replaceable for tests; the global fetch by default. */
  fetch?: typeof fetch;
}

interface SignInLink {
  url: string;
  expires_at: string;
  white_label_id: string;
  credential_id: string;
  staff_id: string;
  role: string;
}

const OPTIONS = {
  brand: { placeholder: 'wl_…', description: 'the brand the session acts on (required with the platform administrator credential)', pattern: /^wl_[0-9A-Za-z]{1,64}$/ },
  role: { placeholder: 'reviewer|operator', description: 'sign in as a new credential of this role instead of your own', pattern: /^(reviewer|operator)$/ },
  name: { placeholder: 'name', description: "the new credential's holder, when --staff does not name one (1 to 200 characters)", pattern: /^.{1,200}$/u },
  staff: { placeholder: 'stf_…', description: 'the person who holds the new credential (their existing staff id)', pattern: /^stf_[0-9A-Za-z]{1,64}$/ },
  'token-file': { placeholder: 'path', description: 'a file holding your back-office token (bo_…), mode 0600', pattern: /^.+$/ },
} as const;

class UsageError extends Error {}

function help(): string {
  const rows = Object.entries(OPTIONS).map(([name, option]) => [`--${name} <${option.placeholder}>`, `${option.description} (optional)`] as const);
  return [
    `Usage: ${PROGRAM} [options]`,
    '',
    'Prints a one-time sign-in link to the back-office console: single use, valid for 10 minutes.',
    '',
    'Options:',
    ...helpRows([...rows, ['--json', 'print {"url": …, "expires_at": …, …} as JSON']]),
    '',
    'Service: PG_BASE_URL and PG_OPERATOR_TOKEN, or DATA_DIR/operator-credentials.json.',
    '',
  ].join('\n');
}

function parse(argv: readonly string[]): { help: true } | { values: Record<string, string>; json: boolean } {
  if (argv.some((word) => word === '--token' || word.startsWith('--token='))) {
    throw new UsageError('a token is never taken on the command line (shell history and process lists keep it): use --token-file <path> or PG_OPERATOR_TOKEN');
  }
  const options: Record<string, { type: 'string' | 'boolean' }> = { json: { type: 'boolean' }, help: { type: 'boolean' } };
  for (const name of Object.keys(OPTIONS)) options[name] = { type: 'string' };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  const words = parsed.positionals[0] === 'help' ? parsed.positionals.slice(1) : parsed.positionals;
  if (parsed.values.help === true || parsed.positionals[0] === 'help') return { help: true };
  const [, action, extra] = words;
  if (action !== 'login') throw new UsageError(action === undefined ? 'missing action: login' : `unknown action '${action}'`);
  if (extra !== undefined) throw new UsageError(`unexpected argument '${extra}'`);
  const values: Record<string, string> = {};
  for (const [name, option] of Object.entries(OPTIONS)) {
    const value = parsed.values[name];
    if (typeof value !== 'string') continue;
    if (!option.pattern.test(value)) throw new UsageError(`--${name} must be ${option.placeholder}`);
    values[name] = value;
  }
  if (values.role === undefined && (values.name !== undefined || values.staff !== undefined)) throw new UsageError('--name and --staff describe a new credential: give --role too');
  return { values, json: parsed.values.json === true };
}

function writeFailure(io: ConsoleLoginCliIo, error: unknown, json: boolean): void {
  const failure = error instanceof CliError ? error : new CliError('unexpected_error', error instanceof Error ? error.message : String(error));
  const message = scrubText(failure.message);
  io.stderr.write(json ? `${JSON.stringify({ error: { code: failure.code, message } })}\n` : `error: ${failure.code}: ${message}\n`);
}

/** Runs `bo login …` (argv still starts with the word `bo`) and answers the exit code. */
export async function runConsoleLoginCli(argv: readonly string[], io: ConsoleLoginCliIo): Promise<number> {
  const json = argv.includes('--json');
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const text = scrubText(error.message);
    writeUsageError(io.stderr, PROGRAM, text, json);
    return EXIT_USAGE;
  }
  if ('help' in parsed) {
    io.stdout.write(help());
    return EXIT_OK;
  }
  const { values } = parsed;
  try {
    const client = new ReviewClient(operatorConnectionFor(io.env, values['token-file'], io.stderr), io.fetch);
    const body: Record<string, unknown> = {};
    if (values.brand !== undefined) body.white_label_id = values.brand;
    if (values.role !== undefined) body.role = values.role;
    if (values.name !== undefined) body.name = values.name;
    if (values.staff !== undefined) body.staff_id = values.staff;
    const { answer } = await client.postOnce<SignInLink>('/v1/bo/console/sign-in-links', body, io.stderr, { what: 'sign-in link request', check: 'an unused link expires by itself in 10 minutes' });
    const { url, expires_at, white_label_id, credential_id, staff_id, role } = answer;
    if (parsed.json) {
      io.stdout.write(`${JSON.stringify({ url, expires_at, white_label_id, credential_id, staff_id, role })}\n`);
    } else {
      io.stdout.write(`${url}\n`);
      io.stderr.write(`Signs in once, until ${expires_at}, as ${role} ${credential_id} (person ${staff_id}) of ${white_label_id}. Keep the link to yourself.\n`);
    }
    return EXIT_OK;
  } catch (error) {
    writeFailure(io, error, parsed.json);
    return EXIT_FAILED;
  }
}
