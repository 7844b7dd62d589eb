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

/**
 * A row-lock hold's own statements sent by hand on a plain connection, the floor of the row-lock
 * strategy under contention: the key's row of db_lock locked and its token bumped, the critical
 * section, the audit row, COMMIT (which hands the row over).
 */
export function rowLockByHandDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  return {
    id: 'row-lock-hand',
    usefulStatements: 4 + 2, // START TRANSACTION, the locking UPDATE, INSERT audit row, COMMIT + critical section
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare(key) {
      const query = countedQuery(await deps.slots.get(0), { sent: 0 });
      await query('INSERT IGNORE INTO db_lock (lock_key) VALUES (?)', [Buffer.from(key)]);
    },
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      const bytes = Buffer.from(key);
      await query('START TRANSACTION');
      try {
        await query('UPDATE db_lock SET fencing_token = LAST_INSERT_ID(fencing_token + 1), last_granted_at = UTC_TIMESTAMP(6) WHERE lock_key = ?', [
          bytes,
        ]);
        const acquiredAt = hostNow();
        await body(query);
        const releasingAt = hostNow();
        await query(
          'INSERT INTO db_lock_log (lock_key, mode, owner, holder, strategy, fencing_token, status, lease_ms, acquired_at, expires_at, ended_at, wait_ms, hold_ms) ' +
            "VALUES (?, 'write', UUID(), 'bench:hand', 'row-lock', LAST_INSERT_ID(), 'RELEASED', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 0, 0)",
          [bytes],
        );
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
