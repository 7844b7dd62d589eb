/**
 * What users pick instead of a database lock library: node-redlock on a local Redis (default
 * settings), and the naive lock table (INSERT a unique row to lock, DELETE it to unlock, retry
 * every 50 ms). Both run the critical section on the caller's own connection.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { hostNow } from '../stats.js';
import { countedQuery, type DesignDeps, type LockDesign } from './types.js';

const ER_DUP_ENTRY = 1062;
const ER_LOCK_WAIT_TIMEOUT = 1205;
const ER_LOCK_DEADLOCK = 1213;
/** The naive lock treats any failed INSERT as "not acquired"; these are the ones contention produces. */
const NOT_ACQUIRED = new Set([ER_DUP_ENTRY, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT]);

export function naiveTableDesign(deps: DesignDeps): LockDesign {
  const counter = { sent: 0 };
  return {
    id: 'naive-table',
    usefulStatements: 2 + 2, // INSERT, DELETE + critical section
    usefulRedisCommands: 0,
    handoffRoundTrips: 0,
    gaveUp: 0,
    async prepare() {},
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      for (;;) {
        try {
          await query('INSERT INTO bench_naive_lock (lock_name, holder) VALUES (?, ?)', [key, deps.holder]);
          break;
        } catch (error) {
          // Concurrent INSERT/DELETE of one unique key also deadlocks now and then (next-key
          // locks on the unique index): "not acquired" as well.
          if (!NOT_ACQUIRED.has((error as { errno?: number }).errno ?? 0)) throw error;
          await sleep(50);
        }
      }
      const acquiredAt = hostNow();
      let releasingAt = acquiredAt;
      try {
        await body(query);
      } finally {
        releasingAt = hostNow();
        for (let attempt = 1; ; attempt++) {
          try {
            await query('DELETE FROM bench_naive_lock WHERE lock_name = ?', [key]);
            break;
          } catch (error) {
            if ((error as { errno?: number }).errno !== ER_LOCK_DEADLOCK || attempt >= 10) throw error;
          }
        }
      }
      return { acquiredAt, releasingAt };
    },
    roundTrips: () => counter.sent,
    redisCommands: () => 0,
    async close() {},
  };
}

/** node-redlock 4 on the local Redis, default settings (10 retries, 200 ms delay, 100 ms jitter). */
export async function redlockDesign(deps: DesignDeps): Promise<LockDesign> {
  const { Redis } = await import('ioredis');
  const { default: Redlock } = await import('redlock');
  const client = new Redis(deps.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  const redlock = new Redlock([client]);
  const counter = { sent: 0 };
  let commands = 0;
  let gaveUp = 0;
  return {
    id: 'redlock',
    usefulStatements: 2, // the critical section only
    usefulRedisCommands: 2, // SET NX PX, the unlock script
    handoffRoundTrips: 0,
    get gaveUp() {
      return gaveUp;
    },
    async prepare() {},
    async hold(key, slot, body) {
      const query = countedQuery(await deps.slots.get(slot), counter);
      let lock;
      for (;;) {
        try {
          lock = await redlock.lock(key, 10_000);
          commands += lock.attempts;
          break;
        } catch (error) {
          if (!(error instanceof Redlock.LockError)) throw error;
          // Retries exhausted (11 tries): a real caller would report failure; the bench counts it
          // and keeps waiting, so its wait includes the lost tries.
          gaveUp++;
          commands += 11;
        }
      }
      const acquiredAt = hostNow();
      let releasingAt = acquiredAt;
      try {
        await body(query);
      } finally {
        releasingAt = hostNow();
        commands++;
        await lock.unlock();
      }
      return { acquiredAt, releasingAt };
    },
    roundTrips: () => counter.sent,
    redisCommands: () => commands,
    async close() {
      client.disconnect();
    },
  };
}
