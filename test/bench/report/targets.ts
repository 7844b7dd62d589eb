/**
 * The targets, each with its verdict from this run's figures: met, missed (with the measured
 * value), not measured (its section did not run), or reported (a cost to show, no target).
 */
import { fmt, fmtRatio } from '../stats.js';
import { variantChecks } from './contention-targets.js';
import { count } from './markdown.js';
import { postgresChecks } from './postgres-tables.js';
import { type BenchResults, latency } from './results.js';
import { met, notRun, ratioCheck, type TargetCheck } from './target-check.js';

export { ROW_LOCK_WAITER_LIMIT, type TargetCheck, type Verdict } from './target-check.js';

function uncontendedChecks(r: BenchResults): TargetCheck[] {
  const u = (id: string) => latency(r, id);
  const checks: TargetCheck[] = [];
  const target = 'uncontended exclusive acquire + release, with its audit row ≤ 1.25× two autocommit PK UPDATEs';
  if (!r.uncontended) checks.push(notRun('Lease', target, 'uncontended'));
  else {
    const lease = u('lease-write')!;
    const pk2 = u('pk-update-x2')!;
    const floor = u('claim-floor')!;
    const fullFloor = u('physical-floor')!;
    const trips = r.uncontended.get('lease-write')?.measuredRoundTrips;
    checks.push({
      group: 'Lease',
      target,
      measured:
        `${fmtRatio(lease.median / pk2.median)} (${fmt(lease.median, 3)} vs ${fmt(pk2.median, 3)} ms); physical floor of its grant (one INSERT of the log row claiming the next token + one PK UPDATE of that row, by hand) ` +
        `${fmt(floor.median, 3)} ms = ${fmtRatio(floor.median / pk2.median)} two PK UPDATEs, lease = ${fmtRatio(lease.median / floor.median)} that floor ` +
        `(the full grant's floor, START; INSERT; UPDATE; COMMIT + the release: ${fmtRatio(fullFloor.median / pk2.median)}); ` +
        `acquire 1 round trip of 1 statement, release 1 round trip of 1 statement (measured ${fmt(trips ?? NaN, 2)} round trips per acquire + release)`,
      verdict: met(lease.median / pk2.median <= 1.25),
    });
  }
  const decoratedFloor = u('decorated-floor');
  const rowLockDecoratedFloor = u('row-lock-decorated-floor');
  const plainTx = u('plain-tx');
  checks.push(
    ratioCheck(
      'Lease',
      "decorator path: `@WriteLock` running one UPDATE ('requires-new') ≤ 2× the same UPDATE in a plain TypeORM transaction",
      u('lease-decorated'),
      plainTx,
      2,
      true,
      'ms',
      decoratedFloor && plainTx
        ? `; floor (the claim grant's INSERT, then the plain transaction) ${fmt(decoratedFloor.median, 3)} ms = ${fmtRatio(decoratedFloor.median / plainTx.median)}; ` +
            `grant 1 round trip of 1 statement (the claim INSERT), then SET ISOLATION and START (while the grant is on the wire), the UPDATE, then the fence and COMMIT in one CALL of the fenced-commit routine on the DataSource`
        : '',
    ),
    ratioCheck(
      'Row-lock',
      "decorator path: `@WriteLock(…, { strategy: 'row-lock' })` running one UPDATE ≤ 1.5× the same UPDATE in a plain TypeORM transaction",
      u('row-lock-decorated'),
      plainTx,
      1.5,
      true,
      'ms',
      rowLockDecoratedFloor && plainTx
        ? `; floor (the same statements by hand in a TypeORM transaction) ${fmt(rowLockDecoratedFloor.median, 3)} ms = ${fmtRatio(rowLockDecoratedFloor.median / plainTx.median)}; ` +
            `the library: START and the locking UPDATE in one CALL of the begin-and-take routine, the UPDATE, and the audit row with COMMIT in one CALL of the record-and-commit routine, on the DataSource`
        : '',
    ),
    ratioCheck(
      'Row-lock',
      'uncontended `withLock` (row-lock) with an empty fn ≤ 1.25× the same writes sent by hand on the DataSource (TypeORM `startTransaction()`; UPDATE key row; INSERT audit row; COMMIT)',
      u('row-lock-empty'),
      u('row-lock-floor'),
      1.25,
      true,
      'ms',
    ),
  );
  const raw = u('row-lock-floor-raw');
  const rowLock = u('row-lock-empty');
  checks.push(
    rowLock && raw
      ? {
          group: 'Row-lock',
          target:
            'uncontended `withLock` (row-lock) with an empty fn, vs the same writes on a plain mysql2 connection (BEGIN; UPDATE; INSERT; COMMIT: no TypeORM runner)',
          measured: `${fmtRatio(rowLock.median / raw.median)} (${fmt(rowLock.median, 3)} vs ${fmt(raw.median, 3)} ms)`,
          verdict: 'reported',
        }
      : notRun('Row-lock', 'uncontended `withLock` (row-lock) vs the writes on a plain connection', 'uncontended'),
  );
  const reentrant = r.uncontended?.get('reentrant');
  checks.push(
    reentrant
      ? {
          group: 'Kept from before',
          target: 'reentrant acquire: 0 round trips',
          measured: `${fmt(reentrant.measuredRoundTrips ?? NaN, 3)} round trips per acquire, ${fmt(reentrant.latency.median * 1000, 1)} µs`,
          verdict: met(reentrant.measuredRoundTrips === 0),
        }
      : notRun('Kept from before', 'reentrant acquire: 0 round trips', 'uncontended'),
  );
  return checks;
}

