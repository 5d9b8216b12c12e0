import type { ApiError } from '../platform/errors.ts';
import type { JobSpec } from '../jobs/queue.ts';

/**
 * The points at which a test-mode deposit's sandbox scenario acts inside the deposit service (spec, Sandbox
 * scenarios: a scenario is chosen by the created amount). The sandbox module implements it
 * (src/sandbox/hooks.ts); live orders get `NO_DEPOSIT_SCENARIOS`, which does nothing, so that no sandbox rule
 * can reach a live order and the deposit module imports nothing of the sandbox.
 */
export interface DepositScenarioHooks {
  /** Before a new order is created: the scenario's answer in place of the order (115.00 THB), or null. */
  refuseCreation(order: { amount_minor: number; request_id: string | null }): ApiError | null;
  /** The lifetime the scenario fixes for a new order, in seconds; null to follow the brand's policy. */
  lifetimeSeconds(order: { amount_minor: number }): number | null;
  /** The late-slip window the scenario fixes, in milliseconds; null for the usual 24 hours. */
  lateSlipWindowMs(order: { amount_minor: number }): number | null;
  /** The jobs of the scenario's automatic steps, written with the new order. */
  afterCreation(order: { white_label_id: string; deposit_id: string; amount_minor: number; created_at: Date }): JobSpec[];
}

/** The hooks of every live order, and of a deployment without a sandbox: nothing changes, nothing is scheduled. */
export const NO_DEPOSIT_SCENARIOS: DepositScenarioHooks = {
  refuseCreation: () => null,
  lifetimeSeconds: () => null,
  lateSlipWindowMs: () => null,
  afterCreation: () => [],
};

/** Which hooks an order of this environment gets: the composition root's choice (src/app.ts). */
export type DepositScenariosFor = (livemode: boolean) => DepositScenarioHooks;
