import type { JobSpec } from '../jobs/queue.ts';

/**
 * A route to the external gateway that a scenario gives an order instead of matching it: the gateway account
 * (one of the sandbox bank, so that the end user's slips verify against that bank) and the amounts of the legs
 * to it, which sum to the order's amount. The brand's policy is not read for it and not changed by it.
 */
export interface ScenarioGatewayRoute {
  account: { bank_code: string; account_number: string; account_name_th: string };
  legs_minor: readonly number[];
}

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
  /**
   * The gateway route the scenario gives the order (104.00 THB: the fallback route of two legs), or null to match
   * it as any order. Read when the order is matched and whenever a gateway leg's full payee is needed.
   */
  gatewayRoute(order: { amount_minor: number }): ScenarioGatewayRoute | null;
}

/** The hooks of every live order, and of a deployment without a sandbox: nothing changes, nothing is scheduled. */
export const NO_DEPOSIT_SCENARIOS: DepositScenarioHooks = {
  lifetimeSeconds: () => null,
  deadlineDatedBackSeconds: () => 0,
  afterCreation: () => [],
  gatewayRoute: () => null,
};

/** Which hooks an order of this environment gets: the composition root's choice (src/app.ts). */
export type DepositScenariosFor = (livemode: boolean) => DepositScenarioHooks;
