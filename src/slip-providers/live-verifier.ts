import { invariant } from '../platform/assert.ts';
import type { Database } from '../platform/db.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { BankVerifier, TransferLookup, TransferQuery } from '../verification/bank-port.ts';
import type { CachedAdapter, ProviderAdapterCache } from './adapters.ts';
import { settingsOfBrand } from './repository.ts';

/**
 * The live bank verifier of every brand: at each slip it reads the brand's provider settings and asks its
 * primary provider, then its fallback only when the primary could not answer (`unavailable`, or
 * `bank_disabled`: quota, credentials, bank switched off). A `found` or a `not_found` is an answer about the
 * transfer and is final: asking another provider after "no such transfer" would only shop for a better
 * verdict. A brand with no provider uses the deployment's generic verifier (SLIP_VERIFIER_URL), which answers
 * `not_configured` when that is unset too.
 *
 * Live only: a test-mode query here is a wiring fault (the sandbox bank answers test mode), and fails.
 * The settings are read without a transaction, and no transaction is open while a provider is asked.
 */

export interface BrandVerifierDependencies {
  database: Database;
  metrics: Metrics;
  adapters: ProviderAdapterCache;
  /** The deployment's generic verifier for brands without a provider. */
  generic: BankVerifier;
}

/** The outcomes after which the fallback is asked: the primary gave no answer about the transfer. */
function primaryCouldNotAnswer(lookup: TransferLookup): boolean {
  return lookup.outcome === 'unavailable' || lookup.outcome === 'bank_disabled';
}

function reasonOf(lookup: TransferLookup): string {
  if (lookup.outcome === 'unavailable') return lookup.reason;
  if (lookup.outcome === 'bank_disabled') return lookup.operator_alert ?? 'bank_disabled';
  return '';
}

export class BrandSlipVerifier implements BankVerifier {
  constructor(private readonly deps: BrandVerifierDependencies) {}

  async verifyTransfer(query: TransferQuery): Promise<TransferLookup> {
    invariant(query.livemode, 'a slip provider is asked about live transfers only');
    const rows = await settingsOfBrand(this.deps.database, query.white_label_id, true);
    const primary = rows.find((row) => row.slot === 'primary');
    if (primary === undefined) return this.deps.generic.verifyTransfer(query);
    const first = await this.ask(this.deps.adapters.adapterOf(primary), query);
    const fallback = rows.find((row) => row.slot === 'fallback');
    if (fallback === undefined || !primaryCouldNotAnswer(first)) return first;
    return this.ask(this.deps.adapters.adapterOf(fallback), query);
  }

  /** One provider's answer, timed and counted by provider, brand, slot and outcome. */
  private async ask(cached: CachedAdapter, query: TransferQuery): Promise<TransferLookup> {
    const labels = { provider: cached.provider, white_label_id: query.white_label_id };
    const stop = this.deps.metrics.slip_provider_request_duration_seconds.startTimer(labels);
    const lookup = await cached.adapter.verifyTransfer(query);
    stop();
    this.deps.metrics.slip_provider_lookups_total.inc({ ...labels, slot: cached.slot, outcome: lookup.outcome, reason: reasonOf(lookup) });
    return lookup;
  }
}
