import type { MixedList } from 'typeorm';
import { LockEntity } from './lock.entity.js';
import { LockLogEntity } from './lock-log.entity.js';
import { LockProcessEntity } from './lock-process.entity.js';
import { RowLockEntity } from './row-lock.entity.js';

export { LockEntity, LockLogEntity, LockProcessEntity, RowLockEntity };

/**
 * For apps that list their entities by hand: `entities: [...mine, ...DB_LOCK_ENTITIES]`, or
 * assigned directly to `DataSourceOptions.entities`. A plain array type (TypeORM's options do not
 * accept readonly arrays), frozen at run time.
 *
 * Each entity is `synchronize: false`: the tables come from DB_LOCK_MIGRATIONS only. TypeORM's
 * schema diff (`synchronize`, `migration:generate`, `schema:log`) leaves them alone, so an app may
 * use those tools for its own tables beside them. The diff could not read them anyway (the claim
 * column is generated, and TypeORM looks up generated columns in a metadata table no migration
 * fills), and a `synchronize` that dropped the claim index could hand a key's token out again.
 *
 * Their column types are ones TypeORM's metadata check accepts on MySQL and on PostgreSQL alike (it
 * checks them against the DataSource's driver at start-up, `synchronize: false` or not): keys are
 * declared `varchar` in the binary character set (on MySQL that is VARBINARY, so a schema made
 * from the entities by an older version's synchronize is still right) and times `Date`; the
 * migrations create the real columns (VARBINARY and DATETIME(6) on MySQL, bytea and timestamptz
 * on PostgreSQL). A repository read gets what the driver returns: Buffer keys and Date times.
 */
export const DB_LOCK_ENTITIES: Function[] = Object.freeze([LockEntity, LockLogEntity, LockProcessEntity, RowLockEntity]) as unknown as Function[];

// Compile-time check that the list fits TypeORM's `entities` option.
DB_LOCK_ENTITIES satisfies MixedList<Function>;
