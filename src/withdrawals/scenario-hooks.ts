import type { JobSpec } from '../jobs/queue.ts';

/**
 * The points at which a test-mode withdrawal's sandbox scenario acts inside the withdrawal service. The
 * sandbox module implements it (src/sandbox/hooks.ts); live orders get `NO_WITHDRAWAL_SCENARIOS`, which does
 * nothing, so that the withdrawal module imports nothing of the sandbox.
 */
export interface WithdrawalScenarioHooks {
  /** True when the scenario answers a creation of this amount with 402 `insufficient_balance` (113.00 THB). */
  refusesAsInsufficient(amount_minor: number): boolean;
  /**
   * False when only the scenario's own deposits may fill the order (107.00 THB's chunks, a test-mode refund's
   * chunks): it stays out of the matching queue.
   */
  inMatchingQueue(order: ScenarioWithdrawal): boolean;
  /** The jobs of the scenario's automatic steps, written with the new order (the sandbox counterparty's first chunk). */
  afterCreation(order: ScenarioWithdrawal & { withdrawal_id: string; status: string; created_at: Date }): JobSpec[];
  /** The same, written with an order's approval: an order that waited for approval gets its first chunk from then. */
  afterApproval(order: ScenarioWithdrawal & { withdrawal_id: string; updated_at: Date }): JobSpec[];
}

/** What a scenario is chosen by: the created amount, and whether the order refunds a deposit. */
export interface ScenarioWithdrawal {
  white_label_id: string;
  amount_total_minor: number;
  refund_of_deposit_id: string | null;
}

export const NO_WITHDRAWAL_SCENARIOS: WithdrawalScenarioHooks = {
  refusesAsInsufficient: () => false,
  inMatchingQueue: () => true,
  afterCreation: () => [],
  afterApproval: () => [],
};

/** Which hooks an order of this environment gets: the composition root's choice (src/app.ts). */
export type WithdrawalScenariosFor = (livemode: boolean) => WithdrawalScenarioHooks;
