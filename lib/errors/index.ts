export { DbLockError } from './db-lock.error.js';
export { LockTimeoutError } from './lock-timeout.error.js';
export { LockLostError } from './lock-lost.error.js';
export { InvalidLockKeyError } from './invalid-lock-key.error.js';
export { DbLockOptionsError } from './db-lock-options.error.js';
export { DbLockNotInitializedError } from './db-lock-not-initialized.error.js';
export { LockUpgradeError } from './lock-upgrade.error.js';
export { DbLockSchemaError } from './db-lock-schema.error.js';
