import { performance } from 'node:perf_hooks';
import { z } from 'zod';
import { activeTestClock, type Clock, type TestClockScope } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { ReadPart } from '../platform/read-part.ts';
import { ApiError, validationError } from '../platform/errors.ts';
import { invariant } from '../platform/assert.ts';
import { newId } from '../platform/ids.ts';
import { DAY_MS, formatTimestamp, parseTimestamp } from '../platform/time.ts';
import { type EventsService } from '../events/service.ts';
import { SYSTEM_CAUSE, type EventCause } from '../platform/cause.ts';
import { applyTransition, TransitionTable } from '../events/transition.ts';
import { scheduleJob, testClockHasDueJob, testClockHasLeasedJob, type ClaimedJob, type JobHandler, type JobSpec } from '../jobs/index.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { Actor } from '../platform/access.ts';
import * as repository from './repository.ts';
import type { AdvanceOutcome, ClockListFilter, ClockScopeFilter, TestClockRow, TestClockStatus } from './repository.ts';
import type { AttachedClock, TestClockScopes } from '../http/ports.ts';

/**
 * Sandbox test clocks (Stripe's test clocks are the model). A merchant creates a clock at a frozen
 * instant and attaches it to its sandbox: from then on its test-mode requests run inside the clock's
 * scope (src/platform/clock.ts), so the objects they create carry the clock's time and every deadline
 * they schedule is a job stamped with the clock (src/jobs/queue.ts). The ordinary worker never runs
 * those jobs; advancing the clock does, asynchronously: the advance request records the target and
 * enqueues an ordinary job, which runs the clock's due jobs one at a time in order of run_at through
 * the worker's own path, each at its own instant, then sets the clock's time to the target.
 *
 * The clock's own rows, events and audit rows are written in real time (never inside a scope): the
 * routes of this module run outside the attached clock, and the advance job is a real-time job.
 */

export const TEST_CLOCK_ADVANCE_TASK = 'test_clocks.advance';
/** How far one advance may move a clock: enough for every deadline of the service (92 h of webhook retries, 72 h clearing). */
export const MAX_ADVANCE_SPAN_MS = 60 * DAY_MS;
/** How far from the real now a new clock may start, in either direction. */
export const MAX_START_OFFSET_MS = 365 * DAY_MS;
/** The most job runs one advance makes; past it the clock stops at the last time reached and says so. */
export const MAX_JOB_RUNS_PER_ADVANCE = 10_000;
/**
 * An advance runs in slices, each one job of the queue, so that no single job holds its lease for longer
 * than the worker renews it (10 minutes) and a stopping worker hands the rest to another process.
 */
const SLICE_MAX_JOB_RUNS = 500;
/** A slice also ends after this much process time (not clock time: it bounds work, it is no deadline). */
const SLICE_MAX_MS = 60_000;
/** A slice job that fails (the database restarting) is retried with the queue's backoff this many times. */
const SLICE_MAX_ATTEMPTS = 20;

const ADVANCE_ACTOR: Actor = { actor_type: 'system', actor_id: TEST_CLOCK_ADVANCE_TASK, request_id: null };

/** The clock's status moves: `ready` and `advancing`; attach and detach keep the status they find. */
export const TEST_CLOCK_TRANSITIONS = new TransitionTable<TestClockStatus>('test_clock', ['ready', 'advancing'], [
  { from: null, to: 'ready', trigger: 'create' },
  { from: 'ready', to: 'ready', trigger: 'attach' },
  { from: 'ready', to: 'ready', trigger: 'detach' },
  { from: 'advancing', to: 'advancing', trigger: 'attach' },
  { from: 'advancing', to: 'advancing', trigger: 'detach' },
  { from: 'ready', to: 'advancing', trigger: 'advance' },
  { from: 'advancing', to: 'ready', trigger: 'advance_finished' },
]);

