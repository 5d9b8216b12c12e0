import type { CheckRow, RunFacts } from './checks.ts';
import type { FailoverTimes } from './standby.ts';

/**
 * The failover run's own row (issue 33, item 3): the standby was synchronous when the primary was killed,
 * and how long the service took from the SIGKILL to its first acknowledged write on the promoted standby.
 * That nothing acknowledged was lost is proven by the run's other rows (every acknowledged write exists
 * once, ledgers fold, feeds without gaps, webhooks exactly once), on the promoted standby's data.
 */

/** The issue's goal for the time from the kill to the first acknowledged write on the new primary. */
export const FAILOVER_GOAL_MS = 15_000;

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function failoverRows(facts: RunFacts, failover: FailoverTimes | null): CheckRow[] {
  if (failover === null) return [];
  const killed = failover.killed_at_ms;
  // A write sent after the kill can only have been committed on the promoted standby: the killed primary
  // answers nothing. A replayed answer is not a new write and does not count.
  const writes = facts.client.attempts
    .filter((attempt) => attempt.write && !attempt.replay && attempt.status !== null && attempt.status >= 200 && attempt.status < 300 && attempt.started_ms >= killed)
    .sort((left, right) => left.ended_ms - right.ended_ms);
  const first = writes[0];
  const bySlot = new Map<string, number>();
  for (const write of writes) if (!bySlot.has(write.slot)) bySlot.set(write.slot, write.ended_ms - killed);
  const firstJob = facts.logs.runs.filter((run) => run.started_ms >= killed).sort((left, right) => left.started_ms - right.started_ms)[0];
  const firstWriteMs = first ? first.ended_ms - killed : null;
  return [
    {
      check: `primary killed (SIGKILL) mid-load, synchronous standby promoted: first acknowledged write on the new primary within ${seconds(FAILOVER_GOAL_MS)}`,
      observed:
        `kill at +${seconds(killed - facts.load_started_ms)} (standby before the kill: ${failover.sync_state_before_kill}); promoted ${seconds(failover.promoted_at_ms - killed)} after the kill; ` +
        (first && firstWriteMs !== null
          ? `first acknowledged write ${seconds(firstWriteMs)} after the kill (${first.op} via ${first.slot}); per API process: ${[...bySlot].map(([slot, ms]) => `${slot} ${seconds(ms)}`).join(', ')}; `
          : 'no acknowledged write after the kill; ') +
        `first job run ${firstJob ? `${seconds(firstJob.started_ms - killed)} after the kill (${firstJob.task} in ${firstJob.worker})` : 'none'}; ${writes.length} writes acknowledged after the kill`,
      result: failover.sync_state_before_kill === 'sync' && firstWriteMs !== null && firstWriteMs <= FAILOVER_GOAL_MS ? 'pass' : 'FAIL',
    },
  ];
}
