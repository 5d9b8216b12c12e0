import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The import graph of `src/` (issue 29, docs/architecture.md): dependencies point down. The platform
 * imports nothing of the service; the HTTP layer imports only the platform; every module may import those
 * two; the composition roots (`src/app.ts`, `src/main.ts`) may import anything. Every other arrow from one
 * module (a folder of `src/`) to another must be in `ALLOWED`, and every arrow in `ALLOWED` must still
 * exist: the list is a ratchet that may only shrink, so removing an import removes its line here too. A module
 * that a change creates comes with its arrows in that change (issue 29 moved settlement out of deposits into
 * `settlement/`, above deposits, withdrawals, the ledger and fees, and disputes out of withdrawals into
 * `disputes/`: the arrows from withdrawals back to deposits and review went with them, and with them the cycle;
 * the slip capability moved out of `slips/` into `slip-capability/`, below deposits and slips, and the opened
 * claim's schema into `deposits/`, which owns the claim: the last cycle went with them). No arrow may close a
 * cycle of modules again: dependencies then point one way only.
 */

const SRC = path.resolve(import.meta.dirname, '..', '..', 'src');
const COMPOSITION_ROOT = '(root)';
const LOWER_LAYERS = new Set(['platform', 'http']);

/** Today's arrows between modules, each a dependency someone may remove and nobody may add. */
const ALLOWED = new Set([
  'backoffice-console -> checkout',
  'backoffice-console -> deposits',
  'backoffice-console -> disputes',
  'backoffice-console -> events',
  'backoffice-console -> ledger',
  'backoffice-console -> review',
  'backoffice-console -> tenancy',
  'backoffice-console -> verification',
  'backoffice-console -> webhooks',
  'backoffice-console -> withdrawals',
  'bank-directory -> banks',
  'beneficiaries -> bank-directory',
  'beneficiaries -> banks',
  'beneficiaries -> events',
  'beneficiaries -> jobs',
  'checkout -> banks',
  'checkout -> deposits',
  'checkout -> idempotency',
  'checkout -> sandbox',
  'checkout -> slip-capability',
  'checkout -> slips',
  'checkout -> tenancy',
  'cli -> (root)',
  'cli -> events',
  'cli -> key-rotation',
  'cli -> review',
  'cli -> sandbox',
  'cli -> slip-capability',
  'cli -> slip-providers',
  'cli -> slips',
  'cli -> tenancy',
  'cli -> test-clocks',
  'cli -> webhooks',
  'cli -> withdrawals',
  'deposits -> banks',
  'deposits -> beneficiaries',
  'deposits -> events',
  'deposits -> fees',
  'deposits -> jobs',
  'deposits -> ledger',
  'deposits -> matching',
  'deposits -> slip-capability',
  'deposits -> tenancy',
  'deposits -> withdrawals',
  'disputes -> deposits',
  'disputes -> jobs',
  'disputes -> ledger',
  'disputes -> review',
  'disputes -> settlement',
  'disputes -> tenancy',
  'disputes -> withdrawals',
  'events -> jobs',
  'jobs -> ops',
  'key-rotation -> backoffice-console',
  'key-rotation -> beneficiaries',
  'key-rotation -> deposits',
  'key-rotation -> events',
  'key-rotation -> idempotency',
  'key-rotation -> slip-providers',
  'key-rotation -> slips',
  'key-rotation -> tenancy',
  'key-rotation -> webhooks',
  'ledger -> events',
  'ledger -> jobs',
  'ledger -> tenancy',
  'matching -> banks',
  'matching -> beneficiaries',
  'matching -> events',
  'matching -> withdrawals',
  'refunds -> beneficiaries',
  'refunds -> deposits',
  'refunds -> slips',
  'refunds -> tenancy',
  'refunds -> withdrawals',
  'review -> deposits',
  'review -> events',
  'review -> refunds',
  'review -> settlement',
  'review -> slips',
  'review -> tenancy',
  'review -> verification',
  'review -> withdrawals',
  'sandbox -> banks',
  'sandbox -> beneficiaries',
  'sandbox -> deposits',
  'sandbox -> events',
  'sandbox -> fees',
  'sandbox -> jobs',
  'sandbox -> ledger',
  'sandbox -> matching',
  'sandbox -> review',
  'sandbox -> slip-capability',
  'sandbox -> slips',
  'sandbox -> tenancy',
  'sandbox -> verification',
  'sandbox -> withdrawals',
  'settlement -> deposits',
  'settlement -> fees',
  'settlement -> jobs',
  'settlement -> ledger',
  'settlement -> withdrawals',
  'slip-providers -> ops',
  'slip-providers -> verification',
  'slips -> banks',
  'slips -> deposits',
  'slips -> idempotency',
  'slips -> jobs',
  'slips -> slip-capability',
  'test-clocks -> events',
  'test-clocks -> jobs',
  'test-clocks -> tenancy',
  'test-vectors -> webhooks',
  'verification -> bank-directory',
  'verification -> banks',
  'verification -> beneficiaries',
  'verification -> deposits',
  'verification -> jobs',
  'verification -> ops',
  'verification -> settlement',
  'verification -> slips',
  'webhooks -> events',
  'webhooks -> ops',
  'webhooks -> tenancy',
  'withdrawals -> beneficiaries',
  'withdrawals -> events',
  'withdrawals -> fees',
  'withdrawals -> jobs',
  'withdrawals -> ledger',
  'withdrawals -> tenancy',
]);

function sourceFiles(directory: string): string[] {
  return fs.readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** The module a file of `src/` belongs to: its first folder, or the composition root for `src/*.ts`. */
function moduleOf(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  return parts.length > 1 ? (parts[0] as string) : COMPOSITION_ROOT;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+'(\.[^']+)'/g;

/** Every arrow between two modules, with one file that makes it. */
function arrows(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles(SRC)) {
    const from = moduleOf(file);
    for (const match of fs.readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const to = moduleOf(path.resolve(path.dirname(file), match[1] as string));
      if (to !== from) found.set(`${from} -> ${to}`, path.relative(SRC, file));
    }
  }
  return found;
}

