import { parseArgs } from 'node:util';
import { openConfiguredDatabase, resolveMasterKeyring } from '../app.ts';
import { parseOrThrow } from '../http/validation.ts';
import { SystemClock } from '../platform/clock.ts';
import { SecretBox, type MasterKeyring } from '../platform/crypto.ts';
import { ApiError } from '../platform/errors.ts';
import { DataDirectoryLocked } from '../platform/db.ts';
import { createLogger, scrubText } from '../platform/logger.ts';
import { HOUR_MS, parseTimestamp } from '../platform/time.ts';
import { EventsService } from '../events/service.ts';
import { TenancyService } from '../tenancy/service.ts';
import type { Actor } from '../platform/access.ts';
import { createWebhooks, loadWebhookSettings, type Webhooks } from '../webhooks/index.ts';
import { createEndpointBody, endpointCreationOf, endpointUpdateOf, replayBody, updateEndpointBody } from '../webhooks/routes.ts';
import type { DeliveryView, EndpointView, ReplayResult } from '../webhooks/service.ts';
import type { RotationResult, SigningKeyRecord } from '../webhooks/signing-keys.ts';
import { chooseBackend, CliError, cliActor, loadCliConfig, readOperatorCredentials, readServiceAnswer, type BackendPreference, type CliEnvironment, type TextSink } from './backends.ts';
import { writeUsageError } from './usage-error.ts';

/**
 * `npm run cli -- webhooks <action>`: webhook endpoints, their deliveries, resend and replay, and the
 * signing keys (list, rotate). Like the tenancy commands it works on the database directly, or
 * through the running service's back-office API when the service holds the embedded database, and
 * both ways print the same views. Exit codes: 0 done, 1 the operation failed, 2 usage.
 */

const PROGRAM = 'npm run cli -- webhooks';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

export interface WebhookBackend {
  readonly kind: 'direct' | 'remote';
  createEndpoint(body: Record<string, unknown>): Promise<EndpointView>;
  listEndpoints(filter: { merchant_id?: string; white_label_id?: string; mode?: string }): Promise<EndpointView[]>;
  getEndpoint(endpoint_id: string): Promise<EndpointView>;
  updateEndpoint(endpoint_id: string, body: Record<string, unknown>): Promise<EndpointView>;
  deleteEndpoint(endpoint_id: string): Promise<{ object: string; id: string; deleted: boolean }>;
  listDeliveries(endpoint_id: string, status?: string): Promise<DeliveryView[]>;
  getDelivery(endpoint_id: string, delivery_id: string): Promise<DeliveryView>;
  resend(endpoint_id: string, delivery_id: string): Promise<DeliveryView>;
  replay(endpoint_id: string, body: Record<string, unknown>): Promise<ReplayResult>;
  signingKeys(): Promise<SigningKeyRecord[]>;
  rotateSigningKey(overlap_hours?: number): Promise<RotationResult>;
  close(): Promise<void>;
}

export interface WebhookCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Tests inject a backend built on their own service or server. */
  openWebhookBackend?: (preference: BackendPreference) => Promise<WebhookBackend>;
}

const PAGE = 100;

/**
 * Calls the webhooks service in this process with platform scope, validating input with the routes'
 * own schemas so that both backends refuse the same input the same way.
 */
