import { hostname } from 'node:os';
import type { DataSource } from 'typeorm';
import { KnownFreeKeys } from '../known-free-keys.js';
import type { LockStore, RoundTripPurpose } from '../lock-store.js';
import type { StoreSettings } from '../open-store.js';
import { pgAdmin } from './pg-admin.js';
import { PgJanitorStore } from './pg-janitor.js';
import { PgDoorbells } from './pg-doorbells.js';
import { pgFence } from './pg-fence.js';
import { PgLockLog } from './pg-lock-log.js';
import { pgPoolConfig, PgLockPool } from './pg-pool.js';
import { PgRowLockStore } from './pg-row-locks.js';
import { PgSessionTransactions } from './pg-session.js';

/** pg's pool size when nothing sets `max`. */
const PG_DEFAULT_POOL_SIZE = 10;

/**
 * Opens the PostgreSQL store: the library's pool from the DataSource's settings, the schema check
 * and this process's process-lease row. Both strategies are served; doorbells (advisory locks)
 * borrow at most `poolSize - 2` of the pool's connections, as on MySQL. Closes what it opened if a
 * step fails.
 */
export async function openPostgresStore(dataSource: DataSource, settings: StoreSettings): Promise<LockStore> {
  const pool = new PgLockPool(pgPoolConfig(dataSource, Math.max(1, settings.poolSize)));
  try {
    const knownFree = new KnownFreeKeys();
    const log = new PgLockLog(pool, `${hostname()}:${process.pid}`, knownFree);
    await log.start();
    const doorbells = settings.poolSize > 2 ? new PgDoorbells(pool, settings.doorbellIdleMs, settings.poolSize - 2) : undefined;
    const transactions = new PgSessionTransactions(dataSource, pool);
    return {
      strategies: new Set(['lease', 'row-lock']),
      log,
      processLease: log,
      fence: pgFence(transactions, knownFree),
      rowLocks: new PgRowLockStore(log, transactions),
      doorbells,
      janitor: new PgJanitorStore(log),
      admin: pgAdmin(log),
      get roundTrips(): Readonly<Record<RoundTripPurpose, number>> {
        return pool.roundTrips;
      },
      dataSourcePoolSize: () => appPoolSize(dataSource),
      async close() {
        await log.stop();
        await pool.close();
      },
    };
  } catch (error) {
    await pool.close();
    throw error;
  }
}

/** Size of the app's DataSource pool: `extra.max` wins over `poolSize`, as in TypeORM's PostgresDriver, else pg's default. */
function appPoolSize(dataSource: DataSource): number {
  const options = dataSource.options as { poolSize?: unknown; extra?: { max?: unknown } };
  const configured = options.extra?.max ?? options.poolSize;
  return typeof configured === 'number' && configured > 0 ? configured : PG_DEFAULT_POOL_SIZE;
}
