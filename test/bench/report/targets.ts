/**
 * The targets, each with its verdict from this run's figures: met, missed (with the measured
 * value), not measured (its section did not run), or reported (a cost to show, no target).
 */
import type { ContentionFigures, ContentionVariant } from '../contention.js';
import { DESIGN_IDS, type DesignId, SHORT_LABELS } from '../designs/index.js';
import { type Figure, fmt, fmtRatio } from '../stats.js';
import { count } from './markdown.js';
import { postgresChecks } from './postgres-tables.js';
import { type BenchResults, latency, twoCommitBound, variantName } from './results.js';

export type Verdict = 'met' | 'missed' | 'not measured' | 'reported';

export interface TargetCheck {
  group: 'Lease' | 'Row-lock' | 'PostgreSQL' | 'Kept from before';
  target: string;
  measured: string;
  verdict: Verdict;
}

/** Row-lock waiters park in the server: "≈ 0" waiter statements is read as at most this share of the useful ones. */
export const ROW_LOCK_WAITER_LIMIT = 0.02;

const notRun = (group: TargetCheck['group'], target: string, section: string): TargetCheck => ({
  group,
  target,
  measured: `${section} section not run`,
  verdict: 'not measured',
});
const met = (ok: boolean): Verdict => (ok ? 'met' : 'missed');

/** `a / b` against `limit` (`atMost`: a/b ≤ limit, else a/b ≥ limit), with both values and their unit. */
function ratioCheck(
  group: TargetCheck['group'],
  target: string,
  a: Figure | undefined,
  b: Figure | undefined,
  limit: number,
  atMost: boolean,
  unit: string,
  extra = '',
): TargetCheck {
  if (!a || !b) return notRun(group, target, 'its');
  const ratio = a.median / b.median;
  return {
    group,
    target,
    measured: `${fmtRatio(ratio)} (${fmt(a.median)} vs ${fmt(b.median)} ${unit})${extra}`,
    verdict: met(atMost ? ratio <= limit : ratio >= limit),
  };
}

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

function waiterText(f: ContentionFigures): string {
  return `server ${fmt(f.waiterShare.median * 100, 1)} % (${count(f.waiterQps.median)} statements/s: 'Questions' delta minus useful), client ${fmt(f.clientWaiterShare.median * 100, 1)} % (${count(f.clientWaiterRtps.median)} round trips/s)`;
}

