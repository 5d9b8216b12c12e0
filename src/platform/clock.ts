import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Time comes from an injected clock so that every deadline, window and expiry can be driven by tests.
 * Nothing in the service may call `Date.now()` or `new Date()` for business time directly.
 */
export interface Clock {
  /** The current instant. */
  now(): Date;
}

export class SystemClock implements Clock {
  now(): Date {
    return new Date();
  }
}

/** A clock that only moves when told to; used by tests and by the sandbox test clock. */
export class TestClock implements Clock {
  private current_ms: number;

  constructor(start: Date | string = '2026-08-01T00:00:00.000Z') {
    this.current_ms = new Date(start).getTime();
  }

  now(): Date {
    return new Date(this.current_ms);
  }

  /** Moves the clock forward; a negative step is refused because time never runs backwards here. */
  advance(milliseconds: number): Date {
    if (!Number.isFinite(milliseconds) || milliseconds < 0) {
      throw new Error('TestClock.advance takes a non-negative number of milliseconds');
    }
    this.current_ms += milliseconds;
    return this.now();
  }

  set(to: Date | string): Date {
    this.current_ms = new Date(to).getTime();
    return this.now();
  }
}

/**
 * The sandbox test clock a piece of work runs under (see src/test-clocks/): which clock, whose it is,
 * and the instant that work sees as now.
 */
export interface TestClockScope {
  test_clock_id: string;
  white_label_id: string;
  merchant_id: string;
  now: Date;
}

/**
 * The scope travels with the asynchronous work started inside it (AsyncLocalStorage), so every service
 * called by a request or a job of a test clock reads the clock's time without being told. `undefined`
 * is stored by `outsideTestClock` to leave a scope explicitly.
 */
const testClockScopes = new AsyncLocalStorage<TestClockScope | undefined>();

/** Runs `work` (and everything it starts) at the test clock's time. */
export function runInTestClock<T>(scope: TestClockScope, work: () => T): T {
  if (Number.isNaN(scope.now.getTime())) throw new Error('a test clock scope needs a valid instant');
  return testClockScopes.run({ ...scope, now: new Date(scope.now.getTime()) }, work);
}

/**
 * Runs `work` in real time even when called inside a test clock's scope. Background loops (the job
 * worker's poll timer) are started through this, because a timer created inside a scope would carry
 * the scope into every later poll.
 */
export function outsideTestClock<T>(work: () => T): T {
  return testClockScopes.run(undefined, work);
}

/** The test clock the current work runs under, or null in real time. */
export function activeTestClock(): TestClockScope | null {
  return testClockScopes.getStore() ?? null;
}

/**
 * The clock every service of an instance is given: the process's clock, except inside a test clock's
 * scope, where it answers that clock's frozen instant. Live work never enters a scope (only sandbox
 * merchants have test clocks), so for it this is the process's clock. `real` stays the process's clock
 * for what must never follow a test clock: leases, rate windows, signatures' timestamps.
 */
export class ScopedClock implements Clock {
  constructor(readonly real: Clock) {}

  now(): Date {
    const scope = testClockScopes.getStore();
    return scope ? new Date(scope.now.getTime()) : this.real.now();
  }
}