/** The merchant's view of a clock (`object: "test_clock"`). */
export interface TestClockView {
  [field: string]: unknown;
  id: string;
  object: 'test_clock';
  version: number;
  name: string | null;
  frozen_time: string;
  status: TestClockStatus;
  /** Present while advancing: where to. */
  status_details?: { advancing: { target_frozen_time: string } };
  attached: boolean;
  /** The last finished advance: what was asked, where the clock stopped, how many jobs ran. Null before the first. */
  last_advance: {
    requested_frozen_time: string;
    reached_frozen_time: string;
    job_runs: number;
    outcome: AdvanceOutcome;
    finished_at: string;
  } | null;
  livemode: false;
  created_at: string;
}

/** The back office's view: the merchant's, plus whose clock it is and when it last changed. */
export interface BackofficeTestClockView extends TestClockView {
  white_label_id: string;
  merchant_id: string;
  updated_at: string;
}

export function testClockView(row: TestClockRow): TestClockView {
  const last = row.last_advance_outcome;
  return {
    id: row.test_clock_id,
    object: 'test_clock',
    version: row.version,
    name: row.name,
    frozen_time: formatTimestamp(row.frozen_time),
    status: row.status,
    ...(row.status === 'advancing' && row.advance_target ? { status_details: { advancing: { target_frozen_time: formatTimestamp(row.advance_target) } } } : {}),
    attached: row.attached,
    // The frozen time moves only when an advance finishes, so the last one reached the current frozen_time.
    last_advance:
      last && row.last_advance_requested_time && row.last_advance_finished_at
        ? {
            requested_frozen_time: formatTimestamp(row.last_advance_requested_time),
            reached_frozen_time: formatTimestamp(row.frozen_time),
            job_runs: row.last_advance_job_runs ?? 0,
            outcome: last,
            finished_at: formatTimestamp(row.last_advance_finished_at),
          }
        : null,
    livemode: false,
    created_at: formatTimestamp(row.created_at),
  };
}

export function backofficeTestClockView(row: TestClockRow): BackofficeTestClockView {
  return { ...testClockView(row), white_label_id: row.white_label_id, merchant_id: row.merchant_id, updated_at: formatTimestamp(row.updated_at) };
}

/** The sandbox a merchant request acts in. */
export interface SandboxAccount {
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
}

/** Who changes a clock: the audit row's actor and the event's cause. */
export interface ClockChanger {
  actor: Actor;
  cause: EventCause;
}

export interface NextClockJobInput {
  white_label_id: string;
  merchant_id: string;
  test_clock_id: string;
  due_until: Date;
  not_before: Date;
}

export interface TestClockDependencies {
  database: Database;
  /** The instance's clock; this module only ever reads it outside a test clock's scope (real time). */
  clock: Clock;
  events: EventsService;
  tenancy: TenancyService;
  /** Runs the clock's next due job through the worker (`Worker.runNextTestClockJob`); null when none is due. */
  runNextJob: (input: NextClockJobInput) => Promise<{ ran_at: Date } | null>;
  /** True while the worker is stopping: the advance hands its rest to a later slice. */
  workerStopping: () => boolean;
  /** Called after an advance is requested, so that the worker polls at once. */
  onAdvanceRequested: () => void;
  /** Smaller bounds than production's, for tests of the bound itself. */
  limits?: Partial<TestClockLimits>;
}

export interface TestClockLimits {
  /** Job runs of one advance before it stops at the last time reached (10,000). */
  max_job_runs_per_advance: number;
  /** Job runs of one slice before the next slice takes over (500). */
  slice_max_job_runs: number;
}

const slicePayloadSchema = z
  .object({
    white_label_id: z.string().min(1),
    merchant_id: z.string().min(1),
    test_clock_id: z.string().min(1),
    target_frozen_time: z.string().refine((text) => parseTimestamp(text) !== null),
    slice: z.number().int().min(1),
  })
  .strict();

