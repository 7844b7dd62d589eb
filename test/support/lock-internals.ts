/**
 * Test hooks into a running LockService: stall a holder, freeze a process's watchdog, reach the
 * lock log. Tests use these instead of writing private fields; nothing here is part of the
 * library's public API.
 */
import type { LockHandle, LockService } from '../../lib/index.js';
import { HeldLock } from '../../lib/core/held-lock.js';
import { NestedLock } from '../../lib/core/nested-lock.js';
import { RUNNING_PARTS } from '../../lib/lock.service.js';
import type { LockServiceParts } from '../../lib/lock-service.assembly.js';
import type { MysqlLockLog } from '../../lib/store/mysql/mysql-lock-log.js';
import { format, LOCK_LOG_TABLE } from '../../lib/store/mysql/sql.js';
import { freezeWatchdog, thawWatchdog } from './frozen-watchdog.js';

export function partsOf(locks: LockService): LockServiceParts {
  const parts = RUNNING_PARTS.get(locks);
  if (!parts) throw new Error('the LockService is not running');
  return parts;
}

/** The MySQL store's lock log (these tests run against MySQL/MariaDB). */
export function mysqlLogOf(locks: LockService): MysqlLockLog {
  return partsOf(locks).store.log as MysqlLockLog;
}

/** The real lock behind a handle (the one whose rows are in the log). */
export function heldLockOf(handle: LockHandle): HeldLock {
  if (handle instanceof HeldLock) return handle;
  if (handle instanceof NestedLock && handle.own) return handle.own;
  throw new Error('not a lock of its own');
}

/** The log row ids of a lock, in key order. */
export function rowIdsOf(handle: LockHandle): readonly string[] {
  return heldLockOf(handle).rowIds;
}

/** Its acquisition id (the rows' `owner`). */
export function acquisitionIdOf(handle: LockHandle): string {
  return heldLockOf(handle).acquisitionId;
}

/**
 * Stalls one holder while its process goes on: its rows stop being renewed (detached from the
 * process lease, so its own lease runs out on the server) and the process forgets to watch it
 * (no local abort, no give-back), as if the code holding it were frozen.
 */
export async function stall(locks: LockService, handle: LockHandle): Promise<void> {
  const parts = partsOf(locks);
  const lock = heldLockOf(handle);
  parts.watchdog.remove(lock);
  await mysqlLogOf(locks).pool.query(format(`UPDATE ${LOCK_LOG_TABLE} SET process_id = NULL WHERE id IN (?)`, [lock.rowIds]), { purpose: 'admin' });
}

/** The whole process stops renewing and stops aborting signals (SIGSTOP-like), until thaw. */
export function freeze(locks: LockService): void {
  freezeWatchdog(partsOf(locks).watchdog);
}

export function thaw(locks: LockService): void {
  thawWatchdog(partsOf(locks).watchdog);
}

/** This process's lease row id. */
export function processIdOf(locks: LockService): string {
  return mysqlLogOf(locks).processId;
}

/** Round trips the library sent for locks (grants, releases, doorbells): leaves out renewals, the janitor and admin calls. */
export function lockRoundTrips(locks: LockService): number {
  return locks.stats().roundTripsBy.locks;
}
