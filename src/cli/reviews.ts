import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { scrubText } from '../platform/logger.ts';
import type { ReviewDetail, ReviewQueueItem } from '../review/service.ts';
import { CliError, type CliEnvironment, type TextSink } from './backends.ts';
import {
  ACTIONS,
  COMMON_OPTIONS,
  IDENTIFIER_PATTERN,
  MAX_PAGES,
  PAGE_SIZE_MAX,
  PROGRAM,
  UsageError,
  actionHelp,
  actionUsage,
  groupHelp,
  parserOptions,
  validate,
  type ActionName,
  type ActionSpec,
  type Values,
} from './reviews-arguments.ts';
import { ReviewClient, connectionFor } from './reviews-client.ts';
import { decisionText, detailText, printable, queueTable } from './reviews-render.ts';

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
 *
 * The arguments and the help are in reviews-arguments.ts, the service's address, token and client in
 * reviews-client.ts, and the text printed for people in reviews-render.ts.
 */

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const IMAGE_EXTENSIONS: Readonly<Record<string, string>> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

export interface ReviewCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** Replaceable for tests (a lost answer, a recorded address); the global fetch by default. */
  fetch?: typeof fetch;
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

// Failures and the entry point

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