/** The scope a sandbox's requests run under, from its attached clock (null: none attached). */
function attachedScopeOf(account: SandboxAccount, attached: repository.AttachedClock | null): AttachedClock | null {
  if (!attached) return null;
  return {
    scope: { test_clock_id: attached.test_clock_id, white_label_id: account.white_label_id, merchant_id: account.merchant_id, now: attached.frozen_time },
    advancing: attached.status === 'advancing',
  };
}

export class TestClockService implements TestClockScopes {
  private readonly limits: TestClockLimits;

  constructor(private readonly deps: TestClockDependencies) {
    this.limits = {
      max_job_runs_per_advance: deps.limits?.max_job_runs_per_advance ?? MAX_JOB_RUNS_PER_ADVANCE,
      slice_max_job_runs: deps.limits?.slice_max_job_runs ?? SLICE_MAX_JOB_RUNS,
    };
    invariant(Number.isInteger(this.limits.max_job_runs_per_advance) && this.limits.max_job_runs_per_advance >= 1, 'max_job_runs_per_advance is a positive integer');
    invariant(Number.isInteger(this.limits.slice_max_job_runs) && this.limits.slice_max_job_runs >= 1, 'slice_max_job_runs is a positive integer');
  }

  /** Real time: every write of this module runs outside a clock's scope, which this asserts. */
  private realNow(): Date {
    invariant(activeTestClock() === null, 'test clocks are managed in real time, never inside a test clock');
    return this.deps.clock.now();
  }

  async create(tx: Queryable, account: SandboxAccount, changer: ClockChanger, input: { name: string | null; frozen_time: Date | null }): Promise<TestClockView> {
    invariant(!account.livemode, 'live never has a test clock');
    const now = this.realNow();
    const frozen = input.frozen_time ?? now;
    if (Math.abs(frozen.getTime() - now.getTime()) > MAX_START_OFFSET_MS) {
      throw validationError([{ path: 'frozen_time', reason: 'out_of_range', hint: 'within 365 days of the current time, either way' }]);
    }
    const row: TestClockRow = {
      white_label_id: account.white_label_id,
      merchant_id: account.merchant_id,
      livemode: false,
      test_clock_id: newId('test_clock'),
      name: input.name,
      frozen_time: frozen,
      status: 'ready',
      attached: false,
      version: 1,
      advance_target: null,
      advance_reached_time: null,
      advance_job_runs: 0,
      advance_slice: 0,
      last_advance_requested_time: null,
      last_advance_outcome: null,
      last_advance_job_runs: null,
      last_advance_finished_at: null,
      created_at: now,
      updated_at: now,
    };
    const view = testClockView(row);
    const result = await applyTransition(tx, { events: this.deps.events, clock: this.deps.clock }, {
      table: TEST_CLOCK_TRANSITIONS,
      trigger: 'create',
      before: null,
      after: view,
      persist: async (inner) => {
        await repository.insertTestClock(inner, row);
        return true;
      },
      event: { type: 'test_clock.created', white_label_id: row.white_label_id, merchant_id: row.merchant_id, livemode: false, cause: changer.cause },
    });
    invariant(result.ok, 'a new test clock is written once');
    await this.deps.tenancy.audit(tx, changer.actor, row.white_label_id, 'test_clock.created', 'test_clock', row.test_clock_id, {
      merchant_id: row.merchant_id,
      name: row.name,
      frozen_time: view.frozen_time,
    });
    return view;
  }

  list(db: Queryable, filter: ClockListFilter): Promise<TestClockRow[]> {
    return repository.listTestClocks(db, filter);
  }

  find(db: Queryable, filter: ClockScopeFilter, test_clock_id: string): Promise<TestClockRow | null> {
    return repository.findTestClock(db, filter, test_clock_id);
  }

