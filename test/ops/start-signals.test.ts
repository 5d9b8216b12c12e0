import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, usingPostgres, type TestDatabase } from '../support/database.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { waitFor } from '../support/service-process.ts';

/**
 * The production start (issue 13, "The start command and signals"): `npm start` is package.json's
 * `node --import tsx src/main.ts`, and process managers run that same command directly. These tests run
 * the command exactly as package.json spells it and prove that the PID it starts is the service itself:
 * it holds the listening socket and starts no second node process, a SIGTERM to it finishes a request in flight
 * and exits 0, and a SIGKILL to it leaves nothing behind that still serves or holds the data directory.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** package.json's start script as a program and its arguments; `node` is this test's own node binary. */
function directStartCommand(): { program: string; args: string[] } {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const [program, ...args] = (manifest.scripts.start ?? '').trim().split(/\s+/);
  return { program: program ?? '', args };
}

interface Started {
  child: ChildProcessWithoutNullStreams;
  pid: number;
  port: number;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function start(environment: NodeJS.ProcessEnv): Promise<Started> {
  const command = directStartCommand();
  const child = spawn(process.execPath, command.args, { cwd: ROOT, env: environment });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await waitFor(() => {
    const match = /listening at http:\/\/localhost:(\d+)/.exec(output);
    if (child.exitCode !== null) throw new Error(`the service exited before listening:\n${output}`);
    return match ? Number(match[1]) : null;
  }, 60_000, 'the service to listen');
  if (child.pid === undefined) throw new Error('no pid');
  return { child, pid: child.pid, port, output: () => output, exited };
}

/** The pids that are children of any thread of `pid` (Linux /proc). */
function childPids(pid: number): number[] {
  const tasks = fs.readdirSync(`/proc/${pid}/task`);
  return tasks.flatMap((task) =>
    fs
      .readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((text) => text !== '')
      .map(Number),
  );
}

/** The inode of the IPv4 socket listening on this port (Linux /proc/net/tcp), or null. */
function listeningInode(port: number): string | null {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    // local_address is field 1 (ADDR:PORT in hex), st is field 3 (0A = LISTEN), inode is field 9.
    if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === '0A') return fields[9] ?? null;
  }
  return null;
}

/** The command line of a process. */
function commandLineOf(pid: number): string {
  return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
}

/**
 * The children a started service may have: tsx compiles TypeScript through esbuild's transform service,
 * a helper process it starts on a cold compile cache (it ends when its parent's pipe closes). No second
 * node process, and nothing that holds the listening socket.
 */
function expectNoServiceChild(pid: number, inode: string | null): void {
  for (const child of childPids(pid)) {
    expect(commandLineOf(child)).toMatch(/\/esbuild --service=/);
    if (inode !== null) expect(holdsSocket(child, inode)).toBe(false);
  }
}

function holdsSocket(pid: number, inode: string): boolean {
  return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
    try {
      return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`;
    } catch {
      return false;
    }
  });
}

/** Resolves true when a TCP connection to the port is accepted, false when it is refused. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

const hasProc = fs.existsSync('/proc/self/task');

describe('the direct start command (package.json start) and signals to its PID', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function environment(): Promise<{ env: NodeJS.ProcessEnv; data_dir: string }> {
    const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'pay-signals-'));
    cleanups.push(() => fs.rmSync(dataDirectory, { recursive: true, force: true }));
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', DATA_DIR: dataDirectory };
    delete env.DATABASE_URL;
    if (usingPostgres) {
      const database: TestDatabase = await createTestDatabase();
      cleanups.push(() => database.close());
      env.DATABASE_URL = database.url!;
    }
    return { env, data_dir: dataDirectory };
  }

  function track(started: Started): Started {
    cleanups.push(() => {
      if (started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGKILL');
    });
    return started;
  }

  it('is node itself, with no npm or tsx CLI process in between', () => {
    const command = directStartCommand();
    expect(command.program).toBe('node');
    expect(command.args).toEqual(['--import', 'tsx', 'src/main.ts']);
  });

  it.skipIf(!hasProc)('starts a PID that holds the listening socket (no second node process), and on SIGTERM finishes the request in flight and exits 0', async () => {
    const { env, data_dir } = await environment();
    const service = track(await start(env));
    const inode = listeningInode(service.port);
    expect(inode).not.toBeNull();
    expect(holdsSocket(service.pid, inode!)).toBe(true);
    expectNoServiceChild(service.pid, inode);

    // A signed deposit creation whose body arrives in two halves, with the SIGTERM between them.
    const credentials = JSON.parse(fs.readFileSync(path.join(data_dir, 'sandbox-credentials.json'), 'utf8')) as { api_key: string; signing_secret: string };
    const reference = `signals-${crypto.randomBytes(4).toString('hex')}`;
    const body = JSON.stringify({
      amount_minor: 25_000,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: { bank_code: '002', account_number: '5512340001', account_name_th: 'สมชาย ใจดี' },
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.7', user_agent: 'start-signals-test' },
    });
    const headers = signedHeaders({
      api_key: credentials.api_key,
      signing_secret: credentials.signing_secret,
      method: 'POST',
      target: '/v1/pay/deposits',
      body,
      idempotency_key: reference,
    });
    const socket = net.connect({ host: '127.0.0.1', port: service.port });
    let answer = '';
    socket.on('data', (chunk) => (answer += String(chunk)));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const head = [
      'POST /v1/pay/deposits HTTP/1.1',
      `Host: 127.0.0.1:${service.port}`,
      'Content-Type: application/json',
      `Content-Length: ${Buffer.byteLength(body)}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    ].join('\r\n');
    const bytes = Buffer.from(body);
    const half = Math.floor(bytes.length / 2);
    socket.write(`${head}\r\n\r\n`);
    socket.write(bytes.subarray(0, half));
    // The request is in the server's hands (its headers parsed) before the signal.
    await new Promise((resolve) => setTimeout(resolve, 300));

    process.kill(service.pid, 'SIGTERM');
    // The listener closes at once: a new connection is refused while the request in flight is kept.
    await waitFor(async () => ((await accepts(service.port)) ? null : true), 10_000, 'the listener to close');
    expect(service.child.exitCode).toBeNull();

    // The rest of the body, without half-closing: the server answers and then closes the connection.
    socket.write(bytes.subarray(half));
    await closed;
    expect(answer, service.output()).toMatch(/^HTTP\/1\.1 201 /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(await service.exited).toEqual({ code: 0, signal: null });
    expect(service.output()).toContain('"signal":"SIGTERM"');
    expect(fs.existsSync(path.join(data_dir, 'service.lock'))).toBe(false);
  }, 90_000);

  it.skipIf(!hasProc)('on SIGKILL to that PID leaves nothing serving, and the next start takes the data directory over', async () => {
    const { env, data_dir } = await environment();
    const first = track(await start(env));
    expectNoServiceChild(first.pid, listeningInode(first.port));
    process.kill(first.pid, 'SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // Nothing else was started by that PID, so nothing is left listening on its port.
    expect(listeningInode(first.port)).toBeNull();
    expect(await accepts(first.port)).toBe(false);
    if (!usingPostgres) {
      // On PGlite the killed process could not remove its lock; the lock names a dead pid.
      expect(fs.readFileSync(path.join(data_dir, 'service.lock'), 'utf8').trim()).toBe(String(first.pid));
    }

    const second = track(await start(env));
    expect(second.output()).not.toContain('in use by another process');
    const ready = await fetch(`http://127.0.0.1:${second.port}/readyz`);
    expect(ready.status).toBe(200);
    process.kill(second.pid, 'SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  }, 120_000);
});
