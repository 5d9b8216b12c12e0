import v8 from 'node:v8';

/**
 * How far V8 lets the JavaScript heap grow past what the last full collection kept, in percent: 100 lets it
 * double. V8's own factor reaches 4 when the process is busy, and a service under load keeps little (about
 * 35 MB live at the maximum deposit rate) but allocates fast, so its heap swelled to about 145 MB between full
 * collections, and the process's resident memory to 279–288 MiB, over the 250 MB that issue 15 allows. With 100,
 * measured in the same bench: 216 MiB, the same CPU per request (docs/benchmarks.md, "fifth slice"); full
 * collections come about three times as often and take 3–10 ms each, a fraction of a per cent of the CPU.
 */
export const HEAP_GROWING_PERCENT = 100;

/**
 * Applies the service's heap growth limit to this process. Called once, first thing, by every process that runs
 * the service (`src/main.ts`, the benches' measured processes); V8 reads the setting each time it sets the next
 * collection's limit, so a process that has started already takes it from its next collection on.
 */
export function limitHeapGrowth(): void {
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