  /**
   * Attaches a clock to its merchant's sandbox. Attaching the attached clock again changes nothing; while
   * another clock is attached the answer is 409 `test_clock_already_attached` (detach it first), so that a
   * merchant never silently moves its sandbox from one timeline to another.
   */
  async attach(tx: Queryable, account: SandboxAccount, changer: ClockChanger, test_clock_id: string): Promise<TestClockView> {
    invariant(!account.livemode, 'live never has a test clock');
    // Lock order: the sandbox's attachment lock, then the clock row, then the merchant's feed (its event).
    await repository.lockSandboxAttachment(tx, account.white_label_id, account.merchant_id);
    const row = await repository.findTestClock(tx, account, test_clock_id, true);
    if (!row) throw new ApiError('resource_not_found');
    if (row.attached) return testClockView(row);
    const other = await repository.findAttachedTestClock(tx, account.white_label_id, account.merchant_id);
    if (other) throw new ApiError('test_clock_already_attached', { details: { attached_test_clock_id: other.test_clock_id } });
    const after: TestClockRow = { ...row, attached: true, version: row.version + 1, updated_at: this.realNow() };
    await this.change(tx, row, after, 'attach', 'test_clock.attached', changer);
    await this.deps.tenancy.audit(tx, changer.actor, row.white_label_id, 'test_clock.attached', 'test_clock', row.test_clock_id, { merchant_id: row.merchant_id });
    return testClockView(after);
  }

  /**
   * Detaches a clock: the merchant's next requests run in real time again. The objects made under the
   * clock stay on it (their jobs and webhooks keep the clock's id, so only advancing it moves them on).
   * Detaching a clock that is not attached changes nothing.
   */
  async detach(tx: Queryable, account: SandboxAccount, changer: ClockChanger, test_clock_id: string): Promise<TestClockView> {
    invariant(!account.livemode, 'live never has a test clock');
    await repository.lockSandboxAttachment(tx, account.white_label_id, account.merchant_id);
    const row = await repository.findTestClock(tx, account, test_clock_id, true);
    if (!row) throw new ApiError('resource_not_found');
    if (!row.attached) return testClockView(row);
    const after: TestClockRow = { ...row, attached: false, version: row.version + 1, updated_at: this.realNow() };
    await this.change(tx, row, after, 'detach', 'test_clock.detached', changer);
    await this.deps.tenancy.audit(tx, changer.actor, row.white_label_id, 'test_clock.detached', 'test_clock', row.test_clock_id, { merchant_id: row.merchant_id });
    return testClockView(after);
  }

  /**
   * The back office's advance of a brand's clock, in a transaction of its own (the back office keeps no
   * idempotency record: asking again for the same target answers the clock as it is, `replayed`).
   */
  advanceByStaff(white_label_id: string, changer: ClockChanger, test_clock_id: string, target: Date): Promise<{ clock: TestClockRow; replayed: boolean }> {
    return this.deps.database.transaction((tx) => this.advance(tx, { white_label_id, merchant_id: null }, changer, test_clock_id, target, { repeat_is_replay: true }));
  }