export function createDirectWebhookBackend(options: { webhooks: Webhooks; tenancy: TenancyService; actor?: Actor; close?: () => Promise<void> }): WebhookBackend {
  const { webhooks, tenancy } = options;
  const actor = options.actor ?? cliActor();
  const scope = null;
  return {
    kind: 'direct',
    async createEndpoint(input) {
      return webhooks.service.createEndpoint(actor, scope, endpointCreationOf(parseOrThrow(createEndpointBody, input)));
    },
    async listEndpoints(filter) {
      let white_label_id = filter.white_label_id;
      if (filter.merchant_id) {
        const merchant = await tenancy.getMerchant(filter.merchant_id, scope);
        if (!merchant) throw new ApiError('resource_not_found', { details: { field: 'merchant_id' } });
        white_label_id = merchant.white_label_id;
      }
      if (!white_label_id) throw new ApiError('validation_error', { details: { fields: [{ path: 'white_label_id', reason: 'required' }] } });
      const all: EndpointView[] = [];
      let starting_after: string | null = null;
      for (;;) {
        const page = await webhooks.service.listEndpoints({
          white_label_id,
          merchant_id: filter.merchant_id ?? null,
          livemode: filter.mode === undefined ? null : filter.mode === 'live',
          starting_after,
          limit: PAGE,
        });
        all.push(...page.data);
        if (!page.has_more) return all;
        starting_after = page.data.at(-1)?.id ?? null;
      }
    },
    getEndpoint: (endpoint_id) => webhooks.service.getEndpoint(scope, endpoint_id),
    async updateEndpoint(endpoint_id, input) {
      return webhooks.service.updateEndpoint(actor, scope, endpoint_id, endpointUpdateOf(parseOrThrow(updateEndpointBody, input)));
    },
    deleteEndpoint: (endpoint_id) => webhooks.service.deleteEndpoint(actor, scope, endpoint_id),
    async listDeliveries(endpoint_id, status) {
      const page = await webhooks.service.listDeliveries(scope, endpoint_id, {
        status: (status as DeliveryView['status'] | undefined) ?? null,
        event_id: null,
        starting_after: null,
        limit: PAGE,
      });
      return page.data;
    },
    getDelivery: (endpoint_id, delivery_id) => webhooks.service.getDelivery(scope, endpoint_id, delivery_id),
    resend: (endpoint_id, delivery_id) => webhooks.service.resendDelivery(actor, scope, endpoint_id, delivery_id),
    async replay(endpoint_id, input) {
      const body = parseOrThrow(replayBody, input);
      return webhooks.service.replay(actor, scope, endpoint_id, {
        event_types: body.event_types,
        created_after: body.created_after === undefined ? undefined : (parseTimestamp(body.created_after) ?? undefined),
        created_before: body.created_before === undefined ? undefined : (parseTimestamp(body.created_before) ?? undefined),
        only_failed: body.only_failed,
      });
    },
    signingKeys: () => webhooks.signingKeys.listPublished(),
    rotateSigningKey: (overlap_hours) => webhooks.signingKeys.rotate(actor, overlap_hours === undefined ? {} : { overlap_ms: overlap_hours * HOUR_MS }),
    close: options.close ?? (async () => {}),
  };
}

/** Calls the back-office routes with a bearer token; ids are path-encoded. */
export function createRemoteWebhookBackend(options: { base_url: string; token: string; fetch?: typeof fetch; timeout_ms?: number }): WebhookBackend {
  const baseUrl = options.base_url.replace(/\/+$/, '');
  const fetchFunction = options.fetch ?? fetch;
  const segment = (value: string) => encodeURIComponent(value);

  async function call<Body>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', pathname: string, body?: unknown): Promise<Body> {
    const headers: Record<string, string> = { authorization: `Bearer ${options.token}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Response;
    try {
      response = await fetchFunction(`${baseUrl}${pathname}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        // A redirect could carry the token elsewhere; the operator should fix PG_BASE_URL instead.
        redirect: 'error',
        signal: AbortSignal.timeout(options.timeout_ms ?? 30_000),
      });
    } catch {
      throw new CliError('service_unreachable', `could not reach the service at ${baseUrl}`);
    }
    return readServiceAnswer<Body>(response);
  }

  async function listAll<Item extends { id: string }>(pathname: string, query: URLSearchParams): Promise<Item[]> {
    const all: Item[] = [];
    for (;;) {
      const page = await call<{ data: Item[]; has_more: boolean }>('GET', `${pathname}?${query.toString()}`);
      all.push(...page.data);
      const last = page.data.at(-1);
      if (!page.has_more || !last) return all;
      query.set('starting_after', last.id);
    }
  }

  return {
    kind: 'remote',
    createEndpoint: (body) => call('POST', '/v1/bo/webhooks', body),
    listEndpoints(filter) {
      const query = new URLSearchParams();
      if (filter.merchant_id) query.set('merchant_id', filter.merchant_id);
      if (filter.white_label_id) query.set('white_label_id', filter.white_label_id);
      if (filter.mode) query.set('mode', filter.mode);
      return listAll('/v1/bo/webhooks', query);
    },
    getEndpoint: (endpoint_id) => call('GET', `/v1/bo/webhooks/${segment(endpoint_id)}`),
    updateEndpoint: (endpoint_id, body) => call('PATCH', `/v1/bo/webhooks/${segment(endpoint_id)}`, body),
    deleteEndpoint: (endpoint_id) => call('DELETE', `/v1/bo/webhooks/${segment(endpoint_id)}`),
    async listDeliveries(endpoint_id, status) {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (status) query.set('status', status);
      return (await call<{ data: DeliveryView[] }>('GET', `/v1/bo/webhooks/${segment(endpoint_id)}/deliveries?${query.toString()}`)).data;
    },
    getDelivery: (endpoint_id, delivery_id) => call('GET', `/v1/bo/webhooks/${segment(endpoint_id)}/deliveries/${segment(delivery_id)}`),
    resend: (endpoint_id, delivery_id) => call('POST', `/v1/bo/webhooks/${segment(endpoint_id)}/deliveries/${segment(delivery_id)}/resend`),
    replay: (endpoint_id, body) => call('POST', `/v1/bo/webhooks/${segment(endpoint_id)}/replay`, body),
    async signingKeys() {
      return (await call<{ keys: SigningKeyRecord[] }>('GET', '/v1/webhooks/signing-keys')).keys;
    },
    rotateSigningKey: (overlap_hours) => call('POST', '/v1/bo/webhook-signing-keys/rotate', overlap_hours === undefined ? {} : { overlap_hours }),
    close: async () => {},
  };
}

