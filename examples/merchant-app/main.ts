import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { runMerchantApp, sandboxCredentials } from './app.ts';

/**
 * `npm run example:merchant-app [-- --amount-minor 10000 --wait-seconds 90 --port 3000]`: runs the example
 * merchant app once against the sandbox (see app.ts and README.md) and exits 0 when the deposit reached
 * a final state by webhook and the feed was reconciled, 1 otherwise.
 */
const repository = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values } = parseArgs({
  options: { 'amount-minor': { type: 'string' }, 'wait-seconds': { type: 'string' }, port: { type: 'string' } },
  strict: true,
});
const write = (line: string) => void process.stdout.write(`${line}\n`);

try {
  const credentials = sandboxCredentials(process.env, repository);
  const result = await runMerchantApp({
    ...credentials,
    port: Number(values.port ?? process.env.PORT ?? 3000),
    amount_minor: Number(values['amount-minor'] ?? 10_000),
    wait_seconds: Number(values['wait-seconds'] ?? 90),
    repository,
    write,
  });
  write(`done: ${result.deposit.id} ${result.final_status}; ${result.webhooks} webhooks; reconciliation found ${result.reconciled_new} not yet delivered and ${result.gaps} gaps`);
} catch (error) {
  process.stderr.write(`example failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
