import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import {
  MemoryEventStore,
  PaymentClient,
  WebhookVerificationError,
  WebhookVerifier,
  applyEvent,
  isKnownEvent,
  reconcile,
  signingKeysFrom,
  type DepositOrder,
  type PaymentEvent,
} from '@payment-transfer/sdk';

/**
 * An example merchant app on the SDK, end to end against the sandbox:
 *
 *  1. it serves `POST /webhooks`, which verifies each delivery over its raw bytes (WebhookVerifier) and
 *     applies it by the spec's receiver rules (applyEvent: dedupe by event id, newer versions only), and
 *     `GET /` with the orders as its store holds them;
 *  2. it starts `npm run cli -- listen --forward-to http://127.0.0.1:<port>/webhooks`, because the sandbox
 *     cannot reach a laptop (in production the brand registers https://your-server/webhooks instead);
 *  3. it creates a deposit with the SDK (100.00 THB by default: the sandbox pays it by itself within
 *     seconds) and prints its checkout link, the page an end user would pay on;
 *  4. it waits until a webhook says the order is final (or settled), then reconciles the events feed from
 *     where it started (every event there must already be in the store: webhooks missed none) and
 *     reports any gap, and prints the wallet balance.
 * The whole run is bounded by `wait_seconds`.
 */

export interface MerchantAppOptions {
  base_url: string;
  api_key: string;
  signing_secret: string;
  /** Where the app listens (0: any free port). */
  port: number;
  amount_minor: number;
  wait_seconds: number;
  /** The repository root, where `npm run cli` lives. */
  repository: string;
  write: (line: string) => void;
}

export interface MerchantAppResult {
  deposit: DepositOrder;
  final_status: string;
  webhooks: number;
  reconciled_events: number;
  reconciled_new: number;
  gaps: number;
}

const MAX_BODY_BYTES = 1024 * 1024;

/** The sandbox credentials: PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET, else DATA_DIR/sandbox-credentials.json (written by `npm start`). */
export function sandboxCredentials(environment: NodeJS.ProcessEnv, repository: string): { base_url: string; api_key: string; signing_secret: string } {
  if (environment.PG_BASE_URL && environment.PG_API_KEY && environment.PG_SIGNING_SECRET) {
    return { base_url: environment.PG_BASE_URL, api_key: environment.PG_API_KEY, signing_secret: environment.PG_SIGNING_SECRET };
  }
  const file = path.resolve(repository, environment.DATA_DIR ?? 'data', 'sandbox-credentials.json');
  if (!fs.existsSync(file)) throw new Error(`no sandbox credentials: start the service once (npm start) to write ${file}, or set PG_BASE_URL, PG_API_KEY and PG_SIGNING_SECRET`);
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as { base_url: string; api_key: string; signing_secret: string };
  return { base_url: parsed.base_url, api_key: parsed.api_key, signing_secret: parsed.signing_secret };
}

function describeEvent(event: PaymentEvent): string {
  if (!isKnownEvent(event)) return `${event.type} (a type this app does not know: stored, nothing else done)`;
  switch (event.type) {
    case 'deposit.created':
    case 'deposit.matched':
    case 'deposit.slip_received':
    case 'deposit.settled':
    case 'deposit.under_review':
    case 'deposit.expired':
    case 'deposit.canceled':
    case 'deposit.reversed': {
      // Decisions come from data.object.status, never from the type.
      const order = event.data.object;
      return `${event.type} ${order.id} v${order.version} ${order.status}${order.status === 'settled' ? ` credited ${order.credited_amount_minor} satang` : ''}`;
    }
    case 'balance.credited':
    case 'balance.cleared':
    case 'balance.debited':
    case 'balance.released':
    case 'balance.adjusted':
      return `${event.type} ${event.data.object.direction} ${event.data.object.amount_minor} satang (${event.data.object.type})`;
    default:
      return `${event.type} ${String((event.data.object as { id?: unknown }).id ?? '')}`;
  }
}

