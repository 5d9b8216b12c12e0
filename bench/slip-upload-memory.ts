import crypto from 'node:crypto';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import sharp from 'sharp';
import { signedHeaders } from '../src/http/canonical.ts';
import { SLIP_MAX_BYTES } from '../src/slip-capability/capability.ts';
import { fixed, intFromEnv, log, markdownTable, percentile } from './support.ts';

/**
 * `npm run bench:slip-memory`: the memory a service process takes on while many end users upload 4 MiB
 * slips at once (issue 28, item 3). For each concurrency (10 and 50 by default), a fresh service process
 * (`node --import tsx src/main.ts`, on a fresh PGlite data directory, or a fresh PostgreSQL database when
 * DATABASE_URL is set) gets that many sandbox orders, then that many multipart uploads of a 4 MiB image
 * sent at once over their own connections. The process's resident memory is sampled from /proc every
 * 10 ms; a merchant's `GET /v1/pay/balance` is sent every 100 ms meanwhile, and its latency is reported.
 *
 * BENCH_BASE_DIR names another checkout (a `git worktree` of the commit to compare with, with the same
 * node_modules): both are measured in this one run, base first, and the table gives the ratios.
 * BENCH_CONCURRENCY ("10,50") and BENCH_IMAGE_BYTES (just under max_bytes) change the load.
 */

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CURRENT_DIR = path.resolve(HERE, '..');

interface Credentials {
  api_key: string;
  signing_secret: string;
  merchant_id: string;
}

interface RunningService {
  child: ChildProcessWithoutNullStreams;
  port: number;
  credentials: Credentials;
  stop: () => Promise<void>;
}

async function waitForOutput(child: ChildProcessWithoutNullStreams, pattern: RegExp, output: () => string): Promise<RegExpExecArray> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const match = pattern.exec(output());
    if (match) return match;
    if (child.exitCode !== null) throw new Error(`the service exited:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`the service did not start:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function startService(directory: string): Promise<RunningService> {
  const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-slip-memory-'));
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATA_DIR: dataDirectory };
  let databaseName: string | null = null;
  const adminUrl = process.env.DATABASE_URL;
  if (adminUrl) {
    databaseName = `bench_slip_memory_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${databaseName}`);
    await admin.end();
    const url = new URL(adminUrl);
    url.pathname = `/${databaseName}`;
    env.DATABASE_URL = url.toString();
  }
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: directory, env });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const match = await waitForOutput(child, /listening at http:\/\/localhost:(\d+)/, () => output);
  const credentials = JSON.parse(fs.readFileSync(path.join(dataDirectory, 'sandbox-credentials.json'), 'utf8')) as Credentials;
  return {
    child,
    port: Number(match[1]),
    credentials,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dataDirectory, { recursive: true, force: true });
      if (databaseName && adminUrl) {
        const admin = new pg.Client({ connectionString: adminUrl });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
        await admin.end();
      }
    },
  };
}

function residentBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : 0;
}

