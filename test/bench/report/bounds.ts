/**
 * "What bounds the results": for each target this run missed, the mechanism and the floor that
 * bounds it, from this run's figures (never a claim the run did not measure); then the method notes.
 */
import { DB_LOCK_DEFAULTS } from '../../../lib/index.js';
import { fmt, fmtRatio } from '../stats.js';
import { type BenchResults, latency, variantName } from './results.js';
import { checkTargets } from './targets.js';
import { contentionFloorLines } from './floor-bounds.js';

/** A decorated call commits a grant before its business transaction: the plain transaction plus one durable grant is its floor. */
function decoratorFloor(r: BenchResults, floorId = 'decorated-floor'): number | undefined {
  const plain = latency(r, 'plain-tx')?.median;
  const floor = latency(r, floorId)?.median;
  return plain !== undefined && floor !== undefined ? floor / plain : undefined;
}

export function boundsSection(r: BenchResults): string[] {
  const missed = new Set(
    checkTargets(r)
      .filter((c) => c.verdict === 'missed')
      .map((c) => `${c.group}: ${c.target}`),
  );
  const has = (text: string) => [...missed].some((t) => t.includes(text));
  const lines = ['## What bounds the results', ''];
  const u = (id: string) => latency(r, id)?.median;
  if (has('uncontended exclusive acquire')) {
    const floor = u('claim-floor')!;
    const pk2 = u('pk-update-x2')!;
    const lease = u('lease-write')!;
    lines.push(
      `- **Lease, uncontended acquire + release.** The physical floor of its grant and release (the one INSERT of the log row claiming the key's next token, ` +
        `into \`db_lock_log\` with its indexes, then one PK UPDATE of that row, both sent by hand) costs ${fmt(floor, 3)} ms, ${fmtRatio(floor / pk2)} two autocommit PK UPDATEs. ` +
        (floor / pk2 > 1.25
          ? "That floor alone is above the 1.25× target: no design with a durable grant, an audit row and a durable release can meet it on this server; the target is bounded by the log row's insert and indexes, not by the library. "
          : 'That floor is within the target, so the physical work is not what bounds it. ') +
        `The library spends ${fmt(lease - floor, 3)} ms above the floor (${fmtRatio(lease / floor)}). Its two statements add to the floor's the doorbell test in the claim ` +
        "(`IS_FREE_LOCK`, about 25 µs on the server: it keeps a process from taking back a key another process's waiter was rung for) and the release's status test; " +
        "the rest is client-side work, the call chain's and the driver's between the call and the first send and after each answer, on a CPU the wait left cold " +
        '(`node build/test/bench/probe-claim-gap.js` splits it by layer, `probe-claim-shapes.js` prices each part of the two statements).',
    );
  }
  const plain = u('plain-tx');
  const decorated = (id: string, what: string, limit: number, floorId: string, floorWhat: string): string => {
    const floor = decoratorFloor(r, floorId) ?? NaN;
    const measured = u(id)!;
    return (
      `${floorWhat} is ${fmt(floor)}× the plain transaction${floor > limit ? `, already above the ${limit}× target on this server` : ''}; ` +
      `the call measured ${fmtRatio(measured / plain!)} (${fmt(measured, 3)} ms): ${fmt(measured - u(floorId)!, 3)} ms above that floor for ${what}.`
    );
  };
  if (has("`@WriteLock` running one UPDATE ('requires-new')"))
    lines.push(
      '- **Lease, decorator path.** The lock is durably granted before the business transaction starts, and that transaction ends the lock in its own commit. ' +
        decorated(
          'lease-decorated',
          "the grant's conditional UPDATE, the fenced-commit CALL and the library's bookkeeping",
          2,
          'decorated-floor',
          'A durable grant shape followed by the plain transaction',
        ),
    );
  if (has("strategy: 'row-lock' })` running one UPDATE"))
    lines.push(
      '- **Row-lock, decorator path.** The lock statements ride the business transaction: the locking UPDATE (token bump) before the work, the audit row INSERT and COMMIT in one CALL after it. ' +
        decorated(
          'row-lock-decorated',
          "the library's bookkeeping",
          1.5,
          'row-lock-decorated-floor',
          "A TypeORM transaction with the hold's writes (the locking UPDATE; the audit row and COMMIT in one CALL) sent by hand in it",
        ),
    );
  if (has('uncontended `withLock` (row-lock)')) {
    const floor = u('row-lock-floor')!;
    const raw = u('row-lock-floor-raw')!;
    lines.push(
      `- **Row-lock, uncontended.** A hold's writes sent by hand cost ${fmt(floor, 3)} ms through TypeORM's runner (START, UPDATE, INSERT, COMMIT) and ${fmt(raw, 3)} ms on a plain connection; ` +
        'the library sends START and the UPDATE in one CALL of the begin-and-take routine, then the INSERT and COMMIT in one CALL of the record-and-commit routine, so it saves two round trips on these and adds its own bookkeeping.',
    );
  }
  if (has('hot key, wait p99') || has('same-process share')) {
    for (const v of r.contention?.variants ?? []) {
      const lease = v.byDesign.get('lease')!;
      const redlock = v.byDesign.get('redlock')!;
      const others = r.config.processes * r.config.callersPerProcess - 1;
      lines.push(
        `- **Lease, hot key waits (${variantName(v.pauseMs)}).** ${fmt(lease.sameProcess.median * 100, 0)} % of consecutive holds stayed in one process (fair: 20 %). ` +
          `In a first-come, first-served queue every caller waits for the other ${others} holds: ${others} / ${fmt(lease.throughput.median, 0)} ops/s = ${fmt((others / lease.throughput.median) * 1000, 0)} ms, ` +
          `against a measured wait p99 of ${fmt(lease.waitP99.median, 0)} ms (node-redlock: ${fmt(redlock.waitP99.median, 0)} ms, by starving some callers while others re-take the key). A fair queue's p99 is bounded by its throughput. ` +
          `node-redlock's is not: a starved caller adds one wait (cut at the window's end) among the thousands of quick re-takes of the process that keeps the key, so its p99 reads low whenever fewer than 1 % of its waits are starved ones (${fmt(redlock.sameProcess.median * 100, 0)} % of its consecutive holds stayed in one process).`,
      );
    }
  }
  if (has('throughput ≥ 0.4×') || has('two-commit bound') || has('throughput ≥ 0.9×') || has("wait p99 ≤ 2× a bare `FOR UPDATE` lock's")) {
    lines.push(
      '- **Throughput under contention.** See "Why two durable commits per handoff bound the lease strategy": every lease handoff waits for two durable commits, a row-lock handoff is the server’s own at COMMIT, with the locking UPDATE and the audit row inside each hold. ' +
        "A bare `FOR UPDATE` lock's handoff waits for no log flush at all (InnoDB hands the row over when COMMIT is done in memory), so on a host whose flushes are cheap every ratio to it falls, the by-hand floors' with the library's.",
      ...contentionFloorLines(r),
    );
  }
  if (has('waiter statements'))
    lines.push(
      '- **Waiter statements.** The server-side count includes every other client of the server (see the background rate in the environment); the client-side count does not.',
    );
  if (has('renewal time per second')) {
    const h = r.held!;
    lines.push(
      `- **Renewals.** ${fmt(h.large.renewalsPerSecond.median)} vs ${fmt(h.small.renewalsPerSecond.median)} renewal statements per second, ${fmt(h.large.msPerRenewal.median)} vs ${fmt(h.small.msPerRenewal.median)} ms each by \`stats().renewal\`, ` +
        `of which ${fmt(h.large.statementPerSecond.median)} vs ${fmt(h.small.statementPerSecond.median)} ms/s in the renewal round trip itself; the rest is the renewing process's own work around the statement, which \`stats().renewal\` also counts.`,
    );
  }
  if (has('log rows')) {
    const lt = r.logTable!;
    const overlap = lt.big.min <= lt.empty.max;
    lines.push(
      "- **Big log table.** The grant reads only the key's live rows, through the index on (lock_key, status, expires_at); terminal rows are outside that range. " +
        (overlap
          ? `The rounds' ranges overlap (fresh ${fmt(lt.empty.min, 3)}–${fmt(lt.empty.max, 3)} ms, big ${fmt(lt.big.min, 3)}–${fmt(lt.big.max, 3)} ms): this run does not tell the two apart from noise.`
          : `Every round on the big table was slower (fresh ${fmt(lt.empty.min, 3)}–${fmt(lt.empty.max, 3)} ms, big ${fmt(lt.big.min, 3)}–${fmt(lt.big.max, 3)} ms).`),
    );
  }
  if (lines.length === 2) lines.push('Every target with a verdict was met in this run.');
  return [...lines, ''];
}