function variantChecks(r: BenchResults, v: ContentionVariant): TargetCheck[] {
  const name = ` (${variantName(v.pauseMs)})`;
  const d = (id: DesignId) => v.byDesign.get(id);
  const lease = d('lease');
  const rowLock = d('row-lock');
  const forUpdate = d('for-update');
  const byHand = d('row-lock-hand');
  const byHandOrm = d('row-lock-hand-orm');
  const forUpdateOrm = d('for-update-orm');
  // What the audit row inside a hold costs: the by-hand hold without it, and with it written otherwise.
  const auditFloors = [
    [d('row-lock-hand-no-audit'), 'the by-hand hold without its audit row'],
    [d('row-lock-hand-pre-audit'), "with its audit row inserted before the locking UPDATE (outside the key's critical section)"],
    [d('row-lock-hand-lean-audit'), 'with its audit row in a table indexed by its primary key only (the cheapest durable audit row)'],
  ] as const;
  const redlock = d('redlock');
  const checks: TargetCheck[] = [
    ratioCheck('Lease', `hot key, wait p99 ≤ 0.25× node-redlock's${name}`, lease?.waitP99, redlock?.waitP99, 0.25, true, 'ms'),
  ];
  if (lease) {
    checks.push({
      group: 'Lease',
      target: `hot key, same-process share of handoffs ≤ 40 % (fair: 20 %)${name}`,
      measured: `${fmt(lease.sameProcess.median * 100, 1)} % (${fmt(lease.sameProcess.min * 100, 1)}–${fmt(lease.sameProcess.max * 100, 1)})`,
      verdict: met(lease.sameProcess.median <= 0.4),
    });
  }
  const leaseByHand = d('lease-hand');
  checks.push(
    ratioCheck(
      'Lease',
      `hot key, throughput ≥ 0.4× a bare blocking \`SELECT … FOR UPDATE\` lock${name}`,
      lease?.throughput,
      forUpdate?.throughput,
      0.4,
      false,
      'ops/s',
      leaseByHand && lease && forUpdate
        ? `; floor (a hold's statements by hand, the doorbell wait with the grant behind it, no client code between them) ${fmt(leaseByHand.throughput.median)} ops/s = ` +
            `${fmtRatio(leaseByHand.throughput.median / forUpdate.throughput.median)}, lease = ${fmtRatio(lease.throughput.median / leaseByHand.throughput.median)} of it`
        : '',
    ),
  );
  const commit = r.uncontended?.get('pk-update')?.latency.median;
  const boundTarget = `hot key, throughput ≥ 0.8× the two-commit bound, 1 / (2 durable commits + critical section)${name}`;
  if (lease && commit !== undefined) {
    const bound = twoCommitBound(v, commit);
    const ratio = lease.throughput.median / bound;
    checks.push({
      group: 'Lease',
      target: boundTarget,
      measured:
        `${fmtRatio(ratio)} (${fmt(lease.throughput.median)} vs ${fmt(bound, 0)} ops/s: commit ${fmt(commit, 3)} ms from the uncontended section, critical section ${fmt(1000 / v.serialFloor.median, 3)} ms); ` +
        `per hold: 1 grant round trip (its doorbell wait in front), 1 release round trip (its ring behind)`,
      verdict: met(ratio >= 0.8),
    });
  } else checks.push(notRun('Lease', boundTarget, 'uncontended (the commit cost) or contention'));
  if (lease)
    checks.push({
      group: 'Lease',
      target: `hot key, waiter statements ≤ 20 % of useful ones, doorbell GET_LOCK/RELEASE_LOCK counted as useful${name}`,
      measured: `${waiterText(lease)}; background ${count(v.backgroundQps)} statements/s before the variant`,
      verdict: met(lease.waiterShare.median <= 0.2 && lease.clientWaiterShare.median <= 0.2),
    });
  checks.push(
    ratioCheck(
      'Row-lock',
      `contention, throughput ≥ 0.9× a bare \`FOR UPDATE\` lock${name}`,
      rowLock?.throughput,
      forUpdate?.throughput,
      0.9,
      false,
      'ops/s',
      byHand && forUpdate && rowLock
        ? `; floor (the hold's statements by hand) ${fmt(byHand.throughput.median)} ops/s = ${fmtRatio(byHand.throughput.median / forUpdate.throughput.median)}, row-lock = ${fmtRatio(rowLock!.throughput.median / byHand.throughput.median)} of it` +
            (byHandOrm
              ? `; with the critical section through TypeORM by hand ${fmt(byHandOrm.throughput.median)} ops/s = ${fmtRatio(byHandOrm.throughput.median / forUpdate.throughput.median)}, row-lock = ${fmtRatio(rowLock!.throughput.median / byHandOrm.throughput.median)} of it`
              : '') +
            (forUpdateOrm
              ? `; a \`FOR UPDATE\` lock as a TypeORM app writes it (\`dataSource.transaction\`, the same work code as the row-lock's) ${fmt(forUpdateOrm.throughput.median)} ops/s = ${fmtRatio(forUpdateOrm.throughput.median / forUpdate.throughput.median)}, row-lock = ${fmtRatio(rowLock!.throughput.median / forUpdateOrm.throughput.median)} of it`
              : '') +
            auditFloors
              .filter(([floor]) => floor)
              .map(
                ([floor, label]) =>
                  `; ${label} ${fmt(floor!.throughput.median)} ops/s = ${fmtRatio(floor!.throughput.median / forUpdate.throughput.median)}`,
              )
              .join('')
        : '',
    ),
    ratioCheck(
      'Row-lock',
      `contention, wait p99 ≤ 2× a bare \`FOR UPDATE\` lock's${name}`,
      rowLock?.waitP99,
      forUpdate?.waitP99,
      2,
      true,
      'ms',
      byHand && forUpdate ? `; floor (by hand) ${fmt(byHand.waitP99.median)} ms = ${fmtRatio(byHand.waitP99.median / forUpdate.waitP99.median)}` : '',
    ),
  );
  if (rowLock)
    checks.push({
      group: 'Row-lock',
      target: `contention, waiter statements ≈ 0 (≤ ${ROW_LOCK_WAITER_LIMIT * 100} % of useful ones)${name}`,
      measured: `${waiterText(rowLock)}; background ${count(v.backgroundQps)} statements/s before the variant`,
      verdict: met(rowLock.waiterShare.median <= ROW_LOCK_WAITER_LIMIT && rowLock.clientWaiterShare.median <= ROW_LOCK_WAITER_LIMIT),
    });
  const ids = DESIGN_IDS.filter((id) => v.byDesign.has(id));
  checks.push({
    group: 'Kept from before',
    target: `lost updates = 0${name}`,
    measured: ids.map((id) => `${SHORT_LABELS[id]} ${v.byDesign.get(id)!.lostTotal}`).join(', '),
    verdict: met(ids.every((id) => v.byDesign.get(id)!.lostTotal === 0)),
  });
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
