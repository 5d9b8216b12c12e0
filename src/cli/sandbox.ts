import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { signedHeaders } from '../http/canonical.ts';
import { scrubText } from '../platform/logger.ts';
import type { SandboxTransferView } from '../sandbox/bank.ts';
import type { SlipUpload } from '../slip-capability/capability.ts';
import { CliError, loadCliConfig, networkReason, readServiceAnswer, type CliEnvironment, type TextSink } from './backends.ts';
import { writeUsageError } from './usage-error.ts';

/**
 * `npm run cli -- sandbox pay`: a sandbox payer's transfer, from the terminal. It calls the running
 * service's POST /v1/test/bank/transfers with the sandbox merchant's test key (signed exactly as a
 * merchant signs), writes the slip image the sandbox bank returns to a file, and with `--upload` also
 * uploads it to the order's upload address with a fresh capability (POST …/slip-token), as an end user
 * would. Every detail of the transfer can be changed, so each verification outcome can be produced by
 * hand. Credentials: PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, else DATA_DIR/sandbox-credentials.json
 * (written by the service's first start). Exit codes: 0 done, 1 the operation failed, 2 usage.
 */

const PROGRAM = 'npm run cli -- sandbox';
const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;
const REQUEST_TIMEOUT_MS = 30_000;

export interface SandboxCliIo {
  stdout: TextSink;
  stderr: TextSink;
  env: CliEnvironment;
  /** The working directory default slip files are written to; the process's own by default. */
  cwd?: string;
}

const OPTIONS = {
  deposit: ['dep_…', true, 'The deposit to pay (one of the sandbox merchant’s test orders).'],
  leg: ['dleg_…', false, 'The leg to pay; by default the first unpaid one.'],
  'amount-minor': ['satang', false, 'What to transfer; by default the leg’s amount (less: short-pay, more: overpayment).'],
  'sender-bank': ['004', false, 'The paying bank; with --sender-account and --sender-name, instead of the declared sender.'],
  'sender-account': ['digits', false, 'The paying account number.'],
  'sender-name': ['ชื่อ นามสกุล', false, 'The paying account’s Thai holder name (another name: a name mismatch).'],
  'sender-name-en': ['Name Surname', false, 'The paying account’s English holder name.'],
  'receiver-bank': ['014', false, 'With --receiver-account and --receiver-name: pay another account (a receiver mismatch).'],
  'receiver-account': ['digits', false, 'The receiving account number.'],
  'receiver-name': ['ชื่อ', false, 'The receiving account’s Thai holder name.'],
  at: ['timestamp', false, 'When the bank executes the transfer (RFC 3339 UTC with milliseconds); by default now.'],
  format: ['png|jpeg', false, 'The slip image format; png by default.'],
  out: ['file', false, 'Where to write the slip image; slip-<trans_ref>.<format> in the current directory by default.'],
} as const satisfies Record<string, readonly [string, boolean, string]>;

const FLAGS = {
  upload: 'Then upload the slip as the end user would (multipart to the order’s upload address).',
  json: 'Print the answer as JSON.',
} as const;

function help(): string {
  const rows = [
    ...Object.entries(OPTIONS).map(([name, [placeholder, required, text]]) => `  --${name} ${placeholder}`.padEnd(34) + `${text}${required ? ' (required)' : ''}`),
    ...Object.entries(FLAGS).map(([name, text]) => `  --${name}`.padEnd(34) + text),
  ];
  return [
    `Usage: ${PROGRAM} pay --deposit dep_… [options]`,
    '',
    'Makes a transfer in the sandbox bank to a leg of a test deposit and writes the slip image it returns.',
    '',
    'Options:',
    ...rows,
    '',
    'Credentials: PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, or DATA_DIR/sandbox-credentials.json.',
    '',
  ].join('\n');
}

class UsageError extends Error {}

const credentialsFileSchema = z.object({ base_url: z.string().min(1), api_key: z.string().min(1), signing_secret: z.string().min(1) });