  /**
   * Starts advancing a clock to `target`: later than its frozen time and at most 60 days after it. The
   * clock turns `advancing` and a real-time job does the work (see `runAdvanceSlice`). While it advances,
   * another advance is 409 `test_clock_advancing`. With `repeat_is_replay` (the back office, whose routes
   * store no idempotency keys) asking again for the target being advanced to, or for the one the last
   * advance completed, answers the clock as it is with `replayed: true`.
   */
  async advance(
    tx: Queryable,
    filter: ClockScopeFilter,
    changer: ClockChanger,
    test_clock_id: string,
    target: Date,
    options: { repeat_is_replay: boolean },
  ): Promise<{ clock: TestClockRow; replayed: boolean }> {
    const row = await repository.findTestClock(tx, filter, test_clock_id, true);
    if (!row) throw new ApiError('resource_not_found');
    if (row.status === 'advancing') {
      if (options.repeat_is_replay && row.advance_target?.getTime() === target.getTime()) return { clock: row, replayed: true };
      throw new ApiError('test_clock_advancing', {
        retry_after_seconds: 1,
        details: { test_clock_id: row.test_clock_id, target_frozen_time: row.advance_target ? formatTimestamp(row.advance_target) : null },
      });
    }
    if (options.repeat_is_replay && row.last_advance_outcome === 'completed' && row.last_advance_requested_time?.getTime() === target.getTime()) {
      return { clock: row, replayed: true };
    }
    if (target.getTime() <= row.frozen_time.getTime()) {
      throw validationError([{ path: 'frozen_time', reason: 'must_be_after_frozen_time', hint: `later than ${formatTimestamp(row.frozen_time)}` }]);
    }
    if (target.getTime() - row.frozen_time.getTime() > MAX_ADVANCE_SPAN_MS) {
      throw validationError([{ path: 'frozen_time', reason: 'too_far_ahead', hint: 'at most 60 days after the current frozen_time' }]);
    }
    const after: TestClockRow = {
      ...row,
      status: 'advancing',
      advance_target: target,
      advance_reached_time: row.frozen_time,
      advance_job_runs: 0,
      advance_slice: 0,
      version: row.version + 1,
      updated_at: this.realNow(),
    };
    await this.change(tx, row, after, 'advance', 'test_clock.advancing', changer, [this.sliceJob(after, 1)]);
    await this.deps.tenancy.audit(tx, changer.actor, row.white_label_id, 'test_clock.advance_requested', 'test_clock', row.test_clock_id, {
      merchant_id: row.merchant_id,
      from_frozen_time: formatTimestamp(row.frozen_time),
      target_frozen_time: formatTimestamp(target),
    });
    this.deps.onAdvanceRequested();
    return { clock: after, replayed: false };
  }

  /**
   * The attached clock of a merchant's sandbox, as the scope its requests run under; null for live (a
   * live request never looks) and for a sandbox with no clock attached. One indexed read per request.
   */
  async attachedScope(db: Queryable, account: SandboxAccount): Promise<AttachedClock | null> {
    if (account.livemode) return null;
    return attachedScopeOf(account, await repository.findAttachedTestClock(db, account.white_label_id, account.merchant_id));
  }

  /**
   * `attachedScope` as a read the request admission carries in its own statement (src/platform/read-part.ts);
   * null for live, whose requests never look.
   */
  attachedScopePart(account: SandboxAccount): ReadPart<AttachedClock | null> | null {
    if (account.livemode) return null;
    const part = repository.attachedTestClockPart(account.white_label_id, account.merchant_id);
    return { ...part, parse: (value) => attachedScopeOf(account, part.parse(value)) };
  }

  /**
   * The scope of an object created under a clock (a deposit whose slip an end user uploads with its
   * capability, where no merchant is present): the clock it was created under, at that clock's frozen
   * time, whether or not the clock is still attached. Null for an object of real time.
   */
  async scopeOfObject(db: Queryable, white_label_id: string, object_id: string): Promise<TestClockScope | null> {
    const test_clock_id = await this.deps.events.testClockOfObject(db, white_label_id, object_id);
    if (test_clock_id === null) return null;
    const row = await repository.findTestClock(db, { white_label_id, merchant_id: null }, test_clock_id);
    if (!row) return null;
    return { test_clock_id: row.test_clock_id, white_label_id: row.white_label_id, merchant_id: row.merchant_id, now: row.frozen_time };
  }

  /**
   * The scope a slip capability's request runs under: that of its order when the order was created
   * under a test clock. The server asks only once the token's signature holds (it passed, or failed on its
   * times alone); the brand and environment are read from it here to know where to look, and the token is
   * then verified again inside the scope, at the clock's time. A live token never enters a scope and
   * costs no query.
   */
  async scopeOfCapability(db: Queryable, token: string, deposit_id: string): Promise<TestClockScope | null> {
    const claims = unverifiedClaimsOf(token);
    if (claims === null || claims.livemode !== false || typeof claims.wl !== 'string' || claims.wl.length === 0 || claims.wl.length > 100) return null;
    if (deposit_id.length === 0) return null;
    return this.scopeOfObject(db, claims.wl, deposit_id);
  }

