import { parseArgs } from 'node:util';
import { signedHeaders } from '../http/canonical.ts';
import { scrubText } from '../platform/logger.ts';
import { sandboxCredentials } from './sandbox.ts';
import { CliError, networkReason, readServiceAnswer, type CliEnvironment, type TextSink } from './backends.ts';
import { writeUsageError } from './usage-error.ts';

/**
 * `npm run cli -- listen --forward-to http://localhost:3000/hooks`: the merchant's sandbox webhooks on
 * a laptop, without a public address (the Stripe CLI's `listen` is the model). It follows the merchant's
 * events feed (GET /v1/pay/events by `since_sequence`) with the sandbox key, asks the service for each
 * event's signed delivery (GET /v1/test/webhooks/events/{id}/signed-delivery: the stored bytes and every
 * delivery header, signed by the service with the brand's sandbox key now), and posts exactly that to
 * the local URL, so the receiver verifies it with the public keys as it would a real delivery. It prints
 * one line per event with the receiver's answer. Like a real delivery it never follows a redirect and
 * gives up on an answer after 15 seconds; unlike one it does not retry: the line shows what happened.
 *
 * Credentials as `sandbox pay`: PG_BASE_URL, PG_API_KEY, PG_SIGNING_SECRET, else
 * DATA_DIR/sandbox-credentials.json; never a secret on the command line. Exit codes: 0 stopped (Ctrl-C,
 * or --max-events reached), 1 failed, 2 usage.
 */

const PROGRAM = 'npm run cli -- listen';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const REQUEST_TIMEOUT_MS = 30_000;
const FORWARD_TIMEOUT_MS = 15_000;
const DEFAULT_INTERVAL_MS = 1_000;
const PAGE_LIMIT = 100;
/** Failed polls in a row before giving up (with the backoff below, several minutes of an unreachable service). */
const MAX_CONSECUTIVE_FAILURES = 30;
/** Attempts to get one event's signed delivery while the service answers a retryable refusal (load shedding). */
const SIGNED_DELIVERY_ATTEMPTS = 5;
const MAX_BACKOFF_MS = 10_000;
/** The most of a receiver's answer read for the line (the status decides; the body is not printed). */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface ListenCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Stops the command (tests); without it, SIGINT and SIGTERM do. */
  signal?: AbortSignal;
}

interface Credentials {
  base_url: string;
  api_key: string;
  signing_secret: string;
}

interface FeedEvent {
  id: string;
  type: string;
  sequence: number;
}

interface SignedDelivery {
  event_id: string;
  event_type: string;
  sequence: number;
  headers: Record<string, string>;
  body_base64: string;
}

/** One forwarded event, as `--json` prints it. */
export interface ForwardedLine {
  event_id: string;
  type: string;
  sequence: number;
  /** The receiver's HTTP status; null without an answer. */
  status: number | null;
  /** Why there was no answer (or why the event could not be signed); null with an answer. */
  error: string | null;
  duration_ms: number;
}

const OPTIONS = {
  'forward-to': ['URL', 'Where to post each event, such as http://localhost:3000/hooks (required).'],
  events: ['a,b', 'Forward only these event types (all by default).'],
  'since-sequence': ['N', 'Start after this sequence (by default after the newest event: only new events).'],
  'interval-ms': ['ms', `How often to look for new events; ${DEFAULT_INTERVAL_MS} by default (200 to 60000).`],
  'max-events': ['N', 'Stop after forwarding this many events (scripts and tests).'],
} as const;

function help(): string {
  const rows = [
    ...Object.entries(OPTIONS).map(([name, [placeholder, text]]) => `  --${name} ${placeholder}`.padEnd(28) + text),
    '  --json'.padEnd(28) + 'One JSON object per forwarded event instead of a line of text.',
  ];
  return [
    `Usage: ${PROGRAM} --forward-to <url> [options]`,
    '',
    'Forwards the sandbox merchant’s events to a local URL, signed and with the headers of a real delivery,',
    'and prints one line per event with the receiver’s answer. Stop with Ctrl-C.',
    '',
    'Options:',
    ...rows,
    '',
    'Credentials: PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, or DATA_DIR/sandbox-credentials.json.',
    '',
  ].join('\n');
}

class UsageError extends Error {}

