/**
 * This library's designs: lease acquire/release (critical section on the caller's own connection),
 * lease through `@WriteLock` (critical section in the fenced transaction), and row-lock through
 * `withLock` (critical section in the locking transaction, through `handle.manager`). Their
 * client-side count is the library's own (`stats().roundTripsBy.locks`, doorbells included) plus
 * what goes through the DataSource (the row-lock and fenced transactions) and the caller's connection.
 */
import { resolveTargets } from '../../../lib/core/lock-key.js';
import { leanGrantPlan } from '../../../lib/store/mysql/grant.sql.js';
import { hostNow } from '../stats.js';
import { DecoratedWork, managerQuery } from './decorated.js';
import { countedQuery, type DesignDeps, type LockDesign } from './types.js';

/** Generous budget: a timeout in the bench would be a finding, reported as an error, not hidden. */
const TIMEOUT_MS = 120_000;

/** Statements of one common-case grant round trip (START TRANSACTION … COMMIT) of `strategy`. */
export function grantStatements(strategy: 'lease'): number {
  return leanGrantPlan({
    acquisitionId: 'o',
    holder: 'h',
    processId: '1',
    strategy,
    targets: resolveTargets('k', 'write', ''),
    leaseMs: 1000,
    waitedMs: 0,
    writerWaitMarkMs: 0,
    writerPreference: true,
  }).statements.length;
}

/** TypeORM's statements around a fenced 'requires-new' transaction: SET TRANSACTION ISOLATION LEVEL, START TRANSACTION, COMMIT. */
const TRANSACTION_STATEMENTS = 3;
/** The row-lock's own transaction: START TRANSACTION and COMMIT (the server's default isolation, nothing sent to set it). */
const ROW_LOCK_TRANSACTION_STATEMENTS = 2;
/** The fence: one UPDATE of the holder's log row inside the transaction. */
const FENCE_STATEMENTS = 1;
/** Doorbell: GET_LOCK while waiting, RELEASE_LOCK after the release; useful statements of a handoff, one each per hold. */
const BELL_STATEMENTS = 2;
const CRITICAL_SECTION = 2;

function libraryCounts(deps: DesignDeps): () => number {
  const locks0 = deps.locks.stats().roundTripsBy.locks;
  const typeorm0 = deps.dataSourceQueries();
  return () => deps.locks.stats().roundTripsBy.locks - locks0 + (deps.dataSourceQueries() - typeorm0);
}

export function leaseDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  const library = libraryCounts(deps);
  return {
    id: 'lease',
    // grant + release (one UPDATE) + doorbell + critical section
    usefulStatements: grantStatements('lease') + 1 + BELL_STATEMENTS + CRITICAL_SECTION,
    usefulRedisCommands: 0,
    // The bell's wait rides in the grant's round trip and its ring in the release's.
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare() {},
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      const handle = await deps.locks.acquire(key, { timeoutMs: TIMEOUT_MS });
      const acquiredAt = hostNow();
      let releasingAt = acquiredAt;
      try {
        await body(query);
      } finally {
        releasingAt = hostNow();
        await handle.release();
      }
      return { acquiredAt, releasingAt };
    },
    roundTrips: () => library() + counter.sent,
    redisCommands: () => 0,
    async close() {},
  };
}

export function leaseDecoratedDesign(deps: DesignDeps): LockDesign {
  const work = new DecoratedWork(deps.locks);
  return {
    id: 'lease-decorated',
    // grant + the fenced transaction (its fence ends the lock) + doorbell + critical section
    usefulStatements: grantStatements('lease') + TRANSACTION_STATEMENTS + FENCE_STATEMENTS + BELL_STATEMENTS + CRITICAL_SECTION,
    usefulRedisCommands: 0,
    // The lock ends in the business commit; the bell is rung after it, in a round trip of its own.
    handoffRoundTrips: 1,
    gaveUp: 0,
    async prepare() {},
    async hold(key, _slot, body) {
      const times = { acquiredAt: 0, releasingAt: 0 };
      await work.lease(key, body, times);
      return times;
    },
    roundTrips: libraryCounts(deps),
    redisCommands: () => 0,
    async close() {},
  };
}

export function rowLockDesign(deps: DesignDeps): LockDesign {
  return {
    id: 'row-lock',
    // the transaction + the locking UPDATE (token bump) + the audit row INSERT in the commit + critical section
    usefulStatements: ROW_LOCK_TRANSACTION_STATEMENTS + 1 + 1 + CRITICAL_SECTION,
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare() {},
    async hold(key, _slot, body) {
      const times = { acquiredAt: 0, releasingAt: 0 };
      await deps.locks.withLock(
        key,
        async (handle) => {
          times.acquiredAt = hostNow();
          await body(managerQuery(handle.manager!));
          times.releasingAt = hostNow();
        },
        { strategy: 'row-lock', timeoutMs: TIMEOUT_MS },
      );
      return times;
    },
    roundTrips: libraryCounts(deps),
    redisCommands: () => 0,
    async close() {},
  };
}
