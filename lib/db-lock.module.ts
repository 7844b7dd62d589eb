import { type DynamicModule, Module, type Provider } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { DB_LOCK_MODULE_OPTIONS, DB_LOCK_OPTIONS, DEFAULT_DATA_SOURCE_NAME } from './db-lock.constants.js';
import { dbLockModuleBase, type DbLockModuleAsyncOptions, type DbLockRegistration, type ResolvedRegistration } from './db-lock.module-definition.js';
import { type DbLockModuleOptions, type ResolvedDbLockOptions, describe } from './db-lock.options.js';
import { resolveOptions } from './db-lock.options-resolve.js';
import { getLockServiceToken } from './db-lock.tokens.js';
import { DB_LOCK_ENTITIES } from './entities/index.js';
import { DbLockDataSourceNotFoundError } from './errors/db-lock-data-source.error.js';
import { DbLockOptionsError } from './errors/db-lock-options.error.js';
import { dataSourceNames } from './integrations/discovery.js';
import { attachIntegrations } from './integrations/fence-integrations.js';
import { LockService } from './lock.service.js';

export type { DbLockModuleAsyncOptions, DbLockOptionsFactory, DbLockRegistration } from './db-lock.module-definition.js';
export { getLockServiceToken } from './db-lock.tokens.js';

/**
 * `DbLockModule.forRoot(options)` / `forRootAsync({ useFactory | useClass | useExisting, inject,
 * imports })`, built with Nest's ConfigurableModuleBuilder. Registers the lock entities on the
 * DataSource and provides LockService (globally unless `isGlobal: false`). Options are validated
 * at bootstrap by one resolver; registration fields when the module is built.
 */
@Module({})
export class DbLockModule extends dbLockModuleBase(completeDefinition) {
  /** Registers the lock entities on the DataSource and provides LockService. Options are validated at bootstrap. */
  static override forRoot(options: DbLockModuleOptions & DbLockRegistration = {}): DynamicModule {
    if (typeof options !== 'object' || options === null || Array.isArray(options))
      throw new DbLockOptionsError([`options must be an object, got ${describe(options)}`], 'DbLockModule.forRoot() arguments');
    // An own '__proto__' key (JSON.parse makes one): Nest copies the options by assignment, which would make it their prototype.
    if (Object.prototype.hasOwnProperty.call(options, '__proto__'))
      throw new DbLockOptionsError([`unknown option '__proto__'`], 'DbLockModule.forRoot() arguments');
    checkRegistration(options);
    return super.forRoot(options);
  }

  /**
   * Same as forRoot, with options from a factory (`useFactory` + `inject`, e.g. ConfigService),
   * or from a class implementing DbLockOptionsFactory (`useClass`, or `useExisting` for a provider
   * the app already has). `isGlobal` and `dataSourceName` stay static fields here.
   */
  static override forRootAsync(options: DbLockModuleAsyncOptions): DynamicModule {
    const problems: string[] = [];
    if (typeof options !== 'object' || options === null) problems.push(`options must be an object, got ${describe(options)}`);
    else {
      const forms = (['useFactory', 'useClass', 'useExisting'] as const).filter((form) => options[form] !== undefined);
      if (forms.length !== 1)
        problems.push(`forRootAsync needs exactly one of useFactory, useClass or useExisting, got ${forms.length === 0 ? 'none' : forms.join(', ')}`);
      else if (typeof options[forms[0]!] !== 'function')
        problems.push(`${forms[0]} must be a function or class, got ${describe(options[forms[0]!])}`);
      if (options.inject !== undefined && !Array.isArray(options.inject)) problems.push(`inject must be an array, got ${describe(options.inject)}`);
    }
    if (problems.length > 0) throw new DbLockOptionsError(problems, 'DbLockModule.forRootAsync() arguments');
    checkRegistration(options);
    return super.forRootAsync(options);
  }
}

/** Adds to the builder's definition (which provides the raw options) everything the lock needs. */
function completeDefinition(definition: DynamicModule, registration: ResolvedRegistration): DynamicModule {
  const name = registration.dataSourceName;
  const typeOrmName = name === DEFAULT_DATA_SOURCE_NAME ? undefined : name;
  const serviceToken = getLockServiceToken(name);
  // forFeature registers the entities for autoLoadEntities when it is called. Its repository
  // providers are not imported: the library never uses them, and with no DataSource of that name
  // they would fail first with Nest's dependency error instead of the one below naming both names.
  TypeOrmModule.forFeature([...DB_LOCK_ENTITIES], typeOrmName);
  const providers: Provider[] = [
    ...(definition.providers ?? []),
    { provide: DB_LOCK_OPTIONS, useFactory: (raw: unknown) => resolveOptions(raw), inject: [DB_LOCK_MODULE_OPTIONS] },
    {
      provide: serviceToken,
      useFactory: (resolved: ResolvedDbLockOptions, dataSource: DataSource | undefined, discovery: DiscoveryService) => {
        if (!dataSource) throw new DbLockDataSourceNotFoundError(name, dataSourceNames(discovery));
        const service = new LockService(resolved, dataSource, name);
        attachIntegrations(service, discovery);
        return service;
      },
      inject: [DB_LOCK_OPTIONS, { token: getDataSourceToken(typeOrmName), optional: true }, DiscoveryService],
    },
  ];
  return {
    ...definition,
    global: registration.isGlobal,
    imports: [...(definition.imports ?? []), DiscoveryModule],
    providers,
    exports: [serviceToken, DB_LOCK_OPTIONS],
  };
}

function checkRegistration(registration: DbLockRegistration): void {
  const problems: string[] = [];
  // Only an absent name means the default DataSource: null is refused, as the testing module refuses it.
  const name = registration.dataSourceName === undefined ? DEFAULT_DATA_SOURCE_NAME : registration.dataSourceName;
  if (typeof name !== 'string' || name.length === 0) problems.push(`dataSourceName must be a non-empty string, got ${describe(name)}`);
  if (registration.isGlobal !== undefined && typeof registration.isGlobal !== 'boolean')
    problems.push(`isGlobal must be a boolean, got ${describe(registration.isGlobal)}`);
  if (problems.length > 0) throw new DbLockOptionsError(problems);
}
