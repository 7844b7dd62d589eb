import type { QueryRunner } from 'typeorm';
import type { HeldLock } from '../../core/held-lock.js';
import { LockLostError } from '../../errors/lock-lost.error.js';
import type { RowLockStore } from '../../store/lock-store.js';

/** What a held row-lock's open transaction reports to its strategy. */
export interface OpenTransactionHooks {
  /** Its connection closed, or maxHoldMs passed: the lock is lost (and must be given back). */
  lost(lock: HeldLock, error: LockLostError): void;
  /** The transaction ended (committed, rolled back or abandoned): its connection is free. */
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
  const lose = (reason: string, error?: unknown): void => {
    if (!finished) hooks.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, reason, error ? { cause: error } : undefined));
  };
  const onClose = (error?: unknown): void => lose(`its database connection closed (${String((error as Error)?.message ?? 'end')})`, error);
  const unwatch = store.watchSession(runner, onClose);
  const maxHold = Number.isFinite(hooks.maxHoldMs)
    ? setTimeout(() => lose(`held longer than maxHoldMs (${hooks.maxHoldMs} ms)`), hooks.maxHoldMs)
    : undefined;
  maxHold?.unref();
  const settle = (): boolean => {
    if (finished) return false;
    finished = true;
    if (maxHold) clearTimeout(maxHold);
    unwatch();
    lock.transaction = undefined;
    hooks.settled(lock);
    return true;
  };
  hooks.abandonWith(lock, () => {
    if (settle()) store.cutSession(runner);
  });
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
  const lose = (reason: string, error?: unknown): void => {
    if (lock.live) hooks.lost(lock, new LockLostError(lock.keys[0]!, lock.fencingToken, reason, error ? { cause: error } : undefined));
  };
  const unwatch = store.watchSession(runner, (error?: unknown) =>
    lose(`the connection of the transaction it was taken in closed (${String((error as Error)?.message ?? 'end')})`, error),
  );
  const maxHold = Number.isFinite(hooks.maxHoldMs)
    ? setTimeout(() => {
        if (!lock.live) return;
        lose(`held longer than maxHoldMs (${hooks.maxHoldMs} ms)`);
        store.cutSession(runner);
      }, hooks.maxHoldMs)
    : undefined;
  maxHold?.unref();
  return () => {
    if (maxHold) clearTimeout(maxHold);
    unwatch();
  };
}