async function openDirect(env: CliEnvironment, stderr: TextSink): Promise<WebhookBackend> {
  const config = loadCliConfig(env);
  const logger = createLogger('error', { write: (line: string) => void stderr.write(line) });
  let keyring: MasterKeyring;
  try {
    keyring = resolveMasterKeyring(config, logger);
  } catch (error) {
    throw new CliError('invalid_configuration', scrubText(error instanceof Error ? error.message : String(error)));
  }
  try {
    loadWebhookSettings(env);
  } catch (error) {
    throw new CliError('invalid_configuration', scrubText(error instanceof Error ? error.message : String(error)));
  }
  const database = await openConfiguredDatabase(config, logger).catch((error: unknown) => {
    if (error instanceof DataDirectoryLocked) throw error;
    throw new CliError('database_unavailable', scrubText(error instanceof Error ? error.message : String(error)));
  });
  const clock = new SystemClock();
  const secretBox = SecretBox.fromKeyring(keyring);
  const tenancy = new TenancyService(database, clock, secretBox);
  const webhooks = createWebhooks({ database, clock, logger, secretBox, events: new EventsService(clock, secretBox), tenancy }, { environment: env });
  return createDirectWebhookBackend({ webhooks, tenancy, close: () => database.close() });
}

/** The same selection as the tenancy commands: direct when possible, else the service's API. */
async function connectWebhookBackend(env: CliEnvironment, preference: BackendPreference, stderr: TextSink): Promise<WebhookBackend> {
  const config = loadCliConfig(env);
  if (chooseBackend(config, preference) === 'direct') {
    try {
      return await openDirect(env, stderr);
    } catch (error) {
      if (!(error instanceof DataDirectoryLocked)) throw error;
      if (preference === 'direct') throw new CliError('data_directory_locked', scrubText(error.message));
    }
  }
  return createRemoteWebhookBackend(readOperatorCredentials(config, env));
}

// Commands

type Values = Readonly<Record<string, string | undefined>>;

interface Command {
  action: string;
  summary: string;
  /** Option name → [placeholder, required]. */
  options: Readonly<Record<string, readonly [string, boolean]>>;
  flags?: readonly string[];
  run(backend: WebhookBackend, values: Values, flags: ReadonlySet<string>): Promise<{ data: unknown; columns?: readonly string[] }>;
}

class UsageError extends Error {}

function need(values: Values, name: string): string {
  const value = values[name];
  if (value === undefined) throw new UsageError(`missing required option --${name}`);
  return value;
}

function list(text: string | undefined): string[] | null | undefined {
  if (text === undefined) return undefined;
  if (text === 'all') return null;
  const items = text.split(',').map((item) => item.trim()).filter((item) => item.length > 0);
  if (items.length === 0) throw new UsageError('--event-types needs at least one type, or "all"');
  return items;
}

