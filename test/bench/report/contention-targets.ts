/** The contention section's targets, per variant (callers re-requesting at once, or after a pause). */
import type { ContentionFigures, ContentionVariant } from '../contention.js';
import { DESIGN_IDS, type DesignId, SHORT_LABELS } from '../designs/index.js';
import { fmt, fmtRatio } from '../stats.js';
import { count } from './markdown.js';
import { type BenchResults, twoCommitBound, variantName } from './results.js';
import { met, notRun, ratioCheck, ROW_LOCK_WAITER_LIMIT, type TargetCheck } from './target-check.js';

function waiterText(f: ContentionFigures): string {
  return `server ${fmt(f.waiterShare.median * 100, 1)} % (${count(f.waiterQps.median)} statements/s: 'Questions' delta minus useful), client ${fmt(f.clientWaiterShare.median * 100, 1)} % (${count(f.clientWaiterRtps.median)} round trips/s)`;
}

export function variantChecks(r: BenchResults, v: ContentionVariant): TargetCheck[] {
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
