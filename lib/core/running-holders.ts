/**
 * Counts the holders running inside `withLock`/`runHolding` (decorated methods included), so
 * shutdown can wait for them to finish before it releases what is still held.
 */
export class RunningHolders {
  private count = 0;
  private readonly idle = new Set<() => void>();

  get size(): number {
    return this.count;
  }

  /** A holder starts; call the returned function once when it is done (idempotent). */
  enter(): () => void {
    this.count++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.count--;
      if (this.count === 0) for (const resolve of [...this.idle]) resolve();
    };
  }

  /** Resolves true once no holder runs, or false after `timeoutMs`. Leaves no timer behind. */
  waitIdle(timeoutMs: number): Promise<boolean> {
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (value: boolean): void => {
        clearTimeout(timer);
        this.idle.delete(onIdle);
        resolve(value);
      };
      const onIdle = (): void => done(true);
      const timer = setTimeout(() => done(false), Math.max(1, timeoutMs));
      this.idle.add(onIdle);
    });
  }
}