function integerOption(values: Record<string, unknown>, name: string, min: number, max: number): number | undefined {
  const text = values[name];
  if (text === undefined) return undefined;
  if (typeof text !== 'string' || !/^[0-9]{1,15}$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max}`);
  }
  return Number(text);
}

function forwardUrlOf(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError('--forward-to must be an absolute http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--forward-to must be an absolute http:// or https:// URL');
  if (url.username || url.password) throw new UsageError('--forward-to must not carry a user or password');
  return url;
}

/** A refusal of the service, with what its error body says about retrying. */
class ServiceRefusal extends CliError {
  constructor(
    code: string,
    message: string,
    readonly retryable: boolean,
    readonly retry_after_seconds: number | null,
  ) {
    super(code, message);
  }
}

/**
 * A signed GET of the merchant API, answered as JSON. A failure throws: a ServiceRefusal with the
 * service's code and retryability, or `service_unreachable` (no answer), which is retryable too.
 */
async function signedGet<Body>(credentials: Credentials, target: string, signal: AbortSignal): Promise<Body> {
  const baseUrl = credentials.base_url.replace(/\/+$/, '');
  const headers = signedHeaders({ api_key: credentials.api_key, signing_secret: credentials.signing_secret, method: 'GET', target });
  let response: Response;
  try {
    response = await fetch(`${baseUrl}${target}`, { headers, redirect: 'error', signal: AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]) });
  } catch (error) {
    if (signal.aborted) throw error;
    throw new ServiceRefusal('service_unreachable', `could not reach the service at ${baseUrl} (${networkReason(error)})`, true, null);
  }
  if (response.ok) return readServiceAnswer<Body>(response);
  const text = await response.text();
  let error: { code?: unknown; message?: unknown; retryable?: unknown; retry_after_seconds?: unknown } | undefined;
  try {
    error = (JSON.parse(text) as { error?: typeof error }).error;
  } catch {
    error = undefined;
  }
  if (!error || typeof error.code !== 'string') {
    const transient = response.status === 502 || response.status === 503 || response.status === 504;
    throw new ServiceRefusal('unexpected_response', `the service answered HTTP ${response.status} without an error body`, transient, null);
  }
  const retryAfter = typeof error.retry_after_seconds === 'number' ? error.retry_after_seconds : Number(response.headers.get('retry-after') ?? '') || null;
  throw new ServiceRefusal(error.code, typeof error.message === 'string' ? error.message : error.code, error.retryable === true, retryAfter);
}

/** How long to wait before asking again after a retryable refusal: what the service asked, else a backoff; capped. */
function retryDelay(error: ServiceRefusal, failures: number, interval_ms: number): number {
  const asked = error.retry_after_seconds !== null && error.retry_after_seconds > 0 ? error.retry_after_seconds * 1000 : interval_ms * 2 ** Math.min(failures, 10);
  // Never sooner than asked, with up to 20 % jitter so that several listeners do not ask in step.
  return Math.min(MAX_BACKOFF_MS, Math.round(asked * (1 + 0.2 * Math.random())));
}

/** A signed GET retried while the service answers a retryable refusal, at most SIGNED_DELIVERY_ATTEMPTS times. */
async function signedGetRetried<Body>(credentials: Credentials, target: string, signal: AbortSignal, interval_ms: number): Promise<Body> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await signedGet<Body>(credentials, target, signal);
    } catch (error) {
      if (signal.aborted || !(error instanceof ServiceRefusal) || !error.retryable || attempt >= SIGNED_DELIVERY_ATTEMPTS) throw error;
      await sleep(retryDelay(error, attempt, interval_ms), signal);
    }
  }
}

/** Posts one delivery to the local receiver: its exact bytes and headers, no redirect followed, 15 seconds at most. */
async function forward(url: URL, delivery: SignedDelivery, signal: AbortSignal): Promise<{ status: number | null; error: string | null; duration_ms: number }> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const body = Buffer.from(delivery.body_base64, 'base64');
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: delivery.headers,
      body,
      redirect: 'manual',
      signal: AbortSignal.any([signal, AbortSignal.timeout(FORWARD_TIMEOUT_MS)]),
    });
    // The answer is read (a little) so that the connection can be reused, never printed.
    const reader = response.body?.getReader();
    let read = 0;
    while (reader && read <= MAX_ANSWER_BYTES) {
      const chunk = await reader.read();
      if (chunk.done) break;
      read += chunk.value.byteLength;
    }
    await reader?.cancel().catch(() => undefined);
    return { status: response.status, error: null, duration_ms: elapsed() };
  } catch (error) {
    if (signal.aborted) throw error;
    return { status: null, error: networkReason(error), duration_ms: elapsed() };
  }
}

function textLine(line: ForwardedLine, at: Date): string {
  const answer = line.status !== null ? `<- ${line.status}` : `<- no answer: ${line.error}`;
  return `${at.toISOString()}  ${line.type}  ${line.event_id}  seq ${line.sequence}  ${answer}  (${line.duration_ms} ms)\n`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export async function runListenCli(argv: readonly string[], io: ListenCliIo): Promise<number> {
  const json = argv.includes('--json');
  const usage = (message: string) => {
    writeUsageError(io.stderr, PROGRAM, message, json);
    return EXIT_USAGE;
  };
  const optionSpec: Record<string, { type: 'string' | 'boolean' }> = { json: { type: 'boolean' }, help: { type: 'boolean' } };
  for (const name of Object.keys(OPTIONS)) optionSpec[name] = { type: 'string' };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options: optionSpec, strict: true, allowPositionals: true });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  const words = parsed.positionals[0] === 'help' ? parsed.positionals.slice(1) : parsed.positionals;
  if (parsed.positionals[0] === 'help' || parsed.values.help === true) {
    io.stdout.write(help());
    return EXIT_OK;
  }
  if (words.length > 1) return usage(`unexpected argument '${words[1]}'`);
  let forwardTo: URL;
  let options: { events: Set<string> | null; since: number | undefined; interval_ms: number; max_events: number | undefined };
  try {
    const target = parsed.values['forward-to'];
    if (typeof target !== 'string') throw new UsageError('missing required option --forward-to <URL>');
    forwardTo = forwardUrlOf(target);
    const eventsText = parsed.values.events;
    const events = typeof eventsText === 'string' ? new Set(eventsText.split(',').map((type) => type.trim()).filter((type) => type.length > 0)) : null;
    if (events !== null && events.size === 0) throw new UsageError('--events needs at least one event type');
    options = {
      events,
      since: integerOption(parsed.values, 'since-sequence', 0, Number.MAX_SAFE_INTEGER),
      interval_ms: integerOption(parsed.values, 'interval-ms', 200, 60_000) ?? DEFAULT_INTERVAL_MS,
      max_events: integerOption(parsed.values, 'max-events', 1, 1_000_000),
    };
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message);
    throw error;
  }

  const controller = new AbortController();
  const stop = () => controller.abort();
  if (io.signal) {
    if (io.signal.aborted) controller.abort();
    else io.signal.addEventListener('abort', stop, { once: true });
  } else {
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  }
  const signal = controller.signal;
  try {
    const credentials = sandboxCredentials(io.env);
    if (!credentials.api_key.startsWith('sk_test_')) throw new CliError('not_a_sandbox_key', 'listen forwards sandbox events only: it takes a test key (sk_test_…)');
    let since = options.since;
    if (since === undefined) {
      // Only what happens from now on, as Stripe's listen does; --since-sequence replays older events.
      const newest = await signedGetRetried<{ data: FeedEvent[] }>(credentials, '/v1/pay/events?order=desc&limit=1', signal, options.interval_ms);
      since = newest.data[0]?.sequence ?? 0;
    }
    io.stderr.write(`Ready. Forwarding sandbox events after sequence ${since} to ${forwardTo.href} (Ctrl-C stops).\n`);
    let forwarded = 0;
    let failures = 0;
    while (!signal.aborted && (options.max_events === undefined || forwarded < options.max_events)) {
      let page: { data: FeedEvent[]; has_more: boolean };
      try {
        page = await signedGet(credentials, `/v1/pay/events?since_sequence=${since}&limit=${PAGE_LIMIT}`, signal);
        failures = 0;
      } catch (error) {
        if (signal.aborted) break;
        // An unreachable or shedding service comes back; a refusal that is not retryable (a bad or revoked key) will not.
        if (!(error instanceof ServiceRefusal) || !error.retryable) throw error;
        failures += 1;
        if (failures >= MAX_CONSECUTIVE_FAILURES) throw error;
        io.stderr.write(`warning: ${error.code}: ${error.message}; trying again\n`);
        await sleep(retryDelay(error, failures, options.interval_ms), signal);
        continue;
      }
      for (const event of page.data) {
        if (signal.aborted || (options.max_events !== undefined && forwarded >= options.max_events)) break;
        since = event.sequence;
        if (options.events !== null && !options.events.has(event.type)) continue;
        let line: ForwardedLine;
        try {
          const delivery = await signedGetRetried<SignedDelivery>(credentials, `/v1/test/webhooks/events/${encodeURIComponent(event.id)}/signed-delivery`, signal, options.interval_ms);
          const answer = await forward(forwardTo, delivery, signal);
          line = { event_id: event.id, type: event.type, sequence: event.sequence, ...answer };
        } catch (error) {
          if (signal.aborted) break;
          if (!(error instanceof CliError)) throw error;
          // This event could not be signed (the service answered an error): said on its line, and the feed goes on.
          line = { event_id: event.id, type: event.type, sequence: event.sequence, status: null, error: error.code, duration_ms: 0 };
        }
        forwarded += 1;
        io.stdout.write(json ? `${JSON.stringify(line)}\n` : textLine(line, new Date()));
      }
      if (!page.has_more) await sleep(options.interval_ms, signal);
    }
    return EXIT_OK;
  } catch (error) {
    // Stopped while a request was in flight: a normal end.
    if (signal.aborted) return EXIT_OK;
    const failure = error instanceof CliError ? error : new CliError('unexpected_error', scrubText(error instanceof Error ? error.message : String(error)));
    if (json) io.stderr.write(`${JSON.stringify({ error: { code: failure.code, message: failure.message } })}\n`);
    else io.stderr.write(`error: ${failure.code}: ${failure.message}\n`);
    return EXIT_FAILED;
  } finally {
    io.signal?.removeEventListener('abort', stop);
    process.removeListener('SIGINT', stop);
    process.removeListener('SIGTERM', stop);
  }
}
