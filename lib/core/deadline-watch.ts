/** A deadline being watched: cancel it once what it bounds has settled. */
export interface WatchedDeadline {
  cancel(): void;
}

class Entry implements WatchedDeadline {
  constructor(
    readonly at: number,
    readonly expire: () => void,
    private readonly pending: Set<Entry>,
  ) {}

  cancel(): void {
    this.pending.delete(this);
  }
}

/**
 * The deadlines of lock statements and connection waits (performance.now() values), watched by
 * one timer for the whole process instead of one per statement.
 *
 * Almost every bounded statement answers long before its deadline, so the timer is rarely
 * needed, yet arming and clearing a timer per statement cost more client time than anything else
 * on an uncontended hold (measured on a virtual machine: 30–50 µs per timer, and the process's
 * other work slowed beside it). Here the timer is armed for the earliest deadline only, and kept
 * while later ones come and go: a statement whose deadline is not the earliest costs a Set
 * insert and delete. When the timer fires it expires what is due and re-arms for what is left.
 */
export class DeadlineWatch {
  private readonly pending = new Set<Entry>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;

  /** Calls `expire` at `at` unless cancelled first. */
  watch(at: number, expire: () => void): WatchedDeadline {
    const entry = new Entry(at, expire, this.pending);
    this.pending.add(entry);
    if (at < this.armedFor) this.arm(at);
    return entry;
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.fire(), Math.max(1, Math.min(Math.ceil(at - performance.now()), 2 ** 31 - 1)));
    // What a deadline bounds (a socket, a pool wait) keeps the process alive, not the watch.
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const now = performance.now();
    let next = Infinity;
    const due: Entry[] = [];
    for (const entry of this.pending) {
      if (entry.at <= now) due.push(entry);
      else if (entry.at < next) next = entry.at;
    }
    // Timers run before the event loop reads its sockets: after a stall (a paused process, a
    // blocked loop) an answer that arrived meanwhile waits unread behind this timer. Expiry waits
    // one turn (setImmediate runs after the loop's socket reads), so such an answer still counts
    // and cancels its deadline first; only deadlines still pending then expire.
    if (due.length > 0)
      setImmediate(() => {
        for (const entry of due) {
          if (!this.pending.delete(entry)) continue;
          entry.expire();
        }
      });
    // Timers may fire a fraction of a millisecond before performance.now() reaches their due time: re-armed.
    if (next !== Infinity && next < this.armedFor) this.arm(next);
  }
}

/** The process's one watch: every pool and service shares its timer. */
export const deadlines = new DeadlineWatch();
