import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

/**
 * The service processes of a chaos run, each started with the production start command exactly as
 * package.json's `start` script spells it (`node --import tsx src/main.ts`, README "Operating it", under a
 * process manager), so that the PID the run signals is the service itself. A slot is one role (api or
 * worker) that is kept running: when its process dies, from the run's `kill -9` or by itself, a new
 * generation is started at once. Each generation writes its stdout and stderr to its own log file.
 */

export const ROOT = path.resolve(import.meta.dirname, '../..');
/** How long a started process may take to be ready (migrations, the QR reader's warm-up). */
const READY_TIMEOUT_MS = 90_000;
const READY_POLL_MS = 100;
/** A process that exits by itself is started again after this pause (it may be failing at start-up). */
const UNEXPECTED_EXIT_RESTART_MS = 1_000;
/** The most generations one slot may have, so that a crash loop cannot run away. */
const MAX_GENERATIONS_PER_SLOT = 1_000;

export type Role = 'api' | 'worker';

export interface Generation {
  slot: string;
  role: Role;
  generation: number;
  pid: number;
  log_path: string;
  started_at_ms: number;
  ready_at_ms: number | null;
  /** Set when the run sent SIGKILL (chaos) or SIGTERM (the graceful stop at the end). */
  signal_sent: 'SIGKILL' | 'SIGTERM' | null;
  signal_sent_at_ms: number | null;
  ended_at_ms: number | null;
  exit_code: number | null;
  exit_signal: NodeJS.Signals | null;
}

/** package.json's `start` script as arguments to this node binary. */
export function directStartArguments(): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const [program, ...args] = (manifest.scripts.start ?? '').trim().split(/\s+/);
  if (program !== 'node') throw new Error(`package.json's start script must exec node directly (found "${manifest.scripts.start}")`);
  return args;
}

function probeReady(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/readyz', timeout: 1000, agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => resolve(false));
  });
}

function logSays(log_path: string, text: string): boolean {
  try {
    return fs.readFileSync(log_path, 'utf8').includes(text);
  } catch {
    return false;
  }
}

export class Slot {
  readonly generations: Generation[] = [];
  private child: ChildProcess | null = null;
  private current: Generation | null = null;
  private readyWaiters: (() => void)[] = [];
  private stopping = false;

  constructor(
    readonly name: string,
    readonly role: Role,
    /** The API port (fixed for the whole run, so a restarted process serves the same address); null for workers. */
    readonly port: number | null,
    private readonly environment: NodeJS.ProcessEnv,
    private readonly log_directory: string,
    private readonly log: (line: string) => void,
  ) {}

  /** The generation running now (ready or starting), or null between a death and the next start. */
  running(): Generation | null {
    return this.current;
  }

  isReady(): boolean {
    return this.current !== null && this.current.ready_at_ms !== null && this.current.ended_at_ms === null;
  }

  /** Starts a new generation; resolves once it is ready. */
  async start(): Promise<Generation> {
    if (this.generations.length >= MAX_GENERATIONS_PER_SLOT) throw new Error(`${this.name}: more than ${MAX_GENERATIONS_PER_SLOT} starts`);
    const generation = this.generations.length + 1;
    const log_path = path.join(this.log_directory, `${this.name}.${String(generation).padStart(3, '0')}.log`);
    const descriptor = fs.openSync(log_path, 'a');
    const child = spawn(process.execPath, directStartArguments(), {
      cwd: ROOT,
      env: this.environment,
      stdio: ['ignore', descriptor, descriptor],
    });
    fs.closeSync(descriptor);
    if (child.pid === undefined) throw new Error(`${this.name}: spawn failed`);
    const record: Generation = {
      slot: this.name,
      role: this.role,
      generation,
      pid: child.pid,
      log_path,
      started_at_ms: Date.now(),
      ready_at_ms: null,
      signal_sent: null,
      signal_sent_at_ms: null,
      ended_at_ms: null,
      exit_code: null,
      exit_signal: null,
    };
    this.generations.push(record);
    this.child = child;
    this.current = record;
    child.on('exit', (code, signal) => {
      record.ended_at_ms = Date.now();
      record.exit_code = code;
      record.exit_signal = signal;
      if (this.current === record) {
        this.current = null;
        this.child = null;
      }
      if (this.stopping) return;
      if (record.signal_sent === 'SIGKILL') {
        // The chaos kill: started again at once, as a process manager would.
        void this.start().catch((error: unknown) => this.log(`${this.name}: restart failed: ${String(error)}`));
      } else {
        this.log(`${this.name}#${generation} (pid ${record.pid}) exited by itself: code ${code}, signal ${signal}; restarting`);
        setTimeout(() => {
          if (!this.stopping) void this.start().catch((error: unknown) => this.log(`${this.name}: restart failed: ${String(error)}`));
        }, UNEXPECTED_EXIT_RESTART_MS);
      }
    });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (record.ended_at_ms === null) {
      const ready = this.port !== null ? await probeReady(this.port) : logSays(log_path, 'Payment service listening at');
      if (ready) {
        record.ready_at_ms = Date.now();
        for (const waiter of this.readyWaiters.splice(0)) waiter();
        break;
      }
      if (Date.now() > deadline) throw new Error(`${this.name}#${generation} was not ready within ${READY_TIMEOUT_MS} ms (see ${log_path})`);
      await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
    }
    return record;
  }

  /** Resolves when a generation of this slot is ready (now or later). */
  whenReady(): Promise<void> {
    if (this.isReady()) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** `kill -9` of the running process; the exit handler starts the next generation at once. */
  kill(): Generation | null {
    const record = this.current;
    const child = this.child;
    if (!record || !child || record.ended_at_ms !== null) return null;
    record.signal_sent = 'SIGKILL';
    record.signal_sent_at_ms = Date.now();
    process.kill(record.pid, 'SIGKILL');
    return record;
  }

  /**
   * The graceful stop at the end: SIGTERM to the PID and a wait for its exit. Resolves with the record,
   * whose exit code tells whether the stop was clean (0).
   */
  async stop(timeout_ms: number): Promise<Generation | null> {
    this.stopping = true;
    const record = this.current;
    const child = this.child;
    if (!record || !child || record.ended_at_ms !== null) return null;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    record.signal_sent = 'SIGTERM';
    record.signal_sent_at_ms = Date.now();
    process.kill(record.pid, 'SIGTERM');
    const timer = setTimeout(() => {
      if (record.ended_at_ms === null) process.kill(record.pid, 'SIGKILL');
    }, timeout_ms);
    await exited;
    clearTimeout(timer);
    return record;
  }

  /** Kills whatever runs, without waiting (an aborted run). */
  abort(): void {
    this.stopping = true;
    if (this.current && this.current.ended_at_ms === null) {
      try {
        process.kill(this.current.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}
