import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { scrubText } from '../platform/logger.ts';
import type { ConnectionTestView, ProviderSettingsView, ProviderSlotView } from '../slip-providers/service.ts';
import { CliError, loadCliConfig, networkReason, readOperatorCredentials, readServiceAnswer, type CliEnvironment, type TextSink } from './backends.ts';
import { helpRows } from './help-rows.ts';

/**
 * `npm run cli -- providers show|set|test|remove`: a brand's live slip-verification providers from a terminal,
 * through the running service's back-office API (`/v1/bo/brands/{brand}/slip-providers`) with the operator
 * credential (PG_BASE_URL and PG_OPERATOR_TOKEN, else DATA_DIR/operator-credentials.json), so that every change
 * is made, audited and sealed by the service as it is from the back office. The credentials of `set` come from
 * a file (`--credentials-file`, JSON) or from PG_PROVIDER_CREDENTIALS, never from the command line, where shell
 * history and process lists would keep them; they are sent once and never printed. Exit codes: 0 done, 1 the
 * operation failed or was refused, 2 usage.
 */

const PROGRAM = 'npm run cli -- providers';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const REQUEST_TIMEOUT_MS = 30_000;
/** A credentials file is a few hundred bytes; anything much larger is the wrong file. */
const MAX_CREDENTIALS_FILE_BYTES = 16 * 1024;
const BRAND_PATTERN = /^wl_[0-9A-Za-z]{1,60}$/;
const PROVIDERS = ['slipok', 'easyslip', 'rdcw'] as const;
const SLOTS = ['primary', 'fallback'] as const;

type Action = 'show' | 'set' | 'test' | 'remove';
const ACTIONS: Record<Action, { usage: string; summary: string }> = {
  show: { usage: 'show --brand wl_…', summary: 'Shows the brand’s primary and fallback providers (a hint of the credentials, never them).' },
  set: {
    usage: 'set --brand wl_… --slot primary|fallback --provider slipok|easyslip|rdcw [--credentials-file PATH]',
    summary: 'Sets or rotates a slot’s provider and credentials (JSON from the file or PG_PROVIDER_CREDENTIALS).',
  },
  test: { usage: 'test --brand wl_… --slot primary|fallback', summary: 'Tests the slot’s connection and shows the remaining quota or the refusal.' },
  remove: { usage: 'remove --brand wl_… --slot primary|fallback', summary: 'Removes the slot (the fallback before the primary).' },
};

const OPTIONS = {
  brand: { type: 'string' },
  slot: { type: 'string' },
  provider: { type: 'string' },
  'credentials-file': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

export interface ProviderCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Replaceable for tests; the global fetch by default. */
  fetch?: typeof fetch;
}

class UsageError extends Error {}

function help(): string {
  return [
    `Usage: ${PROGRAM} <action> [options] [--json]`,
    '',
    'A brand’s live slip-verification providers (SlipOK, EasySlip, RDCW): primary, optional fallback.',
    '',
    'Actions:',
    ...helpRows(Object.values(ACTIONS).map((action) => [action.usage, action.summary] as const)),
    '',
    'Credentials JSON: slipok {"branch_id","key"}, easyslip {"key"}, rdcw {"client_id","client_secret"}.',
    'Service: PG_BASE_URL and PG_OPERATOR_TOKEN, or DATA_DIR/operator-credentials.json.',
    '',
  ].join('\n');
}

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true; strict: true }>>['values'];

function brandOf(values: Values): string {
  const brand = values.brand;
  if (brand === undefined || !BRAND_PATTERN.test(brand)) throw new UsageError('--brand takes a brand id (wl_…)');
  return brand;
}

function slotOf(values: Values): (typeof SLOTS)[number] {
  const slot = SLOTS.find((candidate) => candidate === values.slot);
  if (slot === undefined) throw new UsageError('--slot takes primary or fallback');
  return slot;
}

function providerOf(values: Values): (typeof PROVIDERS)[number] {
  const provider = PROVIDERS.find((candidate) => candidate === values.provider);
  if (provider === undefined) throw new UsageError('--provider takes slipok, easyslip or rdcw');
  return provider;
}

