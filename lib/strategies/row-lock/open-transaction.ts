import type { QueryRunner } from 'typeorm';
import type { HeldLock } from '../../core/held-lock.js';
import { LockLostError } from '../../errors/lock-lost.error.js';
import type { RowLockStore } from '../../store/lock-store.js';

/** What a held row-lock's open transaction reports to its strategy. */
export interface OpenTransactionHooks {
  /** Its connection closed, or maxHoldMs passed: the lock is lost (and must be given back). */
  lost(lock: HeldLock, error: LockLostError): void;
  /** The transaction ended (committed, rolled back, or abandoned and its server session gone): its connection is free. */
  settled(lock: HeldLock): void;
  /** How to abandon it while its work may still run (the strategy calls it on loss and at shutdown). */
  abandonWith(lock: HeldLock, abandonIt: () => void): void;
  readonly maxHoldMs: number;
  /** The isolation level the caller named for it, if any. */
  readonly isolationLevel?: string;
}

/**
 * The lock keeps the transaction it was taken in, for as long as that transaction is open: no
 * lease, no timer but maxHoldMs. Its signal aborts if the connection closes (the server has
 * rolled the work back and handed the key over) or at maxHoldMs.
 */
export function keepOpen(lock: HeldLock, runner: QueryRunner, store: RowLockStore, hooks: OpenTransactionHooks): void {
  let finished = false;
  const unwatch = watchHold(lock, runner, store, {
    lost: (error) => {
      if (finished) return false;
      hooks.lost(lock, error);
      return true;
    },
    maxHoldMs: hooks.maxHoldMs,
    closed: 'its database connection closed',
  });
  // `freed`: when the connection no longer holds a server session (a cut one runs on until its statement ends).
  const settle = (freed?: () => Promise<void>): boolean => {
    if (finished) return false;
    finished = true;
    unwatch();
    lock.transaction = undefined;
    if (freed) void freed().then(() => hooks.settled(lock));
    else hooks.settled(lock);
    return true;
  };
  hooks.abandonWith(lock, () => settle(() => store.cutSession(runner)));
  lock.transaction = {
    runner,
    isolationLevel: hooks.isolationLevel,
    finish: (committed: boolean) => {
      if (!settle()) return SETTLED;
      return committed ? runner.release().catch(() => undefined) : endQuietly(runner);
    },
  };
}

const SETTLED = Promise.resolve();

/** Rolls back if a transaction is open and returns the connection; the server rolls back a broken one itself. */
export async function endQuietly(runner: QueryRunner): Promise<void> {
  if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
  await runner.release().catch(() => undefined);
}

/**
 * A lock taken inside a caller's open transaction (joined) lasts as long as that transaction, as
 * its own would: it is lost when that connection closes, and at maxHoldMs, when the transaction
 * is cut (the only way its row locks end while the work may still run). Returns the unwatch.
 */
export function watchJoined(
  lock: HeldLock,
  runner: QueryRunner,
  store: RowLockStore,
  hooks: { lost(lock: HeldLock, error: LockLostError): void; readonly maxHoldMs: number },
): () => void {
  return watchHold(lock, runner, store, {
    lost: (error) => {
      if (!lock.live) return false;
      hooks.lost(lock, error);
      return true;
    },
    maxHoldMs: hooks.maxHoldMs,
    closed: 'the connection of the transaction it was taken in closed',
    atMaxHold: () => void store.cutSession(runner),
  });
}

/**
 * What ends a row-lock hold from outside its work: the close of the connection its transaction runs
 * on, and maxHoldMs (then `atMaxHold`, if `lost` took the loss). Each is reported as LockLostError. Returns the unwatch.
 */
function watchHold(
  lock: HeldLock,
  runner: QueryRunner,
  store: RowLockStore,
  how: { lost(error: LockLostError): boolean; readonly maxHoldMs: number; readonly closed: string; atMaxHold?(): void },
): () => void {
  const lose = (reason: string, error?: unknown): boolean =>
    how.lost(new LockLostError(lock.keys[0]!, lock.fencingToken, reason, error ? { cause: error } : undefined));
  const unwatch = store.watchSession(runner, (error?: unknown) => lose(`${how.closed} (${String((error as Error)?.message ?? 'end')})`, error));
  const maxHold = Number.isFinite(how.maxHoldMs)
    ? setTimeout(() => {
        if (lose(`held longer than maxHoldMs (${how.maxHoldMs} ms)`)) how.atMaxHold?.();
      }, how.maxHoldMs)
    : undefined;
  maxHold?.unref();
  return () => {
    if (maxHold) clearTimeout(maxHold);
    unwatch();
  };
}