export function notesSection(r: BenchResults): string[] {
  const d = DB_LOCK_DEFAULTS;
  const notes = [
    `The library runs with its defaults in the uncontended and contention sections (lease ${d.leaseMs} ms, retry backoff ${d.retryMinDelayMs}–${d.retryMaxDelayMs} ms with jitter, pool of ${d.poolSize}, doorbells on, janitor on); the DataSource pool is 10 connections.`,
    'The decorator paths are measured through real `@WriteLock`-decorated methods (test/bench/designs/decorated.ts) that reach their transaction through `lockService.manager`; the plain transaction they are compared with is `dataSource.transaction(fn)` with the same UPDATE.',
    "Statement counts: SHOW GLOBAL STATUS 'Questions' counts each statement of a multi-statement round trip; a lease grant is one round trip of " +
      "several statements (START TRANSACTION … COMMIT), its doorbell wait rides in the same round trip and its ring in the release's.",
    'node-redlock runs with its defaults (10 retries, 200 ms delay, 100 ms jitter; TTL 10 s here); a redlock caller whose tries run out (LockError) starts again, and its wait counts from its first try.',
    'The blocking `SELECT … FOR UPDATE` and `GET_LOCK` designs hold one database connection per waiting caller, as does the row-lock strategy (on the DataSource); the lease strategy holds none while holding.',
  ];
  if (r.config.quick) notes.push('Quick mode: short rounds and windows; the figures are indicative only.');
  return ['## Notes', '', ...notes.map((n) => `- ${n}`), ''];
}
