import { TooManyLockWaitersError } from '../../errors/too-many-lock-waiters.error.js';

/**
 * The DataSource connections row-lock sessions (holders and waiters in the database) may take:
 * all but one of the pool, so a process never deadlocks on its own pool (a holder's work may need
 * a second connection). Callers beyond that wait here, in arrival order and without a connection,
 * until a slot frees or their budget ends. `maxQueued` optionally bounds how many may wait here.
 */
export class ConnectionSlots {
  private taken = 0;
  private readonly queue: { grant: () => void; cancel: () => void; keys: readonly string[] }[] = [];

  constructor(
    private readonly limit: number,
    private readonly maxQueued: number,
  ) {}

  /** A slot at once if one is free and nobody waits for one; false otherwise (then `take` waits in turn). */
  tryTake(): boolean {
    if (this.taken >= this.limit || this.queue.length > 0) return false;
    this.taken++;
    return true;
  }

  /**
   * A slot, at once or once one frees; false if `deadline` (performance.now()) passed first.
   * @throws TooManyLockWaitersError when `maxQueued` callers already wait.
   */
  async take(keys: readonly string[], deadline: number): Promise<boolean> {
    if (this.tryTake()) return true;
    if (deadline <= performance.now()) return false;
    if (this.queue.length >= this.maxQueued)
      throw new TooManyLockWaitersError(keys, this.maxQueued, `${this.queue.length} row-lock callers of this process already wait for a connection`);
    return new Promise<boolean>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const entry = {
        keys,
        grant: () => {
          if (timer) clearTimeout(timer);
          resolve(true);
        },
        cancel: () => {
          if (timer) clearTimeout(timer);
          resolve(false);
        },
      };
      this.queue.push(entry);
      if (deadline !== Infinity) {
        timer = setTimeout(
          () => {
            const at = this.queue.indexOf(entry);
            if (at < 0) return;
            this.queue.splice(at, 1);
            resolve(false);
          },
          Math.max(0, Math.min(deadline - performance.now(), 2 ** 31 - 1)),
        );
      }
    });
  }

  /** Shutdown: every caller waiting for a slot stops waiting (as if its budget had ended). */
  cancelWaits(): void {
    for (const entry of this.queue.splice(0)) entry.cancel();
  }

  /** Gives a slot back: the longest-waiting caller gets it. */
  give(): void {
    const next = this.queue.shift();
    if (next) next.grant();
    else this.taken--;
  }
}
