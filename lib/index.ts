// The only public entry point of nestjs-db-lock. Everything not exported here is internal.
export { DbLockModule, getLockServiceToken } from './db-lock.module.js';
export type { DbLockModuleAsyncOptions, DbLockRegistration } from './db-lock.module.js';
export { DB_LOCK_DEFAULTS, resolveOptions } from './db-lock.options.js';
export type { DbLockModuleOptions, DbLockJanitorOptions, ResolvedDbLockOptions } from './db-lock.options.js';
export { DB_LOCK_OPTIONS, DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
export { LockServiceRegistry } from './db-lock.registry.js';
export { LockService } from './lock.service.js';
export type { LockHandle, LockInfo, LockHolderInfo } from './lock-handle.js';
export type { LockOptions } from './lock-request.js';
export type { LockKeys, LockKeySpec } from './lock-key.js';
export { MAX_KEY_LENGTH, MAX_KEYS_PER_LOCK } from './lock-key.js';
export type { LockMode } from './lock-mode.js';
export type { LockEvent, LockEventType, LockEventListener } from './events/lock-events.js';
export type { LockStatsSnapshot, DurationSummary } from './observability/lock-stats.js';
export { LockEntity, LockLogEntity, DB_LOCK_ENTITIES } from './entities/index.js';
export { CreateDbLockTables1763769600000, DB_LOCK_MIGRATIONS } from './migrations/create-db-lock-tables.migration.js';
export { LockStatus } from './storage/lock-tables.js';
export * from './errors/index.js';
// Lock decorators and locked calls (issue 3).
export { DistributedLock, ReadLock, WriteLock } from './decorators/distributed-lock.decorator.js';
export type { ReadWriteLockOptions } from './decorators/distributed-lock.decorator.js';
export { getLockMetadata } from './decorators/lock-decorator.js';
export type {
  DistributedLockOptions,
  LockDecoratorMetadata,
  LockMethodDecorator,
  LockableMethod,
  SkippingLockMethodDecorator,
} from './decorators/lock-decorator.js';
export type { LockKeySource } from './decorators/lock-key-template.js';
export type { LockIsolationLevel, LockTransactionMode, OnLockedPolicy, RunLockedOptions } from './transaction/locked-call.options.js';
// Liveness and admin (issue 5)
export type { JanitorReport } from './janitor/lock-janitor.js';
export type { JanitorStats } from './observability/lock-stats.js';
export type { ListLocksOptions, LockList, LockListEntry, ForcedReleaseHolder } from './admin/lock-admin.js';
