import type { ApiError } from '../platform/errors.ts';

/**
 * What the pipeline asks before it spends anything on a request: whether the process's current load
 * sheds requests of this class (spec, Errors, rule 2). The operations module measures the load and
 * implements it (src/ops/load-shedding.ts).
 */

/** How protected a route is: `new_deposit` is shed first, `read` last, `never` never (slip intake). */
export type LoadClass = 'new_deposit' | 'write' | 'read' | 'never';

export interface LoadGate {
  /** The 503 to answer with when the current load sheds this class; null to go on. */
  refusal(load_class: LoadClass): ApiError | null;
}
