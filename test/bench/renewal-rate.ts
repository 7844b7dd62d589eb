/**
 * Renewal cost for many held locks in one process: holds N locks (lease 3 s, so the watchdog
 * ticks every 1 s) for a while and reports renewal statements per second, leases renewed per
 * second and the time per renewal statement.
 *   npx tsc -p tsconfig.json && node build/test/bench/renewal-rate.js [locks=1000] [seconds=10]
 */
import { createLockApp } from '../support/lock-app.js';
import { TestDatabase } from '../support/test-database.js';

const count = Number(process.argv[2] ?? 1000);
const seconds = Number(process.argv[3] ?? 10);
const db = await TestDatabase.create('dblock_bench');
const { app, locks } = await createLockApp(db.settings, { leaseMs: 3000, janitor: false, slowThresholdMs: Infinity });
try {
  const t0 = performance.now();
  const held = await Promise.all(Array.from({ length: count }, (_, i) => locks.acquire(`bench:${i}`)));
  const acquireMs = performance.now() - t0;
  const before = locks.stats();
  const start = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const after = locks.stats();
  const elapsed = (performance.now() - start) / 1000;
  const statements = after.renewals - before.renewals;
  const renewed = after.renewedLocks - before.renewedLocks;
  const [row] = await db.query<{ n: number }[]>(`SELECT COUNT(*) AS n FROM db_lock_log WHERE status = 'ACQUIRED' AND expires_at > UTC_TIMESTAMP(6)`);
  await Promise.all(held.map((l) => l.release()));
  console.log(
    JSON.stringify(
      {
        locks: count,
        leaseMs: 3000,
        seconds: Math.round(elapsed * 10) / 10,
        acquireAllMs: Math.round(acquireMs),
        renewalStatementsPerSecond: Math.round((statements / elapsed) * 100) / 100,
        leasesRenewedPerSecond: Math.round(renewed / elapsed),
        renewalFailures: after.renewalFailures - before.renewalFailures,
        lost: after.lost - before.lost,
        stillLiveAtEnd: Number(row?.n),
        msPerRenewalStatement: {
          mean: Math.round(after.renewal.meanMs * 10) / 10,
          p50: Math.round(after.renewal.p50Ms * 10) / 10,
          p99: Math.round(after.renewal.p99Ms * 10) / 10,
          max: Math.round(after.renewal.maxMs * 10) / 10,
        },
        roundTripsWhileHolding: after.roundTrips - before.roundTrips,
      },
      null,
      2,
    ),
  );
} finally {
  await app.close();
  await db.drop();
}
