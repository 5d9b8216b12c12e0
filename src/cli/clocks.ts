import crypto from 'node:crypto';
import { parseArgs } from 'node:util';
import { signedHeaders } from '../http/canonical.ts';
import { scrubText } from '../platform/logger.ts';
import { DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, parseTimestamp } from '../platform/time.ts';
import type { TestClockView } from '../test-clocks/service.ts';
import { CliError, networkReason, readServiceAnswer, type CliEnvironment, type TextSink } from './backends.ts';
import { sandboxCredentials } from './sandbox.ts';
import { helpRows } from './help-rows.ts';
import { writeUsageError } from './usage-error.ts';

/**
 * `npm run cli -- clock create|list|show|attach|detach|advance`: the sandbox merchant's test clocks from a
 * terminal, through the running service's /v1/test/clocks routes, signed with the sandbox test key exactly
 * as a merchant signs (PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, else DATA_DIR/sandbox-credentials.json).
 * Each write sends a fresh Idempotency-Key; when no answer arrives, the same request is sent once more
 * with the same key, so an advance whose answer was lost is replayed, never asked for twice. `advance`
 * takes `--to` (an instant) or `--by` (a span from the clock's frozen time) and, with `--wait`, polls until
 * the clock is `ready` again. Exit codes: 0 done, 1 the operation failed or was refused, 2 usage.
 */

const PROGRAM = 'npm run cli -- clock';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const REQUEST_TIMEOUT_MS = 30_000;
/** The first attempt and one retry with the same Idempotency-Key; more would only hide an outage. */
const WRITE_ATTEMPTS = 2;
const RETRY_DELAY_MS = 500;
/** `--wait` looks at the clock this often, and gives up after `--timeout` seconds (120 by default). */
const WAIT_POLL_MS = 500;
const DEFAULT_WAIT_TIMEOUT_SECONDS = 120;
const MAX_WAIT_TIMEOUT_SECONDS = 3_600;
const CLOCK_ID_PATTERN = /^clock_[0-9A-Za-z]{1,60}$/;
/** `--by`: days, hours, minutes and seconds in that order, each optional, at least one (`72h`, `1d12h`, `90s`). */
const SPAN_PATTERN = /^(?:(\d{1,4})d)?(?:(\d{1,6})h)?(?:(\d{1,7})m)?(?:(\d{1,9})s)?$/;

type Action = 'create' | 'list' | 'show' | 'attach' | 'detach' | 'advance';
const ACTIONS: Record<Action, { usage: string; summary: string }> = {
  create: { usage: 'create [--name TEXT] [--frozen-time TIMESTAMP]', summary: 'Creates a clock (frozen at now unless told otherwise).' },
  list: { usage: 'list [--limit 1..100] [--starting-after clock_…]', summary: 'Lists the sandbox’s clocks, oldest first.' },
  show: { usage: 'show <clock_id>', summary: 'Shows one clock.' },
  attach: { usage: 'attach <clock_id>', summary: 'Attaches the clock: the sandbox’s requests run at its time.' },
  detach: { usage: 'detach <clock_id>', summary: 'Detaches the clock: the sandbox’s requests run in real time again.' },
  advance: {
    usage: 'advance <clock_id> (--to TIMESTAMP | --by SPAN) [--wait [--timeout SECONDS]]',
    summary: 'Advances the clock, running every deadline that falls due on the way.',
  },
};

const OPTIONS = {
  name: { type: 'string' },
  'frozen-time': { type: 'string' },
  limit: { type: 'string' },
  'starting-after': { type: 'string' },
  to: { type: 'string' },
  by: { type: 'string' },
  timeout: { type: 'string' },
  wait: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

export interface ClockCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Replaceable for tests (a lost answer); the global fetch by default. */
  fetch?: typeof fetch;
}

class UsageError extends Error {}

function help(): string {
  return [
    `Usage: ${PROGRAM} <action> [options] [--json]`,
    '',
    'The sandbox merchant’s test clocks: frozen time for its test-mode requests, advanced on demand.',
    '',
    'Actions:',
    ...helpRows(Object.values(ACTIONS).map((action) => [action.usage, action.summary] as const)),
    '',
    'TIMESTAMP is RFC 3339 UTC with milliseconds (2026-08-01T00:00:00.000Z); SPAN is days, hours, minutes',
    'and seconds, such as 15m, 72h or 1d12h. An advance is asynchronous: --wait polls until the clock is',
    'ready again (at most --timeout seconds, 120 by default).',
    '',
    'Credentials: PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, or DATA_DIR/sandbox-credentials.json.',
    '',
  ].join('\n');
}

/** `--by` as milliseconds; a usage error for anything else, or for a span of nothing. */
export function parseSpan(text: string): number {
  const match = SPAN_PATTERN.exec(text);
  if (!match || text.length === 0) throw new UsageError(`--by takes a span such as 15m, 72h or 1d12h, not '${text}'`);
  const [days, hours, minutes, seconds] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number];
  const span_ms = days * DAY_MS + hours * HOUR_MS + minutes * MINUTE_MS + seconds * SECOND_MS;
  if (span_ms <= 0) throw new UsageError('--by must be longer than nothing');
  return span_ms;
}

