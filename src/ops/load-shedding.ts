import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { ApiError } from '../platform/errors.ts';
import type { LoadSheddingSettings } from '../platform/config.ts';
import type { LoadClass, LoadGate } from '../http/load-gate.ts';

/**
 * Load shedding (spec, Errors, rule 2): when this process is overloaded it refuses work in the spec's
 * order, least protected first, so that what matters most keeps its capacity:
 *
 * 1. creation of new deposits (503 `route_unavailable`), shed first;
 * 2. every other merchant write and every public link (503 `service_unavailable`);
 * 3. status reads (503 `service_unavailable`), almost never;
 *
 * and never slip uploads (the end user's proof of a payment already made), the hosted checkout's own slip
 * upload, the back office (the people resolving the incident), nor the worker's crediting and ledger jobs,
 * which no HTTP shedding touches.
 *
 * The signal is measured, not guessed: the event loop's delay (p90 over the last interval, from
 * `monitorEventLoopDelay`: how late this process runs everything it has to do) and the longest wait of a
 * transaction for a database connection over the same interval (the pool's checkout on PostgreSQL,
 * PGlite's queue). Each is divided by its threshold; the larger quotient is the pressure. Pressure 1
 * sheds level 1, 2 sheds level 2, 4 sheds level 3. A level is reached only when two intervals in a row
 * support it, so that one long pause (a garbage collection, one slow statement) sheds nothing; it ends
 * as soon as one interval no longer supports it.
 */

export interface LoadReading {
  event_loop_delay_ms: number;
  database_wait_ms: number;
  /** This interval's pressure; the level is what this one and the one before both support. */
  pressure: number;
  /** 0: nothing shed; 1: new deposits; 2: and other writes; 3: and reads. */
  level: 0 | 1 | 2 | 3;
}

/** The level at which each class is shed; `never` has none. */
const SHED_AT_LEVEL: Record<Exclude<LoadClass, 'never'>, 1 | 2 | 3> = { new_deposit: 1, write: 2, read: 3 };
/** What a shed caller is told to wait, by level: longer when the overload is worse. */
const RETRY_AFTER_SECONDS: Record<1 | 2 | 3, number> = { 1: 2, 2: 5, 3: 10 };

export function levelOf(pressure: number): LoadReading['level'] {
  if (pressure >= 4) return 3;
  if (pressure >= 2) return 2;
  if (pressure >= 1) return 1;
  return 0;
}

export class LoadShedder implements LoadGate {
  private histogram: IntervalHistogram | null = null;
  private timer: NodeJS.Timeout | null = null;
  private current: LoadReading = { event_loop_delay_ms: 0, database_wait_ms: 0, pressure: 0, level: 0 };

  constructor(
    private readonly settings: LoadSheddingSettings,
    /** The longest connection wait since the previous reading (the database's AcquireWaitMeter). */
    private readonly takeDatabaseWaitMs: () => number,
    private readonly onLevelChange: (reading: LoadReading, previous: LoadReading['level']) => void = () => undefined,
  ) {}

  start(): void {
    if (!this.settings.enabled || this.timer) return;
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
    // Unreferenced: the monitor never keeps a stopping process alive.
    this.timer = setInterval(() => this.sample(), this.settings.interval_ms);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.histogram?.disable();
    this.histogram = null;
    this.current = { event_loop_delay_ms: 0, database_wait_ms: 0, pressure: 0, level: 0 };
  }

  /** Reads both signals over the interval that just ended and sets the level from them. */
  sample(): LoadReading {
    const histogram = this.histogram;
    const loopDelayMs = histogram && histogram.count > 0 ? histogram.percentile(90) / 1e6 : 0;
    histogram?.reset();
    const databaseWaitMs = this.takeDatabaseWaitMs();
    const pressure = Math.max(loopDelayMs / this.settings.event_loop_delay_ms, databaseWaitMs / this.settings.database_wait_ms);
    const previous = this.current.level;
    // The level both this interval and the one before support.
    const sustained = Math.min(pressure, this.current.pressure);
    this.current = { event_loop_delay_ms: loopDelayMs, database_wait_ms: databaseWaitMs, pressure, level: levelOf(sustained) };
    if (this.current.level !== previous) this.onLevelChange(this.current, previous);
    return this.current;
  }

  reading(): LoadReading {
    return this.current;
  }

  /** The refusal for a request of this class now, or null when it goes ahead. */
  refusal(load_class: LoadClass): ApiError | null {
    if (load_class === 'never' || !this.settings.enabled) return null;
    const level = this.current.level;
    if (level === 0 || level < SHED_AT_LEVEL[load_class]) return null;
    const retry_after_seconds = RETRY_AFTER_SECONDS[level];
    const details = { load_level: level };
    return load_class === 'new_deposit'
      ? new ApiError('route_unavailable', { retry_after_seconds, details })
      : new ApiError('service_unavailable', { retry_after_seconds, details });
  }
}
