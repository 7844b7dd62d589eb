/**
 * The blocking database locks users write by hand, each waiting caller parked in the server on a
 * connection of its own: a transaction holding a row with `SELECT … FOR UPDATE` (COMMIT releases;
 * the critical section runs in that transaction, as such code is written), and the named lock
 * `GET_LOCK` (the critical section on the same connection). Both are the floors the library's
 * contention figures are compared with.
 */
import { hostNow } from '../stats.js';
import { countedQuery, type DesignDeps, type LockDesign } from './types.js';

export function forUpdateDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  return {
    id: 'for-update',
    usefulStatements: 3 + 2, // START TRANSACTION, SELECT … FOR UPDATE, COMMIT + critical section
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare(key) {
      const query = countedQuery(await deps.slots.get(0), { sent: 0 });
      await query('INSERT IGNORE INTO bench_row_lock (k) VALUES (?)', [key]);
    },
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      await query('START TRANSACTION');
      try {
        const rows = await query('SELECT k FROM bench_row_lock WHERE k = ? FOR UPDATE', [key]);
        if (rows.length !== 1) throw new Error(`bench_row_lock has no row '${key}'`);
        const acquiredAt = hostNow();
        await body(query);
        const releasingAt = hostNow();
        await query('COMMIT');
        return { acquiredAt, releasingAt };
      } catch (error) {
        await query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    },
    roundTrips: () => counter.sent,
    redisCommands: () => 0,
    async close() {},
  };
}

export function getLockDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  return {
    id: 'get-lock',
    usefulStatements: 2 + 2, // GET_LOCK, RELEASE_LOCK + critical section
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare() {},
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      for (;;) {
        const rows = await query('SELECT GET_LOCK(?, 60) AS got', [key]);
        if (Number(rows[0]!.got) === 1) break;
      }
      const acquiredAt = hostNow();
      let releasingAt = acquiredAt;
      try {
        await body(query);
      } finally {
        releasingAt = hostNow();
        await query('SELECT RELEASE_LOCK(?)', [key]);
      }
      return { acquiredAt, releasingAt };
    },
    roundTrips: () => counter.sent,
    redisCommands: () => 0,
    async close() {},
  };
}