function choice(values: Values, name: string, choices: readonly string[]): string | undefined {
  const value = values[name];
  if (value !== undefined && !choices.includes(value)) throw new UsageError(`option --${name} must be one of ${choices.join(', ')}`);
  return value;
}

const ENDPOINT_COLUMNS = ['id', 'merchant_id', 'livemode', 'status', 'url', 'event_types'];
const DELIVERY_COLUMNS = ['id', 'event_type', 'status', 'round', 'round_attempts', 'last_http_status', 'last_error', 'next_attempt_at'];
const KEY_COLUMNS = ['kid', 'status', 'not_before', 'not_after'];

const COMMANDS: readonly Command[] = [
  {
    action: 'add',
    summary: "Register a merchant's webhook endpoint (the brand's deposit_url).",
    options: { merchant: ['mch_…', true], url: ['https://…', true], mode: ['test|live', false], 'event-types': ['a.b,c.d', false], description: ['text', false] },
    flags: ['disabled'],
    async run(backend, values, flags) {
      const body: Record<string, unknown> = { merchant_id: need(values, 'merchant'), mode: choice(values, 'mode', ['test', 'live']) ?? 'test', url: need(values, 'url') };
      const types = list(values['event-types']);
      if (types !== undefined) body.event_types = types;
      if (values.description !== undefined) body.description = values.description;
      if (flags.has('disabled')) body.enabled = false;
      return { data: await backend.createEndpoint(body) };
    },
  },
  {
    action: 'list',
    summary: "List a merchant's (or a brand's) endpoints.",
    options: { merchant: ['mch_…', false], brand: ['wl_…', false], mode: ['test|live', false] },
    async run(backend, values) {
      if (!values.merchant && !values.brand) throw new UsageError('give --merchant or --brand');
      const filter: { merchant_id?: string; white_label_id?: string; mode?: string } = {};
      if (values.merchant) filter.merchant_id = values.merchant;
      if (values.brand) filter.white_label_id = values.brand;
      const mode = choice(values, 'mode', ['test', 'live']);
      if (mode) filter.mode = mode;
      return { data: await backend.listEndpoints(filter), columns: ENDPOINT_COLUMNS };
    },
  },
  {
    action: 'get',
    summary: 'Show one endpoint.',
    options: { endpoint: ['we_…', true] },
    run: async (backend, values) => ({ data: await backend.getEndpoint(need(values, 'endpoint')) }),
  },
  {
    action: 'update',
    summary: 'Change an endpoint: URL, enabled, event types ("all" for every type), description.',
    options: { endpoint: ['we_…', true], url: ['https://…', false], enabled: ['true|false', false], 'event-types': ['a.b,c.d|all', false], description: ['text', false] },
    async run(backend, values) {
      const body: Record<string, unknown> = {};
      if (values.url !== undefined) body.url = values.url;
      const enabled = choice(values, 'enabled', ['true', 'false']);
      if (enabled !== undefined) body.enabled = enabled === 'true';
      const types = list(values['event-types']);
      if (types !== undefined) body.event_types = types;
      if (values.description !== undefined) body.description = values.description;
      if (Object.keys(body).length === 0) throw new UsageError('nothing to update: give --url, --enabled, --event-types or --description');
      return { data: await backend.updateEndpoint(need(values, 'endpoint'), body) };
    },
  },
  {
    action: 'delete',
    summary: 'Delete an endpoint (its delivery history is kept).',
    options: { endpoint: ['we_…', true] },
    run: async (backend, values) => ({ data: await backend.deleteEndpoint(need(values, 'endpoint')) }),
  },
  {
    action: 'deliveries',
    summary: "List an endpoint's latest deliveries.",
    options: { endpoint: ['we_…', true], status: ['pending|succeeded|failed', false] },
    run: async (backend, values) => ({
      data: await backend.listDeliveries(need(values, 'endpoint'), choice(values, 'status', ['pending', 'succeeded', 'failed'])),
      columns: DELIVERY_COLUMNS,
    }),
  },
  {
    action: 'delivery',
    summary: 'Show one delivery with every attempt.',
    options: { endpoint: ['we_…', true], delivery: ['whd_…', true] },
    run: async (backend, values) => ({ data: await backend.getDelivery(need(values, 'endpoint'), need(values, 'delivery')) }),
  },
  {
    action: 'resend',
    summary: 'Send a delivery again: same event, same bytes, X-PG-Resend: true.',
    options: { endpoint: ['we_…', true], delivery: ['whd_…', true] },
    run: async (backend, values) => ({ data: await backend.resend(need(values, 'endpoint'), need(values, 'delivery')) }),
  },
  {
    action: 'replay',
    summary: 'Replay failed deliveries (last 72 hours by default); --all sends succeeded ones and missing events too.',
    options: { endpoint: ['we_…', true], 'event-types': ['a.b,c.d', false], 'created-after': ['timestamp', false], 'created-before': ['timestamp', false] },
    flags: ['all'],
    async run(backend, values, flags) {
      const body: Record<string, unknown> = { only_failed: !flags.has('all') };
      const types = list(values['event-types']);
      if (types) body.event_types = types;
      if (values['created-after'] !== undefined) body.created_after = values['created-after'];
      if (values['created-before'] !== undefined) body.created_before = values['created-before'];
      return { data: await backend.replay(need(values, 'endpoint'), body) };
    },
  },
  {
    action: 'signing-keys',
    summary: 'List the published signing keys.',
    options: {},
    run: async (backend) => ({ data: await backend.signingKeys(), columns: KEY_COLUMNS }),
  },
  {
    action: 'rotate-key',
    summary: 'Rotate the live signing key: published now, announced to live feeds, signing from 30 seconds on.',
    options: { 'overlap-hours': ['1..720', false] },
    async run(backend, values) {
      const text = values['overlap-hours'];
      if (text !== undefined && (!/^[0-9]{1,3}$/.test(text) || Number(text) < 1 || Number(text) > 720)) {
        throw new UsageError('--overlap-hours must be a whole number from 1 to 720');
      }
      return { data: await backend.rotateSigningKey(text === undefined ? undefined : Number(text)) };
    },
  },
];

