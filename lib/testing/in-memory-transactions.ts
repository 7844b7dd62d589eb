import type { EntityManager } from 'typeorm';
import type { BusinessTransactions, FencedLocks, FenceSettings } from '../core/business-transaction.js';
import type { HeldLock, LockTransaction } from '../core/held-lock.js';
import { JoinedLocks } from '../core/joined-locks.js';
import { LockContext } from '../core/lock-context.js';
import type { OpenFencedCall } from '../core/open-fenced-call.js';
import type { LockHandle } from '../core/lock-handle.js';
import { LockLostError } from '../errors/lock-lost.error.js';

/**
 * Fenced calls of the testing module. There is no transaction to commit or roll back: the work
 * runs with the EntityManager the test supplied (if any), and the fence still decides the
 * outcome: a lock lost while the work ran (maxHoldMs, forceRelease) makes the call fail with
 * LockLostError, and the call's own locks end RELEASED, or FAILED when the work threw.
 */
export class InMemoryTransactions implements BusinessTransactions {
  constructor(private readonly manager: EntityManager | undefined) {}

  early(): undefined {
    return undefined;
  }

  /** A row-lock's work, in the transaction that stands for its lock's (see InMemoryStrategy): as any fenced call. */
  runIn<T>(settings: FenceSettings, _transaction: LockTransaction, handle: LockHandle, locks: FencedLocks, fn: () => Promise<T> | T): Promise<T> {
    return this.run(settings, handle, locks, fn);
  }

  async run<T>(settings: FenceSettings, handle: LockHandle, locks: FencedLocks, fn: () => Promise<T> | T): Promise<T> {
    const call = new InMemoryFencedCall(this.manager, locks.own, locks.kept);
    let result: T;
    try {
      result = await LockContext.run(settings.host, handle, locks.byKey, this.manager, fn, call);
    } catch (error) {
      await failOwn(settings, call.end());
      throw lostFirst(error, [...call.ending, ...call.kept]);
    }
    const ending = call.end();
    const lost = [...ending, ...call.kept].find((lock) => !lock.live);
    if (lost) {
      await failOwn(settings, ending);
      throw lostReason(lost, `it was already ${lost.state} when the work finished`);
    }
    // Ends the locks as a fenced commit would; LockLostError if someone ended one first.
    for (const lock of ending) await settings.host.release(lock, false);
    return result;
  }
}

/**
 * A fenced call of the testing module while its work runs: nested lock calls join it as they join
 * a database transaction, so their locks end with it (RELEASED, or FAILED when it fails), and an
 * outer call's lock they reuse is checked at its end.
 */
class InMemoryFencedCall implements OpenFencedCall {
  open = true;
  private enlisted: Set<HeldLock> | undefined;
  private joinedLocks: JoinedLocks | undefined;

  constructor(
    readonly manager: EntityManager | undefined,
    private readonly own: readonly HeldLock[],
    public kept: readonly HeldLock[],
  ) {}

  get joined(): JoinedLocks {
    return (this.joinedLocks ??= new JoinedLocks());
  }

  /** Its own locks and those nested calls took in it. */
  get ending(): readonly HeldLock[] {
    return this.enlisted === undefined ? this.own : [...new Set([...this.own, ...this.enlisted])];
  }

  enlist(lock: HeldLock): void {
    (this.enlisted ??= new Set()).add(lock);
  }

  keep(lock: HeldLock): void {
    if (!this.kept.includes(lock) && !this.ending.includes(lock)) this.kept = [...this.kept, lock];
  }

  /** The work is over: nothing joins it any more, and the locks that end with it are released from now on (not kept for a commit). */
  end(): readonly HeldLock[] {
    this.open = false;
    const ending = this.ending;
    for (const lock of ending) lock.endsWithTransaction = false;
    return ending;
  }
}

async function failOwn(settings: FenceSettings, own: readonly HeldLock[]): Promise<void> {
  await Promise.allSettled(own.map((lock) => settings.host.release(lock, true)));
}

/** As in a real fenced call: a failure after a lock was lost is reported as that loss, the failure as `cause`. */
function lostFirst(error: unknown, locks: readonly HeldLock[]): unknown {
  if (error instanceof LockLostError) return error;
  const lost = locks.find((lock) => !lock.live && lock.signal.reason instanceof LockLostError);
  if (!lost) return error;
  const reason = lost.signal.reason as LockLostError;
  return new LockLostError(lost.keys[0]!, lost.fencingToken, `${reason.reason}; the locked work failed after that`, { cause: error });
}

function lostReason(lock: HeldLock, fallback: string): LockLostError {
  const reason: unknown = lock.signal.reason;
  return reason instanceof LockLostError ? reason : new LockLostError(lock.keys[0]!, lock.fencingToken, fallback, { cause: reason });
}
