import { Inject } from '@nestjs/common';
import { getLockServiceToken } from '../db-lock.tokens.js';

/**
 * Injects the LockService of a DbLockModule: `@InjectLockService('billing') locks: LockService`
 * for the module registered with `dataSourceName: 'billing'`. Without a name, the default
 * DataSource's (the same as injecting `LockService` by its class). A shorthand for
 * `@Inject(getLockServiceToken(name))`.
 */
export function InjectLockService(dataSourceName?: string): PropertyDecorator & ParameterDecorator {
  return Inject(getLockServiceToken(dataSourceName));
}
