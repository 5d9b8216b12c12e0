import type { JobSpec } from '../jobs/queue.ts';

/**
 * The points at which a test-mode withdrawal's sandbox scenario acts inside the withdrawal service. The
 * sandbox module implements it (src/sandbox/hooks.ts); live orders get `NO_WITHDRAWAL_SCENARIOS`, which does
 * nothing, so that the withdrawal module imports nothing of the sandbox.
 */
export interface WithdrawalScenarioHooks {
  /** True when the scenario answers a creation of this amount with 402 `insufficient_balance` (113.00 THB). */
  refusesAsInsufficient(amount_minor: number): boolean;
  /** False when only the scenario's own deposits may fill an order of this amount (107.00 THB's chunks): it stays out of the matching queue. */
  inMatchingQueue(amount_minor: number): boolean;
  /** The jobs of the scenario's automatic steps, written with the new order (107.00 THB's chunks). */
  afterCreation(order: { white_label_id: string; withdrawal_id: string; amount_total_minor: number; created_at: Date }): JobSpec[];
}

export const NO_WITHDRAWAL_SCENARIOS: WithdrawalScenarioHooks = {
  refusesAsInsufficient: () => false,
  inMatchingQueue: () => true,
  afterCreation: () => [],
};

/** Which hooks an order of this environment gets: the composition root's choice (src/app.ts). */
export type WithdrawalScenariosFor = (livemode: boolean) => WithdrawalScenarioHooks;
