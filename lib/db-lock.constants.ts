/** Name TypeORM gives a DataSource registered without one. */
export const DEFAULT_DATA_SOURCE_NAME = 'default';
/** Token of the module's options as given (sync value or async factory result). */
export const DB_LOCK_MODULE_OPTIONS = Symbol('DB_LOCK_MODULE_OPTIONS');
/** Token of the validated, defaulted options. */
export const DB_LOCK_OPTIONS = Symbol('DB_LOCK_OPTIONS');
/** Reflect metadata key a lock decorator sets on the method it wraps (its settings): marks the method as locked. */
export const DB_LOCK_METADATA = Symbol.for('nestjs-db-lock.metadata');