/** The sandbox merchant's base URL, test key and signing secret: the environment first, then the first-start file. */
export function sandboxCredentials(env: CliEnvironment): z.infer<typeof credentialsFileSchema> {
  if (env.PG_BASE_URL && env.PG_API_KEY && env.PG_SIGNING_SECRET) {
    return { base_url: env.PG_BASE_URL, api_key: env.PG_API_KEY, signing_secret: env.PG_SIGNING_SECRET };
  }
  const filePath = path.join(path.resolve(loadCliConfig(env).data_dir), 'sandbox-credentials.json');
  let text: string;
  try {
    text = fs.readFileSync(filePath, 'utf8');
  } catch {
    throw new CliError('sandbox_credentials_missing', `no sandbox credentials: set PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, or start the service once to write ${filePath}`);
  }
  let parsed: ReturnType<typeof credentialsFileSchema.safeParse>;
  try {
    parsed = credentialsFileSchema.safeParse(JSON.parse(text));
  } catch {
    throw new CliError('sandbox_credentials_unreadable', `${filePath} is not valid JSON`);
  }
  if (!parsed.success) throw new CliError('sandbox_credentials_unreadable', `${filePath} does not hold base_url, api_key and signing_secret`);
  if (!parsed.data.api_key.startsWith('sk_test_')) throw new CliError('not_a_sandbox_key', 'sandbox commands take a test key (sk_test_…)');
  return parsed.data;
}

