// The only public entry point of nestjs-db-lock. Everything not exported here is internal.
export { DbLockModule, getLockServiceToken } from './db-lock.module.js';
export type { DbLockModuleAsyncOptions, DbLockOptionsFactory, DbLockRegistration } from './db-lock.module.js';
export { InjectLockService } from './decorators/inject-lock-service.decorator.js';
export { DB_LOCK_DEFAULTS, resolveOptions } from './db-lock.options.js';
export type {
  DbLockModuleOptions,
  DbLockJanitorOptions,
  EscapedWritesMode,
  ResolvedDbLockOptions,
  TransactionHostLike,
  TransactionHostOption,
} from './db-lock.options.js';
export { DB_LOCK_OPTIONS, DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
export { LockServiceRegistry } from './db-lock.registry.js';
export { LockService } from './lock.service.js';
export type { LockHandle, LockInfo, LockHolderInfo } from './core/lock-handle.js';
export type { LockOptions } from './core/lock-request.js';
export type { LockKeys, LockKeySpec } from './core/lock-key.js';
export { MAX_KEY_LENGTH, MAX_KEYS_PER_LOCK } from './core/lock-key.js';
export type { LockMode } from './core/lock-mode.js';
export type { LockStrategyName } from './core/lock-strategy-name.js';
export type { LockEvent, LockEventType, LockEventListener } from './core/lock-events.js';
export type { LockStatsSnapshot, DurationSummary, JanitorStats } from './core/lock-stats.js';
export { LockEntity, LockLogEntity, LockProcessEntity, RowLockEntity, DB_LOCK_ENTITIES } from './entities/index.js';
export { CreateDbLockTables1763769600000, AddProcessLeasesAndRowLocks1795392000000, DB_LOCK_MIGRATIONS } from './migrations/index.js';
export { LockStatus } from './mysql/sql.js';
export * from './errors/index.js';
// Lock decorators and locked calls.
export { DistributedLock, ReadLock, WriteLock } from './decorators/distributed-lock.decorator.js';
export type { ReadWriteLockOptions } from './decorators/distributed-lock.decorator.js';
export { getLockMetadata } from './decorators/lock-decorator.js';
export type {
  DistributedLockOptions,
  LockDecoratorMetadata,
  LockMethodDecorator,
  LockableMethod,
  SkippingLockMethodDecorator,
  SkipNeedsUndefined,
} from './decorators/lock-decorator.js';
export type { LockKeySource } from './decorators/lock-key-template.js';
export type { LockIsolationLevel, LockTransactionMode, OnLockedPolicy, RunLockedOptions } from './core/locked-call.options.js';
// Liveness and admin.
export type { JanitorReport } from './lock-log/janitor.js';
export type { ListLocksOptions, LockList, LockListEntry, ForcedReleaseHolder } from './lock-log/admin.js';
