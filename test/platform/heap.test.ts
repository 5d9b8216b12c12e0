import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT } from '../../src/platform/heap.ts';

/**
 * The service's heap growth limit (src/platform/heap.ts, applied by src/main.ts and the benches' measured
 * processes): with it, a heap that keeps about 30 MB and promotes short-lived objects stays near twice what it
 * keeps; with V8's own factor it swells to about four times. Each case runs in a child process, since the setting
 * is process-wide. The bench (`npm run bench:deposits`) measures what it does to the service's resident memory.
 */

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');

async function peakOf(mode: 'limited' | 'default'): Promise<number> {
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'test/support/heap-churn.ts', mode], { cwd: ROOT, timeout: 60_000 });
  return (JSON.parse(stdout) as { peak_mib: number }).peak_mib;
}

describe('heap growth limit', () => {
  it(`keeps the heap of a busy process near ${1 + HEAP_GROWING_PERCENT / 100} times what it keeps, where V8 alone lets it grow to about four`, async () => {
    const limited = await peakOf('limited');
    const unlimited = await peakOf('default');
    expect(limited).toBeLessThan(190);
    expect(unlimited).toBeGreaterThan(limited * 1.25);
  }, 120_000);
});
