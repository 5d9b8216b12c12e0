import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * A program from Debian's packages that some tests need (chromium, pgbouncer), installed by its
 * `scripts/ensure-<name>.sh` when it is missing, so that `npm install && npm test` on a fresh machine runs
 * those tests too. With CI=true a program that cannot be installed is an error (a green CI must mean the
 * tests ran); elsewhere null, with the reason on stderr, and the caller skips.
 */
export function ensureDebianProgram(options: { name: string; program_path: string; path_variable: string; skipped_label: string }): string | null {
  const { name, program_path, path_variable } = options;
  if (fs.existsSync(program_path)) return program_path;
  const script = `scripts/ensure-${name}.sh`;
  const result = spawnSync('bash', [path.join(ROOT, script)], { encoding: 'utf8', timeout: 15 * 60 * 1000, env: { ...process.env, [path_variable]: program_path } });
  if (result.status === 0 && fs.existsSync(program_path)) return program_path;
  const reason = `${name} is not installed at ${program_path} and ${script} could not install it (exit ${result.status}): ${(result.stderr || String(result.error ?? '')).trim().slice(-2000)}`;
  if (process.env.CI === 'true') throw new Error(reason);
  process.stderr.write(`[${options.skipped_label} skipped] ${reason}\n`);
  return null;
}