/** The credentials JSON, from the file or the environment; the messages name the source, never the content. */
function credentialsOf(values: Values, env: CliEnvironment): unknown {
  const file = values['credentials-file'];
  let text: string;
  let source: string;
  if (file !== undefined) {
    source = file;
    try {
      if (fs.statSync(file).size > MAX_CREDENTIALS_FILE_BYTES) throw new CliError('credentials_unreadable', `${file} is larger than a credentials file`);
      text = fs.readFileSync(file, 'utf8');
    } catch (error) {
      if (error instanceof CliError) throw error;
      throw new CliError('credentials_unreadable', `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  } else if (env.PG_PROVIDER_CREDENTIALS) {
    source = 'PG_PROVIDER_CREDENTIALS';
    text = env.PG_PROVIDER_CREDENTIALS;
  } else {
    throw new UsageError('set needs the credentials: --credentials-file PATH or PG_PROVIDER_CREDENTIALS (JSON)');
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new CliError('credentials_unreadable', `${source} does not hold JSON`);
  }
}

/** One back-office request with the operator credential; redirects are refused, so the token goes nowhere else. */
async function call<Body>(io: ProviderCliIo, method: 'GET' | 'POST', pathname: string, body?: unknown): Promise<Body> {
  const connection = readOperatorCredentials(loadCliConfig(io.env), io.env);
  const base_url = connection.base_url.replace(/\/+$/, '');
  const headers: Record<string, string> = { authorization: `Bearer ${connection.token}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await (io.fetch ?? fetch)(`${base_url}${pathname}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      redirect: 'error',
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    throw new CliError('service_unreachable', `could not reach the service at ${base_url} (${networkReason(error)})`);
  }
  return readServiceAnswer<Body>(response);
}

function slotLine(name: string, slot: ProviderSlotView | null): string {
  if (slot === null) return `${name.padEnd(9)} none`;
  return `${name.padEnd(9)} ${slot.provider.padEnd(9)} credentials ${slot.credential_hint} set ${slot.credentials_set_at}`;
}

function settingsText(view: ProviderSettingsView): string {
  const lines = [`brand     ${view.white_label_id} (live)`, slotLine('primary', view.primary), slotLine('fallback', view.fallback)];
  if (view.primary === null) lines.push('(no provider: live slips use the deployment’s generic verifier, if one is configured)');
  return `${lines.join('\n')}\n`;
}

function testText(view: ConnectionTestView): string {
  if (!view.ok) return `${view.slot} ${view.provider}: refused (${view.failure_reason ?? 'unknown'})\n`;
  return `${view.slot} ${view.provider}: ok, ${view.remaining_quota === null ? 'unlimited quota' : `${view.remaining_quota} verifications left`}\n`;
}

async function run(action: Action, values: Values, io: ProviderCliIo): Promise<number> {
  const brand = brandOf(values);
  const base = `/v1/bo/brands/${encodeURIComponent(brand)}/slip-providers`;
  let answer: ProviderSettingsView | ConnectionTestView;
  if (action === 'show') answer = await call<ProviderSettingsView>(io, 'GET', base);
  else if (action === 'set') {
    const slot = slotOf(values);
    const body = { provider: providerOf(values), credentials: credentialsOf(values, io.env) };
    answer = await call<ProviderSettingsView>(io, 'POST', `${base}/${slot}`, body);
  } else answer = await call<ProviderSettingsView | ConnectionTestView>(io, 'POST', `${base}/${slotOf(values)}/${action}`);
  if (values.json) io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
  else io.stdout.write(answer.object === 'slip_provider_connection_test' ? testText(answer) : settingsText(answer));
  return answer.object === 'slip_provider_connection_test' && !answer.ok ? EXIT_FAILED : EXIT_OK;
}

export async function runProviderCli(argv: readonly string[], io: ProviderCliIo): Promise<number> {
  let parsed: { values: Values; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    io.stderr.write(`error: usage: ${scrubText(error instanceof Error ? error.message : String(error))}\n${help()}`);
    return EXIT_USAGE;
  }
  const [, actionWord, ...rest] = parsed.positionals;
  if (parsed.values.help || actionWord === undefined) {
    (parsed.values.help ? io.stdout : io.stderr).write(help());
    return parsed.values.help ? EXIT_OK : EXIT_USAGE;
  }
  const action = (Object.keys(ACTIONS) as Action[]).find((candidate) => candidate === actionWord);
  if (action === undefined || rest.length > 0) {
    io.stderr.write(`error: usage: unknown action or extra argument\n${help()}`);
    return EXIT_USAGE;
  }
  try {
    return await run(action, parsed.values, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`error: usage: ${error.message}\n`);
      return EXIT_USAGE;
    }
    if (error instanceof CliError) {
      io.stderr.write(`error: ${error.code}: ${scrubText(error.message)}\n`);
      return EXIT_FAILED;
    }
    throw error;
  }
}
