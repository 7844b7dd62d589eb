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
 */
export const DB_LOCK_ENTITIES: Function[] = Object.freeze([LockEntity, LockLogEntity, LockProcessEntity, RowLockEntity]) as unknown as Function[];

/** Compile-time check that the list fits TypeORM's `entities` option. */
const _fits: MixedList<Function> = DB_LOCK_ENTITIES;
