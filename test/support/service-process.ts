import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, usingPostgres, type TestDatabase } from './database.ts';
import type { MerchantCredentials } from './app.ts';

/**
 * The service as its own process, started with package.json's start command on a fresh data directory
 * (and, when the suite runs on PostgreSQL, a fresh database), for tests whose claim is about the process:
 * that it keeps answering whatever a client does to it over a socket.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface ServiceProcess {
  port: number;
  pid: number;
  child: ChildProcessWithoutNullStreams;
  /** Everything the process printed so far. */
  output(): string;
  /** The sandbox merchant the first start created. */
  credentials: MerchantCredentials;
  /** The platform administrator's back-office token the first start wrote. */
  operator_token: string;
  alive(): boolean;
  stop(): Promise<void>;
}

export async function waitFor<T>(probe: () => T | null | Promise<T | null>, timeout_ms: number, what: string): Promise<T> {
  const deadline = Date.now() + timeout_ms;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function startServiceProcess(extra_environment: Record<string, string> = {}): Promise<ServiceProcess> {
  const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'pay-process-'));
  const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATA_DIR: dataDirectory, ...extra_environment };
  delete env.DATABASE_URL;
  let database: TestDatabase | null = null;
  if (usingPostgres) {
    database = await createTestDatabase();
    env.DATABASE_URL = database.url!;
  }
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const [, ...args] = (manifest.scripts.start ?? '').trim().split(/\s+/);
  const child = spawn(process.execPath, args, { cwd: ROOT, env });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  // A test run that ends without calling stop (a timeout, an interrupt) leaves no service behind.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  void exited.then(() => process.off('exit', killOnExit));
  const port = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`the service exited before listening:\n${output}`);
    const match = /listening at http:\/\/localhost:(\d+)/.exec(output);
    return match ? Number(match[1]) : null;
  }, 90_000, 'the service to listen');
  const credentials = JSON.parse(fs.readFileSync(path.join(dataDirectory, 'sandbox-credentials.json'), 'utf8')) as MerchantCredentials;
  const operator = JSON.parse(fs.readFileSync(path.join(dataDirectory, 'operator-credentials.json'), 'utf8')) as { token: string };
  return {
    operator_token: operator.token,
    port,
    pid: child.pid!,
    child,
    output: () => output,
    credentials,
    alive: () => child.exitCode === null && child.signalCode === null,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(timer);
      }
      await database?.close();
      fs.rmSync(dataDirectory, { recursive: true, force: true });
    },
  };
}

export interface RawAnswer {
  status: number | null;
  headers: Map<string, string>;
  body: string;
  /** Bytes the service wrote before it closed the connection (an interim 100 included). */
  raw: string;
}

export function parseRawAnswer(raw: string): RawAnswer {
  // An interim `100 Continue` comes before the final answer.
  const text = raw.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
  const split = text.indexOf('\r\n\r\n');
  const head = split === -1 ? text : text.slice(0, split);
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers = new Map(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
  return { status: status ? Number(status[1]) : null, headers, body: split === -1 ? '' : text.slice(split + 4), raw };
}

/**
 * Writes `bytes` on a fresh connection, half-closes it when `end_after_write` (a client that stops
 * sending), and reads until the service closes it, or until `timeout_ms`, when the socket is destroyed.
 */
export function exchangeRaw(port: number, bytes: Buffer, options: { end_after_write?: boolean; timeout_ms?: number } = {}): Promise<RawAnswer & { timed_out: boolean }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, options.timeout_ms ?? 10_000);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ ...parseRawAnswer(Buffer.concat(chunks).toString('utf8')), timed_out: timedOut });
    });
    socket.write(bytes, () => {
      if (options.end_after_write) socket.end();
    });
  });
}

/** An HTTP/1.1 request's head, ending in the blank line, with `Connection: close`. */
export function requestHead(method: string, target: string, headers: Record<string, string>): Buffer {
  const lines = [`${method} ${target} HTTP/1.1`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), 'Connection: close', '', ''];
  return Buffer.from(lines.join('\r\n'));
}
