import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { SLIP_MAX_BYTES } from '../slip-capability/capability.ts';
import type { ReviewDetail } from '../review/service.ts';
import { CliError, loadCliConfig, networkReason, readOperatorCredentials, readServiceAnswer, type CliEnvironment, type TextSink } from './backends.ts';
import { PROGRAM, type DecisionAction } from './reviews-arguments.ts';

/**
 * How `npm run cli -- reviews` reaches the service: the address and the reviewer's token it calls
 * with, and the client of the back-office review API (reads, decisions sent twice at most with one
 * Idempotency-Key, slip images).
 */

const REQUEST_TIMEOUT_MS = 30_000;
/** The first attempt and one retry with the same Idempotency-Key; more would only hide an outage. */
const DECISION_ATTEMPTS = 2;
/** A short pause before the retry, so that a connection reset by a restarting proxy has time to clear. */
const RETRY_DELAY_MS = 500;
/** The shape the service accepts for a back-office token; anything else is refused before it is sent. */
const TOKEN_PATTERN = /^bo_[A-Za-z0-9_-]{16,128}$/;

export interface DecisionAnswer {
  object: 'review_decision';
  decision_id: string | null;
  effect: 'approval_recorded' | 'settled' | 'rejected' | 'escalated';
  replayed: boolean;
  review: ReviewDetail;
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
export function connectionFor(env: CliEnvironment, tokenFile: string | undefined, readOnly: boolean, stderr: TextSink): Connection {
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
  return checkedConnection(connection);
}

/**
 * The service address and an operator's token, for commands operators run (`refunds`): the token file, else the
 * operator credential (PG_OPERATOR_TOKEN, or DATA_DIR/operator-credentials.json), with PG_BASE_URL over the file's
 * address. The audit log names the credential, so a person with their own operator credential should use its file.
 */
export function operatorConnectionFor(env: CliEnvironment, tokenFile: string | undefined, stderr: TextSink): Connection {
  let connection: Connection;
  if (tokenFile !== undefined) {
    const baseUrl = env.PG_BASE_URL || baseUrlFromOperatorFile(env);
    if (!baseUrl) {
      throw new CliError('service_address_missing', 'no service address: set PG_BASE_URL, or start the service once to write DATA_DIR/operator-credentials.json');
    }
    connection = { base_url: baseUrl, token: readTokenFile(tokenFile, stderr) };
    if (!TOKEN_PATTERN.test(connection.token)) throw new CliError('token_invalid', `${tokenFile} does not hold a back-office token (bo_…)`);
  } else {
    connection = readOperatorCredentials(loadCliConfig(env), env);
    if (!TOKEN_PATTERN.test(connection.token)) throw new CliError('token_invalid', 'the operator credential is not a back-office token (bo_…)');
  }
  return checkedConnection(connection);
}

/** The address must be http(s); a trailing slash is dropped so that paths join cleanly. */
function checkedConnection(connection: Connection): Connection {
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

export class ReviewClient {
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
    return this.postOnce<DecisionAnswer>(`/v1/bo/reviews/${encodeURIComponent(deposit_id)}/${action}`, body, stderr, {
      what: 'decision',
      check: `check with '${PROGRAM} show ${deposit_id}' before deciding again`,
    });
  }

  /**
   * A POST that must happen once, with one Idempotency-Key for all its attempts: when the first answer is lost, the
   * retry either acts (the first never arrived) or gets the first outcome back, replayed. `label` names the action
   * in the warning and says how to check it when no answer came at all.
   */
  async postOnce<Body>(pathname: string, body: Record<string, unknown>, stderr: TextSink, label: { what: string; check: string }): Promise<{ answer: Body; retried: boolean }> {
    const idempotencyKey = crypto.randomUUID();
    const url = `${this.base_url}${pathname}`;
    let lastFailure: NetworkFailure | null = null;
    for (let attempt = 1; attempt <= DECISION_ATTEMPTS; attempt += 1) {
      try {
        const answer = await this.answerOf<Body>(await this.exchange(url, { method: 'POST', accept: 'application/json', body, idempotency_key: idempotencyKey }));
        return { answer, retried: attempt > 1 };
      } catch (error) {
        if (!(error instanceof NetworkFailure)) throw error;
        lastFailure = error;
        if (attempt < DECISION_ATTEMPTS) {
          stderr.write(`warning: no answer from the service (${error.reason}); sending the same ${label.what} again with the same Idempotency-Key\n`);
          await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
        }
      }
    }
    throw new CliError(
      'service_unreachable',
      `could not reach the service at ${this.base_url} (${lastFailure?.reason ?? 'no answer'}); the ${label.what} may or may not have been recorded: ${label.check}`,
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
