// The `nestjs-db-lock/testing` entry point: an in-memory LockService for unit tests.
export { DbLockTestingModule } from './db-lock-testing.module.js';
export type { DbLockTestingOptions } from './db-lock-testing.module.js';
