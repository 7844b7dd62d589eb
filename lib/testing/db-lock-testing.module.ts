import { type DynamicModule, Module } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { DB_LOCK_OPTIONS, DEFAULT_DATA_SOURCE_NAME } from '../db-lock.constants.js';
import type { DbLockRegistration } from '../db-lock.module-definition.js';
import { type DbLockModuleOptions, describe, type ResolvedDbLockOptions } from '../db-lock.options.js';
import { resolveOptions } from '../db-lock.options-resolve.js';
import { getLockServiceToken } from '../db-lock.tokens.js';
import { DbLockError } from '../errors/db-lock.error.js';
import { DbLockOptionsError } from '../errors/db-lock-options.error.js';
import { LockService } from '../lock.service.js';
import { useBackend } from '../lock-service.backend.js';
import { inMemoryBackend } from './in-memory-backend.js';

/** Options of `DbLockTestingModule.forRoot()`: the lock options of `DbLockModule.forRoot()`, plus what a test supplies. */
export interface DbLockTestingOptions extends DbLockModuleOptions, DbLockRegistration {
  /**
   * The EntityManager that `lockService.manager` hands out inside a fenced locked call (a lock
   * decorator with `transaction: 'requires-new'`): a test double or a real one. Default: none;
   * `lockService.manager` then throws a DbLockError saying that this option is missing.
   */
  manager?: EntityManager;
}

const TESTING_KEYS = new Set(['manager', 'dataSourceName', 'isGlobal']);

/**
 * Provides an in-memory `LockService` for unit tests, under the same injection token as
 * `DbLockModule`: injected services and the lock decorators work unchanged, with no database.
 * Inside one process it keeps every guarantee of the real service: exclusion, read/write with
 * writer preference, reentrancy, all-or-nothing keys, timeouts and `onLocked: 'skip'`, strictly
 * increasing fencing tokens, signals and events. Nothing is shared between processes, and there
 * is no transaction: a fenced call runs with the `manager` given here.
 */
@Module({})
export class DbLockTestingModule {
  /** The in-memory LockService (global unless `isGlobal: false`). Options are validated at bootstrap, as in DbLockModule. */
  static forRoot(options: DbLockTestingOptions = {}): DynamicModule {
    if (typeof options !== 'object' || options === null || Array.isArray(options))
      throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`], 'DbLockTestingModule.forRoot() arguments');
    const { manager, dataSourceName = DEFAULT_DATA_SOURCE_NAME, isGlobal = true } = options;
    const problems: string[] = [];
    if (manager !== undefined && (typeof manager !== 'object' || manager === null))
      problems.push(`manager must be an EntityManager, got ${describe(manager)}`);
    if (typeof dataSourceName !== 'string' || dataSourceName.length === 0)
      problems.push(`dataSourceName must be a non-empty string, got ${describe(dataSourceName)}`);
    if (typeof isGlobal !== 'boolean') problems.push(`isGlobal must be a boolean, got ${describe(isGlobal)}`);
    if (problems.length > 0) throw new DbLockOptionsError(problems, 'DbLockTestingModule.forRoot() arguments');
    const lockOptions = Object.fromEntries(Object.entries(options).filter(([key]) => !TESTING_KEYS.has(key)));
    const token = getLockServiceToken(dataSourceName);
    return {
      module: DbLockTestingModule,
      global: isGlobal,
      providers: [
        { provide: DB_LOCK_OPTIONS, useFactory: () => resolveOptions(lockOptions) },
        {
          provide: token,
          useFactory: (resolved: ResolvedDbLockOptions) => {
            const service = new LockService(resolved, manager?.connection ?? noDataSource(), dataSourceName);
            useBackend(service, inMemoryBackend(manager));
            return service;
          },
          inject: [DB_LOCK_OPTIONS],
        },
      ],
      exports: [token, DB_LOCK_OPTIONS],
    };
  }
}

/** `lockService.dataSource` when the test gave no EntityManager: any use says why there is none. */
function noDataSource(): DataSource {
  return new Proxy({} as DataSource, {
    get(_target, property) {
      if (property === 'then' || typeof property === 'symbol') return undefined;
      throw new DbLockError(
        `DbLockTestingModule runs without a database: lockService.dataSource.${property} is not available (give forRoot() a manager).`,
      );
    },
  });
}
