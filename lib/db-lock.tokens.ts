import { DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
import { LockService } from './lock.service.js';

/**
 * Token under which the LockService for a DataSource is provided: the class itself for the
 * default DataSource (so `constructor(locks: LockService)` works), `'DbLockService:<name>'` for
 * a named one (inject it with `@InjectLockService(name)`).
 */
export function getLockServiceToken(dataSourceName: string = DEFAULT_DATA_SOURCE_NAME): string | typeof LockService {
  return dataSourceName === DEFAULT_DATA_SOURCE_NAME ? LockService : `DbLockService:${dataSourceName}`;
}
