import { type DynamicModule, Module, type ModuleMetadata, type Provider } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { DB_LOCK_MODULE_OPTIONS, DB_LOCK_OPTIONS, DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
import { type DbLockModuleOptions, type ResolvedDbLockOptions, describe, resolveOptions } from './db-lock.options.js';
import { DB_LOCK_ENTITIES } from './entities/index.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { LockService } from './lock.service.js';

/**
 * Registration-time settings: they decide providers and tokens, so they are static fields,
 * never something an async factory returns later.
 */
export interface DbLockRegistration {
  /** Name of the TypeORM DataSource holding the lock tables. Default 'default'. */
  dataSourceName?: string;
  /** Register LockService globally. Default false. */
  isGlobal?: boolean;
}

export interface DbLockModuleAsyncOptions extends DbLockRegistration, Pick<ModuleMetadata, 'imports'> {
  useFactory: (...args: any[]) => DbLockModuleOptions | Promise<DbLockModuleOptions>;
  inject?: any[];
}

/** Token under which the LockService for a DataSource is provided: the class itself for the default one. */
export function getLockServiceToken(dataSourceName: string = DEFAULT_DATA_SOURCE_NAME): string | typeof LockService {
  return dataSourceName === DEFAULT_DATA_SOURCE_NAME ? LockService : `DbLockService:${dataSourceName}`;
}

@Module({})
export class DbLockModule {
  /** Registers the lock entities on the DataSource and provides LockService. Options are validated at bootstrap. */
  static forRoot(options: DbLockModuleOptions & DbLockRegistration = {}): DynamicModule {
    const { dataSourceName, isGlobal, ...lockOptions } = options;
    return DbLockModule.build({ dataSourceName, isGlobal }, { provide: DB_LOCK_MODULE_OPTIONS, useValue: lockOptions }, []);
  }

  /** Same as forRoot, with options from a factory (e.g. an injected ConfigService). */
  static forRootAsync(options: DbLockModuleAsyncOptions): DynamicModule {
    if (typeof options?.useFactory !== 'function')
      throw new DbLockOptionsError(['forRootAsync needs a useFactory function'], 'DbLockModule.forRootAsync() arguments');
    return DbLockModule.build(
      options,
      { provide: DB_LOCK_MODULE_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] },
      options.imports ?? [],
    );
  }

  private static build(registration: DbLockRegistration, optionsProvider: Provider, imports: NonNullable<ModuleMetadata['imports']>): DynamicModule {
    const name = checkRegistration(registration);
    const serviceToken = getLockServiceToken(name);
    const providers: Provider[] = [
      optionsProvider,
      { provide: DB_LOCK_OPTIONS, useFactory: (raw: unknown) => resolveOptions(raw), inject: [DB_LOCK_MODULE_OPTIONS] },
      {
        provide: serviceToken,
        useFactory: (resolved: ResolvedDbLockOptions, dataSource: DataSource) => new LockService(resolved, dataSource, name),
        inject: [DB_LOCK_OPTIONS, getDataSourceToken(name === DEFAULT_DATA_SOURCE_NAME ? undefined : name)],
      },
    ];
    return {
      module: DbLockModule,
      global: registration.isGlobal === true,
      imports: [...imports, TypeOrmModule.forFeature([...DB_LOCK_ENTITIES], name === DEFAULT_DATA_SOURCE_NAME ? undefined : name)],
      providers,
      exports: [serviceToken, DB_LOCK_OPTIONS],
    };
  }
}

function checkRegistration(registration: DbLockRegistration): string {
  const problems: string[] = [];
  const name = registration.dataSourceName ?? DEFAULT_DATA_SOURCE_NAME;
  if (typeof name !== 'string' || name.length === 0)
    problems.push(`dataSourceName must be a non-empty string, got ${describe(name)}`);
  if (registration.isGlobal !== undefined && typeof registration.isGlobal !== 'boolean')
    problems.push(`isGlobal must be a boolean, got ${describe(registration.isGlobal)}`);
  if (problems.length > 0) throw new DbLockOptionsError(problems);
  return name;
}