function request(port: number, options: { method: string; path: string; headers: Record<string, string>; body?: Buffer }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request({ host: '127.0.0.1', port, method: options.method, path: options.path, headers: options.headers, agent: false }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

function signed(service: RunningService, method: string, target: string, body: string, idempotency_key?: string): Record<string, string> {
  return signedHeaders({ api_key: service.credentials.api_key, signing_secret: service.credentials.signing_secret, method, target, body, idempotency_key });
}

async function createOrder(service: RunningService, index: number): Promise<{ path: string; host: string; token: string }> {
  const reference = `memory-${index}-${crypto.randomBytes(4).toString('hex')}`;
  const body = JSON.stringify({
    amount_minor: 12_000,
    currency: 'THB',
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { bank_code: '002', account_number: `66${String(index).padStart(8, '0')}`, account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.7', user_agent: 'bench-slip-memory' },
  });
  const answer = await request(service.port, { method: 'POST', path: '/v1/pay/deposits', headers: { 'content-type': 'application/json', ...signed(service, 'POST', '/v1/pay/deposits', body, reference) }, body: Buffer.from(body) });
  if (answer.status !== 201) throw new Error(`deposit creation answered ${answer.status}: ${answer.body}`);
  const upload = (JSON.parse(answer.body) as { slip_upload: { token: string; upload_url: string } }).slip_upload;
  const address = new URL(upload.upload_url);
  return { path: address.pathname, host: address.host, token: upload.token };
}

/** A PNG of noise (incompressible) of at most `bytes` bytes. */
async function noisePng(bytes: number): Promise<Buffer> {
  let side = Math.floor(Math.sqrt(bytes / 3));
  for (;;) {
    const image = await sharp(crypto.randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png({ compressionLevel: 0 }).toBuffer();
    if (image.length <= bytes) return image;
    side -= 8;
  }
}

function multipart(image: Buffer): { body: Buffer; content_type: string } {
  const boundary = `bench${crypto.randomBytes(8).toString('hex')}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="slip.png"\r\nContent-Type: image/png\r\n\r\n`);
  return { body: Buffer.concat([head, image, Buffer.from(`\r\n--${boundary}--\r\n`)]), content_type: `multipart/form-data; boundary=${boundary}` };
}

interface Measurement {
  label: string;
  concurrency: number;
  baseline_rss: number;
  peak_rss: number;
  accepted: number;
  other: string;
  seconds: number;
  balance_p50_ms: number;
  balance_max_ms: number;
}

async function measure(label: string, directory: string, concurrency: number, image: Buffer): Promise<Measurement> {
  const service = await startService(directory);
  try {
    const orders = [];
    for (let index = 0; index < concurrency; index += 1) orders.push(await createOrder(service, index));
    // One small upload first: the lazily loaded modules (file-type) are in memory before the baseline.
    const warm = multipart(await noisePng(4_096));
    const warmOrder = await createOrder(service, concurrency);
    await request(service.port, { method: 'POST', path: warmOrder.path, headers: { host: warmOrder.host, authorization: `Bearer ${warmOrder.token}`, 'idempotency-key': crypto.randomUUID(), 'content-type': warm.content_type }, body: warm.body });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const pid = service.child.pid as number;
    const baseline = residentBytes(pid);
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, residentBytes(pid))), 10);
    const latencies: number[] = [];
    let probing = true;
    const probe = (async () => {
      while (probing) {
        const started = performance.now();
        await request(service.port, { method: 'GET', path: '/v1/pay/balance', headers: signed(service, 'GET', '/v1/pay/balance', '') });
        latencies.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const body = multipart(image);
    const started = performance.now();
    const answers = await Promise.all(
      orders.map((order) =>
        request(service.port, {
          method: 'POST',
          path: order.path,
          headers: { host: order.host, authorization: `Bearer ${order.token}`, 'idempotency-key': crypto.randomUUID(), 'content-type': body.content_type, 'content-length': String(body.body.length) },
          body: body.body,
        }),
      ),
    );
    const seconds = (performance.now() - started) / 1000;
    probing = false;
    await probe;
    clearInterval(sampler);
    const statuses = new Map<number, number>();
    for (const answer of answers) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    const other = [...statuses].filter(([status]) => status !== 202).map(([status, count]) => `${count}×${status}`).join(', ');
    return {
      label,
      concurrency,
      baseline_rss: baseline,
      peak_rss: peak,
      accepted: statuses.get(202) ?? 0,
      other: other || '–',
      seconds,
      balance_p50_ms: percentile([...latencies].sort((left, right) => left - right), 0.5),
      balance_max_ms: Math.max(...latencies),
    };
  } finally {
    await service.stop();
  }
}

const MIB = 1024 * 1024;

async function main(): Promise<void> {
  const concurrencies = (process.env.BENCH_CONCURRENCY ?? '10,50').split(',').map((text) => Number(text.trim()));
  const imageBytes = intFromEnv('BENCH_IMAGE_BYTES', SLIP_MAX_BYTES - 1024, 1024, SLIP_MAX_BYTES);
  const image = await noisePng(imageBytes);
  const targets: [string, string][] = [];
  if (process.env.BENCH_BASE_DIR) targets.push(['base', path.resolve(process.env.BENCH_BASE_DIR)]);
  targets.push(['current', CURRENT_DIR]);
  log(`slip upload memory: image ${image.length} bytes, engine ${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'}, targets ${targets.map(([label, directory]) => `${label}=${directory}`).join(' ')}`);
  const rows: Measurement[] = [];
  for (const concurrency of concurrencies) {
    for (const [label, directory] of targets) {
      const measured = await measure(label, directory, concurrency, image);
      log(`${label} ×${concurrency}: +${fixed((measured.peak_rss - measured.baseline_rss) / MIB, 0)} MiB peak over ${fixed(measured.baseline_rss / MIB, 0)} MiB, ${measured.accepted} accepted in ${fixed(measured.seconds, 1)} s`);
      rows.push(measured);
    }
  }
  const growth = (row: Measurement) => (row.peak_rss - row.baseline_rss) / MIB;
  const base = (row: Measurement) => rows.find((other) => other.label === 'base' && other.concurrency === row.concurrency);
  console.log(
    markdownTable(
      ['code', 'uploads at once', 'RSS before (MiB)', 'peak RSS (MiB)', 'added (MiB)', 'added ÷ base', '202', 'other answers', 'all answered (s)', 'balance p50 / max (ms)'],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'l', 'r', 'r'],
      rows.map((row) => [
        row.label,
        String(row.concurrency),
        fixed(row.baseline_rss / MIB, 0),
        fixed(row.peak_rss / MIB, 0),
        fixed(growth(row), 0),
        base(row) && row.label !== 'base' ? `${fixed(growth(row) / growth(base(row) as Measurement), 2)}×` : '–',
        String(row.accepted),
        row.other,
        fixed(row.seconds, 1),
        `${fixed(row.balance_p50_ms, 0)} / ${fixed(row.balance_max_ms, 0)}`,
      ]),
    ),
  );
}

await main();