/** A signed client of the clock routes with the sandbox key. */
class ClockClient {
  private readonly base_url: string;

  constructor(
    private readonly credentials: { base_url: string; api_key: string; signing_secret: string },
    private readonly fetchFunction: typeof fetch,
  ) {
    this.base_url = credentials.base_url.replace(/\/+$/, '');
  }

  private headers(method: 'GET' | 'POST', target: string, body: string, idempotency_key: string | undefined): Record<string, string> {
    return signedHeaders({
      api_key: this.credentials.api_key,
      signing_secret: this.credentials.signing_secret,
      method,
      target,
      body,
      idempotency_key,
      // The service checks PG-Timestamp against the real time, whatever the clock it is asked about.
      timestamp_seconds: Math.floor(Date.now() / 1000),
      nonce: crypto.randomBytes(12).toString('hex'),
    });
  }

  /**
   * One request; a request that got no answer (refused, reset, time limit) is sent once more after a
   * short pause, signed anew (a new nonce) with the same Idempotency-Key. HTTP answers are never retried.
   */
  async send<Body>(method: 'GET' | 'POST', target: string, body?: unknown): Promise<Body> {
    const payload = body === undefined ? '' : JSON.stringify(body);
    const idempotency_key = method === 'POST' ? crypto.randomUUID() : undefined;
    let lastReason = 'no answer';
    for (let attempt = 1; attempt <= WRITE_ATTEMPTS; attempt += 1) {
      let response: Response;
      try {
        response = await this.fetchFunction(`${this.base_url}${target}`, {
          method,
          headers: this.headers(method, target, payload, idempotency_key),
          body: payload || undefined,
          redirect: 'error',
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (error) {
        lastReason = networkReason(error);
        if (attempt < WRITE_ATTEMPTS) await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
        continue;
      }
      return readServiceAnswer<Body>(response);
    }
    const unsure = method === 'POST' ? `; the change may or may not have been made: check with '${PROGRAM} list'` : '';
    throw new CliError('service_unreachable', `could not reach the service at ${this.base_url} (${lastReason})${unsure}`);
  }
}

function describe(clock: TestClockView): string {
  const lines = [
    `${clock.id}${clock.name === null ? '' : `  "${clock.name}"`}`,
    `  frozen_time  ${clock.frozen_time}`,
    `  status       ${clock.status}${clock.status_details ? ` (to ${clock.status_details.advancing.target_frozen_time})` : ''}`,
    `  attached     ${clock.attached ? 'yes' : 'no'}`,
  ];
  if (clock.last_advance) {
    const last = clock.last_advance;
    const note = last.outcome === 'completed' ? 'completed' : `stopped at the job limit before ${last.requested_frozen_time}; advance again to go on`;
    lines.push(`  last advance ${last.requested_frozen_time}: reached ${last.reached_frozen_time}, ${last.job_runs} job runs, ${note}`);
  }
  return `${lines.join('\n')}\n`;
}

function table(clocks: readonly TestClockView[]): string {
  if (clocks.length === 0) return 'no test clocks\n';
  const rows = [['ID', 'FROZEN_TIME', 'STATUS', 'ATTACHED', 'NAME'], ...clocks.map((clock) => [clock.id, clock.frozen_time, clock.status, clock.attached ? 'yes' : 'no', clock.name ?? ''])];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return `${rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd()).join('\n')}\n`;
}

function clockIdOf(word: string | undefined, action: Action): string {
  if (word === undefined) throw new UsageError(`${action} needs a clock id (clock_…)`);
  if (!CLOCK_ID_PATTERN.test(word)) throw new UsageError(`'${word}' is not a clock id (clock_…)`);
  return word;
}

function timestampOption(text: string, name: string): string {
  if (parseTimestamp(text) === null) throw new UsageError(`--${name} takes RFC 3339 UTC with milliseconds, such as 2026-08-01T00:00:00.000Z`);
  return text;
}

export async function runClockCli(argv: readonly string[], io: ClockCliIo): Promise<number> {
  const json = argv.includes('--json');
  const usage = (message: string) => {
    writeUsageError(io.stderr, PROGRAM, message, json);
    return EXIT_USAGE;
  };
  const parseOptions = (args: string[]) => parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: true });
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions([...argv]);
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  // `help clock advance` is the same as `clock advance --help`.
  const words = parsed.positionals[0] === 'help' ? parsed.positionals.slice(1) : parsed.positionals;
  const wantsHelp = parsed.values.help === true || parsed.positionals[0] === 'help';
  const [, actionWord, idWord, extra] = words;
  if (wantsHelp || actionWord === undefined) {
    (wantsHelp ? io.stdout : io.stderr).write(help());
    return wantsHelp ? EXIT_OK : EXIT_USAGE;
  }
  if (!Object.hasOwn(ACTIONS, actionWord)) return usage(`unknown action '${actionWord}'`);
  const action = actionWord as Action;
  const values = parsed.values;
  try {
    const takesId = action !== 'create' && action !== 'list';
    if ((takesId ? extra : idWord) !== undefined) throw new UsageError(`unexpected argument '${takesId ? extra : idWord}'`);
    const allowed: Record<Action, readonly string[]> = {
      create: ['name', 'frozen-time'],
      list: ['limit', 'starting-after'],
      show: [],
      attach: [],
      detach: [],
      advance: ['to', 'by', 'wait', 'timeout'],
    };
    for (const name of Object.keys(values)) {
      if (name === 'json' || name === 'help') continue;
      if (!allowed[action].includes(name)) throw new UsageError(`--${name} does not apply to '${action}'`);
    }
    const client = new ClockClient(sandboxCredentials(io.env), io.fetch ?? fetch);
    let answer: TestClockView | TestClockView[];
    switch (action) {
      case 'create': {
        const body: Record<string, string> = {};
        if (values.name !== undefined) body.name = values.name;
        if (values['frozen-time'] !== undefined) body.frozen_time = timestampOption(values['frozen-time'], 'frozen-time');
        answer = await client.send<TestClockView>('POST', '/v1/test/clocks', body);
        break;
      }
      case 'list': {
        const query = new URLSearchParams();
        if (values.limit !== undefined) {
          if (!/^[0-9]{1,3}$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > 100) throw new UsageError('--limit takes 1 to 100');
          query.set('limit', values.limit);
        }
        if (values['starting-after'] !== undefined) query.set('starting_after', clockIdOf(values['starting-after'], action));
        const text = query.toString();
        answer = (await client.send<{ data: TestClockView[] }>('GET', `/v1/test/clocks${text ? `?${text}` : ''}`)).data;
        break;
      }
      case 'show':
        answer = await client.send<TestClockView>('GET', `/v1/test/clocks/${clockIdOf(idWord, action)}`);
        break;
      case 'attach':
      case 'detach':
        answer = await client.send<TestClockView>('POST', `/v1/test/clocks/${clockIdOf(idWord, action)}/${action}`);
        break;
      case 'advance': {
        const id = clockIdOf(idWord, action);
        if ((values.to === undefined) === (values.by === undefined)) throw new UsageError('advance takes exactly one of --to and --by');
        if (values.timeout !== undefined && values.wait !== true) throw new UsageError('--timeout goes with --wait');
        const timeout_seconds = values.timeout === undefined ? DEFAULT_WAIT_TIMEOUT_SECONDS : Number(values.timeout);
        if (!/^[0-9]{1,4}$/.test(values.timeout ?? '1') || timeout_seconds < 1 || timeout_seconds > MAX_WAIT_TIMEOUT_SECONDS) {
          throw new UsageError(`--timeout takes 1 to ${MAX_WAIT_TIMEOUT_SECONDS} seconds`);
        }
        let target: string;
        if (values.to !== undefined) target = timestampOption(values.to, 'to');
        else {
          const span_ms = parseSpan(values.by as string);
          const current = await client.send<TestClockView>('GET', `/v1/test/clocks/${id}`);
          target = new Date(new Date(current.frozen_time).getTime() + span_ms).toISOString();
        }
        answer = await client.send<TestClockView>('POST', `/v1/test/clocks/${id}/advance`, { frozen_time: target });
        if (values.wait === true) {
          const deadline = Date.now() + timeout_seconds * SECOND_MS;
          while (answer.status !== 'ready') {
            if (Date.now() >= deadline) {
              throw new CliError('advance_still_running', `the clock is still advancing to ${target} after ${timeout_seconds} s; check later with '${PROGRAM} show ${id}'`);
            }
            await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
            answer = await client.send<TestClockView>('GET', `/v1/test/clocks/${id}`);
          }
        }
        break;
      }
    }
    if (json) io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    else io.stdout.write(Array.isArray(answer) ? table(answer) : describe(answer));
    return EXIT_OK;
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message);
    const failure = error instanceof CliError ? error : new CliError('unexpected_error', scrubText(error instanceof Error ? error.message : String(error)));
    if (json) io.stderr.write(`${JSON.stringify({ error: { code: failure.code, message: failure.message, details: failure.details } })}\n`);
    else {
      const fields = Array.isArray(failure.details.fields)
        ? (failure.details.fields as { path?: string; reason?: string; hint?: string }[]).map((field) => `\n  ${field.path}: ${field.reason}${field.hint ? ` (${field.hint})` : ''}`).join('')
        : '';
      io.stderr.write(`error: ${failure.code}: ${failure.message}${fields}\n`);
    }
    return EXIT_FAILED;
  }
}
