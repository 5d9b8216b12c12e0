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
