import type { LockService } from '../../lib/index.js';

/**
 * Round trips a caller caused (grants, releases, doorbells, inspect and admin calls), from the
 * public stats: the watchdog's renewals and the janitor's statements are left out, so a count
 * taken around a call never includes background traffic that happened to run meanwhile.
 */
export function callerTrips(locks: LockService): number {
  const by = locks.stats().roundTripsBy;
  return by.locks + by.admin;
}

/**
 * Whether callerTrips sees a target's lock statements. stats().roundTripsBy counts the library
 * pool; a row-lock waiter's tries run on DataSource connections, which it does
 * not count (yet), so under row-lock a round-trip assertion could not fail and is skipped.
 */
export function countsLockTrips(target: { capabilities: ReadonlySet<string> }): boolean {
  return target.capabilities.has('connection-free-holders');
}
