import { hostname } from 'node:os';
import type { DataSource } from 'typeorm';
import type { LockStore, RoundTripPurpose } from '../lock-store.js';
import { LOCK_STRATEGY_NAMES } from '../../strategies/lock-strategy-name.js';
import { mysqlAdmin } from './admin.sql.js';
import { businessPoolSize } from './business-pool.js';
import { Doorbells } from './doorbells.js';
import { KnownFreeKeys } from '../known-free-keys.js';
import { LockConnectionPool } from './lock-connection-pool.js';
import { MysqlJanitorStore } from './mysql-janitor-store.js';
import { MysqlLockLog } from './mysql-lock-log.js';
import { mysqlFence, MysqlRowLockStore } from './mysql-session-store.js';
import { lockPoolOptions } from './pool-options.js';
import { detectServerFlavor } from './server-flavor.js';
import { SessionRoutineCalls } from './session-routine-calls.js';
import { MysqlSessionTransactions } from './session-transaction.js';

/** What the MySQL/MariaDB store is opened with. */
export interface MysqlStoreSettings {
  /** Every connection the store opens, at most: one renewal lane, the rest shared by grants, releases, admin, janitor and doorbells. */
  readonly poolSize: number;
  /** How long an unused doorbell is kept (a waiter gave up between tries). */
  readonly doorbellIdleMs: number;
}

/**
 * Opens the MySQL/MariaDB store: the library's pool from the DataSource's settings, the server's
 * flavour, the schema check and this process's process-lease row. Closes what it opened if any
 * step fails (missing tables, unreachable server).
 */
export async function openMysqlStore(dataSource: DataSource, settings: MysqlStoreSettings): Promise<LockStore> {
  const connection = lockPoolOptions(dataSource, settings.poolSize - 1);
  const pool = new LockConnectionPool(connection);
  try {
    const flavor = await detectServerFlavor(pool);
    const knownFree = new KnownFreeKeys();
    const log = new MysqlLockLog(pool, flavor, `${hostname()}:${process.pid}`, knownFree);
    await log.start();
    // Doorbells borrow from the shared connections, keeping one for grants and releases.
    const doorbells =
      flavor.cluster === 'none' && settings.poolSize > 2
        ? new Doorbells(pool, String(connection.database ?? ''), settings.doorbellIdleMs, settings.poolSize - 2)
        : undefined;
    const transactions = new MysqlSessionTransactions(dataSource);
    // On a multi-primary cluster the end and COMMIT stay apart (see docs/clusters.md).
    const routines = new SessionRoutineCalls(log.clustered ? new Set() : log.schema.routines, transactions);
    return {
      strategies: new Set(LOCK_STRATEGY_NAMES),
      log,
      processLease: log,
      fence: mysqlFence(transactions, knownFree, routines),
      rowLocks: new MysqlRowLockStore(log, transactions, routines),
      doorbells,
      janitor: new MysqlJanitorStore(log),
      admin: mysqlAdmin(log),
      get roundTrips(): Readonly<Record<RoundTripPurpose, number>> {
        return pool.roundTrips;
      },
      dataSourcePoolSize: () => businessPoolSize(dataSource),
      async close() {
        await doorbells?.close();
        await log.stop();
        await pool.close();
      },
    };
  } catch (error) {
    await pool.close();
    throw error;
  }
}