  jobHandlers(): Record<string, JobHandler> {
    return { [TEST_CLOCK_ADVANCE_TASK]: (job) => this.runAdvanceSlice(job) };
  }

  /**
   * One slice of an advance. It runs the clock's jobs due by the target one at a time, in order of
   * run_at then id, each inside the clock's scope at its own run_at (never earlier than the last one:
   * the clock's time does not run backwards), including the jobs those jobs enqueue when they fall due
   * by the target, with the queue's retries. After at most 500 runs or a minute it records its progress
   * and enqueues the next slice. When nothing is due any more, the clock's time becomes the target and
   * its status `ready`; after 10,000 runs in one advance it stops at the last time reached instead, with
   * `last_advance.outcome` `job_limit_reached`.
   */
  async runAdvanceSlice(job: ClaimedJob): Promise<void> {
    const parsed = slicePayloadSchema.safeParse(job.payload);
    invariant(parsed.success, 'a test clock advance job carries its clock, target and slice');
    const payload = parsed.data;
    const target = parseTimestamp(payload.target_frozen_time) as Date;
    const filter: ClockScopeFilter = { white_label_id: payload.white_label_id, merchant_id: payload.merchant_id };
    const database = this.deps.database;
    const start = await repository.findTestClock(database, filter, payload.test_clock_id);
    // A repeated or stale slice (the advance finished, or this slice was recorded by an earlier run) does nothing.
    if (!sliceApplies(start, target, payload.slice)) return;
    // A job of the clock still leased means the previous runner of this slice crashed moments ago (or
    // still runs): this run fails and is retried with the queue's backoff until that lease has run out,
    // so that the job is taken over in its turn instead of being passed by later ones.
    const leasedClock = { white_label_id: payload.white_label_id, test_clock_id: payload.test_clock_id, real_now: this.realNow() };
    if (await testClockHasLeasedJob(database, leasedClock)) {
      throw new Error(`a job of test clock ${payload.test_clock_id} is still leased by another run; this slice waits for it`);
    }
    let reached = start.advance_reached_time as Date;
    let runs = start.advance_job_runs;
    let sliceRuns = 0;
    const sliceStartedAt = performance.now();
    let outcome: AdvanceOutcome | null = null;
    for (;;) {
      if (runs >= this.limits.max_job_runs_per_advance) {
        const more = await testClockHasDueJob(database, { white_label_id: payload.white_label_id, test_clock_id: payload.test_clock_id, due_until: target, real_now: this.realNow() });
        outcome = more ? 'job_limit_reached' : 'completed';
        break;
      }
      if (sliceRuns >= this.limits.slice_max_job_runs || performance.now() - sliceStartedAt >= SLICE_MAX_MS || this.deps.workerStopping()) break;
      const ran = await this.deps.runNextJob({
        white_label_id: payload.white_label_id,
        merchant_id: payload.merchant_id,
        test_clock_id: payload.test_clock_id,
        due_until: target,
        not_before: reached,
      });
      if (ran === null) {
        outcome = 'completed';
        break;
      }
      if (ran.ran_at.getTime() > reached.getTime()) reached = ran.ran_at;
      runs += 1;
      sliceRuns += 1;
    }
    await database.transaction(async (tx) => {
      const locked = await repository.findTestClock(tx, filter, payload.test_clock_id, true);
      if (!sliceApplies(locked, target, payload.slice)) return;
      const now = this.realNow();
      if (outcome === null) {
        const progressed: TestClockRow = { ...locked, advance_reached_time: reached, advance_job_runs: runs, advance_slice: payload.slice, updated_at: now };
        invariant(await repository.updateTestClock(tx, progressed, locked.version), 'a locked test clock records its progress');
        await scheduleJob(tx, this.deps.clock, this.sliceJob(progressed, payload.slice + 1));
        return;
      }
      const finished: TestClockRow = {
        ...locked,
        status: 'ready',
        frozen_time: outcome === 'completed' ? target : reached,
        advance_target: null,
        advance_reached_time: null,
        advance_job_runs: 0,
        advance_slice: 0,
        last_advance_requested_time: target,
        last_advance_outcome: outcome,
        last_advance_job_runs: runs,
        last_advance_finished_at: now,
        version: locked.version + 1,
        updated_at: now,
      };
      await this.change(tx, locked, finished, 'advance_finished', 'test_clock.ready', { actor: ADVANCE_ACTOR, cause: SYSTEM_CAUSE });
      await this.deps.tenancy.audit(tx, ADVANCE_ACTOR, locked.white_label_id, 'test_clock.advanced', 'test_clock', locked.test_clock_id, {
        merchant_id: locked.merchant_id,
        requested_frozen_time: formatTimestamp(target),
        reached_frozen_time: formatTimestamp(finished.frozen_time),
        job_runs: runs,
        outcome,
      });
    });
  }

