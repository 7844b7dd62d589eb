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
