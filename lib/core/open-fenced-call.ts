import type { EntityManager } from 'typeorm';
import type { HeldLock } from './held-lock.js';
import type { JoinedLocks } from './joined-locks.js';

/**
 * A fenced call whose work is running: what nested lock calls of its chain join. The database's
 * is a FencedTransaction; the testing module's has no transaction but ends the same locks at the
 * same moment. It rides on the chain's lock frames (see LockContext.openCall).
 */
export interface OpenFencedCall {
  /** Still running its work: a call that ended (or is committing) is not joined. */
  readonly open: boolean;
  /** The EntityManager its work sees (undefined: none; the testing module may have none). */
  readonly manager: EntityManager | undefined;
  /** Locks of calls that joined it, by key, for later calls of the chain to reuse. */
  readonly joined: JoinedLocks;
  /** `lock` ends with this call (RELEASED when it succeeds, FAILED when it fails). */
  enlist(lock: HeldLock): void;
  /** `lock`, an outer call's, reused by a call that joined this one: fenced at its end and kept. */
  keep(lock: HeldLock): void;
}
