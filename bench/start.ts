import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createFreshDatabase, dropDatabase, fixed, intFromEnv, log, markdownTable } from './support.ts';

/**
 * `npm run bench:start`: the start of the service through tsx (`npm start`'s command) beside the build
 * (`npm run start:prod`'s command), in one run (issue 33, item 1). It builds dist/ first, then, for each of
 * BENCH_ROUNDS rounds (5 by default; the order of the two alternates), starts each command on a fresh
 * database (a fresh PGlite data directory, or a fresh PostgreSQL database when DATABASE_URL is set) and
 * measures: the first start (from spawn to the first 200 of /readyz: migrations and the sandbox included),
 * then, after a graceful stop, a restart on the same database (no migration left to apply), and the
 * process's resident memory (VmRSS) at its first ready answer and 2 s later. The commands run directly, as
 * a process manager runs them, without npm in between. The table gives medians and the build's ratios.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = intFromEnv('BENCH_ROUNDS', 5, 1, 50);
const SETTLE_MS = 2_000;

interface Variant {
  label: string;
  args: string[];
}

interface Sample {
  first_start_ms: number;
  restart_ms: number;
  rss_ready_bytes: number;
  rss_settled_bytes: number;
}

function variants(): Variant[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const of = (script: string): Variant => {
    const [program, ...args] = (manifest.scripts[script] ?? '').trim().split(/\s+/);
    if (program !== 'node') throw new Error(`package.json's ${script} script does not start with node`);
    return { label: `npm ${script === 'start' ? 'start' : `run ${script}`} (node ${args.join(' ')})`, args };
  };
  return [of('start'), of('start:prod')];
}

function residentBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

/** Starts one command, waits for its first ready answer, samples its memory and stops it gracefully. */
async function startOnce(variant: Variant, environment: NodeJS.ProcessEnv): Promise<{ ready_ms: number; rss_ready: number; rss_settled: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, variant.args, { cwd: ROOT, env: environment });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const deadline = Date.now() + 120_000;
  let port: number | null = null;
  for (let polls = 0; Date.now() < deadline; polls++) {
    if (child.exitCode !== null) throw new Error(`${variant.label} exited before it was ready:\n${output}`);
    port ??= Number(/listening at http:\/\/localhost:(\d+)/.exec(output)?.[1] ?? 0) || null;
    const answer = port === null ? null : await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
    if (answer?.status === 200) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const readyMs = performance.now() - started;
  if (port === null) throw new Error(`${variant.label} was not ready within 120 s:\n${output}`);
  const rssReady = residentBytes(child.pid!);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const rssSettled = residentBytes(child.pid!);
  child.kill('SIGTERM');
  await exited;
  return { ready_ms: readyMs, rss_ready: rssReady, rss_settled: rssSettled };
}

/** A fresh database for one round of one command, and the environment that points the service at it. */
async function freshDatabase(): Promise<{ environment: NodeJS.ProcessEnv; drop: () => Promise<void> }> {
  const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-start-'));
  const environment: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATA_DIR: dataDirectory };
  delete environment.NODE_OPTIONS;
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) return { environment, drop: async () => fs.rmSync(dataDirectory, { recursive: true, force: true }) };
  const name = `bench_start_${crypto.randomBytes(6).toString('hex')}`;
  environment.DATABASE_URL = await createFreshDatabase(serverUrl, name);
  return {
    environment,
    async drop() {
      await dropDatabase(serverUrl, name);
      fs.rmSync(dataDirectory, { recursive: true, force: true });
    },
  };
}

async function measure(variant: Variant): Promise<Sample> {
  const database = await freshDatabase();
  try {
    const first = await startOnce(variant, database.environment);
    const again = await startOnce(variant, database.environment);
    return { first_start_ms: first.ready_ms, restart_ms: again.ready_ms, rss_ready_bytes: again.rss_ready, rss_settled_bytes: again.rss_settled };
  } finally {
    await database.drop();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function report(list: Variant[], samples: Map<string, Sample[]>): string {
  const medians = list.map((variant) => {
    const of = (key: keyof Sample) => median((samples.get(variant.label) ?? []).map((sample) => sample[key]));
    return { label: variant.label, first: of('first_start_ms'), restart: of('restart_ms'), ready: of('rss_ready_bytes'), settled: of('rss_settled_bytes') };
  });
  const mib = (bytes: number) => fixed(bytes / 1024 / 1024, 1);
  const rows = medians.map((row) => [row.label, fixed(row.first, 0), fixed(row.restart, 0), mib(row.ready), mib(row.settled)]);
  const [tsx, built] = medians as [(typeof medians)[number], (typeof medians)[number]];
  rows.push(['build ÷ tsx', fixed(built.first / tsx.first, 2), fixed(built.restart / tsx.restart, 2), fixed(built.ready / tsx.ready, 2), fixed(built.settled / tsx.settled, 2)]);
  return markdownTable(['command', 'first start ms', 'restart ms', 'RSS at ready MiB', `RSS ${SETTLE_MS / 1000} s later MiB`], ['l', 'r', 'r', 'r', 'r'], rows);
}

async function main(): Promise<void> {
  log('building dist/ (npm run build)');
  const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build.js')], { cwd: ROOT, stdio: 'inherit' });
  if (built.status !== 0) throw new Error('the build failed');
  const list = variants();
  const samples = new Map<string, Sample[]>(list.map((variant) => [variant.label, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const ordered = round % 2 === 0 ? list : [...list].reverse();
    for (const variant of ordered) {
      const sample = await measure(variant);
      samples.get(variant.label)!.push(sample);
      log(`round ${round + 1}/${ROUNDS} ${variant.label}: first ${fixed(sample.first_start_ms, 0)} ms, restart ${fixed(sample.restart_ms, 0)} ms, RSS ${fixed(sample.rss_ready_bytes / 1024 / 1024, 1)} MiB`);
    }
  }
  const engine = process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite';
  process.stdout.write(`\nStart of the service on ${engine}, ${ROUNDS} rounds, medians (node ${process.version}, ${os.cpus().length} cores):\n\n${report(list, samples)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
