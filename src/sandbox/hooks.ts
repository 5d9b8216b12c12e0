import { NO_DEPOSIT_SCENARIOS, type DepositScenarioHooks } from '../deposits/scenario-hooks.ts';
import { NO_WITHDRAWAL_SCENARIOS, type WithdrawalScenarioHooks } from '../withdrawals/scenario-hooks.ts';
import {
  SANDBOX_INSUFFICIENT_BALANCE_AMOUNT_MINOR,
  sandboxScenarioOf,
  scenarioDeadlineDatedBackSeconds,
  scenarioExpiresInSeconds,
  scenarioGatewayRoute,
  sandboxFillOf,
  scenarioStartJob,
  scenarioWithdrawalApprovedJob,
  scenarioWithdrawalStartJob,
} from './scenario-table.ts';

/**
 * The sandbox's side of the scenario hooks the deposit and withdrawal services call at their named points
 * (src/deposits/scenario-hooks.ts, src/withdrawals/scenario-hooks.ts). The composition root gives these to
 * test-mode orders only; every rule here is the spec's table (src/sandbox/scenario-table.ts).
 */
export const SANDBOX_DEPOSIT_SCENARIOS: DepositScenarioHooks = {
  lifetimeSeconds: (order) => scenarioExpiresInSeconds(false, order.amount_minor),
  deadlineDatedBackSeconds: (order) => scenarioDeadlineDatedBackSeconds(false, order.amount_minor),
  afterCreation: (order) => scenarioStartJob({ ...order, livemode: false }),
  gatewayRoute: (order) => scenarioGatewayRoute(false, order.amount_minor),
};

export const SANDBOX_WITHDRAWAL_SCENARIOS: WithdrawalScenarioHooks = {
  refusesAsInsufficient: (amount_minor) => sandboxScenarioOf('withdrawal', false, amount_minor)?.amount_minor === SANDBOX_INSUFFICIENT_BALANCE_AMOUNT_MINOR,
  // 107.00 THB and test-mode refunds: another merchant's deposit filling part of it would change the count of
  // chunks the sandbox promises (and fill 117.00 THB, which the sandbox leaves unfilled).
  inMatchingQueue: (order) => sandboxFillOf({ ...order, livemode: false }) === null,
  afterCreation: (order) => scenarioWithdrawalStartJob({ ...order, livemode: false }),
  afterApproval: (order) => scenarioWithdrawalApprovedJob({ ...order, livemode: false }),
};

/** The deposit hooks of an environment: the sandbox's in test mode, none in live mode. */
export function depositScenariosFor(livemode: boolean): DepositScenarioHooks {
  return livemode ? NO_DEPOSIT_SCENARIOS : SANDBOX_DEPOSIT_SCENARIOS;
}

/** The withdrawal hooks of an environment: the sandbox's in test mode, none in live mode. */
export function withdrawalScenariosFor(livemode: boolean): WithdrawalScenarioHooks {
  return livemode ? NO_WITHDRAWAL_SCENARIOS : SANDBOX_WITHDRAWAL_SCENARIOS;
}