function scaleChecks(r: BenchResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const renewalTarget = 'renewal time per second with 10,000 held locks ≤ 2× that with 100 (same lease)';
  const heldTarget = '10,000 held lease locks on a pool of 10 (no connection per held lease lock)';
  const logTarget = '1,000,000 log rows: acquire latency ≤ 1.2× the empty table';
  if (!r.held) checks.push(notRun('Lease', renewalTarget, 'scale'), notRun('Kept from before', heldTarget, 'scale'));
  else {
    const { small, large } = r.held;
    const target = renewalTarget.replace('10,000', large.acquired.count.toLocaleString('en-US'));
    checks.push(
      ratioCheck(
        'Lease',
        target,
        large.renewingPerSecond,
        small.renewingPerSecond,
        2,
        true,
        'ms/s',
        `; ${fmt(large.renewalsPerSecond.median)} vs ${fmt(small.renewalsPerSecond.median)} renewal statements/s, ${fmt(large.msPerRenewal.median)} vs ${fmt(small.msPerRenewal.median)} ms each`,
      ),
    );
    const ok = large.released.held === large.acquired.count && large.released.lost === 0 && large.failures === 0;
    checks.push({
      group: 'Kept from before',
      target: heldTarget.replace('10,000', large.acquired.count.toLocaleString('en-US')).replace('10', String(r.held.poolSize)),
      measured: `${count(large.released.held)} held after ${r.held.large.windows.length + 1} renewal windows, ${large.released.lost} lost, ${large.failures} failed renewals, ${fmt(large.acquired.heapBytesPerLock, 0)} B heap per lock`,
      verdict: met(ok),
    });
  }
  if (!r.logTable) checks.push(notRun('Kept from before', logTarget, 'scale'));
  else
    checks.push(
      ratioCheck(
        'Kept from before',
        logTarget.replace('1,000,000', r.logTable.rows.toLocaleString('en-US')),
        r.logTable.big,
        r.logTable.empty,
        1.2,
        true,
        'ms',
      ),
    );
  return checks;
}

export function checkTargets(r: BenchResults): TargetCheck[] {
  const checks = [...uncontendedChecks(r)];
  if (!r.contention)
    checks.push(
      notRun('Lease', 'hot key: wait p99, same-process share, throughput, waiter statements', 'contention'),
      notRun('Row-lock', 'contention: throughput, wait p99, waiter statements', 'contention'),
    );
  else for (const v of r.contention.variants) checks.push(...variantChecks(r, v));
  checks.push(...scaleChecks(r));
  checks.push(...postgresChecks(r.postgres));
  const order = ['Lease', 'Row-lock', 'PostgreSQL', 'Kept from before'];
  return checks.sort((a, b) => order.indexOf(a.group) - order.indexOf(b.group));
}
