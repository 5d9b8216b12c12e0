import v8 from 'node:v8';
import { limitHeapGrowth } from '../../src/platform/heap.ts';

/**
 * Run by test/platform/heap.test.ts in a child process: a service-like heap (about 30 MB that stays, and objects that
 * live long enough to be promoted out of the young generation, then die, as a request's objects do under
 * load), with or without the service's heap setting. Prints the largest used heap seen, in MiB.
 */
if (process.argv[2] === 'limited') limitHeapGrowth();
const kept: { id: number; text: string }[] = [];
for (let index = 0; index < 200_000; index += 1) kept.push({ id: index, text: `${'x'.repeat(64)}${index}` });
const recent: unknown[] = new Array(50_000);
let peak_bytes = 0;
for (let index = 0; index < 6_000_000; index += 1) {
  recent[index % recent.length] = { index, text: `${'y'.repeat(40)}${index}` };
  if (index % 1000 === 0) peak_bytes = Math.max(peak_bytes, v8.getHeapStatistics().used_heap_size);
}
process.stdout.write(`${JSON.stringify({ peak_mib: Math.round(peak_bytes / 1048576), kept: kept.length })}\n`);
