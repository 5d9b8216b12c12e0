import { invariant } from './assert.ts';

/**
 * A counting gate with a bounded queue: at most `slots` holders at once, at most `max_waiting` callers
 * waiting for a slot, and none waiting longer than `max_wait_ms`. It is how a process bounds work whose
 * cost is memory (a slip upload holds its image while it is read and stored) without refusing it at the
 * first sign of load: callers queue first, and only a full queue or a long wait turns into a refusal,
 * which the caller answers as it must (a retryable 503 for slip intake).
 *
 * A refusal is a result, not an exception: the gate does not know the caller's error catalogue.
 */
export interface ConcurrencyGateSettings {
  slots: number;
  max_waiting: number;
  max_wait_ms: number;
}

export type GateRefusal = 'queue_full' | 'wait_timed_out';

export type GateEntry = { ok: true; release: () => void } | { ok: false; refusal: GateRefusal };

interface Waiter {
  grant: (entry: GateEntry) => void;
  timer: NodeJS.Timeout;
}

export class ConcurrencyGate {
  private held = 0;
  private readonly waiting: Waiter[] = [];

  constructor(
    private readonly settings: ConcurrencyGateSettings,
    /** Told after every change, for gauges (holders, waiters). */
    private readonly observe: (held: number, waiting: number) => void = () => undefined,
  ) {
    invariant(Number.isInteger(settings.slots) && settings.slots >= 1, 'a gate has at least one slot');
    invariant(Number.isInteger(settings.max_waiting) && settings.max_waiting >= 0, 'a gate bounds its queue');
    invariant(settings.max_wait_ms > 0, 'a gate bounds the wait');
  }

  get holders(): number {
    return this.held;
  }

  get waiters(): number {
    return this.waiting.length;
  }

  /** A slot now, or after a bounded wait, or a refusal. `release` must be called once the work ends. */
  enter(): Promise<GateEntry> {
    if (this.held < this.settings.slots) return Promise.resolve(this.grant());
    if (this.waiting.length >= this.settings.max_waiting) return Promise.resolve({ ok: false, refusal: 'queue_full' });
    return new Promise<GateEntry>((resolve) => {
      const waiter: Waiter = {
        grant: resolve,
        timer: setTimeout(() => {
          const index = this.waiting.indexOf(waiter);
          if (index >= 0) this.waiting.splice(index, 1);
          this.observe(this.held, this.waiting.length);
          resolve({ ok: false, refusal: 'wait_timed_out' });
        }, this.settings.max_wait_ms),
      };
      waiter.timer.unref();
      this.waiting.push(waiter);
      this.observe(this.held, this.waiting.length);
    });
  }

  private grant(): GateEntry {
    this.held += 1;
    invariant(this.held <= this.settings.slots, 'a gate never grants more slots than it has');
    this.observe(this.held, this.waiting.length);
    let released = false;
    return {
      ok: true,
      release: () => {
        // A second release of one slot would let more holders in than the gate has slots.
        if (released) return;
        released = true;
        this.held -= 1;
        const next = this.waiting.shift();
        if (next) {
          clearTimeout(next.timer);
          next.grant(this.grant());
        } else {
          this.observe(this.held, this.waiting.length);
        }
      },
    };
  }
}
