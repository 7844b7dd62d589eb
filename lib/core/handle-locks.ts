import type { Logger } from '@nestjs/common';
import { HeldLock } from './held-lock.js';
import type { LockHandle } from './lock-handle.js';
import { NestedLock } from './nested-lock.js';

/* The real locks behind a handle the call chain gave out: its own grant, or a nested handle over locks outer calls hold. */

/** The lock a handle itself was granted (not one held by an outer call), if any. */
export function ownLock(handle: LockHandle): HeldLock | undefined {
  if (handle instanceof HeldLock) return handle;
  if (handle instanceof NestedLock) return handle.own;
  return undefined;
}

/** Every key `handle` covers, mapped to the real lock that holds it. */
export function locksOf(handle: LockHandle): Map<string, HeldLock> {
  const locks = new Map<string, HeldLock>();
  if (handle instanceof HeldLock) for (const t of handle.targets) locks.set(t.storedKey, handle);
  if (handle instanceof NestedLock) for (const [key, lock] of handle.holdersByKey()) locks.set(key, lock);
  return locks;
}

export async function releaseAs(handle: LockHandle, failed: boolean): Promise<void> {
  if (handle instanceof HeldLock || handle instanceof NestedLock) return handle.releaseAs(failed);
  return handle.release();
}

/** Releases `handle` FAILED after its work threw `original`; a failing release is logged, never thrown over `original`. */
export async function releaseQuietly(handle: LockHandle, original: unknown, logger: Pick<Logger, 'warn'>): Promise<void> {
  try {
    await releaseAs(handle, true);
  } catch (releaseError) {
    logger.warn(`Release after a failed call also failed (${String(releaseError)}); rethrowing the call's error: ${String(original)}`);
  }
}

/** No locks (shared, frozen). */
export const NO_LOCKS: readonly HeldLock[] = Object.freeze([]);
