import type { DataSource } from 'typeorm';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import type { LockStore } from './lock-store.js';

/** What every store is opened with. */
export interface StoreSettings {
  /** Connections the store may open per process, all told. */
  readonly poolSize: number;
  readonly doorbellIdleMs: number;
}

/**
 * The stores by the TypeORM DataSource types they serve: a new database adds its folder and one line
 * here. Each is loaded when a DataSource of its type opens one, so an app loads only its database's
 * store and driver (a PostgreSQL app needs no mysql2).
 */
const STORES: readonly { readonly types: readonly string[]; open(dataSource: DataSource, settings: StoreSettings): Promise<LockStore> }[] = [
  {
    types: ['mysql', 'mariadb'],
    open: async (dataSource, settings) => (await import('./mysql/mysql-lock-store.js')).openMysqlStore(dataSource, settings),
  },
  {
    types: ['postgres'],
    open: async (dataSource, settings) => (await import('./postgres/open-postgres-store.js')).openPostgresStore(dataSource, settings),
  },
];

/** Opens the store for the DataSource's database. */
export function openStore(dataSource: DataSource, settings: StoreSettings): Promise<LockStore> {
  const type = String(dataSource.options.type);
  const store = STORES.find((s) => s.types.includes(type));
  if (!store) {
    const supported = STORES.flatMap((s) => s.types.map((t) => `'${t}'`)).join(' or ');
    return Promise.reject(new DbLockOptionsError([`DataSource type must be ${supported}, got '${type}'`]));
  }
  return store.open(dataSource, settings);
}