function display(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.map(display).join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function renderRecord(record: object): string {
  const entries = Object.entries(record).filter(([field]) => field !== 'object' && field !== 'attempts');
  const width = Math.max(0, ...entries.map(([field]) => field.length));
  let text = entries.map(([field, value]) => `${field.padEnd(width)}  ${display(value)}`).join('\n') + '\n';
  const attempts = (record as { attempts?: object[] }).attempts;
  if (attempts) text += `\n${renderTable(attempts, ['sequence', 'round', 'attempt', 'status', 'http_status', 'error', 'duration_ms', 'started_at', 'next_attempt_at'])}`;
  return text;
}

function renderTable(rows: readonly object[], columns: readonly string[]): string {
  if (rows.length === 0) return 'Nothing.\n';
  const cells = rows.map((row) => columns.map((column) => display((row as Record<string, unknown>)[column])));
  const widths = columns.map((column, index) => Math.max(column.length, ...cells.map((line) => line[index]?.length ?? 0)));
  const line = (items: readonly string[]) => items.map((cell, index) => (index === items.length - 1 ? cell : cell.padEnd(widths[index] ?? 0))).join('  ');
  return [line(columns.map((column) => column.toUpperCase())), ...cells.map(line)].join('\n') + '\n';
}

export function webhookHelp(): string {
  const width = Math.max(...COMMANDS.map((command) => command.action.length));
  return [
    `Usage: ${PROGRAM} <action> [options] [--json] [--direct|--remote]`,
    '',
    'Webhook endpoints, deliveries and signing keys.',
    '',
    'Actions:',
    ...COMMANDS.map((command) => `  ${command.action.padEnd(width)}  ${command.summary}`),
    '',
    `Run '${PROGRAM} <action> --help' for the options of one action.`,
    '',
  ].join('\n');
}

function commandHelp(command: Command): string {
  const options = Object.entries(command.options).map(([name, [placeholder, required]]) => `  --${name} <${placeholder}>${required ? '' : ' (optional)'}`);
  const flags = (command.flags ?? []).map((name) => `  --${name}`);
  return [`Usage: ${PROGRAM} ${command.action} [options] [--json]`, '', command.summary, '', ...options, ...flags, ''].join('\n');
}

function failureOf(error: unknown): { code: string; message: string; details: Record<string, unknown> } {
  if (error instanceof ApiError || error instanceof CliError) return { code: error.code, message: scrubText(error.message), details: error.details };
  return { code: 'unexpected_error', message: scrubText(error instanceof Error ? error.message : String(error)), details: {} };
}

/** Runs `webhooks <action> …` (argv still starts with the word `webhooks`) and answers the exit code. */
export async function runWebhookCli(argv: readonly string[], io: WebhookCliIo): Promise<number> {
  const words = argv.filter((word) => !word.startsWith('-'));
  // `help webhooks <action>` is the same as `webhooks <action> --help`.
  const offset = words[0] === 'help' ? 1 : 0;
  const action = words[offset + 1];
  const wantsHelp = offset === 1 || argv.includes('--help') || argv.includes('-h');
  const json = argv.includes('--json');
  const usage = (message: string) => {
    writeUsageError(io.stderr, PROGRAM, message, json);
    return EXIT_USAGE;
  };
  if (action === undefined) {
    (wantsHelp ? io.stdout : io.stderr).write(webhookHelp());
    return wantsHelp ? EXIT_OK : EXIT_USAGE;
  }
  const command = COMMANDS.find((candidate) => candidate.action === action);
  if (!command) return usage(`unknown action '${action}'`);
  if (wantsHelp) {
    io.stdout.write(commandHelp(command));
    return EXIT_OK;
  }
  const optionSpec: Record<string, { type: 'string' | 'boolean' }> = { json: { type: 'boolean' }, direct: { type: 'boolean' }, remote: { type: 'boolean' } };
  for (const name of Object.keys(command.options)) optionSpec[name] = { type: 'string' };
  for (const name of command.flags ?? []) optionSpec[name] = { type: 'boolean' };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options: optionSpec, strict: true, allowPositionals: true });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  if (parsed.positionals.length > 2) return usage(`unexpected argument '${parsed.positionals[2]}'`);
  if (parsed.values.direct === true && parsed.values.remote === true) return usage('--remote and --direct exclude each other');
  const values: Record<string, string | undefined> = {};
  const flags = new Set<string>();
  for (const [name, value] of Object.entries(parsed.values)) {
    if (typeof value === 'string') values[name] = value;
    else if (value === true) flags.add(name);
  }
  for (const [name, [, required]] of Object.entries(command.options)) {
    if (required && values[name] === undefined) return usage(`missing required option --${name}`);
  }
  const preference: BackendPreference = flags.has('remote') ? 'remote' : flags.has('direct') ? 'direct' : 'auto';
  let backend: WebhookBackend | null = null;
  try {
    backend = io.openWebhookBackend ? await io.openWebhookBackend(preference) : await connectWebhookBackend(io.env, preference, io.stderr);
    const output = await command.run(backend, values, flags);
    if (json) io.stdout.write(`${JSON.stringify(output.data, null, 2)}\n`);
    else if (Array.isArray(output.data)) io.stdout.write(renderTable(output.data as object[], output.columns ?? ['id']));
    else io.stdout.write(renderRecord(output.data as object));
    return EXIT_OK;
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message);
    const failure = failureOf(error);
    if (json) {
      io.stderr.write(`${JSON.stringify({ error: { code: failure.code, message: failure.message, ...(Object.keys(failure.details).length > 0 ? { details: failure.details } : {}) } })}\n`);
    } else {
      const lines = [`error: ${failure.code}: ${failure.message}`];
      const fields = failure.details.fields;
      if (Array.isArray(fields)) for (const field of fields.slice(0, 50)) lines.push(`  ${String((field as { path?: unknown }).path)}: ${String((field as { reason?: unknown }).reason)}`);
      io.stderr.write(`${lines.join('\n')}\n`);
    }
    return EXIT_FAILED;
  } finally {
    if (backend) {
      try {
        await backend.close();
      } catch (error) {
        io.stderr.write(`warning: closing the backend failed: ${failureOf(error).message}\n`);
      }
    }
  }
}