describe('the import graph of src/', () => {
  const graph = arrows();

  it('the platform imports nothing of the service, and the HTTP layer only the platform', () => {
    const upward = [...graph].filter(([arrow]) => {
      const [from, to] = arrow.split(' -> ') as [string, string];
      return (from === 'platform' && to !== 'platform') || (from === 'http' && !LOWER_LAYERS.has(to));
    });
    expect(upward).toEqual([]);
  });

  it('has no arrow between modules beyond the allowed list', () => {
    const extra = [...graph]
      .filter(([arrow]) => {
        const [from, to] = arrow.split(' -> ') as [string, string];
        return from !== COMPOSITION_ROOT && !LOWER_LAYERS.has(to) && !LOWER_LAYERS.has(from) && !ALLOWED.has(arrow);
      })
      .map(([arrow, file]) => `${arrow} (src/${file})`);
    expect(extra).toEqual([]);
  });

  it('has no cycle of modules: following the arrows never leads back to where it started', () => {
    const next = new Map<string, string[]>();
    for (const arrow of graph.keys()) {
      const [from, to] = arrow.split(' -> ') as [string, string];
      if (from !== COMPOSITION_ROOT) next.set(from, [...(next.get(from) ?? []), to]);
    }
    // Depth-first, with the path walked so far: a module met again on its own path closes a cycle.
    const cycles: string[] = [];
    const finished = new Set<string>();
    const walk = (module: string, trail: string[]): void => {
      if (trail.includes(module)) {
        cycles.push([...trail.slice(trail.indexOf(module)), module].join(' -> '));
        return;
      }
      if (finished.has(module)) return;
      for (const to of next.get(module) ?? []) walk(to, [...trail, module]);
      finished.add(module);
    };
    for (const module of next.keys()) walk(module, []);
    expect(cycles).toEqual([]);
  });

  it('keeps no allowed arrow that no import makes any more (the list only shrinks)', () => {
    expect([...ALLOWED].filter((arrow) => !graph.has(arrow))).toEqual([]);
  });
});
