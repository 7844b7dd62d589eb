/**
 * The report's explanations, each built from this run's figures: lease vs row-lock, why two
 * durable commits per handoff bound the lease strategy, and what the row-lock's durable grant
 * record costs.
 */
import { fmt, fmtRatio } from '../stats.js';
import { table } from './markdown.js';
import { type BenchResults, latency, twoCommitBound, variant, variantName } from './results.js';

export { boundsSection, notesSection } from './bounds.js';

const m = (v: number | undefined, digits = 2): string => (v === undefined ? 'not measured' : fmt(v, digits));

export function decisionTable(r: BenchResults): string[] {
  const v = variant(r, 0);
  const lease = v?.byDesign.get('lease');
  const rowLock = v?.byDesign.get('row-lock');
  const held = r.held?.large;
  // Measured figures are appended only when the contention section ran.
  const measured = (what: string, a: number | undefined, b: number | undefined, unit: string): [string, string] =>
    v ? [`; ${what} ${m(a)} ${unit}`, `; ${what} ${m(b)} ${unit}`] : ['', ''];
  const handoff = measured('measured handoff p50 (hot key)', lease?.handoffP50.median, rowLock?.handoffP50.median, 'ms');
  const hot = measured('measured hot-key throughput', lease?.throughput.median, rowLock?.throughput.median, 'ops/s');
  return [
    '## Lease or row-lock',
    '',
    ...table(
      ['', 'lease (default)', "row-lock (`strategy: 'row-lock'`)"],
      [
        [
          'connections held',
          `none while holding (${held ? `${held.acquired.count.toLocaleString('en-US')} locks held on a pool of ${r.held!.poolSize}` : 'any number of locks on the small pool'}); a waiting writer of a contended key holds one doorbell connection from a small pool of its own`,
          "one of the app's DataSource connections per holder and per waiter (at most `maxRowLockWaiters` waiting, and one connection always left free)",
        ],
        [
          'crash release',
          "the key frees when the holder's lease runs out (its own lease or its process's latest renewal plus the lease; 30 s by default)",
          "the moment the holder's connection closes (the server rolls back and hands the row lock over); the dead holder's audit row rolled back with its work",
        ],
        [
          'handoff',
          `the release commits, rings the doorbell, and the next waiter (first come, first served, any process) commits its grant: two durable commits in series${handoff[0]}`,
          `the server hands the row lock over at COMMIT; the lock statements ride the business transaction, so there is no commit of its own${handoff[1]}`,
        ],
        [
          'long holds',
          'cheap: no connection or transaction stays open; one renewal UPDATE per process per tick whatever the number of locks',
          'an open transaction for the whole hold: a connection, row locks, and undo history the server cannot purge meanwhile',
        ],
        ['hot keys', `bounded by the two durable commits per handoff${hot[0]}`, `the server's queue, plus the audit row inside each hold${hot[1]}`],
        [
          'cluster (Galera)',
          'works: one statement per round trip, grants confirmed after COMMIT, doorbells off (named locks are local to a node)',
          "row locks are local to one node: waiters on other nodes do not queue behind the holder; exclusion comes from certification (every writer writes the key's row)",
        ],
        [
          'where the work runs',
          'anywhere; `@WriteLock` runs it in a fenced transaction of its own, in whose commit the lock ends',
          'inside the locking transaction (`lockService.manager`, `handle.manager`); COMMIT releases',
        ],
      ],
    ),
    '',
  ];
}

export function handoffCommitsSection(r: BenchResults): string[] {
  const out = ['## Why two durable commits per handoff bound the lease strategy', ''];
  const commit = latency(r, 'pk-update')?.median;
  const variants = r.contention?.variants ?? [];
  if (variants.length === 0) return [...out, 'The contention section did not run.', ''];
  const v = variants[0]!;
  const lease = v.byDesign.get('lease')!;
  const decorated = v.byDesign.get('lease-decorated')!;
  const forUpdate = v.byDesign.get('for-update')!;
  const getLock = v.byDesign.get('get-lock')!;
  out.push(
    "A lease lock is a committed log row, and the waiter holds nothing while it waits. Handing the key over therefore takes two durable commits in series: the holder's " +
      'release (for a decorated call: the business commit, in which the lock ends) must be on disk before the next grant can see the key free, and that grant must be on disk ' +
      'before its caller may start. The doorbell only removes the polling gap in between (the next waiter is woken by RELEASE_LOCK and asks in the same round trip). ' +
      "A blocking `SELECT … FOR UPDATE` or `GET_LOCK` hands over inside the server when the holder's COMMIT or RELEASE_LOCK arrives: the waiter was already parked there on its " +
      "own connection, and no write is needed for the handoff itself (the FOR UPDATE holder's commit makes its critical section durable, which the lease design pays for separately). " +
      'Group commit does not help, because the two commits of a handoff are on one critical path, never concurrent.',
    '',
    `Measured in this run (${variantName(v.pauseMs)}): one durable commit (an autocommit PK UPDATE, uncontended) costs ${m(commit, 3)} ms. ` +
      `Handoff p50: lease ${fmt(lease.handoffP50.median)} ms, lease through \`@WriteLock\` ${fmt(decorated.handoffP50.median)} ms, FOR UPDATE ${fmt(forUpdate.handoffP50.median)} ms, GET_LOCK ${fmt(getLock.handoffP50.median)} ms. ` +
      (commit !== undefined
        ? `With the critical section's ${fmt(1000 / v.serialFloor.median, 2)} ms (serial floor), one holder after another can do at most ≈ ${fmt(twoCommitBound(v, commit), 0)} ops/s ` +
          `(1 / (2 commits + critical section)); the lease reached ${fmt(lease.throughput.median, 0)} ops/s and \`@WriteLock\` ${fmt(decorated.throughput.median, 0)}, ` +
          `against ${fmt(forUpdate.throughput.median, 0)} for FOR UPDATE (${fmtRatio(lease.throughput.median / forUpdate.throughput.median)}).`
        : 'The uncontended section did not run, so the commit cost was not measured.'),
    '',
  );
  return out;
}