export async function runMerchantApp(options: MerchantAppOptions): Promise<MerchantAppResult> {
  const client = new PaymentClient({ base_url: options.base_url, api_key: options.api_key, signing_secret: options.signing_secret });
  const verifier = new WebhookVerifier({ livemode: false, keys: signingKeysFrom(options.base_url) });
  const store = new MemoryEventStore();
  let webhooks = 0;
  const waiters = new Set<() => void>();

  // 1. The merchant's server.
  const server = http.createServer((request, response) => {
    if (request.method === 'GET' && request.url === '/') {
      const rows = store.all('deposit_order').map((order) => `<li>${String(order.id)}: ${String(order.status)} (v${String(order.version)})</li>`);
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><title>Example merchant</title><h1>Orders</h1><ul>${rows.join('')}</ul>`);
      return;
    }
    if (request.method !== 'POST' || request.url !== '/webhooks') {
      response.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) request.destroy();
      else chunks.push(chunk);
    });
    request.on('end', () => {
      verifier
        .verify(Buffer.concat(chunks), request.headers)
        .then(async (event) => {
          const outcome = await applyEvent(store, event);
          webhooks += 1;
          options.write(`webhook  ${describeEvent(event)}  -> ${outcome}`);
          for (const wake of waiters) wake();
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ outcome }));
        })
        .catch((error: unknown) => {
          // Unverifiable: 400, so that the delivery counts as failed; never a 2xx.
          const reason = error instanceof WebhookVerificationError ? error.reason : 'internal_error';
          options.write(`webhook  refused: ${reason}`);
          response.writeHead(error instanceof WebhookVerificationError ? 400 : 500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: reason }));
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port, '127.0.0.1', resolve));
  const appUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  options.write(`merchant app listening at ${appUrl}/ (webhooks at ${appUrl}/webhooks)`);

  let listener: ChildProcess | null = null;
  const deadline = Date.now() + options.wait_seconds * 1000;
  try {
    // 2. Local forwarding: the sandbox's events, signed like real deliveries, to this app.
    listener = spawn(process.execPath, ['--import', 'tsx', path.join(options.repository, 'src/cli/main.ts'), 'listen', '--forward-to', `${appUrl}/webhooks`, '--interval-ms', '500'], {
      cwd: options.repository,
      // Credentials travel in the environment, never on a command line.
      env: { ...process.env, PG_BASE_URL: options.base_url, PG_API_KEY: options.api_key, PG_SIGNING_SECRET: options.signing_secret },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const child = listener;
    // What listen says (its line per event, its warnings) is kept for the report of a failed run.
    let listenOutput = '';
    child.stdout?.on('data', (chunk: Buffer) => void (listenOutput += chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => void (listenOutput += chunk.toString('utf8')));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`listen did not start: ${listenOutput}`)), Math.max(1, deadline - Date.now()));
      child.stderr?.on('data', () => {
        if (listenOutput.includes('Ready.')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`listen exited with ${code}: ${listenOutput}`));
      });
    });
    options.write('forwarding sandbox webhooks to this app (npm run cli -- listen)');

    // 3. A deposit, and its checkout link.
    const newest = await client.events.list({ order: 'desc', limit: 1 });
    const startSequence = newest.data[0]?.sequence ?? 0;
    const reference = `example-${crypto.randomBytes(4).toString('hex')}`;
    const deposit = await client.deposits.create({
      amount_minor: options.amount_minor,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: 'example-user',
      sender: { bank_code: '004', account_number: `12${crypto.randomInt(10_000_000, 99_999_999)}`, account_name_th: 'สมชาย ใจดี', account_name_en: 'Somchai Jaidee' },
      client: { device_fingerprint: `example-${reference}`, ip: '203.0.113.20', user_agent: 'example-merchant-app' },
      metadata: { example: 'merchant-app' },
    });
    options.write(`deposit ${deposit.id} created: ${deposit.status}, ${(deposit.amount_minor / 100).toFixed(2)} THB`);
    options.write(`checkout link: ${deposit.checkout_url ?? '(none: the order is waiting for liquidity; it comes with deposit.matched)'}`);

    // 4. Until a webhook brings a final (or settled) order.
    const isDone = () => {
      const stored = store.get<DepositOrder & Record<string, unknown>>('deposit_order', deposit.id);
      return stored !== null && (stored.is_terminal || stored.status === 'settled');
    };
    while (!isDone()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no final webhook for ${deposit.id} within ${options.wait_seconds} s; listen said:\n${listenOutput}`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, left);
        waiters.add(wake);
      });
    }
    const final = store.get<DepositOrder & Record<string, unknown>>('deposit_order', deposit.id)!;
    options.write(`deposit ${deposit.id} is ${final.status} (version ${final.version}), learnt from webhooks`);

    // Reconcile from where this run started: webhooks should have brought everything already.
    let reconciledNew = 0;
    const result = await reconcile({
      client,
      since_sequence: startSequence,
      on_event: async (event) => {
        if ((await applyEvent(store, event)) !== 'duplicate') reconciledNew += 1;
      },
    });
    options.write(
      `reconciled ${result.events} events after sequence ${startSequence}: ${reconciledNew} not seen by webhook, ` +
        `${result.gaps.length} gaps (${result.lost.length} lost), next run from sequence ${result.next_since_sequence}`,
    );
    const balance = await client.balance.retrieve();
    options.write(`balance: available ${balance.available_minor}, pending clearing ${balance.pending_clearing_minor}, reserved ${balance.reserved_minor} satang`);
    return { deposit, final_status: final.status, webhooks, reconciled_events: result.events, reconciled_new: reconciledNew, gaps: result.gaps.length };
  } finally {
    if (listener && listener.exitCode === null) {
      const child = listener;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGINT');
      await exited;
    }
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
