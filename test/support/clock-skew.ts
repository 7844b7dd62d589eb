/**
 * Preload for clock-skew tests: `node --import <url of this file>` replaces the global Date so
 * that `Date.now()` and `new Date()` run CLOCK_SKEW_MS (default +1 h) ahead of the real clock.
 * Dates built from explicit values are left alone. The monotonic clock (performance.now) is not
 * touched: a lock library must depend on neither this clock nor the real one for leases.
 */
const offsetMs = Number(process.env.CLOCK_SKEW_MS ?? 3_600_000);
const RealDate = Date;

class SkewedDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(RealDate.now() + offsetMs);
    else super(...(args as [string | number | Date]));
  }

  static override now(): number {
    return RealDate.now() + offsetMs;
  }
}

globalThis.Date = SkewedDate as DateConstructor;
