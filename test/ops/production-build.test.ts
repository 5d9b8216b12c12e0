import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config.ts';
import { readMigrations } from '../../src/platform/migrate.ts';
import { usingPostgres, withDatabaseName } from '../support/database.ts';
import { waitFor } from '../support/service-process.ts';

/**
 * The build for production (issue 33, item 1): `npm run build` compiles src/ to JavaScript, and the output
 * runs on plain node, with no TypeScript loader; `npm run migrate` migrates as its own step; a start with
 * MIGRATE_ON_START=false migrates nothing and refuses a database that is behind the code's migrations.
 * The file builds once, into a directory of its own beside migrations/ (as dist/ sits in a deployment),
 * and starts the built service as real processes on a fresh PGlite data directory or PostgreSQL database.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const MIGRATION_COUNT = readMigrations().length;
let buildRoot = '';
let distDirectory = '';

beforeAll(async () => {
  fs.mkdirSync(path.join(ROOT, '.tmp'), { recursive: true });
  buildRoot = fs.mkdtempSync(path.join(ROOT, '.tmp', 'build-'));
  distDirectory = path.join(buildRoot, 'dist');
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // package.json's build command, with this file's output directory as its argument.
  const [program, ...args] = (manifest.scripts.build ?? '').trim().split(/\s+/);
  expect(program).toBe('node');
  const result = await run(process.execPath, [...args, distDirectory], ROOT, process.env);
  if (result.code !== 0) throw new Error(`the build failed:\n${result.output}`);
  // A deployment's dist/ sits beside migrations/, as src/ does.
  fs.symlinkSync(path.join(ROOT, 'migrations'), path.join(buildRoot, 'migrations'));
}, 120_000);

afterAll(() => {
  if (buildRoot !== '') fs.rmSync(buildRoot, { recursive: true, force: true });
});

interface Finished {
  code: number | null;
  output: string;
}

function run(program: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Finished> {
  return new Promise((resolve) => {
    const child = spawn(program, args, { cwd, env });
    let output = '';
    child.stdout.on('data', (chunk) => (output += String(chunk)));
    child.stderr.on('data', (chunk) => (output += String(chunk)));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

/** A database with nothing in it, and the environment that points a process at it. */
interface EmptyDatabase {
  environment: NodeJS.ProcessEnv;
  close(): Promise<void>;
}

async function emptyDatabase(): Promise<EmptyDatabase> {
  const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'pay-build-'));
  const environment: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', DATA_DIR: dataDirectory };
  // The child runs on plain node: nothing of this test runner's loaders is handed down.
  delete environment.NODE_OPTIONS;
  delete environment.DATABASE_URL;
  const serverUrl = process.env.DATABASE_URL;
  if (!usingPostgres || serverUrl === undefined) {
    return { environment, close: async () => fs.rmSync(dataDirectory, { recursive: true, force: true }) };
  }
  const name = `${process.env.PGTEST_RUN_PREFIX}_file_${crypto.randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  environment.DATABASE_URL = withDatabaseName(serverUrl, name);
  return {
    environment,
    async close() {
      const cleanup = new pg.Client({ connectionString: serverUrl });
      await cleanup.connect();
      await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await cleanup.end();
      fs.rmSync(dataDirectory, { recursive: true, force: true });
    },
  };
}

interface Started {
  pid: number;
  port: number;
  stop(): Promise<number | null>;
}

/** `node <dist>/main.js`, run from the build's directory, until it listens. */
async function startBuilt(environment: NodeJS.ProcessEnv): Promise<Started> {
  const child = spawn(process.execPath, [path.join(distDirectory, 'main.js')], { cwd: buildRoot, env: environment });
  let output = '';
  child.stdout.on('data', (chunk) => (output += String(chunk)));
  child.stderr.on('data', (chunk) => (output += String(chunk)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const port = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`the built service exited before listening:\n${output}`);
    const match = /listening at http:\/\/localhost:(\d+)/.exec(output);
    return match ? Number(match[1]) : null;
  }, 60_000, 'the built service to listen');
  return {
    pid: child.pid!,
    port,
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      process.off('exit', killOnExit);
      return code;
    },
  };
}

function commandLineOf(pid: number): string[] {
  return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((part) => part !== '');
}

describe('the production build', () => {
  it('runs on plain node with no TypeScript loader, and serves what it reads from files beside the code', async () => {
    expect(fs.existsSync(path.join(distDirectory, 'main.js'))).toBe(true);
    const sources = fs.readdirSync(distDirectory, { recursive: true }).map(String);
    expect(sources.filter((file) => file.endsWith('.ts'))).toEqual([]);
    const database = await emptyDatabase();
    const service = await startBuilt(database.environment);
    try {
      expect(commandLineOf(service.pid)).toEqual([process.execPath, path.join(distDirectory, 'main.js')]);
      const environ = fs.readFileSync(`/proc/${service.pid}/environ`, 'utf8');
      expect(environ).not.toMatch(/NODE_OPTIONS=/);
      const ready = await fetch(`http://127.0.0.1:${service.port}/readyz`);
      expect(ready.status).toBe(200);
      // The checkout page's icon is read from checkout/assets beside the compiled module.
      const icon = fs.readFileSync(path.join(ROOT, 'src', 'checkout', 'assets', 'icon.svg'));
      const iconName = `icon.${crypto.createHash('sha256').update(icon).digest('hex').slice(0, 16)}.svg`;
      const served = await fetch(`http://127.0.0.1:${service.port}/checkout/assets/${iconName}`);
      expect(served.status).toBe(200);
      expect(Buffer.from(await served.arrayBuffer()).equals(icon)).toBe(true);
      expect((await fetch(`http://127.0.0.1:${service.port}/docs`)).status).toBe(200);
    } finally {
      expect(await service.stop()).toBe(0);
      await database.close();
    }
  }, 90_000);
});

