/**
 * This library's designs: lease acquire/release (critical section on the caller's own connection),
 * lease through `@WriteLock` (critical section in the fenced transaction), and row-lock through
 * `withLock` (critical section in the locking transaction, through `handle.manager`). Their
 * client-side count is the library's own (`stats().roundTripsBy.locks`, doorbells included) plus
 * what goes through the DataSource (the row-lock and fenced transactions) and the caller's connection.
 */
import { afterBellClaimPlan } from '../../../lib/store/mysql/fast-grant.sql.js';
import { hostNow } from '../stats.js';
import { DecoratedWork, managerQuery } from './decorated.js';
import { benchGrantInput } from './grant-input.js';
import { countedQuery, type DesignDeps, type LockDesign, timedHold } from './types.js';

/** Generous budget: a timeout in the bench would be a finding, reported as an error, not hidden. */
const TIMEOUT_MS = 120_000;

/**
 * Client statements of a contended hold's grant: those that follow its doorbell wait in the same
 * round trip (the log row's INSERT claiming the next token: the after-bell grant), and the read of
 * the wait's result (which reads the token too); the wait's GET_LOCK is counted with the bell. Counted
 * from the library's own plan, so that a change there changes this too: declaring more than is sent
 * would hide as many waiter statements in the server's count.
 */
export function grantStatements(): number {
  return afterBellClaimPlan(benchGrantInput('k', { claims: true }), Date.now).statements.length + 1;
}

/**
 * A fenced 'requires-new' transaction: SET TRANSACTION ISOLATION LEVEL, START TRANSACTION, and the
 * CALL of the fenced-commit routine (the fence and COMMIT run inside it; the bench's migrations
 * install it).
 */
const FENCED_TRANSACTION_STATEMENTS = 3;
/** A row-lock hold's own statements: the CALL of the begin-and-take routine (START and the locking UPDATE) and that of the record-and-commit routine (the audit row and COMMIT). */
const ROW_LOCK_STATEMENTS = 2;
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
    usefulStatements: grantStatements() + 1 + BELL_STATEMENTS + CRITICAL_SECTION,
    usefulRedisCommands: 0,
    // The bell's wait rides in the grant's round trip and its ring in the release's.
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare() {},
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      const handle = await deps.locks.acquire(key, { timeoutMs: TIMEOUT_MS });
      return timedHold(
        () => body(query),
        () => handle.release(),
      );
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
    usefulStatements: grantStatements() + FENCED_TRANSACTION_STATEMENTS + BELL_STATEMENTS + CRITICAL_SECTION,
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
    // the hold's two CALLs (open and take; record and commit) + critical section
    usefulStatements: ROW_LOCK_STATEMENTS + CRITICAL_SECTION,
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