  private sliceJob(row: TestClockRow, slice: number): JobSpec {
    const target = row.advance_target as Date;
    return {
      task: TEST_CLOCK_ADVANCE_TASK,
      payload: {
        white_label_id: row.white_label_id,
        merchant_id: row.merchant_id,
        test_clock_id: row.test_clock_id,
        target_frozen_time: formatTimestamp(target),
        slice,
      },
      // One pending job per slice of one advance; the slice number fences a repeated run (`sliceApplies`).
      job_key: `${TEST_CLOCK_ADVANCE_TASK}:${row.test_clock_id}:${target.getTime()}:${slice}`,
      white_label_id: row.white_label_id,
      max_attempts: SLICE_MAX_ATTEMPTS,
    };
  }

  /** One versioned change of a locked clock, with its event (and jobs) through the transition function. */
  private async change(
    tx: Queryable,
    before: TestClockRow,
    after: TestClockRow,
    trigger: string,
    type: string,
    changer: ClockChanger,
    jobs: readonly JobSpec[] = [],
  ): Promise<void> {
    const result = await applyTransition(tx, { events: this.deps.events, clock: this.deps.clock }, {
      table: TEST_CLOCK_TRANSITIONS,
      trigger,
      before: testClockView(before),
      after: testClockView(after),
      persist: (inner) => repository.updateTestClock(inner, after, before.version),
      event: { type, white_label_id: after.white_label_id, merchant_id: after.merchant_id, livemode: false, cause: changer.cause },
      jobs,
    });
    invariant(result.ok, 'a locked test clock changes at its version');
  }
}

/**
 * The claims of a compact JWS read without verifying it (its middle part), or null when it is not one.
 * Used only to choose the clock to verify a capability by (`scopeOfCapability`).
 */
function unverifiedClaimsOf(token: string): { wl?: unknown; livemode?: unknown } | null {
  const parts = token.split('.');
  if (parts.length !== 3 || !/^[A-Za-z0-9_-]+$/.test(parts[1] ?? '')) return null;
  try {
    const claims: unknown = JSON.parse(Buffer.from(parts[1] ?? '', 'base64url').toString('utf8'));
    return typeof claims === 'object' && claims !== null && !Array.isArray(claims) ? (claims as { wl?: unknown; livemode?: unknown }) : null;
  } catch {
    return null;
  }
}

/** Whether a slice job still applies: the clock advances to its target and this is the next slice. */
function sliceApplies(row: TestClockRow | null, target: Date, slice: number): row is TestClockRow & { advance_reached_time: Date } {
  return (
    row !== null &&
    row.status === 'advancing' &&
    row.advance_target?.getTime() === target.getTime() &&
    row.advance_reached_time !== null &&
    row.advance_slice === slice - 1
  );
}