describe('migrations as their own step', () => {
  it('with MIGRATE_ON_START=false refuses an empty database in one line, and starts once the build migrated it', async () => {
    const database = await emptyDatabase();
    try {
      const environment = { ...database.environment, MIGRATE_ON_START: 'false' };
      const refused = await run(process.execPath, [path.join(distDirectory, 'main.js')], buildRoot, environment);
      expect(refused.code).toBe(1);
      const lines = refused.output.split('\n').filter((line) => line.startsWith('failed to start'));
      expect(lines).toEqual([expect.stringMatching(new RegExp(`^failed to start: the database is behind this code's migrations \\(${MIGRATION_COUNT} not applied: 0001_`))]);
      expect(refused.output).toContain('npm run migrate');
      // The refused start applied nothing: the migration step applies every one.
      const migrated = await run(process.execPath, [path.join(distDirectory, 'migrate.js')], buildRoot, database.environment);
      expect(migrated).toMatchObject({ code: 0 });
      expect(migrated.output).toContain(`Applied ${MIGRATION_COUNT} migrations`);
      const service = await startBuilt(environment);
      expect((await fetch(`http://127.0.0.1:${service.port}/readyz`)).status).toBe(200);
      expect(await service.stop()).toBe(0);
    } finally {
      await database.close();
    }
  }, 90_000);

  it('`npm run migrate` migrates as its own step, a second time applies nothing, and a start without migrating then serves', async () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const [program, ...args] = (manifest.scripts.migrate ?? '').trim().split(/\s+/);
    expect(program).toBe('node');
    const database = await emptyDatabase();
    try {
      const first = await run(process.execPath, args, ROOT, database.environment);
      expect(first.code, first.output).toBe(0);
      expect(first.output).toContain(`Applied ${MIGRATION_COUNT} migrations`);
      const second = await run(process.execPath, args, ROOT, database.environment);
      expect(second.code, second.output).toBe(0);
      expect(second.output).toContain('has every migration');
      const service = await startBuilt({ ...database.environment, MIGRATE_ON_START: 'false' });
      expect((await fetch(`http://127.0.0.1:${service.port}/healthz`)).status).toBe(200);
      expect(await service.stop()).toBe(0);
    } finally {
      await database.close();
    }
  }, 90_000);

  it('MIGRATE_ON_START is on by default and is validated like the other settings', () => {
    expect(loadConfig({}).migrate_on_start).toBe(true);
    expect(loadConfig({ MIGRATE_ON_START: 'false' }).migrate_on_start).toBe(false);
    expect(() => loadConfig({ MIGRATE_ON_START: 'no' })).toThrow(/invalid configuration: MIGRATE_ON_START/);
  });
});
