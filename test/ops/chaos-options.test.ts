import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The chaos run's options (scripts/chaos/main.ts), through the door an operator uses: the command line. `--help`
 * prints the options and exits 0; a wrong option is named in one line, followed by the usage, with exit code 2 and
 * no stack trace. Neither starts a database or a process of the service.
 */

const ROOT = path.resolve(import.meta.dirname, '..', '..');

function chaos(...args: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'scripts/chaos/main.ts', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
}

describe('npm run chaos options', () => {
  it('--help and -h print every option and exit 0', () => {
    for (const flag of ['--help', '-h']) {
      const run = chaos(flag);
      expect(run.status, run.stderr).toBe(0);
      for (const option of ['--duration', '--kill-every', '--pg-restart', '--pg-down', '--pg-restart-command', '--failover', '--flows', '--merchants', '--drain-timeout', '--webhook-failure-rate', '--webhook-hang-rate', '--keep', '--pgbouncer']) {
        expect(run.stdout).toContain(option);
      }
      expect(run.stderr).toBe('');
    }
  });

  it('a wrong option or value is named in one line, with the usage, exit 2 and no stack trace', () => {
    for (const args of [['--bogus'], ['--duration', '5'], ['--kill-every', '9-3'], ['--flows']]) {
      const run = chaos(...args);
      expect(run.status, `${args.join(' ')}: ${run.stderr}`).toBe(2);
      expect(run.stderr.split('\n')[0]).toMatch(/^chaos: /);
      expect(run.stderr).toContain('Usage: npm run chaos');
      expect(run.stderr).not.toMatch(/\n\s+at /);
    }
  });

  it('--failover with --pg-restart is refused: they are two different runs', () => {
    const run = chaos('--failover', '--pg-restart');
    expect(run.status, run.stderr).toBe(2);
    expect(run.stderr.split('\n')[0]).toBe('chaos: --failover and --pg-restart are two different runs: choose one');
  });
});
