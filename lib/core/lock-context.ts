import { AsyncLocalStorage } from 'node:async_hooks';
import type { EntityManager } from 'typeorm';
import type { HeldLock } from './held-lock.js';
import type { LockHandle } from './lock-handle.js';
import type { LockMode } from './lock-mode.js';
import type { LockTarget } from './lock-key.js';
import { LockUpgradeError } from '../errors/lock-upgrade.error.js';
import { DbLockError } from '../errors/db-lock.error.js';
import { checkSameKind } from './semaphore-request.js';
import type { OpenFencedCall } from './open-fenced-call.js';

/**
 * One level of locks in an async call chain: what `withLock` or a lock decorator entered.
 * Frames chain to their parent, so a nested call sees every key its callers hold.
 */
export interface LockFrame {
  /**
   * The lock service (its runtime) that entered this level. Each service sees only its own levels:
   * two DbLockModules on two DataSources lock in two databases, so a key one of them holds is not
   * held for the other, and one's transaction is not the other's.
   */
  readonly owner: object;
  /** The handle the code at this level got. */
  readonly handle: LockHandle;
  /** Every key this level holds (stored key) and the real lock that holds it. */
  readonly locks: ReadonlyMap<string, HeldLock>;
  /** The EntityManager of the fenced transaction this level runs in; undefined: the caller's; null: none (`transaction: 'none'`). */
  readonly manager?: EntityManager | null;
  /** The fenced call this level's work runs in, when it pushed or joined one: what nested calls join. */
  readonly call?: OpenFencedCall;
  readonly parent: LockFrame | undefined;
}

const storage = new AsyncLocalStorage<LockFrame>();

const MANAGER_ONLY_INSIDE =
  "lockService.manager is only available inside a method decorated with @DistributedLock/@ReadLock/@WriteLock (transaction: 'requires-new'), or inside a row-lock withLock().";

/** The async-context bookkeeping behind reentrancy and the `LockService` context accessors. */
export const LockContext = Object.freeze({
  /** The innermost frame `owner` entered on the current call chain, if any. */
  current(owner: object): LockFrame | undefined {
    let frame = storage.getStore();
    while (frame && frame.owner !== owner) frame = frame.parent;
    return frame;
  },

  /** Runs `fn` with a frame of `owner` (`handle`, its `locks`, `manager`, the fenced `call` it runs in) pushed on the current chain. */
  run<T>(
    owner: object,
    handle: LockHandle,
    locks: ReadonlyMap<string, HeldLock>,
    manager: EntityManager | null | undefined,
    fn: () => T,
    call?: OpenFencedCall,
  ): T {
    // Built here rather than spread from the caller's object: every locked call passes here.
    return storage.run({ owner, handle, locks, manager, call, parent: storage.getStore() }, fn);
  },

  /**
   * The fenced call the current chain's work runs in, while it is open. The nearest level that
   * names a transaction decides: a level with `transaction: 'none'` (manager null), or with a
   * manager of no fenced call, joins none.
   */
  openCall(owner: object): OpenFencedCall | undefined {
    for (let frame = storage.getStore(); frame; frame = frame.parent) {
      if (frame.owner !== owner) continue;
      if (frame.call) return frame.call.open ? frame.call : undefined;
      if (frame.manager !== undefined) return undefined;
    }
    return undefined;
  },

  /** The nearest fenced call on the chain that `match` picks, open or not. */
  callWhere(match: (call: OpenFencedCall) => boolean): OpenFencedCall | undefined {
    for (let frame = storage.getStore(); frame; frame = frame.parent) if (frame.call && match(frame.call)) return frame.call;
    return undefined;
  },

  /** The owner of the nearest level whose fenced call `match` picks, if any. */
  ownerOf(match: (call: OpenFencedCall) => boolean): object | undefined {
    for (let frame = storage.getStore(); frame; frame = frame.parent) if (frame.call && match(frame.call)) return frame.owner;
    return undefined;
  },

  /** The lock the current chain holds `storedKey` with, and in which mode, if it does. */
  find(storedKey: string, owner: object): { lock: HeldLock; mode: LockMode } | undefined {
    for (let frame = storage.getStore(); frame; frame = frame.parent) {
      if (frame.owner !== owner) continue;
      const lock = frame.locks.get(storedKey);
      if (lock && lock.live) {
        const target = lock.targets.find((t) => t.storedKey === storedKey)!;
        return { lock, mode: target.mode };
      }
    }
    return undefined;
  },

  /** The nearest EntityManager of a fenced transaction on the chain, still open; else a DbLockError (`missing`: what to say when there is none). */
  openManager(owner: object, missing?: string): EntityManager {
    const manager = LockContext.manager(owner);
    // Code a locked call started that outlives it (a task not awaited) finds its transaction ended.
    if (manager?.queryRunner?.isReleased)
      throw new DbLockError(`The locked call this code runs in has ended, and its transaction with it: ${MANAGER_ONLY_INSIDE}`);
    if (!manager) throw new DbLockError(missing ?? `No lock transaction in this call chain: ${MANAGER_ONLY_INSIDE}`);
    return manager;
  },

  /** The nearest EntityManager of a fenced transaction on the chain. */
  manager(owner: object): EntityManager | undefined {
    for (let frame = storage.getStore(); frame; frame = frame.parent)
      if (frame.owner === owner && frame.manager !== undefined) return frame.manager ?? undefined;
    return undefined;
  },
});

/**
 * The keys the current call chain already holds (reused, no SQL) and those it must be granted.
 * Read → write on a key the chain holds is refused (LockUpgradeError), as is a lock asked as a
 * permit or the other way round (see checkSameKind).
 */
export function splitByChain(targets: readonly LockTarget[], owner: object): { held: Map<string, HeldLock>; missing: LockTarget[] } {
  const held = new Map<string, HeldLock>();
  const missing: LockTarget[] = [];
  for (const target of targets) {
    const found = LockContext.find(target.storedKey, owner);
    if (!found) missing.push(target);
    else held.set(target.storedKey, reusable(target, found.lock, found.mode));
  }
  return { held, missing };
}

/** `lock`, which holds `target`'s key in `mode`, for reuse by `target`: read → write is refused, and so is a lock asked as a permit or the other way round. */
export function reusable(target: LockTarget, lock: HeldLock, mode: LockMode): HeldLock {
  if (checkSameKind(target, lock) && target.mode === 'write' && mode === 'read') throw new LockUpgradeError(target.key);
  return lock;
}
