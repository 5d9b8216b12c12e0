import type { JobSpec } from '../jobs/queue.ts';

/**
 * The points at which a test-mode deposit's sandbox scenario acts inside the deposit service (spec, Sandbox
 * scenarios: a scenario is chosen by the created amount). The sandbox module implements it
 * (src/sandbox/hooks.ts); live orders get `NO_DEPOSIT_SCENARIOS`, which does nothing, so that no sandbox rule
 * can reach a live order and the deposit module imports nothing of the sandbox.
 */
export interface DepositScenarioHooks {
  /** The lifetime the scenario fixes for a new order, in seconds; null to follow the brand's policy. */
  lifetimeSeconds(order: { amount_minor: number }): number | null;
  /**
   * How many seconds earlier than its lifetime gives the scenario dates the order's transfer deadline; 0 for
   * none. 112.00 THB dates it before the order was made, so that its late-slip window is already closed.
   */
  deadlineDatedBackSeconds(order: { amount_minor: number }): number;
  /** The jobs of the scenario's automatic steps, written with the new order. */
  afterCreation(order: { white_label_id: string; deposit_id: string; amount_minor: number; created_at: Date }): JobSpec[];
}

/** The hooks of every live order, and of a deployment without a sandbox: nothing changes, nothing is scheduled. */
export const NO_DEPOSIT_SCENARIOS: DepositScenarioHooks = {
  lifetimeSeconds: () => null,
  deadlineDatedBackSeconds: () => 0,
  afterCreation: () => [],
};

/** Which hooks an order of this environment gets: the composition root's choice (src/app.ts). */
export type DepositScenariosFor = (livemode: boolean) => DepositScenarioHooks;
