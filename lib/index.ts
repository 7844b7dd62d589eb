// The only public entry point of nestjs-db-lock. Everything not exported here is internal.
export { DbLockModule, getLockServiceToken } from './db-lock.module.js';
export type { DbLockModuleAsyncOptions, DbLockOptionsFactory, DbLockRegistration } from './db-lock.module.js';
export { InjectLockService } from './decorators/inject-lock-service.decorator.js';
export { DB_LOCK_DEFAULTS } from './db-lock.options.js';
export { resolveOptions } from './db-lock.options-resolve.js';
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
export type { HolderMode, LockMode } from './core/lock-mode.js';
export type { LockStrategyName } from './strategies/lock-strategy-name.js';
export type { LockEvent, LockEventType, LockEventListener } from './core/lock-events.js';
export { DB_LOCK_METER_NAME, DB_LOCK_INSTRUMENTS } from './core/lock-metrics.js';
export { UNNAMED_LOCK } from './core/lock-request.js';
export type { LockStatsSnapshot, DurationSummary, JanitorStats } from './core/lock-stats.js';
export { LockEntity, LockLogEntity, LockProcessEntity, RowLockEntity, DB_LOCK_ENTITIES } from './entities/index.js';
export {
  CreateDbLockTables1763769600000,
  AddProcessLeasesAndRowLocks1795392000000,
  AddSemaphores1795996800000,
  AddRowLockFastPath1796342400000,
  AddCommitRoutines1796947200000,
  AddBeginAndTakeRoutine1797552000000,
  AddTokenClaims1798156800000,
  DropLogGrantTimeIndex1798761600000,
  AddLiveHolderIndex1799366400000,
  DB_LOCK_MIGRATIONS,
} from './migrations/index.js';
export { LockStatus } from './core/lock-status.js';
export * from './errors/index.js';
// Lock decorators and locked calls.
export { DistributedLock, ReadLock, WriteLock } from './decorators/distributed-lock.decorator.js';
export type { ReadWriteLockOptions } from './decorators/distributed-lock.decorator.js';
export { Semaphore } from './decorators/semaphore.decorator.js';
export type { SemaphoreDecoratorOptions, SemaphoreKeySource } from './decorators/semaphore.decorator.js';
export { MAX_SEMAPHORE_LIMIT } from './core/semaphore-request.js';
export type { PermitWork, SemaphoreHandle, SemaphoreOptions, SemaphoreRunOptions } from './core/semaphore-request.js';
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
export type { JanitorReport } from './background/janitor.js';
export type { ListLocksOptions, LockList, LockListEntry, ForcedReleaseHolder } from './store/admin.js';