/** A signed merchant POST with a fresh idempotency key. */
async function signedPost<Body>(credentials: z.infer<typeof credentialsFileSchema>, target: string, body: unknown): Promise<Body> {
  const baseUrl = credentials.base_url.replace(/\/+$/, '');
  const payload = body === undefined ? '' : JSON.stringify(body);
  const headers = signedHeaders({
    api_key: credentials.api_key,
    signing_secret: credentials.signing_secret,
    method: 'POST',
    target,
    body: payload,
    idempotency_key: crypto.randomUUID(),
    timestamp_seconds: Math.floor(Date.now() / 1000),
    nonce: crypto.randomBytes(12).toString('hex'),
  });
  let response: Response;
  try {
    response = await fetch(`${baseUrl}${target}`, { method: 'POST', headers, body: payload || undefined, redirect: 'error', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  } catch (error) {
    throw new CliError('service_unreachable', `could not reach the service at ${baseUrl} (${networkReason(error)})`);
  }
  return readServiceAnswer<Body>(response);
}

/** Uploads the slip as an end user does: multipart to the capability's exact address. */
async function uploadSlip(upload: SlipUpload, image: Buffer, media_type: string): Promise<{ receipt_id: string; status: string; received_at: string }> {
  const form = new FormData();
  form.append('file', new Blob([image], { type: media_type }), `slip.${media_type.slice('image/'.length)}`);
  let response: Response;
  try {
    response = await fetch(upload.upload_url, {
      method: 'POST',
      headers: { authorization: `Bearer ${upload.token}`, 'idempotency-key': crypto.randomUUID() },
      body: form,
      redirect: 'error',
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    throw new CliError('service_unreachable', `could not reach the upload address (${networkReason(error)})`);
  }
  return readServiceAnswer(response);
}

function transferBody(values: Record<string, string | undefined>): Record<string, unknown> {
  const body: Record<string, unknown> = { deposit_id: values.deposit };
  if (values.leg !== undefined) body.leg_ref = values.leg;
  if (values['amount-minor'] !== undefined) {
    if (!/^[0-9]{1,13}$/.test(values['amount-minor'])) throw new UsageError('--amount-minor must be a whole number of satang');
    body.amount_minor = Number(values['amount-minor']);
  }
  const sender = [values['sender-bank'], values['sender-account'], values['sender-name']];
  if (sender.some((value) => value !== undefined)) {
    if (sender.some((value) => value === undefined)) throw new UsageError('--sender-bank, --sender-account and --sender-name go together');
    body.sender = {
      bank_code: values['sender-bank'],
      account_number: values['sender-account'],
      account_name_th: values['sender-name'],
      ...(values['sender-name-en'] === undefined ? {} : { account_name_en: values['sender-name-en'] }),
    };
  }
  const receiver = [values['receiver-bank'], values['receiver-account'], values['receiver-name']];
  if (receiver.some((value) => value !== undefined)) {
    if (receiver.some((value) => value === undefined)) throw new UsageError('--receiver-bank, --receiver-account and --receiver-name go together');
    body.receiver = { bank_code: values['receiver-bank'], account_number: values['receiver-account'], account_name_th: values['receiver-name'] };
  }
  if (values.at !== undefined) body.occurred_at = values.at;
  if (values.format !== undefined) {
    if (values.format !== 'png' && values.format !== 'jpeg') throw new UsageError('--format must be png or jpeg');
    body.image_format = values.format;
  }
  return body;
}

export async function runSandboxCli(argv: readonly string[], io: SandboxCliIo): Promise<number> {
  const json = argv.includes('--json');
  const usage = (message: string) => {
    writeUsageError(io.stderr, PROGRAM, message, json);
    return EXIT_USAGE;
  };
  const optionSpec: Record<string, { type: 'string' | 'boolean' }> = {};
  for (const name of Object.keys(OPTIONS)) optionSpec[name] = { type: 'string' };
  for (const name of [...Object.keys(FLAGS), 'help']) optionSpec[name] = { type: 'boolean' };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options: optionSpec, strict: true, allowPositionals: true });
  } catch (error) {
    return usage(error instanceof Error ? error.message : String(error));
  }
  // `help sandbox pay` is the same as `sandbox pay --help`.
  const words = parsed.positionals[0] === 'help' ? parsed.positionals.slice(1) : parsed.positionals;
  if (parsed.positionals[0] === 'help') parsed.values.help = true;
  const [, action, extra] = words;
  if (parsed.values.help === true || action === undefined) {
    (parsed.values.help === true ? io.stdout : io.stderr).write(help());
    return parsed.values.help === true ? EXIT_OK : EXIT_USAGE;
  }
  if (action !== 'pay') return usage(`unknown action '${action}'`);
  if (extra !== undefined) return usage(`unexpected argument '${extra}'`);
  const values: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(parsed.values)) if (typeof value === 'string') values[name] = value;
  if (values.deposit === undefined) return usage('missing required option --deposit');
  try {
    const body = transferBody(values);
    const credentials = sandboxCredentials(io.env);
    const transfer = await signedPost<SandboxTransferView>(credentials, '/v1/test/bank/transfers', body);
    const image = Buffer.from(transfer.slip.image_base64, 'base64');
    const file = path.resolve(io.cwd ?? process.cwd(), values.out ?? `slip-${transfer.trans_ref}.${transfer.slip.media_type.slice('image/'.length)}`);
    fs.writeFileSync(file, image, { mode: 0o600 });
    let receipt: { receipt_id: string; status: string; received_at: string } | null = null;
    if (parsed.values.upload === true) {
      const capability = await signedPost<SlipUpload>(credentials, `/v1/pay/deposits/${encodeURIComponent(transfer.deposit_id)}/slip-token`, undefined);
      receipt = await uploadSlip(capability, image, transfer.slip.media_type);
    }
    const answer = {
      trans_ref: transfer.trans_ref,
      sending_bank_code: transfer.sending_bank_code,
      amount_minor: transfer.amount_minor,
      occurred_at: transfer.occurred_at,
      deposit_id: transfer.deposit_id,
      leg_ref: transfer.leg_ref,
      slip_file: file,
      ...(receipt ? { receipt } : {}),
    };
    if (json) io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    else {
      const lines = [
        `transferred ${(transfer.amount_minor / 100).toFixed(2)} THB to ${transfer.leg_ref ?? transfer.deposit_id} (reference ${transfer.trans_ref})`,
        `slip written to ${file}`,
        ...(receipt ? [`uploaded: receipt ${receipt.receipt_id}, ${receipt.status} at ${receipt.received_at}`] : []),
      ];
      io.stdout.write(`${lines.join('\n')}\n`);
    }
    return EXIT_OK;
  } catch (error) {
    if (error instanceof UsageError) return usage(error.message);
    const failure = error instanceof CliError ? error : new CliError('unexpected_error', scrubText(error instanceof Error ? error.message : String(error)));
    if (json) io.stderr.write(`${JSON.stringify({ error: { code: failure.code, message: failure.message, details: failure.details } })}\n`);
    else io.stderr.write(`error: ${failure.code}: ${failure.message}\n`);
    return EXIT_FAILED;
  }
}
